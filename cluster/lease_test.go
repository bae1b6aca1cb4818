package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/poll"
)

// fakeClock is the time lease deadlines are measured in; tests move it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// removals records, per node, the catalog index at which each worker left.
type removals struct {
	mu sync.Mutex
	at map[string]map[uint64]uint64
}

func (r *removals) observer(node string) fsm.Observer {
	return func(ch *fsm.Change) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, wc := range ch.Workers {
			if wc.New == nil {
				if r.at[node] == nil {
					r.at[node] = map[uint64]uint64{}
				}
				r.at[node][wc.Old.WorkerID] = ch.Cur.Index()
			}
		}
	}
}

func (r *removals) index(node string, id uint64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx, ok := r.at[node][id]
	return idx, ok
}

// leaseCluster starts three in-process nodes sharing clock.
func leaseCluster(t *testing.T, clock *fakeClock, rm *removals) []*Node {
	t.Helper()
	peers, lns := bindPeers(t, 3)
	var nodes []*Node
	for i, p := range peers {
		cfg := TestConfig(p.ID, t.TempDir())
		cfg.RaftListener, cfg.InitialCluster, cfg.Clock = lns[i], peers, clock.Now
		// The lease tests hold one leader for seconds and act on it; with
		// TestConfig's 200 ms timeouts a loaded machine under -race sees
		// an election mid-test now and then ("not the leader"). Lease
		// deadlines follow the fake clock, so slower raft timeouts cost
		// only the first election.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		n, err := Open(cfg, rm.observer(p.ID))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	return nodes
}

// waitLeaseRounds waits until n has finished k more lease rounds, so a
// deadline the clock passed has been acted on (or, correctly, not).
func waitLeaseRounds(t *testing.T, n *Node, k uint64) {
	t.Helper()
	target := n.leaseTicks.Load() + k
	poll.Eventually(t, testWait, fmt.Sprintf("%s: %d lease rounds", n.ID(), k), func() error {
		if got := n.leaseTicks.Load(); got < target {
			return fmt.Errorf("at round %d", got)
		}
		return nil
	})
}

func leasedWorker(id uint64, ttl uint32) fsm.Worker {
	w := worker(id)
	w.LeaseTTLSeconds = ttl
	return w
}

func present(n *Node, id uint64) bool {
	_, ok := n.Catalog().Worker(id)
	return ok
}

// Test_LeaseExpiresOnEveryNodeAtOneIndex: a renewed lease lives, a lapsed
// one is removed through the log, so every node drops the worker at the
// same index; a worker without a lease stays.
func Test_LeaseExpiresOnEveryNodeAtOneIndex(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	rm := &removals{at: map[string]map[uint64]uint64{}}
	nodes := leaseCluster(t, clock, rm)
	leader := waitLeader(t, nodes)
	for _, w := range []fsm.Worker{leasedWorker(1, 10), worker(2)} {
		if _, err := leader.Apply(ctx(t), fsm.UpsertWorker{Worker: w}); err != nil {
			t.Fatal(err)
		}
	}
	waitLeaseRounds(t, leader, 2)

	clock.Advance(9 * time.Second)
	states, errs, err := leader.KeepAlive(ctx(t), []uint64{1})
	if err != nil || errs[0] != nil || states[0].ExpiresIn != 10*time.Second {
		t.Fatalf("keepalive: %+v %v %v", states, errs, err)
	}
	clock.Advance(9 * time.Second) // 18 s after registration, 9 s after the renewal
	waitLeaseRounds(t, leader, 2)
	if !present(leader, 1) {
		t.Fatal("a renewed lease expired")
	}

	clock.Advance(2 * time.Second)
	poll.Eventually(t, testWait, "worker 1 gone on every node", func() error {
		for _, n := range nodes {
			if present(n, 1) {
				return fmt.Errorf("%s still has it", n.ID())
			}
		}
		return nil
	})
	want, _ := rm.index(nodes[0].ID(), 1)
	for _, n := range nodes {
		if got, ok := rm.index(n.ID(), 1); !ok || got != want {
			t.Fatalf("%s dropped worker 1 at index %d (seen %v), n1 at %d", n.ID(), got, ok, want)
		}
		if !present(n, 2) {
			t.Fatalf("%s lost worker 2, which has no lease", n.ID())
		}
	}
	if _, errs, _ := leader.KeepAlive(ctx(t), []uint64{1}); !errors.Is(errs[0], fsm.ErrWorkerNotFound) {
		t.Fatalf("keepalive after expiry: %v", errs[0])
	}
}

// Test_LeaseGraceAfterLeaderChange: a new leader does not know the last
// renewal, so it gives every lease a full TTL from its election and never
// expires one early; after that grace an unrenewed lease lapses.
func Test_LeaseGraceAfterLeaderChange(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	rm := &removals{at: map[string]map[uint64]uint64{}}
	nodes := leaseCluster(t, clock, rm)
	old := waitLeader(t, nodes)
	if _, err := old.Apply(ctx(t), fsm.UpsertWorker{Worker: leasedWorker(1, 10)}); err != nil {
		t.Fatal(err)
	}
	waitLeaseRounds(t, old, 2)
	clock.Advance(8 * time.Second)

	if err := old.StepDown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var next *Node
	poll.Eventually(t, testWait, "another leader", func() error {
		for _, n := range nodes {
			if n != old && n.IsLeader() {
				next = n
				return nil
			}
		}
		return errors.New("none yet")
	})
	waitLeaseRounds(t, next, 2) // the new book holds the lease from "now"

	clock.Advance(9 * time.Second) // 17 s after the last renewal, 9 s into the grace
	waitLeaseRounds(t, next, 2)
	for _, n := range nodes {
		if !present(n, 1) {
			t.Fatalf("%s: the lease expired within the new leader's grace", n.ID())
		}
	}
	clock.Advance(2 * time.Second)
	poll.Eventually(t, testWait, "worker 1 gone after the grace", func() error {
		if present(next, 1) {
			return errors.New("still there")
		}
		return nil
	})
}

// Test_KeepAliveAnswers: per id, an unknown worker and one without a lease
// are errors of their own; a follower refuses the whole call.
func Test_KeepAliveAnswers(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	rm := &removals{at: map[string]map[uint64]uint64{}}
	nodes := leaseCluster(t, clock, rm)
	leader := waitLeader(t, nodes)
	for _, w := range []fsm.Worker{leasedWorker(1, 5), worker(2)} {
		if _, err := leader.Apply(ctx(t), fsm.UpsertWorker{Worker: w}); err != nil {
			t.Fatal(err)
		}
	}
	states, errs, err := leader.KeepAlive(ctx(t), []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || states[0].TTL != 5*time.Second {
		t.Fatalf("leased: %+v %v", states[0], errs[0])
	}
	if !errors.Is(errs[1], ErrNoLease) || !errors.Is(errs[2], fsm.ErrWorkerNotFound) {
		t.Fatalf("errors: %v", errs)
	}
	for _, n := range nodes {
		if n == leader {
			continue
		}
		if _, _, err := n.KeepAlive(ctx(t), []uint64{1}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s: keepalive on a follower: %v", n.ID(), err)
		}
	}
}

// Test_WhatRenewsALease (SPEC §3.7): a keepalive, a re-registration and a
// patch that sets lease_ttl_s renew a lease; a patch of anything else
// leaves the deadline alone, so an operator's edit cannot keep a worker
// that stopped renewing, and a keepalive after the deadline is refused
// even before the leader's next round removes the worker.
func Test_WhatRenewsALease(t *testing.T) {
	endpoint := "http://moved"
	ttl := uint32(10)
	tests := []struct {
		name   string
		change fsm.Command
		renews bool
	}{
		{"re-registration", fsm.UpsertWorker{Worker: leasedWorker(1, 10)}, true},
		{"patch that sets lease_ttl_s", fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{LeaseTTLSeconds: &ttl}}, true},
		{"patch of the endpoint", fsm.PatchWorker{WorkerID: 1, Patch: fsm.WorkerPatch{Endpoint: &endpoint}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			rm := &removals{at: map[string]map[uint64]uint64{}}
			nodes := leaseCluster(t, clock, rm)
			leader := waitLeader(t, nodes)
			if _, err := leader.Apply(ctx(t), fsm.UpsertWorker{Worker: leasedWorker(1, 10)}); err != nil {
				t.Fatal(err)
			}
			waitLeaseRounds(t, leader, 2)
			clock.Advance(8 * time.Second)
			if _, err := leader.Apply(ctx(t), tt.change); err != nil {
				t.Fatal(err)
			}
			waitLeaseRounds(t, leader, 2)
			clock.Advance(3 * time.Second) // 11 s after the registration, 3 s after the change
			if !tt.renews {
				// Past the deadline: too late for a keepalive, and the
				// worker goes at the next round.
				if _, errs, err := leader.KeepAlive(ctx(t), []uint64{1}); err != nil || !errors.Is(errs[0], fsm.ErrWorkerNotFound) {
					t.Fatalf("keepalive past the deadline = %v %v", errs, err)
				}
				poll.Eventually(t, testWait, "worker 1 gone", func() error {
					if present(leader, 1) {
						return fmt.Errorf("still there")
					}
					return nil
				})
				return
			}
			waitLeaseRounds(t, leader, 2)
			if !present(leader, 1) {
				t.Fatal("a renewed lease expired")
			}
			clock.Advance(8 * time.Second) // 11 s after the change
			poll.Eventually(t, testWait, "worker 1 gone once the renewed lease lapses", func() error {
				if present(leader, 1) {
					return fmt.Errorf("still there")
				}
				return nil
			})
		})
	}
}
