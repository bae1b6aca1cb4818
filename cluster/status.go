package cluster

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/api"
)

// Status reports this node's view of the cluster (GET /cluster/status).
// Reachable is this node's view: the leader tracks every follower's
// heartbeats; a follower can only judge the leader (last contact within
// two heartbeat timeouts) and reports the others as reachable.
func (n *Node) Status() api.ClusterStatus {
	leader := n.Leader() // one read: id and address of the same leader
	leaderID := raft.ServerID(leader.ID)
	catalog := n.Catalog()
	st := api.ClusterStatus{
		NodeID:       n.cfg.NodeID,
		ClusterID:    catalog.ClusterID().String(),
		State:        stateName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		Leader:       api.LeaderRef{ID: leader.ID, HTTPAddr: leader.HTTPAddr},
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		CatalogIndex: n.CatalogIndex(),
		Members:      []api.Member{},
	}
	if string(leaderID) != n.cfg.NodeID {
		st.LastContactMs = lastContactMs(n.raft.Stats()["last_contact"])
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		st.ConfigIndex = n.configurationIndex() // raft's f.Index() is always 0 here
		n.mu.Lock()
		for _, s := range f.Configuration().Servers {
			m := api.Member{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
				Reachable: !n.unreachable[s.ID]}
			if meta, ok := catalog.Node(string(s.ID)); ok {
				m.HTTPAddr, m.Epoch = meta.HTTPAddr, meta.Epoch
			}
			if s.ID == leaderID && string(leaderID) != n.cfg.NodeID {
				m.Reachable = st.LastContactMs >= 0 && st.LastContactMs < 2*n.cfg.HeartbeatTimeout.Milliseconds()
			}
			if string(s.ID) == n.cfg.NodeID {
				m.HTTPAddr, m.Reachable = n.cfg.HTTPAdvertise, true
			}
			st.Members = append(st.Members, m)
		}
		n.mu.Unlock()
	}
	slices.SortFunc(st.Members, func(a, b api.Member) int { return cmp.Compare(a.ID, b.ID) })
	return st
}

// lastContactMs parses raft's "last_contact" stat ("never", "0", or a
// duration) into milliseconds; -1 means never.
func lastContactMs(s string) int64 {
	switch s {
	case "", "0":
		return 0
	case "never":
		return -1
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d.Milliseconds()
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v
	}
	return -1
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return api.StateLeader
	case raft.Follower:
		return api.StateFollower
	case raft.Candidate:
		return api.StateCandidate
	}
	return api.StateShutdown
}
