package server_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// readyz asks a node's GET /readyz.
func readyz(t *testing.T, s *server.Server) (int, api.Readyz) {
	t.Helper()
	return readyzAt(t, s, api.PathReadyz)
}

// selectionReadyz asks a node's GET /readyz?for=selection.
func selectionReadyz(t *testing.T, s *server.Server) (int, api.Readyz) {
	t.Helper()
	return readyzAt(t, s, api.PathReadyz+"?"+api.QueryFor+"="+api.ReadyzForSelection)
}

func readyzAt(t *testing.T, s *server.Server, path string) (int, api.Readyz) {
	t.Helper()
	r := call(t, "GET", s.URL()+path, "")
	var body api.Readyz
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("/readyz on %s: %v: %d %s", s.Node.ID(), err, r.status, r.body)
	}
	return r.status, body
}

// Test_FollowerReadyOnceCaughtUp: a node that restarts behind the others is
// not ready while it has no leader, and becomes ready only once it has
// applied every write the cluster acknowledged while it was down.
func Test_FollowerReadyOnceCaughtUp(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	for _, s := range c.Live() {
		servertest.Eventually(t, s.Node.ID()+" is ready", func() error {
			if status, body := readyz(t, s); status != http.StatusOK {
				return fmt.Errorf("%d %+v", status, body)
			}
			return nil
		})
	}

	lagging := c.Index(c.Followers()[0])
	c.Stop(lagging)
	var last uint64
	for id := 1; id <= 10; id++ {
		last = mustUpsert(t, c.Leader().URL(), id)
	}
	// The lagging node comes back alone: a member without a leader.
	var others []int
	for i := range c.Nodes {
		if i != lagging {
			others = append(others, i)
			c.Stop(i)
		}
	}
	back := c.Restart(lagging)
	status, body := readyz(t, back)
	if status != http.StatusServiceUnavailable || body.Reason != api.ReadyzNoLeader || !body.Member ||
		body.Suffrage != api.SuffrageVoter || body.Code != api.CodeNotReady {
		t.Fatalf("the lagging node alone: %d %+v, want 503 no_leader as a voter", status, body)
	}

	// A node with the whole log comes back and wins the election (the
	// lagging node's log is behind, so it cannot). The lagging node is
	// ready once it has caught up, and never before.
	c.Restart(others[0])
	servertest.Eventually(t, "the lagging node is ready", func() error {
		status, body := readyz(t, back)
		if status != http.StatusOK {
			return fmt.Errorf("%d %s: %s", status, body.Reason, body.Error)
		}
		if body.AppliedIndex < last || body.CommitIndex < last || body.Leader == "" {
			t.Fatalf("ready before catching up with the write at %d: %+v", last, body)
		}
		return nil
	})
	servertest.Eventually(t, "the lagging node's catalog has every write", func() error {
		if got := len(workerIDs(t, back)); got != 10 {
			return fmt.Errorf("%d workers", got)
		}
		return nil
	})
}

