package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// capture is a Publisher that keeps what it is given.
type capture struct{ events []replica.Event }

func (c *capture) Publish(ev replica.Event) { c.events = append(c.events, ev) }

func (c *capture) take() []string {
	var out []string
	for _, ev := range c.events {
		switch ev.Kind {
		case replica.KindWant:
			out = append(out, fmt.Sprintf("want %s@%d %v", ev.Want.Target, ev.Want.Epoch, ev.Want.IDs))
		default:
			out = append(out, fmt.Sprintf("%s %s by %q", ev.Kind, ev.ReservationID, ev.BookedBy))
		}
	}
	c.events = nil
	return out
}

// aeFixture is a node "me" with workers 1 and 2 that mirrors bookings of
// "n2" and publishes to a capture.
func aeFixture(t *testing.T) (*fixture, *capture) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	c := &capture{}
	f.s.SetPublisher(c, "me")
	return f, c
}

// mirror books an admission of origin n2 from its message counter in
// epoch.
func (f *fixture) mirror(id string, epoch, counter uint64) {
	f.t.Helper()
	ev := replica.Event{Kind: replica.KindAdmission, ReservationID: id, Model: "m", Tenant: "default", WorkerID: 1,
		BlockSize: 16, SequenceHashes: []uint64{uint64(len(id)), 7}, ISL: 32, PrefillTokens: 32, Admitted: f.clock,
		Epoch: epoch, Counter: counter}
	if why := f.s.ApplyPeerEvent("n2", &ev); why != "" {
		f.t.Fatalf("mirror %s: %s", id, why)
	}
}

// live applies one part of n2's live set.
func (f *fixture) live(epoch uint64, part replica.LivePart) {
	f.t.Helper()
	ev := replica.Event{Kind: replica.KindLive, Live: &part, Epoch: epoch, Counter: part.AsOf + 1}
	if why := f.s.ApplyPeerEvent("n2", &ev); why != "" {
		f.t.Fatalf("live: %s", why)
	}
}

