package scheduler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// Test_ConcurrentUse runs selections, bookings, lifecycle calls, index
// events, inspection reads and catalog changes at the same time (the race
// detector watches the locking), then frees everything and checks that
// every rank's load is exactly zero and matched a recount throughout.
func Test_ConcurrentUse(t *testing.T) {
	f := newFixture(t)
	for id := range uint64(4) {
		f.worker(id+1, 2)
	}
	prompts := make([]Prompt, 16)
	for i := range prompts {
		blocks := []uint64{1, 2, uint64(3 + i%4), uint64(10 + i)}
		prompts[i] = prompt(blocks...)
	}
	ids := make(chan string, 1024)
	var wg sync.WaitGroup
	seed := uint64(0)
	run := func(fn func(rng *rand.Rand)) {
		seed++
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			fn(rand.New(rand.NewPCG(seed, 1)))
		}(seed)
	}
	run(func(rng *rand.Rand) { // bookers
		for i := range 300 {
			id := fmt.Sprint("s", i)
			_, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompts[rng.IntN(len(prompts))], Reserve: true, ReservationID: id})
			if err == nil {
				ids <- id
			} else if !errors.Is(err, ErrNotReady) {
				t.Error(err)
				return
			}
		}
	})
	run(func(rng *rand.Rand) { // select-then-reserve
		for i := range 300 {
			sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompts[rng.IntN(len(prompts))]})
			if err != nil {
				continue
			}
			id := fmt.Sprint("r", i)
			if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: sel.WorkerID, DPRank: sel.DPRank,
				Prompt: prompt(prompts[rng.IntN(len(prompts))].BlockHashes...)}); err == nil {
				ids <- id
			}
		}
	})
	var lifecycle sync.WaitGroup
	lifecycle.Add(1)
	go func() { // lifecycle: prefill, output blocks, free
		defer lifecycle.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		for id := range ids {
			f.s.PrefillComplete(id)
			if rng.IntN(2) == 0 {
				f.s.OutputBlock(id, ptr(0.5))
			}
			f.s.OutputBlock(id, nil)
			if err := f.s.Free(id); err != nil && !errors.Is(err, ErrReservationNotFound) {
				t.Error(err)
			}
		}
	}()
	run(func(rng *rand.Rand) { // the index changes under the selections
		for i := range 400 {
			rk := indexer.RankKey{Worker: 1 + rng.Uint64N(4), Rank: uint32(rng.IntN(2))}
			p := prompts[rng.IntN(len(prompts))].BlockHashes
			ev := indexer.Event{Kind: indexer.EventStored}
			if i%3 == 0 {
				ev = indexer.Event{Kind: indexer.EventCleared}
			}
			for j, l := range p {
				ev.Blocks = append(ev.Blocks, indexer.StoredBlock{Hash: uint64(j)<<32 | l, Local: l})
			}
			f.idx.Apply(rk, indexer.Batch{Events: []indexer.Event{ev}})
		}
	})
	run(func(rng *rand.Rand) { // readers
		for range 300 {
			f.s.Loads("", "")
			f.s.PotentialLoads(keyM, prompts[rng.IntN(len(prompts))])
			f.s.OverlapScores(keyM, prompts[rng.IntN(len(prompts))])
			f.idx.Dump()
		}
	})
	run(func(rng *rand.Rand) { // the catalog changes too: ranks come and go
		for i := range 60 {
			w := uint64(1 + rng.IntN(4))
			var patch fsm.WorkerPatch
			switch i % 3 {
			case 0:
				patch.Endpoint = ptr("")
			case 1:
				patch.Endpoint = ptr(fmt.Sprintf("http://w%d", w))
			default:
				patch.DataParallelSize = ptr(uint32(1 + rng.IntN(2)))
				patch.KVEventsEndpoints = &map[uint32]string{0: "tcp://127.0.0.1:7000", 1: "tcp://127.0.0.1:7001"}
				if *patch.DataParallelSize == 1 {
					patch.KVEventsEndpoints = &map[uint32]string{0: "tcp://127.0.0.1:7000"}
				}
			}
			f.logMu.Lock()
			_, err := f.log.Apply(fsm.PatchWorker{WorkerID: w, Patch: patch})
			f.logMu.Unlock()
			if err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	close(ids)
	lifecycle.Wait()

	p := f.s.partition(keyM)
	p.mu.Lock()
	defer p.mu.Unlock()
	want := recount(p)
	for _, rl := range p.byKey {
		if got := [3]int64{rl.decode, rl.prefill, int64(rl.requests)}; got != want[rl.key] || got != [3]int64{} {
			t.Fatalf("rank %v ends with (decode, prefill, requests) = %v, recount %v, want zero", rl.key, got, want[rl.key])
		}
	}
	if len(p.active) != 0 || len(p.reservations) != 0 {
		t.Fatalf("%d active blocks and %d reservations left", len(p.active), len(p.reservations))
	}
}
