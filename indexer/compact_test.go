package indexer

import (
	"slices"
	"testing"
)

// Test_CompactReleasesMemory: once fewer than a quarter of the node ids
// ever handed out are live, maybeCompact rebuilds the storage at the live
// size, and matches answer as before.
func Test_CompactReleasesMemory(t *testing.T) {
	ix := newPartIndex()
	a := ix.addRank(RankKey{Worker: 1, Rank: 0})
	b := ix.addRank(RankKey{Worker: 2, Rank: 0})
	const peak, keep = 2 * compactMinNodes, compactMinNodes / 8
	mustApply(t, ix, a, stored(TierDevice, 0, seq(1, peak)...))
	mustApply(t, ix, b, stored(TierHost, 0, seq(1, 3)...))
	chunks, slots := len(ix.nodes.chunks), len(ix.byKey.slots)
	if ix.maybeCompact() {
		t.Fatal("compacted a partition at its peak")
	}
	mustApply(t, ix, a, removed(TierDevice, seq(keep+1, peak-keep)...))
	q := seq(1, keep+1)
	before := ix.match(q, nil)
	if !ix.maybeCompact() {
		t.Fatalf("no compaction with %d of %d node ids live", ix.live, ix.nodes.next)
	}
	if err := ix.check(); err != nil {
		t.Fatal(err)
	}
	if got := len(ix.nodes.chunks); got*4 > chunks {
		t.Fatalf("arena keeps %d of %d chunks", got, chunks)
	}
	if got := len(ix.byKey.slots); got*4 > slots {
		t.Fatalf("byKey keeps %d of %d slots", got, slots)
	}
	if after := ix.match(q, nil); !slices.Equal(after, before) {
		t.Fatalf("match after compaction %+v, before %+v", after, before)
	}
}
