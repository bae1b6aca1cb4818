package indexer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/fsm"
)

// catalogHarness feeds catalog commands to an FSM and the resulting diffs
// to an Indexer, like the cluster watcher does.
type catalogHarness struct {
	t   *testing.T
	log *fsm.Log
	x   *Indexer
}

func newCatalogHarness(t *testing.T) *catalogHarness {
	x := New(slog.New(slog.DiscardHandler))
	return &catalogHarness{t: t, log: fsm.NewLog(x.ApplyCatalog), x: x}
}

func (h *catalogHarness) apply(c fsm.Command) {
	h.t.Helper()
	res, err := h.log.Apply(c)
	if err != nil || res.Err != nil {
		h.t.Fatal(err, res.Err)
	}
}

func testWorker(id uint64, model string, bs uint32, ranks int) fsm.Worker {
	w := fsm.Worker{WorkerID: id, ModelName: model, Endpoint: "http://w", BlockSize: bs,
		DataParallelSize: uint32(ranks), KVEventsEndpoints: map[uint32]string{}}
	for r := range ranks {
		w.KVEventsEndpoints[uint32(r)] = fmt.Sprintf("tcp://127.0.0.1:%d", 6000+r)
	}
	return w
}

var keyM = fsm.PartitionKey{Model: "m", Tenant: "default"}

