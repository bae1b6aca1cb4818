package scheduler

import (
	"container/list"
	"fmt"
	"sync"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// Pending selections (SPEC §3.3): a /select that carries a selection_id is
// remembered for a short time, so that POST /reservations can book exactly
// that choice by selection_id alone (Dynamo's pending-selection booking).
// A booking uses it up; a failed booking leaves it for a retry.

// Limits of the pending selections a node remembers. Past either, the
// oldest are forgotten first.
const (
	PendingTTL       = 60 * time.Second
	maxPending       = 1 << 16
	maxPendingHashes = 1 << 23 // 64 MiB of sequence hashes
)

// pendingSelection is one remembered choice: what a booking of it books.
type pendingSelection struct {
	id        string
	partition fsm.PartitionKey
	rank      indexer.RankKey
	seq       []uint64
	verified  bool // seq chains the prompt's block hashes (see activePrefixes)
	isl       int64
	prefill   int64 // prefill tokens a booking records (0 without prefill tracking)
	expires   time.Time
	elem      *list.Element
}

// pendingSelections is the node's memory of them. mu is taken before any
// partition lock (a booking by selection holds it while it books), never
// after one.
type pendingSelections struct {
	mu     sync.Mutex
	byID   map[string]*pendingSelection
	order  *list.List // oldest first; with one TTL, also by expiry
	hashes int
	// the limits: maxPending and maxPendingHashes, smaller in tests
	maxCount, maxHashes int
}

func newPendingSelections() *pendingSelections {
	return &pendingSelections{byID: map[string]*pendingSelection{}, order: list.New(),
		maxCount: maxPending, maxHashes: maxPendingHashes}
}

// remember stores ps under its id, replacing an earlier choice of the same
// id, and forgets the oldest past the limits.
func (ps *pendingSelections) remember(sel *pendingSelection) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if old := ps.byID[sel.id]; old != nil {
		ps.forgetLocked(old)
	}
	sel.elem = ps.order.PushBack(sel)
	ps.byID[sel.id] = sel
	ps.hashes += len(sel.seq)
	for len(ps.byID) > ps.maxCount || ps.hashes > ps.maxHashes {
		ps.forgetLocked(ps.order.Front().Value.(*pendingSelection))
	}
}

func (ps *pendingSelections) forgetLocked(sel *pendingSelection) {
	ps.order.Remove(sel.elem)
	delete(ps.byID, sel.id)
	ps.hashes -= len(sel.seq)
}

// sweep forgets the selections expired at now and returns how many.
func (ps *pendingSelections) sweep(now time.Time) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := 0
	for e := ps.order.Front(); e != nil; e = ps.order.Front() {
		sel := e.Value.(*pendingSelection)
		if sel.expires.After(now) {
			break
		}
		ps.forgetLocked(sel)
		n++
	}
	return n
}

// Pending returns how many selections the node remembers.
func (s *Scheduler) Pending() int {
	s.pending.mu.Lock()
	defer s.pending.mu.Unlock()
	return len(s.pending.byID)
}

// rememberSelection keeps a /select choice under its selection id.
func (s *Scheduler) rememberSelection(id string, sel Selection, pr *Prompt) {
	prefill := int64(0)
	if sel.tracked {
		prefill = sel.EffectivePrefillTokens
	}
	s.pending.remember(&pendingSelection{
		id: id, partition: sel.Partition, rank: indexer.RankKey{Worker: sel.WorkerID, Rank: sel.DPRank},
		seq: pr.SequenceHashes, verified: chained(pr.SequenceHashes, pr.BlockHashes),
		isl: pr.ISL, prefill: prefill, expires: s.now().Add(PendingTTL),
	})
}

// reserveSelection books the choice remembered under selectionID as
// reservation id. It uses the selection up only when the booking succeeds.
func (s *Scheduler) reserveSelection(id, selectionID string) (Booking, error) {
	ps := s.pending
	ps.mu.Lock()
	defer ps.mu.Unlock()
	sel := ps.byID[selectionID]
	if sel == nil || !sel.expires.After(s.now()) {
		return Booking{}, fmt.Errorf("%w: %q", ErrNoPendingSelection, selectionID)
	}
	p := s.partition(sel.partition)
	if p == nil {
		return Booking{}, fmt.Errorf("%w: worker %d in %s", ErrWorkerNotFound, sel.rank.Worker, sel.partition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rl := p.byKey[sel.rank]
	if rl == nil || !rl.schedulable {
		return Booking{}, fmt.Errorf("%w: worker %d dp_rank %d in %s", ErrWorkerNotFound, sel.rank.Worker, sel.rank.Rank, sel.partition)
	}
	if err := s.claimID(id, p, len(sel.seq)); err != nil {
		return Booking{}, err
	}
	s.book(p, id, rl, sel.seq, sel.verified, sel.isl, sel.prefill)
	ps.forgetLocked(sel)
	return Booking{Partition: sel.partition, WorkerID: sel.rank.Worker, DPRank: sel.rank.Rank, PrefillTokens: sel.prefill}, nil
}
