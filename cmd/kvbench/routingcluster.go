package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/internal/backoff"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server"
)

// localCluster is kvselect nodes n1..nN running in this process on
// loopback, bootstrapped together, with data in a temporary directory: the
// shape of servertest.StartCluster, for a binary rather than a test.
type localCluster struct {
	nodes []*server.Server
	dir   string
}

// nodeOptions are what a routing strategy sets on every node of its
// cluster.
type nodeOptions struct {
	replicaSync bool
	seed        uint64
	// policy is the nodes' default policy; the zero spec keeps the
	// shipped default.
	policy scheduler.PolicySpec
	// now is the schedulers' clock (nil: the wall clock). Only the
	// scheduler gets it: Raft, leases, the KV listeners and HTTP stay on
	// the wall clock, which a virtual clock that stands still and then
	// jumps would break.
	now func() time.Time
	// busyPrefillTokens is the active_prefill_tokens busy threshold the
	// nodes give the model (0: none).
	busyPrefillTokens uint64
}

// startLocalCluster starts n nodes and waits until they agree on a leader
// and know each other's addresses. On error nothing is left running.
func startLocalCluster(ctx context.Context, n int, opts nodeOptions, log *slog.Logger) (*localCluster, error) {
	dir, err := os.MkdirTemp("", "kvbench-routing-")
	if err != nil {
		return nil, err
	}
	c := &localCluster{dir: dir, nodes: make([]*server.Server, n)}
	lns := make([]net.Listener, n)
	var peers []cluster.Peer
	for i := range n {
		if lns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			closeListeners(lns)
			os.RemoveAll(dir)
			return nil, err
		}
		peers = append(peers, cluster.Peer{ID: nodeName(i), RaftAddr: lns[i].Addr().String()})
	}
	cfgs := make([]server.Config, n)
	for i := range n {
		cfgs[i] = localNodeConfig(i, filepath.Join(dir, nodeName(i)), peers, lns[i], opts, log)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = server.Start(cfgs[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeListeners(lns) // those a failed start did not take over
		c.close()
		return nil, err
	}
	if err := c.waitConverged(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func nodeName(i int) string { return "n" + strconv.Itoa(i+1) }

func closeListeners(lns []net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// localNodeConfig is node i's configuration: loopback, fast Raft timeouts
// (cluster.TestConfig), a seeded scheduler on opts' clock with opts'
// policy, fast KV listener reconnects, and opts' busy threshold.
// The reservation expiry is an hour of the scheduler's clock: longer than
// any request of a replay lives, so nothing expires during one (a booking
// that did would show as a settle that fails, not as load quietly gone).
func localNodeConfig(i int, dataDir string, peers []cluster.Peer, raftLn net.Listener, opts nodeOptions, log *slog.Logger) server.Config {
	sc := scheduler.DefaultConfig()
	sc.Seed = opts.seed + uint64(i)
	sc.ActiveRequestExpiry = time.Hour
	sc.Now = opts.now
	if opts.policy.Name != "" {
		sc.Policy = opts.policy
	}
	cc := cluster.TestConfig(nodeName(i), dataDir)
	cc.InitialCluster = peers
	cc.RaftBind = peers[i].RaftAddr
	cc.RaftListener = raftLn
	cfg := server.Config{
		HTTPAddr:  "127.0.0.1:0",
		Cluster:   cc,
		Scheduler: sc,
		Logger:    log.With("node", nodeName(i)),
		Ingest:    ingest.Config{BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
	}
	if opts.busyPrefillTokens > 0 {
		cfg.InitialThresholds.ActivePrefillTokens = &opts.busyPrefillTokens
	}
	if opts.replicaSync {
		cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"}
	}
	return cfg
}

// waitThresholds waits until every node's scheduler has the model's busy
// thresholds: the catalog holds them and the node has applied it (its
// side effects, the scheduler's included, are done).
func (c *localCluster) waitThresholds(ctx context.Context, model string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, s := range c.nodes {
		for {
			cat := s.Node.Catalog()
			if t, ok := cat.Thresholds(model); ok && t.Set() {
				if err := s.Node.WaitApplied(ctx, cat.Index()); err != nil {
					return fmt.Errorf("%s: busy thresholds: %w", s.Node.ID(), err)
				}
				break
			}
			if !backoff.Sleep(ctx, 5*time.Millisecond) {
				return fmt.Errorf("%s never got the busy thresholds of %s: %w", s.Node.ID(), model, ctx.Err())
			}
		}
	}
	return nil
}

// waitConverged polls until every node knows the same leader and every
// node's address is in every node's catalog.
func (c *localCluster) waitConverged(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.converged()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster did not converge: %w", err)
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (c *localCluster) converged() error {
	var leader string
	for _, s := range c.nodes {
		if s.Node.IsLeader() {
			leader = s.Node.ID()
		}
	}
	if leader == "" {
		return errors.New("no leader")
	}
	for _, s := range c.nodes {
		if got := s.Node.Leader().ID; got != leader {
			return fmt.Errorf("%s sees leader %q, want %s", s.Node.ID(), got, leader)
		}
		for _, o := range c.nodes {
			if m, ok := s.Node.Catalog().Node(o.Node.ID()); !ok || m.HTTPAddr != o.Addr() {
				return fmt.Errorf("%s does not know %s at %s yet", s.Node.ID(), o.Node.ID(), o.Addr())
			}
		}
	}
	return nil
}

// urls returns each node's base URL.
func (c *localCluster) urls() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = "http://" + s.Addr()
	}
	return out
}

// close stops every node and removes the data directory.
func (c *localCluster) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, s := range c.nodes {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Close(ctx)
		}()
	}
	wg.Wait()
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// observer looks into the nodes directly: the indexer's watermark moves
// only once a batch is in the index, so a settle on it is exact.
type inProcessObserver struct {
	nodes []*server.Server
	fleet *kvsim.Fleet
	part  fsm.PartitionKey
}

func (o inProcessObserver) Applied(_ context.Context, node int) (map[kvsim.RankID]uint64, error) {
	out := map[kvsim.RankID]uint64{}
	for i := range o.fleet.Len() {
		rk := o.fleet.Rank(i)
		if seq, ok := o.nodes[node].Indexer.Watermark(indexer.RankKey{Worker: rk.WorkerID, Rank: rk.DPRank}); ok {
			out[rk] = seq
		}
	}
	return out, nil
}

// Loads counts the node's bookings per rank, with the prefill of those not
// prefill-complete as booked (kvsim.NodeObserver): the scheduler's loads
// fade prefill that is late, on the replay's clock.
func (o inProcessObserver) Loads(_ context.Context, node int) (map[kvsim.RankID]kvsim.RankLoad, error) {
	out := map[kvsim.RankID]kvsim.RankLoad{}
	rs, _ := o.nodes[node].Scheduler.Reservations(scheduler.ReservationFilter{Model: o.part.Model, Tenant: o.part.Tenant})
	for _, r := range rs {
		rk := kvsim.RankID{WorkerID: r.WorkerID, DPRank: r.DPRank}
		l := out[rk]
		l.Requests++
		if !r.PrefillComplete {
			l.PrefillTokens += r.PrefillTokens
		}
		out[rk] = l
	}
	return out, nil
}