func Test_IndexerFollowsCatalog(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
	h.apply(fsm.UpsertWorker{Worker: testWorker(2, "m", 16, 1)})

	for _, rk := range []RankKey{{Worker: 1, Rank: 0}, {Worker: 1, Rank: 1}, {Worker: 2, Rank: 0}} {
		if _, err := h.x.Apply(rk, Batch{Seq: 5, HasSeq: true, Events: []Event{*stored(TierDevice, 0, 1, 2, 3)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.x.Apply(RankKey{Worker: 1, Rank: 7}, Batch{Events: []Event{*stored(TierDevice, 0, 1)}}); !errors.Is(err, ErrUnknownRank) {
		t.Fatalf("event for rank 7 of a 2-rank worker: %v", err)
	}
	got, bs, err := h.x.Match(keyM, []uint64{1, 2, 3}, nil)
	if err != nil || bs != 16 || len(got) != 3 {
		t.Fatalf("match = %+v bs=%d err=%v", got, bs, err)
	}
	if seq, ok := h.x.Watermark(RankKey{Worker: 1, Rank: 1}); !ok || seq != 5 {
		t.Fatalf("watermark = %d %v", seq, ok)
	}

	// Shrinking worker 1 to one rank drops rank 1's blocks.
	h.apply(fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{
		DataParallelSize: ptr[uint32](1), KVEventsEndpoint: ptr("tcp://127.0.0.1:6000")}})
	got, _, _ = h.x.Match(keyM, []uint64{1, 2, 3}, nil)
	if want := []RankKey{{Worker: 1, Rank: 0}, {Worker: 2, Rank: 0}}; !slices.Equal(rankKeys(got), want) {
		t.Fatalf("after shrink: %v, want %v", rankKeys(got), want)
	}
	// A worker turned incomplete leaves the index; a deleted one too.
	h.apply(fsm.PatchWorker{WorkerID: 2, Patch: fsm.WorkerPatch{Endpoint: ptr("")}})
	h.apply(fsm.DeleteWorker{WorkerID: 1})
	if _, _, err := h.x.Match(keyM, []uint64{1}, nil); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("partition with no schedulable worker: %v", err)
	}
	if st := h.x.Stats(); len(st) != 0 {
		t.Fatalf("stats after all workers left: %+v", st)
	}
}

func Test_IndexerBlockSizeChangeResets(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	h.apply(fsm.UpsertWorker{Worker: testWorker(2, "m", 32, 1)}) // incomplete: mismatch
	h.x.Apply(RankKey{Worker: 1, Rank: 0}, Batch{Events: []Event{*stored(TierDevice, 0, 1, 2)}})
	if _, err := h.x.Apply(RankKey{Worker: 2, Rank: 0}, Batch{Events: []Event{*stored(TierDevice, 0, 1)}}); !errors.Is(err, ErrUnknownRank) {
		t.Fatalf("incomplete worker's events must be dropped, got %v", err)
	}
	// Worker 1 leaves: worker 2 now sets the block size, and starts empty.
	h.apply(fsm.DeleteWorker{WorkerID: 1})
	got, bs, err := h.x.Match(keyM, []uint64{1, 2}, nil)
	if err != nil || bs != 32 || len(got) != 0 {
		t.Fatalf("match = %+v bs=%d err=%v", got, bs, err)
	}
}

func rankKeys(os []Overlap) []RankKey {
	out := make([]RankKey, len(os))
	for i, o := range os {
		out[i] = RankKey{Worker: o.Worker, Rank: o.Rank}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func Test_DumpFormat(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	h.x.Apply(RankKey{Worker: 1, Rank: 0}, Batch{Seq: 9, HasSeq: true, Events: []Event{
		{Kind: EventStored, Tier: TierDevice, Blocks: []StoredBlock{{Hash: 100, Local: 1}, {Hash: 101, Local: 2}}},
		{Kind: EventStored, Tier: TierHost, HasParent: true, Parent: 101, Blocks: []StoredBlock{{Hash: 102, Local: 3}}},
	}})
	raw, err := json.Marshal(h.x.Dump())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"m:default":{"model_name":"m","tenant_id":"default","block_size":16,"events":[` +
		`{"worker_id":1,"storage_tier":"device","event":{"event_id":1,"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":100,"tokens_hash":1},{"block_hash":101,"tokens_hash":2}]}}}},` +
		`{"worker_id":1,"storage_tier":"host_pinned","event":{"event_id":2,"dp_rank":0,"data":{"stored":{"parent_hash":101,"blocks":[{"block_hash":102,"tokens_hash":3}]}}}}],` +
		`"watermarks":[{"worker_id":1,"dp_rank":0,"seq":9}]}}`
	if string(raw) != want {
		t.Fatalf("dump =\n%s\nwant\n%s", raw, want)
	}
}

// Test_DumpRoundTrip loads a dump of a randomly built index into a fresh
// indexer and checks that both answer every query identically and dump
// identically.
func Test_DumpRoundTrip(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			src, dst := newCatalogHarness(t), newCatalogHarness(t)
			for _, h := range []*catalogHarness{src, dst} {
				h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
				h.apply(fsm.UpsertWorker{Worker: testWorker(2, "m", 16, 2)})
			}
			paths := randomFill(src, keyM, seed, 300)
			d := src.x.Dump()
			raw, _ := json.Marshal(d)
			var decoded Dump
			if err := json.Unmarshal(raw, &decoded); err != nil {
				t.Fatal(err)
			}
			st, err := dst.x.LoadPartitionDump(keyM, decoded["m:default"])
			if err != nil || st.Skipped != 0 {
				t.Fatalf("load: %+v %v", st, err)
			}
			if err := dst.x.parts[keyM].ix.check(); err != nil {
				t.Fatal(err)
			}
			for _, q := range paths {
				a, _, _ := src.x.Match(keyM, q, nil)
				b, _, _ := dst.x.Match(keyM, q, nil)
				if !slices.Equal(a, b) {
					t.Fatalf("query %v: source %+v, loaded %+v", q, a, b)
				}
			}
			again, _ := json.Marshal(dst.x.Dump())
			if string(again) != string(raw) {
				t.Fatalf("dump of the loaded index differs:\n%s\n%s", raw, again)
			}
		})
	}
}

func Test_LoadRejectsOtherBlockSize(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	if _, err := h.x.LoadPartitionDump(keyM, &PartitionDump{BlockSize: 32}); !errors.Is(err, ErrBadDump) {
		t.Fatalf("err = %v", err)
	}
}

// Test_WorkerMovesPartition: the only worker of model "b" moves to model
// "a". Partition "b" is dropped and "a" gains the worker, in whichever
// order they are reconciled, and the worker's events keep flowing.
func Test_WorkerMovesPartition(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "b", 16, 1)})
	h.apply(fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{ModelName: ptr("a")}})
	if _, err := h.x.Apply(RankKey{Worker: 1, Rank: 0}, Batch{Events: []Event{*stored(TierDevice, 0, 1, 2)}}); err != nil {
		t.Fatalf("events after the move: %v", err)
	}
	got, _, err := h.x.Match(fsm.PartitionKey{Model: "a", Tenant: "default"}, []uint64{1, 2}, nil)
	if err != nil || len(got) != 1 || got[0].Device != 2 {
		t.Fatalf("match in the new partition = %+v, %v", got, err)
	}
	if _, _, err := h.x.Match(fsm.PartitionKey{Model: "b", Tenant: "default"}, []uint64{1}, nil); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("old partition still there: %v", err)
	}
}

// Test_BlockSizeResetForgetsDroppedWorkers: when a partition's block size
// changes, workers that are no longer indexed stop routing to it.
func Test_BlockSizeResetForgetsDroppedWorkers(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	h.apply(fsm.UpsertWorker{Worker: testWorker(2, "m", 16, 1)})
	h.apply(fsm.UpsertWorker{Worker: testWorker(3, "m", 32, 1)}) // incomplete
	// Workers 1 and 2 switch to 32 (losing seniority to worker 3 in that
	// order): the partition becomes 32, worker 1 and 2 are schedulable
	// again at 32, but in between worker 2 was the odd one out.
	h.apply(fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{BlockSize: ptr[uint32](32)}})
	if _, err := h.x.Apply(RankKey{Worker: 1, Rank: 0}, Batch{Events: []Event{*stored(TierDevice, 0, 1)}}); !errors.Is(err, ErrUnknownRank) {
		t.Fatalf("worker 1 is incomplete (32 vs 16) but its events were accepted: %v", err)
	}
	h.apply(fsm.DeleteWorker{WorkerID: 2})
	// Now 1 (32) and 3 (32) remain; the partition is 32 and both index.
	for _, w := range []uint64{1, 3} {
		if _, err := h.x.Apply(RankKey{Worker: w, Rank: 0}, Batch{Events: []Event{*stored(TierDevice, 0, 1)}}); err != nil {
			t.Fatalf("worker %d after the reset: %v", w, err)
		}
	}
	h.x.mu.RLock()
	defer h.x.mu.RUnlock()
	for id, p := range h.x.byWorker {
		if _, ok := p.workers[id]; !ok || h.x.parts[p.key] != p {
			t.Fatalf("worker %d routes to a partition that does not index it", id)
		}
	}
}

func Test_BatchResetAndWatermark(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
	rk := RankKey{Worker: 1, Rank: 0}
	if bs, ok := h.x.BlockSize(rk); !ok || bs != 16 {
		t.Fatalf("BlockSize = %d %v", bs, ok)
	}
	if _, ok := h.x.BlockSize(RankKey{Worker: 9, Rank: 0}); ok {
		t.Fatalf("BlockSize of an unknown worker")
	}
	if _, err := h.x.Apply(rk, Batch{Seq: 3, HasSeq: true, Events: []Event{*stored(TierDevice, 0, 1, 2)}}); err != nil {
		t.Fatal(err)
	}
	if seq, _ := h.x.Watermark(rk); seq != 3 {
		t.Fatalf("watermark %d, want 3", seq)
	}
	// Reset clears blocks and watermark before the batch's own events.
	st, err := h.x.Apply(rk, Batch{Reset: true, Events: []Event{*stored(TierDevice, 0, 7)}})
	if err != nil || st.BlocksRemoved != 2 {
		t.Fatalf("reset: %+v %v", st, err)
	}
	if _, ok := h.x.Watermark(rk); ok {
		t.Fatalf("reset kept the watermark")
	}
	if got, _, _ := h.x.Match(keyM, []uint64{7}, nil); len(got) != 1 {
		t.Fatalf("events after the reset not applied: %+v", got)
	}
	if !h.x.SetWatermark(RankKey{Worker: 1, Rank: 1}, 9) || h.x.SetWatermark(RankKey{Worker: 1, Rank: 5}, 9) {
		t.Fatalf("SetWatermark on known/unknown ranks")
	}
	if seq, ok := h.x.Watermark(RankKey{Worker: 1, Rank: 1}); !ok || seq != 9 {
		t.Fatalf("watermark = %d %v", seq, ok)
	}
}

// Test_MatchAllocatesNothing pins the hot path's allocations at zero
// (without -race, under which some values escape that do not otherwise).
func Test_MatchAllocatesNothing(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
	q := []uint64{1, 2, 3, 4, 5, 6}
	for r := range 2 {
		if _, err := h.x.Apply(RankKey{Worker: 1, Rank: uint32(r)}, Batch{Events: []Event{*stored(TierDevice, 0, q[:3+r]...)}}); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]Overlap, 0, 8)
	var err error
	allocs := testing.AllocsPerRun(100, func() { out, _, err = h.x.Match(keyM, q, out[:0]) })
	if err != nil || len(out) != 2 || out[0].Device != 3 || out[1].Device != 4 {
		t.Fatalf("Match = %+v, %v", out, err)
	}
	if allocs != 0 && !raceEnabled {
		t.Fatalf("Match: %v allocations a call", allocs)
	}
}
