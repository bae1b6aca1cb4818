package scheduler

import (
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// The suite every policy passes (SPEC §6.4): whatever it ranks by, it
// never picks a rank the scheduler found ineligible, it is deterministic
// under a seed, and it allocates nothing per rank.

func usePolicy(name string) Override { return Override{Policy: name} }

// Test_EveryPolicyRespectsEligibility: with one worker busy and one rank
// stale, no policy ever picks either, over many selections with bookings
// piling up (which is what moves load-driven policies around).
func Test_EveryPolicyRespectsEligibility(t *testing.T) {
	for _, name := range PolicyNames() {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.sizedWorker(1, 2, 100)
			f.sizedWorker(2, 1, 100)
			f.sizedWorker(3, 1, 100)
			f.sizedWorker(4, 1, 100)
			f.cache(4, 0, indexer.TierDevice, 0, 1, 2, 3, 4) // the best prefix is on the stale rank
			f.s.SetStale(map[indexer.RankKey]struct{}{{Worker: 4, Rank: 0}: {}})
			f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: ptr(0.5)})
			// Worker 3 busy: 60 decode blocks of 100.
			f.mustReserve("hog", 3, 0, prompt(seqRange(500, 60)...))
			for i := range 300 {
				sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 3, 4, uint64(10+i%7)),
					Override: usePolicy(name), Reserve: i%3 == 0})
				if errors.Is(err, ErrOverloaded) {
					break // every eligible worker filled up: fine, nothing was picked
				}
				if err != nil {
					t.Fatal(err)
				}
				if sel.WorkerID == 3 || sel.WorkerID == 4 {
					t.Fatalf("selection %d chose %d/%d (busy or stale)", i, sel.WorkerID, sel.DPRank)
				}
			}
		})
	}
}

func seqRange(from uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = from + uint64(i)
	}
	return out
}

// Test_EveryPolicyDeterministicUnderSeed: the same seed and the same
// requests give the same choices.
func Test_EveryPolicyDeterministicUnderSeed(t *testing.T) {
	run := func(name string) []uint64 {
		f := newFixture(t)
		for w := range uint64(6) {
			f.worker(w+1, 2)
		}
		f.cache(2, 1, indexer.TierDevice, 0, 1, 2)
		var out []uint64
		for i := range 100 {
			f.clock = f.clock.Add(time.Millisecond)
			sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2, uint64(100+i%9)),
				Override: usePolicy(name), Reserve: true})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sel.WorkerID<<8|uint64(sel.DPRank))
			if i%4 == 0 {
				if err := f.s.PrefillComplete(sel.ReservationID); err != nil {
					t.Fatal(err)
				}
			}
		}
		return out
	}
	for _, name := range PolicyNames() {
		t.Run(name, func(t *testing.T) {
			a, b := run(name), run(name)
			if !slices.Equal(a, b) {
				t.Fatalf("two runs under one seed differ:\n%v\n%v", a, b)
			}
		})
	}
}

