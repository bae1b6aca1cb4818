package zmqsync

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// forgetLog records Config.Forget's calls.
type forgetLog struct {
	mu    sync.Mutex
	calls []string // "origin<before"
}

func (f *forgetLog) forget(origin string, before uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := fmt.Sprint(before)
	if before == replica.ForgetAll {
		b = "all"
	}
	f.calls = append(f.calls, origin+"<"+b)
}

func (f *forgetLog) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// bareSyncer is a Syncer without sockets or goroutines, for the checks of
// origin.go.
func bareSyncer(id string, forget func(string, uint64)) *Syncer {
	s := &Syncer{cfg: Config{NodeID: id, Forget: forget, DepartedLinger: time.Hour}, log: slog.New(slog.DiscardHandler), metrics: newMetrics(nil),
		peers: map[string]*peer{}, members: map[string]Member{}, identityChanged: make(chan struct{}),
		origins: map[string]*originState{}, known: map[string]Member{}}
	s.identity.Store(&Identity{})
	return s
}

// Test_Accept feeds the receive checks a sequence of messages and catalog
// changes, and what each must do: drop (and why) or accept, and which
// mirrors it makes the node forget.
func Test_Accept(t *testing.T) {
	other := ClusterID{9}
	v2 := func(origin string, epoch, counter uint64) *Message {
		return &Message{Version: Version, Origin: origin, ClusterID: testCluster, Epoch: epoch, Counter: counter}
	}
	v1 := func(origin string) *Message { return &Message{Version: PreviousVersion, Origin: origin} }
	var forgot forgetLog
	s := bareSyncer("me", forgot.forget)
	steps := []struct {
		name    string
		do      func() // a catalog change before the message, or nil
		msg     *Message
		want    string
		forgets []string
	}{
		{"v2 before the node knows the cluster id", nil, v2("n1", 5, 1), dropNotReady, nil},
		{"v1 from a node the catalog does not know", nil, v1("n1"), dropUnknownOrigin, nil},
		{"catalog: cluster id, members n1 (epoch 5) and n2 (none)", func() {
			s.SetIdentity(Identity{ClusterID: testCluster, Epoch: 3})
			s.SetMembers(map[string]Member{"me": {Epoch: 3}, "n1": {Epoch: 5}, "n2": {}})
		}, nil, "", nil},
		{"another cluster's", nil, func() *Message { m := v2("n1", 5, 1); m.ClusterID = other; return m }(), dropOtherCluster, nil},
		{"not a member", nil, v2("n9", 1, 1), dropUnknownOrigin, nil},
		{"this node's own", nil, v2("me", 3, 1), dropEcho, nil},
		{"an epoch before the catalog's", nil, v2("n1", 4, 1), dropOldEpoch, nil},
		{"the catalog's epoch", nil, v2("n1", 5, 1), "", nil},
		{"the same counter again", nil, v2("n1", 5, 1), dropReplayed, nil},
		{"a gap", nil, v2("n1", 5, 3), "", nil},
		{"the counter of the gap, late", nil, v2("n1", 5, 2), dropReplayed, nil},
		{"a later epoch than the catalog's (it lags)", nil, v2("n1", 7, 1), "", []string{"n1<7"}},
		{"the catalog's epoch, now earlier", nil, v2("n1", 5, 9), dropOldEpoch, nil},
		{"v1 from a member with an epoch", nil, v1("n1"), dropOldVersion, nil},
		{"v1 from a member that may run the previous release", nil, v1("n2"), "", nil},
		{"v2 from it: it runs this release", nil, v2("n2", 2, 1), "", []string{"n2<2"}},
		{"v1 in its name now", nil, v1("n2"), dropOldVersion, nil},
		{"catalog: n1 restarted (epoch 9)", func() {
			s.SetMembers(map[string]Member{"me": {Epoch: 3}, "n1": {Epoch: 9}, "n2": {}})
		}, nil, "", []string{"n1<9"}},
		{"the epoch before the restart", nil, v2("n1", 7, 2), dropOldEpoch, nil},
		{"the new epoch from 1", nil, v2("n1", 9, 1), "", nil},
		{"catalog: the same again", func() {
			s.SetMembers(map[string]Member{"me": {Epoch: 3}, "n1": {Epoch: 9}, "n2": {}})
		}, nil, "", nil},
		{"catalog: n2 left", func() { s.SetMembers(map[string]Member{"me": {Epoch: 3}, "n1": {Epoch: 9}}) }, nil, "", []string{"n2<all"}},
		// Within its linger (departed.go): accepted, numbered as before;
		// applyEvents keeps only the ends of other nodes' bookings.
		{"a message of the member that left", nil, v2("n2", 2, 2), "", nil},
		{"the same message again", nil, v2("n2", 2, 2), dropReplayed, nil},
		{"catalog: n2 added again", func() {
			s.SetMembers(map[string]Member{"me": {Epoch: 3}, "n1": {Epoch: 9}, "n2": {Epoch: 30}})
		}, nil, "", []string{"n2<30"}}, // back within its linger: its state moves to the new epoch
		{"its epoch before it left", nil, v2("n2", 2, 3), dropOldEpoch, nil},
		{"its new epoch", nil, v2("n2", 30, 1), "", nil},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		if st.msg != nil {
			applied := false
			got := s.accept(st.msg, func(*originState) { applied = true })
			if got != st.want || applied != (got == "") {
				t.Fatalf("%s: accept = %q (applied %v), want %q", st.name, got, applied, st.want)
			}
		}
		if got := forgot.take(); !slices.Equal(got, st.forgets) {
			t.Fatalf("%s: forgot %v, want %v", st.name, got, st.forgets)
		}
	}
	status := s.Status()
	if len(status.Origins) != 2 || status.Origins[0].NodeID != "n1" || status.Origins[0].Epoch != 9 || status.Origins[0].Counter != 1 ||
		status.Origins[1].Missed != 0 || status.Mode != ModeV2 {
		t.Fatalf("status %+v", status)
	}
}

