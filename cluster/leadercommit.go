package cluster

import (
	"context"
	"fmt"

	"github.com/kvselect/kvselect/api"
)

// LeaderCommitIndex is the commit index of the leader as the leader
// itself knows it. A follower's own commit index cannot stand in for it:
// hashicorp/raft caps it at the end of the follower's log
// (min(leaderCommit, lastLogIndex)), so a follower that catches up in
// batches has applied "everything committed" after each batch.
//
// On the leader it is its own commit index once an entry of its term has
// committed (termBarrier: a fresh leader's commit index may not yet cover
// entries of earlier terms). On a follower it is what GET /cluster/status
// of the leader it knows reports, taken only from a node that answers as
// that leader; it fails with ErrNoLeader while no leader, or its HTTP
// address, is known, and with the call's error when the leader does not
// answer.
func (n *Node) LeaderCommitIndex(ctx context.Context) (uint64, error) {
	leader := n.Leader()
	switch {
	case leader.ID == "":
		return 0, fmt.Errorf("%w: no leader is known", ErrNoLeader)
	case leader.ID == n.cfg.NodeID:
		term := n.raft.CurrentTerm()
		if err := n.termBarrier(term); err != nil {
			return 0, err
		}
		commit := n.raft.CommitIndex()
		if !n.IsLeader() || n.raft.CurrentTerm() != term {
			return 0, n.notLeaderError()
		}
		return commit, nil
	case leader.DialHTTP == "":
		return 0, fmt.Errorf("%w: the HTTP address of leader %s is not known yet", ErrNoLeader, leader.ID)
	}
	st, err := n.client.status(ctx, leader.DialHTTP)
	if err != nil {
		return 0, fmt.Errorf("asking leader %s for its commit index: %w", leader.ID, err)
	}
	if st.NodeID != leader.ID || st.State != api.StateLeader {
		return 0, fmt.Errorf("%w: %s at %s answered as %s %q, not as leader %s", ErrNoLeader, st.NodeID, leader.DialHTTP,
			st.State, st.NodeID, leader.ID)
	}
	return st.CommitIndex, nil
}
