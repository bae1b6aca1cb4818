package server

import (
	"time"

	httpd "github.com/kvselect/kvselect/http"
)

// The node's catch-up latch, which GET /readyz?for=selection reads (SPEC
// §3.2): selection needs no quorum, so once a node has had a catalog as
// current as a leader's it keeps selecting with it, whatever becomes of
// the leader. What a node may not do is select before that: a node that
// restarted alone has applied nothing, or only its own log, and cannot
// know what it lacks. The latch is per process: a restart starts it over.

// catchUpPoll backs up the change notifications watchCatchUp waits on:
// entries that change no catalog (a barrier, a configuration) advance the
// applied index without one.
const catchUpPoll = 100 * time.Millisecond

// CaughtUp reports whether this node has, since it started, once applied
// every entry up to a commit index it learned from a leader
// (httpd.CatchUpReason). Once true it stays true. Each call that finds
// it false judges the status again, so a probe never waits for
// watchCatchUp's next look.
func (s *Server) CaughtUp() bool {
	if s.caughtUp.Load() {
		return true
	}
	st := s.Node.Status()
	if reason, _ := httpd.CatchUpReason(st); reason != "" {
		return false
	}
	if s.caughtUp.CompareAndSwap(false, true) {
		s.log.Info("caught up with the leader's commit index; selection no longer needs a leader",
			"leader", st.Leader.ID, "applied_index", st.AppliedIndex, "commit_index", st.CommitIndex)
	}
	return true
}

// watchCatchUp sets the latch as soon as the node catches up, whether or
// not a probe asks meanwhile: a node that caught up and lost its quorum
// before the first probe has caught up all the same. It returns once the
// latch is set or the node stops.
func (s *Server) watchCatchUp() {
	defer s.wg.Done()
	tick := time.NewTicker(catchUpPoll)
	defer tick.Stop()
	for {
		leaderCh, catalogCh := s.Node.Changes() // before looking: a change meanwhile wakes the wait
		if s.CaughtUp() {
			return
		}
		select {
		case <-s.stop:
			return
		case <-leaderCh:
		case <-catalogCh:
		case <-tick.C:
		}
	}
}