// Test_SelectionReadyWithoutQuorum (SPEC §3.2): a node that has caught up
// stays selection-ready, and selects, after the other two stop, while
// plain /readyz turns 503 no_leader. The latch is the process's: the same
// node restarted alone has never caught up, and is not selection-ready.
func Test_SelectionReadyWithoutQuorum(t *testing.T) {
	c := servertest.StartCluster(t, 3, func(_ int, cfg *server.Config) {
		cfg.Cluster.LeaderWait = 300 * time.Millisecond
	})
	if r := callIdempotent(t, "POST", c.Leader().URL()+"/workers", workerJSON(1)); r.status != http.StatusCreated {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	// The survivor is never probed before the others stop: the latch is
	// set by the node itself (watchCatchUp), not by a probe that happened
	// to come while it had a leader.
	last := c.Followers()[0]
	for _, s := range c.Live() {
		servertest.Eventually(t, s.Node.ID()+" has the worker", func() error {
			if len(workerIDs(t, s)) != 1 {
				return fmt.Errorf("no worker yet")
			}
			if s == last {
				// Its watcher latches once it has applied the commit
				// index the leader reported; the test must not crash the
				// others before that, nor probe it.
				if !s.CaughtUpLatched() {
					return fmt.Errorf("not latched yet")
				}
				return nil
			}
			if status, body := selectionReadyz(t, s); status != http.StatusOK || !body.CaughtUp || body.Recovering {
				return fmt.Errorf("%d %+v", status, body)
			}
			return nil
		})
	}
	// Crashed, not stopped: a stopping leader hands its leadership over,
	// and the survivor could win that election after it was seen without
	// a leader. Crashed, they leave it no way to a leader again.
	for _, s := range c.Live() {
		if s != last {
			c.Crash(c.Index(s))
		}
	}
	servertest.Eventually(t, "the lone node loses its leader", func() error {
		if id := last.Node.Leader().ID; id != "" {
			return fmt.Errorf("still sees leader %s", id)
		}
		return nil
	})
	if status, body := readyz(t, last); status != http.StatusServiceUnavailable || body.Reason != api.ReadyzNoLeader {
		t.Fatalf("plain /readyz without quorum = %d %+v, want 503 no_leader", status, body)
	}
	for range 3 {
		if status, body := selectionReadyz(t, last); status != http.StatusOK || !body.Ready || body.Leader != "" || !body.CaughtUp {
			t.Fatalf("/readyz?for=selection without quorum = %d %+v, want 200 with no leader", status, body)
		}
		if r := call(t, "POST", last.URL()+"/select", selectBody); r.status != http.StatusOK {
			t.Fatalf("select without quorum: %d %s", r.status, r.body)
		}
	}

	// The same node, restarted alone, has the worker in its log but has
	// not caught up with any leader since this start.
	i := c.Index(last)
	c.Stop(i)
	back := c.Restart(i)
	for range 3 {
		status, body := selectionReadyz(t, back)
		if status != http.StatusServiceUnavailable || body.CaughtUp || body.Code != api.CodeNotReady ||
			(body.Reason != api.ReadyzNoLeader && body.Reason != api.ReadyzNoCommitIndex) {
			t.Fatalf("restarted alone: /readyz?for=selection = %d %+v, want 503 no_leader, not caught up", status, body)
		}
	}
}

// stallingPeer is an --indexer-peers address that accepts connections and
// never answers, so a node's index recovery from it stays under way until
// release cuts them.
type stallingPeer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startStallingPeer(t *testing.T) *stallingPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingPeer{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, conn)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.release)
	return p
}

func (p *stallingPeer) url() string { return "http://" + p.ln.Addr().String() }

// release closes the listener and every connection it took: the recovery
// fails over to the next peer, or gives up.
func (p *stallingPeer) release() {
	p.ln.Close()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Test_SelectionNotReadyWhileRecovering (SPEC §7): a node that leads its
// own cluster has caught up, but is not selection-ready while its index
// recovery waits on a peer; it is once the recovery is over.
func Test_SelectionNotReadyWhileRecovering(t *testing.T) {
	peer := startStallingPeer(t)
	c := servertest.StartCluster(t, 1, func(_ int, cfg *server.Config) {
		cfg.Recovery.Peers = []string{peer.url()}
	})
	s := c.Leader()
	servertest.Eventually(t, "the node has caught up", func() error {
		if _, body := selectionReadyz(t, s); !body.CaughtUp {
			return fmt.Errorf("%+v", body)
		}
		return nil
	})
	status, body := selectionReadyz(t, s)
	if status != http.StatusServiceUnavailable || body.Reason != api.ReadyzRecovering || !body.Recovering || body.Code != api.CodeNotReady {
		t.Fatalf("recovering: /readyz?for=selection = %d %+v, want 503 recovering", status, body)
	}
	if status, body := readyz(t, s); status != http.StatusOK || !body.Recovering {
		t.Fatalf("recovering: plain /readyz = %d %+v, want 200 (write readiness ignores the index)", status, body)
	}
	peer.release()
	servertest.Eventually(t, "the recovery is over", func() error {
		if status, body := selectionReadyz(t, s); status != http.StatusOK || body.Recovering {
			return fmt.Errorf("%d %+v", status, body)
		}
		return nil
	})
}
