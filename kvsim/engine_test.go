package kvsim

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// testEngineConfig has round numbers: 1 ms a step, 10 µs a prompt token,
// 100 µs an output token, 4 tokens a block.
func testEngineConfig() EngineConfig {
	return EngineConfig{BlockSize: 4, CacheBlocks: 64, MaxBatchTokens: 100, MaxRunning: 4,
		PrefillPerToken: 10 * time.Microsecond, DecodePerToken: 100 * time.Microsecond, StepOverhead: time.Millisecond}
}

// fixedRouter sends request i to ranks[i % len(ranks)].
type fixedRouter struct {
	stateless
	ranks []int
}

func (r fixedRouter) Route(_ context.Context, req *TimedRequest) (int, error) {
	return r.ranks[req.Index%len(r.ranks)], nil
}

// traceReq builds a request of InputLength tokens over the given hash ids,
// with one trace block per engine block (traceBlockTokens 4).
func traceReq(ms float64, inputLen, outputLen int, ids ...uint64) TraceRequest {
	return TraceRequest{Timestamp: ms, InputLength: inputLen, OutputLength: outputLen, HashIDs: ids}
}

func mustReplay(t *testing.T, cfg EngineConfig, ranks int, reqs []TraceRequest, router func(*Fleet) Router) (*Fleet, *TimedResult) {
	t.Helper()
	f, err := NewFleet(cfg, ranks, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := TimedReplay(context.Background(), f, reqs, router(f), TimedOptions{TraceBlockTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	return f, res
}

func msd(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func Test_EngineTimes(t *testing.T) {
	one := func(*Fleet) Router { return fixedRouter{ranks: []int{0}} }
	tests := []struct {
		name    string
		mutate  func(*EngineConfig)
		reqs    []TraceRequest
		ttft    []time.Duration
		e2e     []time.Duration
		hits    []int
		comment string
	}{
		{
			name: "empty cache: one step of overhead and the whole prefill",
			reqs: []TraceRequest{traceReq(0, 40, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)},
			ttft: []time.Duration{msd(1 + 0.4)}, e2e: []time.Duration{msd(1.4)}, hits: []int{0},
		},
		{
			name: "decode: each further token is a step of overhead and one output token",
			reqs: []TraceRequest{traceReq(0, 40, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)},
			ttft: []time.Duration{msd(1.4)}, e2e: []time.Duration{msd(1.4 + 2*1.1)}, hits: []int{0},
		},
		{
			name: "cached prefix: only the uncached part is prefilled",
			reqs: []TraceRequest{traceReq(0, 40, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), traceReq(100, 42, 1, 1, 2, 3, 4, 5, 6, 7, 8, 90, 91, 92)},
			// 8 blocks (32 tokens) hit; 10 tokens computed.
			ttft: []time.Duration{msd(1.4), msd(1 + 0.1)}, e2e: []time.Duration{msd(1.4), msd(1.1)}, hits: []int{0, 32},
		},
		{
			name: "a fully cached prompt still computes its last token",
			reqs: []TraceRequest{traceReq(0, 40, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), traceReq(100, 40, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)},
			ttft: []time.Duration{msd(1.4), msd(1 + 0.01)}, e2e: []time.Duration{msd(1.4), msd(1.01)}, hits: []int{0, 40},
		},
		{
			name: "token budget: a long prompt is prefilled in chunks, a step each",
			reqs: []TraceRequest{traceReq(0, 250, 1, seq(1, 63)...)},
			// 100 + 100 + 50 tokens in three steps.
			ttft: []time.Duration{msd(3 + 2.5)}, e2e: []time.Duration{msd(5.5)}, hits: []int{0},
		},
		{
			name:   "queueing: the second request waits for the running one",
			mutate: func(c *EngineConfig) { c.MaxRunning = 1 },
			reqs:   []TraceRequest{traceReq(0, 40, 2, seq(1, 10)...), traceReq(0, 40, 1, seq(100, 10)...)},
			// First: prefill 1.4, one decode step 1.1. Second admitted at
			// 2.5, prefilled by 3.9.
			ttft: []time.Duration{msd(1.4), msd(2.5 + 1.4)}, e2e: []time.Duration{msd(2.5), msd(3.9)}, hits: []int{0, 0},
		},
		{
			name: "a request arriving mid-step joins at the next step",
			reqs: []TraceRequest{traceReq(0, 40, 1, seq(1, 10)...), traceReq(0.5, 40, 1, seq(100, 10)...)},
			ttft: []time.Duration{msd(1.4), msd(1.4 - 0.5 + 1.4)}, e2e: []time.Duration{msd(1.4), msd(2.3)}, hits: []int{0, 0},
		},
		{
			name: "prefill and decode share a step's budget and time",
			reqs: []TraceRequest{traceReq(0, 40, 3, seq(1, 10)...), traceReq(1, 40, 1, seq(100, 10)...)},
			// At 1.4 the first decodes (1 token) while the second
			// prefills (40): 1 + 0.1 + 0.4 = 1.5 ms.
			ttft: []time.Duration{msd(1.4), msd(1.4 - 1 + 1.5)}, e2e: []time.Duration{msd(1.4 + 1.5 + 1.1), msd(1.9)}, hits: []int{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testEngineConfig()
			if tt.mutate != nil {
				tt.mutate(&cfg)
			}
			_, res := mustReplay(t, cfg, 1, tt.reqs, one)
			var ttft, e2e []time.Duration
			var hits []int
			for _, q := range res.Requests {
				if q.Outcome != OutcomeServed {
					t.Fatalf("request %d: %s", q.Index, q.Outcome)
				}
				ttft, e2e, hits = append(ttft, q.TTFT), append(e2e, q.E2E), append(hits, q.HitTokens)
			}
			if !reflect.DeepEqual(ttft, tt.ttft) || !reflect.DeepEqual(e2e, tt.e2e) || !reflect.DeepEqual(hits, tt.hits) {
				t.Fatalf("TTFT %v E2E %v hits %v, want %v %v %v", ttft, e2e, hits, tt.ttft, tt.e2e, tt.hits)
			}
			if res.FinalActive[0] != 0 {
				t.Fatalf("%d requests left on the engine", res.FinalActive[0])
			}
		})
	}
}

func seq(first uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

func Test_EngineConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*EngineConfig)
		ok     bool
	}{
		{"defaults", func(*EngineConfig) {}, true},
		{"budget below the running cap", func(c *EngineConfig) { c.MaxBatchTokens, c.MaxRunning = 8, 9 }, false},
		{"negative cost", func(c *EngineConfig) { c.PrefillPerToken = -1 }, false},
		{"a step that costs nothing", func(c *EngineConfig) { c.StepOverhead, c.DecodePerToken = 0, 0 }, false},
		{"cache", func(c *EngineConfig) { c.CacheBlocks = MaxCacheBlocks + 1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := EngineConfig{}.WithDefaults()
			tt.mutate(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// An engine over a Sim rank stores a prompt's blocks when its prefill
// ends and publishes LRU evictions as BlockRemoved before the BlockStored
// that needed the room, in one batch.
func Test_EngineEvictionPublishesBlockRemoved(t *testing.T) {
	s := mustStart(t, Config{Workers: 1, BlockSize: 4, CacheBlocks: 4})
	f, err := NewSimFleet(s, testEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	reqs := []TraceRequest{traceReq(0, 12, 1, 1, 2, 3), traceReq(10, 8, 1, 7, 8)}
	res, err := TimedReplay(context.Background(), f, reqs, fixedRouter{ranks: []int{0}}, TimedOptions{TraceBlockTokens: 4})
	if err != nil || res.Errors != 0 {
		t.Fatalf("replay: %v, %d errors", err, res.Errors)
	}
	w := s.Workers()[0]
	batches := buffered(t, w, 0)
	if len(batches) != 2 {
		t.Fatalf("%d batches published, want 2", len(batches))
	}
	first := engineHashes(TraceTokens(reqs[0], 4), 4)
	got := batches[1].events
	if len(got) != 2 || got[0].typ != "BlockRemoved" || got[1].typ != "BlockStored" {
		t.Fatalf("second batch %+v, want BlockRemoved then BlockStored", got)
	}
	// The cache holds 4 blocks: storing 2 next to 3 evicts the least
	// recently used one, the first prompt's last block (a leaf).
	if want := []uint64{first[2]}; !reflect.DeepEqual(got[0].hashes, want) {
		t.Fatalf("removed %v, want %v", got[0].hashes, want)
	}
	if n := w.CachedBlocks(0); n != 4 {
		t.Fatalf("rank caches %d blocks, want 4", n)
	}
}

// The same seed gives the same run, request by request; another seed
// another one.
func Test_TimedReplayDeterministic(t *testing.T) {
	var reqs []TraceRequest
	for i := range 200 {
		reqs = append(reqs, traceReq(float64(i)*0.3, 40+i%7*4, 1+i%5, uint64(i%9), uint64(i%9)*100+1, uint64(1000+i)))
	}
	run := func(seed uint64) []RequestResult {
		_, res := mustReplay(t, testEngineConfig(), 4, reqs, func(f *Fleet) Router { return NewRandom(f, seed) })
		return res.Requests
	}
	a, b, c := run(7), run(7), run(8)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with seed 7 differ")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 give the same run")
	}
}

// With Realtime the replay paces arrivals by the wall clock: it cannot
// end before its last arrival is due. (A bound from below only; how much
// later it ends depends on the machine.)
func Test_TimedReplayRealtime(t *testing.T) {
	f, err := NewFleet(testEngineConfig(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []TraceRequest{traceReq(0, 8, 1, 1, 2), traceReq(30, 8, 2, 1, 2)}
	res, err := TimedReplay(context.Background(), f, reqs, NewRoundRobin(f), TimedOptions{TraceBlockTokens: 4, Realtime: true})
	if err != nil {
		t.Fatal(err)
	}
	if fg := res.Figures(); fg.Served != 2 || res.Wall < 30*time.Millisecond {
		t.Fatalf("served %d in %s, want 2 in at least 30ms", fg.Served, res.Wall)
	}
}

// A cancelled context stops a replay with its error.
func Test_TimedReplayCancelled(t *testing.T) {
	f, err := NewFleet(testEngineConfig(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TimedReplay(ctx, f, []TraceRequest{traceReq(0, 8, 1, 1, 2)}, NewRoundRobin(f), TimedOptions{}); err != context.Canceled {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// An engine given its own configuration runs on it: the same request on a
// twice-as-slow engine takes twice as long; the fleet-wide sizes stay.
func Test_FleetSetEngineConfig(t *testing.T) {
	f, err := NewFleet(testEngineConfig(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	slow := testEngineConfig()
	slow.BlockSize, slow.CacheBlocks = 0, 0
	slow.PrefillPerToken, slow.DecodePerToken, slow.StepOverhead = 2*slow.PrefillPerToken, 2*slow.DecodePerToken, 2*slow.StepOverhead
	if err := f.SetEngineConfig(1, slow); err != nil {
		t.Fatal(err)
	}
	if got := f.EngineConfig(1); got.BlockSize != 4 || got.CacheBlocks != 64 || got.StepOverhead != 2*time.Millisecond {
		t.Fatalf("engine 1's config %+v", got)
	}
	reqs := []TraceRequest{traceReq(0, 40, 2, seq(1, 10)...), traceReq(0, 40, 2, seq(100, 10)...)}
	res, err := TimedReplay(context.Background(), f, reqs, fixedRouter{ranks: []int{0, 1}}, TimedOptions{TraceBlockTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := res.Requests[0], res.Requests[1]; a.TTFT != msd(1.4) || b.TTFT != msd(2.8) || b.E2E != 2*a.E2E {
		t.Fatalf("fast engine TTFT %s E2E %s, slow %s %s; want the slow one's twice the fast one's", a.TTFT, a.E2E, b.TTFT, b.E2E)
	}
	for _, bad := range []EngineConfig{{BlockSize: 8}, {CacheBlocks: 65}, {MaxRunning: 8, MaxBatchTokens: 4}} {
		if err := f.SetEngineConfig(0, bad); err == nil {
			t.Errorf("SetEngineConfig(%+v) accepted", bad)
		}
	}
	if err := f.SetEngineConfig(2, slow); err == nil {
		t.Error("SetEngineConfig of engine 2 of 2 accepted")
	}
}
