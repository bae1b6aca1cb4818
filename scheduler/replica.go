package scheduler

import (
	"container/list"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// Replica sync (SPEC §3.6, seed 000): a booking made on this node is
// published to the other nodes, which book the same load as a mirrored
// reservation; prefill_complete and free, on whichever node they are
// called, are published too. The other nodes' events come back through
// ApplyPeerEvent. Nothing here waits for a peer: publishing is a
// non-blocking hand-off, and a lost event costs accuracy until the expiry
// sweep, never availability.

// Publisher takes this node's lifecycle events for the other nodes. It
// must not block: it is called with a partition lock held.
type Publisher interface {
	Publish(ev replica.Event)
}

// SetPublisher makes the scheduler publish its bookings, prefill
// completions and frees to p (nil: publish nothing), as node nodeID (the
// origin its peers record). Call it before the node serves requests.
func (s *Scheduler) SetPublisher(p Publisher, nodeID string) {
	s.publisher, s.nodeID = p, nodeID
}

func (s *Scheduler) publish(ev replica.Event) {
	if s.publisher != nil {
		s.publisher.Publish(ev)
	}
}

// publishAdmission tells the peers about a booking made here; p.mu is
// held. The event shares res.blocks, which never changes after booking.
func (s *Scheduler) publishAdmission(p *partition, res *reservation) {
	if s.publisher == nil {
		return
	}
	s.publish(replica.Event{
		Kind: replica.KindAdmission, ReservationID: res.id,
		Model: p.key.Model, Tenant: p.key.Tenant, WorkerID: res.rank.key.Worker, DPRank: res.rank.key.Rank,
		BlockSize: p.blockSize, SequenceHashes: res.blocks, Chained: res.verified,
		ISL: res.isl, PrefillTokens: res.prefill, Admitted: res.admitted,
	})
}

// publishEnd tells the peers that a booking's prefill ended or that it
// ended, naming the node that booked it; p.mu is held.
func (s *Scheduler) publishEnd(kind replica.Kind, res *reservation) {
	if s.publisher == nil {
		return
	}
	by := res.origin
	if by == "" {
		by = s.nodeID
	}
	s.publish(replica.Event{Kind: kind, ReservationID: res.id, BookedBy: by})
}

// Why a peer event was not applied: the label of the drop counter.
const (
	DropUnknownPartition   = "unknown_partition"
	DropUnknownRank        = "unknown_rank"
	DropBlockSize          = "block_size"
	DropDuplicate          = "duplicate"
	DropUnknownReservation = "unknown_reservation"
	DropOtherBooking       = "other_booking"
	DropExpired            = "expired"
	// DropFreed: the admission, sent again, of a booking this node knows
	// ended (antientropy.go, notePendingFree).
	DropFreed = "freed"
	// DropCapacity: mirrored bookings already use their half of the
	// node's booking bounds (capacity.go).
	DropCapacity = "capacity"
)

// DropReasons lists every reason ApplyPeerEvent may give.
func DropReasons() []string {
	return []string{DropUnknownPartition, DropUnknownRank, DropBlockSize, DropDuplicate,
		DropUnknownReservation, DropOtherBooking, DropExpired, DropCapacity, DropFreed}
}

// ApplyPeerEvent applies another node's lifecycle event to this node's
// active load and returns "" when it did, or why it dropped it (one of
// DropReasons). Replica traffic never creates workers or partitions: an
// admission for a partition, worker rank or block size this node does not
// schedule is dropped. An admission of an id already booked here is
// dropped (the id stays taken); a prefill_complete or free that names
// another booking node than the one of the booking here with that id is
// dropped too (two nodes booked one id before either admission arrived:
// each keeps its own). A free of an id not known here leaves a tombstone,
// so that the admission it overtook (it came from another node, over
// another connection) is dropped when it arrives.
//
// Live sets and wants are anti-entropy (antientropy.go).
func (s *Scheduler) ApplyPeerEvent(origin string, ev *replica.Event) string {
	switch ev.Kind {
	case replica.KindAdmission:
		why := s.mirrorAdmission(origin, ev)
		if why != "" && why != DropDuplicate && why != DropFreed {
			s.noteRefused(origin, ev, why)
		}
		return why
	case replica.KindPrefillComplete, replica.KindFree:
		return s.endFromPeer(origin, ev)
	case replica.KindLive:
		return s.applyLive(origin, ev)
	case replica.KindWant:
		return s.applyWant(ev)
	}
	return ""
}

// endFromPeer applies a peer's prefill_complete or free. The miss and the
// tombstone it leaves are one step under resMu, the lock mirrorAdmission
// claims the id under, so a free and its admission cannot pass each other
// in between.
//
// A free of another node's booking that came from a third node (sender) is
// remembered like a free made here (notePendingFree): this node then helps
// the free reach the origin, and never books that booking again when its
// admission is sent again.
func (s *Scheduler) endFromPeer(sender string, ev *replica.Event) string {
	s.resMu.Lock()
	p := s.resIndex[ev.ReservationID]
	if p == nil {
		if ev.Kind == replica.KindFree {
			s.tombstones.add(ev.ReservationID, s.now())
		}
		s.resMu.Unlock()
		return DropUnknownReservation
	}
	s.resMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reservations[ev.ReservationID]
	switch {
	case r == nil: // ended between the two lookups
		return DropUnknownReservation
	case ev.BookedBy != "" && ev.BookedBy != r.origin && (r.origin != "" || ev.BookedBy != s.nodeID):
		return DropOtherBooking
	case ev.Kind == replica.KindFree:
		p.unbook(r)
		s.forget(r)
		if r.origin != "" && r.origin != sender {
			s.notePendingFree(r)
		}
	default:
		p.completePrefill(r, true)
	}
	return ""
}

func (s *Scheduler) mirrorAdmission(origin string, ev *replica.Event) string {
	now := s.now()
	admitted := ev.Admitted
	if admitted.After(now) {
		admitted = now // a peer's clock ahead of ours: never admit in the future
	}
	if !admitted.After(now.Add(-s.cfg.ActiveRequestExpiry)) {
		return DropExpired
	}
	if s.freedHere(origin, ev.ReservationID, ev.Epoch) {
		return DropFreed
	}
	p := s.partition(fsm.PartitionKey{Model: ev.Model, Tenant: ev.Tenant})
	if p == nil {
		return DropUnknownPartition
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blockSize != ev.BlockSize {
		return DropBlockSize
	}
	rl := p.byKey[indexer.RankKey{Worker: ev.WorkerID, Rank: ev.DPRank}]
	if rl == nil || !rl.schedulable {
		return DropUnknownRank
	}
	if why := s.claimMirrored(ev.ReservationID, p, now, len(ev.SequenceHashes)); why != "" {
		return why
	}
	p.book(&reservation{
		id: ev.ReservationID, handle: s.handles.Add(1), rank: rl, origin: origin, charged: int64(len(ev.SequenceHashes)),
		epoch: ev.Epoch, counter: ev.Counter,
		isl: ev.ISL, prefill: ev.PrefillTokens, admitted: admitted, local: now, verified: ev.Chained,
	}, ev.SequenceHashes)
	return ""
}

// claimMirrored claims a peer booking's id like claimID, unless it is
// taken, a free already ended it (its tombstone is used up) or mirrors
// hold their share of the node's bounds; p.mu is held.
func (s *Scheduler) claimMirrored(id string, p *partition, now time.Time, blocks int) string {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	switch {
	case s.resIndex[id] != nil:
		return DropDuplicate
	case s.tombstones.take(id, now):
		return DropUnknownReservation // freed on another node before its admission reached us
	case s.capacity.take(true, int64(blocks)) != nil:
		return DropCapacity
	}
	s.resIndex[id] = p
	return ""
}

// tombstones remembers, for a while, the ids of frees that arrived before
// their admission. Bounded: past maxTombstones the oldest go first. The
// scheduler's resMu guards it.
type tombstones struct {
	ttl   time.Duration
	byID  map[string]*list.Element
	order *list.List // of tombstone, oldest first
}

type tombstone struct {
	id      string
	expires time.Time
}

// maxTombstones bounds the memory of early frees (a few MiB at most).
const maxTombstones = 1 << 16

// tombstoneTTL is how long an early free waits for its admission; peers'
// events arrive within milliseconds, so this is generous.
const tombstoneTTL = time.Minute

func newTombstones() *tombstones {
	return &tombstones{ttl: tombstoneTTL, byID: map[string]*list.Element{}, order: list.New()}
}

func (t *tombstones) add(id string, now time.Time) {
	t.expireLocked(now)
	if e, ok := t.byID[id]; ok {
		t.order.Remove(e)
	}
	t.byID[id] = t.order.PushBack(tombstone{id: id, expires: now.Add(t.ttl)})
	for t.order.Len() > maxTombstones {
		t.removeLocked(t.order.Front())
	}
}

// take reports whether id has a live tombstone, and uses it up.
func (t *tombstones) take(id string, now time.Time) bool {
	t.expireLocked(now)
	e, ok := t.byID[id]
	if ok {
		t.removeLocked(e)
	}
	return ok
}

// has reports whether id has a live tombstone, without using it up.
func (t *tombstones) has(id string, now time.Time) bool {
	t.expireLocked(now)
	_, ok := t.byID[id]
	return ok
}

func (t *tombstones) expireLocked(now time.Time) {
	for e := t.order.Front(); e != nil && !e.Value.(tombstone).expires.After(now); e = t.order.Front() {
		t.removeLocked(e)
	}
}

func (t *tombstones) removeLocked(e *list.Element) {
	delete(t.byID, e.Value.(tombstone).id)
	t.order.Remove(e)
}
