package scheduler

import (
	"container/list"
	"slices"
	"time"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// Anti-entropy and epochs (SPEC §3.6; zmqsync/doc.go, Anti-entropy;
// DESIGN.md, Replica sync). Every mirrored booking remembers which start
// of its origin (epoch) booked it and in which of its messages (counter).
// The origin's live set, published every period, lists its own live
// bookings as of a counter; against it a node
//
//   - drops the mirrors the set does not list, booked from messages up to
//     that counter (a free that was lost);
//   - asks the origin for the admissions of the bookings it lacks (an
//     admission that was lost; replica.KindWant), and the origin
//     publishes them again;
//   - sends again the free of a booking it freed, or whose free it took
//     from a third node, that the origin still lists, and the prefill
//     completion of one whose prefill it ended (the origin did not hear of
//     them). Such a free also refuses the booking's admission sent again
//     (an answer to another node's want), so a node that knows a booking
//     ended never books it again, and keeps sending the free, until a
//     live set taken after the booking no longer lists it;
//   - completes the prefill of a mirror the origin lists as complete.
//
// A later epoch of an origin, or its leaving the cluster, makes the node
// forget all its older mirrors (Forget).

// Why a mirrored booking was dropped other than by a free or the expiry
// (kvselect_replica_sync_mirrors_dropped_total).
const (
	mirrorNotLive       = "not_live"       // missing from its origin's live set
	mirrorOldEpoch      = "old_epoch"      // its origin started again
	mirrorRemovedMember = "removed_member" // its origin left the cluster
)

// How long a node waits before asking an origin again for a booking it
// lacks: after a want (the answer may be on its way, or lost), and after
// the admission came and was refused here, when asking again every period
// would only repeat the refusal (capacity; a refusal the catalog may soon
// undo, an unknown rank, say, waits as long as a want).
const (
	wantRetry    = 3 * time.Second
	refusedRetry = 30 * time.Second
)

// maxAntiEntropyRecords bounds each of the records below (pending frees,
// wants), like the tombstones. A full store takes no new record rather
// than drop a live one: dropping the oldest made every record of a set
// larger than the store go before the set came back to it, and the node
// then asked for every missing booking every period.
const maxAntiEntropyRecords = 1 << 16

// maxWantsPerPart bounds the bookings one live part makes a node ask
// for; the rest wait for the next period.
const maxWantsPerPart = 1024

// aeKey names one booking of one origin.
type aeKey struct{ origin, id string }

// aeRecords is a bounded set of per-booking records that expire, oldest
// first: the frees this node applied to other nodes' bookings that their
// origin has not confirmed yet, or the bookings this node asked for. The
// scheduler's aeMu guards it.
type aeRecords struct {
	byKey map[aeKey]*list.Element
	order *list.List // of aeRecord, by insertion
}

type aeRecord struct {
	key   aeKey
	epoch uint64
	// counter is the message that carried the booking's admission (pending
	// frees): only a live set as of it or later can confirm the free.
	counter uint64
	expires time.Time
}

func newAERecords() *aeRecords {
	return &aeRecords{byKey: map[aeKey]*list.Element{}, order: list.New()}
}

// put stores a record of k, replacing one there is, and reports false
// when the store is full of live records (the record is not kept).
func (a *aeRecords) put(k aeKey, epoch, counter uint64, expires, now time.Time) bool {
	// Expired records at the front go; later ones go when they reach it
	// or when looked up.
	for e := a.order.Front(); e != nil && !e.Value.(aeRecord).expires.After(now); e = a.order.Front() {
		a.remove(e)
	}
	if e, ok := a.byKey[k]; ok {
		a.order.Remove(e)
	} else if a.order.Len() >= maxAntiEntropyRecords {
		return false
	}
	a.byKey[k] = a.order.PushBack(aeRecord{key: k, epoch: epoch, counter: counter, expires: expires})
	return true
}

// get returns a live record of k.
func (a *aeRecords) get(k aeKey, now time.Time) (aeRecord, bool) {
	e, ok := a.byKey[k]
	if !ok {
		return aeRecord{}, false
	}
	r := e.Value.(aeRecord)
	if !r.expires.After(now) {
		a.remove(e)
		return aeRecord{}, false
	}
	return r, true
}

func (a *aeRecords) remove(e *list.Element) {
	delete(a.byKey, e.Value.(aeRecord).key)
	a.order.Remove(e)
}

// removeIf removes the records of origin that match.
func (a *aeRecords) removeIf(origin string, match func(aeRecord) bool) {
	for e := a.order.Front(); e != nil; {
		next := e.Next()
		if r := e.Value.(aeRecord); r.key.origin == origin && match(r) {
			a.remove(e)
		}
		e = next
	}
}

// LiveBookings appends this node's own live bookings (not its mirrors) to
// dst, each with whether its prefill is still on: the live set replica
// sync publishes every period (zmqsync.Config.Live, in server/replicasync.go). It costs O(bookings).
func (s *Scheduler) LiveBookings(dst []replica.LiveBooking) []replica.LiveBooking {
	for _, p := range s.partitions() {
		p.mu.Lock()
		for id, r := range p.reservations {
			if r.origin == "" {
				dst = append(dst, replica.LiveBooking{ID: id, Prefilling: !r.prefillDone})
			}
		}
		p.mu.Unlock()
	}
	return dst
}

// partitions lists the partitions (a copy, outside s.mu).
func (s *Scheduler) partitions() []*partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		out = append(out, p)
	}
	return out
}

