package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

var keyM = fsm.PartitionKey{Model: "m", Tenant: "default"}

// fixture is one node's catalog, index and scheduler, wired like the
// server wires them.
type fixture struct {
	t     *testing.T
	logMu sync.Mutex // fsm.Log is driven from one goroutine at a time, like the raft FSM
	log   *fsm.Log
	idx   *indexer.Indexer
	s     *Scheduler
	clock time.Time
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: time.Unix(1_700_000_000, 0)}
	quiet := slog.New(slog.DiscardHandler)
	f.idx = indexer.New(quiet)
	cfg := DefaultConfig()
	cfg.Seed = 42
	cfg.Now = func() time.Time { return f.clock }
	for _, m := range mutate {
		m(&cfg)
	}
	var err error
	if f.s, err = New(cfg, f.idx, quiet); err != nil {
		t.Fatal(err)
	}
	f.log = fsm.NewLog(f.idx.ApplyCatalog, f.s.ApplyCatalog)
	return f
}

func (f *fixture) worker(id uint64, ranks int) {
	f.t.Helper()
	w := fsm.Worker{WorkerID: id, ModelName: "m", Endpoint: fmt.Sprintf("http://w%d", id), BlockSize: 16,
		DataParallelSize: uint32(ranks), KVEventsEndpoints: map[uint32]string{}}
	for r := range ranks {
		w.KVEventsEndpoints[uint32(r)] = fmt.Sprintf("tcp://127.0.0.1:%d", 7000+r)
	}
	if res, err := f.log.Upsert(w); err != nil || res.Err != nil {
		f.t.Fatal(err, res.Err)
	}
}

// cache stores blocks with the given local hashes on a rank, as one chain.
func (f *fixture) cache(worker uint64, rank uint32, tier indexer.Tier, parent uint64, locals ...uint64) {
	f.t.Helper()
	ev := indexer.Event{Kind: indexer.EventStored, Tier: tier, HasParent: parent != 0, Parent: parent}
	for _, l := range locals {
		ev.Blocks = append(ev.Blocks, indexer.StoredBlock{Hash: l + 1000, Local: l})
	}
	st, err := f.idx.Apply(indexer.RankKey{Worker: worker, Rank: rank}, indexer.Batch{Events: []indexer.Event{ev}})
	if err != nil || st.Events[indexer.OutcomeOK] != 1 {
		f.t.Fatalf("cache: %+v %v", st, err)
	}
}

// prompt builds a hash-form prompt of n blocks 1..n whose sequence hashes
// are tagged by prefix so that requests share exactly their common prefix.
func prompt(blocks ...uint64) Prompt {
	return Prompt{BlockHashes: blocks, SequenceHashes: indexer.SequenceHashes(blocks), ISL: int64(16 * len(blocks))}
}

func (f *fixture) mustReserve(id string, worker uint64, rank uint32, pr Prompt) {
	f.t.Helper()
	if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: worker, DPRank: rank, Prompt: pr}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) load(worker uint64, rank uint32) RankLoad {
	f.t.Helper()
	for _, pl := range f.s.Loads("", "") {
		for _, l := range pl.Loads {
			if l.WorkerID == worker && l.DPRank == rank {
				return l
			}
		}
	}
	f.t.Fatalf("no load row for %d/%d", worker, rank)
	return RankLoad{}
}

