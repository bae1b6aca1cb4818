package scheduler

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// blocksPrompt is a hash-form prompt of n blocks that shares nothing with
// another prompt of a different tag.
func blocksPrompt(tag uint64, n int) Prompt {
	b := make([]uint64, n)
	for i := range b {
		b[i] = tag<<32 | uint64(i) + 1
	}
	return Prompt{BlockHashes: b, SequenceHashes: indexer.SequenceHashes(b), ISL: int64(16 * n)}
}

func withBounds(reservations, blocks int64) func(*Config) {
	return func(c *Config) { c.MaxReservations, c.MaxReservedBlocks = reservations, blocks }
}

// Test_CapacityBoundsLocalBookings: every way of booking is refused with
// ErrCapacity once it would pass either bound, books nothing then, and the
// room comes back when bookings end, however they end.
func Test_CapacityBoundsLocalBookings(t *testing.T) {
	book := map[string]func(f *fixture, id string, pr Prompt) error{
		"reserve": func(f *fixture, id string, pr Prompt) error {
			_, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: 1, Prompt: pr})
			return err
		},
		"select_and_reserve": func(f *fixture, id string, pr Prompt) error {
			_, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr, Reserve: true, ReservationID: id})
			return err
		},
		"reserve a selection": func(f *fixture, id string, pr Prompt) error {
			if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr, SelectionID: "s-" + id}); err != nil {
				return err
			}
			_, err := f.s.Reserve(ReserveRequest{ID: id, SelectionID: "s-" + id})
			return err
		},
	}
	end := map[string]func(f *fixture, id string){
		"free": func(f *fixture, id string) {
			if err := f.s.Free(id); err != nil {
				t.Fatal(err)
			}
		},
		"expiry": func(f *fixture, id string) {
			f.clock = f.clock.Add(f.s.cfg.ActiveRequestExpiry + time.Second)
			f.s.SweepExpired()
		},
		"worker deleted": func(f *fixture, id string) {
			if _, err := f.log.Apply(fsm.DeleteWorker{WorkerID: 1}); err != nil {
				t.Fatal(err)
			}
			f.worker(1, 1)
		},
	}
	for bookName, bookFn := range book {
		for endName, endFn := range end {
			t.Run(bookName+"/"+endName, func(t *testing.T) {
				f := newFixture(t, withBounds(3, 100))
				f.worker(1, 1)
				// Blocks: 60 + 40 fit, one block more does not.
				if err := bookFn(f, "a", blocksPrompt(1, 60)); err != nil {
					t.Fatal(err)
				}
				if err := bookFn(f, "b", blocksPrompt(2, 40)); err != nil {
					t.Fatal(err)
				}
				err := bookFn(f, "c", blocksPrompt(3, 1))
				if !errors.Is(err, ErrCapacity) {
					t.Fatalf("a booking past --max-reserved-blocks = %v, want ErrCapacity", err)
				}
				if _, err := f.s.Reservation("c"); !errors.Is(err, ErrReservationNotFound) {
					t.Fatalf("a refused booking was booked: %v", err)
				}
				if got := f.s.Capacity(); got.LocalReservations != 2 || got.LocalBlocks != 100 {
					t.Fatalf("capacity after a refusal = %+v", got)
				}
				endFn(f, "a")
				// Count: with room for blocks, the third booking fits and
				// a fourth does not.
				for _, id := range []string{"c", "d"} {
					if err := bookFn(f, id, blocksPrompt(4, 1)); err != nil {
						t.Fatalf("booking %s after an end: %v", id, err)
					}
				}
				if endName != "free" { // it ended b as well
					if err := bookFn(f, "e", blocksPrompt(5, 1)); err != nil {
						t.Fatal(err)
					}
				}
				if err := bookFn(f, "f", blocksPrompt(6, 1)); !errors.Is(err, ErrCapacity) {
					t.Fatalf("a booking past --max-reservations = %v, want ErrCapacity", err)
				}
			})
		}
	}
}

