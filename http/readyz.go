package http

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kvselect/kvselect/api"
)

// readyz answers an orchestrator's readiness probe: 200 when this node is
// a caught-up member of the cluster, else 503 not_ready with the reason
// (api.Readyz). It is judged from /cluster/status's view alone, the
// same numbers an operator sees there. Not SPEC §3.2's /ready, which asks
// whether this node can select and keeps its meaning.
//
// The 503 is written here rather than returned as an error: it is the
// probe's ordinary answer while a node starts or catches up, with a body
// richer than {error, code}, and a kubelet asking every few seconds must
// not make a log line each time.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) error {
	st := s.cfg.Cluster.Status()
	body := readiness(st, st.CommitIndex)
	if body.Reason == api.ReadyzApplying {
		body = s.awaitApplied(r.Context(), st.CommitIndex)
	}
	if s.removed() {
		// A removed follower may still list itself: the entry that
		// removed it may never reach it. It is shutting down either way.
		body.Ready, body.Member, body.Reason = false, false, api.ReadyzNotMember
		body.Error, body.Code = "not ready: the node was removed from the cluster and is shutting down", api.CodeNotReady
	}
	status := http.StatusOK
	if !body.Ready {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, body)
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

// readiness judges a node's cluster status. A node is ready when:
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
	r := api.Readyz{NodeID: st.NodeID, State: st.State, Leader: st.Leader.ID,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, CatalogIndex: st.CatalogIndex}
	for _, m := range st.Members {
		if m.ID == st.NodeID {
			r.Member, r.Suffrage = true, m.Suffrage
		}
	}
	var why string
	switch {
	case st.State == api.StateShutdown:
		r.Reason, why = api.ReadyzShutDown, "the node's Raft has shut down"
	case !r.Member:
		r.Reason, why = api.ReadyzNotMember, "the node is not in the Raft configuration"
	case r.Suffrage != api.SuffrageVoter:
		r.Reason, why = api.ReadyzNotVoter, fmt.Sprintf("the node is a %s, not yet a voter", r.Suffrage)
	case r.Leader == "":
		r.Reason, why = api.ReadyzNoLeader, "no leader is known"
	case st.CommitIndex == 0:
		r.Reason, why = api.ReadyzNoCommitIndex, "no commit index learned from the leader yet"
	case st.AppliedIndex < commit:
		r.Reason, why = api.ReadyzApplying, fmt.Sprintf("applied index %d is behind commit index %d", st.AppliedIndex, commit)
	default:
		r.Ready = true
		return r
	}
	r.Error, r.Code = "not ready: "+why, api.CodeNotReady
	return r
}
