package kvsim

import (
	"context"
	"math/rand/v2"
)

// The routers below see the fleet directly: the baselines kvselect is
// compared with, among them greedy-prefix, which sees every cache. Each breaks ties
// with its own seeded source, so a run is the same for the same seed.

// stateless gives a router that keeps no bookings its lifecycle calls:
// the baselines read the fleet's own state when they route.
type stateless struct{}

func (stateless) FirstToken(context.Context, *TimedRequest) error { return nil }
func (stateless) Finished(context.Context, *TimedRequest) error   { return nil }

// RoundRobin routes request i to engine i mod n.
type RoundRobin struct {
	stateless
	fleet *Fleet
	next  int
}

// NewRoundRobin returns a round-robin router over fleet.
func NewRoundRobin(fleet *Fleet) *RoundRobin { return &RoundRobin{fleet: fleet} }

func (r *RoundRobin) Route(context.Context, *TimedRequest) (int, error) {
	i := r.next
	r.next = (r.next + 1) % r.fleet.Len()
	return i, nil
}

// Random routes each request to an engine drawn uniformly.
type Random struct{ seeded }

// NewRandom returns a uniform random router over fleet.
func NewRandom(fleet *Fleet, seed uint64) *Random {
	return &Random{newSeeded(fleet, seed)}
}

func (r *Random) Route(context.Context, *TimedRequest) (int, error) {
	return r.rng.IntN(r.fleet.Len()), nil
}

// LeastLoaded routes each request to an engine with the fewest active
// requests (waiting or running), ties drawn uniformly.
type LeastLoaded struct{ seeded }

// NewLeastLoaded returns a least-loaded router over fleet.
func NewLeastLoaded(fleet *Fleet, seed uint64) *LeastLoaded {
	return &LeastLoaded{newSeeded(fleet, seed)}
}

func (r *LeastLoaded) Route(context.Context, *TimedRequest) (int, error) {
	best := sortedRanks(r.fleet.Len(), r.fleet.Active)
	return best[r.rng.IntN(len(best))], nil
}

// GreedyPrefix knows every engine's cache exactly and routes each request
// to the longest cached prefix, ties to the fewest active requests, then
// drawn uniformly. It maximises each request's hit, greedily: a heuristic,
// not a bound. A router that spreads prefixes to keep more of them cached
// can beat its hit rate, and it piles popular prefixes on one engine, so
// its latency suffers. The bound on the hit rate is the trace's own with
// an infinite cache.
type GreedyPrefix struct{ seeded }

// NewGreedyPrefix returns the greedy-prefix router over fleet.
func NewGreedyPrefix(fleet *Fleet, seed uint64) *GreedyPrefix {
	return &GreedyPrefix{newSeeded(fleet, seed)}
}

func (r *GreedyPrefix) Route(_ context.Context, req *TimedRequest) (int, error) {
	n := r.fleet.Len()
	hits := make([]int, n)
	for i := range n {
		hits[i] = r.fleet.CachedPrefix(i, req)
	}
	maxActive := 0
	for i := range n {
		maxActive = max(maxActive, r.fleet.Active(i))
	}
	// Longest hit first, then fewest active: one key, lower is better.
	best := sortedRanks(n, func(i int) int { return -hits[i]*(maxActive+1) + r.fleet.Active(i) })
	return best[r.rng.IntN(len(best))], nil
}

// seeded is the state of a router that draws: the fleet and a random
// source from a seed, so a replay draws the same again.
type seeded struct {
	stateless
	fleet *Fleet
	rng   *rand.Rand
}

func newSeeded(fleet *Fleet, seed uint64) seeded { return seeded{fleet: fleet, rng: newRNG(seed)} }

func newRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