// Test_LiveAssembly: a part is Complete only when it ends a set whose
// every part arrived in order.
func Test_LiveAssembly(t *testing.T) {
	part := func(set uint64, after, through string) *replica.LivePart {
		return &replica.LivePart{Set: set, After: after, Through: through}
	}
	tests := []struct {
		name  string
		parts []*replica.LivePart
		want  []bool
	}{
		{"one part", []*replica.LivePart{part(1, "", "")}, []bool{true}},
		{"three parts", []*replica.LivePart{part(1, "", "c"), part(1, "c", "f"), part(1, "f", "")}, []bool{false, false, true}},
		{"a part missing", []*replica.LivePart{part(1, "", "c"), part(1, "f", "")}, []bool{false, false}},
		{"the first part missing", []*replica.LivePart{part(1, "c", "")}, []bool{false}},
		{"parts of two sets", []*replica.LivePart{part(1, "", "c"), part(2, "c", "")}, []bool{false, false}},
		{"a set cut short, then a whole one", []*replica.LivePart{part(1, "", "c"), part(2, "", "")}, []bool{false, true}},
		{"a broken set stays broken", []*replica.LivePart{part(1, "", "c"), part(1, "d", "f"), part(1, "f", "")}, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st originState
			for i, p := range tt.parts {
				st.assembleLive(p)
				if p.Complete != tt.want[i] {
					t.Fatalf("part %d: complete %v, want %v", i, p.Complete, tt.want[i])
				}
			}
		})
	}
}

