package indexer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// chain builds a stored event for blocks with local hashes locals, engine
// hashes engine(local) and the given parent engine hash (0 = none).
func stored(tier Tier, parent uint64, locals ...uint64) *Event {
	ev := &Event{Kind: EventStored, Tier: tier, HasParent: parent != 0, Parent: parent}
	for _, l := range locals {
		ev.Blocks = append(ev.Blocks, StoredBlock{Hash: engineHash(l), Local: l})
	}
	return ev
}

// engineHash stands in for an engine's opaque hash of a block.
func engineHash(local uint64) uint64 { return local*0x9E3779B97F4A7C15 + 1 }

func removed(tier Tier, locals ...uint64) *Event {
	ev := &Event{Kind: EventRemoved, Tier: tier}
	for _, l := range locals {
		ev.Hashes = append(ev.Hashes, engineHash(l))
	}
	return ev
}

func mustApply(t *testing.T, ix *partIndex, r *rankState, ev *Event) {
	t.Helper()
	var st ApplyStats
	if o := ix.applyEvent(r, ev, &st); o != OutcomeOK {
		t.Fatalf("apply %v: %v", ev.Kind, o)
	}
	if err := ix.check(); err != nil {
		t.Fatalf("after %v: %v", ev.Kind, err)
	}
}

func seq(from, n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = from + uint64(i)
	}
	return out
}

func Test_MatchTiers(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{1, 0})
	b := ix.addRank(RankKey{1, 1})
	c := ix.addRank(RankKey{2, 0})
	// a: blocks 1-4 on device, 5-6 on host, 7 on disk.
	mustApply(t, ix, a, stored(TierDevice, 0, 1, 2, 3, 4))
	mustApply(t, ix, a, stored(TierHost, engineHash(4), 5, 6))
	mustApply(t, ix, a, stored(TierDisk, engineHash(6), 7))
	// b: blocks 1-2 on device only.
	mustApply(t, ix, b, stored(TierDevice, 0, 1, 2))
	// c: 1-3 on host, and also 1 on device: device prefix 1, host prefix 3.
	mustApply(t, ix, c, stored(TierHost, 0, 1, 2, 3))
	mustApply(t, ix, c, stored(TierDevice, 0, 1))

	q := seq(1, 10)
	want := []Overlap{
		{Worker: 1, Rank: 0, Device: 4, HostExt: 2, DiskExt: 1},
		{Worker: 1, Rank: 1, Device: 2},
		{Worker: 2, Rank: 0, Device: 1, HostExt: 2},
	}
	for name, got := range map[string][]Overlap{"match": ix.match(q, nil), "walk": ix.matchWalk(q, nil)} {
		if !slices.Equal(got, want) {
			t.Fatalf("%s = %+v, want %+v", name, got, want)
		}
	}
	// A query diverging after block 2 stops every rank at 2.
	q2 := []uint64{1, 2, 99, 4}
	want2 := []Overlap{{Worker: 1, Rank: 0, Device: 2}, {Worker: 1, Rank: 1, Device: 2}, {Worker: 2, Rank: 0, Device: 1, HostExt: 1}}
	if got := ix.match(q2, nil); !slices.Equal(got, want2) {
		t.Fatalf("diverging query = %+v, want %+v", got, want2)
	}
	// Same local hashes at another position do not match: the key is the path.
	if got := ix.match([]uint64{2, 3}, nil); len(got) != 0 {
		t.Fatalf("shifted query matched %+v", got)
	}
}

func Test_MatchHoles(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{1, 0})
	b := ix.addRank(RankKey{2, 0})
	mustApply(t, ix, a, stored(TierDevice, 0, seq(1, 8)...))
	mustApply(t, ix, b, stored(TierDevice, 0, seq(1, 8)...))
	// a evicts a middle block: its contiguous prefix is now 2 although it
	// still holds 4-8.
	mustApply(t, ix, a, removed(TierDevice, 3))
	if a.holes == ([noLevel]int64{}) {
		t.Fatal("removing a middle block must leave holes")
	}
	want := []Overlap{{Worker: 1, Rank: 0, Device: 2}, {Worker: 2, Rank: 0, Device: 8}}
	if got := ix.match(seq(1, 8), nil); !slices.Equal(got, want) {
		t.Fatalf("match = %+v, want %+v", got, want)
	}
	// Storing it again on host heals the host level but not device.
	mustApply(t, ix, a, stored(TierHost, engineHash(2), 3))
	want[0] = Overlap{Worker: 1, Rank: 0, Device: 2, HostExt: 6}
	if got := ix.match(seq(1, 8), nil); !slices.Equal(got, want) {
		t.Fatalf("after host store = %+v, want %+v", got, want)
	}
	if a.holes[1] != 0 || a.holes[0] == 0 {
		t.Fatalf("holes = %v, want device holes only", a.holes)
	}
}

