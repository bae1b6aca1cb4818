package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkApplyStored/index-2         	       2	1246318034 ns/op	   1682679 blocks/s	    105167 events/s
BenchmarkApplyStored/map-floor-baseline-2         	       2	 948389092 ns/op	   2211281 blocks/s
BenchmarkMatch/bisect-2         	   60000	     10298 ns/op	      9379 p50-ns	     22737 p99-ns
BenchmarkMatch/walk-baseline-2  	   60000	    163419 ns/op	    165862 p50-ns	    307506 p99-ns
BenchmarkMatch10M-2   	   30000	      5142 ns/op	   9177088 blocks	      4539 p50-ns	     13074 p99-ns
BenchmarkMatchUnderApply/quiet-baseline-2         	  100000	      5219 ns/op	      4588 p50-ns	      8185 p99-ns
BenchmarkMatchUnderApply/apply-1M-blocks-per-s-2  	  100000	     12679 ns/op	    998113 applied-blocks/s	     52411 apply-p99-ns	      7109 p50-ns	     19815 p99-ns
BenchmarkMemory-2        	       1	1378865035 ns/op	       158.3 B/block	        77.91 B/membership	    919552 blocks	   1867776 memberships
BenchmarkSelect/select-256-ranks/reservations=0-2 	   20000	     19990 ns/op	     15472 p50-ns	     39107 p99-ns	     50256 selects/s
BenchmarkSelect/match-only-baseline-2                     	   20000	      5537 ns/op	    180611 matches/s
BenchmarkSelectHTTP-2   	       1	30504034422 ns/op	    566261 health-half-p50-ns	   3422835 health-half-p99-ns	     30853 health-req/s	    676602 health-steady-p50-ns	   1784083 health-steady-p99-ns	    716353 select-half-p50-ns	   7685654 select-half-p99-ns	     16218 select-req/s	    758851 select-steady-p50-ns	   2351474 select-steady-p99-ns	         0.5256 select/health
PASS
`

func Test_Report(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bench.txt")
	out := filepath.Join(dir, "out.json")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := report([]string{"-in", in, "-out", out}, &stdout); err != nil {
		t.Fatal(err)
	}
	text := stdout.String()
	for _, want := range []string{
		"index apply", "MISSES target >= 7000000", "76% of the map floor",
		"match p99", "22.7", "13.5x faster", "MISSES target <= 5",
		"memory per (block, rank) membership", "77.9", "MISSES target <= 40",
		"select in process", "index match alone: 180611/s",
		"/select over HTTP vs /health", "0.53", "MISSES target >= 0.6", "/health: 30853 req/s", "/select: 16218 req/s",
		"/select over HTTP p99, open loop at 2000 req/s", "2.4", "/health at the same rate: 1.78 ms",
		"match p99 (512-block query, 9.2 M blocks, 256 ranks)", "13.1", "MISSES target <= 10",
		"match p50 while 1 M blocks/s are applied", "7.1 us", "1.55x quiet", "quiet: p50 4.6 us",
		"match p99 while 1 M blocks/s are applied", "19.8", "MISSES target <= 2x quiet (16.4 us) at >= 0.95 M blocks/s applied", "quiet: p99 8.2 us",
		"2.42x quiet; applier reached 1.00 M blocks/s of the 1 M asked, its p99 per event 52 us",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "match p50") || strings.HasPrefix(line, "select in process") {
			if !strings.Contains(line, "no target") || strings.Contains(line, "meets") {
				t.Errorf("figure without a SPEC target claims one: %s", line)
			}
		}
	}
	if lines := strings.Count(text, "\n"); lines != 10 {
		t.Errorf("%d summary lines, want 10:\n%s", lines, text)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Figures []Figure          `json:"figures"`
		Results map[string]Result `json:"results"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Figures) != 10 || doc.Results["BenchmarkMemory"].Metrics["memberships"] != 1867776 {
		t.Fatalf("json = %s", raw)
	}
	if err := report([]string{"-in", filepath.Join(dir, "missing")}, &stdout); err == nil {
		t.Fatal("missing input accepted")
	}
}

