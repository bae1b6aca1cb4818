package cluster

import (
	"cmp"
	"context"
	"fmt"
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
	ID        string `json:"id"`
	RaftAddr  string `json:"raft_addr"`
	HTTPAddr  string `json:"http_addr"`
	Suffrage  string `json:"suffrage"`
	Reachable bool   `json:"reachable"`
}

// Status reports this node's view of the cluster.
func (n *Node) Status() Status {
	_, leaderID := n.raft.LeaderWithID()
	st := Status{
		NodeID:       n.cfg.NodeID,
		State:        stateName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		Leader:       Leader{ID: string(leaderID)},
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		Members:      []Member{},
	}
	if string(leaderID) == n.cfg.NodeID {
		st.Leader.HTTPAddr = n.cfg.HTTPAdvertise
	} else {
		st.LastContactMs = lastContactMs(n.raft.Stats()["last_contact"])
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		n.mu.Lock()
		for _, s := range f.Configuration().Servers {
			m := Member{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
				Reachable: !n.unreachable[s.ID]}
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

// Join adds a voter (leader only). Joining with an id and address already
// present is a no-op, so retries are safe; an id present at another
// address is replaced.
func (n *Node) Join(ctx context.Context, id, raftAddr string) error {
	if id == "" || raftAddr == "" {
		return fmt.Errorf("%w: id and raft_addr are required", ErrMembership)
	}
	if err := CheckAdvertise(raftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr: %v", ErrMembership, err)
	}
	if err := n.leaderOnly(ctx); err != nil {
		return err
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return n.readError(err)
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case s.ID == raft.ServerID(id) && s.Address == raft.ServerAddress(raftAddr):
			return nil
		case s.ID == raft.ServerID(id) || s.Address == raft.ServerAddress(raftAddr):
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return fmt.Errorf("%w: remove stale member %s: %v", ErrUnknownOutcome, s.ID, err)
			}
		}
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("%w: add voter %s: %v", ErrUnknownOutcome, id, err)
	}
	n.log.Info("member joined", "id", id, "raft_addr", raftAddr)
	return nil
}

// Remove removes a member (leader only). Removing an absent id is a no-op.
func (n *Node) Remove(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is required", ErrMembership)
	}
	if err := n.leaderOnly(ctx); err != nil {
		return err
	}
	if id == n.cfg.NodeID && n.otherVoters() == 0 {
		return fmt.Errorf("%w: cannot remove the last voter", ErrMembership)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("%w: remove %s: %v", ErrUnknownOutcome, id, err)
	}
	n.log.Info("member removed", "id", id)
	return nil
}

// StepDown hands leadership to another voter (leader only).
func (n *Node) StepDown(ctx context.Context) error {
	if err := n.leaderOnly(ctx); err != nil {
		return err
	}
	if n.otherVoters() == 0 {
		return fmt.Errorf("%w: no other voter to hand leadership to", ErrMembership)
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("%w: leadership transfer: %v", ErrMembership, err)
	}
	return nil
}
