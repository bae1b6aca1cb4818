package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// Worker leases (SPEC §3.7, seed 002's etcd leases). A worker registered
// with lease_ttl_s must renew it (KeepAlive) before the TTL passes; when it
// lapses, the leader removes the worker through the Raft log, so every
// node drops it at the same index.
//
// Renewals are not replicated. Only the leader keeps deadlines, in memory
// (leaseBook), and only what changes an expiry decision goes through the
// log: the registration that grants a lease (or a patch that sets
// lease_ttl_s, which renews it) and the ExpireLease that ends it. A patch
// of anything else changes the record but not the deadline: the book
// follows the record's LeaseIndex, not its ModifyIndex. A keepalive is therefore
// one map write on the leader, however many workers there are, and a batch
// of them is one request (KeepAlive takes many ids).
//
// The price is that a new leader does not know when each lease was last
// renewed. It gives every lease a full TTL from the moment it took office
// (the grace), so no lease expires early because of an election: a worker
// that renews at least once per TTL is never dropped. A worker that died
// just before an election lives up to one TTL longer.
//
// ExpireLease names the record's ModifyIndex the leader judged. A
// registration or patch committed between the judgement and the expiry
// changes the index, so the expiry becomes a no-op (fsm.ErrLeaseRenewed)
// rather than deleting a worker that came back. When the change did not
// renew the lease (a patch of another field), the book keeps the lapsed
// deadline and judges the record again at its new index on the next tick.

// leaseTick is how often the leader checks for lapsed leases.
const leaseTick = 100 * time.Millisecond

// LeaseState is the leader's view of one lease after a keepalive.
type LeaseState struct {
	WorkerID uint64
	TTL      time.Duration
	// ExpiresIn is how long the lease lasts without another renewal.
	ExpiresIn time.Duration
}

// leaseBook is the leader's lease deadlines for one term.
type leaseBook struct {
	mu sync.Mutex
	// term is the leader term the deadlines belong to (0: not leading).
	term uint64
	// ready is set once this term's barrier has applied every earlier
	// entry, so the catalog the book follows is complete.
	ready bool
	// catIndex is the catalog index the book last followed.
	catIndex uint64
	leases   map[uint64]*lease
}

type lease struct {
	ttl time.Duration
	// grant is the record's LeaseIndex the deadline was set for: a new one
	// (a registration, a patch that sets lease_ttl_s) renews the lease.
	grant uint64
	// modify is the record's ModifyIndex, which an ExpireLease names.
	modify   uint64
	deadline time.Time
	// expiring is set while an ExpireLease is in flight; keepalives then
	// fail, since the worker is on its way out.
	expiring bool
}

// follow brings the book up to catalog c at time now: leases granted or
// changed since it last looked start a full TTL, leases removed go. A
// change of term starts a new book in which every lease starts a full TTL
// (the grace of a new leader). Callers hold b.mu.
func (b *leaseBook) follow(term uint64, c *fsm.Catalog, now time.Time) {
	if term != b.term {
		b.term, b.ready, b.catIndex, b.leases = term, false, 0, map[uint64]*lease{}
	}
	if c.Index() == b.catIndex && b.catIndex != 0 {
		return
	}
	b.catIndex = c.Index()
	seen := make(map[uint64]struct{}, len(b.leases))
	for _, w := range c.Workers("", "") {
		if w.LeaseTTLSeconds == 0 {
			continue
		}
		seen[w.WorkerID] = struct{}{}
		if l := b.leases[w.WorkerID]; l != nil && l.grant == w.LeaseIndex {
			if l.modify != w.ModifyIndex {
				// Changed without a renewal: an expiry judged at the old
				// index is overtaken (fsm.ErrLeaseRenewed), so judge
				// the record again at the new one.
				l.modify, l.expiring = w.ModifyIndex, false
			}
			continue
		}
		ttl := time.Duration(w.LeaseTTLSeconds) * time.Second
		b.leases[w.WorkerID] = &lease{ttl: ttl, grant: w.LeaseIndex, modify: w.ModifyIndex, deadline: now.Add(ttl)}
	}
	for id := range b.leases {
		if _, ok := seen[id]; !ok {
			delete(b.leases, id)
		}
	}
}

// clear forgets the book (this node no longer leads).
func (b *leaseBook) clear() {
	b.term, b.ready, b.catIndex, b.leases = 0, false, 0, nil
}

// lapsed marks and returns the leases past their deadline at now.
func (b *leaseBook) lapsed(now time.Time) []fsm.ExpireLease {
	var out []fsm.ExpireLease
	for id, l := range b.leases {
		if !l.expiring && !now.Before(l.deadline) {
			l.expiring = true
			out = append(out, fsm.ExpireLease{WorkerID: id, ModifyIndex: l.modify})
		}
	}
	return out
}