func Test_CostFunctionAndOverlap(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 2)
	f.cache(1, 0, indexer.TierDevice, 0, 1, 2, 3, 4)
	f.cache(2, 0, indexer.TierDevice, 0, 1, 2)
	f.cache(2, 0, indexer.TierHost, 1002, 3, 4)
	f.cache(2, 1, indexer.TierDevice, 0, 1)
	f.cache(2, 1, indexer.TierDisk, 1001, 2, 3, 4, 5)

	// isl = 128 tokens (8 blocks). Costs (weight 1, no load, A = 8):
	//   w1/0: cached 4·16 = 64            → prefill (128−64)/16 = 4    → 12
	//   w2/0: cached (2+0.75·2)·16 = 56   → prefill 4.5                → 12.5
	//   w2/1: cached (1+0.25·4)·16 = 32   → prefill 6                  → 14
	pr := prompt(1, 2, 3, 4, 5, 6, 7, 8)
	sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr})
	if err != nil {
		t.Fatal(err)
	}
	if sel.WorkerID != 1 || sel.DPRank != 0 || sel.EffectivePrefillTokens != 64 || sel.Endpoint != "http://w1" {
		t.Fatalf("selection = %+v", sel)
	}
	want := OverlapSummary{LongestMatched: 64, GPU: 64, CPU: 64, Disk: 64, DP: map[uint32]int64{0: 64}}
	if fmt.Sprint(sel.Overlap) != fmt.Sprint(want) {
		t.Fatalf("overlap = %+v, want %+v", sel.Overlap, want)
	}

	scores, err := f.s.OverlapScores(keyM, pr)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []OverlapRow{
		{WorkerID: 1, DPRank: 0, DeviceBlocks: 4, CreditBlocks: 4},
		{WorkerID: 2, DPRank: 0, DeviceBlocks: 2, HostExt: 2, CreditBlocks: 3.5},
		{WorkerID: 2, DPRank: 1, DeviceBlocks: 1, DiskExt: 4, CreditBlocks: 2},
	}
	if scores.BlockSize != 16 || scores.NumBlocks != 8 || !slices.Equal(scores.Rows, wantRows) {
		t.Fatalf("overlap scores = %+v", scores)
	}

	// Worker 2's summary spans both ranks: gpu = best device prefix (32),
	// cpu = best device+host (64), disk = best over all tiers (80).
	sum := summarize(mustWorker(t, f, 2), mustMatch(t, f, pr.BlockHashes), 16)
	wantSum := OverlapSummary{LongestMatched: 80, GPU: 32, CPU: 64, Disk: 80, DP: map[uint32]int64{0: 32, 1: 16}}
	if fmt.Sprint(sum) != fmt.Sprint(wantSum) {
		t.Fatalf("worker 2 summary = %+v, want %+v", sum, wantSum)
	}
}

func mustWorker(t *testing.T, f *fixture, id uint64) *fsm.Worker {
	t.Helper()
	w, ok := f.log.FSM.Catalog().Worker(id)
	if !ok {
		t.Fatalf("worker %d missing", id)
	}
	return w
}

func mustMatch(t *testing.T, f *fixture, q []uint64) []indexer.Overlap {
	t.Helper()
	o, _, err := f.idx.Match(keyM, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func ptr[T any](v T) *T { return &v }

func Test_LoadSteersSelection(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.cache(1, 0, indexer.TierDevice, 0, 1, 2, 3, 4)
	pr := prompt(1, 2, 3, 4)
	// With no load worker 1 wins on cache (cost 4 vs 8).
	sel, _ := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr})
	if sel.WorkerID != 1 || sel.EffectivePrefillTokens != 0 {
		t.Fatalf("first = %+v", sel)
	}
	// Book unrelated requests on worker 1 until it costs more than worker 2.
	for i := range 3 {
		other := prompt(uint64(100+10*i), uint64(101+10*i), uint64(102+10*i))
		if _, err := f.s.Reserve(ReserveRequest{ID: fmt.Sprint("busy-", i), Partition: keyM, WorkerID: 1, Prompt: other}); err != nil {
			t.Fatal(err)
		}
	}
	// w1: prefill (144 + 0)/16 = 9, decode 9, new 4 → 22; w2: 4 + 0 + 4 = 8.
	sel, _ = f.s.Select(SelectRequest{Partition: keyM, Prompt: pr})
	if sel.WorkerID != 2 || sel.EffectivePrefillTokens != 64 {
		t.Fatalf("under load = %+v", sel)
	}
	// With overlap_score_weight 0 only decode and new blocks count: w1 13, w2 4.
	sel, _ = f.s.Select(SelectRequest{Partition: keyM, Prompt: pr, Override: Override{Params: map[string]float64{"overlap_score_weight": 0}}})
	if sel.WorkerID != 2 {
		t.Fatalf("weight 0 = %+v", sel)
	}
	pls, err := f.s.PotentialLoads(keyM, pr)
	if err != nil {
		t.Fatal(err)
	}
	want := []PotentialLoad{
		{WorkerID: 1, DPRank: 0, PotentialPrefillTokens: 144, PotentialDecodeBlocks: 13, ActiveRequests: 3},
		{WorkerID: 2, DPRank: 0, PotentialPrefillTokens: 64, PotentialDecodeBlocks: 4},
	}
	if !slices.Equal(pls, want) {
		t.Fatalf("potential loads = %+v, want %+v", pls, want)
	}
}

