package jepsen

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

func Test_BusyWindows_UnexplainedBusy(t *testing.T) {
	busyAt := func(node, call int) Op {
		o := sel(node, ResultOK, call, call+5)
		o.Busy = true
		return o
	}
	lag := time.Duration(ThresholdLagBound / ms)
	ops := []Op{
		thr(0, KindThresholdSet, TightDecodeThreshold, 1, 100, 110, ResultOK),
		thr(0, KindThresholdSet, LooseDecodeThreshold, 2, 1000, 1010, ResultOK),
		thr(0, KindThresholdSet, TightDecodeThreshold, 3, 20000, 20010, ResultOK),
		thr(0, KindThresholdClear, 0, 0, 21000, 21010, ResultFail), // wrote nothing: the tight one stays
		thr(0, KindThresholdClear, 0, 0, 22000, 22010, ResultOK),
		thr(0, KindThresholdSet, TightDecodeThreshold, 4, 40000, 40010, ResultUnknown), // may apply any time after
	}
	faults := []Window{{Name: "partition-halves", Start: 21500 * ms, End: 30000 * ms}}
	windows := BusyWindows(ops, faults)
	if len(windows) != 3 || windows[0] != (BusyWindow{100 * ms, (1010 + lag) * ms}) ||
		windows[1] != (BusyWindow{20000 * ms, (30000 + lag) * ms}) || windows[2].Start != 40000*ms || windows[2].End < time.Hour {
		t.Fatalf("windows %v", windows)
	}
	for _, tc := range []struct {
		name      string
		busy      Op
		explained bool
	}{
		{"before any tight threshold", busyAt(0, 50), false},
		{"under the first tight threshold", busyAt(1, 500), true},
		{"a node still applying the loose one", busyAt(2, 1010+int(lag)-10), true},
		{"past the lag", busyAt(0, 1010+int(lag)+10), false},
		{"a node cut off until the heal", busyAt(1, 29000), true},
		{"past the heal and the lag", busyAt(1, 30000+int(lag)+10), false},
		{"an unknown tight write may have applied", busyAt(2, 50000), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := UnexplainedBusy([]Op{tc.busy}, windows)
			if (len(got) == 0) != tc.explained {
				t.Fatalf("unexplained %v, want explained %v", got, tc.explained)
			}
		})
	}
}

// fakeShedder is one node with three one-rank workers, busy thresholds
// and bookings. An honest one sheds as SPEC §8 says for the workload's
// prompts: under the tight threshold a worker with a booking is busy, and
// with every worker busy a selection answers 503 with seed 001's body. A
// broken one never sheds.
type fakeShedder struct {
	mu       sync.Mutex
	broken   bool
	index    uint64
	decode   *float64
	prefill  *uint64
	booked   map[string]uint64 // reservation id → worker
	probes   int
	selected int
}

func (f *fakeShedder) node(t *testing.T) string {
	mux := http.NewServeMux()
	threshold := func() api.BusyThreshold {
		return api.BusyThreshold{Model: ThresholdModel, ActiveDecodeBlocksThreshold: f.decode, ActivePrefillTokensThreshold: f.prefill}
	}
	mux.HandleFunc("POST /busy_threshold", func(w http.ResponseWriter, r *http.Request) {
		var req api.BusyThresholdRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.index++
		f.decode = req.ActiveDecodeBlocksThreshold
		p := uint64(*req.ActivePrefillTokensThreshold)
		f.prefill = &p
		writeJSON(w, 200, threshold())
	})
	mux.HandleFunc("DELETE /busy_threshold", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.index++
		f.decode, f.prefill = nil, nil
		writeJSON(w, 200, threshold())
	})
	mux.HandleFunc("GET /busy_threshold", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := api.BusyThresholds{Thresholds: []api.BusyThreshold{}}
		if f.decode != nil || f.prefill != nil {
			out.Thresholds = append(out.Thresholds, threshold())
		}
		writeJSON(w, 200, out)
	})
	mux.HandleFunc("POST /select_and_reserve", func(w http.ResponseWriter, r *http.Request) {
		var req api.SelectRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if strings.HasPrefix(string(req.ReservationID), "jepsen-probe-") {
			f.probes++
		}
		load := map[uint64]int{}
		for _, wk := range f.booked {
			load[wk]++
		}
		tight := f.decode != nil && *f.decode == TightDecodeThreshold && !f.broken
		var pick uint64
		for wk := uint64(1); wk <= 3; wk++ {
			if tight && load[wk] > 0 {
				continue // busy: one prompt is over the tight threshold
			}
			if pick == 0 || load[wk] < load[pick] {
				pick = wk
			}
		}
		if pick == 0 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 503, api.Busy{Message: api.BusyMessage, Type: api.BusyType, Code: 503})
			return
		}
		f.booked[string(req.ReservationID)] = pick
		f.selected++
		writeJSON(w, 200, api.Selection{ReservationID: string(req.ReservationID), WorkerID: pick})
	})
	mux.HandleFunc("DELETE /reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.booked[r.PathValue("id")]; !ok {
			writeJSON(w, 404, api.Error{Message: "no such reservation", Code: api.CodeNotFound})
			return
		}
		delete(f.booked, r.PathValue("id"))
		writeJSON(w, 200, struct{}{})
	})
	return serveAuthed(t, mux)
}

// Test_RunThresholdClient runs the threshold client against a node that
// sheds, whose history is linearizable with every probe busy and every
// hold freed, and against one that never sheds, whose probe the summary
// must count as a failure.
func Test_RunThresholdClient(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(map[bool]string{false: "sheds", true: "never sheds"}[broken], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			f := &fakeShedder{broken: broken, booked: map[string]uint64{}}
			url := f.node(t)
			h := NewHistory()
			open := NewOpenBookings()
			defer cancelWhen(ctx, cancel, "two probes", func() bool {
				n := 0
				for _, op := range h.Ops() {
					n += boolInt(op.Kind == KindBusyProbe)
				}
				return n >= 2
			})()
			if err := RunThresholdClient(ctx, Endpoints{URLs: []string{url, url}, Token: testToken}, time.Now(), 3, h, open); err != nil {
				t.Fatal(err)
			}
			ops := h.Ops()
			s := Summarize("latency", ops, 1, nil)
			if s.ThresholdWritesOK < 2 || s.BusyProbes < 2 {
				t.Fatalf("summary %+v", s)
			}
			if broken != (s.BusyProbeFailures == s.BusyProbes) || !broken && s.BusyProbeFailures > 0 {
				t.Fatalf("%d of %d probes failed; broken %v", s.BusyProbeFailures, s.BusyProbes, broken)
			}
			if c := CheckCatalogLinearizable(ops, 10*time.Second); c.Verdict != VerdictYes {
				t.Fatalf("threshold history is %s", c.Verdict)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.booked) > 0 || len(open.All()) > 0 {
				t.Fatalf("holds left: %v, open %v", f.booked, open.All())
			}
		})
	}
}
