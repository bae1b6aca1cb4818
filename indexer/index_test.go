package indexer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
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
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
	b := ix.addRank(RankKey{Worker: 1, Rank: 1})
	c := ix.addRank(RankKey{Worker: 2, Rank: 0})
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
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
	b := ix.addRank(RankKey{Worker: 2, Rank: 0})
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
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
	b := ix.addRank(RankKey{Worker: 2, Rank: 0})
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
	if ix.live != 0 || ix.byKey.Len() != 0 || ix.memberships != 0 || b.blocks.Len() != 0 {
		t.Fatalf("index not empty after clear: live=%d keys=%d members=%d", ix.live, ix.byKey.Len(), ix.memberships)
	}
	ix.removeRank(a.key)
	ix.removeRank(b.key)
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
}

func Test_StoredOutcomes(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
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
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
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
			ix.steps.mu = new(sync.RWMutex) // steps run as under an Indexer
			var ranks []*rankState
			for w := range 4 {
				for r := range 2 {
					ranks = append(ranks, ix.addRank(RankKey{Worker: uint64(w), Rank: uint32(r)}))
				}
			}
			paths := randomPaths(rng, 12, 40)
			for step := range 400 {
				r := ranks[rng.IntN(len(ranks))]
				p := paths[rng.IntN(len(paths))]
				ev := randomEvent(rng, r, p)
				var st ApplyStats
				ix.applyEvent(r, ev, &st)
				if step%50 == 49 {
					ix.compact() // renumbers every node; nothing else may change
				}
				ix.steps.release()
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
			if ix.live != 0 || ix.byKey.Len() != 0 || len(ix.spill) != 0 {
				t.Fatalf("not empty after removing every rank: live=%d", ix.live)
			}
		})
	}
}

// pathEngineHash gives a rank's engine hash for the block at depth i of a
// path: engines hash the whole prefix, so it depends on the path up to i.
// Folding it into a few hundred values makes different blocks share engine
// hashes (reuse) and the same block get several (aliases), as engines with
// extra keys and restarts do.
func pathEngineHash(p []uint64, i int) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, x := range p[:i+1] {
		h = (h ^ x) * 0x100000001b3
	}
	return h % 300
}

func randomEvent(rng *rand.Rand, r *rankState, p []uint64) *Event {
	tier := Tier(rng.IntN(int(numTiers)))
	// A salted event names its blocks with other engine hashes, like an
	// engine hashing extra keys: the same node gets several (aliases).
	salt := uint64(0)
	if rng.IntN(4) == 0 {
		salt = 1 + rng.Uint64N(3)
	}
	engine := func(d int) uint64 { return (pathEngineHash(p, d) + salt) % 300 }
	switch k := rng.IntN(20); {
	case k == 0:
		return &Event{Kind: EventCleared}
	case k < 8: // remove a random run
		i := rng.IntN(len(p))
		j := i + 1 + rng.IntN(len(p)-i)
		ev := &Event{Kind: EventRemoved, Tier: tier}
		for d := i; d < j; d++ {
			ev.Hashes = append(ev.Hashes, engine(d))
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
			ev.HasParent, ev.Parent = true, engine(i-1)
		}
		for d := i; d < j; d++ {
			ev.Blocks = append(ev.Blocks, StoredBlock{Hash: engine(d), Local: p[d]})
		}
		return ev
	}
}

func Test_LongEventDuplicateHash(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
	long := stored(TierDevice, 0, seq(1, 5000)...)
	var st ApplyStats
	long.Blocks[4999].Hash = long.Blocks[10].Hash
	if o := ix.applyEvent(a, long, &st); o != OutcomeInvalid || ix.live != 0 {
		t.Fatalf("long event with a repeated hash: %v, %d nodes", o, ix.live)
	}
	long.Blocks[4999].Hash = engineHash(5000)
	mustApply(t, ix, a, long)
	if ix.live != 5000 {
		t.Fatalf("live = %d, want 5000", ix.live)
	}
}
