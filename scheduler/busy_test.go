package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// sizedWorker registers a worker of model m with ranks dp ranks and the
// given total_kv_blocks (0: unknown).
func (f *fixture) sizedWorker(id uint64, ranks int, totalKV uint64) {
	f.t.Helper()
	w := fsm.Worker{WorkerID: id, ModelName: "m", Endpoint: fmt.Sprintf("http://w%d", id), BlockSize: 16,
		DataParallelSize: uint32(ranks), KVEventsEndpoints: map[uint32]string{}, TotalKVBlocks: totalKV}
	for r := range ranks {
		w.KVEventsEndpoints[uint32(r)] = fmt.Sprintf("tcp://127.0.0.1:%d", 7000+r)
	}
	if res, err := f.log.Upsert(w); err != nil || res.Err != nil {
		f.t.Fatal(err, res.Err)
	}
}

func (f *fixture) apply(cmd fsm.Command) {
	f.t.Helper()
	f.logMu.Lock()
	defer f.logMu.Unlock()
	if res, err := f.log.Apply(cmd); err != nil || res.Err != nil {
		f.t.Fatal(err, res.Err)
	}
}

// chosen returns the workers /select may pick for a fresh prompt, or the
// error.
func (f *fixture) chosen() ([]uint64, error) {
	f.t.Helper()
	seen := map[uint64]bool{}
	for i := range 64 {
		// A huge temperature samples the candidates uniformly, whatever
		// their cost, so every candidate shows.
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(uint64(900 + i)),
			Override: Override{Params: map[string]float64{"router_temperature": 1e9}}})
		if err != nil {
			return nil, err
		}
		seen[sel.WorkerID] = true
	}
	out := make([]uint64, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	slices.Sort(out)
	return out, nil
}

