package scheduler

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// relay is a Publisher that hands one node's events to the others: at
// once (deliver) or when the test says (held), to script reordering.
type relay struct {
	origin string
	peers  []*fixture
	hold   bool
	held   []replica.Event
	drops  map[string]int
}

func (r *relay) Publish(ev replica.Event) {
	if r.hold {
		r.held = append(r.held, ev)
		return
	}
	r.deliver(ev)
}

func (r *relay) deliver(ev replica.Event) {
	for _, p := range r.peers {
		if why := p.s.ApplyPeerEvent(r.origin, &ev); why != "" {
			r.drops[why]++
		}
	}
}

// replicas returns n fixtures with the same catalog (workers 1 and 2, one
// rank each) whose schedulers publish to one another.
func replicas(t *testing.T, n int) ([]*fixture, []*relay) {
	fs := make([]*fixture, n)
	for i := range fs {
		fs[i] = newFixture(t)
		fs[i].worker(1, 1)
		fs[i].worker(2, 1)
	}
	rs := make([]*relay, n)
	for i, f := range fs {
		rs[i] = &relay{origin: fmt.Sprintf("n%d", i+1), drops: map[string]int{}}
		for j, g := range fs {
			if j != i {
				rs[i].peers = append(rs[i].peers, g)
			}
		}
		f.s.SetPublisher(rs[i], rs[i].origin)
	}
	return fs, rs
}

func sameLoads(t *testing.T, fs []*fixture) []PartitionLoads {
	t.Helper()
	want := fs[0].s.Loads("", "")
	for i, f := range fs[1:] {
		if got := f.s.Loads("", ""); !reflect.DeepEqual(got, want) {
			t.Fatalf("node %d loads %+v, node 1 %+v", i+2, got, want)
		}
	}
	return want
}

// Test_ReplicaLifecycle books on one node, completes prefill on a second
// and frees on a third: every node counts the booking, and every load
// returns to exactly zero.
func Test_ReplicaLifecycle(t *testing.T) {
	fs, rs := replicas(t, 3)
	fs[0].mustReserve("r1", 1, 0, prompt(1, 2, 3))
	fs[0].mustReserve("r2", 1, 0, prompt(1, 2, 9)) // shares two blocks with r1
	loads := sameLoads(t, fs)
	if l := fs[2].load(1, 0); l.ActiveRequests != 2 || l.ActiveDecodeBlocks != 4 || l.ActivePrefillTokens != 96 {
		t.Fatalf("mirrored load on node 3 = %+v (all loads %+v)", l, loads)
	}
	info, err := fs[1].s.Reservation("r1")
	if err != nil || info.OriginNode != "n1" || info.Blocks != 3 || info.ISL != 48 {
		t.Fatalf("mirrored reservation on node 2 = %+v, %v", info, err)
	}
	if info, _ := fs[0].s.Reservation("r1"); info.OriginNode != "" {
		t.Fatalf("booking node sees its own booking as mirrored: %+v", info)
	}

	// The id is taken everywhere once the admission arrived.
	if _, err := fs[2].s.Reserve(ReserveRequest{ID: "r1", Partition: keyM, WorkerID: 2, Prompt: prompt(7)}); !errors.Is(err, ErrDuplicateReservation) {
		t.Fatalf("second booking of r1 on node 3: %v", err)
	}
	if err := fs[1].s.PrefillComplete("r1"); err != nil {
		t.Fatal(err)
	}
	if err := fs[2].s.OutputBlock("r2", nil); err != nil { // local to node 3 by design
		t.Fatal(err)
	}
	if l := fs[0].load(1, 0); l.ActivePrefillTokens != 48 || l.ActiveDecodeBlocks != 4 {
		t.Fatalf("after prefill_complete on node 2, node 1 = %+v", l)
	}
	if l := fs[2].load(1, 0); l.ActiveDecodeBlocks != 5 {
		t.Fatalf("output block on node 3 = %+v", l)
	}
	for _, step := range []struct {
		node int
		id   string
	}{{2, "r1"}, {1, "r2"}} {
		if err := fs[step.node].s.Free(step.id); err != nil {
			t.Fatalf("free %s on node %d: %v", step.id, step.node+1, err)
		}
	}
	for i, f := range fs {
		if l := f.load(1, 0); l != (RankLoad{WorkerID: 1}) {
			t.Fatalf("node %d after the frees: %+v", i+1, l)
		}
		if _, err := f.s.Reservation("r1"); !errors.Is(err, ErrReservationNotFound) {
			t.Fatalf("node %d still has r1: %v", i+1, err)
		}
	}
	for _, r := range rs {
		if len(r.drops) != 0 {
			t.Fatalf("%s: drops %v", r.origin, r.drops)
		}
	}
}

