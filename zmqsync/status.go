package zmqsync

import (
	"cmp"
	"slices"
	"time"
)

// Publishing modes (Status.Mode).
const (
	// ModeV2: the node publishes schema v2 only.
	ModeV2 = "v2"
	// ModeDual: v2, plus a v1 copy of each admission, prefill completion
	// and free for members that may still run the previous release.
	ModeDual = "v2+v1"
	// ModeV1: the catalog has no cluster id yet (a cluster of the
	// previous release being upgraded): v1 only, no anti-entropy.
	ModeV1 = "v1"
	// ModeHeld: the catalog has a cluster id but not yet this process's
	// epoch; the node's events wait in the queue.
	ModeHeld = "held"
)

// Status is the syncer's state as GET /replica_sync/status shows it,
// besides the peers (Peers).
type Status struct {
	// Identity is this node's cluster id and epoch as the syncer has them.
	Identity
	Mode string
	// Counter is the last counter this node gave a message in its epoch.
	Counter uint64
	// AntiEntropyPeriod is how often the node publishes its live set.
	AntiEntropyPeriod time.Duration
	// Origins are the members this node accepts messages from, by id.
	Origins []OriginStatus
}

// OriginStatus is what this node has accepted from one member.
type OriginStatus struct {
	NodeID string
	// CatalogEpoch is the member's epoch in the catalog; Epoch the one
	// whose messages are accepted (later when the catalog lags).
	CatalogEpoch, Epoch uint64
	// Counter is the highest counter accepted in Epoch; Missed counts
	// the counters that never arrived.
	Counter, Missed uint64
	// Version is the schema of the last message accepted (0: none yet).
	Version int
	// LastMessage is when a message was last accepted; LastLiveSet when
	// a complete live set last arrived (zero: never).
	LastMessage, LastLiveSet time.Time
}

// Status reports the syncer's identity, mode and origins.
func (s *Syncer) Status() Status {
	id := *s.identity.Load()
	st := Status{Identity: id, AntiEntropyPeriod: s.cfg.AntiEntropyPeriod}
	switch {
	case id.ClusterID.IsZero():
		st.Mode = ModeV1
	case id.Epoch == 0:
		st.Mode = ModeHeld
	case s.dual.Load():
		st.Mode = ModeDual
	default:
		st.Mode = ModeV2
	}
	s.sentMu.Lock()
	if s.sentEpoch == id.Epoch {
		st.Counter = s.sentCtr
	}
	s.sentMu.Unlock()
	s.omu.Lock()
	origins := make([]*originState, 0, len(s.origins))
	for _, o := range s.origins {
		origins = append(origins, o)
	}
	s.omu.Unlock()
	for _, o := range origins {
		o.mu.Lock()
		st.Origins = append(st.Origins, OriginStatus{NodeID: o.id, CatalogEpoch: o.catalogEpoch, Epoch: o.epoch,
			Counter: o.highest, Missed: o.missed, Version: o.version, LastMessage: o.lastMessage, LastLiveSet: o.lastCompleteLive})
		o.mu.Unlock()
	}
	slices.SortFunc(st.Origins, func(a, b OriginStatus) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return st
}