// blocks is a prompt of n blocks unique to tag (no shared prefix with
// another tag), with isl 16n.
func blocks(tag uint64, n int) Prompt {
	b := make([]uint64, n)
	for i := range b {
		b[i] = tag*1000 + uint64(i) + 1
	}
	return prompt(b...)
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// Test_LoadShedding crosses and uncrosses the thresholds of seed 001 as
// reservations come and go. Worker 1 has one rank, worker 2 two; both hold
// 10 KV blocks per rank.
func Test_LoadShedding(t *testing.T) {
	f64 := func(v float64) *float64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	type step struct {
		do       func(f *fixture)
		chosen   []uint64 // the candidates of a selection; nil: not checked
		rejected bool     // selections fail with ErrOverloaded
		busyNow  []string // ranks /loads reports busy, "w/r"
	}
	noPrefill := func(f *fixture, id string, w uint64, r uint32, pr Prompt) {
		f.t.Helper()
		zero := int64(0)
		if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: w, DPRank: r, Prompt: pr, EffectivePrefill: &zero}); err != nil {
			f.t.Fatal(err)
		}
	}
	prefill := func(f *fixture, id string, w uint64, r uint32, tokens int64) {
		f.t.Helper()
		pr := blocks(uint64(len(id))+50, 1)
		pr.ISL = tokens
		if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: w, DPRank: r, Prompt: pr, EffectivePrefill: &tokens}); err != nil {
			f.t.Fatal(err)
		}
	}
	free := func(id string) func(f *fixture) {
		return func(f *fixture) {
			if err := f.s.Free(id); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		totalKV uint64
		mutate  func(*Config)
		steps   []step
	}{
		{"no thresholds: never rejects", 10, nil, []step{
			{do: func(f *fixture) {
				noPrefill(f, "a", 1, 0, blocks(1, 10))
				noPrefill(f, "b", 2, 0, blocks(2, 10))
				noPrefill(f, "c", 2, 1, blocks(3, 10))
			}, chosen: []uint64{1, 2}},
		}},
		{"decode threshold crossed and uncrossed", 10, nil, []step{
			{do: func(f *fixture) { f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: f64(0.5)}) }, chosen: []uint64{1, 2}},
			// 5 of 10 blocks is not above 0.5.
			{do: func(f *fixture) { noPrefill(f, "a", 1, 0, blocks(1, 5)) }, chosen: []uint64{1, 2}},
			{do: func(f *fixture) { noPrefill(f, "a2", 1, 0, blocks(2, 1)) }, chosen: []uint64{2}, busyNow: []string{"1/0"}},
			// One busy rank of two does not make worker 2 busy.
			{do: func(f *fixture) { noPrefill(f, "b", 2, 0, blocks(3, 6)) }, chosen: []uint64{2}, busyNow: []string{"1/0", "2/0"}},
			{do: func(f *fixture) { noPrefill(f, "c", 2, 1, blocks(4, 6)) }, rejected: true, busyNow: []string{"1/0", "2/0", "2/1"}},
			{do: free("b"), chosen: []uint64{2}, busyNow: []string{"1/0", "2/1"}},
			{do: free("a2"), chosen: []uint64{1, 2}, busyNow: []string{"2/1"}},
		}},
		{"a stale rank still counts for its worker's busy test", 10, nil, []step{
			{do: func(f *fixture) { f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: f64(0.5)}) }},
			// Worker 2's rank 1 is idle but stale here: worker 2 is not
			// busy, so its busy rank 0 stays a candidate (rank 1 is
			// never chosen).
			{do: func(f *fixture) {
				noPrefill(f, "b", 2, 0, blocks(3, 6))
				f.s.SetStale(map[indexer.RankKey]struct{}{{Worker: 2, Rank: 1}: {}})
			}, chosen: []uint64{1, 2}, busyNow: []string{"2/0"}},
			{do: func(f *fixture) { noPrefill(f, "c", 2, 1, blocks(4, 6)) }, chosen: []uint64{1}, busyNow: []string{"2/0", "2/1"}},
		}},
		{"shared blocks count once", 10, nil, []step{
			{do: func(f *fixture) { f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: f64(0.5)}) }},
			{do: func(f *fixture) {
				noPrefill(f, "a", 1, 0, blocks(1, 5))
				noPrefill(f, "b", 1, 0, blocks(1, 5)) // the same 5 blocks
			}, chosen: []uint64{1, 2}},
		}},
		{"prefill threshold crossed until prefill completes", 10, nil, []step{
			{do: func(f *fixture) { f.apply(fsm.SetThresholds{Model: "m", ActivePrefillTokens: u64(100)}) }},
			{do: func(f *fixture) { prefill(f, "a", 1, 0, 100) }, chosen: []uint64{1, 2}},
			{do: func(f *fixture) { prefill(f, "bb", 1, 0, 1) }, chosen: []uint64{2}, busyNow: []string{"1/0"}},
			{do: func(f *fixture) {
				prefill(f, "ccc", 2, 0, 101)
				prefill(f, "dddd", 2, 1, 101)
			}, rejected: true, busyNow: []string{"1/0", "2/0", "2/1"}},
			{do: func(f *fixture) {
				if err := f.s.PrefillComplete("dddd"); err != nil {
					f.t.Fatal(err)
				}
			}, chosen: []uint64{2}, busyNow: []string{"1/0", "2/0"}},
		}},
		{"either threshold makes a rank busy", 10, nil, []step{
			{do: func(f *fixture) {
				f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: f64(0.5)})
				f.apply(fsm.SetThresholds{Model: "m", ActivePrefillTokens: u64(100)}) // merges
				prefill(f, "a", 1, 0, 101)
				noPrefill(f, "b", 2, 0, blocks(1, 6))
				noPrefill(f, "c", 2, 1, blocks(2, 6))
			}, rejected: true, busyNow: []string{"1/0", "2/0", "2/1"}},
			{do: func(f *fixture) { f.apply(fsm.ClearThresholds{Model: "m"}) }, chosen: []uint64{1, 2}},
		}},
		{"decode threshold unchecked without total_kv_blocks", 0, nil, []step{
			{do: func(f *fixture) {
				f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: f64(0)})
				noPrefill(f, "a", 1, 0, blocks(1, 10))
				noPrefill(f, "b", 2, 0, blocks(2, 10))
				noPrefill(f, "c", 2, 1, blocks(3, 10))
			}, chosen: []uint64{1, 2}},
		}},
		{"prefill threshold unchecked when prefill is not tracked", 10, func(c *Config) { c.TrackPrefillTokens = false }, []step{
			{do: func(f *fixture) {
				f.apply(fsm.SetThresholds{Model: "m", ActivePrefillTokens: u64(0)})
				prefill(f, "a", 1, 0, 500)
				prefill(f, "b", 2, 0, 500)
				prefill(f, "c", 2, 1, 500)
			}, chosen: []uint64{1, 2}},
		}},
		{"thresholds of another model do not apply", 10, nil, []step{
			{do: func(f *fixture) {
				f.apply(fsm.SetThresholds{Model: "other", ActiveDecodeBlocks: f64(0)})
				noPrefill(f, "a", 1, 0, blocks(1, 1))
				noPrefill(f, "b", 2, 0, blocks(2, 1))
				noPrefill(f, "c", 2, 1, blocks(3, 1))
			}, chosen: []uint64{1, 2}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mutate []func(*Config)
			if tt.mutate != nil {
				mutate = append(mutate, tt.mutate)
			}
			f := newFixture(t, mutate...)
			f.sizedWorker(1, 1, tt.totalKV)
			f.sizedWorker(2, 2, tt.totalKV)
			for i, st := range tt.steps {
				st.do(f)
				before := counterValue(f.s.metrics.rejected)
				got, err := f.chosen()
				switch {
				case st.rejected && !errors.Is(err, ErrOverloaded):
					t.Fatalf("step %d: chosen %v, %v; want ErrOverloaded", i, got, err)
				case st.rejected && counterValue(f.s.metrics.rejected) != before+1:
					t.Fatalf("step %d: dynamo_tasks_rejected_total moved by %v, want 1", i, counterValue(f.s.metrics.rejected)-before)
				case !st.rejected && err != nil:
					t.Fatalf("step %d: %v", i, err)
				case st.chosen != nil && !slices.Equal(got, st.chosen):
					t.Fatalf("step %d: chosen %v, %v; want %v", i, got, err, st.chosen)
				}
				var busy []string
				for _, pl := range f.s.Loads("m", "") {
					for _, l := range pl.Loads {
						if l.Busy {
							busy = append(busy, fmt.Sprintf("%d/%d", l.WorkerID, l.DPRank))
						}
					}
				}
				if !slices.Equal(busy, st.busyNow) {
					t.Fatalf("step %d: busy ranks %v, want %v", i, busy, st.busyNow)
				}
			}
		})
	}
}

