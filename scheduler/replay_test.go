package scheduler

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// Test_SelectAndReserveReplay: a select_and_reserve repeated with the id
// of a live booking and the same prompt gets the booking's answer back,
// marked replayed, and books nothing more; with another prompt it is a
// conflict (SPEC §3.3).
func Test_SelectAndReserveReplay(t *testing.T) {
	pr := prompt(1, 2, 3)
	tests := []struct {
		name   string
		repeat func(f *fixture) (Selection, error)
		replay bool // else ErrDuplicateReservation
	}{
		{"same prompt", func(f *fixture) (Selection, error) {
			return f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 3), Reserve: true, ReservationID: "r"})
		}, true},
		{"same prompt as tokens' hashes, sequence hashes only", func(f *fixture) (Selection, error) {
			p := prompt(1, 2, 3)
			p.BlockHashes = nil
			return f.s.Select(SelectRequest{Partition: keyM, Prompt: p, Reserve: true, ReservationID: "r"})
		}, true},
		{"same prompt while every worker is busy", func(f *fixture) (Selection, error) {
			f.apply(fsm.SetThresholds{Model: "m", ActiveDecodeBlocks: ptr(0.0)})
			return f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 3), Reserve: true, ReservationID: "r"})
		}, true},
		{"other blocks", func(f *fixture) (Selection, error) {
			return f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2, 4), Reserve: true, ReservationID: "r"})
		}, false},
		{"a prefix", func(f *fixture) (Selection, error) {
			p := prompt(1, 2)
			p.ISL = pr.ISL
			return f.s.Select(SelectRequest{Partition: keyM, Prompt: p, Reserve: true, ReservationID: "r"})
		}, false},
		{"other isl", func(f *fixture) (Selection, error) {
			p := prompt(1, 2, 3)
			p.ISL--
			return f.s.Select(SelectRequest{Partition: keyM, Prompt: p, Reserve: true, ReservationID: "r"})
		}, false},
		{"other partition", func(f *fixture) (Selection, error) {
			w := fsm.Worker{WorkerID: 9, ModelName: "other", Endpoint: "http://w9", BlockSize: 16, DataParallelSize: 1,
				KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:7009"}}
			if _, err := f.log.Upsert(w); err != nil {
				t.Fatal(err)
			}
			return f.s.Select(SelectRequest{Partition: fsm.PartitionKey{Model: "other", Tenant: "default"},
				Prompt: prompt(1, 2, 3), Reserve: true, ReservationID: "r"})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.worker(1, 1)
			f.worker(2, 1)
			f.cache(2, 0, 0, 0, 1, 2) // worker 2 holds the prompt's first two blocks
			first, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr, Reserve: true, ReservationID: "r"})
			if err != nil || first.WorkerID != 2 || first.Replayed {
				t.Fatalf("first booking: %+v %v", first, err)
			}
			before := f.load(2, 0)
			// The cache changes meanwhile: the answer given back is the one
			// the booking got, not a new match.
			f.cache(2, 0, 0, 1002, 3) // parent: block 2 by its engine hash
			again, err := tt.repeat(f)
			if !tt.replay {
				if !errors.Is(err, ErrDuplicateReservation) {
					t.Fatalf("repeat = %+v, %v; want ErrDuplicateReservation", again, err)
				}
				return
			}
			if err != nil || !again.Replayed {
				t.Fatalf("repeat = %+v, %v; want the booking's answer", again, err)
			}
			again.Replayed = false
			if !reflect.DeepEqual(again, first) {
				t.Fatalf("replayed answer %+v, first answer %+v", again, first)
			}
			if after := f.load(2, 0); after != before {
				t.Fatalf("a replay booked again: load %+v, before %+v", after, before)
			}
		})
	}
}

// Test_ReplayOfOtherBookings: an id booked through POST /reservations, or
// mirrored from a peer, has no stored answer; a select_and_reserve of it
// with the same prompt gets the booking rebuilt (worker, rank, booked
// prefill), and one freed since is booked anew.
func Test_ReplayOfOtherBookings(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	pr := prompt(1, 2)
	f.mustReserve("reserved", 2, 0, pr)
	mirror := replica.Event{Kind: replica.KindAdmission, ReservationID: "mirrored", Model: "m", Tenant: "default",
		WorkerID: 2, BlockSize: 16, SequenceHashes: pr.SequenceHashes, Chained: true, ISL: pr.ISL, PrefillTokens: 7,
		Admitted: f.clock}
	if why := f.s.ApplyPeerEvent("n2", &mirror); why != "" {
		t.Fatal(why)
	}
	for id, prefill := range map[string]int64{"reserved": 32, "mirrored": 7} {
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2), Reserve: true, ReservationID: id})
		if err != nil || !sel.Replayed || sel.WorkerID != 2 || sel.ReservationID != id || sel.EffectivePrefillTokens != prefill ||
			sel.Endpoint != "http://w2" || sel.BlockSize != 16 {
			t.Fatalf("%s: %+v %v", id, sel, err)
		}
	}
	if l := f.load(2, 0); l.ActiveRequests != 2 {
		t.Fatalf("replays booked: %+v", l)
	}
	if err := f.s.Free("reserved"); err != nil {
		t.Fatal(err)
	}
	sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(1, 2), Reserve: true, ReservationID: "reserved"})
	if err != nil || sel.Replayed {
		t.Fatalf("an id freed since is booked anew: %+v %v", sel, err)
	}
}

// Test_SamePrompt: the booked hashes hold each hash once; a prompt with
// repeats of hashes is the same prompt, one with any other hash is not.
func Test_SamePrompt(t *testing.T) {
	r := &reservation{isl: 64, blocks: []uint64{1, 2, 3}}
	for _, tt := range []struct {
		seq  []uint64
		same bool
	}{
		{[]uint64{1, 2, 3}, true},
		{[]uint64{1, 1, 2, 2, 3, 3}, true},
		{[]uint64{1, 2, 1, 3, 2}, true},
		{[]uint64{1, 2}, false},
		{[]uint64{1, 2, 3, 4}, false},
		{[]uint64{1, 3, 2}, false},
		{[]uint64{1, 1, 2, 4}, false},
		{[]uint64{2, 1, 3}, false},
	} {
		if got := r.samePrompt(&Prompt{SequenceHashes: tt.seq, ISL: 64}); got != tt.same {
			t.Errorf("samePrompt(%v) = %v, want %v", tt.seq, got, tt.same)
		}
	}
}