// Test_EveryPolicyAllocatesNothingPerRank: a selection allocates the same
// at 8 ranks as at 512.
func Test_EveryPolicyAllocatesNothingPerRank(t *testing.T) {
	allocs := func(name string, workers int) float64 {
		f := newFixture(t)
		for w := range uint64(workers) {
			f.worker(w+1, 1)
		}
		f.cache(1, 0, indexer.TierDevice, 0, 1, 2)
		f.mustReserve("r", 2, 0, prompt(1, 2, 3))
		req := SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 3, 4), Override: usePolicy(name)}
		f.s.Select(req) // warm the partition's scratch
		return testing.AllocsPerRun(50, func() {
			if _, err := f.s.Select(req); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, name := range PolicyNames() {
		t.Run(name, func(t *testing.T) {
			// A little slack: map growth and the race detector move a
			// figure by one or two; per rank would be hundreds.
			small, large := allocs(name, 8), allocs(name, 512)
			if large > small+4 {
				t.Fatalf("allocations per selection: %v at 8 ranks, %v at 512", small, large)
			}
		})
	}
}

// oldCost is the cost the scheduler computed before policies (Dynamo's
// older form): weight·(P + isl − cached)/bs + D + A.
func oldCost(c *Candidate, isl int64, bs uint32, weight float64, track bool) float64 {
	prefill := 0.0
	if track {
		prefill = float64(c.PrefillTokens+isl-c.CachedTokens) / float64(bs)
	}
	return weight*prefill + c.DecodeBlocks + c.NewBlocks
}

// Test_DynamoDefaultEqualsTheOldCost is the differential test: on random
// states (caches on three tiers, bookings, prefill completions) the new
// cost form with default parameters, or with the deprecated weight,
// gives every rank exactly the old cost, and so the same choices.
func Test_DynamoDefaultEqualsTheOldCost(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(7, 7))
	for trial := range 40 {
		f := newFixture(t)
		for w := range uint64(5) {
			f.worker(w+1, 1+rng.IntN(3))
		}
		for range 12 {
			w, r := uint64(1+rng.IntN(5)), uint32(0)
			n := 1 + rng.IntN(6)
			f.cache(w, r, indexer.TierDevice, 0, seqRange(1, n)...)
			if rng.IntN(2) == 0 {
				f.cache(w, r, indexer.TierHost, uint64(1000+n), seqRange(uint64(1+n), 1+rng.IntN(3))...)
			}
		}
		for i := range 20 {
			sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(seqRange(1, 1+rng.IntN(10))...), Reserve: true,
				ReservationID: fmt.Sprintf("t%d-%d", trial, i)})
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 {
				f.s.PrefillComplete(sel.ReservationID)
			}
		}
		for _, weight := range []float64{-1, 0, 0.5, 1, 3} {
			pr := prompt(seqRange(1, 1+rng.IntN(12))...)
			ov := Override{}
			w := 1.0
			if weight >= 0 {
				ov.Params, w = map[string]float64{"overlap_score_weight": weight}, weight
			}
			rp, err := f.s.policyFor(f.s.partitionPolicy(keyM), &ov)
			if err != nil {
				t.Fatal(err)
			}
			p := f.s.partition(keyM)
			overlaps, err := f.s.match(p, &pr)
			if err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			cands := f.s.score(p, &pr, overlaps, true)
			in := PolicyInput{ISL: pr.ISL, Blocks: len(pr.SequenceHashes), BlockSize: p.blockSize, TrackPrefill: true, Rand: p.rng, Turn: &p.turn}
			rp.policy.Choose(&in, cands)
			for _, c := range cands {
				if want := oldCost(&c, pr.ISL, p.blockSize, w, true); c.Cost != want {
					p.mu.Unlock()
					t.Fatalf("trial %d weight %v: rank %d/%d cost %v, old form %v (%+v)", trial, weight, c.Worker, c.Rank, c.Cost, want, c)
				}
			}
			p.mu.Unlock()
		}
	}
}