func Test_RemoveClearAndRelease(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{1, 0})
	b := ix.addRank(RankKey{2, 0})
	mustApply(t, ix, a, stored(TierDevice, 0, seq(1, 5)...))
	mustApply(t, ix, b, stored(TierDevice, 0, 1, 2))
	mustApply(t, ix, b, stored(TierDevice, engineHash(2), 30, 31))
	if ix.live != 7 || ix.memberships != 9 {
		t.Fatalf("live=%d memberships=%d, want 7/9", ix.live, ix.memberships)
	}
	// Removal is per rank: b keeps 1-2 after a removes them.
	mustApply(t, ix, a, removed(TierDevice, 5, 4, 3, 2, 1))
	if got := ix.match([]uint64{1, 2, 30}, nil); !slices.Equal(got, []Overlap{{Worker: 2, Rank: 0, Device: 3}}) {
		t.Fatalf("match after a's removal = %+v", got)
	}
	if ix.live != 4 {
		t.Fatalf("live = %d after a left, want 4", ix.live)
	}
	// Removing a block the rank does not hold on that tier is counted, not fatal.
	var st ApplyStats
	ix.applyEvent(b, removed(TierHost, 1), &st)
	ix.applyEvent(b, removed(TierDevice, 77), &st)
	if st.BlocksNotFound != 2 || st.BlocksRemoved != 0 {
		t.Fatalf("stats = %+v", st)
	}
	mustApply(t, ix, b, &Event{Kind: EventCleared})
	if ix.live != 0 || len(ix.byKey) != 0 || ix.memberships != 0 || len(b.blocks) != 0 {
		t.Fatalf("index not empty after clear: live=%d keys=%d members=%d", ix.live, len(ix.byKey), ix.memberships)
	}
	ix.removeRank(a.key)
	ix.removeRank(b.key)
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
}

func Test_StoredOutcomes(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{1, 0})
	mustApply(t, ix, a, stored(TierDevice, 0, 1, 2))
	tests := []struct {
		name string
		ev   *Event
		want Outcome
	}{
		{"unknown parent", stored(TierDevice, engineHash(99), 3), OutcomeParentNotFound},
		{"bad tier", &Event{Kind: EventStored, Tier: 7}, OutcomeInvalid},
		{"bad kind", &Event{Kind: 42}, OutcomeInvalid},
		{"own ancestor", &Event{Kind: EventStored, HasParent: true, Parent: engineHash(2),
			Blocks: []StoredBlock{{Hash: engineHash(2), Local: 5}}}, OutcomeInvalid},
		{"duplicate store", stored(TierDevice, 0, 1, 2), OutcomeOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st ApplyStats
			if got := ix.applyEvent(a, tt.ev, &st); got != tt.want {
				t.Fatalf("outcome = %v, want %v", got, tt.want)
			}
			if err := ix.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
	// An engine hash reused for other content moves the membership.
	mustApply(t, ix, a, &Event{Kind: EventStored, Blocks: []StoredBlock{{Hash: engineHash(2), Local: 50}}})
	if got := ix.match([]uint64{1, 2}, nil); !slices.Equal(got, []Overlap{{Worker: 1, Rank: 0, Device: 1}}) {
		t.Fatalf("after hash reuse = %+v", got)
	}
}

func Test_SpilledChildCounts(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{1, 0})
	mustApply(t, ix, a, stored(TierDevice, 0, 1))
	// More children of one node than a uint16 can count.
	const n = 0x10000 + 10
	ev := &Event{Kind: EventStored, Tier: TierDevice, HasParent: true, Parent: engineHash(1)}
	var st ApplyStats
	for i := range n {
		ev.Blocks = []StoredBlock{{Hash: uint64(1_000_000 + i), Local: uint64(1_000_000 + i)}}
		ix.applyEvent(a, ev, &st)
	}
	if len(ix.spill) != 1 {
		t.Fatalf("spill entries = %d, want 1", len(ix.spill))
	}
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
	ix.compact() // spilled counts follow their node's new id
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
	ix.applyEvent(a, removed(TierDevice, 1), &st) // every child becomes a hole
	if a.holes[0] != n {
		t.Fatalf("holes = %v, want %d", a.holes, n)
	}
	ix.applyEvent(a, &Event{Kind: EventCleared}, &st)
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
	if ix.live != 0 || len(ix.spill) != 0 {
		t.Fatalf("live=%d spill=%d after clear", ix.live, len(ix.spill))
	}
}

