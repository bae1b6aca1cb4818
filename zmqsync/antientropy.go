package zmqsync

import (
	"cmp"
	"slices"
	"time"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// Anti-entropy (doc.go, "Anti-entropy"; SPEC §3.6): every period the node
// publishes the set of its live local bookings, in the same ordered stream
// as its admissions and frees, so that each receiver can drop the mirrors
// the origin no longer has (a lost free), ask for those it lacks (a lost
// admission) and send again a free or prefill completion the origin did
// not get. This file is the publishing side; what a receiver does with a
// set is Config.Apply's (the scheduler's).

// DefaultAntiEntropyPeriod is how often a node publishes its live set: a
// lost event heals within a few periods rather than at the expiry.
const DefaultAntiEntropyPeriod = time.Second

// maxLivePartBytes bounds the ids of one live part, so that a part stays a
// small message whatever the ids' lengths.
const maxLivePartBytes = 256 << 10

// announce publishes the live set every period until the syncer closes.
func (s *Syncer) announce() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.AntiEntropyPeriod)
	defer tick.Stop()
	var (
		set, setEpoch uint64
		live          []replica.LiveBooking
	)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		id := s.identity.Load()
		if id.ClusterID.IsZero() || id.Epoch == 0 {
			continue // no v2 yet: live sets exist in v2 only
		}
		if id.Epoch != setEpoch {
			set, setEpoch = 0, id.Epoch
		}
		// Everything the sender took off the queue up to asOf was
		// published before the set is taken: a booking it admitted is in
		// the set unless it ended. A later admission may be missing, and
		// receivers keep what they booked from messages after asOf.
		s.sentMu.Lock()
		asOf := s.sentCtr
		if s.sentEpoch != id.Epoch {
			asOf = 0
		}
		s.sentMu.Unlock()
		live = s.cfg.Live(live[:0])
		set++
		for _, part := range splitLive(live, set, asOf) {
			// Epoch is the set's, never sent: the sender drops a part
			// of a set taken in another epoch.
			s.Publish(replica.Event{Kind: replica.KindLive, Live: part, Epoch: id.Epoch})
		}
		s.metrics.liveSets.WithLabelValues("sent").Inc()
		clear(live)
	}
}

// splitLive sorts a live set and cuts it into parts of consecutive id
// ranges, each of at most MaxSetIDs ids and about maxLivePartBytes; an
// empty set is one empty part (it still tells the receivers that every
// mirror of this node up to asOf is gone).
func splitLive(live []replica.LiveBooking, set, asOf uint64) []*replica.LivePart {
	slices.SortFunc(live, func(a, b replica.LiveBooking) int { return cmp.Compare(a.ID, b.ID) })
	live = slices.CompactFunc(live, func(a, b replica.LiveBooking) bool { return a.ID == b.ID })
	var parts []*replica.LivePart
	after := ""
	for first := true; first || len(live) > 0; first = false {
		n, size := 0, 0
		for n < len(live) && n < MaxSetIDs && size < maxLivePartBytes {
			size += len(live[n].ID)
			n++
		}
		p := &replica.LivePart{Set: set, AsOf: asOf, After: after, IDs: make([]string, n)}
		for i, b := range live[:n] {
			p.IDs[i] = b.ID
			if b.Prefilling {
				p.Prefilling = append(p.Prefilling, uint32(i))
			}
		}
		live = live[n:]
		if len(live) > 0 {
			p.Through = p.IDs[n-1]
			after = p.Through
		}
		parts = append(parts, p)
	}
	return parts
}
