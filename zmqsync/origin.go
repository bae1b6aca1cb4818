package zmqsync

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// Freshness (doc.go, "Acceptance"): which messages a node accepts from
// whom. The catalog says who the members are and each one's epoch; every
// member has an originState here, which numbers what it has accepted from
// that member. A message is checked and applied with its origin's state
// locked, and so is every change of epoch or membership, so no event of an
// epoch a node has forgotten is ever applied after the Forget.

// Why a message is dropped on receipt, beyond its frames, MAC and
// decoding (labels of kvselect_replica_sync_dropped_messages_total).
const (
	dropNotReady      = "not_ready"      // v2 while this node knows no cluster id yet
	dropOtherCluster  = "other_cluster"  // v2 of another cluster
	dropUnknownOrigin = "unknown_origin" // not a member of this node's catalog
	dropOldEpoch      = "old_epoch"      // an earlier start of its origin
	dropReplayed      = "replayed"       // a counter already accepted
	dropOldVersion    = "old_version"    // v1 from a member known to run this release
	dropEcho          = "echo"           // this node's own
)

// originState is what a node knows of one member as a publisher.
type originState struct {
	id string
	// heardV2: a v2 message of this member was accepted (it runs this
	// release). Read without mu by dual().
	heardV2 atomic.Bool

	mu sync.Mutex
	// gone: the member left; a receiver that found this state before it
	// was removed drops the message.
	gone bool
	// departed: the member left the catalog less than DepartedLinger ago;
	// only the ends of other nodes' bookings are applied (departed.go).
	// Atomic, not under mu: updateOrigins reads it with omu held, and mu
	// is never taken inside omu (accept takes omu inside mu).
	departed atomic.Bool
	// departGen numbers the member's departures (expireDeparture).
	departGen atomic.Uint64
	// catalogEpoch is the member's epoch in the catalog; epoch the epoch
	// whose messages are accepted (never below catalogEpoch: a message of
	// a later epoch than the catalog's is accepted, the catalog may lag).
	catalogEpoch, epoch uint64
	// highest is the highest counter accepted in epoch.
	highest uint64
	// Live set assembly (doc.go, Anti-entropy): the set whose parts
	// arrive, the id the parts so far cover through, and whether every
	// part so far arrived in order.
	liveSet     uint64
	liveThrough string
	liveOK      bool
	// For Status.
	version                       int
	missed                        uint64
	lastMessage, lastCompleteLive time.Time
}

// updateOrigins brings the origin states in line with the catalog's
// members: a new member gets a state; a member whose catalog epoch grew
// has its older mirrors forgotten; a member that left has all of them
// forgotten and its state removed.
func (s *Syncer) updateOrigins(members map[string]Member) {
	s.omu.Lock()
	var raised, removed []*originState
	for id, st := range s.origins {
		if _, ok := members[id]; !ok && !st.departed.Load() {
			if s.cfg.DepartedLinger < 0 {
				delete(s.origins, id)
			}
			removed = append(removed, st)
		}
	}
	for id, m := range members {
		if id == s.cfg.NodeID {
			continue
		}
		st := s.origins[id]
		if st == nil {
			st = &originState{id: id, catalogEpoch: m.Epoch, epoch: m.Epoch}
			s.origins[id] = st
			continue
		}
		st.departed.Store(false) // back within its linger: a member again
		if m.Epoch != 0 {
			raised = append(raised, st)
		}
	}
	s.known = members
	epochs := make(map[*originState]uint64, len(raised))
	for _, st := range raised {
		epochs[st] = members[st.id].Epoch
	}
	s.omu.Unlock()

	for _, st := range removed {
		st.mu.Lock()
		if s.cfg.DepartedLinger < 0 {
			st.gone = true
		} else {
			st.departed.Store(true)
			s.expireDeparture(st, st.departGen.Add(1))
		}
		if s.cfg.Forget != nil {
			s.cfg.Forget(st.id, replica.ForgetAll)
		}
		st.mu.Unlock()
		s.metrics.forgotten.WithLabelValues("removed_member").Inc()
		s.log.Info("replica sync: a member left the cluster; its mirrored bookings are dropped", "node_id", st.id)
	}
	for st, epoch := range epochs {
		st.mu.Lock()
		st.catalogEpoch = max(st.catalogEpoch, epoch)
		if epoch > st.epoch {
			s.newEpochLocked(st, epoch)
		}
		st.mu.Unlock()
	}
	s.recomputeDual()
}