// Test_MatchAgreesWithWalk drives random event sequences (chains with
// shared prefixes, several tiers, middle evictions, re-stores, clears) and
// checks after every step that the index invariants hold and that the
// optimised matcher agrees with the reference walk on queries along existing
// paths and beside them.
func Test_MatchAgreesWithWalk(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			ix := newPartIndex()
			var ranks []*rankState
			for w := range 4 {
				for r := range 2 {
					ranks = append(ranks, ix.addRank(RankKey{uint64(w), uint32(r)}))
				}
			}
			// A small alphabet of local hashes makes paths share prefixes.
			paths := [][]uint64{}
			for range 12 {
				p := make([]uint64, 1+rng.IntN(40))
				for i := range p {
					p[i] = 1 + rng.Uint64N(3)
				}
				paths = append(paths, p)
			}
			for step := range 400 {
				r := ranks[rng.IntN(len(ranks))]
				p := paths[rng.IntN(len(paths))]
				ev := randomEvent(rng, r, p)
				var st ApplyStats
				ix.applyEvent(r, ev, &st)
				if step%50 == 49 {
					ix.compact() // renumbers every node; nothing else may change
				}
				if err := ix.check(); err != nil {
					t.Fatalf("step %d (%v): %v", step, ev.Kind, err)
				}
				for range 3 {
					q := slices.Clone(paths[rng.IntN(len(paths))])
					if len(q) > 1 && rng.IntN(3) == 0 {
						q[rng.IntN(len(q))] = 1 + rng.Uint64N(3)
					}
					got, want := ix.match(q, nil), ix.matchWalk(q, nil)
					if !slices.Equal(got, want) {
						t.Fatalf("step %d query %v:\n match %+v\n walk  %+v", step, q, got, want)
					}
				}
			}
			for _, r := range ranks {
				ix.removeRank(r.key)
			}
			if err := ix.check(); err != nil {
				t.Fatal(err)
			}
			if ix.live != 0 || len(ix.byKey) != 0 || len(ix.spill) != 0 {
				t.Fatalf("not empty after removing every rank: live=%d", ix.live)
			}
		})
	}
}

// pathEngineHash gives a rank's engine hash for the block at depth i of a
// path: engines hash the whole prefix, so it depends on the path up to i.
func pathEngineHash(p []uint64, i int) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, x := range p[:i+1] {
		h = (h ^ x) * 0x100000001b3
	}
	return h
}

func randomEvent(rng *rand.Rand, r *rankState, p []uint64) *Event {
	tier := Tier(rng.IntN(int(numTiers)))
	switch k := rng.IntN(20); {
	case k == 0:
		return &Event{Kind: EventCleared}
	case k < 8: // remove a random run
		i := rng.IntN(len(p))
		j := i + 1 + rng.IntN(len(p)-i)
		ev := &Event{Kind: EventRemoved, Tier: tier}
		for d := i; d < j; d++ {
			ev.Hashes = append(ev.Hashes, pathEngineHash(p, d))
		}
		return ev
	default: // store a run, with its parent when it does not start at the root
		i := 0
		if rng.IntN(2) == 0 {
			i = rng.IntN(len(p))
		}
		j := i + 1 + rng.IntN(len(p)-i)
		ev := &Event{Kind: EventStored, Tier: tier}
		if i > 0 {
			ev.HasParent, ev.Parent = true, pathEngineHash(p, i-1)
		}
		for d := i; d < j; d++ {
			ev.Blocks = append(ev.Blocks, StoredBlock{Hash: pathEngineHash(p, d), Local: p[d]})
		}
		return ev
	}
}

// Test_CompactReleasesMemory grows a partition past the compaction
// threshold, removes most of it, and checks that storage shrinks to the
// live size while every invariant and every answer stays the same.
func Test_CompactReleasesMemory(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{1, 0})
	b := ix.addRank(RankKey{2, 0})
	const chains, length = 200, 128 // 25 600 blocks, past compactMinNodes
	chain := func(c int) []uint64 {
		out := make([]uint64, length)
		for i := range out {
			out[i] = uint64(c)<<32 | uint64(i) | 1<<62
		}
		return out
	}
	var st ApplyStats
	for c := range chains {
		ix.applyEvent(a, stored(TierDevice, 0, chain(c)...), &st)
		if c%10 == 0 {
			ix.applyEvent(b, stored(TierHost, 0, chain(c)[:length/2]...), &st)
		}
	}
	peakChunks := len(ix.nodes.chunks)
	// Keep chains 0-9 on rank a; remove everything else of a.
	for c := 10; c < chains; c++ {
		ix.applyEvent(a, removed(TierDevice, chain(c)...), &st)
	}
	want := map[int][]Overlap{}
	for c := range chains {
		want[c] = ix.matchWalk(chain(c), nil)
	}
	liveBefore, membersBefore := ix.live, ix.memberships
	if !ix.maybeCompact() {
		t.Fatalf("no compaction with %d live of %d ids", ix.live, ix.nodes.next)
	}
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
	if ix.live != liveBefore || ix.memberships != membersBefore || int(ix.nodes.next) != ix.live+1 {
		t.Fatalf("after compaction live=%d (was %d) memberships=%d (was %d) next=%d",
			ix.live, liveBefore, ix.memberships, membersBefore, ix.nodes.next)
	}
	if len(ix.nodes.chunks) >= peakChunks/2 {
		t.Fatalf("arena chunks %d, peak %d: memory not released", len(ix.nodes.chunks), peakChunks)
	}
	for c := range chains {
		if got := ix.match(chain(c), nil); !slices.Equal(got, want[c]) {
			t.Fatalf("chain %d after compaction: %+v, want %+v", c, got, want[c])
		}
	}
	// The compacted index keeps working: removals and re-stores.
	mustApply(t, ix, a, removed(TierDevice, chain(0)[100:]...))
	mustApply(t, ix, b, stored(TierDevice, 0, chain(0)...))
	if ix.maybeCompact() {
		t.Fatal("compacted again right away")
	}
}
