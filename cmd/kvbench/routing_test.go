package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/testvectors"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server/localcluster"
)

// Test_RoutingSmoke is make test's short kvbench routing: 50 requests of
// the shared trace on 2 workers with caches small enough to evict, every
// strategy, three kvselect nodes each way. It checks invariants only
// (every request completes, no error, every engine and every node ends
// with no load; routing itself fails otherwise), never timings.
func Test_RoutingSmoke(t *testing.T) {
	dir := t.TempDir()
	trace := testvectors.TracePath(t)
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
	wantTargets := len(routingTargets(fakeResults(allStrategies), scheduler.DefaultPolicy, false))
	if len(doc.Strategies) != len(allStrategies) || len(doc.Targets) != wantTargets {
		t.Fatalf("%d strategies and %d targets in the JSON, want %d and %d", len(doc.Strategies), len(doc.Targets), len(allStrategies), wantTargets)
	}
	for _, s := range doc.Strategies {
		f := s.Figures
		if f.Requests != 50 || f.Served != 50 || f.Errors != 0 || len(s.Checks) > 0 {
			t.Errorf("%s: %+v, checks %v", s.Name, f, s.Checks)
		}
	}
	want := []string{"hit rate", "TTFT p90", "imbalance", "decisions", "bound on hit rate", "least-loaded (true engine load)"}
	for _, st := range allStrategies {
		want = append(want, st.display)
	}
	for _, want := range want {
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
// hold, with the lifecycle reported to the booking node this time, on a
// mixed fleet, with a busy threshold so low that the nodes refuse
// requests (503s are not failures of the run).
func Test_RoutingSmokeHTTPObserver(t *testing.T) {
	trace := testvectors.TracePath(t)
	out := filepath.Join(t.TempDir(), "routing.json")
	args := []string{"-trace", trace, "-limit", "20", "-workers", "2", "-cache-blocks", "2048", "-strategies", "kvselect",
		"-observer", "http", "-lifecycle", "same", "-fleet", "hetero", "-busy-prefill-tokens", "1", "-out", out, "-svg", ""}
	var stdout bytes.Buffer
	if err := routing(args, &stdout, io.Discard); err != nil {
		t.Fatalf("routing: %v\n%s", err, stdout.String())
	}
	var doc struct {
		Strategies []struct {
			Figures struct{ Served, Rejected int } `json:"figures"`
		} `json:"strategies"`
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if f := doc.Strategies[0].Figures; f.Rejected == 0 || f.Served+f.Rejected != 20 {
		t.Fatalf("served %d, rejected %d of 20: want some refused by the busy threshold", f.Served, f.Rejected)
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
		{[]string{"-offset", "-1"}, "-offset"},
		{[]string{"-every", "0"}, "-every"},
		{[]string{"-fleet", "mixed"}, "-fleet"},
		{[]string{"-goodput-ttft", "0s"}, "-goodput-ttft"},
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
	if err != nil || len(c.strategies) != len(allStrategies) || c.speed != defaultRoutingSpeed || c.engine.CacheBlocks != defaultRoutingCache ||
		c.fleet != fleetUniform || c.busyPrefillTokens != 0 || c.gate {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	// A strategy by its flag name or its display name; the table's order.
	c, err = parseRoutingConfig([]string{"-strategies", "least-loaded (true engine load),kvselect, round-robin"}, io.Discard)
	if err != nil || !slices.Equal(strategyNames(c.strategies), []string{strategyKvselect, strategyRoundRobin, strategyLeastLoaded}) {
		t.Fatalf("strategies %v, %v", strategyNames(c.strategies), err)
	}
}

// SPEC §12's strategies: the default never runs under its own name, every
// other compared policy does, and no display name needs quoting as a flag.
func Test_RoutingStrategies(t *testing.T) {
	for _, def := range []string{"dynamo-default", "predicted-ttft", "least-loaded"} {
		names := strategyNames(routingStrategies(def))
		for _, p := range comparedPolicies {
			if got := slices.Contains(names, p); got == (p == def) {
				t.Errorf("default %s: strategy %s listed %v", def, p, got)
			}
		}
		for _, want := range []string{strategyKvselect, strategyKvselectOff, strategyRoundRobin, strategyRandom, strategyLeastLoaded, strategyGreedyPrefix} {
			if !slices.Contains(names, want) {
				t.Errorf("default %s: no %s in %v", def, want, names)
			}
		}
	}
	for _, st := range allStrategies {
		if strings.ContainsAny(st.name, " (),") {
			t.Errorf("strategy name %q needs quoting on the command line", st.name)
		}
	}
}

func Test_SubsetTrace(t *testing.T) {
	var reqs []kvsim.TraceRequest
	for i := range 10 {
		reqs = append(reqs, kvsim.TraceRequest{Timestamp: float64(i)})
	}
	tests := []struct {
		offset, every, limit int
		want                 []float64
	}{
		{0, 1, 0, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{0, 1, 3, []float64{0, 1, 2}},
		{7, 1, 0, []float64{7, 8, 9}},
		{1, 3, 0, []float64{1, 4, 7}},
		{1, 3, 2, []float64{1, 4}},
		{12, 1, 0, nil},
	}
	for _, tt := range tests {
		var got []float64
		for _, q := range subsetTrace(reqs, tt.offset, tt.every, tt.limit) {
			got = append(got, q.Timestamp)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("offset %d every %d limit %d: %v, want %v", tt.offset, tt.every, tt.limit, got, tt.want)
		}
	}
}

// A mixed fleet: the last quarter of the engines, rounded up, twice as
// slow in every cost; the others as configured.
func Test_ShapeFleet(t *testing.T) {
	for _, tt := range []struct {
		kind    string
		n, slow int
	}{{fleetUniform, 8, 0}, {fleetHetero, 8, 2}, {fleetHetero, 2, 1}, {fleetHetero, 5, 2}} {
		f, err := kvsim.NewFleet(kvsim.EngineConfig{}, tt.n, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := shapeFleet(f, tt.kind); err != nil {
			t.Fatal(err)
		}
		slow := 0
		for i := range f.Len() {
			c, base := f.EngineConfig(i), f.Config()
			switch {
			case c == base:
			case c.PrefillPerToken == 2*base.PrefillPerToken && c.DecodePerToken == 2*base.DecodePerToken && c.StepOverhead == 2*base.StepOverhead && i >= tt.n-tt.slow:
				slow++
			default:
				t.Fatalf("%s fleet of %d: engine %d has %+v", tt.kind, tt.n, i, c)
			}
		}
		if slow != tt.slow {
			t.Errorf("%s fleet of %d: %d slow engines, want %d", tt.kind, tt.n, slow, tt.slow)
		}
	}
}

// Only the scheduler runs on the replay's clock: Raft, leases and the KV
// listeners keep the wall clock.
func Test_LocalNodeConfigClock(t *testing.T) {
	clock := kvsim.NewVirtualClock(time.Time{})
	threshold := uint64(5000)
	cfg := localcluster.NodeConfig("n1", t.TempDir())
	nodeOptions{now: clock.Now, busyPrefillTokens: threshold, policy: scheduler.PolicySpec{Name: "two-tier"}}.apply(0, &cfg, slog.New(slog.DiscardHandler))
	if cfg.Scheduler.Now == nil || !cfg.Scheduler.Now().Equal(kvsim.VirtualEpoch) {
		t.Fatal("the scheduler is not on the virtual clock")
	}
	if cfg.Cluster.Clock != nil || cfg.Ingest.Now != nil {
		t.Fatal("Raft or the listeners are on the virtual clock")
	}
	if cfg.Scheduler.Policy.Name != "two-tier" || cfg.InitialThresholds.ActivePrefillTokens == nil || *cfg.InitialThresholds.ActivePrefillTokens != threshold {
		t.Fatalf("policy %v, thresholds %+v", cfg.Scheduler.Policy, cfg.InitialThresholds)
	}
	if err := cfg.Scheduler.Validate(); err != nil {
		t.Fatal(err)
	}
	def := localcluster.NodeConfig("n1", t.TempDir())
	nodeOptions{}.apply(0, &def, slog.New(slog.DiscardHandler))
	if def.Scheduler.Now != nil || def.Scheduler.Policy.Name != scheduler.DefaultPolicy || def.InitialThresholds.ActivePrefillTokens != nil {
		t.Fatalf("without options: clock set %v, policy %v, thresholds %+v", def.Scheduler.Now != nil, def.Scheduler.Policy, def.InitialThresholds)
	}
}
