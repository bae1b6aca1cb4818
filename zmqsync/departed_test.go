package zmqsync

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// Test_DepartedMember: a member that left the catalog is still followed for
// the linger, and only the ends of other nodes' bookings it sends apply (a
// removed node answers those until it finds out it was removed); its
// admissions and the ends of its own bookings do not. Past the linger the
// subscription and the origin state go. A member back within the linger is
// a member again.
func Test_DepartedMember(t *testing.T) {
	var ra, rb recorder
	a := startSyncer(t, "a", &ra)
	b, err := Start(Config{NodeID: "b", Listen: "tcp://127.0.0.1:0", Apply: rb.apply, DepartedLinger: 500 * time.Millisecond,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	withA := map[string]Member{"a": {Endpoint: a.Endpoint(), Epoch: 10}, "b": {Epoch: 11}}
	a.SetIdentity(Identity{ClusterID: testCluster, Epoch: 10})
	b.SetIdentity(Identity{ClusterID: testCluster, Epoch: 11})
	a.SetMembers(withA)
	b.SetMembers(withA)
	publishUntil(t, a, &rb, "probe-a")

	b.SetMembers(map[string]Member{"b": {Epoch: 11}}) // a is removed; it does not know yet
	if st := b.Status(); !slices.ContainsFunc(b.Peers(), func(p PeerStatus) bool {
		return p.Endpoint == a.Endpoint() && slices.Equal(p.Sources, []Source{SourceDeparted})
	}) {
		t.Fatalf("the departed member is not followed: %+v (%+v)", b.Peers(), st)
	}
	a.Publish(replica.Event{Kind: replica.KindAdmission, ReservationID: "its-booking", Model: "m", Tenant: "t", BlockSize: 16, ISL: 1,
		Admitted: time.Now()})
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "its-own", BookedBy: "a"})
	a.Publish(replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "c-booking", BookedBy: "c"})
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "c-booking", BookedBy: "c"})
	eventually(t, "the free of c's booking applies", func() bool { return slices.Contains(rb.got(), "a:free:c-booking") })
	if got := rb.got(); !slices.Equal(got, []string{"a:prefill_complete:c-booking", "a:free:c-booking"}) {
		t.Fatalf("from the departed member, b applied %v", got)
	}

	eventually(t, "the linger ends", func() bool {
		return !slices.ContainsFunc(b.Peers(), func(p PeerStatus) bool { return p.Endpoint == a.Endpoint() }) &&
			b.origin("a") == nil
	})

	// A member that leaves and comes back within the linger is a member.
	b.SetMembers(withA)
	publishUntil(t, a, &rb, "probe-back")
	b.SetMembers(map[string]Member{"b": {Epoch: 11}})
	b.SetMembers(withA)
	a.Publish(replica.Event{Kind: replica.KindAdmission, ReservationID: "back", Model: "m", Tenant: "t", BlockSize: 16, ISL: 1,
		Admitted: time.Now()})
	eventually(t, "a member again", func() bool { return slices.Contains(rb.got(), "a:admission:back") })
}

// Test_DepartedAgainKeepsItsLinger: a member that leaves, comes back and
// leaves again gets a whole linger for its second departure; the first
// departure's timers do not cut it short (found by review).
func Test_DepartedAgainKeepsItsLinger(t *testing.T) {
	var ra, rb recorder
	a := startSyncer(t, "a", &ra)
	const linger = 400 * time.Millisecond
	b, err := Start(Config{NodeID: "b", Listen: "tcp://127.0.0.1:0", Apply: rb.apply, DepartedLinger: linger,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	withA := map[string]Member{"a": {Endpoint: a.Endpoint(), Epoch: 10}, "b": {Epoch: 11}}
	without := map[string]Member{"b": {Epoch: 11}}
	b.SetIdentity(Identity{ClusterID: testCluster, Epoch: 11})
	b.SetMembers(withA)
	b.SetMembers(without) // first departure
	first := time.Now()
	b.SetMembers(withA)
	eventually(t, "half the first linger passes", func() bool { return time.Since(first) >= linger/2 })
	b.SetMembers(without) // second departure
	second := time.Now()
	eventually(t, "the first departure's timers have fired", func() bool { return time.Since(first) > linger+50*time.Millisecond })
	if time.Since(second) < linger && (b.origin("a") == nil ||
		!slices.ContainsFunc(b.Peers(), func(p PeerStatus) bool { return p.Endpoint == a.Endpoint() })) {
		t.Fatalf("the second departure was cut short %v into its %v linger", time.Since(second), linger)
	}
	eventually(t, "the second linger ends", func() bool {
		return b.origin("a") == nil && !slices.ContainsFunc(b.Peers(), func(p PeerStatus) bool { return p.Endpoint == a.Endpoint() })
	})
}