// KeepAlive renews the leases of the given workers (leader only; the HTTP
// layer forwards from followers). It answers every id or fails as a whole
// when this node cannot decide (ErrNotLeader, ErrNoLeader). Per id, an
// error wraps fsm.ErrWorkerNotFound (no such worker, or its lease already
// lapsed) or ErrNoLease.
func (n *Node) KeepAlive(ctx context.Context, ids []uint64) ([]LeaseState, []error, error) {
	if err := n.leaderOnly(ctx); err != nil {
		return nil, nil, err
	}
	term := n.raft.CurrentTerm()
	if err := n.termBarrier(term); err != nil {
		return nil, nil, err
	}
	now := n.leaseNow()
	b := &n.leases
	b.mu.Lock()
	defer b.mu.Unlock()
	if !n.IsLeader() || n.raft.CurrentTerm() != term {
		return nil, nil, n.notLeaderError()
	}
	cat := n.fsm.Catalog()
	b.follow(term, cat, now)
	b.ready = true
	states := make([]LeaseState, len(ids))
	errs := make([]error, len(ids))
	for i, id := range ids {
		states[i].WorkerID = id
		l := b.leases[id]
		switch {
		case l == nil:
			if _, ok := cat.Worker(id); ok {
				errs[i] = fmt.Errorf("%w: worker %d was registered without lease_ttl_s", ErrNoLease, id)
			} else {
				errs[i] = fmt.Errorf("%w: %d", fsm.ErrWorkerNotFound, id)
			}
		case l.expiring || !now.Before(l.deadline):
			// Lapsed, even if the expiry is not under way yet (the next
			// tick, or a patch that overtook it): too late to renew.
			errs[i] = fmt.Errorf("%w: %d (its lease lapsed; register it again)", fsm.ErrWorkerNotFound, id)
		default:
			l.deadline = now.Add(l.ttl)
			states[i].TTL, states[i].ExpiresIn = l.ttl, l.ttl
		}
	}
	// A leader deposed while it was paused still thinks it leads: its
	// renewal would not reach the new leader's book, and its refusals come
	// from a book and a catalog the new leader has moved past (a lease it
	// saw lapse during its pause, a worker registered since). Confirm with
	// a quorum before answering either (one round trip per batch; jepsen's
	// pause-leader caught a deposed leader answering "lapsed").
	b.mu.Unlock()
	err := n.raft.VerifyLeader().Error()
	b.mu.Lock()
	if err != nil {
		return nil, nil, n.readError(err)
	}
	if n.raft.CurrentTerm() != term {
		return nil, nil, n.notLeaderError()
	}
	return states, errs, nil
}

// termBarrier waits, once per term, until this leader has applied every
// entry of earlier terms: a fresh leader's catalog may lag its commit
// index, and a lease must not be judged (or a keepalive refused) on a
// catalog that misses a registration.
func (n *Node) termBarrier(term uint64) error {
	n.mu.Lock()
	done := n.barrierTerm == term
	n.mu.Unlock()
	if done {
		return nil
	}
	if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		return n.readError(err)
	}
	n.mu.Lock()
	n.barrierTerm = term
	n.mu.Unlock()
	return nil
}

func (n *Node) leaseNow() time.Time {
	if n.cfg.Clock != nil {
		return n.cfg.Clock()
	}
	return time.Now()
}

// expireLeases runs on every node for the node's life; it acts only while
// the node leads: each tick it follows the catalog and removes the workers
// whose leases lapsed, one ExpireLease each.
func (n *Node) expireLeases() {
	defer n.wg.Done()
	tick := time.NewTicker(leaseTick)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		for _, cmd := range n.lapsedLeases() {
			n.expireLease(cmd)
		}
		n.leaseTicks.Add(1)
	}
}

// lapsedLeases follows leadership and the catalog and returns the leases
// to expire now.
func (n *Node) lapsedLeases() []fsm.ExpireLease {
	b := &n.leases
	if !n.IsLeader() {
		b.mu.Lock()
		b.clear()
		b.mu.Unlock()
		return nil
	}
	term := n.raft.CurrentTerm()
	b.mu.Lock()
	ready := b.term == term && b.ready
	b.mu.Unlock()
	if !ready {
		if err := n.termBarrier(term); err != nil {
			return nil
		}
	}
	now := n.leaseNow()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.follow(term, n.fsm.Catalog(), now)
	b.ready = true
	return b.lapsed(now)
}

// expireLease replicates one expiry. When it cannot be decided (leadership
// lost, timeout) the lease is no longer marked expiring, so the next tick
// tries again if this node still leads.
func (n *Node) expireLease(cmd fsm.ExpireLease) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	res, err := n.Apply(ctx, cmd)
	switch {
	case err == nil:
		n.metrics.leasesExpired.Inc()
		n.log.Info("worker lease expired; worker removed", "worker_id", cmd.WorkerID,
			"lease_ttl_s", res.Worker.LeaseTTLSeconds, "reason", "lease_expired", "catalog_index", res.Index)
	case errors.Is(err, fsm.ErrLeaseRenewed), errors.Is(err, fsm.ErrWorkerNotFound):
		// Re-registered, patched or deleted meanwhile: the book follows
		// the catalog on the next tick.
		n.log.Debug("lease expiry overtaken", "worker_id", cmd.WorkerID, "err", err)
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader):
		// Nothing was appended: the lease may be renewed again, and the
		// next leader starts its own book anyway.
		n.log.Warn("lease expiry not replicated; will retry while leading", "worker_id", cmd.WorkerID, "err", err)
		n.leases.mu.Lock()
		if l := n.leases.leases[cmd.WorkerID]; l != nil && l.modify == cmd.ModifyIndex {
			l.expiring = false
		}
		n.leases.mu.Unlock()
	default:
		// The expiry may still commit (unknown outcome): keep refusing
		// keepalives, or one could be acknowledged just before it does.
		// Once the catalog shows the outcome, the book follows it.
		n.log.Warn("lease expiry outcome unknown; the worker's keepalives stay refused until the catalog shows it",
			"worker_id", cmd.WorkerID, "err", err)
	}
}