// Test_CapacityMirrorsUseHalf: a peer's admissions are dropped once
// mirrors hold half of either bound, and the node's own callers still book
// the other half; a peer's free gives the room back.
func Test_CapacityMirrorsUseHalf(t *testing.T) {
	tests := []struct {
		name               string
		reservations, blks int64
		mirror             []int // blocks of each admission
		dropped            int   // the index of the first dropped admission
	}{
		{"count", 4, 1000, []int{1, 1, 1}, 2},
		{"blocks", 100, 100, []int{30, 20, 1}, 2},
		{"one large", 100, 100, []int{51}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withBounds(tt.reservations, tt.blks))
			f.worker(1, 1)
			for i, n := range tt.mirror {
				pr := blocksPrompt(uint64(i+1), n)
				ev := replica.Event{Kind: replica.KindAdmission, ReservationID: fmt.Sprintf("m%d", i), Model: keyM.Model,
					Tenant: keyM.Tenant, WorkerID: 1, BlockSize: 16, SequenceHashes: pr.SequenceHashes, ISL: pr.ISL,
					Admitted: f.clock}
				why := f.s.ApplyPeerEvent("n2", &ev)
				if want := ""; i >= tt.dropped {
					if why != DropCapacity {
						t.Fatalf("admission %d = %q, want %q", i, why, DropCapacity)
					}
				} else if why != want {
					t.Fatalf("admission %d = %q", i, why)
				}
			}
			before := f.s.Capacity()
			// The local half is there for the node's own callers.
			local := min(tt.reservations/2, 2)
			for i := range local {
				if _, err := f.s.Reserve(ReserveRequest{ID: fmt.Sprintf("l%d", i), Partition: keyM, WorkerID: 1,
					Prompt: blocksPrompt(uint64(100+i), 1)}); err != nil {
					t.Fatalf("local booking %d with mirrors at their half (%+v): %v", i, before, err)
				}
			}
			if tt.dropped > 0 {
				ev := replica.Event{Kind: replica.KindFree, ReservationID: "m0", BookedBy: "n2"}
				if why := f.s.ApplyPeerEvent("n2", &ev); why != "" {
					t.Fatal(why)
				}
				if got := f.s.Capacity(); got.MirroredReservations != before.MirroredReservations-1 {
					t.Fatalf("a peer's free left capacity %+v (before %+v)", got, before)
				}
			}
		})
	}
}

// Test_CapacityValidation: bounds below two are refused (mirrors get half,
// and half of one is nothing).
func Test_CapacityValidation(t *testing.T) {
	for _, b := range [][2]int64{{0, 10}, {1, 10}, {10, 0}, {10, 1}, {-1, 10}} {
		cfg := DefaultConfig()
		cfg.MaxReservations, cfg.MaxReservedBlocks = b[0], b[1]
		if err := cfg.Validate(); err == nil {
			t.Fatalf("bounds %v accepted", b)
		}
	}
}

// Test_BytesPerBookedBlock measures the heap a booking holds per block when
// no other booking shares its blocks, the figure the default bounds are
// sized from (capacity.go: about 116 B per block, 360 B per booking). It
// fails when a change makes a booked block cost much more, because the
// defaults then hold more memory than README says.
func Test_BytesPerBookedBlock(t *testing.T) {
	const bookings, blocks = 2000, 128
	f := newFixture(t)
	f.worker(1, 1)
	prs := make([]Prompt, bookings)
	for i := range prs {
		prs[i] = blocksPrompt(uint64(i+1), blocks)
		prs[i].BlockHashes = nil // hash form without block hashes: nothing but the booking
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range prs {
		if _, err := f.s.Reserve(ReserveRequest{ID: fmt.Sprintf("r-%06d", i), Partition: keyM, WorkerID: 1,
			Prompt: prs[i], EffectivePrefill: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(prs)
	runtime.KeepAlive(f)
	perBlock := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (bookings * blocks)
	t.Logf("heap per booked block: %.1f B (%d bookings of %d unshared blocks)", perBlock, bookings, blocks)
	if perBlock > 160 {
		t.Fatalf("a booked block costs %.1f B of heap; the default bounds (capacity.go, README) assume about 116 B: re-size them", perBlock)
	}
}
