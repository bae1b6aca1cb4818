package scheduler

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/benchutil"
)

// benchFixture is a partition of 32 workers × 8 ranks. Each rank caches a
// few 128-block prompts that share a 32-block system prompt with prompts
// cached elsewhere; `reservations` requests are booked across the ranks.
// With shedding, the model has both busy thresholds, set so high that no
// rank is busy: every selection checks every rank and sheds nothing.
func benchFixture(b *testing.B, reservations int, shedding bool) (*Scheduler, *indexer.Indexer, [][]uint64) {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	idx := indexer.New(quiet)
	cfg := DefaultConfig()
	cfg.Seed = 7
	s, err := New(cfg, idx, quiet)
	if err != nil {
		b.Fatal(err)
	}
	log := fsm.NewLog(idx.ApplyCatalog, s.ApplyCatalog)
	for id := range uint64(32) {
		w := fsm.Worker{WorkerID: id, ModelName: "m", Endpoint: "http://w", BlockSize: 16,
			DataParallelSize: 8, KVEventsEndpoints: map[uint32]string{}, TotalKVBlocks: 1 << 20}
		for r := range uint32(8) {
			w.KVEventsEndpoints[r] = fmt.Sprintf("tcp://127.0.0.1:%d", 6000+r)
		}
		if _, err := log.Upsert(w); err != nil {
			b.Fatal(err)
		}
	}
	if shedding {
		decode, prefill := 0.99, uint64(1)<<40
		if _, err := log.Apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: &decode, ActivePrefillTokens: &prefill}); err != nil {
			b.Fatal(err)
		}
	}
	prompts := make([][]uint64, 1024)
	for i := range prompts {
		p := make([]uint64, 128)
		for j := range p {
			if j < 32 {
				p[j] = uint64(i%16)<<40 | uint64(j) | 1<<62
			} else {
				p[j] = uint64(i)<<40 | uint64(j)
			}
		}
		prompts[i] = p
	}
	for i, p := range prompts {
		rk := indexer.RankKey{Worker: uint64(i % 32), Rank: uint32(i/32) % 8}
		ev := indexer.Event{Kind: indexer.EventStored}
		for j, l := range p {
			ev.Blocks = append(ev.Blocks, indexer.StoredBlock{Hash: uint64(i)<<20 | uint64(j), Local: l})
		}
		if _, err := idx.Apply(rk, indexer.Batch{Events: []indexer.Event{ev}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range reservations {
		p := prompts[(i*7)%len(prompts)]
		_, err := s.Reserve(ReserveRequest{ID: fmt.Sprint("r", i), Partition: keyM,
			WorkerID: uint64(i % 32), DPRank: uint32(i%8) % 8, Prompt: prompt(p...)})
		if err != nil {
			b.Fatal(err)
		}
	}
	return s, idx, prompts
}

// BenchmarkSelect measures /select's work in process (index match, active
// prefixes and the cost function over 256 ranks) against the index match
// alone, with and without 1000 live reservations, and with busy thresholds
// that check every rank (load shedding's cost).
func BenchmarkSelect(b *testing.B) {
	for _, v := range []struct {
		res      int
		shedding bool
	}{{0, false}, {1000, false}, {1000, true}} {
		res := v.res
		s, idx, prompts := benchFixture(b, res, v.shedding)
		rng := rand.New(rand.NewPCG(1, 1))
		order := make([]int, 4096)
		for i := range order {
			order[i] = rng.IntN(len(prompts))
		}
		name := fmt.Sprintf("select-256-ranks/reservations=%d", res)
		if v.shedding {
			name += "/busy-thresholds"
		}
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := range b.N {
				pr := prompt(prompts[order[i%len(order)]]...)
				t0 := time.Now()
				if _, err := s.Select(SelectRequest{Partition: keyM, Prompt: pr}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "selects/s")
			benchutil.ReportPercentiles(b, lat)
		})
		if res > 0 || v.shedding {
			continue
		}
		b.Run("match-only-baseline", func(b *testing.B) {
			var out []indexer.Overlap
			for i := range b.N {
				out, _, _ = idx.Match(keyM, prompts[order[i%len(order)]], out[:0])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "matches/s")
		})
	}
}
