package zmqsync

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// Test_SecondTokenAccepted: a node whose token file holds two lines
// (authtoken.Secret.Also) accepts messages signed with either, with no
// time-based grace: that is what lets kvselect rotate a token node by node
// ("old\nnew", "new\nold", "new"). A node holding only the old token drops
// the same messages. The three are one cluster of this release (v2).
func Test_SecondTokenAccepted(t *testing.T) {
	publisher := start(t, "a", authtoken.NewHolder("new"), nil)
	both := authtoken.NewHolder("old")
	both.SetTokens("old", "new")
	var gotBoth, gotOld applied
	b := start(t, "b", both, &gotBoth, publisher.Endpoint())
	oldOnly := start(t, "c", authtoken.NewHolder("old"), &gotOld, publisher.Endpoint())
	inCluster(publisher, b, oldOnly)

	// PUB/SUB loses what is sent before a subscription is live: publish
	// until both subscribers have received something.
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; len(gotBoth.ids()) == 0 || received(oldOnly) == 0; i++ {
		publisher.Publish(replica.Event{Kind: replica.KindFree, ReservationID: fmt.Sprint("probe-", i)})
		select {
		case <-deadline:
			t.Fatalf("after 20 s: the node with both tokens applied %v; the node with the old one received %d messages",
				gotBoth.ids(), received(oldOnly))
		case <-tick.C:
		}
	}
	if ids := gotOld.ids(); len(ids) != 0 {
		t.Fatalf("the node with only the old token applied %v", ids)
	}
}

// applied records the reservation ids a node applied.
type applied struct {
	mu  sync.Mutex
	got []string
}

func (a *applied) apply(_ string, ev *replica.Event) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, ev.ReservationID)
	return ""
}

func (a *applied) ids() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.got...)
}

// start runs a syncer with the time-based grace off, following peers.
func start(t *testing.T, id string, auth *authtoken.Holder, rec *applied, peers ...string) *Syncer {
	t.Helper()
	if rec == nil {
		rec = &applied{}
	}
	s, err := Start(Config{NodeID: id, Listen: "tcp://127.0.0.1:0", Peers: peers, Apply: rec.apply,
		Auth: auth, PreviousTokenGrace: -1, BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// received is how many messages s has received from its peers, applied or
// dropped.
func received(s *Syncer) uint64 {
	var n uint64
	for _, p := range s.Peers() {
		n += p.Messages
	}
	return n
}