// Test_ReplicaSteersSelection: a node that only knows another node's
// bookings through sync sends the next prompt elsewhere.
func Test_ReplicaSteersSelection(t *testing.T) {
	fs, _ := replicas(t, 2)
	for _, f := range fs {
		f.cache(1, 0, indexer.TierDevice, 0, 1, 2, 3, 4)
	}
	pr := prompt(1, 2, 3, 4)
	if sel, _ := fs[1].s.Select(SelectRequest{Partition: keyM, Prompt: pr}); sel.WorkerID != 1 {
		t.Fatalf("idle: %+v", sel)
	}
	for i := range 3 {
		fs[0].mustReserve(fmt.Sprint("busy-", i), 1, 0, prompt(uint64(100+10*i), uint64(101+10*i), uint64(102+10*i)))
	}
	if sel, _ := fs[1].s.Select(SelectRequest{Partition: keyM, Prompt: pr}); sel.WorkerID != 2 {
		t.Fatalf("node 2 ignores node 1's bookings: %+v", sel)
	}
}

// Test_ReplicaDrops: replica traffic never creates partitions or ranks,
// and what does not fit is dropped with its reason.
func Test_ReplicaDrops(t *testing.T) {
	admission := func(mut func(*replica.Event)) *replica.Event {
		ev := &replica.Event{Kind: replica.KindAdmission, ReservationID: "x", Model: "m", Tenant: "default",
			WorkerID: 1, BlockSize: 16, SequenceHashes: []uint64{1, 2}, ISL: 32, PrefillTokens: 32}
		mut(ev)
		return ev
	}
	for _, tt := range []struct {
		name string
		ev   *replica.Event
		want string
	}{
		{"unknown model", admission(func(e *replica.Event) { e.Model = "other" }), DropUnknownPartition},
		{"unknown tenant", admission(func(e *replica.Event) { e.Tenant = "t" }), DropUnknownPartition},
		{"unknown worker", admission(func(e *replica.Event) { e.WorkerID = 9 }), DropUnknownRank},
		{"unknown rank", admission(func(e *replica.Event) { e.DPRank = 1 }), DropUnknownRank},
		{"block size", admission(func(e *replica.Event) { e.BlockSize = 32 }), DropBlockSize},
		{"booked here already", admission(func(e *replica.Event) { e.ReservationID = "mine" }), DropDuplicate},
		{"older than the expiry", admission(func(e *replica.Event) { e.Admitted = time.Unix(1_700_000_000-301, 0) }), DropExpired},
		{"free of an unknown id", &replica.Event{Kind: replica.KindFree, ReservationID: "nope"}, DropUnknownReservation},
		{"prefill of an unknown id", &replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "nope"}, DropUnknownReservation},
		{"fits", admission(func(*replica.Event) {}), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.worker(1, 1)
			f.mustReserve("mine", 1, 0, prompt(5))
			if tt.ev.Admitted.IsZero() {
				tt.ev.Admitted = f.clock
			}
			before := f.load(1, 0)
			got := f.s.ApplyPeerEvent("n2", tt.ev)
			if got != tt.want {
				t.Fatalf("ApplyPeerEvent = %q, want %q", got, tt.want)
			}
			if after := f.load(1, 0); tt.want != "" && after != before {
				t.Fatalf("a dropped event changed the load: %+v → %+v", before, after)
			}
		})
	}
}

// Test_ReplicaReordering: a free from one node can overtake the admission
// from another (two connections). The early free leaves a tombstone and
// the late admission is dropped, so nothing leaks until the expiry.
func Test_ReplicaReordering(t *testing.T) {
	fs, rs := replicas(t, 3)
	rs[0].hold = true // node 1's admission is slow to reach the others
	fs[0].mustReserve("r1", 1, 0, prompt(1, 2))
	held := rs[0].held
	rs[0].hold, rs[0].held = false, nil
	// Node 2 learns of r1 first (from node 1), frees it; node 3 gets the
	// free before the admission.
	if why := fs[1].s.ApplyPeerEvent("n1", &held[0]); why != "" {
		t.Fatal(why)
	}
	if err := fs[1].s.Free("r1"); err != nil {
		t.Fatal(err)
	}
	if why := fs[2].s.ApplyPeerEvent("n1", &held[0]); why != DropUnknownReservation {
		t.Fatalf("late admission on node 3: %q", why)
	}
	for i, f := range fs {
		if l := f.load(1, 0); l != (RankLoad{WorkerID: 1}) {
			t.Fatalf("node %d: %+v", i+1, l)
		}
	}
	if rs[1].drops[DropUnknownReservation] != 1 { // node 3 got the free before the admission
		t.Fatalf("drops %v", rs[1].drops)
	}
}