// ForgetMirrors drops the bookings mirrored from origin's epochs before
// the given one (zmqsync.Config.Forget, in server/replicasync.go): the origin started again, and
// what it booked before is gone with the process; with replica.ForgetAll,
// every one (the origin left the cluster). It returns how many it dropped.
func (s *Scheduler) ForgetMirrors(origin string, before uint64) int {
	reason := mirrorOldEpoch
	if before == replica.ForgetAll {
		reason = mirrorRemovedMember
	}
	n := s.dropMirrors(origin, reason, func(r *reservation) bool { return r.epoch < before })
	s.aeMu.Lock()
	older := func(r aeRecord) bool { return r.epoch < before }
	s.pendingFrees.removeIf(origin, older)
	s.wanted.removeIf(origin, older)
	s.aeMu.Unlock()
	if n > 0 {
		s.log.Info("mirrored bookings dropped", "origin", origin, "reason", reason, "count", n)
	}
	return n
}

// dropMirrors unbooks origin's mirrors that match and counts them under
// reason. It costs O(bookings).
func (s *Scheduler) dropMirrors(origin, reason string, match func(*reservation) bool) int {
	dropped := 0
	for _, p := range s.partitions() {
		var ended []*reservation
		p.mu.Lock()
		for _, r := range p.reservations {
			if r.origin == origin && match(r) {
				p.unbook(r)
				ended = append(ended, r)
			}
		}
		s.forget(ended...)
		p.mu.Unlock()
		dropped += len(ended)
	}
	s.metrics.mirrorsDropped.WithLabelValues(reason).Add(float64(dropped))
	return dropped
}

// applyLive checks origin's mirrors against one part of its live set
// (replica.KindLive; see the top of this file).
func (s *Scheduler) applyLive(origin string, ev *replica.Event) string {
	l := ev.Live
	now := s.now()
	var want []string
	// Mirrors at their share of the bounds: every admission asked for
	// would be refused (capacity.go).
	s.resMu.Lock()
	mirrorsFull := s.capacity.mirrorsFull()
	s.resMu.Unlock()
	prefilling := l.Prefilling
	for i, id := range l.IDs {
		pending := len(prefilling) > 0 && prefilling[0] == uint32(i)
		if pending {
			prefilling = prefilling[1:]
		}
		s.resMu.Lock()
		p := s.resIndex[id]
		tombstoned := p == nil && s.tombstones.has(id, now)
		s.resMu.Unlock()
		if p != nil {
			s.checkMirror(p, origin, ev.Epoch, l.Set, id, pending)
			continue
		}
		key := aeKey{origin, id}
		s.aeMu.Lock()
		freed, isFreed := s.pendingFrees.get(key, now)
		_, asked := s.wanted.get(key, now)
		if !isFreed && !asked && !tombstoned && len(want) < maxWantsPerPart && !mirrorsFull &&
			s.wanted.put(key, ev.Epoch, 0, now.Add(wantRetry), now) {
			want = append(want, id)
		}
		s.aeMu.Unlock()
		if isFreed && freed.epoch == ev.Epoch {
			// Freed here; the origin did not hear of it.
			s.publish(replica.Event{Kind: replica.KindFree, ReservationID: id, BookedBy: origin})
			s.metrics.resent.WithLabelValues(replica.KindFree.String()).Inc()
		}
	}
	// The frees of bookings the origin no longer lists are done there,
	// provided the set was taken after the booking: one taken before it
	// does not list it either.
	s.aeMu.Lock()
	s.pendingFrees.removeIf(origin, func(r aeRecord) bool {
		id := r.key.id
		inRange := (l.After == "" || id > l.After) && (l.Through == "" || id <= l.Through)
		_, listed := slices.BinarySearch(l.IDs, id)
		return inRange && !listed && r.epoch == ev.Epoch && r.counter <= l.AsOf
	})
	s.aeMu.Unlock()
	if len(want) > 0 {
		s.publish(replica.Event{Kind: replica.KindWant, Want: &replica.Want{Target: origin, Epoch: ev.Epoch, IDs: want}})
		s.metrics.wanted.Add(float64(len(want)))
	}
	if l.Complete {
		// Every part arrived: what the set does not list, and was
		// booked from a message it covers, is over on its origin.
		n := s.dropMirrors(origin, mirrorNotLive, func(r *reservation) bool {
			return r.epoch < ev.Epoch || r.counter <= l.AsOf && r.seen != l.Set
		})
		if n > 0 {
			s.log.Debug("mirrored bookings missing from their origin's live set dropped", "origin", origin, "count", n)
		}
	}
	return ""
}