// Test_LoadSheddingRejectsWithoutBooking: a rejected /select_and_reserve
// books nothing and leaves its reservation id free.
func Test_LoadSheddingRejectsWithoutBooking(t *testing.T) {
	f := newFixture(t)
	f.sizedWorker(1, 1, 10)
	zero := 0.0
	f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: &zero})
	f.mustReserve("a", 1, 0, blocks(1, 1))
	_, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: blocks(2, 3), Reserve: true, ReservationID: "x"})
	if !errors.Is(err, ErrOverloaded) {
		t.Fatalf("select_and_reserve = %v, want ErrOverloaded", err)
	}
	if l := f.load(1, 0); l.ActiveRequests != 1 {
		t.Fatalf("load after a rejection: %+v", l)
	}
	// A booking on a rank the caller chose is not shed, and the id is free.
	f.mustReserve("x", 1, 0, blocks(2, 3))
}

// Test_LoadSheddingCountsReplicaBookings: bookings made on another node
// and brought by replica sync make a worker busy here, and their frees
// make it free again, the same on every node.
func Test_LoadSheddingCountsReplicaBookings(t *testing.T) {
	fs, _ := replicas(t, 3)
	half := 0.5
	for _, f := range fs {
		f.apply(fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{TotalKVBlocks: ptr(uint64(10))}})
		f.apply(fsm.PatchWorker{WorkerID: 2, Patch: fsm.WorkerPatch{TotalKVBlocks: ptr(uint64(10))}})
		f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: &half})
	}
	zero := int64(0)
	book := func(f *fixture, id string, w uint64) {
		t.Helper()
		if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: w, Prompt: blocks(w, 6), EffectivePrefill: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	book(fs[0], "a", 1)
	for i, f := range fs {
		if got, err := f.chosen(); err != nil || !slices.Equal(got, []uint64{2}) {
			t.Fatalf("node %d after one booking: %v %v", i+1, got, err)
		}
	}
	book(fs[1], "b", 2)
	for i, f := range fs {
		if _, err := f.chosen(); !errors.Is(err, ErrOverloaded) {
			t.Fatalf("node %d with both workers busy: %v", i+1, err)
		}
	}
	if err := fs[2].s.Free("a"); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if got, err := f.chosen(); err != nil || !slices.Equal(got, []uint64{1}) {
			t.Fatalf("node %d after the free: %v %v", i+1, got, err)
		}
	}
}

func Test_Unchecked(t *testing.T) {
	f64, u64 := 0.5, uint64(10)
	both := fsm.Thresholds{Model: "m", ActiveDecodeBlocks: &f64, ActivePrefillTokens: &u64}
	tests := []struct {
		name    string
		track   bool
		t       fsm.Thresholds
		totalKV uint64
		want    int
	}{
		{"all inputs known", true, both, 10, 0},
		{"no total_kv_blocks", true, both, 0, 1},
		{"prefill not tracked", false, both, 10, 1},
		{"neither", false, both, 0, 2},
		{"no thresholds", false, fsm.Thresholds{Model: "m"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.TrackPrefillTokens = tt.track })
			if got := f.s.Unchecked(tt.t, &fsm.Worker{TotalKVBlocks: tt.totalKV}); len(got) != tt.want {
				t.Fatalf("Unchecked = %q, want %d entries", got, tt.want)
			}
		})
	}
}