func Test_SharedPrefixDedup(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	a := prompt(1, 2, 3, 4)
	b := prompt(1, 2, 9)
	for id, pr := range map[string]Prompt{"a": a, "b": b} {
		if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: 1, Prompt: pr}); err != nil {
			t.Fatal(err)
		}
	}
	// Blocks 1,2 are shared: 4 + 3 − 2 = 5 unique active blocks.
	if l := f.load(1, 0); l.ActiveDecodeBlocks != 5 || l.ActiveRequests != 2 || l.ActivePrefillTokens != 64+48 {
		t.Fatalf("load = %+v", l)
	}
	// A new prompt sharing 1,2,3 adds 1 block: potential decode 5 + 1.
	pls, _ := f.s.PotentialLoads(keyM, prompt(1, 2, 3, 7))
	if pls[0].PotentialDecodeBlocks != 6 {
		t.Fatalf("potential decode = %v, want 6", pls[0].PotentialDecodeBlocks)
	}
	if err := f.s.PrefillComplete("a"); err != nil {
		t.Fatal(err)
	}
	if err := f.s.PrefillComplete("a"); err != nil { // repeat: no-op
		t.Fatal(err)
	}
	if l := f.load(1, 0); l.ActivePrefillTokens != 48 {
		t.Fatalf("prefill after completion = %d, want 48", l.ActivePrefillTokens)
	}
	if err := f.s.Free("a"); err != nil {
		t.Fatal(err)
	}
	if l := f.load(1, 0); l.ActiveDecodeBlocks != 3 || l.ActiveRequests != 1 || l.ActivePrefillTokens != 48 {
		t.Fatalf("after freeing a = %+v", l)
	}
	if err := f.s.Free("b"); err != nil {
		t.Fatal(err)
	}
	if l := f.load(1, 0); l != (RankLoad{WorkerID: 1}) {
		t.Fatalf("after freeing both = %+v", l)
	}
	if err := f.s.Free("b"); !errors.Is(err, ErrReservationNotFound) {
		t.Fatalf("second free: %v", err)
	}
}

func Test_DecayFraction(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.mustReserve("r1", 1, 0, prompt(1, 2, 3))
	f.mustReserve("r2", 1, 0, prompt(1, 2))
	steps := []struct {
		name  string
		do    func() error
		check float64
	}{
		{"booked", func() error { return nil }, 3},
		// r1 alone holds block 3: it and the new output block weigh 0.5.
		{"decay 0.5", func() error { return f.s.OutputBlock("r1", ptr(0.5)) }, 2 + 0.5 + 0.5},
		{"plain block", func() error { return f.s.OutputBlock("r1", nil) }, 2 + 0.5 + 0.5 + 1},
		// Blocks 1,2 become r1's alone: they take its weight 0.5 too.
		{"free r2", func() error { return f.s.Free("r2") }, 3*0.5 + 0.5 + 1},
		// A new fraction re-weighs every covered block, output blocks included.
		{"decay 0.25", func() error { return f.s.OutputBlock("r1", ptr(0.25)) }, 3*0.25 + 3*0.25},
		{"free r1", func() error { return f.s.Free("r1") }, 0},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := f.load(1, 0).ActiveDecodeBlocks; math.Abs(got-st.check) > 1e-9 {
			t.Fatalf("%s: decode blocks = %v, want %v", st.name, got, st.check)
		}
	}
	if err := f.s.OutputBlock("r1", ptr(0.5)); !errors.Is(err, ErrReservationNotFound) {
		t.Fatalf("output block on freed: %v", err)
	}
	if err := f.s.OutputBlock("x", ptr(1.5)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("decay 1.5: %v", err)
	}
}

