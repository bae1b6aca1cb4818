package kvsim

import (
	"context"
	"math/rand/v2"
)

// The routers below see the fleet directly: the baselines kvselect is
// compared with, and the oracle that bounds its hit rate. Each breaks ties
// with its own seeded source, so a run is the same for the same seed.

// RoundRobin routes request i to engine i mod n.
type RoundRobin struct {
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

func (*RoundRobin) FirstToken(context.Context, *TimedRequest) error { return nil }
func (*RoundRobin) Finished(context.Context, *TimedRequest) error   { return nil }

// Random routes each request to an engine drawn uniformly.
type Random struct {
	fleet *Fleet
	rng   *rand.Rand
}

// NewRandom returns a uniform random router over fleet.
func NewRandom(fleet *Fleet, seed uint64) *Random {
	return &Random{fleet: fleet, rng: newRNG(seed)}
}

func (r *Random) Route(context.Context, *TimedRequest) (int, error) {
	return r.rng.IntN(r.fleet.Len()), nil
}

func (*Random) FirstToken(context.Context, *TimedRequest) error { return nil }
func (*Random) Finished(context.Context, *TimedRequest) error   { return nil }

// LeastLoaded routes each request to an engine with the fewest active
// requests (waiting or running), ties drawn uniformly.
type LeastLoaded struct {
	fleet *Fleet
	rng   *rand.Rand
}

// NewLeastLoaded returns a least-loaded router over fleet.
func NewLeastLoaded(fleet *Fleet, seed uint64) *LeastLoaded {
	return &LeastLoaded{fleet: fleet, rng: newRNG(seed)}
}

func (r *LeastLoaded) Route(context.Context, *TimedRequest) (int, error) {
	best := sortedRanks(r.fleet.Len(), r.fleet.Active)
	return best[r.rng.IntN(len(best))], nil
}

func (*LeastLoaded) FirstToken(context.Context, *TimedRequest) error { return nil }
func (*LeastLoaded) Finished(context.Context, *TimedRequest) error   { return nil }

// Oracle knows every engine's cache exactly and routes each request to
// the longest cached prefix, ties to the fewest active requests, then
// drawn uniformly. It maximises each request's hit, greedily: an upper
// bound for a router's hit rate, not for its latency (it piles popular
// prefixes on one engine).
type Oracle struct {
	fleet *Fleet
	rng   *rand.Rand
}

// NewOracle returns the oracle router over fleet.
func NewOracle(fleet *Fleet, seed uint64) *Oracle {
	return &Oracle{fleet: fleet, rng: newRNG(seed)}
}

func (r *Oracle) Route(_ context.Context, req *TimedRequest) (int, error) {
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

func (*Oracle) FirstToken(context.Context, *TimedRequest) error { return nil }
func (*Oracle) Finished(context.Context, *TimedRequest) error   { return nil }

func newRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