// Test_CostFormParameters pins the new parameters on one hand-computed
// state: isl 128 (8 blocks of 16), worker 1 caches 4 device blocks,
// worker 2 none but carries 2 requests.
func Test_CostFormParameters(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.cache(1, 0, indexer.TierDevice, 0, 1, 2, 3, 4)
	f.mustReserve("a", 2, 0, prompt(50))
	f.mustReserve("b", 2, 0, prompt(50))
	f.s.PrefillComplete("a")
	f.s.PrefillComplete("b")
	// Both booked prompts are [50]: one shared active block on worker 2.
	// w1: raw 8, device 4: cost = scale·max(0, 8 − credit·4) + 0 + 8 + r·0
	// w2: raw 8, nothing cached: cost = scale·8 + 1 + 8 + r·2
	cases := []struct {
		params map[string]float64
		w1, w2 float64
	}{
		{nil, 12, 17},
		{map[string]float64{"overlap_score_credit": 2}, 8, 17},
		{map[string]float64{"overlap_score_credit": 3}, 8, 17}, // max(0, ·) floors the credit
		{map[string]float64{"prefill_load_scale": 4}, 24, 41},
		{map[string]float64{"decode_active_request_weight": 64}, 12, 145},
		{map[string]float64{"overlap_score_weight": 0}, 8, 9}, // weight 0: no prefill term, no credit
		{map[string]float64{"overlap_score_weight": 2}, 16, 25},
		{map[string]float64{"track_prefill_tokens": 0}, 8, 9},
	}
	for _, tc := range cases {
		rp, err := resolvePolicy(PolicySpec{Name: "dynamo-default", Params: tc.params})
		if err != nil {
			t.Fatal(err)
		}
		pr := prompt(1, 2, 3, 4, 5, 6, 7, 8)
		p := f.s.partition(keyM)
		overlaps, _ := f.s.match(p, &pr)
		p.mu.Lock()
		track := f.s.trackPrefill(rp)
		cands := f.s.score(p, &pr, overlaps, track)
		in := PolicyInput{ISL: pr.ISL, BlockSize: 16, TrackPrefill: track, Rand: p.rng, Turn: &p.turn}
		rp.policy.Choose(&in, cands)
		got := []float64{cands[0].Cost, cands[1].Cost}
		p.mu.Unlock()
		if got[0] != tc.w1 || got[1] != tc.w2 {
			t.Errorf("%v: costs %v, want [%v %v]", tc.params, got, tc.w1, tc.w2)
		}
	}
	// The presets are these parameter sets.
	for _, tc := range []struct {
		name   string
		w1, w2 float64
	}{{"agentic", 4*0 + 8, 4*8 + 1 + 8 + 64*2}, {"load-aware", 8 + 8, 8 + 1 + 8}} {
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 3, 4, 5, 6, 7, 8), Override: usePolicy(tc.name)})
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(1)
		if tc.w2 < tc.w1 {
			want = 2
		}
		if sel.WorkerID != want {
			t.Errorf("%s chose %d, want %d", tc.name, sel.WorkerID, want)
		}
	}
}

// Test_PolicyResolution: unknown policies and parameters are refused by
// name; an override naming the partition's policy keeps its parameters.
func Test_PolicyResolution(t *testing.T) {
	for _, tc := range []struct {
		spec PolicySpec
		want string // "" = valid
	}{
		{PolicySpec{Name: "dynamo-default"}, ""},
		{PolicySpec{Name: "agentic", Params: map[string]float64{"prefill_load_scale": 2}}, ""},
		{PolicySpec{Name: "two-tier", Params: map[string]float64{"cache_threshold": 0.7, "assume_kv_reuse": 0}}, ""},
		{PolicySpec{Name: "fastest"}, `unknown policy "fastest"`},
		{PolicySpec{Name: "two-tier", Params: map[string]float64{"overlap_score_credit": 1}}, `takes no parameter "overlap_score_credit"`},
		{PolicySpec{Name: "two-tier", Params: map[string]float64{"cache_threshold": 1.5}}, "between 0 and 1"},
		{PolicySpec{Name: "two-tier", Params: map[string]float64{"balance_rel_threshold": 0.5}}, ">= 1"},
		{PolicySpec{Name: "dynamo-default", Params: map[string]float64{"router_temperature": math.NaN()}}, "finite"},
		{PolicySpec{Name: "random", Params: map[string]float64{"track_prefill_tokens": 2}}, "true or false"},
	} {
		err := ValidatePolicy(tc.spec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.spec, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one naming %q", tc.spec, err, tc.want)
		}
	}
	f := newFixture(t)
	f.worker(1, 1)
	base, _ := resolvePolicy(PolicySpec{Name: "two-tier", Params: map[string]float64{"cache_threshold": 0.9}})
	rp, err := f.s.policyFor(base, &Override{Policy: "two-tier", Params: map[string]float64{"balance_abs_threshold": 4}})
	if err != nil || rp.spec.Params["cache_threshold"] != 0.9 || rp.spec.Params["balance_abs_threshold"] != 4 {
		t.Fatalf("same-policy override = %+v, %v", rp, err)
	}
	if rp, err = f.s.policyFor(base, &Override{Policy: "random"}); err != nil || len(rp.spec.Params) != 0 {
		t.Fatalf("other-policy override = %+v, %v", rp, err)
	}
	if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1), Override: usePolicy("nope")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown override policy: %v", err)
	}
}

