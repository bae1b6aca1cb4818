package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/indexer"
)

// recount computes every rank's load of a partition from its reservations
// alone, the slow obvious way.
func recount(p *partition) map[indexer.RankKey][3]int64 {
	type blockKey struct {
		rank *rankLoad
		hash uint64
	}
	holders := map[blockKey][]*reservation{}
	out := map[indexer.RankKey][3]int64{}
	for _, r := range p.reservations {
		for _, h := range r.blocks {
			k := blockKey{r.rank, h}
			holders[k] = append(holders[k], r)
		}
		v := out[r.rank.key]
		v[0] += r.outFull*unit + r.outFrac*r.frac
		if !r.prefillDone {
			v[1] += r.prefill
		}
		v[2]++
		out[r.rank.key] = v
	}
	for k, rs := range holders {
		v := out[k.rank.key]
		if len(rs) == 1 {
			v[0] += rs[0].weight()
		} else {
			v[0] += unit
		}
		out[k.rank.key] = v
	}
	return out
}

// Test_LoadAccountingProperties drives random lifecycles and checks after
// every step that the incremental decode/prefill/request counts equal a
// recount, that the bisection of active prefixes equals the walk, and that
// everything returns to exactly zero.
func Test_LoadAccountingProperties(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			f := newFixture(t)
			f.worker(1, 2)
			f.worker(2, 1)
			ranks := []indexer.RankKey{{Worker: 1, Rank: 0}, {Worker: 1, Rank: 1}, {Worker: 2, Rank: 0}}
			// Prompts share prefixes drawn from a small alphabet. Two seeds in
			// three also book requests whose hashes cannot be verified: no
			// block hashes, raw block values as "sequence hashes", or a real
			// chain spliced after a foreign first hash, which looks chained
			// from the second hash on.
			newPrompt := func() Prompt {
				blocks := make([]uint64, 1+rng.IntN(12))
				for i := range blocks {
					blocks[i] = 1 + rng.Uint64N(3)
				}
				pr := prompt(blocks...)
				if seed%3 != 0 && rng.IntN(3) == 0 {
					switch rng.IntN(3) {
					case 0:
						pr.BlockHashes = nil
					case 1:
						pr.SequenceHashes, pr.BlockHashes = slices.Clone(blocks), nil
					default:
						pr.SequenceHashes = slices.Clone(pr.SequenceHashes)
						pr.SequenceHashes[0] = 999
						pr.BlockHashes = nil
					}
				}
				return pr
			}
			live := []string{}
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op < 4 || len(live) == 0:
					id := fmt.Sprint("r", step)
					rk := ranks[rng.IntN(len(ranks))]
					if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: rk.Worker, DPRank: rk.Rank,
						Prompt: newPrompt(), EffectivePrefill: ptr(int64(rng.IntN(16)))}); err != nil {
						t.Fatal(err)
					}
					live = append(live, id)
				case op < 6:
					var decay *float64
					if rng.IntN(2) == 0 {
						decay = ptr(float64(rng.IntN(5)) / 4)
					}
					if err := f.s.OutputBlock(live[rng.IntN(len(live))], decay); err != nil {
						t.Fatal(err)
					}
				case op < 7:
					if err := f.s.PrefillComplete(live[rng.IntN(len(live))]); err != nil {
						t.Fatal(err)
					}
				default:
					i := rng.IntN(len(live))
					if err := f.s.Free(live[i]); err != nil {
						t.Fatal(err)
					}
					live = slices.Delete(live, i, i+1)
				}
				p := f.s.partition(keyM)
				want := recount(p)
				for _, rl := range p.byKey {
					w := want[rl.key]
					if got := [3]int64{rl.decode, rl.prefill, int64(rl.requests)}; got != w {
						t.Fatalf("step %d rank %v: (decode, prefill, requests) = %v, recount %v", step, rl.key, got, w)
					}
				}
				q := newPrompt()
				fast, slow := make([]int32, p.slots), make([]int32, p.slots)
				p.activePrefixes(&q, fast)
				p.walkActivePrefixes(q.SequenceHashes, slow)
				if !slices.Equal(fast, slow) {
					t.Fatalf("step %d query %v: prefixes %v, walk %v", step, q.SequenceHashes, fast, slow)
				}
			}
			for _, id := range live {
				if err := f.s.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			p := f.s.partition(keyM)
			for _, rl := range p.byKey {
				if rl.decode != 0 || rl.prefill != 0 || rl.requests != 0 || rl.uniqueBlocks != 0 {
					t.Fatalf("rank %v not back to zero: %+v", rl.key, *rl)
				}
			}
			if len(p.active) != 0 || len(p.handles) != 0 || p.fifo.Len() != 0 {
				t.Fatalf("partition not empty: %d active, %d handles, %d queued", len(p.active), len(p.handles), p.fifo.Len())
			}
		})
	}
}