func Test_ReportRecovery(t *testing.T) {
	const bench = `BenchmarkDumpTransfer/plain-2 	1	919552 blocks	270 e2e-peak-heap-MB	137.5 index-heap-MB	149.4 loader-peak-heap-MB	4.125 recovery-s	240.6 rss-hwm-MB	85.39 server-peak-heap-MB	119.0 wire-MB
BenchmarkDumpTransfer/gzip-2  	1	919552 blocks	272.9 e2e-peak-heap-MB	136.9 index-heap-MB	149.8 loader-peak-heap-MB	3.910 recovery-s	109.1 rss-hwm-MB	85.37 server-peak-heap-MB	28.52 wire-MB
`
	stdout := reportOf(t, bench)
	for _, want := range []string{"index recovery (0.92 M blocks", "3.9 s", "meets target <= 10",
		"plain JSON: 4.12 s, 119.0 MB", "28.5 MB on the wire", "loading +150 MB for a 137 MB index"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}

func Test_ReportReplicaSync(t *testing.T) {
	const bench = `BenchmarkReplicaSyncHTTP-2   	       1	3000051691 ns/op	    1412 booking-p99-us	       999.8 bookings/s	      3 late-sends	     480.0 local-p50-us	    2110 local-p99-us	       750.0 samples	    9120 visible-max-us	     558.0 visible-p50-us	    3240 visible-p99-us
BenchmarkPublishToApply/rate=1000/replica-sync-2         	       1	      2107 max-us	       190.0 p50-us	       855.0 p99-us
BenchmarkPublishToApply/rate=1000/bare-zmq-2             	       1	      3265 max-us	       154.0 p50-us	      1283 p99-us
BenchmarkPublishToApply/rate=10000/replica-sync-2        	       1	     14128 max-us	       230.0 p50-us	      2984 p99-us
BenchmarkPublishToApply/rate=10000/bare-zmq-2            	       1	      7718 max-us	       575.0 p50-us	      3024 p99-us
`
	stdout := reportOf(t, bench)
	for _, want := range []string{
		"a booking over HTTP on one node until GET /reservations/{id} shows it on another (1000 bookings/s", "3.2 ms", "meets target <= 5",
		"shown by the booking node itself: p50 0.48 ms, p99 2.11 ms", "(p50 0.56 ms)",
		"replica sync in process, Publish() on one syncer to Apply() on another over loopback ZMQ, p99 (1000 bookings/s)", "0.9 ms", "(p50 0.19 ms)",
		"(10000 bookings/s)", "3.0 ms", "bare zmq4 PUB -> SUB: p50 0.57 ms, p99 3.02 ms"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stdout, "meets target") != 1 {
		t.Errorf("the in-process figure has a target of its own:\n%s", stdout)
	}
}

// reportOf is what kvbench report prints of bench, go test -bench output.
func reportOf(t *testing.T, bench string) string {
	t.Helper()
	in := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(in, []byte(bench), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := report([]string{"-in", in}, &stdout); err != nil {
		t.Fatal(err)
	}
	return stdout.String()
}

// Test_MatchUnderApplyFigures: the p99 target holds only when the applier
// reached the rate the target names, whatever the latencies, and only
// against a quiet baseline of the same run; the p50 has no SPEC target.
// Figures under other units (the twins' prefixed ones, such as
// rwmutex-p99-ns, before the polling lock was retired) are not read.
func Test_MatchUnderApplyFigures(t *testing.T) {
	const run, quiet = "BenchmarkMatchUnderApply/apply-1M-blocks-per-s ", "BenchmarkMatchUnderApply/quiet-baseline "
	under := func(rate, p50, p99 float64) map[string]float64 {
		m := map[string]float64{run + "p50-ns": p50, run + "p99-ns": p99}
		if rate > 0 {
			m[run+"applied-blocks/s"] = rate
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		metrics map[string]float64
		noQuiet bool
		figures int
		met     bool
	}{
		{"within 2x at the rate", under(1e6, 9000, 20000), false, 2, true},
		{"p99 past 2x", under(0.99e6, 9000, 20001), false, 2, false},
		{"applier short of the rate", under(0.6e6, 5000, 10000), false, 2, false},
		{"applier rate missing", under(0, 5000, 10000), false, 2, false},
		{"no quiet baseline", under(1e6, 5000, 10000), true, 2, false},
		{"the twins' units", map[string]float64{run + "rwmutex-applied-blocks/s": 1e6, run + "rwmutex-p50-ns": 5000, run + "rwmutex-p99-ns": 10000}, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.metrics
			if !tc.noQuiet {
				m[quiet+"p50-ns"], m[quiet+"p99-ns"] = 4500, 10000
			}
			figs := matchUnderApplyFigures(func(name, unit string) (float64, bool) {
				v, ok := m[name+" "+unit]
				return v, ok
			})
			if len(figs) != tc.figures {
				t.Fatalf("%d figures, want %d: %+v", len(figs), tc.figures, figs)
			}
			if len(figs) == 0 {
				return
			}
			if figs[0].Target != "" || figs[0].Met || figs[1].Met != tc.met {
				t.Fatalf("%+v", figs)
			}
			rate := m[run+"applied-blocks/s"]
			if !strings.Contains(figs[0].Compared, fmt.Sprintf("applier reached %.2f M blocks/s", rate/1e6)) {
				t.Fatalf("rate not reported: %q", figs[0].Compared)
			}
		})
	}
}
