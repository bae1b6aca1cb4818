package proccluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// PollEvery is how often the harness's waits ask whether what they wait
// for holds.
const PollEvery = 100 * time.Millisecond

// Status asks node i for /cluster/status within a short bound.
func (c *Cluster) Status(ctx context.Context, i int) (*api.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.nodes[i].Client.ClusterStatus(ctx)
}

// Statuses asks each node of among in parallel; a missing entry did not
// answer, and errs says why.
func (c *Cluster) Statuses(ctx context.Context, among []int) (map[int]*api.ClusterStatus, map[int]error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out, errs := map[int]*api.ClusterStatus{}, map[int]error{}
	for _, i := range among {
		wg.Go(func() {
			st, err := c.Status(ctx, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = err
			} else {
				out[i] = st
			}
		})
	}
	wg.Wait()
	return out, errs
}

// LeaderAmong is the leader the nodes of among agree on, now: every one
// answers, names the same leader, and that leader is one of them and
// says it leads. Use it on one side of a partition.
func (c *Cluster) LeaderAmong(ctx context.Context, among []int) (int, error) {
	if len(among) == 0 {
		return 0, errors.New("no node to ask")
	}
	sts, errs := c.Statuses(ctx, among)
	for i, err := range errs {
		return 0, fmt.Errorf("%s: %w", NodeID(i), err)
	}
	leader := ""
	for _, i := range among {
		id := sts[i].Leader.ID
		if id == "" {
			return 0, fmt.Errorf("%s knows no leader", NodeID(i))
		}
		if leader != "" && id != leader {
			return 0, fmt.Errorf("nodes disagree on the leader: %s and %s", leader, id)
		}
		leader = id
	}
	li, ok := c.NodeIndex(leader)
	if !ok || !slices.Contains(among, li) {
		return 0, fmt.Errorf("leader %s is not among %v", leader, among)
	}
	if sts[li].State != api.StateLeader {
		return 0, fmt.Errorf("%s is named leader but is %s", leader, sts[li].State)
	}
	return li, nil
}

// WaitLeader polls LeaderAmong(among) until it succeeds (nil among: the
// live nodes at each poll) or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context, among []int) (int, error) {
	var leader int
	err := poll.Until(ctx, PollEvery, "a leader is agreed", func(ctx context.Context) error {
		nodes := among
		if nodes == nil {
			nodes = c.Live()
		}
		var err error
		leader, err = c.LeaderAmong(ctx, nodes)
		return err
	})
	return leader, err
}

// WaitHealthy waits until every live node answers /health, they agree on
// a leader that knows every member's HTTP address, and every live node
// has applied the leader's catalog index. It fails at once when a node's
// process has exited on its own.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return poll.Until(ctx, PollEvery, "the cluster is healthy", func(ctx context.Context) error {
		if err := c.Exited(); err != nil {
			return poll.Fatal(err)
		}
		return c.Healthy(ctx)
	})
}

// Healthy is what WaitHealthy waits for, now.
func (c *Cluster) Healthy(ctx context.Context) error {
	live := c.Live()
	for _, i := range live {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.nodes[i].Client.Health(hctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s /health: %w", NodeID(i), err)
		}
	}
	li, err := c.LeaderAmong(ctx, live)
	if err != nil {
		return err
	}
	sts, errs := c.Statuses(ctx, live)
	for i, err := range errs {
		return fmt.Errorf("%s: %w", NodeID(i), err)
	}
	lead := sts[li]
	if len(lead.Members) != len(c.nodes) {
		return fmt.Errorf("leader %s has %d members, want %d", lead.NodeID, len(lead.Members), len(c.nodes))
	}
	for _, m := range lead.Members {
		if m.HTTPAddr == "" {
			return fmt.Errorf("leader %s does not know %s's HTTP address", lead.NodeID, m.ID)
		}
	}
	for _, i := range live {
		if sts[i].CatalogIndex < lead.CatalogIndex {
			return fmt.Errorf("%s applied catalog index %d, leader %d", NodeID(i), sts[i].CatalogIndex, lead.CatalogIndex)
		}
	}
	return nil
}

// Leader is the leader every live node agrees on, now (no waiting).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	return c.LeaderAmong(ctx, c.Live())
}
