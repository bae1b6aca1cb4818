package servertest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/server"
)

// Cluster is an in-process cluster of nodes n1..nN on loopback, formed with
// an initial cluster list, in the style of rqlite's system tests. Node i
// keeps its Raft address and data dir across Stop and Restart; its HTTP
// port changes, which exercises metadata updates.
type Cluster struct {
	t testing.TB
	// Nodes[i] is node n<i+1>, or nil while it is stopped.
	Nodes []*server.Server
	cfgs  []server.Config
	// mutate adjusts every node's configuration, those Add starts too.
	mutate func(i int, cfg *server.Config)
}

// StartCluster starts n nodes that bootstrap one cluster together and
// waits until they agree on a leader and every node's metadata is
// replicated. mutate, when not nil, adjusts node i's configuration first
// (and that of the nodes Add starts later).
func StartCluster(t testing.TB, n int, mutate func(i int, cfg *server.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Nodes: make([]*server.Server, n), cfgs: make([]server.Config, n), mutate: mutate}
	lns := make([]net.Listener, n)
	var peers []cluster.Peer
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		peers = append(peers, cluster.Peer{ID: NodeID(i), RaftAddr: ln.Addr().String()})
	}
	root := t.TempDir()
	for i := range n {
		cfg := Config(NodeID(i), filepath.Join(root, NodeID(i)))
		cfg.Cluster.InitialCluster = peers
		cfg.Cluster.RaftBind = peers[i].RaftAddr
		cfg.Cluster.RaftListener = lns[i]
		if mutate != nil {
			mutate(i, &cfg)
		}
		c.cfgs[i] = cfg
	}
	t.Cleanup(c.stopAll)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Nodes[i], errs[i] = server.Start(c.cfgs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, ln := range lns {
				ln.Close() // those a failed start did not hand over
			}
			t.Fatalf("start %s: %v", NodeID(i), err)
		}
	}
	c.WaitConverged()
	return c
}

// NodeID is the id of the i-th node: n1, n2, ...
func NodeID(i int) string { return "n" + strconv.Itoa(i+1) }

// Config returns node i's configuration (as it was last started).
func (c *Cluster) Config(i int) server.Config { return c.cfgs[i] }

// Live returns the running nodes.
func (c *Cluster) Live() []*server.Server {
	var out []*server.Server
	for _, s := range c.Nodes {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// WaitConverged waits until every running node knows the same leader, the
// leader is one of them, and each running node's metadata (HTTP address,
// and the incarnation that gives its process an epoch) is in every running
// node's catalog, as is the cluster default policy a node that
// bootstrapped the cluster seeds: tests then start from a catalog whose
// index the start no longer moves. It returns the leader.
func (c *Cluster) WaitConverged() *server.Server {
	c.t.Helper()
	var leader *server.Server
	Eventually(c.t, "the cluster converges", func() error {
		live := c.Live()
		leader = nil
		for _, s := range live {
			if s.Node.IsLeader() {
				leader = s
			}
		}
		if leader == nil {
			return fmt.Errorf("no running node leads")
		}
		for _, s := range live {
			if got := s.Node.Leader().ID; got != leader.Node.ID() {
				return fmt.Errorf("%s sees leader %q, want %s", s.Node.ID(), got, leader.Node.ID())
			}
			cat, err := Catalog(s)
			if err != nil {
				return err
			}
			for _, o := range live {
				m, ok := cat.Node(o.Node.ID())
				if !ok || m.HTTPAddr != o.Addr() || m.Incarnation != o.Node.Incarnation() {
					return fmt.Errorf("%s does not know %s at %s (incarnation %d) yet", s.Node.ID(), o.Node.ID(), o.Addr(), o.Node.Incarnation())
				}
				if o.Node.Bootstrapped() && !cat.DefaultPolicySeeded() {
					return fmt.Errorf("%s has no cluster default policy seeded yet", s.Node.ID())
				}
			}
		}
		return nil
	})
	return leader
}

// Leader waits for convergence and returns the leader.
func (c *Cluster) Leader() *server.Server { return c.WaitConverged() }

// Followers returns the running nodes other than the converged leader.
func (c *Cluster) Followers() []*server.Server {
	leader := c.WaitConverged()
	var out []*server.Server
	for _, s := range c.Live() {
		if s != leader {
			out = append(out, s)
		}
	}
	return out
}

// Index returns the position of s in Nodes.
func (c *Cluster) Index(s *server.Server) int {
	for i, n := range c.Nodes {
		if n == s {
			return i
		}
	}
	c.t.Fatalf("node %s is not running", s.Node.ID())
	return -1
}

// Stop shuts node i down gracefully (a leader hands over leadership).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if c.Nodes[i] == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Nodes[i].Close(ctx); err != nil {
		c.t.Errorf("stop %s: %v", NodeID(i), err)
	}
	c.Nodes[i] = nil
}

// Crash stops node i abruptly: no leadership hand-over, connections cut.
func (c *Cluster) Crash(i int) {
	c.t.Helper()
	if c.Nodes[i] == nil {
		return
	}
	if err := c.Nodes[i].Crash(); err != nil {
		c.t.Errorf("crash %s: %v", NodeID(i), err)
	}
	c.Nodes[i] = nil
}

// Restart starts a stopped node i again on its data dir and Raft address.
func (c *Cluster) Restart(i int) *server.Server {
	c.t.Helper()
	return c.RestartWith(i, nil)
}

// RestartWith starts a stopped node i again, its configuration first
// adjusted by mutate (when not nil) as a restarted process would read
// its files again (tokens, certificates); the change is kept for later
// restarts.
func (c *Cluster) RestartWith(i int, mutate func(cfg *server.Config)) *server.Server {
	c.t.Helper()
	if mutate != nil {
		mutate(&c.cfgs[i])
	}
	cfg := c.cfgs[i]
	cfg.Cluster.RaftListener = nil
	s, err := server.Start(cfg)
	if err != nil {
		c.t.Fatalf("restart %s: %v", NodeID(i), err)
	}
	c.Nodes[i] = s
	return s
}

// Add starts a new node n<len+1> that joins through the given URLs.
func (c *Cluster) Add(join ...string) *server.Server {
	c.t.Helper()
	i := len(c.Nodes)
	cfg := Config(NodeID(i), filepath.Join(c.t.TempDir(), NodeID(i)))
	if c.mutate != nil {
		c.mutate(i, &cfg)
	}
	cfg.Cluster.Join = join
	c.cfgs = append(c.cfgs, cfg)
	c.Nodes = append(c.Nodes, nil)
	return c.Restart(i)
}

func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop(i)
		}()
	}
	wg.Wait()
}

// Catalog returns the catalog s has applied, once s has also delivered it
// to its parts (indexer, scheduler, KV listeners, replica sync), else an
// error to poll on. The FSM's catalog runs a moment ahead of the parts:
// the cluster's watcher hands each change on after the apply, so a test
// that sees a write in Node.Catalog and then asks the scheduler or the
// index would race the hand-over. Node.CatalogIndex is the delivered index,
// the one the API's min_catalog_index waits for.
func Catalog(s *server.Server) (*fsm.Catalog, error) {
	cat := s.Node.Catalog()
	if got := s.Node.CatalogIndex(); got < cat.Index() {
		return nil, fmt.Errorf("%s has applied catalog index %d but delivered only %d", s.Node.ID(), cat.Index(), got)
	}
	return cat, nil
}

// Eventually polls cond until it returns nil, failing the test with the
// last error after 20 s. It synchronises on a condition, not on time.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s: %v", what, err)
		}
		<-tick.C
	}
}