// newEpochLocked moves st to a later epoch of its member: the mirrors of
// the earlier ones are forgotten and counting starts again. st.mu is held.
func (s *Syncer) newEpochLocked(st *originState, epoch uint64) {
	if s.cfg.Forget != nil {
		s.cfg.Forget(st.id, epoch)
	}
	if st.epoch != 0 {
		s.metrics.forgotten.WithLabelValues("new_epoch").Inc()
	}
	st.epoch, st.highest, st.liveOK = epoch, 0, false
}

// origin returns the state of a member, nil for a node that is none.
func (s *Syncer) origin(id string) *originState {
	s.omu.Lock()
	defer s.omu.Unlock()
	return s.origins[id]
}

// accept checks one decoded message against its origin's state and, when
// it passes, applies its events through apply with the state locked. It
// returns "" or why the message was dropped.
func (s *Syncer) accept(m *Message, apply func(st *originState)) string {
	if m.Origin == s.cfg.NodeID {
		return dropEcho
	}
	id := s.identity.Load()
	if m.Version == Version {
		switch {
		case id.ClusterID.IsZero():
			return dropNotReady
		case m.ClusterID != id.ClusterID:
			return dropOtherCluster
		}
	}
	st := s.origin(m.Origin)
	if st == nil {
		return dropUnknownOrigin
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return dropUnknownOrigin
	}
	if m.Version == PreviousVersion {
		// Only from a member that may still run the previous release:
		// one that has an epoch in the catalog, or has sent v2, runs
		// this one, and v1 in its name is a replay or a forgery of a
		// token holder.
		if st.catalogEpoch != 0 || st.heardV2.Load() {
			return dropOldVersion
		}
		s.metrics.previousVersion.WithLabelValues("received").Inc()
	} else {
		switch {
		case m.Epoch < st.epoch:
			return dropOldEpoch
		case m.Epoch > st.epoch:
			s.newEpochLocked(st, m.Epoch)
		}
		if m.Counter <= st.highest {
			return dropReplayed
		}
		if st.highest != 0 && m.Counter > st.highest+1 {
			st.missed += m.Counter - st.highest - 1
			s.metrics.missed.Add(float64(m.Counter - st.highest - 1))
		}
		st.highest = m.Counter
		if !st.heardV2.Swap(true) {
			defer s.recomputeDual()
		}
	}
	st.version, st.lastMessage = m.Version, time.Now()
	apply(st)
	return ""
}

// assembleLive tracks the parts of st's live sets as they arrive and
// marks the part that completes a set whose every part arrived in order.
// st.mu is held.
func (st *originState) assembleLive(l *replica.LivePart) {
	switch {
	case l.After == "":
		st.liveSet, st.liveThrough, st.liveOK = l.Set, l.Through, true
	case st.liveOK && l.Set == st.liveSet && l.After == st.liveThrough:
		st.liveThrough = l.Through
	default:
		st.liveOK = false // a part is missing: this set proves nothing
	}
	l.Complete = st.liveOK && l.Set == st.liveSet && l.Through == ""
	if l.Complete {
		st.lastCompleteLive = time.Now()
	}
}

// recomputeDual decides whether this node also sends its events as v1: as
// long as a member that takes replica sync (has an endpoint) may run the
// previous release (no epoch in the catalog, no v2 heard from it), so a
// rolling upgrade keeps load shared both ways.
func (s *Syncer) recomputeDual() {
	s.omu.Lock()
	defer s.omu.Unlock()
	dual := false
	for id, st := range s.origins {
		if m := s.known[id]; m.Endpoint != "" && m.Epoch == 0 && !st.heardV2.Load() {
			dual = true
			break
		}
	}
	s.dual.Store(dual)
}
