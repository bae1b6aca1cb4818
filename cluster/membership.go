package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/fsm"
)

// JoinRequest is the body of POST /cluster/join: the new member's id and
// Raft address, and the metadata to publish for it.
type JoinRequest struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	HTTPAddr    string `json:"http_addr,omitempty"`
	ReplicaSync string `json:"replica_sync,omitempty"`
}

// Join adds a voter and publishes its metadata (leader only). Joining with
// an id and address already present only refreshes the metadata, so
// retries are safe; an id present at another address, or another id at
// this address, is replaced.
func (n *Node) Join(ctx context.Context, req JoinRequest) error {
	if req.ID == "" || req.RaftAddr == "" {
		return fmt.Errorf("%w: id and raft_addr are required", ErrMembership)
	}
	if err := CheckAdvertise(req.RaftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr: %v", ErrMembership, err)
	}
	meta := fsm.NodeMeta{ID: req.ID, HTTPAddr: req.HTTPAddr, ReplicaSync: req.ReplicaSync}
	if req.HTTPAddr != "" {
		if err := fsm.ValidateNode(&meta); err != nil {
			return fmt.Errorf("%w: %v", ErrMembership, err)
		}
	}
	if err := n.leaderOnly(ctx); err != nil {
		return err
	}
	servers, err := n.servers()
	if err != nil {
		return err
	}
	present := false
	for _, s := range servers {
		switch {
		case s.ID == raft.ServerID(req.ID) && s.Address == raft.ServerAddress(req.RaftAddr):
			present = true
		case s.ID == raft.ServerID(req.ID) || s.Address == raft.ServerAddress(req.RaftAddr):
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return n.membershipError(fmt.Sprintf("remove stale member %s", s.ID), err)
			}
		}
	}
	if !present {
		if err := n.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return n.membershipError("add voter "+req.ID, err)
		}
		n.log.Info("member joined", "id", req.ID, "raft_addr", req.RaftAddr)
	}
	if req.HTTPAddr == "" {
		return nil
	}
	return n.putMetadata(ctx, meta)
}

// SetMetadata publishes a member's metadata (leader only). A node that is
// not in the configuration is refused, so a removed node cannot bring its
// metadata back.
func (n *Node) SetMetadata(ctx context.Context, meta fsm.NodeMeta) error {
	if err := fsm.ValidateNode(&meta); err != nil {
		return fmt.Errorf("%w: %v", ErrMembership, err)
	}
	if err := n.leaderOnly(ctx); err != nil {
		return err
	}
	servers, err := n.servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID == raft.ServerID(meta.ID) {
			return n.putMetadata(ctx, meta)
		}
	}
	return fmt.Errorf("%w: %s is not a member of the cluster", ErrMembership, meta.ID)
}

// putMetadata writes meta unless the catalog already holds it.
func (n *Node) putMetadata(ctx context.Context, meta fsm.NodeMeta) error {
	if cur, ok := n.Catalog().Node(meta.ID); ok && cur.HTTPAddr == meta.HTTPAddr && cur.ReplicaSync == meta.ReplicaSync {
		return nil
	}
	_, err := n.Apply(ctx, fsm.CmdSetNode, fsm.SetNode{Node: meta})
	return err
}

// Remove removes a member and its metadata (leader only). Removing an
// absent id is a no-op, so retries are safe.
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
	servers, err := n.servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID != raft.ServerID(id) {
			continue
		}
		if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return n.membershipError("remove "+id, err)
		}
		n.log.Info("member removed", "id", id)
	}
	if _, ok := n.Catalog().Node(id); ok && id != n.cfg.NodeID {
		if _, err := n.Apply(ctx, fsm.CmdDeleteNode, fsm.DeleteNode{ID: id}); err != nil && !errors.Is(err, fsm.ErrNodeNotFound) {
			return err
		}
	}
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

func (n *Node) servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.readError(err)
	}
	return f.Configuration().Servers, nil
}

// membershipError classifies a failed configuration change: refused before
// anything was appended (not the leader, another change in flight) or of
// unknown outcome.
func (n *Node) membershipError(what string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeaderError()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %s: raft busy", ErrNoLeader, what)
	case errors.Is(err, raft.ErrCantBootstrap), errors.Is(err, raft.ErrUnsupportedProtocol):
		return fmt.Errorf("%w: %s: %v", ErrMembership, what, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnknownOutcome, what, err)
}