// Test_SplitLive: parts cover consecutive ranges, at most MaxSetIDs ids
// each, with the prefilling indexes of their own ids; an empty set is one
// empty part.
func Test_SplitLive(t *testing.T) {
	many := make([]replica.LiveBooking, MaxSetIDs+10)
	for i := range many {
		many[i] = replica.LiveBooking{ID: fmt.Sprintf("r%05d", len(many)-i), Prefilling: i%1000 == 0}
	}
	long := make([]replica.LiveBooking, 2000)
	for i := range long {
		long[i] = replica.LiveBooking{ID: fmt.Sprintf("%0250d", i)}
	}
	tests := []struct {
		name  string
		live  []replica.LiveBooking
		parts int
	}{
		{"empty", nil, 1},
		{"one", []replica.LiveBooking{{ID: "a", Prefilling: true}}, 1},
		{"unsorted with a repeat", []replica.LiveBooking{{ID: "c"}, {ID: "a"}, {ID: "b", Prefilling: true}, {ID: "a"}}, 1},
		{"more than MaxSetIDs", many, 2},
		{"more than maxLivePartBytes", long, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string]bool{}
			for _, b := range tt.live {
				want[b.ID] = b.Prefilling
			}
			parts := splitLive(slices.Clone(tt.live), 4, 9)
			if len(parts) != tt.parts {
				t.Fatalf("%d parts, want %d", len(parts), tt.parts)
			}
			after := ""
			got := map[string]bool{}
			for i, p := range parts {
				if p.Set != 4 || p.AsOf != 9 || p.After != after || (p.Through == "") != (i == len(parts)-1) {
					t.Fatalf("part %d: %+v", i, p)
				}
				after = p.Through
				m := wireV2("n1", 2, 1, replica.Event{Kind: replica.KindLive, Live: p})
				if err := ValidateMessage(&m); err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				for j, id := range p.IDs {
					got[id] = slices.Contains(p.Prefilling, uint32(j))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("parts list %v, want %v", got, want)
			}
		})
	}
}

// rawSub subscribes to a PUB endpoint and returns the messages' frames.
func rawSub(t *testing.T, endpoint string) <-chan [][]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := zmq4.NewSub(ctx)
	t.Cleanup(func() { cancel(); sub.Close() })
	if err := sub.SetOption(zmq4.OptionSubscribe, Topic); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	frames := make(chan [][]byte, 1<<12)
	go func() {
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			frames <- msg.Frames
		}
	}()
	return frames
}

// rawPub binds a bare PUB socket on loopback, for a test that plays a
// peer sending whatever it likes, and returns it with its endpoint. It is
// closed when the test ends.
func rawPub(t *testing.T) (zmq4.Socket, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pub := zmq4.NewPub(ctx)
	t.Cleanup(func() { cancel(); pub.Close() })
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return pub, "tcp://" + pub.Addr().String()
}

