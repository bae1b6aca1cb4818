package scheduler

import (
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// a request's track_prefill_tokens=false books prefill 0, so its
// prefill never counts toward active_prefill_tokens_threshold: a client can
// pile any amount of prefill on a rank without it ever becoming busy.
func Test_OverrideCannotHideBookedPrefill(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.apply(fsm.SetThresholds{Model: "m", ActivePrefillTokens: ptr(uint64(1000))})
	ov := Override{Params: map[string]float64{"track_prefill_tokens": 0}}
	for i := range 20 {
		_, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(seqRange(uint64(i)<<20, 64)...),
			Override: ov, Reserve: true})
		if errors.Is(err, ErrOverloaded) {
			return // shed: fine
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("20 x 1024 uncached tokens booked on a rank with a 1000-token prefill threshold, never shed; load %+v",
		f.load(1, 0))
}

// router_config_override.overlap_score_weight (what every Dynamo client
// sends) is not refused on a partition whose policy is not a cost policy:
// it is left out and reported; a parameter Dynamo does not define is
// still refused.
func Test_DynamoOverridesIgnoredByOtherPolicies(t *testing.T) {
	for _, pol := range []string{"predicted-ttft", "two-tier", "least-loaded"} {
		f := newFixture(t)
		f.worker(1, 1)
		f.s.SetPolicies(map[fsm.PartitionKey]PolicySpec{{Model: AnyModel}: {Name: pol}})
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2),
			Override: Override{Params: map[string]float64{"overlap_score_weight": 1}}})
		if err != nil || !slices.Equal(sel.IgnoredOverrides, []string{"overlap_score_weight"}) {
			t.Errorf("%s: Dynamo override overlap_score_weight=1: %+v, %v", pol, sel.IgnoredOverrides, err)
		}
		if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2),
			Override: Override{Params: map[string]float64{"cache_threshold": 0.5}}}); pol != "two-tier" && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: cache_threshold accepted: %v", pol, err)
		}
	}
}

// a finite but tiny router_temperature makes (max-min)*T underflow to
// 0; the minimum's weight is exp(NaN) and the sample always returns the
// LAST candidate, the most expensive one here.
func Test_TinyTemperatureIsArgmin(t *testing.T) {
	in := &PolicyInput{Rand: mrand.New(mrand.NewPCG(1, 2))}
	cands := []Candidate{{Cost: 0}, {Cost: 0.1}, {Cost: 0.25}}
	last := 0
	for range 1000 {
		if pickByCost(in, cands, 5e-324) == 2 {
			last++
		}
	}
	if last > 0 {
		t.Fatalf("T=5e-324: the most expensive candidate picked %d/1000 times (want ~0)", last)
	}
}

// a finite parameter that drives one cost to +Inf (1e308 passes
// validation) makes every softmax weight NaN, and temperature sampling
// always returns the last candidate, which here is the Inf one.
func Test_InfiniteCostNeverSampled(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.worker(3, 1)
	f.mustReserve("a", 3, 0, prompt(seqRange(1<<30, 2)...))
	f.mustReserve("b", 3, 0, prompt(seqRange(2<<30, 2)...))
	ov := Override{Params: map[string]float64{"decode_active_request_weight": 1e308, "router_temperature": 1}}
	picked3 := 0
	for i := range 200 {
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(uint64(100 + i)), Override: ov})
		if err != nil {
			t.Fatal(err)
		}
		if sel.WorkerID == 3 {
			picked3++
		}
	}
	if picked3 > 0 {
		t.Fatalf("worker 3 has cost +Inf but was picked %d/200 times", picked3)
	}
}