// checkMirror marks a booking the origin's live set lists and brings its
// prefill in line; p holds (or held) the id.
func (s *Scheduler) checkMirror(p *partition, origin string, epoch, set uint64, id string, prefilling bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reservations[id]
	if r == nil || r.origin != origin || r.epoch != epoch {
		return // ended meanwhile, or a booking of another node under the same id
	}
	r.seen = set
	switch {
	case !prefilling && p.completePrefill(r, false):
		// The origin's prefill ended and its event was lost.
	case prefilling && r.prefillDone:
		// Ended here; the origin did not hear of it.
		s.publishEnd(replica.KindPrefillComplete, r)
		s.metrics.resent.WithLabelValues(replica.KindPrefillComplete.String()).Inc()
	}
}

// applyWant publishes again the admissions of this node's own bookings
// that a peer lacks (replica.KindWant; the syncer passes only wants
// addressed to this node's current epoch).
func (s *Scheduler) applyWant(ev *replica.Event) string {
	for _, id := range ev.Want.IDs {
		s.resMu.Lock()
		p := s.resIndex[id]
		s.resMu.Unlock()
		if p == nil {
			continue // ended since; the next live set says so
		}
		p.mu.Lock()
		if r := p.reservations[id]; r != nil && r.origin == "" {
			s.publishAdmission(p, r)
			s.metrics.resent.WithLabelValues(replica.KindAdmission.String()).Inc()
		}
		p.mu.Unlock()
	}
	return ""
}

// notePendingFree remembers that another node's booking ended here (freed
// here, or by a free a third node sent), until a live set of its origin
// taken after the booking stops listing it: applyLive sends the free again
// meanwhile, and mirrorAdmission refuses the booking's admission sent
// again. A mirror that came as v1 has no epoch, and no live set confirms
// it: it is not remembered. p.mu is held.
func (s *Scheduler) notePendingFree(r *reservation) {
	if r.epoch == 0 {
		return
	}
	now := s.now()
	s.aeMu.Lock()
	kept := s.pendingFrees.put(aeKey{r.origin, r.id}, r.epoch, r.counter, r.admitted.Add(s.cfg.ActiveRequestExpiry), now)
	s.aeMu.Unlock()
	if !kept {
		s.metrics.aeRecordsFull.Inc()
	}
}

// freedHere reports whether this node knows that origin's booking id of
// epoch ended (notePendingFree).
func (s *Scheduler) freedHere(origin, id string, epoch uint64) bool {
	s.aeMu.Lock()
	defer s.aeMu.Unlock()
	r, ok := s.pendingFrees.get(aeKey{origin, id}, s.now())
	return ok && r.epoch == epoch
}

// noteRefused keeps this node from asking origin for a booking whose
// admission it has just refused (why), for refusedRetry, or for wantRetry
// when the catalog may soon undo the refusal (a worker or partition this
// node has not applied yet).
func (s *Scheduler) noteRefused(origin string, ev *replica.Event, why string) {
	retry := refusedRetry
	switch why {
	case DropUnknownRank, DropUnknownPartition, DropBlockSize:
		retry = wantRetry
	}
	now := s.now()
	s.aeMu.Lock()
	s.wanted.put(aeKey{origin, ev.ReservationID}, ev.Epoch, 0, now.Add(retry), now)
	s.aeMu.Unlock()
}