func Test_ReserveValidation(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 2)
	f.cache(1, 1, indexer.TierDevice, 0, 1, 2)
	tests := []struct {
		name string
		req  ReserveRequest
		want error
	}{
		{"ok computes prefill", ReserveRequest{ID: "a", Partition: keyM, WorkerID: 1, DPRank: 1, Prompt: prompt(1, 2, 3)}, nil},
		{"duplicate", ReserveRequest{ID: "a", Partition: keyM, WorkerID: 1, Prompt: prompt(1)}, ErrDuplicateReservation},
		{"unknown worker", ReserveRequest{ID: "b", Partition: keyM, WorkerID: 9, Prompt: prompt(1)}, ErrWorkerNotFound},
		{"unknown rank", ReserveRequest{ID: "b", Partition: keyM, WorkerID: 1, DPRank: 5, Prompt: prompt(1)}, ErrWorkerNotFound},
		{"unknown model", ReserveRequest{ID: "b", Partition: fsm.PartitionKey{Model: "x", Tenant: "default"}, WorkerID: 1, Prompt: prompt(1)}, ErrWorkerNotFound},
		{"prefill above isl", ReserveRequest{ID: "b", Partition: keyM, WorkerID: 1, Prompt: prompt(1), EffectivePrefill: ptr[int64](17)}, ErrInvalid},
		{"no id", ReserveRequest{Partition: keyM, WorkerID: 1, Prompt: prompt(1)}, ErrInvalid},
		{"isl zero", ReserveRequest{ID: "b", Partition: keyM, WorkerID: 1, Prompt: Prompt{}, EffectivePrefill: ptr[int64](0)}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.s.Reserve(tt.req)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// Rank 1 holds 2 of the 3 blocks: the node computed 48 − 32 = 16.
	if l := f.load(1, 1); l.ActivePrefillTokens != 16 {
		t.Fatalf("computed prefill = %d, want 16", l.ActivePrefillTokens)
	}
}

func Test_SelectAndReserve(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	if _, err := f.s.Select(SelectRequest{Partition: fsm.PartitionKey{Model: "nope", Tenant: "default"}, Prompt: prompt(1)}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("unknown model: %v", err)
	}
	sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2), Reserve: true})
	if err != nil || len(sel.ReservationID) != 36 {
		t.Fatalf("generated id: %+v %v", sel, err)
	}
	if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1), Reserve: true, ReservationID: sel.ReservationID}); !errors.Is(err, ErrDuplicateReservation) {
		t.Fatalf("duplicate id: %v", err)
	}
	if l := f.load(1, 0); l.ActiveRequests != 1 || l.ActivePrefillTokens != 32 || l.ActiveDecodeBlocks != 2 {
		t.Fatalf("load = %+v", l)
	}
	// Deleting the worker drops its reservations on every node.
	if res, err := f.log.Apply(fsm.DeleteWorker{WorkerID: 1}); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if err := f.s.Free(sel.ReservationID); !errors.Is(err, ErrReservationNotFound) {
		t.Fatalf("free after delete: %v", err)
	}
	if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1)}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("select after delete: %v", err)
	}
}

