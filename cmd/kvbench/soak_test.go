package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func Test_SoakConfig(t *testing.T) {
	cfg, err := parseSoakConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 10*time.Minute || cfg.warmup != 30*time.Second || cfg.out != "bench/results/soak.json" ||
		cfg.tol != (tolerance{Factor: 1.25, RSSSlack: 16 << 20, HeapSlack: 8 << 20, GoroutineSlack: 20}) {
		t.Fatalf("defaults: %+v", cfg)
	}
	// make soak SOAK_DURATION=1m: the warm-up shrinks to a quarter.
	if cfg, err = parseSoakConfig([]string{"-duration", "1m"}, io.Discard); err != nil || cfg.warmup != 15*time.Second {
		t.Fatalf("1m: %+v %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"-duration", "10s"}, // no room for the start and end windows
		{"-rate", "0"},
		{"-flat-factor", "0.9"},
		{"extra"},
	} {
		if _, err := parseSoakConfig(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func Test_FlatVerdict(t *testing.T) {
	tol := tolerance{Factor: 1.25, RSSSlack: 16 << 20, HeapSlack: 8 << 20, GoroutineSlack: 20}
	start := nodeFigs{RSS: 40 << 20, HeapInuse: 20 << 20, Goroutines: 80}
	for _, tc := range []struct {
		name string
		end  nodeFigs
		over string // "" when flat
	}{
		{"same", start, ""},
		{"at every limit", nodeFigs{RSS: 66 << 20, HeapInuse: 33 << 20, Goroutines: 120}, ""},
		{"rss past", nodeFigs{RSS: 66<<20 + 1, HeapInuse: 20 << 20, Goroutines: 80}, "rss"},
		{"heap past", nodeFigs{RSS: 40 << 20, HeapInuse: 33<<20 + 1, Goroutines: 80}, "heap_inuse"},
		{"goroutines past", nodeFigs{RSS: 40 << 20, HeapInuse: 20 << 20, Goroutines: 121}, "goroutines"},
		{"lower", nodeFigs{RSS: 30 << 20, HeapInuse: 10 << 20, Goroutines: 70}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := flatVerdict("n1", start, tc.end, tol)
			if v.Flat != (tc.over == "") {
				t.Fatalf("flat = %v, over %v", v.Flat, v.Over)
			}
			if tc.over != "" && (len(v.Over) != 1 || !strings.HasPrefix(v.Over[0], tc.over+" ")) {
				t.Fatalf("over = %v, want %s", v.Over, tc.over)
			}
		})
	}
}

func Test_SoakWindows(t *testing.T) {
	var ss []soakSample
	for i := range 10 {
		for _, node := range []string{"n1", "n2"} {
			g := int64(100 + i)
			if i == 5 {
				g = 1000 // a spike in the middle decides nothing
			}
			ss = append(ss, soakSample{T: float64(2 * i), Node: node, nodeFigs: nodeFigs{Goroutines: g}})
		}
	}
	// After a 5 s warm-up the first samples are at 6, 8, 10 s.
	start, end, ok := windows(ss, "n2", 5*time.Second)
	if !ok || start[0].T != 6 || len(start) != soakWindow || end[len(end)-1].T != 18 {
		t.Fatalf("windows: %v %v %v", start, end, ok)
	}
	if s, e := medianFigures(start), medianFigures(end); s.Goroutines != 104 || e.Goroutines != 108 {
		t.Fatalf("medians %d, %d", s.Goroutines, e.Goroutines)
	}
	spiky := []soakSample{{Node: "n1", nodeFigs: nodeFigs{RSS: 5}}, {Node: "n1", nodeFigs: nodeFigs{RSS: 500}}, {Node: "n1", nodeFigs: nodeFigs{RSS: 6}}}
	if m := medianFigures(spiky); m.RSS != 6 {
		t.Fatalf("median of a spike: %d", m.RSS)
	}
	if _, _, ok := windows(ss, "n1", 15*time.Second); ok {
		t.Fatal("judged with fewer than two windows of samples after warm-up")
	}
}

func Test_ParseVmRSS(t *testing.T) {
	status := "Name:\tkvselect\nVmPeak:\t  900000 kB\nVmRSS:\t   45124 kB\nThreads:\t9\n"
	if rss, err := parseVmRSS(strings.NewReader(status)); err != nil || rss != 45124<<10 {
		t.Fatalf("rss %d, %v", rss, err)
	}
	if _, err := parseVmRSS(strings.NewReader("Name:\tzombie\n")); err == nil {
		t.Fatal("a status without VmRSS accepted")
	}
}

func Test_SoakMetricsParsing(t *testing.T) {
	const text = `# TYPE go_goroutines gauge
go_goroutines 87
# TYPE kvselect_selections_total counter
kvselect_selections_total{outcome="selected",route="select"} 10
kvselect_selections_total{outcome="not_ready",route="select"} 2
`
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := familySum(fams, "go_goroutines"); !ok || v != 87 {
		t.Fatalf("go_goroutines %v %v", v, ok)
	}
	if v, ok := familySum(fams, "kvselect_selections_total"); !ok || v != 12 {
		t.Fatalf("selections %v %v", v, ok)
	}
	if _, ok := familySum(fams, "go_memstats_heap_inuse_bytes"); ok {
		t.Fatal("an absent family summed")
	}
	if got := seriesName("kvselect_selections_total", fams["kvselect_selections_total"].Metric[0]); got != `kvselect_selections_total{outcome="selected",route="select"}` {
		t.Fatalf("series name %s", got)
	}
}

func Test_SoakStats(t *testing.T) {
	st := newSoakStats()
	ctx := context.Background()
	notFound := &client.Error{Method: http.MethodDelete, Status: 404, Code: api.CodeNotFound}
	st.record(ctx, "free", nil, false)
	st.record(ctx, "free", notFound, false)
	st.record(ctx, "free", notFound, true)
	st.record(ctx, "select", errors.New("connection refused"), false)
	done, cancel := context.WithCancel(ctx)
	cancel()
	st.record(done, "select", errors.New("context canceled"), false) // the soak's own shutdown
	snap := st.snapshot()
	if snap.Requests != 4 || snap.Errors != 2 || snap.Tolerated != 1 ||
		snap.ErrorKinds["free:not_found"] != 1 || snap.ErrorKinds["select:transport"] != 1 ||
		snap.Tolerations["free:not_found"] != 1 || len(snap.FirstErrors) != 2 {
		t.Fatalf("%+v", snap)
	}
}

func Test_SoakChurned(t *testing.T) {
	var l load
	for _, tc := range []struct {
		now, gen, worker uint64
		want             bool
	}{
		{0, 0, churnWorkerID, false}, // no cycle since the booking began
		{0, 0, 5, false},             // not the churn worker
		{1, 0, churnWorkerID, true},  // a cycle began since
		{1, 1, churnWorkerID, true},  // began during a cycle
		{1, 1, 5, false},
		{2, 2, churnWorkerID + 3, false}, // after a cycle, every node agreed
		{4, 2, churnWorkerID + 3, true},
	} {
		l.churnGen.Store(tc.now)
		if got := l.churned(tc.worker, tc.gen); got != tc.want {
			t.Errorf("generation %d, booked at %d, worker %d: churned = %v", tc.now, tc.gen, tc.worker, got)
		}
	}
}
