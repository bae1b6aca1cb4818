package zmqsync

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// recorder is an Apply that keeps what it was given; probes (ids
// "probe-*", sent until a subscription is live) are kept apart.
type recorder struct {
	mu     sync.Mutex
	events []string // "origin:kind:id"
	probes map[string]bool
}

func (r *recorder) apply(origin string, ev *replica.Event) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := fmt.Sprintf("%s:%s:%s", origin, ev.Kind, ev.ReservationID)
	if strings.HasPrefix(ev.ReservationID, "probe-") {
		if r.probes == nil {
			r.probes = map[string]bool{}
		}
		r.probes[e] = true
		return ""
	}
	r.events = append(r.events, e)
	return ""
}

func (r *recorder) probed(e string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.probes[e]
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func startSyncer(t *testing.T, id string, rec *recorder, peers ...string) *Syncer {
	t.Helper()
	s, err := Start(Config{NodeID: id, Listen: "tcp://127.0.0.1:0", Peers: peers, Apply: rec.apply,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// testCluster is the cluster id of the tests' syncers.
var testCluster = ClusterID{0xc1, 0x05, 0x7e, 0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// inCluster makes the syncers one cluster of this release, as the catalog
// would: each has the cluster id and its epoch (10, 11, ...), and knows
// the others as members with theirs. Members get no endpoint here: the
// tests choose who follows whom.
func inCluster(ss ...*Syncer) {
	members := map[string]Member{}
	for i, s := range ss {
		members[s.cfg.NodeID] = Member{Epoch: uint64(10 + i)}
	}
	for i, s := range ss {
		s.SetIdentity(Identity{ClusterID: testCluster, Epoch: uint64(10 + i)})
		s.SetMembers(members)
	}
}

// asPrevious makes the syncers members of a cluster without a cluster id
// and without epochs, as one still on the previous release: they speak v1.
func asPrevious(ss ...*Syncer) {
	members := map[string]Member{}
	for _, s := range ss {
		members[s.cfg.NodeID] = Member{}
	}
	for _, s := range ss {
		s.SetMembers(members)
	}
}

// eventually waits until cond holds, failing after 10 s (poll.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, what, func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	})
}

var errNotYet = errors.New("not yet")

func active(s *Syncer, endpoint string) bool {
	for _, p := range s.Peers() {
		if p.Endpoint == endpoint && p.State == StateActive {
			return true
		}
	}
	return false
}

func testAdmission(id string) replica.Event {
	return replica.Event{Kind: replica.KindAdmission, ReservationID: id, Model: "m", Tenant: "default", WorkerID: 1, BlockSize: 16,
		SequenceHashes: []uint64{1, 2, 3}, Chained: true, ISL: 48, PrefillTokens: 48, Admitted: time.Unix(1_700_000_000, 5)}
}

// publishUntil publishes probes from a until b's recorder has one, so a
// test starts once the subscription is live (PUB/SUB loses what is sent
// before).
func publishUntil(t *testing.T, a *Syncer, rb *recorder, probe string) {
	t.Helper()
	want := a.cfg.NodeID + ":free:" + probe
	eventually(t, "the subscription carries events", func() bool {
		a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: probe})
		return rb.probed(want)
	})
}

func Test_PublishAndApply(t *testing.T) {
	var ra, rb recorder
	a := startSyncer(t, "a", &ra)
	b := startSyncer(t, "b", &rb, a.Endpoint())
	if created, err := a.Register(b.Endpoint()); !created || err != nil {
		t.Fatalf("register: %v %v", created, err)
	}
	inCluster(a, b)
	publishUntil(t, a, &rb, "probe-a")
	publishUntil(t, b, &ra, "probe-b")

	for i := range 300 { // more than one batch
		a.Publish(testAdmission(fmt.Sprint("r", i)))
	}
	a.Publish(replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "r0"})
	a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "r0"})
	eventually(t, "b applies every event, in order", func() bool { return len(rb.got()) >= 302 })
	got := rb.got()
	if len(got) != 302 || got[0] != "a:admission:r0" || got[299] != "a:admission:r299" || got[300] != "a:prefill_complete:r0" || got[301] != "a:free:r0" {
		t.Fatalf("events out of order: %v … %v", got[:2], got[299:])
	}
	if len(ra.got()) != 0 {
		t.Fatalf("a applied its own events: %v", ra.got())
	}
}

