package kvsim

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"
)

// busyFleet returns a 4-engine fleet where engine 2 holds the prefix
// [1 2 3] and engine 3 holds [1], and engines 1 and 3 each have a waiting
// request (engines are stepped by hand: nothing runs).
func busyFleet(t *testing.T) (*Fleet, *TimedRequest) {
	t.Helper()
	f, err := NewFleet(testEngineConfig(), 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := func(i int, ids ...uint64) {
		tokens := TraceTokens(TraceRequest{InputLength: 4 * len(ids), HashIDs: ids}, 4)
		if _, err := f.engines[i].store.store(tokens, engineHashes(tokens, 4)); err != nil {
			t.Fatal(err)
		}
	}
	store(2, 1, 2, 3)
	store(3, 1)
	f.engines[1].submit(&TimedRequest{})
	f.engines[3].submit(&TimedRequest{})
	tokens := TraceTokens(TraceRequest{InputLength: 16, HashIDs: []uint64{1, 2, 3, 4}}, 4)
	return f, &TimedRequest{Tokens: tokens, chain: engineHashes(tokens, 4)}
}

func Test_Routers(t *testing.T) {
	tests := []struct {
		name string
		make func(*Fleet) Router
		want []int // routes of five requests in a row on the same fleet
	}{
		{"round-robin cycles", func(f *Fleet) Router { return NewRoundRobin(f) }, []int{0, 1, 2, 3, 0}},
		{"least-loaded avoids the busy engines", func(f *Fleet) Router { return NewLeastLoaded(f, 1) }, nil},
		{"greedy-prefix takes the longest cached prefix", func(f *Fleet) Router { return NewGreedyPrefix(f, 1) }, []int{2, 2, 2, 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, req := busyFleet(t)
			r := tt.make(f)
			var got []int
			for range 5 {
				i, err := r.Route(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, i)
			}
			if tt.want == nil { // least-loaded: only 0 and 2 are idle
				for _, i := range got {
					if i != 0 && i != 2 {
						t.Fatalf("routes %v, want only engines 0 and 2", got)
					}
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("routes %v, want %v", got, tt.want)
			}
		})
	}
}

// Greedy-prefix breaks a tie on the prefix by load: engines 0 and 1 both
// hold nothing of an unknown prompt, engine 1 is busy.
func Test_GreedyPrefixTieByLoad(t *testing.T) {
	f, _ := busyFleet(t)
	tokens := TraceTokens(TraceRequest{InputLength: 8, HashIDs: []uint64{50, 51}}, 4)
	req := &TimedRequest{Tokens: tokens, chain: engineHashes(tokens, 4)}
	o := NewGreedyPrefix(f, 3)
	for range 20 {
		i, _ := o.Route(context.Background(), req)
		if i != 0 && i != 2 {
			t.Fatalf("greedy-prefix chose engine %d (active %d) for a prompt no one holds", i, f.Active(i))
		}
	}
}

// Random spreads over every engine, and the same seed repeats the draws.
func Test_RandomSeeded(t *testing.T) {
	f, req := busyFleet(t)
	draw := func(seed uint64) []int {
		r := NewRandom(f, seed)
		var out []int
		for range 200 {
			i, _ := r.Route(context.Background(), req)
			out = append(out, i)
		}
		return out
	}
	a := draw(5)
	if !reflect.DeepEqual(a, draw(5)) {
		t.Fatal("same seed, different draws")
	}
	seen := map[int]int{}
	for _, i := range a {
		seen[i]++
	}
	if len(seen) != 4 {
		t.Fatalf("200 draws hit engines %v, want all 4", seen)
	}
}

func Test_Percentile(t *testing.T) {
	d := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x)
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", d(7), 99, 7},
		{"median of four is the second", d(1, 2, 3, 4), 50, 2},
		{"p90 of ten is the ninth", d(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9},
		{"p99 of ten is the last", d(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10},
		{"p100 is the max", d(1, 2, 3), 100, 3},
		{"tiny p is the min", d(1, 2, 3), 0.1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("Percentile(%v, %g) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func Test_Figures(t *testing.T) {
	res := &TimedResult{
		Requests: []RequestResult{
			{Outcome: OutcomeServed, InputTokens: 100, HitTokens: 50, OutputTokens: 4, Arrival: 0, TTFT: msd(10), E2E: msd(40),
				RoutedPrefixTokens: 50, BestPrefixTokens: 50},
			{Outcome: OutcomeServed, InputTokens: 300, HitTokens: 0, OutputTokens: 6, Arrival: msd(500), TTFT: msd(30), E2E: msd(90),
				RoutedPrefixTokens: 0, BestPrefixTokens: 100},
			{Outcome: OutcomeRejected, InputTokens: 100, Arrival: msd(600)},
			{Outcome: OutcomeFailed, InputTokens: 100, Arrival: msd(700)},
		},
		Errors:         1,
		End:            2 * time.Second,
		MaxActiveArea:  3,
		MeanActiveArea: 2,
	}
	got := res.Figures()
	want := Figures{Requests: 4, Served: 2, Rejected: 1, Failed: 1, Errors: 1, HitRate: 50.0 / 400,
		TTFTp50: 10, TTFTp90: 30, TTFTp99: 30, E2Ep50: 40, E2Ep99: 90, Throughput: 1, OutputTokensRate: 5,
		Imbalance: 1.5, RejectRate: 0.25, LongestPrefixShare: 0.5, RoutedPrefixRate: 50.0 / 400, BestPrefixRate: 150.0 / 400,
		OfferedRate: 4 / 0.7}
	if got != want {
		t.Fatalf("Figures()\n got %+v\nwant %+v", got, want)
	}
	// Goodput: TTFTs 10 and 30 ms served, one refused, one failed, four
	// requests over 0.7 s of arrivals. The bound is inclusive; refused
	// and failed requests count against the share.
	for _, tt := range []struct {
		bound time.Duration
		good  int
	}{{msd(5), 0}, {msd(10), 1}, {msd(29.9), 1}, {msd(30), 2}, {time.Hour, 2}} {
		g := res.Goodput(tt.bound)
		share := float64(tt.good) / 4
		if g.Good != tt.good || g.Share != share || math.Abs(g.Rate-share*4/0.7) > 1e-9 || g.BoundMs != ms(tt.bound) {
			t.Errorf("Goodput(%s) = %+v, want %d good, share %v, rate %v", tt.bound, g, tt.good, share, share*4/0.7)
		}
	}
	if g := (&TimedResult{}).Goodput(time.Second); g.Good != 0 || g.Share != 0 || g.Rate != 0 {
		t.Errorf("Goodput of an empty replay: %+v", g)
	}
}

// Imbalance integrates over time: two engines, one busy with a request for
// the whole run and the other never, is the worst case (max/mean = 2).
func Test_ImbalanceIntegrates(t *testing.T) {
	reqs := []TraceRequest{traceReq(0, 40, 5, seq(1, 10)...), traceReq(1, 40, 5, seq(100, 10)...)}
	_, res := mustReplay(t, testEngineConfig(), 2, reqs, func(*Fleet) Router { return fixedRouter{ranks: []int{0}} })
	if got := res.Figures().Imbalance; math.Abs(got-2) > 1e-9 {
		t.Fatalf("imbalance %v, want 2 (every request on one of two engines)", got)
	}
	_, res = mustReplay(t, testEngineConfig(), 2, reqs, func(*Fleet) Router { return fixedRouter{ranks: []int{0, 1}} })
	if got := res.Figures().Imbalance; got >= 2 || got < 1 {
		t.Fatalf("imbalance %v with the requests spread, want in [1, 2)", got)
	}
}
