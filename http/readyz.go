package http

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kvselect/kvselect/api"
)

// readyz answers an orchestrator's readiness probe, in one of two senses
// (SPEC §3.2):
//
//   - GET /readyz: 200 when this node is a caught-up member of the
//     cluster, else 503 not_ready with the reason (api.Readyz): leader-aware
//     write readiness, for operators and scripts;
//   - GET /readyz?for=selection: 200 once the node has, since it started,
//     caught up with a leader's commit index and finished its index
//     recovery, and from then on without a leader or a quorum (selection
//     needs neither); the pod readiness probe.
//
// Both are judged from /cluster/status's view, the same numbers an
// operator sees there. Neither is SPEC §3.2's /ready, which asks whether
// this node has a worker to select and keeps its meaning.
//
// The 503 is written here rather than returned as an error: it is the
// probe's ordinary answer while a node starts or catches up, with a body
// richer than {error, code}, and a kubelet asking every few seconds must
// not make a log line each time. A for= this node does not know is a
// request error (400), which a probe never sends.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var body api.Readyz
	switch f := q.Get(api.QueryFor); {
	case !q.Has(api.QueryFor):
		body = s.writeReadiness(r.Context())
	case len(q[api.QueryFor]) > 1:
		return badRequest(api.QueryFor, "given %d times; give it once", len(q[api.QueryFor]))
	case f == api.ReadyzForSelection:
		body = s.selectionReadiness(r.Context())
	default:
		return badRequest(api.QueryFor, "must be %q (selection readiness) or left out (write readiness), got %q",
			api.ReadyzForSelection, f)
	}
	status := http.StatusOK
	if !body.Ready {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, body)
}

// writeReadiness judges plain GET /readyz.
func (s *Service) writeReadiness(ctx context.Context) api.Readyz {
	st := s.cfg.Cluster.Status()
	body := readiness(st, st.CommitIndex)
	if body.Reason == api.ReadyzApplying {
		body = s.awaitApplied(ctx, st.CommitIndex)
	}
	if s.removed() {
		// A removed follower may still list itself: the entry that
		// removed it may never reach it. It is shutting down either way.
		body.Member = false
		notReady(&body, api.ReadyzNotMember, "the node was removed from the cluster and is shutting down")
	}
	body.CaughtUp, body.Recovering = s.caughtUp(st), s.recovering()
	return body
}

// selectionReadiness judges GET /readyz?for=selection. Only what holds
// now can take it away once the node caught up: its Raft shut down, its
// removal, and the index recovery (which runs once, from the start).
// Losing the leader or the quorum cannot: a node cut off from the others
// keeps selecting with its last catalog (SPEC §3.2).
//
// Until the node has caught up once, the reason is the status's
// (CatchUpReason), and a node that is only applying what it knows to be
// committed gets up to readyzApplyWait to finish, as plain /readyz does.
func (s *Service) selectionReadiness(ctx context.Context) api.Readyz {
	st := s.cfg.Cluster.Status()
	caughtUp := s.caughtUp(st)
	if !caughtUp {
		if reason, _ := CatchUpReason(st); reason == "" || reason == api.ReadyzApplying {
			caughtUp, st = s.awaitCaughtUp(ctx)
		}
	}
	body := statusBody(st)
	body.CaughtUp, body.Recovering = caughtUp, s.recovering()
	switch {
	case st.State == api.StateShutdown:
		notReady(&body, api.ReadyzShutDown, "the node's Raft has shut down")
	case s.removed():
		body.Member = false
		notReady(&body, api.ReadyzNotMember, "the node was removed from the cluster and is shutting down")
	case !caughtUp:
		reason, why := CatchUpReason(st)
		if reason == "" { // caught up a moment after the last look
			reason, why = api.ReadyzApplying, "catching up with the leader's commit index"
		}
		notReady(&body, reason, why+"; the node has not caught up with a leader since it started")
	case body.Recovering:
		notReady(&body, api.ReadyzRecovering, "the node is still recovering its KV index from a peer")
	default:
		body.Ready = true
	}
	return body
}

// caughtUp reports whether the node has caught up once since it started:
// the node's latch, or without one (a handler test's node) whether st
// shows it caught up now.
func (s *Service) caughtUp(st api.ClusterStatus) bool {
	if s.cfg.CatchUp != nil {
		return s.cfg.CatchUp.CaughtUp()
	}
	reason, _ := CatchUpReason(st)
	return reason == ""
}