// nextWith publishes until a message carrying id arrives and returns it,
// decoded, with its frames; messages before it are skipped.
func nextWith(t *testing.T, frames <-chan [][]byte, publish func(), id string) (Message, [][]byte) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if publish != nil {
			publish()
		}
		select {
		case fr := <-frames:
			var m Message
			if len(fr) >= 2 && DecodeMessage(fr[1], &m) == nil && slices.ContainsFunc(m.Events, func(ev replica.Event) bool { return ev.ReservationID == id }) {
				return m, fr
			}
		case <-deadline:
			t.Fatalf("no message with %s", id)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// next returns the next message, decoded.
func next(t *testing.T, frames <-chan [][]byte) Message {
	t.Helper()
	select {
	case fr := <-frames:
		var m Message
		if err := DecodeMessage(fr[1], &m); err != nil {
			t.Fatal(err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
	return Message{}
}

func eventIDs(m Message) []string {
	var ids []string
	for _, ev := range m.Events {
		ids = append(ids, ev.ReservationID)
	}
	return ids
}

// Test_SenderModes: without a cluster id a node sends v1; with one but
// without its epoch it holds its events; with both it sends v2 numbered
// from 1, and a v1 copy too while a member that may run the previous
// release takes replica sync.
func Test_SenderModes(t *testing.T) {
	var r recorder
	a := startSyncer(t, "a", &r)
	frames := rawSub(t, a.Endpoint())
	free := func(id string) func() {
		return func() { a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: id}) }
	}
	if m, _ := nextWith(t, frames, free("v1"), "v1"); m.Version != PreviousVersion || a.Status().Mode != ModeV1 {
		t.Fatalf("without a cluster id: v%d, mode %s", m.Version, a.Status().Mode)
	}
	free("drained")() // once it arrives, the queue is empty
	nextWith(t, frames, nil, "drained")
	a.SetIdentity(Identity{ClusterID: testCluster})
	if a.Status().Mode != ModeHeld {
		t.Fatalf("mode %s", a.Status().Mode)
	}
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "held"})
	// An admission is not kept while held: the queue would pin its hashes
	// for as long as the hold lasts (the peers ask for it later).
	a.Publish(replica.Event{Kind: replica.KindAdmission, ReservationID: "not-kept", SequenceHashes: []uint64{1, 2}})
	if n := len(a.out); n != 1 {
		t.Fatalf("%d events queued while held, want the free alone", n)
	}
	a.SetIdentity(Identity{ClusterID: testCluster, Epoch: 7})
	// The held event goes first, in the epoch's first message: nothing of
	// it went out as v1 meanwhile (one PUB to one SUB keeps order).
	for {
		m := next(t, frames)
		if !slices.Contains(eventIDs(m), "held") {
			if m.Version == Version {
				t.Fatalf("a v2 message before the held event: %+v", m)
			}
			continue // probes sent as v1 before the hold
		}
		if m.Version != Version || m.Epoch != 7 || m.Counter != 1 || m.ClusterID != testCluster {
			t.Fatalf("the held event went out in %+v", m)
		}
		break
	}
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "second"})
	if m := next(t, frames); m.Version != Version || m.Epoch != 7 || m.Counter != 2 || m.ClusterID != testCluster ||
		!slices.Equal(eventIDs(m), []string{"second"}) {
		t.Fatalf("second v2 message %+v", m)
	}
	a.SetMembers(map[string]Member{"old": {Endpoint: "tcp://127.0.0.1:1"}})
	if a.Status().Mode != ModeDual {
		t.Fatalf("mode %s with a member of the previous release", a.Status().Mode)
	}
	a.Publish(replica.Event{Kind: replica.KindLive, Epoch: 7, Live: &replica.LivePart{Set: 1}})
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "dual"})
	var sent []string // v2 events up to the v1 copy
	for m := next(t, frames); ; m = next(t, frames) {
		if m.Version == PreviousVersion {
			if slices.Equal(eventIDs(m), []string{"second"}) {
				continue // the sender judged "second" after SetMembers: copied too
			}
			if !slices.Equal(eventIDs(m), []string{"dual"}) || !slices.Equal(sent, []string{"", "dual"}) {
				t.Fatalf("dual: v2 events %q, then a v1 copy of %q", sent, eventIDs(m))
			}
			break
		}
		sent = append(sent, eventIDs(m)...)
	}
	a.SetMembers(map[string]Member{"old": {Endpoint: "tcp://127.0.0.1:1", Epoch: 3}})
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "v2-only"})
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "after"})
	for _, want := range [][]string{{"v2-only", "after"}} {
		var got []string
		for len(got) < len(want) {
			m := next(t, frames)
			if m.Version != Version {
				t.Fatalf("a v1 copy once every member runs this release: %+v", m)
			}
			got = append(got, eventIDs(m)...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// Test_ReplayAndOtherCluster: with a token, a captured message sent again
// is dropped (replayed) and applies nothing, even after its free; a node
// of another cluster with the same token, under a member's name, is
// dropped (other_cluster).
func Test_ReplayAndOtherCluster(t *testing.T) {
	token := authtoken.NewHolder("s3cret")
	var ra, rb recorder
	a := startAuthSyncer(t, "a", &ra, token)
	b := startAuthSyncer(t, "b", &rb, token, a.Endpoint())
	inCluster(a, b)
	frames := rawSub(t, a.Endpoint())
	publishUntil(t, a, &rb, "probe-a")
	nextWith(t, frames, func() { a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "probe-sub"}) }, "probe-sub")
	a.Publish(testAdmission("r1"))
	_, captured := nextWith(t, frames, nil, "r1")
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "r1"})
	eventually(t, "b applies the admission and its free", func() bool {
		return slices.Contains(rb.got(), "a:free:r1")
	})

	evil, evilEP := rawPub(t)
	if _, err := b.Register(evilEP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replayed capture is dropped", func() bool {
		_ = evil.Send(zmq4.NewMsgFrom(captured...))
		return droppedMessages(t, b, dropReplayed) > 0
	})
	if got := rb.got(); strings.Count(strings.Join(got, " "), "a:admission:r1") != 1 {
		t.Fatalf("the replay applied again: %v", got)
	}

	// A node of another cluster named a, with the token: its MAC is
	// right, its cluster is not.
	var rc recorder
	stranger := startAuthSyncer(t, "a", &rc, token)
	stranger.SetIdentity(Identity{ClusterID: ClusterID{7}, Epoch: 99})
	if _, err := b.Register(stranger.Endpoint()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other cluster's messages are dropped", func() bool {
		stranger.Publish(testAdmission("theirs"))
		return droppedMessages(t, b, dropOtherCluster) > 0
	})
	if slices.Contains(rb.got(), "a:admission:theirs") {
		t.Fatal("applied another cluster's admission")
	}
}