// Test_EchoesDropped: a node that subscribes to itself (an operator's
// mistake, or a member list that names it) drops its own messages.
func Test_EchoesDropped(t *testing.T) {
	var ra recorder
	a := startSyncer(t, "a", &ra)
	if _, err := a.Register(a.Endpoint()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a follows itself", func() bool { return active(a, a.Endpoint()) })
	eventually(t, "an echo comes back and is dropped", func() bool {
		a.Publish(testAdmission("x"))
		return a.Peers()[0].Messages > 0
	})
	if len(ra.got()) != 0 {
		t.Fatalf("applied echoes: %v", ra.got())
	}
}

// Test_Garbage: whatever a peer sends that is not a valid message is
// dropped and counted, never applied in part, and the subscription lives on.
func Test_Garbage(t *testing.T) {
	evil, evilEP := rawPub(t)
	var rb recorder
	b := startSyncer(t, "b", &rb, evilEP)
	b.SetMembers(map[string]Member{"evil": {}}) // a member of the previous release: v1
	validMsg := wireV1("evil", testAdmission("ok"))
	valid := AppendMessage(nil, &validMsg)
	junk := [][][]byte{
		{[]byte(Topic)},                                    // no payload
		{[]byte(Topic), []byte{0x93, 0x01}},                // truncated
		{[]byte(Topic), valid[:len(valid)-1]},              // cut at the end
		{[]byte(Topic), {0x93, 0x7f, 0xa1, 'x', 0x90}},     // unknown version
		{[]byte(Topic), valid, []byte("extra")},            // three frames
		{[]byte(Topic + "x"), valid},                       // another topic (not subscribed)
		{[]byte(Topic), append(slices.Clone(valid), 0xc1)}, // trailing garbage
	}
	eventually(t, "the subscription is live and garbage is counted", func() bool {
		for _, fr := range junk {
			if err := evil.Send(zmq4.NewMsgFrom(fr...)); err != nil {
				t.Fatal(err)
			}
		}
		return active(b, "tcp://"+evil.Addr().String()) && b.Peers()[0].Messages >= uint64(len(junk)-1)
	})
	if err := evil.Send(zmq4.NewMsgFrom([]byte(Topic), valid)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a valid message after the garbage applies", func() bool { return len(rb.got()) > 0 })
	if got := rb.got(); !slices.Equal(got, []string{"evil:admission:ok"}) {
		t.Fatalf("applied %v", got)
	}
}

// Test_PeerManagement: register, deregister, membership, and their errors.
func Test_PeerManagement(t *testing.T) {
	var r recorder
	a := startSyncer(t, "a", &r, "tcp://127.0.0.1:1")
	endpoints := func() []string {
		var out []string
		for _, p := range a.Peers() {
			out = append(out, fmt.Sprintf("%s%v", p.Endpoint, p.Sources))
		}
		return out
	}
	for _, bad := range []string{"", "tcp://", "udp://h:1", "tcp://h", "tcp://h:0", "tcp://h:1/x", "http://h:1", "tcp://:1"} {
		if _, err := a.Register(bad); !errors.Is(err, ErrEndpoint) {
			t.Errorf("register %q: %v", bad, err)
		}
	}
	if created, err := a.Register("tcp://127.0.0.1:1"); created || err != nil {
		t.Fatalf("registering a flag peer again: %v %v", created, err)
	}
	if created, _ := a.Register("tcp://127.0.0.1:2"); !created {
		t.Fatal("new peer not created")
	}
	a.SetMembers(map[string]Member{
		"a": {Endpoint: "tcp://127.0.0.1:9"}, // itself: skipped
		"b": {Endpoint: "tcp://127.0.0.1:2"}, // also registered
		"c": {Endpoint: "tcp://10.0.0.3:3", Dial: "tcp://127.0.0.1:3"},
	})
	want := []string{"tcp://10.0.0.3:3[member]", "tcp://127.0.0.1:1[flag registered]", "tcp://127.0.0.1:2[member registered]"}
	if got := endpoints(); !slices.Equal(got, want) {
		t.Fatalf("peers %v, want %v", got, want)
	}
	if p := a.Peers()[0]; p.Dial != "tcp://127.0.0.1:3" || p.NodeID != "c" {
		t.Fatalf("member peer %+v", p)
	}
	if err := a.Deregister("tcp://10.0.0.3:3"); !errors.Is(err, ErrMemberPeer) {
		t.Fatalf("deregister a member's endpoint: %v", err)
	}
	if err := a.Deregister("tcp://127.0.0.1:7"); !errors.Is(err, ErrPeerNotFound) {
		t.Fatalf("deregister unknown: %v", err)
	}
	for _, ep := range []string{"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"} {
		if err := a.Deregister(ep); err != nil {
			t.Fatal(err)
		}
	}
	// The same membership again (every catalog change delivers it) keeps
	// the subscriptions as they are.
	subs := func() map[string]*peer {
		a.mu.Lock()
		defer a.mu.Unlock()
		return maps.Clone(a.peers)
	}
	before := subs()
	a.SetMembers(map[string]Member{"b": {Endpoint: "tcp://127.0.0.1:2"}, "c": {Endpoint: "tcp://10.0.0.3:3", Dial: "tcp://127.0.0.1:3"}})
	if after := subs(); !maps.Equal(after, before) {
		t.Fatalf("the same membership replaced subscriptions: %v → %v", before, after)
	}
	// A member's endpoint is already followed: registering it is a 200.
	if created, err := a.Register("tcp://10.0.0.3:3"); created || err != nil {
		t.Fatalf("registering a member's endpoint: %v %v", created, err)
	}
	if err := a.Deregister("tcp://10.0.0.3:3"); err != nil {
		t.Fatalf("deregistering it again: %v", err)
	}
	// A member that leaves is followed a while as departed (departed.go).
	a.SetMembers(map[string]Member{"b": {Endpoint: "tcp://127.0.0.1:2"}}) // c left
	if got := endpoints(); !slices.Equal(got, []string{"tcp://10.0.0.3:3[departed]", "tcp://127.0.0.1:2[member]"}) {
		t.Fatalf("after deregistering and c leaving: %v", got)
	}
	a.SetMembers(nil)
	if got := endpoints(); !slices.Equal(got, []string{"tcp://10.0.0.3:3[departed]", "tcp://127.0.0.1:2[departed]"}) {
		t.Fatalf("after every member left: %v", got)
	}
}

// Test_StalledSubscriber: a subscriber that stops reading is cut off, and
// the others keep receiving; Publish never blocks meanwhile.
func Test_StalledSubscriber(t *testing.T) {
	var ra, rb recorder
	a := startSyncer(t, "a", &ra)
	inCluster(a, startSyncer(t, "b", &rb, a.Endpoint()))
	publishUntil(t, a, &rb, "probe-a")

	// A raw TCP peer that completes the ZMTP handshake as a SUB, then
	// never reads again.
	conn := stalledSub(t, a.Endpoint())
	defer conn.Close()

	big := testAdmission("big")
	big.SequenceHashes = make([]uint64, 1<<12)
	start := time.Now()
	const n = 1500 // ~55 MiB of messages: far past any socket buffer
	for i := range n {
		big.ReservationID = fmt.Sprint("big-", i)
		a.Publish(big)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Publish blocked for %v", d)
	}
	eventually(t, "the reading subscriber gets events past the stalled one", func() bool {
		got := rb.got()
		return len(got) > 0 && got[len(got)-1] == fmt.Sprint("a:admission:big-", n-1)
	})
}

// stalledSub connects to a PUB endpoint, handshakes as a ZMTP 3.0 SUB
// subscribed to everything, and returns the connection without reading.
func stalledSub(t *testing.T, endpoint string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", endpoint[len("tcp://"):])
	if err != nil {
		t.Fatal(err)
	}
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10], greeting[11] = 0xff, 0x7f, 3, 0
	copy(greeting[12:], "NULL")
	ready := []byte{0x04, 0, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 3, 'S', 'U', 'B'}
	ready[1] = byte(len(ready) - 2)
	sub := []byte{0x00, 1, 1} // a message frame: subscribe to ""
	if _, err := c.Write(append(append(greeting, ready...), sub...)); err != nil {
		t.Fatal(err)
	}
	// Read the peer's greeting and READY, then stop reading for good.
	if _, err := io.ReadFull(c, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	return c
}

// Test_RegisteredPeersBounded: at most MaxRegisteredPeers endpoints are
// registered by hand (each is a subscription with its goroutine and
// queue); registering one of them again still answers, and deregistering
// one makes room.
func Test_RegisteredPeersBounded(t *testing.T) {
	var r recorder
	a := startSyncer(t, "a", &r)
	ep := func(i int) string { return fmt.Sprintf("tcp://127.0.0.1:%d", 900+i) } // nothing listens there
	for i := range MaxRegisteredPeers {
		if created, err := a.Register(ep(i)); !created || err != nil {
			t.Fatalf("register %d: %v %v", i, created, err)
		}
	}
	if _, err := a.Register(ep(MaxRegisteredPeers)); !errors.Is(err, ErrTooManyPeers) {
		t.Fatalf("register one more than %d: %v", MaxRegisteredPeers, err)
	}
	if created, err := a.Register(ep(0)); created || err != nil {
		t.Fatalf("register one of them again: %v %v", created, err)
	}
	if err := a.Deregister(ep(0)); err != nil {
		t.Fatal(err)
	}
	if created, err := a.Register(ep(MaxRegisteredPeers)); !created || err != nil {
		t.Fatalf("register after a deregistration: %v %v", created, err)
	}
}
