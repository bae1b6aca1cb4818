package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/internal/faultproxy"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// isRemoved reports whether s's Removed channel is closed.
func isRemoved(s *server.Server) bool {
	select {
	case <-s.Removed():
		return true
	default:
		return false
	}
}

// readyOf is s's GET /ready: the status and the body.
func readyOf(t *testing.T, s *server.Server) (int, api.Ready) {
	t.Helper()
	r := call(t, "GET", s.URL()+"/ready", "")
	var body api.Ready
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("/ready on %s: %d %s: %v", s.Node.ID(), r.status, r.body, err)
	}
	return r.status, body
}

// Test_RemovedFollowerIsNotReady: a follower the leader removes sees the
// removal (its Removed channel closes) and answers /ready with 503 from
// then on; the others are neither removed nor unready. Stopped and
// started again on its data dir, it is not in its configuration at start,
// which is no removal: it waits, and an operator's join brings it back.
func Test_RemovedFollowerIsNotReady(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.Leader()
	mustUpsert(t, leader.URL(), 1)
	servertest.Eventually(t, "every node is ready", func() error {
		for _, s := range c.Live() {
			if status, body := readyOf(t, s); status != http.StatusOK {
				return fmt.Errorf("%s: %d %+v", s.Node.ID(), status, body)
			}
		}
		return nil
	})
	victim := c.Followers()[0]
	for _, s := range c.Live() {
		if isRemoved(s) {
			t.Fatalf("%s removed before any removal", s.Node.ID())
		}
	}

	if r := callIdempotent(t, "POST", leader.URL()+"/cluster/remove", fmt.Sprintf(`{"id": %q}`, victim.Node.ID())); r.status != http.StatusOK {
		t.Fatalf("remove %s: %d %s", victim.Node.ID(), r.status, r.body)
	}
	select {
	case <-victim.Removed():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never saw its removal", victim.Node.ID())
	}
	if status, body := readyOf(t, victim); status != http.StatusServiceUnavailable || body.Ready || body.SchedulableWorkers != 1 {
		t.Fatalf("/ready of the removed node: %d %+v", status, body)
	}
	for _, s := range c.Live() {
		if s == victim {
			continue
		}
		if isRemoved(s) {
			t.Fatalf("%s sees itself removed", s.Node.ID())
		}
		if status, body := readyOf(t, s); status != http.StatusOK {
			t.Fatalf("/ready of %s: %d %+v", s.Node.ID(), status, body)
		}
	}

	// Stopped as main stops it, and started again on its data dir.
	i := c.Index(victim)
	c.Stop(i)
	back := c.Restart(i)
	join := fmt.Sprintf(`{"id": %q, "raft_addr": %q, "http_addr": %q}`, back.Node.ID(), back.Node.RaftAddr(), back.Addr())
	if r := callIdempotent(t, "POST", leader.URL()+"/cluster/join", join); r.status != http.StatusOK {
		t.Fatalf("re-add %s: %d %s", back.Node.ID(), r.status, r.body)
	}
	servertest.Eventually(t, "the node is a voter again and ready", func() error {
		st := statusOf(t, c.WaitConverged())
		voters := 0
		for _, m := range st.Members {
			if m.Suffrage == "Voter" {
				voters++
			}
		}
		if voters != 3 {
			return fmt.Errorf("members %+v", st.Members)
		}
		if status, body := readyOf(t, back); status != http.StatusOK {
			return fmt.Errorf("/ready of %s: %d %+v", back.Node.ID(), status, body)
		}
		return nil
	})
	if isRemoved(back) {
		t.Fatalf("%s, started outside its configuration and added again, counts as removed", back.Node.ID())
	}
}

// startRaftProxiedCluster starts n nodes that reach each other's Raft
// port through a proxy per node, so a test can cut every link into one
// node (proxies[i].Cut) while its HTTP stays reachable.
func startRaftProxiedCluster(t *testing.T, n int) (*servertest.Cluster, []*faultproxy.Link) {
	t.Helper()
	proxies := newProxies(t, n)
	return servertest.StartCluster(t, n, viaRaftProxies(proxies)), proxies
}

func newProxies(t *testing.T, n int) []*faultproxy.Link {
	proxies := make([]*faultproxy.Link, n)
	for i := range proxies {
		proxies[i] = faultproxy.Start(t, "")
	}
	return proxies
}

// viaRaftProxies makes node i reach node j's Raft port through proxies[j].
func viaRaftProxies(proxies []*faultproxy.Link) func(i int, cfg *server.Config) {
	return func(i int, cfg *server.Config) {
		cfg.Cluster.PeerDial = map[string]cluster.PeerDial{}
		for j, p := range cfg.Cluster.InitialCluster {
			proxies[j].SetTarget(p.RaftAddr)
			if j != i {
				cfg.Cluster.PeerDial[p.ID] = cluster.PeerDial{Raft: proxies[j].Addr()}
			}
		}
	}
}

// Test_RemovedFollowerThatMissedItsRemoval: the leader stops replicating
// to a node it removes with one last append; when that append is lost the
// node never holds the entry that removes it. It still sees itself listed,
// hears from no leader again, and must find out from the members instead
// of running on forever with a frozen catalog. Every node reaches the
// others' Raft through a proxy; the victim's is cut before the removal and
// stays cut (healing it could let the leader's last, retried append
// through), while the victim can still reach the members over HTTP.
func Test_RemovedFollowerThatMissedItsRemoval(t *testing.T) {
	c, proxies := startRaftProxiedCluster(t, 3)
	leader := c.Leader()
	mustUpsert(t, leader.URL(), 1)
	victim := c.Followers()[0]
	servertest.Eventually(t, "the victim has the write", func() error {
		if victim.Node.CatalogIndex() < leader.Node.CatalogIndex() {
			return fmt.Errorf("at %d, leader at %d", victim.Node.CatalogIndex(), leader.Node.CatalogIndex())
		}
		return nil
	})
	before := victim.Node.Status().ConfigIndex

	proxies[c.Index(victim)].Cut()
	if r := callIdempotent(t, "POST", leader.URL()+"/cluster/remove", fmt.Sprintf(`{"id": %q}`, victim.Node.ID())); r.status != http.StatusOK {
		t.Fatalf("remove %s: %d %s", victim.Node.ID(), r.status, r.body)
	}
	select {
	case <-victim.Removed():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never found out it was removed (its configuration index %d, before the removal %d)",
			victim.Node.ID(), victim.Node.Status().ConfigIndex, before)
	}
	if got := victim.Node.Status().ConfigIndex; got != before {
		t.Fatalf("the victim received its removal after all (configuration index %d -> %d): the test proves nothing", before, got)
	}
	for _, s := range c.Live() {
		if s != victim && isRemoved(s) {
			t.Fatalf("%s sees itself removed", s.Node.ID())
		}
	}
}
