package zmqsync

import (
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// Departed members. A member removed from the cluster may not know it for
// a while: when the leader's last append to it is lost, it finds out only
// once it has heard from no leader for a few heartbeats and asked the
// others (cluster/removal.go), seconds later. Meanwhile its callers still
// use it: it books, and it answers the prefill completions and frees of
// bookings that other nodes made, which it mirrors. Those ends must reach
// the bookings' nodes, or their load stays until the expiry: a free the
// client was told succeeded, lost for good. (The anti-entropy of the
// departed node itself does not help: it resends the free until the
// origin's live set drops the booking, to nodes that no longer listen.)
//
// So for DepartedLinger after a member leaves the catalog, a node keeps
// following its endpoint and keeps its origin state, and accepts from it,
// numbered as before, the prefill completions and frees of the other
// nodes' bookings, and nothing else: its mirrors are forgotten at once
// (Forget with replica.ForgetAll, as before) and its admissions, live sets and
// wants are dropped (event reason departedMember), since its bookings are
// on a node that is leaving. Past the linger, the state and the
// subscription go. A member that comes back within the linger is a member
// again.

// DefaultDepartedLinger covers a removed node's discovery of its removal
// (about orphanHeartbeats heartbeat timeouts and one round of asking: 5-10
// s at kvselect's defaults) with room to spare.
const DefaultDepartedLinger = 30 * time.Second

// SourceDeparted: the endpoint of a member that left the cluster, followed
// for DepartedLinger.
const SourceDeparted Source = api.PeerSourceDeparted

// departedMember is the drop reason of a departed member's events other
// than the ends of other nodes' bookings.
const departedMember = "departed_member"

// departedApplies reports whether a departed member's event is applied:
// only the end of a booking, never one of its own bookings' (forgotten).
func departedApplies(origin string, ev *replica.Event) bool {
	return (ev.Kind == replica.KindPrefillComplete || ev.Kind == replica.KindFree) && ev.BookedBy != origin
}

// departLocked starts the linger of member id (followed at m) that left
// the catalog; s.mu is held. Its end drops the subscription, unless the
// endpoint has become a member's again.
func (s *Syncer) departLocked(id string, m Member) {
	if s.cfg.DepartedLinger < 0 || m.Endpoint == "" {
		return
	}
	s.addSourceLocked(m.Endpoint, m.Dial, SourceDeparted, id)
	s.log.Info("replica sync: a member left the cluster; following it a while for the ends of other nodes' bookings it still answers",
		"node_id", id, "endpoint", m.Endpoint, "linger", s.cfg.DepartedLinger)
	// Each departure has its own linger: the timer of an earlier one (the
	// member left, came back and left again) must not end this one.
	s.departGen++
	gen := s.departGen
	if s.departures == nil {
		s.departures = map[string]uint64{}
	}
	s.departures[m.Endpoint] = gen
	time.AfterFunc(s.cfg.DepartedLinger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed && s.departures[m.Endpoint] == gen {
			delete(s.departures, m.Endpoint)
			s.dropSourceLocked(m.Endpoint, SourceDeparted)
		}
	})
}

// expireDeparture removes the origin state of member id once the linger
// of its departure gen ends, unless it is a member again or departed again
// since.
func (s *Syncer) expireDeparture(st *originState, gen uint64) {
	time.AfterFunc(s.cfg.DepartedLinger, func() {
		s.omu.Lock()
		expired := s.origins[st.id] == st && st.departed.Load() && st.departGen.Load() == gen
		if expired {
			delete(s.origins, st.id)
		}
		s.omu.Unlock()
		if expired { // mu is never taken inside omu (origin.go)
			st.mu.Lock()
			st.gone = true
			st.mu.Unlock()
		}
	})
}
