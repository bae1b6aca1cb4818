package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/indexer"
)

// learn books n prompts of tokens uncached tokens on a rank one at a time
// and completes each after d, so the rank learns tokens/d.
func (f *fixture) learn(worker uint64, n int, blocks int, d time.Duration) {
	f.t.Helper()
	for i := range n {
		id := fmt.Sprintf("learn-%d-%d", worker, i)
		f.mustReserve(id, worker, 0, prompt(seqRange(uint64(worker)<<32|uint64(i)<<16, blocks)...))
		f.clock = f.clock.Add(d)
		if err := f.s.PrefillComplete(id); err != nil {
			f.t.Fatal(err)
		}
		if err := f.s.Free(id); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) rate(worker uint64) float64 {
	p := f.s.partition(keyM)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokensPerSecond(p.byKey[indexer.RankKey{Worker: worker}])
}

// Test_ThroughputIsLearned: a rank uses the default until it has five
// samples, then the EWMA of work/elapsed, which counts the prefill queued
// ahead of each booking.
func Test_ThroughputIsLearned(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.learn(1, 4, 64, 100*time.Millisecond) // 1024 tokens in 0.1 s
	if r := f.rate(1); r != DefaultTokensPerSecond {
		t.Fatalf("rate after 4 samples = %v, want the default", r)
	}
	f.learn(1, 1, 64, 100*time.Millisecond)
	if r := f.rate(1); r != 10240 {
		t.Fatalf("rate after 5 samples = %v, want 10240", r)
	}
	// Queued work counts: two bookings of 1024 tokens at once, the second
	// completing after 0.2 s, is 2048 tokens in 0.2 s for it.
	f.mustReserve("q1", 1, 0, prompt(seqRange(1<<40, 64)...))
	f.mustReserve("q2", 1, 0, prompt(seqRange(2<<40, 64)...))
	f.clock = f.clock.Add(100 * time.Millisecond)
	f.s.PrefillComplete("q1")
	f.clock = f.clock.Add(100 * time.Millisecond)
	f.s.PrefillComplete("q2")
	if r := f.rate(1); r != 10240 {
		t.Fatalf("rate = %v, want 10240 (queue counted)", r)
	}
}

// Test_RatesPooledWithinTheBand: ranks whose own estimates differ by noise
// (10 %) share the partition's figure; one that is 2× slower keeps its own.
func Test_RatesPooledWithinTheBand(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.worker(3, 1)
	f.learn(1, 5, 64, 100*time.Millisecond) // 10240/s
	f.learn(2, 5, 64, 110*time.Millisecond) // 9309/s
	if r1, r2 := f.rate(1), f.rate(2); r1 != r2 || r1 < 9309 || r1 > 10240 {
		t.Fatalf("rates %v, %v: want one pooled figure between the two", r1, r2)
	}
	if r3 := f.rate(3); r3 != f.rate(1) {
		t.Fatalf("a rank without samples: %v, want the partition's %v", r3, f.rate(1))
	}
	f.learn(3, 5, 64, 200*time.Millisecond) // 5120/s
	if r3 := f.rate(3); r3 != 5120 {
		t.Fatalf("the slow rank: %v, want its own 5120", r3)
	}
}

// Test_PredictedTTFTSeesASlowEngine: worker 2 prefills ten times slower
// than worker 1. With 2048 tokens queued on the fast one, a cost in blocks
// sends the next prompt to the slow idle one; predicted-ttft sees it would
// start later there (1024 tokens at 1024/s = 1 s against 3072 at 10240/s).
func Test_PredictedTTFTSeesASlowEngine(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.learn(1, 5, 64, 100*time.Millisecond)
	f.learn(2, 5, 64, time.Second)
	f.mustReserve("busy", 1, 0, prompt(seqRange(9<<40, 128)...))
	pr := prompt(seqRange(7<<40, 64)...)
	for _, tc := range []struct {
		policy string
		want   uint64
	}{{"dynamo-default", 2}, {"predicted-ttft", 1}} {
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr, Override: usePolicy(tc.policy)})
		if err != nil || sel.WorkerID != tc.want {
			t.Errorf("%s chose %+v (%v), want worker %d", tc.policy, sel.WorkerID, err, tc.want)
		}
	}
}