func Test_TokenPrompt(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	tokens := make([]uint32, 40) // 2 full blocks of 16 and a partial one
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	blocks := indexer.BlockHashes(tokens, 16, "")
	f.cache(2, 0, indexer.TierDevice, 0, blocks...)
	sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: Prompt{Tokens: tokens, HasTokens: true}})
	if err != nil || sel.WorkerID != 2 || sel.EffectivePrefillTokens != 8 || sel.Overlap.GPU != 32 {
		t.Fatalf("selection = %+v %v", sel, err)
	}
	// A LoRA changes every block hash: no cache hit.
	scores, _ := f.s.OverlapScores(keyM, Prompt{Tokens: tokens, HasTokens: true, LoraName: "x"})
	for _, r := range scores.Rows {
		if r.DeviceBlocks != 0 {
			t.Fatalf("lora prompt matched %+v", r)
		}
	}
}

func Test_TieBreakAndTemperature(t *testing.T) {
	counts := func(f *fixture, req SelectRequest, n int) map[uint64]int {
		c := map[uint64]int{}
		for range n {
			sel, err := f.s.Select(req)
			if err != nil {
				t.Fatal(err)
			}
			c[sel.WorkerID]++
		}
		return c
	}
	f := newFixture(t)
	for id := range uint64(3) {
		f.worker(id+1, 1)
	}
	// Equal costs: every worker is chosen, roughly a third of the time.
	c := counts(f, SelectRequest{Partition: keyM, Prompt: prompt(1, 2)}, 600)
	for id := range uint64(3) {
		if c[id+1] < 120 {
			t.Fatalf("tie-break not uniform: %v", c)
		}
	}
	// Make worker 1 cheaper (cache hit); temperature 0 always picks it.
	f.cache(1, 0, indexer.TierDevice, 0, 1, 2)
	if c := counts(f, SelectRequest{Partition: keyM, Prompt: prompt(1, 2)}, 100); c[1] != 100 {
		t.Fatalf("temperature 0 with a strict minimum: %v", c)
	}
	// Temperature 1: costs 2 (w1) and 4 (w2, w3) → weights 1, e^-1, e^-1.
	// Expected share of w1 = 1/(1+2/e) ≈ 0.576.
	c = counts(f, SelectRequest{Partition: keyM, Prompt: prompt(1, 2), Override: Override{Params: map[string]float64{"router_temperature": 1}}}, 2000)
	if share := float64(c[1]) / 2000; share < 0.52 || share > 0.63 || c[2] == 0 || c[3] == 0 {
		t.Fatalf("temperature 1 shares: %v", c)
	}
}

func Test_ExpirySweep(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ActiveRequestExpiry = time.Minute })
	f.worker(1, 1)
	f.mustReserve("old", 1, 0, prompt(1, 2))
	f.clock = f.clock.Add(30 * time.Second)
	f.mustReserve("new", 1, 0, prompt(1, 3))
	f.clock = f.clock.Add(30 * time.Second)
	if n := f.s.SweepExpired(); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	if err := f.s.PrefillComplete("old"); !errors.Is(err, ErrReservationNotFound) {
		t.Fatalf("expired reservation still live: %v", err)
	}
	if l := f.load(1, 0); l.ActiveRequests != 1 || l.ActiveDecodeBlocks != 2 {
		t.Fatalf("load after sweep = %+v", l)
	}
	f.clock = f.clock.Add(time.Hour)
	f.s.SweepExpired()
	if l := f.load(1, 0); l != (RankLoad{WorkerID: 1}) {
		t.Fatalf("load after second sweep = %+v", l)
	}
}

func Test_IncompleteWorkerKeepsLoad(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.mustReserve("r", 1, 0, prompt(1))
	if res, err := f.log.Apply(fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{Endpoint: ptr("")}}); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1)}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("incomplete worker selected: %v", err)
	}
	if l := f.load(1, 0); l.ActiveRequests != 1 {
		t.Fatalf("load of incomplete worker = %+v", l)
	}
	if _, err := f.s.Reserve(ReserveRequest{ID: "r2", Partition: keyM, WorkerID: 1, Prompt: prompt(1)}); !errors.Is(err, ErrWorkerNotFound) {
		t.Fatalf("reserve on incomplete worker: %v", err)
	}
	if err := f.s.Free("r"); err != nil {
		t.Fatal(err)
	}
}
