package cluster

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Status is GET /cluster/status.
type Status struct {
	NodeID        string   `json:"node_id"`
	State         string   `json:"state"`
	Term          uint64   `json:"term"`
	Leader        Leader   `json:"leader"`
	CommitIndex   uint64   `json:"commit_index"`
	AppliedIndex  uint64   `json:"applied_index"`
	LastContactMs int64    `json:"last_contact_ms"`
	Members       []Member `json:"members"`
}

// Leader identifies the current leader; empty fields when none is known.
type Leader struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Suffrage string `json:"suffrage"`
	// Reachable is this node's view: the leader tracks every follower's
	// heartbeats; a follower can only judge the leader (last contact
	// within two heartbeat timeouts) and reports the others as reachable.
	Reachable bool `json:"reachable"`
}

// Status reports this node's view of the cluster.
func (n *Node) Status() Status {
	leader := n.Leader() // one read: id and address of the same leader
	leaderID := raft.ServerID(leader.ID)
	st := Status{
		NodeID:       n.cfg.NodeID,
		State:        stateName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		Leader:       Leader{ID: leader.ID, HTTPAddr: leader.HTTPAddr},
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		Members:      []Member{},
	}
	if string(leaderID) != n.cfg.NodeID {
		st.LastContactMs = lastContactMs(n.raft.Stats()["last_contact"])
	}
	catalog := n.Catalog()
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		n.mu.Lock()
		for _, s := range f.Configuration().Servers {
			m := Member{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
				Reachable: !n.unreachable[s.ID]}
			if meta, ok := catalog.Node(string(s.ID)); ok {
				m.HTTPAddr = meta.HTTPAddr
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
	slices.SortFunc(st.Members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
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
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}
