package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server"
)

// ConvergeTimeout bounds Start's wait for the nodes to converge.
const ConvergeTimeout = 30 * time.Second

// ErrNotConverged is returned (wrapped) while the nodes do not yet agree.
var ErrNotConverged = errors.New("cluster not converged")

// NodeID is the id of the i-th node: n1, n2, ...
func NodeID(i int) string { return "n" + strconv.Itoa(i+1) }

// NodeConfig returns a node configuration for in-process nodes: an HTTP
// listener on an OS-chosen loopback port, data in dataDir, fast Raft
// timeouts (cluster.TestConfig), a seeded scheduler, fast KV listener
// reconnects (nodes start before the engines they are told about) and a
// silent logger.
func NodeConfig(nodeID, dataDir string) server.Config {
	sc := scheduler.DefaultConfig()
	sc.Seed = 1
	return server.Config{
		HTTPAddr:  "127.0.0.1:0",
		Cluster:   cluster.TestConfig(nodeID, dataDir),
		Scheduler: sc,
		Logger:    slog.New(slog.DiscardHandler),
		Ingest:    ingest.Config{BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
	}
}

// Cluster is the nodes Start started. Nodes[i] is node n<i+1>; Configs[i]
// is the configuration it started with (its Raft listener already handed
// over).
type Cluster struct {
	Nodes   []*server.Server
	Configs []server.Config
}

// Start starts n nodes with data in dir/n<i>, bootstrapping one cluster
// together, and waits (within ctx and ConvergeTimeout) until they have
// converged (Converged). mutate, when not nil, adjusts node i's
// NodeConfig before it starts. On error nothing is left running.
func Start(ctx context.Context, n int, dir string, mutate func(i int, cfg *server.Config)) (*Cluster, error) {
	lns := make([]net.Listener, n)
	peers := make([]cluster.Peer, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeListeners(lns)
			return nil, fmt.Errorf("raft listener for %s: %w", NodeID(i), err)
		}
		lns[i] = ln
		peers[i] = cluster.Peer{ID: NodeID(i), RaftAddr: ln.Addr().String()}
	}
	c := &Cluster{Nodes: make([]*server.Server, n), Configs: make([]server.Config, n)}
	for i := range n {
		cfg := NodeConfig(NodeID(i), filepath.Join(dir, NodeID(i)))
		cfg.Cluster.InitialCluster = peers
		cfg.Cluster.RaftBind = peers[i].RaftAddr
		cfg.Cluster.RaftListener = lns[i]
		if mutate != nil {
			mutate(i, &cfg)
		}
		c.Configs[i] = cfg
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.Nodes[i], errs[i] = server.Start(c.Configs[i]); errs[i] != nil {
				errs[i] = fmt.Errorf("start %s: %w", NodeID(i), errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeListeners(lns) // those a failed start did not take over
		return nil, errors.Join(err, Stop(context.Background(), c.Nodes))
	}
	if _, err := WaitConverged(ctx, c.Nodes); err != nil {
		return nil, errors.Join(err, Stop(context.Background(), c.Nodes))
	}
	return c, nil
}

func closeListeners(lns []net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// URLs returns each node's base URL.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = "http://" + s.Addr()
	}
	return out
}

// Stop shuts every running (non-nil) node down gracefully, in parallel,
// within ctx (bounded by 30 s) and returns their errors joined.
func Stop(ctx context.Context, nodes []*server.Server) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, s := range nodes {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("stop %s: %w", s.Node.ID(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WaitConverged polls Converged over the running (non-nil) nodes until it
// holds, within ctx and ConvergeTimeout, and returns the leader.
func WaitConverged(ctx context.Context, nodes []*server.Server) (*server.Server, error) {
	var leader *server.Server
	err := poll.Within(ctx, ConvergeTimeout, 5*time.Millisecond, "the cluster converges", func(context.Context) error {
		var err error
		leader, err = Converged(nodes)
		return err
	})
	return leader, err
}

// Converged returns the leader once every running (non-nil) node knows
// the same leader, the leader is one of them, and each node's metadata
// (HTTP address, and the incarnation that gives its process an epoch) is
// in every node's delivered catalog, as is the cluster default policy a
// node that bootstrapped the cluster seeds: callers then start from a
// catalog whose index the start no longer moves. Until then it returns an
// error wrapping ErrNotConverged that says what is missing.
func Converged(nodes []*server.Server) (*server.Server, error) {
	var leader *server.Server
	for _, s := range nodes {
		if s != nil && s.Node.IsLeader() {
			leader = s
		}
	}
	if leader == nil {
		return nil, fmt.Errorf("%w: no running node leads", ErrNotConverged)
	}
	for _, s := range nodes {
		if s == nil {
			continue
		}
		if got := s.Node.Leader().ID; got != leader.Node.ID() {
			return nil, fmt.Errorf("%w: %s sees leader %q, want %s", ErrNotConverged, s.Node.ID(), got, leader.Node.ID())
		}
		cat, err := DeliveredCatalog(s)
		if err != nil {
			return nil, err
		}
		for _, o := range nodes {
			if o == nil {
				continue
			}
			m, ok := cat.Node(o.Node.ID())
			if !ok || m.HTTPAddr != o.Addr() || m.Incarnation != o.Node.Incarnation() {
				return nil, fmt.Errorf("%w: %s does not know %s at %s (incarnation %d) yet", ErrNotConverged,
					s.Node.ID(), o.Node.ID(), o.Addr(), o.Node.Incarnation())
			}
			if o.Node.Bootstrapped() && !cat.DefaultPolicySeeded() {
				return nil, fmt.Errorf("%w: %s has no cluster default policy seeded yet", ErrNotConverged, s.Node.ID())
			}
		}
	}
	return leader, nil
}

// DeliveredCatalog returns the catalog s has applied, once s has also
// delivered it to its parts (indexer, scheduler, KV listeners, replica
// sync), else an error wrapping ErrNotConverged to poll on. The FSM's
// catalog runs a moment ahead of the parts: the cluster's watcher hands
// each change on after the apply, so a caller that sees a write in
// Node.Catalog and then asks the scheduler or the index would race the
// hand-over. Node.CatalogIndex is the delivered index, the one the API's
// min_catalog_index waits for.
func DeliveredCatalog(s *server.Server) (*fsm.Catalog, error) {
	cat := s.Node.Catalog()
	if got := s.Node.CatalogIndex(); got < cat.Index() {
		return nil, fmt.Errorf("%w: %s has applied catalog index %d but delivered only %d", ErrNotConverged,
			s.Node.ID(), cat.Index(), got)
	}
	return cat, nil
}