// Test_TwoTier: balanced load follows a prefix covering enough of the
// prompt; a short prefix, or an imbalance, goes to the least loaded.
func Test_TwoTier(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.cache(1, 0, indexer.TierDevice, 0, 1, 2, 3, 4, 5, 6)
	f.mustReserve("a", 1, 0, prompt(90))
	sel := func(pr Prompt, params map[string]float64) uint64 {
		t.Helper()
		s, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr, Override: Override{Policy: "two-tier", Params: params}})
		if err != nil {
			t.Fatal(err)
		}
		return s.WorkerID
	}
	if w := sel(prompt(1, 2, 3, 4, 5, 6, 7, 8), nil); w != 1 { // 6/8 cached > 0.5, loads 1 vs 0: balanced
		t.Errorf("balanced, long prefix: chose %d", w)
	}
	if w := sel(prompt(1, 2, 3, 4, 5, 6, 7, 8), map[string]float64{"cache_threshold": 0.8}); w != 2 {
		t.Errorf("prefix under the threshold: chose %d, want the least loaded", w)
	}
	if w := sel(prompt(1, 2, 3, 4, 5, 6, 7, 8), map[string]float64{"balance_abs_threshold": 0.5}); w != 2 {
		t.Errorf("imbalanced: chose %d, want the least loaded", w)
	}
}

// Test_RoundRobinAndPowerOfTwo: round-robin visits every rank in turn;
// power-of-two never picks the more loaded of two when one is idle and
// the other is not, so with two ranks it always picks the idle one.
func Test_RoundRobinAndPowerOfTwo(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 2)
	f.worker(2, 1)
	seen := map[uint64]int{}
	for range 9 {
		s, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1), Override: usePolicy("round-robin")})
		if err != nil {
			t.Fatal(err)
		}
		seen[s.WorkerID<<8|uint64(s.DPRank)]++
	}
	if len(seen) != 3 || seen[1<<8] != 3 || seen[1<<8|1] != 3 || seen[2<<8] != 3 {
		t.Fatalf("round-robin visits = %v", seen)
	}
	g := newFixture(t)
	g.worker(1, 1)
	g.worker(2, 1)
	g.mustReserve("a", 1, 0, prompt(5))
	for range 20 {
		s, err := g.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1), Override: usePolicy("power-of-two")})
		if err != nil || s.WorkerID != 2 {
			t.Fatalf("power-of-two chose %+v, %v", s, err)
		}
	}
}

// Test_OverrideCannotEscapeShedding: a request that turns prefill
// tracking off for itself is still refused by a prefill busy threshold;
// whether prefill counts toward busy is the partition's setting.
func Test_OverrideCannotEscapeShedding(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.apply(fsm.SetThresholds{Model: "m", ActivePrefillTokens: ptr(uint64(100))})
	f.mustReserve("big", 1, 0, prompt(seqRange(1, 10)...)) // 160 prefill tokens
	_, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1),
		Override: Override{Params: map[string]float64{"track_prefill_tokens": 0}}})
	if !errors.Is(err, ErrOverloaded) {
		t.Fatalf("selection with tracking off = %v, want overloaded", err)
	}
}
