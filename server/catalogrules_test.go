package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_CatalogRulesRollingUpgrade: a cluster of the release before (its
// nodes advertise no catalog rules and never switch them on) is upgraded
// one node at a time. The rules stay off while any member runs the
// release before, and the nodes agree on the partition's block size
// throughout (by seniority); once the last member restarts on this
// release, the leader switches them on, on every node, without changing
// the partition, and the sticky size holds from then on.
func Test_CatalogRulesRollingUpgrade(t *testing.T) {
	c := servertest.StartCluster(t, 3, func(i int, cfg *server.Config) { cfg.Cluster.NoCatalogRules = true })
	apply := func(cmd fsm.Command) {
		t.Helper()
		leader := c.WaitConverged()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if res, err := leader.Node.Apply(ctx, cmd); err != nil || res.Err != nil {
			t.Fatalf("apply %T: %v %v", cmd, err, res)
		}
	}
	worker := func(id uint64, bs uint32) fsm.Command {
		return fsm.UpsertWorker{Worker: fsm.Worker{WorkerID: id, ModelName: "m", Endpoint: "http://w", BlockSize: bs,
			DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:5557"}}}
	}
	// agree waits until every live node has the same catalog rules and
	// block size for m/default as want.
	agree := func(what string, rules, blockSize uint32) {
		t.Helper()
		servertest.Eventually(t, what, func() error {
			want := c.WaitConverged().Node.Catalog().Index()
			for _, s := range c.Live() {
				cat, err := servertest.Catalog(s)
				if err != nil {
					return err
				}
				if cat.Index() < want {
					return fmt.Errorf("%s at index %d, the leader at %d", s.Node.ID(), cat.Index(), want)
				}
				p, _ := cat.Partition(fsm.PartitionKey{Model: "m", Tenant: fsm.DefaultScope})
				if cat.CatalogRules() != rules || p == nil || p.BlockSize != blockSize {
					return fmt.Errorf("%s: rules %d, partition %+v; want rules %d, block size %d",
						s.Node.ID(), cat.CatalogRules(), p, rules, blockSize)
				}
			}
			return nil
		})
	}
	apply(worker(1, 16))
	apply(worker(2, 16))
	apply(worker(3, 32))
	apply(worker(4, 16))
	agree("the release before", 0, 16)
	for i := range 2 {
		c.Stop(i)
		c.RestartWith(i, func(cfg *server.Config) { cfg.Cluster.NoCatalogRules = false })
		c.WaitConverged()
		waitMetadataRounds(t, c) // rounds of publishMetadata on a leader of this release
		agree(fmt.Sprintf("%d of 3 upgraded", i+1), 0, 16)
	}
	// A leader of this release judges the switch; n3 holds it back.
	servertest.Eventually(t, "a leader of this release", func() error {
		leader := c.WaitConverged()
		if c.Index(leader) != 2 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = leader.Node.StepDown(ctx)
		return fmt.Errorf("%s leads", leader.Node.ID())
	})
	apply(fsm.DeleteWorker{WorkerID: 1})
	apply(fsm.DeleteWorker{WorkerID: 2})
	waitMetadataRounds(t, c)
	agree("seniority while n3 runs the release before", 0, 32)
	c.Stop(2)
	c.RestartWith(2, func(cfg *server.Config) { cfg.Cluster.NoCatalogRules = false })
	agree("every member upgraded: rules on, the partition as it was", fsm.CatalogRulesCurrent, 32)
	apply(worker(8, 32))
	apply(fsm.DeleteWorker{WorkerID: 3})
	agree("sticky from the switch on", fsm.CatalogRulesCurrent, 32)
}

// waitMetadataRounds waits until every live node has made two more
// publishMetadata passes: on the leader, each would have written the
// rules switch if it were due.
func waitMetadataRounds(t *testing.T, c *servertest.Cluster) {
	t.Helper()
	live := c.Live()
	targets := make([]uint64, len(live))
	for i, s := range live {
		targets[i] = s.Node.MetadataRounds() + 2
	}
	servertest.Eventually(t, "two metadata rounds on every node", func() error {
		for i, s := range live {
			if got := s.Node.MetadataRounds(); got < targets[i] {
				return fmt.Errorf("%s at round %d", s.Node.ID(), got)
			}
		}
		return nil
	})
}
