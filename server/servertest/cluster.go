package servertest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/localcluster"
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

// StartCluster starts n nodes that bootstrap one cluster together
// (localcluster.Start) and waits until they agree on a leader and every
// node's metadata is replicated. mutate, when not nil, adjusts node i's
// configuration first (and that of the nodes Add starts later).
func StartCluster(t testing.TB, n int, mutate func(i int, cfg *server.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, mutate: mutate}
	lc, err := localcluster.Start(context.Background(), n, t.TempDir(), c.configure)
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes, c.cfgs = lc.Nodes, lc.Configs
	t.Cleanup(c.stopAll)
	return c
}

// configure gives node i the test logger, then applies the test's mutate.
func (c *Cluster) configure(i int, cfg *server.Config) {
	cfg.Logger = testLogger()
	if c.mutate != nil {
		c.mutate(i, cfg)
	}
}

// NodeID is the id of the i-th node: n1, n2, ...
func NodeID(i int) string { return localcluster.NodeID(i) }

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

// WaitConverged waits until the running nodes have converged
// (localcluster.Converged: one leader among them, every node's metadata
// and the seeded default policy in every node's delivered catalog) and
// returns the leader.
func (c *Cluster) WaitConverged() *server.Server {
	c.t.Helper()
	var leader *server.Server
	Eventually(c.t, "the cluster converges", func() error {
		var err error
		leader, err = localcluster.Converged(c.Nodes)
		return err
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
	cfg := localcluster.NodeConfig(NodeID(i), filepath.Join(c.t.TempDir(), NodeID(i)))
	c.configure(i, &cfg)
	cfg.Cluster.Join = join
	c.cfgs = append(c.cfgs, cfg)
	c.Nodes = append(c.Nodes, nil)
	return c.Restart(i)
}

func (c *Cluster) stopAll() {
	if err := localcluster.Stop(context.Background(), c.Nodes); err != nil {
		c.t.Errorf("%v", err)
	}
	clear(c.Nodes)
}

// Catalog returns the catalog s has applied once s has also delivered it
// to its parts, else an error to poll on (localcluster.DeliveredCatalog
// says why a test needs the difference).
func Catalog(s *server.Server) (*fsm.Catalog, error) { return localcluster.DeliveredCatalog(s) }

// Eventually polls cond until it returns nil, failing the test with the
// last error after 20 s: poll.Eventually with the timeout every
// in-process cluster test shares.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	poll.Eventually(t, 20*time.Second, what, cond)
}
