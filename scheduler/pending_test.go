package scheduler

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// Test_PendingSelectionLifetime: a remembered selection lives PendingTTL,
// the oldest are forgotten past the count and hash limits, and a booking
// that fails (worker gone, id taken) leaves it for a retry.
func Test_PendingSelectionLifetime(t *testing.T) {
	type step struct {
		do      string // select, book, advance, sweep, count, delete, register
		id      string // selection id (select, book)
		blocks  int    // prompt blocks (select)
		pending int    // selections remembered (count)
		after   time.Duration
		wantErr error
	}
	const selTTL = PendingTTL
	for _, tt := range []struct {
		name              string
		maxCount, maxHash int
		steps             []step
	}{
		{"booked just before expiry", 0, 0, []step{
			{do: "select", id: "s", blocks: 2},
			{do: "advance", after: selTTL - time.Millisecond},
			{do: "book", id: "s"},
		}},
		{"expired at the TTL", 0, 0, []step{
			{do: "select", id: "s", blocks: 2},
			{do: "advance", after: selTTL},
			{do: "book", id: "s", wantErr: ErrNoPendingSelection},
		}},
		{"the sweep forgets expired ones", 0, 0, []step{
			{do: "select", id: "s", blocks: 2},
			{do: "advance", after: selTTL},
			{do: "sweep"},
			{do: "count", pending: 0},
		}},
		{"single use", 0, 0, []step{
			{do: "select", id: "s", blocks: 2},
			{do: "book", id: "s"},
			{do: "book", id: "s", wantErr: ErrNoPendingSelection},
		}},
		{"a later select replaces the choice", 0, 0, []step{
			{do: "select", id: "s", blocks: 2},
			{do: "advance", after: selTTL / 2},
			{do: "select", id: "s", blocks: 3},
			{do: "advance", after: selTTL/2 + time.Second},
			{do: "book", id: "s"},
			{do: "count", pending: 0},
		}},
		{"oldest forgotten past the count", 2, 0, []step{
			{do: "select", id: "a", blocks: 1},
			{do: "select", id: "b", blocks: 1},
			{do: "select", id: "c", blocks: 1},
			{do: "count", pending: 2},
			{do: "book", id: "a", wantErr: ErrNoPendingSelection},
			{do: "book", id: "b"},
			{do: "book", id: "c"},
		}},
		{"oldest forgotten past the hashes", 0, 5, []step{
			{do: "select", id: "a", blocks: 3},
			{do: "select", id: "b", blocks: 3},
			{do: "count", pending: 1},
			{do: "book", id: "a", wantErr: ErrNoPendingSelection},
			{do: "book", id: "b"},
		}},
		{"a booking refused for a gone worker can be retried", 0, 0, []step{
			{do: "select", id: "s", blocks: 2},
			{do: "delete"},
			{do: "book", id: "s", wantErr: ErrWorkerNotFound},
			{do: "register"},
			{do: "book", id: "s"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.maxCount > 0 {
				f.s.pending.maxCount = tt.maxCount
			}
			if tt.maxHash > 0 {
				f.s.pending.maxHashes = tt.maxHash
			}
			f.worker(1, 1)
			booked := 0
			for i, st := range tt.steps {
				var err error
				switch st.do {
				case "select":
					blocks := make([]uint64, st.blocks)
					for j := range blocks {
						blocks[j] = uint64(100*i + j + 1)
					}
					_, err = f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(blocks...), SelectionID: st.id})
				case "book":
					booked++
					_, err = f.s.Reserve(ReserveRequest{ID: fmt.Sprintf("r-%d", booked), SelectionID: st.id})
				case "advance":
					f.clock = f.clock.Add(st.after)
				case "sweep":
					f.s.SweepExpired()
				case "count":
					if got := f.s.Pending(); got != st.pending {
						t.Fatalf("step %d: %d pending selections, want %d", i, got, st.pending)
					}
				case "delete":
					_, err = f.log.Apply(fsm.DeleteWorker{WorkerID: 1})
				case "register":
					f.worker(1, 1)
				}
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("step %d (%s %s): err %v, want %v", i, st.do, st.id, err, st.wantErr)
				}
			}
		})
	}
}
