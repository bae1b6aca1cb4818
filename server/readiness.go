package server

import (
	"context"
	"time"

	"github.com/kvselect/kvselect/api"
	httpd "github.com/kvselect/kvselect/http"
)

// The node's catch-up latch, which GET /readyz?for=selection reads (SPEC
// §3.2): selection needs no quorum, so once a node has had a catalog as
// current as a leader's it keeps selecting with it, whatever becomes of
// the leader. What a node may not do is select before that: a node that
// restarted alone has applied nothing, or only its own log, and cannot
// know what it lacks. The latch is per process: a restart starts it over.
//
// "As current as a leader's" is judged against the leader's own commit
// index, which watchCatchUp asks the leader for (cluster.Node.
// LeaderCommitIndex), never against the node's own: a follower's commit
// index is the leader's capped at the end of its log, so a follower that
// catches up in batches would look caught up after each batch and latch
// with the rest still to come.

// catchUpPoll backs up the change notifications watchCatchUp waits on:
// entries that change no catalog (a barrier, a configuration) advance the
// applied index without one. It is also how often it asks the leader for
// its commit index until the latch is set.
const catchUpPoll = 100 * time.Millisecond

// catchUpAskTimeout bounds one question to the leader.
const catchUpAskTimeout = 2 * time.Second

// CaughtUp reports whether this node has, since it started, once applied
// every entry up to a commit index the leader reported for itself (see
// above), and shows no reason not to be caught up now
// (httpd.CatchUpReason). Once true it stays true. Each call that finds
// it false judges the status again against the leader's commit index
// learned last, so a probe never waits for watchCatchUp's next look; it
// asks no one itself.
func (s *Server) CaughtUp() bool {
	if s.caughtUp.Load() {
		return true
	}
	st := s.status()
	if reason, _ := httpd.CatchUpReason(st); reason != "" {
		return false
	}
	leaderCommit := s.leaderCommit.Load()
	if leaderCommit == 0 || st.AppliedIndex < leaderCommit {
		return false
	}
	if s.caughtUp.CompareAndSwap(false, true) {
		s.log.Info("caught up with the leader's commit index; selection no longer needs a leader",
			"leader", st.Leader.ID, "applied_index", st.AppliedIndex, "leader_commit_index", leaderCommit)
	}
	return true
}

// CaughtUpLatched reports whether the latch is set, without judging the
// status anew as CaughtUp does: what watchCatchUp has done on its own.
func (s *Server) CaughtUpLatched() bool { return s.caughtUp.Load() }

// status is the node's cluster status (a test's fake when statusOf is set).
func (s *Server) status() api.ClusterStatus {
	if s.statusOf != nil {
		return s.statusOf()
	}
	return s.Node.Status()
}

// learnLeaderCommit asks the leader for its commit index and keeps the
// highest it has heard; a failure (no leader, no answer) leaves the last.
func (s *Server) learnLeaderCommit(ctx context.Context) {
	ask := s.askLeaderCommit
	if ask == nil {
		ask = s.Node.LeaderCommitIndex
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpAskTimeout)
	defer cancel()
	commit, err := ask(ctx)
	if err != nil {
		s.log.Debug("could not learn the leader's commit index; asking again", "err", err)
		return
	}
	for {
		was := s.leaderCommit.Load()
		if commit <= was || s.leaderCommit.CompareAndSwap(was, commit) {
			return
		}
	}
}

// watchCatchUp sets the latch as soon as the node catches up, whether or
// not a probe asks meanwhile: a node that caught up and lost its quorum
// before the first probe has caught up all the same. It asks the leader
// for its commit index at the start, at every leader change and every
// catchUpPoll, and judges again at every catalog change besides. It returns once the latch is set or the
// node stops.
func (s *Server) watchCatchUp() {
	defer s.wg.Done()
	ctx, cancel := s.untilStop() // ends the question in flight when the node stops
	defer cancel()
	tick := time.NewTicker(catchUpPoll)
	defer tick.Stop()
	ask := true
	for {
		if ask {
			s.learnLeaderCommit(ctx)
			ask = false
		}
		leaderCh, catalogCh := s.Node.Changes() // before looking: a change meanwhile wakes the wait
		if s.CaughtUp() {
			return
		}
		select {
		case <-s.stop:
			return
		case <-leaderCh: // a new leader: ask it at once
			ask = true
		case <-catalogCh:
		case <-tick.C:
			ask = true
		}
	}
}
