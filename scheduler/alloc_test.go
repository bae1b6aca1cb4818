package scheduler

import (
	"testing"

	"github.com/kvselect/kvselect/indexer"
)

// selectAllocs is what one Select (no booking) allocates once the
// partition's scratch is warm, whatever the number of ranks (measured
// with a memory profile): the policy's input and the answer, which escape
// through the Policy interface; the chosen worker's per-rank overlap map
// (OverlapSummary.DP) and the rank list it is filled from; and the
// overlaps the index match returns. Nothing is allocated per rank
// (DESIGN.md). It is pinned, not bounded: a change that adds an
// allocation to the path fails here, and one that removes one lowers the
// figure on purpose. The race detector adds its own, so the test pins
// the figure only without it.
const selectAllocs = 5

// Test_SelectAllocations pins the allocations of Select with the default
// policy, at 8 and at 64 ranks, with a cached prefix and a live booking.
func Test_SelectAllocations(t *testing.T) {
	for _, workers := range []uint64{8, 64} {
		f := newFixture(t)
		for w := range workers {
			f.worker(w+1, 1)
		}
		f.cache(1, 0, indexer.TierDevice, 0, 1, 2)
		f.mustReserve("r", 2, 0, prompt(1, 2, 3))
		req := SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 3, 4)}
		if _, err := f.s.Select(req); err != nil { // warm the partition's scratch
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(100, func() {
			if _, err := f.s.Select(req); err != nil {
				t.Fatal(err)
			}
		})
		if raceEnabled {
			if got < selectAllocs {
				t.Errorf("%d ranks: Select allocates %v times under -race, fewer than the %d without it", workers, got, selectAllocs)
			}
			continue
		}
		if got != selectAllocs {
			t.Errorf("%d ranks: Select allocates %v times, want %d", workers, got, selectAllocs)
		}
	}
}