// Test_ReplicaExpiry: a mirrored booking expires with the booking time its
// node gave it, so a lost free never holds load past the expiry.
func Test_ReplicaExpiry(t *testing.T) {
	fs, rs := replicas(t, 2)
	fs[0].mustReserve("r1", 1, 0, prompt(1))
	rs[0].peers = nil // the free is lost
	if err := fs[0].s.Free("r1"); err != nil {
		t.Fatal(err)
	}
	fs[1].clock = fs[1].clock.Add(299 * time.Second)
	if n := fs[1].s.SweepExpired(); n != 0 {
		t.Fatalf("expired early: %d", n)
	}
	fs[1].clock = fs[1].clock.Add(time.Second)
	if n := fs[1].s.SweepExpired(); n != 1 || fs[1].load(1, 0) != (RankLoad{WorkerID: 1}) {
		t.Fatalf("sweep freed %d, load %+v", n, fs[1].load(1, 0))
	}
}

// Test_ReplicaLeavesTheCatalogAlone: a mirrored booking on a rank that
// leaves the catalog goes with it, like a local one.
func Test_ReplicaLeavesTheCatalogAlone(t *testing.T) {
	fs, _ := replicas(t, 2)
	fs[0].mustReserve("r1", 2, 0, prompt(1, 2))
	if _, err := fs[1].log.Apply(fsm.DeleteWorker{WorkerID: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs[1].s.Reservation("r1"); !errors.Is(err, ErrReservationNotFound) {
		t.Fatalf("mirrored booking outlived its worker: %v", err)
	}
}

// Test_ReplicaSameIDOnTwoNodes: two nodes book one id before either
// admission arrives. Each keeps its own booking (the other's admission is
// a duplicate), and the end of one never ends the other.
func Test_ReplicaSameIDOnTwoNodes(t *testing.T) {
	fs, rs := replicas(t, 2)
	for _, r := range rs {
		r.hold = true
	}
	fs[0].mustReserve("x", 1, 0, prompt(1))
	fs[1].mustReserve("x", 2, 0, prompt(2))
	for _, r := range rs {
		held := r.held
		r.hold, r.held = false, nil
		for _, ev := range held {
			r.deliver(ev)
		}
	}
	if rs[0].drops[DropDuplicate] != 1 || rs[1].drops[DropDuplicate] != 1 {
		t.Fatalf("drops %v %v", rs[0].drops, rs[1].drops)
	}
	if err := fs[0].s.PrefillComplete("x"); err != nil {
		t.Fatal(err)
	}
	if err := fs[0].s.Free("x"); err != nil {
		t.Fatal(err)
	}
	if rs[0].drops[DropOtherBooking] != 2 {
		t.Fatalf("node 2 applied node 1's end of its own x: drops %v", rs[0].drops)
	}
	if l := fs[1].load(2, 0); l.ActiveRequests != 1 || l.ActivePrefillTokens != 16 {
		t.Fatalf("node 2's own booking of x = %+v", l)
	}
}

// Test_ReplicaExpiryOrder: a mirrored booking with an earlier admission
// time than local bookings already queued still expires on time (the
// sweep stops at the first live booking).
func Test_ReplicaExpiryOrder(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.mustReserve("local", 1, 0, prompt(1))
	ev := replica.Event{Kind: replica.KindAdmission, ReservationID: "old", Model: "m", Tenant: "default",
		WorkerID: 1, BlockSize: 16, SequenceHashes: []uint64{9}, ISL: 16, PrefillTokens: 16,
		Admitted: f.clock.Add(-200 * time.Second)}
	if why := f.s.ApplyPeerEvent("n2", &ev); why != "" {
		t.Fatal(why)
	}
	f.clock = f.clock.Add(150 * time.Second) // "old" is 350 s old, "local" 150 s
	if n := f.s.SweepExpired(); n != 1 {
		t.Fatalf("swept %d, want the mirrored booking", n)
	}
	if _, err := f.s.Reservation("old"); !errors.Is(err, ErrReservationNotFound) {
		t.Fatalf("old: %v", err)
	}
}

// Test_ReplicaRepeatedPrefillNotPublished: a repeated prefill_complete is a
// no-op, and is not sent to the peers again.
func Test_ReplicaRepeatedPrefillNotPublished(t *testing.T) {
	fs, rs := replicas(t, 2)
	fs[0].mustReserve("r", 1, 0, prompt(1))
	rs[0].hold = true
	for range 3 {
		if err := fs[0].s.PrefillComplete("r"); err != nil {
			t.Fatal(err)
		}
	}
	if len(rs[0].held) != 1 || rs[0].held[0].BookedBy != "n1" {
		t.Fatalf("published %+v", rs[0].held)
	}
}
