package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/localcluster"
)

// localCluster is kvselect nodes n1..nN running in this process
// (server/localcluster, the launcher servertest.StartCluster shares), with
// data in a temporary directory it removes on close.
type localCluster struct {
	*localcluster.Cluster
	dir string
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
	lc, err := localcluster.Start(ctx, n, dir, func(i int, cfg *server.Config) { opts.apply(i, cfg, log) })
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return &localCluster{Cluster: lc, dir: dir}, nil
}

// apply gives node i's configuration (localcluster.NodeConfig: loopback,
// fast Raft timeouts, fast KV listener reconnects) a scheduler seeded per
// node on opts' clock with opts' policy, and opts' busy threshold.
// The reservation expiry is an hour of the scheduler's clock: longer than
// any request of a replay lives, so nothing expires during one (a booking
// that did would show as a settle that fails, not as load quietly gone).
func (opts nodeOptions) apply(i int, cfg *server.Config, log *slog.Logger) {
	cfg.Scheduler.Seed = opts.seed + uint64(i)
	cfg.Scheduler.ActiveRequestExpiry = time.Hour
	cfg.Scheduler.Now = opts.now
	if opts.policy.Name != "" {
		cfg.Scheduler.Policy = opts.policy
	}
	cfg.Logger = log.With("node", localcluster.NodeID(i))
	if opts.busyPrefillTokens > 0 {
		cfg.InitialThresholds.ActivePrefillTokens = &opts.busyPrefillTokens
	}
	if opts.replicaSync {
		cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"}
	}
}

// waitThresholds waits until every node's scheduler has the model's busy
// thresholds: the catalog holds them and the node has applied it (its
// side effects, the scheduler's included, are done).
func (c *localCluster) waitThresholds(ctx context.Context, model string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, s := range c.Nodes {
		err := poll.Until(ctx, 5*time.Millisecond, "the busy thresholds of "+model+" reach "+s.Node.ID(), func(ctx context.Context) error {
			cat := s.Node.Catalog()
			if t, ok := cat.Thresholds(model); !ok || !t.Set() {
				return errors.New("not in the catalog yet")
			}
			if err := s.Node.WaitApplied(ctx, cat.Index()); err != nil {
				return poll.Fatal(err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: busy thresholds: %w", s.Node.ID(), err)
		}
	}
	return nil
}

// close stops every node and removes the data directory.
func (c *localCluster) close() error {
	return errors.Join(localcluster.Stop(context.Background(), c.Nodes), os.RemoveAll(c.dir))
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