// assume_kv_reuse=false (node default) is ignored by POST
// /reservations with token_ids: two bookings of the same tokens share
// their active blocks, unlike the same bookings through select_and_reserve.
func Test_ReserveHonoursAssumeKVReuse(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.AssumeKVReuse = false })
	f.worker(1, 1)
	tokens := make([]uint32, 64)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	for i := range 2 {
		if _, err := f.s.Reserve(ReserveRequest{ID: fmt.Sprint("r", i), Partition: keyM, WorkerID: 1,
			Prompt: Prompt{Tokens: tokens, HasTokens: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.load(1, 0).ActiveDecodeBlocks; got != 8 {
		t.Fatalf("decode blocks %v, want 8 (assume_kv_reuse=false: no sharing)", got)
	}
}

// SPEC §6.2 raw_w = (P + max(isl, cached_w))/bs uses the uncapped
// cached_w; the code caps CachedTokens at isl first, so when cached_w > isl
// (hash form with isl_tokens < blocks·bs, or a tier weight > 1) the prefill
// term is under-charged by (cached_w − isl)/bs.
func Test_CostUsesUncappedCached(t *testing.T) {
	const bs, isl, P = 16, 16, 160
	c := Candidate{DeviceBlocks: 4, CachedTokens: min(int64(4*bs), isl), PrefillTokens: P, cachedRaw: 4 * bs}
	in := &PolicyInput{ISL: isl, BlockSize: bs, TrackPrefill: true, Rand: mrand.New(mrand.NewPCG(1, 2))}
	buildCost(paramValues{"overlap_score_credit": 1, "prefill_load_scale": 1, "overlap_score_weight": unsetWeight}).
		Choose(in, []Candidate{c})
	cached := float64(4 * bs)
	spec := math.Max(0, (P+math.Max(isl, cached))/bs-4)
	cs := []Candidate{c}
	buildCost(paramValues{"overlap_score_credit": 1, "prefill_load_scale": 1, "overlap_score_weight": unsetWeight}).Choose(in, cs)
	if cs[0].Cost != spec {
		t.Fatalf("cost %v, SPEC §6.2 gives %v", cs[0].Cost, spec)
	}
}

// with assume_kv_reuse=false the booked sequence hashes depend only on
// the reservation id and the block count, so a select_and_reserve repeating
// an id with a DIFFERENT prompt of the same length is taken for a retry
// (200, Replayed) instead of 409.
func Test_UnsharedRetryChecksThePrompt(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	ov := Override{Params: map[string]float64{"assume_kv_reuse": 0}}
	mk := func(base uint32) Prompt {
		tokens := make([]uint32, 64)
		for i := range tokens {
			tokens[i] = base + uint32(i)
		}
		return Prompt{Tokens: tokens, HasTokens: true}
	}
	if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: mk(0), Override: ov, Reserve: true, ReservationID: "x"}); err != nil {
		t.Fatal(err)
	}
	sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: mk(5000), Override: ov, Reserve: true, ReservationID: "x"})
	if !errors.Is(err, ErrDuplicateReservation) {
		t.Fatalf("same id, different prompt: %+v, %v; want ErrDuplicateReservation", sel, err)
	}
}

// one late prefill_complete (here 120 s after booking; the booking had
// already faded) is still taken as a timed sample, and in a ratio of
// exponentially weighted sums its elapsed time dominates: the rank's rate
// collapses ~120x and the pooled rate (used by every rank with < 5 samples)
// ~25x, and with them predicted TTFT and every new booking's decay hold.
func Test_LateCompletionClipped(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.worker(3, 1)
	f.learn(1, 10, 64, 100*time.Millisecond) // 10240 tokens/s
	f.learn(2, 10, 64, 100*time.Millisecond)
	b1, b3 := f.rate(1), f.rate(3)
	f.mustReserve("late", 1, 0, prompt(seqRange(77<<40, 64)...))
	f.clock = f.clock.Add(120 * time.Second)
	if err := f.s.PrefillComplete("late"); err != nil {
		t.Fatal(err)
	}
	a1, a3 := f.rate(1), f.rate(3)
	t.Logf("rate of worker 1: %v -> %v; of worker 3 (no samples, uses the pool): %v -> %v", b1, a1, b3, a3)
	// A new 1024-token booking on worker 1 now holds its prefill in full
	// far past minHold (1024/85 tokens/s = 12 s, fading for 12 s more).
	f.mustReserve("n", 1, 0, prompt(seqRange(78<<40, 64)...))
	f.clock = f.clock.Add(20 * time.Second)
	got := f.load(1, 0).ActivePrefillTokens
	if a1 < b1/2 || a3 < b3/2 {
		t.Fatalf("one late completion: worker 1 rate %v -> %v, pooled %v -> %v; a 1024-token booking still counts %d tokens after 20 s",
			b1, a1, b3, a3, got)
	}
}