func (f *fixture) ids() []string {
	var out []string
	rs, _ := f.s.Reservations(ReservationFilter{})
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// Test_LiveSetDropsWhatItDoesNotList: a complete set drops the origin's
// mirrors it does not list that were booked from messages it covers, and
// nothing else; a part of an incomplete set drops nothing.
func Test_LiveSetDropsWhatItDoesNotList(t *testing.T) {
	tests := []struct {
		name     string
		part     replica.LivePart
		wantLeft []string
	}{
		{"complete set listing b", replica.LivePart{Set: 1, AsOf: 10, IDs: []string{"b"}, Complete: true},
			[]string{"b", "d", "local"}}, // d came after as_of
		{"incomplete set", replica.LivePart{Set: 1, AsOf: 10, IDs: []string{"b"}}, []string{"a", "b", "c", "d", "local"}},
		{"empty complete set", replica.LivePart{Set: 1, AsOf: 11, Complete: true}, []string{"local"}},
		{"complete set of an earlier as_of", replica.LivePart{Set: 1, AsOf: 4, Complete: true}, []string{"c", "d", "local"}},
		{"last part of two: the first one's ids were marked",
			replica.LivePart{Set: 1, AsOf: 10, After: "b", IDs: []string{"c"}, Complete: true}, []string{"b", "c", "d", "local"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := aeFixture(t)
			f.mustReserve("local", 2, 0, prompt(1))
			f.mirror("a", 5, 3)
			f.mirror("b", 5, 4)
			f.mirror("c", 5, 6)
			f.mirror("d", 5, 11)
			if tt.part.After != "" {
				f.live(5, replica.LivePart{Set: 1, AsOf: 10, Through: "b", IDs: []string{"b"}})
			}
			f.live(5, tt.part)
			if got := f.ids(); !slices.Equal(got, tt.wantLeft) {
				t.Fatalf("bookings %v, want %v", got, tt.wantLeft)
			}
		})
	}
}

// Test_LiveSetHealsLostEvents: a listed booking this node lacks is asked
// for once per wantRetry, not when a free of it is known (a tombstone)
// nor soon after its admission was refused; a free this node applied is
// sent again while the origin lists the booking, and forgotten once it
// does not; prefill follows the origin both ways.
func Test_LiveSetHealsLostEvents(t *testing.T) {
	f, c := aeFixture(t)
	f.mirror("p", 5, 1) // prefilling here
	f.mirror("q", 5, 2)
	if err := f.s.PrefillComplete("q"); err != nil { // completed here
		t.Fatal(err)
	}
	f.mirror("gone", 5, 3)
	if err := f.s.Free("gone"); err != nil { // freed here
		t.Fatal(err)
	}
	// A free of "early" from a third node overtook its admission.
	if why := f.s.ApplyPeerEvent("n3", &replica.Event{Kind: replica.KindFree, ReservationID: "early", BookedBy: "n2"}); why != DropUnknownReservation {
		t.Fatalf("early free: %s", why)
	}
	// An admission refused here (worker 9 is unknown).
	refused := replica.Event{Kind: replica.KindAdmission, ReservationID: "refused", Model: "m", Tenant: "default", WorkerID: 9,
		BlockSize: 16, ISL: 16, Admitted: f.clock, Epoch: 5, Counter: 4}
	if why := f.s.ApplyPeerEvent("n2", &refused); why != DropUnknownRank {
		t.Fatalf("refused: %s", why)
	}
	c.take()

	set := replica.LivePart{Set: 1, AsOf: 10, IDs: []string{"early", "gone", "lost", "p", "q", "refused"}, Prefilling: []uint32{4}, Complete: true}
	f.live(5, set)
	if got, want := c.take(), []string{`free gone by "n2"`, "want n2@5 [lost]", `prefill_complete q by "n2"`}; !slices.Equal(sortedCopy(got), sortedCopy(want)) {
		t.Fatalf("published %q, want %q", got, want)
	}
	if l := f.load(1, 0); l.ActivePrefillTokens != 0 || l.ActiveRequests != 2 {
		t.Fatalf("p's prefill not completed from the set: %+v", l)
	}
	// The same set a second later: the free again, no new want yet.
	f.clock = f.clock.Add(time.Second)
	set.Set = 2
	f.live(5, set)
	if got := c.take(); !slices.Contains(got, `free gone by "n2"`) || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "want") }) {
		t.Fatalf("second set published %q", got)
	}
	// After wantRetry the lost booking is asked for again, and so is the
	// one refused for an unknown rank: the catalog may have its worker by
	// now (a refusal for capacity waits refusedRetry).
	f.clock = f.clock.Add(wantRetry)
	set.Set = 3
	set.IDs, set.Prefilling = []string{"lost", "refused"}, nil // gone, p and q ended on n2
	f.live(5, set)
	if got := c.take(); !slices.Equal(got, []string{"want n2@5 [lost refused]"}) {
		t.Fatalf("third set published %q", got)
	}
	if got := f.ids(); len(got) != 0 {
		t.Fatalf("mirrors left %v", got)
	}
	// "gone" is no longer listed: its free is not sent again.
	set.Set, set.IDs = 4, []string{"gone"}
	f.clock = f.clock.Add(time.Second)
	f.live(5, set)
	if got := c.take(); !slices.Equal(got, []string{"want n2@5 [gone]"}) {
		t.Fatalf("a free confirmed by the origin was sent again: %q", got)
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Test_ForgetMirrors: a later epoch of an origin drops its earlier
// epochs' mirrors (and its pending frees), ForgetAll every one of them;
// other nodes' bookings stay, and the load returns exactly to what they
// hold.
func Test_ForgetMirrors(t *testing.T) {
	f, _ := aeFixture(t)
	f.mustReserve("local", 1, 0, prompt(1, 2))
	f.mirror("old", 0, 0) // came as v1
	f.mirror("e5", 5, 1)
	f.mirror("e7", 7, 1)
	other := replica.Event{Kind: replica.KindAdmission, ReservationID: "n3s", Model: "m", Tenant: "default", WorkerID: 1,
		BlockSize: 16, SequenceHashes: []uint64{1}, ISL: 16, Admitted: f.clock, Epoch: 2, Counter: 1}
	if why := f.s.ApplyPeerEvent("n3", &other); why != "" {
		t.Fatal(why)
	}
	if n := f.s.ForgetMirrors("n2", 7); n != 2 {
		t.Fatalf("forgot %d, want 2", n)
	}
	if got := f.ids(); !slices.Equal(got, []string{"e7", "local", "n3s"}) {
		t.Fatalf("after epoch 7: %v", got)
	}
	if n := f.s.ForgetMirrors("n2", replica.ForgetAll); n != 1 {
		t.Fatalf("forgot %d, want 1", n)
	}
	if err := f.s.Free("n3s"); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Free("local"); err != nil {
		t.Fatal(err)
	}
	if l := f.load(1, 0); l != (RankLoad{WorkerID: 1}) {
		t.Fatalf("load after everything ended: %+v", l)
	}
}

// Test_WantAndLiveBookings: a want republishes the admissions of this
// node's own live bookings only; the live set lists them with their
// prefill state, never the mirrors.
func Test_WantAndLiveBookings(t *testing.T) {
	f, c := aeFixture(t)
	f.mustReserve("mine", 1, 0, prompt(1, 2))
	f.mustReserve("done", 2, 0, prompt(3))
	if err := f.s.PrefillComplete("done"); err != nil {
		t.Fatal(err)
	}
	f.mirror("theirs", 5, 1)
	c.take()
	want := replica.Event{Kind: replica.KindWant, Want: &replica.Want{Target: "me", Epoch: 3, IDs: []string{"mine", "theirs", "unknown"}}}
	if why := f.s.ApplyPeerEvent("n2", &want); why != "" {
		t.Fatal(why)
	}
	if got := c.take(); !slices.Equal(got, []string{`admission mine by ""`}) {
		t.Fatalf("published %q", got)
	}
	live := f.s.LiveBookings(nil)
	slices.SortFunc(live, func(a, b replica.LiveBooking) int { return strings.Compare(a.ID, b.ID) })
	if want := []replica.LiveBooking{{ID: "done"}, {ID: "mine", Prefilling: true}}; !slices.Equal(live, want) {
		t.Fatalf("live %+v, want %+v", live, want)
	}
}

// Test_KnownFreeIsNeverBookedAgain: a node that knows a booking of another
// origin ended (freed here, or by a free a third node sent) keeps sending
// the free while the origin lists it and refuses the booking's admission
// sent again (another node asked for it), until a live set taken after the
// booking stops listing it; a set taken before the booking confirms
// nothing. Found by review: a resent admission re-mirrored a freed booking,
// the free stopped, and the booking stayed until the expiry.
func Test_KnownFreeIsNeverBookedAgain(t *testing.T) {
	for _, how := range []string{"freed here", "freed by a third node"} {
		t.Run(how, func(t *testing.T) {
			f, c := aeFixture(t)
			f.mirror("b", 5, 7)
			if how == "freed here" {
				if err := f.s.Free("b"); err != nil {
					t.Fatal(err)
				}
			} else if why := f.s.ApplyPeerEvent("n3", &replica.Event{Kind: replica.KindFree, ReservationID: "b", BookedBy: "n2"}); why != "" {
				t.Fatal(why)
			}
			c.take()
			// A set taken before the booking does not list it: no proof.
			f.live(5, replica.LivePart{Set: 1, AsOf: 6, Complete: true})
			f.clock = f.clock.Add(time.Second)
			f.live(5, replica.LivePart{Set: 2, AsOf: 9, IDs: []string{"b"}, Complete: true})
			if got := c.take(); !slices.Equal(got, []string{`free b by "n2"`}) {
				t.Fatalf("while the origin lists it: published %q, want the free again and no want", got)
			}
			resent := replica.Event{Kind: replica.KindAdmission, ReservationID: "b", Model: "m", Tenant: "default", WorkerID: 1,
				BlockSize: 16, SequenceHashes: []uint64{1, 7}, ISL: 32, Admitted: f.clock, Epoch: 5, Counter: 12}
			if why := f.s.ApplyPeerEvent("n2", &resent); why != DropFreed {
				t.Fatalf("the admission sent again = %q, want %q", why, DropFreed)
			}
			if got := f.ids(); len(got) != 0 {
				t.Fatalf("booked again: %v", got)
			}
			// Once a later set no longer lists it, the free is done.
			f.live(5, replica.LivePart{Set: 3, AsOf: 13, Complete: true})
			f.live(5, replica.LivePart{Set: 4, AsOf: 14, IDs: []string{"b"}, Complete: true})
			if got := c.take(); slices.Contains(got, `free b by "n2"`) {
				t.Fatalf("a free the origin confirmed was sent again: %q", got)
			}
		})
	}
}

// Test_WantsAreBounded: a live set listing more missing bookings than the
// records hold asks for at most maxWantsPerPart per part, never evicts a
// live record to ask for more, and asks nothing while mirrors hold their
// share of the bounds (every admission would be refused).
func Test_WantsAreBounded(t *testing.T) {
	f, c := aeFixture(t)
	ids := make([]string, maxAntiEntropyRecords+4096)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%07d", i)
	}
	asked := map[string]bool{}
	for set := uint64(1); set <= 70; set++ {
		for from := 0; from < len(ids); from += 4096 {
			to := min(from+4096, len(ids))
			f.live(5, replica.LivePart{Set: set, AsOf: 1, IDs: ids[from:to]})
		}
		for _, ev := range c.events {
			if ev.Kind != replica.KindWant {
				continue
			}
			if len(ev.Want.IDs) > maxWantsPerPart {
				t.Fatalf("one part asked for %d", len(ev.Want.IDs))
			}
			for _, id := range ev.Want.IDs {
				if asked[id] {
					t.Fatalf("set %d asked for %s again within wantRetry", set, id)
				}
				asked[id] = true
			}
		}
		c.events = nil
	}
	if len(asked) != maxAntiEntropyRecords {
		t.Fatalf("asked for %d bookings, want the %d the records hold", len(asked), maxAntiEntropyRecords)
	}

	full := newFixture(t, withBounds(4, 1000))
	full.worker(1, 1)
	cf := &capture{}
	full.s.SetPublisher(cf, "me")
	full.mirror("m1", 5, 1)
	full.mirror("m2", 5, 2) // mirrors hold their half of 4 bookings
	full.live(5, replica.LivePart{Set: 1, AsOf: 3, IDs: []string{"m1", "m2", "other"}})
	if got := cf.take(); len(got) != 0 {
		t.Fatalf("with mirrors at their bound: published %q", got)
	}
}
