package indexer

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvselect/kvselect/fsm"
)

// Test_MatchWhileApplying applies event scripts to one partition from a
// goroutine per rank while other goroutines match, so that matches run
// between the steps of every kind of change: long stored events,
// removals that leave holes, aliases and reused engine hashes, clears, a
// reset of a large rank, the growth of byKey and a compaction. Every
// match must agree with the reference walk run in the same hold of the
// match lock; a rank that no script touches must always score the same;
// and at the end the index must hold its invariants and answer exactly as
// the same scripts applied one after another do.
func Test_MatchWhileApplying(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	paths := make([][]uint64, 10)
	for i := range paths {
		paths[i] = make([]uint64, 8+rng.IntN(50)) // up to 57 blocks: events span several steps
		for j := range paths[i] {
			paths[i][j] = 1 + rng.Uint64N(3) // shared prefixes
		}
	}
	static, bulk := RankKey{Worker: 4, Rank: 1}, RankKey{Worker: 4, Rank: 0}
	scripts := map[RankKey][]Batch{}
	for w := range 3 {
		for r := range 2 {
			rk := RankKey{Worker: uint64(w + 1), Rank: uint32(r)}
			for i := range 250 {
				b := Batch{Seq: uint64(i), HasSeq: true, Reset: rng.IntN(100) == 0}
				for range 1 + rng.IntN(3) {
					b.Events = append(b.Events, *randomEvent(rng, nil, paths[rng.IntN(len(paths))]))
				}
				scripts[rk] = append(scripts[rk], b)
			}
		}
	}
	// The bulk rank grows byKey past 16 k nodes, removes three quarters of
	// them (a compaction), then stores again and resets.
	chain := make([]uint64, 20000)
	for i := range chain {
		chain[i] = 1000 + uint64(i)
	}
	store := func(from, to int) Batch {
		ev := Event{Kind: EventStored, Tier: TierDevice, HasParent: from > 0}
		if from > 0 {
			ev.Parent = engineHash(chain[from-1])
		}
		for _, l := range chain[from:to] {
			ev.Blocks = append(ev.Blocks, StoredBlock{Hash: engineHash(l), Local: l})
		}
		return Batch{Events: []Event{ev}}
	}
	for i := 0; i < len(chain); i += 500 {
		scripts[bulk] = append(scripts[bulk], store(i, i+500))
	}
	for i := len(chain); i > 2000; i -= 500 {
		scripts[bulk] = append(scripts[bulk], Batch{Events: []Event{*removed(TierDevice, chain[i-500:i]...)}})
	}
	scripts[bulk] = append(scripts[bulk], store(2000, 6000), Batch{Reset: true}, store(0, 300))

	queries := append(slices.Clone(paths), chain[:400])
	build := func() *Indexer {
		h := newCatalogHarness(t)
		for w := range 4 {
			h.apply(fsm.UpsertWorker{Worker: testWorker(uint64(w+1), "m", 16, 2)})
		}
		ev := Event{Kind: EventStored, Tier: TierDevice}
		for i, l := range paths[0] {
			ev.Blocks = append(ev.Blocks, StoredBlock{Hash: uint64(i + 1), Local: l})
		}
		if st, err := h.x.Apply(static, Batch{Events: []Event{ev}}); err != nil || st.Events[OutcomeOK] != 1 {
			t.Fatal(st, err)
		}
		return h.x
	}
	staticScore := func(out []Overlap) uint32 {
		for _, o := range out {
			if o.Worker == static.Worker && o.Rank == static.Rank {
				return o.Device
			}
		}
		return 0
	}
	apply := func(x *Indexer, rk RankKey) {
		for i := range scripts[rk] {
			if _, err := x.Apply(rk, scripts[rk][i]); err != nil {
				t.Error(err)
				return
			}
		}
	}

	x := build()
	var writers, readers sync.WaitGroup
	var done atomic.Bool
	var matches atomic.Int64
	for rk := range scripts {
		writers.Add(1)
		go func() { defer writers.Done(); apply(x, rk) }()
	}
	for g := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			out := make([]Overlap, 0, 8)
			for i := g; !done.Load() || i < 200; i++ {
				q := queries[i%len(queries)]
				x.mu.RLock()
				p := x.parts[keyM]
				x.mu.RUnlock()
				p.mu.RLock()
				got, want := p.ix.match(q, nil), p.ix.matchWalk(q, nil)
				p.mu.RUnlock()
				if !slices.Equal(got, want) {
					t.Errorf("query %d:\n match %+v\n walk  %+v", i%len(queries), got, want)
					return
				}
				var err error
				if out, _, err = x.Match(keyM, q, out[:0]); err != nil {
					t.Error(err)
					return
				}
				if q0 := i%len(queries) == 0; q0 && (staticScore(got) != uint32(len(paths[0])) || staticScore(out) != uint32(len(paths[0]))) {
					t.Errorf("untouched rank scored %d and %d, want %d", staticScore(got), staticScore(out), len(paths[0]))
					return
				}
				matches.Add(1)
			}
		}()
	}
	writers.Wait()
	done.Store(true)
	readers.Wait()
	t.Logf("%d matches checked while applying", matches.Load())

	p := x.parts[keyM]
	p.lockApply()
	err := p.ix.check()
	p.unlockApply()
	if err != nil {
		t.Fatal(err)
	}
	seq := build()
	keys := slices.SortedFunc(func(yield func(RankKey) bool) {
		for rk := range scripts {
			if !yield(rk) {
				return
			}
		}
	}, compareRankKeys)
	for _, rk := range keys {
		apply(seq, rk)
	}
	if got, want := x.Stats(), seq.Stats(); !slices.Equal(got, want) {
		t.Fatalf("stats after concurrent applies %+v, one after another %+v", got, want)
	}
	for i, q := range queries {
		got, _, _ := x.Match(keyM, q, nil)
		want, _, _ := seq.Match(keyM, q, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("query %d after concurrent applies %+v, one after another %+v", i, got, want)
		}
	}
	for _, rk := range keys {
		a, aok := x.Watermark(rk)
		b, bok := seq.Watermark(rk)
		if a != b || aok != bok {
			t.Fatalf("rank %v watermark %d/%v, one after another %d/%v", rk, a, aok, b, bok)
		}
	}
}
