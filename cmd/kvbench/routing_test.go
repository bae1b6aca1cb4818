package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/internal/testvectors"
)

// Test_RoutingSmoke is make test's short kvbench routing: 50 requests of
// the shared trace on 2 workers with caches small enough to evict, every
// strategy, three kvselect nodes each way. It checks invariants only
// (every request completes, no error, every engine and every node ends
// with no load; routing itself fails otherwise), never timings.
func Test_RoutingSmoke(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(testvectors.SharedDir(t), "traces", "mooncake_synthetic_trace.jsonl")
	out, svg := filepath.Join(dir, "routing.json"), filepath.Join(dir, "routing.svg")
	var stdout, stderr bytes.Buffer
	args := []string{"-trace", trace, "-limit", "50", "-workers", "2", "-cache-blocks", "2048", "-out", out, "-svg", svg}
	if err := routing(args, &stdout, &stderr); err != nil {
		t.Fatalf("routing: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var doc struct {
		Strategies []struct {
			Name    string `json:"name"`
			Figures struct {
				Requests, Served, Errors int
			} `json:"figures"`
			Checks []string `json:"failed_checks"`
		} `json:"strategies"`
		Targets []struct{ Name string } `json:"targets"`
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Strategies) != len(allStrategies) || len(doc.Targets) != 5 {
		t.Fatalf("%d strategies and %d targets in the JSON, want %d and 5", len(doc.Strategies), len(doc.Targets), len(allStrategies))
	}
	for _, s := range doc.Strategies {
		f := s.Figures
		if f.Requests != 50 || f.Served != 50 || f.Errors != 0 || len(s.Checks) > 0 {
			t.Errorf("%s: %+v, checks %v", s.Name, f, s.Checks)
		}
	}
	for _, want := range append([]string{"hit rate", "TTFT p90", "imbalance", "decisions"}, allStrategies...) {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	pic, err := os.ReadFile(svg)
	if err != nil || !bytes.Contains(pic, []byte("<svg")) {
		t.Fatalf("picture: %v, %d bytes", err, len(pic))
	}
}

// The HTTP observer settles on what the API shows; the same invariants
// hold, with the lifecycle reported to the booking node this time.
func Test_RoutingSmokeHTTPObserver(t *testing.T) {
	trace := filepath.Join(testvectors.SharedDir(t), "traces", "mooncake_synthetic_trace.jsonl")
	args := []string{"-trace", trace, "-limit", "20", "-workers", "2", "-cache-blocks", "2048", "-strategies", "kvselect",
		"-observer", "http", "-lifecycle", "same", "-out", "", "-svg", ""}
	var stdout bytes.Buffer
	if err := routing(args, &stdout, io.Discard); err != nil {
		t.Fatalf("routing: %v\n%s", err, stdout.String())
	}
}

func Test_RoutingFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-strategies", "kvselect,nope"}, "unknown"},
		{[]string{"-lifecycle", "elsewhere"}, "lifecycle"},
		{[]string{"-clock", "sundial"}, "-clock"},
		{[]string{"-observer", "crystal"}, "-observer"},
		{[]string{"-speed", "0"}, "-speed"},
		{[]string{"-limit", "-1"}, "-limit"},
		{[]string{"-max-batch-tokens", "8", "-max-running", "9"}, "max batch tokens"},
		{[]string{"extra"}, "unexpected"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseRoutingConfig(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	c, err := parseRoutingConfig(nil, io.Discard)
	if err != nil || len(c.strategies) != len(allStrategies) || c.speed != defaultRoutingSpeed || c.engine.CacheBlocks != defaultRoutingCache {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}
