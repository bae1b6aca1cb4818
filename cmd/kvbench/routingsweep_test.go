package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvsim"
)

// Test_RoutingSweepSmoke is a tiny sweep on a generated trace: two
// speeds, both fleets, two baselines (no kvselect cluster, so it takes
// well under a second), checking the tables, the JSON's points and the
// picture.
func Test_RoutingSweepSmoke(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "tenants.jsonl")
	var stderr bytes.Buffer
	if err := traceGen([]string{"-pattern", "tenants", "-requests", "60", "-out", trace}, io.Discard, &stderr); err != nil {
		t.Fatalf("trace-gen: %v", err)
	}
	if !strings.Contains(stderr.String(), "60 requests") {
		t.Fatalf("trace-gen says %q", stderr.String())
	}
	out, svg := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "sweep.svg")
	var stdout bytes.Buffer
	args := []string{"-trace", trace, "-workers", "4", "-cache-blocks", "2048", "-speeds", "8,2", "-strategies", "round-robin,least-loaded",
		"-every", "2", "-out", out, "-svg", svg}
	if err := routingSweep(args, &stdout, io.Discard); err != nil {
		t.Fatalf("sweep: %v\n%s", err, stdout.String())
	}
	var doc struct {
		Speeds   []float64 `json:"speeds"`
		Requests int       `json:"requests"`
		Points   []struct {
			Fleet      string
			Speed      float64
			Offered    float64 `json:"offered_rps"`
			Strategies []struct {
				Name    string
				Goodput kvsim.Goodput
				Figures kvsim.Figures
			}
		}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Requests != 30 || !slices.Equal(doc.Speeds, []float64{2, 8}) || len(doc.Points) != 4 {
		t.Fatalf("%d requests, speeds %v, %d points; want 30 (every 2nd of 60), [2 8], 4", doc.Requests, doc.Speeds, len(doc.Points))
	}
	for i, p := range doc.Points {
		want := []string{"uniform", "uniform", "hetero", "hetero"}[i]
		if p.Fleet != want || len(p.Strategies) != 2 || p.Offered <= 0 {
			t.Fatalf("point %d: %+v", i, p)
		}
		for _, s := range p.Strategies {
			if s.Figures.Served != 30 || s.Goodput.BoundMs != 2000 || s.Goodput.Good > 30 {
				t.Errorf("point %d %s: %+v %+v", i, s.Name, s.Figures, s.Goodput)
			}
		}
	}
	if a, b := doc.Points[0].Offered, doc.Points[1].Offered; b < 3.9*a || b > 4.1*a {
		t.Errorf("offered load %v at 2x, %v at 8x: want 4 times", a, b)
	}
	for _, want := range []string{"uniform fleet", "hetero fleet (the last 1 of 4 engines half as fast)", "least-loaded (true engine load)", "goodput", "bound on hit rate"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	pic, err := os.ReadFile(svg)
	if err != nil || !bytes.Contains(pic, []byte("<svg")) {
		t.Fatalf("picture: %v, %d bytes", err, len(pic))
	}
}

func Test_SweepFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-speeds", "2,x"}, "-speeds"},
		{[]string{"-speeds", "0"}, "-speeds"},
		{[]string{"-fleets", "uniform,odd"}, "-fleets"},
		{[]string{"-strategies", "nope"}, "unknown"},
	} {
		if _, err := parseSweepConfig(tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tt.args, err, tt.want)
		}
	}
	c, err := parseSweepConfig(nil, io.Discard)
	if err != nil || !slices.Equal(c.speeds, []float64{2, 4, 6, 8, 12}) || !slices.Equal(c.fleets, fleetKinds) ||
		c.busyPrefillTokens != defaultSweepBusyPrefill || len(c.strategies) != len(allStrategies) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

// trace-gen writes what kvsim generates, the same for the same seed.
func Test_TraceGenCommand(t *testing.T) {
	var a, b bytes.Buffer
	for _, buf := range []*bytes.Buffer{&a, &b} {
		if err := traceGen([]string{"-pattern", "sessions", "-requests", "50", "-seed", "9"}, buf, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	reqs, err := kvsim.ReadTrace(bytes.NewReader(a.Bytes()))
	if err != nil || len(reqs) != 50 || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("%d requests, %v, same output %v", len(reqs), err, bytes.Equal(a.Bytes(), b.Bytes()))
	}
	if err := traceGen([]string{"-pattern", "spiral"}, io.Discard, io.Discard); err == nil {
		t.Fatal("an unknown pattern was accepted")
	}
}