// awaitCaughtUp waits up to readyzApplyWait for the node to have caught
// up, and returns whether it has with the status it last saw.
func (s *Service) awaitCaughtUp(ctx context.Context) (bool, api.ClusterStatus) {
	ctx, cancel := context.WithTimeout(ctx, readyzApplyWait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st := s.cfg.Cluster.Status()
		if s.caughtUp(st) {
			return true, st
		}
		select {
		case <-ctx.Done():
			return false, st
		case <-tick.C:
		}
	}
}

// readyzApplyWait bounds how long GET /readyz waits for this node to apply
// the commit index it knew when the probe came: shorter than a probe's
// default timeout (1 s), far longer than applying a committed entry takes.
const readyzApplyWait = 500 * time.Millisecond

// awaitApplied waits up to readyzApplyWait for this node to have applied
// up to commit, and judges it again. Every write commits an entry a moment
// before it is applied, so a node that compared the two once would fail a
// probe now and then under writes; one that is catching up is still behind
// when the wait ends.
func (s *Service) awaitApplied(ctx context.Context, commit uint64) api.Readyz {
	ctx, cancel := context.WithTimeout(ctx, readyzApplyWait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return readiness(s.cfg.Cluster.Status(), commit)
		case <-tick.C:
		}
		if body := readiness(s.cfg.Cluster.Status(), commit); body.Reason != api.ReadyzApplying {
			return body
		}
	}
}

// readiness judges a node's cluster status for plain GET /readyz. A node
// is ready when:
//
//   - it is a voter of the Raft configuration (a non-voter is a joiner
//     still being caught up);
//   - a leader is known, or it leads;
//   - it has learned a commit index from the leader: hashicorp/raft starts
//     every node at commit index 0, and a follower learns the leader's
//     only with an append (heartbeats carry none), so a restarted node
//     with nothing applied is not mistaken for a caught-up one;
//   - it has applied every entry up to commit, the commit index it knew
//     when the probe came (awaitApplied waits a moment for that).
//
// A follower's commit index is the leader's, capped at the end of its own
// log (Raft's rule), so one that is many entries behind catches up in
// batches; a probe that falls between two batches may see it ready a
// moment early. Readiness is for orchestration (rollouts, endpoints, a
// disruption budget), where that cannot lose a write.
func readiness(st api.ClusterStatus, commit uint64) api.Readyz {
	r := statusBody(st)
	var why string
	switch {
	case st.State == api.StateShutdown:
		r.Reason, why = api.ReadyzShutDown, "the node's Raft has shut down"
	case !r.Member:
		r.Reason, why = api.ReadyzNotMember, "the node is not in the Raft configuration"
	case r.Suffrage != api.SuffrageVoter:
		r.Reason, why = api.ReadyzNotVoter, fmt.Sprintf("the node is a %s, not yet a voter", r.Suffrage)
	default:
		st.CommitIndex = commit
		if r.Reason, why = CatchUpReason(st); r.Reason == "" {
			r.Ready = true
			return r
		}
	}
	notReady(&r, r.Reason, why)
	return r
}

// CatchUpReason judges whether st shows a node caught up with a leader:
// a leader is known (or it leads), it has learned a commit index from it
// (see readiness), and it has applied every entry up to that index. It
// returns "" when so, else the api.Readyz reason and why. The node's
// catch-up latch (server/readiness.go) and both senses of /readyz judge
// with it.
//
// The same caveat as readiness's holds: a follower far behind catches up
// in batches, and may look caught up between two. The latch therefore
// does not stop here: it also waits until the node has applied the
// commit index the leader reports for itself (server/readiness.go), which
// no batch boundary can fake.
func CatchUpReason(st api.ClusterStatus) (reason, why string) {
	switch {
	case st.Leader.ID == "":
		return api.ReadyzNoLeader, "no leader is known"
	case st.CommitIndex == 0:
		return api.ReadyzNoCommitIndex, "no commit index learned from the leader yet"
	case st.AppliedIndex < st.CommitIndex:
		return api.ReadyzApplying, fmt.Sprintf("applied index %d is behind commit index %d", st.AppliedIndex, st.CommitIndex)
	}
	return "", ""
}

// statusBody is the part of /readyz's answer that reports the status.
func statusBody(st api.ClusterStatus) api.Readyz {
	r := api.Readyz{NodeID: st.NodeID, State: st.State, Leader: st.Leader.ID,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, CatalogIndex: st.CatalogIndex}
	for _, m := range st.Members {
		if m.ID == st.NodeID {
			r.Member, r.Suffrage = true, m.Suffrage
		}
	}
	return r
}

// notReady makes r a 503 for reason.
func notReady(r *api.Readyz, reason, why string) {
	r.Ready, r.Reason = false, reason
	r.Error, r.Code = "not ready: "+why, api.CodeNotReady
}