// Test_PrefillDecay: a booking whose prefill_complete never comes counts
// in full until its expected end (at least minHold), then fades linearly
// over its own prefill time, then counts nothing; a late prefill_complete
// or free then changes nothing.
func Test_PrefillDecay(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.learn(1, 5, 64, time.Second) // 1024 tokens/s
	// 1024 blocks·16 = 16384 tokens: expected 16 s, fading over 16 s more.
	f.mustReserve("r", 1, 0, prompt(seqRange(3<<40, 1024)...))
	f.mustReserve("s", 1, 0, prompt(seqRange(5<<40, 64)...)) // 1024 tokens behind it: expected at 17 s, fading 1 s
	start := f.clock
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{0, 17408}, {15 * time.Second, 17408}, {16 * time.Second, 17408},
		{17500 * time.Millisecond, 14848 + 512}, // r has 14.5 s of 16 left, s half way through its 1 s fade
		{24 * time.Second, 8192},                // r half; s faded at 18 s
		{32 * time.Second, 0},
		{40 * time.Second, 0},
	} {
		f.clock = start.Add(tc.at)
		if got := f.load(1, 0).ActivePrefillTokens; got != tc.want {
			t.Errorf("at %v: prefill %d, want %d", tc.at, got, tc.want)
		}
	}
	if err := f.s.PrefillComplete("r"); err != nil {
		t.Fatal(err)
	}
	f.s.Free("s")
	if l := f.load(1, 0); l.ActivePrefillTokens != 0 || l.ActiveRequests != 1 {
		t.Fatalf("after a late prefill_complete: %+v", l)
	}
	f.s.Free("r")
	if l := f.load(1, 0); l.ActivePrefillTokens != 0 || l.ActiveRequests != 0 || l.ActiveDecodeBlocks != 0 {
		t.Fatalf("after the frees: %+v", l)
	}
	// A small booking holds for minHold whatever its prediction.
	f.mustReserve("small", 1, 0, prompt(seqRange(6<<40, 1)...))
	f.clock = f.clock.Add(minHold - time.Millisecond)
	if got := f.load(1, 0).ActivePrefillTokens; got != 16 {
		t.Fatalf("small booking before minHold: prefill %d, want 16", got)
	}
}

// Test_AssumeKVReuseOff: token prompts booked with assume_kv_reuse false
// share no active block (Dynamo's meaning), while the index match still
// uses the real hashes; a retry under the same reservation id is the
// same prompt and replays.
func Test_AssumeKVReuseOff(t *testing.T) {
	tokens := make([]uint32, 64)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	for _, tc := range []struct {
		reuse  bool
		decode float64
	}{{true, 4}, {false, 8}} {
		f := newFixture(t)
		f.worker(1, 1)
		ov := Override{Params: map[string]float64{"assume_kv_reuse": 0}}
		if tc.reuse {
			ov = Override{}
		}
		for i := range 2 {
			req := SelectRequest{Partition: keyM, Prompt: Prompt{Tokens: tokens, HasTokens: true}, Override: ov,
				Reserve: true, ReservationID: fmt.Sprintf("r%d", i)}
			if _, err := f.s.Select(req); err != nil {
				t.Fatal(err)
			}
			req.Prompt = Prompt{Tokens: tokens, HasTokens: true}
			again, err := f.s.Select(req)
			if err != nil || !again.Replayed {
				t.Fatalf("reuse %v: retry = %+v, %v", tc.reuse, again, err)
			}
		}
		if got := f.load(1, 0).ActiveDecodeBlocks; got != tc.decode {
			t.Errorf("assume_kv_reuse %v: decode blocks %v, want %v", tc.reuse, got, tc.decode)
		}
	}
}