// Test_AnnounceLiveSet: a node publishes its live set every period, in
// parts, numbered, complete through the counter of the last message it
// had sent; a receiver marks the part that completes a set.
func Test_AnnounceLiveSet(t *testing.T) {
	var mu sync.Mutex
	live := []replica.LiveBooking{{ID: "x"}}
	var got []replica.LivePart
	ra := recorder{}
	a, err := Start(Config{NodeID: "a", Listen: "tcp://127.0.0.1:0", Apply: ra.apply, AntiEntropyPeriod: 10 * time.Millisecond,
		Live: func(dst []replica.LiveBooking) []replica.LiveBooking {
			mu.Lock()
			defer mu.Unlock()
			return append(dst, live...)
		}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var rb recorder
	b, err := Start(Config{NodeID: "b", Listen: "tcp://127.0.0.1:0", Peers: []string{a.Endpoint()},
		Apply: func(origin string, ev *replica.Event) string {
			if ev.Kind == replica.KindLive {
				mu.Lock()
				got = append(got, *ev.Live)
				mu.Unlock()
				return ""
			}
			return rb.apply(origin, ev)
		}, BackoffMin: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	inCluster(a, b)
	publishUntil(t, a, &rb, "probe-a")
	many := make([]replica.LiveBooking, MaxSetIDs+1)
	for i := range many {
		many[i] = replica.LiveBooking{ID: fmt.Sprintf("r%05d", i)}
	}
	mu.Lock()
	live = many
	mu.Unlock()
	eventually(t, "b receives a set of two parts, complete", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := len(got)
		return n >= 2 && got[n-1].Complete && got[n-1].After != "" && got[n-2].After == "" && got[n-2].Set == got[n-1].Set
	})
	mu.Lock()
	defer mu.Unlock()
	last := got[len(got)-1]
	if last.AsOf == 0 || last.AsOf >= a.Status().Counter || len(got[len(got)-2].IDs)+len(last.IDs) != len(many) {
		t.Fatalf("last part %+v (counter now %d)", last, a.Status().Counter)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Set < got[i-1].Set {
			t.Fatalf("sets out of order: %d after %d", got[i].Set, got[i-1].Set)
		}
	}
}
