package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// Join admits a member in two steps (leader only). A new member enters as
// a non-voter; the joining node asks again with CaughtUp once it has
// received the configuration that lists it, and is then promoted to voter.
// A member that never shows up therefore never counts toward the quorum:
// adding an unreachable voter to a one-node cluster would otherwise commit
// at once (a configuration change commits under the old configuration)
// and leave the cluster without a leader for good.
//
// The Raft address is probed first, so a typo fails at once. Repeating a
// join is a no-op apart from refreshing the metadata; an id present at
// another address, or another id at this address, is replaced.
func (n *Node) Join(ctx context.Context, req api.JoinRequest) error {
	if req.ID == "" || req.RaftAddr == "" {
		return fmt.Errorf("%w: id and raft_addr are required", ErrMembership)
	}
	if err := CheckAdvertise(req.RaftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr: %v", ErrMembership, err)
	}
	meta := fsm.NodeMeta{ID: req.ID, HTTPAddr: req.HTTPAddr, ReplicaSync: req.ReplicaSync}
	if req.HTTPAddr != "" {
		if err := validateMeta(&meta); err != nil {
			return err
		}
	}
	servers, err := n.leaderServers(ctx)
	if err != nil {
		return err
	}
	var current *raft.Server
	for _, s := range servers {
		switch {
		case s.ID == raft.ServerID(req.ID) && s.Address == raft.ServerAddress(req.RaftAddr):
			current = &s
		case s.ID == raft.ServerID(req.ID) || s.Address == raft.ServerAddress(req.RaftAddr):
			if s.ID == raft.ServerID(n.cfg.NodeID) {
				return fmt.Errorf("%w: %s would replace the leader itself", ErrMembership, req.ID)
			}
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return n.membershipError(fmt.Sprintf("remove stale member %s", s.ID), err)
			}
		}
	}
	switch {
	case current == nil:
		if err := n.probe(ctx, req.ID, req.RaftAddr); err != nil {
			return err
		}
		if err := n.raft.AddNonvoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return n.membershipError("add non-voter "+req.ID, err)
		}
		n.log.Info("member admitted as non-voter; it becomes a voter once it has caught up", "id", req.ID, "raft_addr", req.RaftAddr)
	case current.Suffrage != raft.Voter && req.CaughtUp:
		if err := n.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return n.membershipError("promote "+req.ID, err)
		}
		n.log.Info("member promoted to voter", "id", req.ID, "raft_addr", req.RaftAddr)
	}
	if req.HTTPAddr == "" {
		return nil
	}
	return n.putMetadata(ctx, meta)
}

// probe checks that something listens at a Raft address and, while this
// node holds a token, that it is a node that passes the Raft handshake at
// that address (raftauth.go): a joiner with another token, or one that
// advertises another address, is refused here rather than admitted and
// never reached.
func (n *Node) probe(ctx context.Context, id, addr string) error {
	dial := addr
	if d, ok := n.cfg.PeerDial[id]; ok && d.Raft != "" {
		dial = d.Raft
	}
	const timeout = 2 * time.Second
	dialer := net.Dialer{Timeout: timeout}
	conn, err := dialer.DialContext(ctx, "tcp", dial)
	if err != nil {
		return fmt.Errorf("%w: raft_addr %s is not reachable from the leader: %v", ErrMembership, dial, err)
	}
	if conn, err = n.stream.authenticateAs(conn, dial, addr, timeout); err != nil {
		return fmt.Errorf("%w: raft_addr %s: %v", ErrMembership, addr, err)
	}
	return conn.Close()
}

// suffrage returns how this node appears in its latest configuration
// (which includes entries not yet committed): false when it is absent.
func (n *Node) suffrage() (raft.ServerSuffrage, bool) {
	servers, err := n.servers()
	if err != nil {
		return 0, false
	}
	for _, s := range servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) {
			return s.Suffrage, true
		}
	}
	return 0, false
}

// SetMetadata publishes a member's metadata (leader only). A node that is
// not in the configuration is refused, so a removed node cannot bring its
// metadata back.
func (n *Node) SetMetadata(ctx context.Context, meta fsm.NodeMeta) error {
	if err := validateMeta(&meta); err != nil {
		return err
	}
	servers, err := n.leaderServers(ctx)
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

// putMetadata writes meta unless the catalog already holds it. Writers
// take turns (metaTurn, given up when ctx ends): an operator's join and
// the joining node's own request for promotion carry the same metadata
// and often arrive together, and the second must find the first's write
// rather than repeat it.
func (n *Node) putMetadata(ctx context.Context, meta fsm.NodeMeta) error {
	select {
	case n.metaTurn <- struct{}{}:
		defer func() { <-n.metaTurn }()
	case <-ctx.Done():
		// The write ahead of this one has not committed either: nothing
		// was sent, and the cluster is not taking writes.
		return fmt.Errorf("%w: another metadata write is still pending: %v", ErrNoLeader, ctx.Err())
	}
	cur, ok := n.Catalog().Node(meta.ID)
	if ok && metaCurrent(cur, meta) {
		return nil
	}
	if meta.Incarnation != 0 && cur.Incarnation != meta.Incarnation {
		// A node started. The cluster id goes before any incarnation
		// (planClusterID relies on it); writing it again gives it back
		// to a node that restarted on a snapshot which lost it
		// (identity.go), before the node sees its new epoch.
		if err := n.ensureClusterID(ctx, meta.ID != n.cfg.NodeID); err != nil {
			return err
		}
	}
	_, err := n.Apply(ctx, fsm.SetNode{Node: meta})
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
	if id == n.cfg.NodeID {
		if n.otherVoters() == 0 {
			return fmt.Errorf("%w: cannot remove the last voter", ErrMembership)
		}
		// A leader that removes itself shuts its raft down on commit and
		// could not clean up its metadata. Hand over first; the caller (a
		// forwarding follower, or kvselectctl) retries on the new leader.
		if err := n.transferLeadership(); err != nil {
			return fmt.Errorf("%w: hand over before removing the leader: %v", ErrUnknownOutcome, err)
		}
		return fmt.Errorf("%w: handed leadership over to remove %s", ErrNotLeader, id)
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
	if _, ok := n.Catalog().Node(id); ok {
		if _, err := n.Apply(ctx, fsm.DeleteNode{ID: id}); err != nil && !errors.Is(err, fsm.ErrNodeNotFound) {
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
	if err := n.transferLeadership(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return n.notLeaderError()
		}
		// A transfer that timed out may still complete.
		return fmt.Errorf("%w: leadership transfer: %v", ErrUnknownOutcome, err)
	}
	return nil
}

// transferLeadership asks raft to hand leadership to another voter. The
// transfer is planned, so the old leader's "peer has newer term" lines
// that end it are logged at INFO, not ERROR (raftlogs.go), until this node
// leads again; a transfer that failed with the node still leading stops
// counting as planned at once.
func (n *Node) transferLeadership() error {
	n.raftLog.planned.Store(true)
	err := n.raft.LeadershipTransfer().Error()
	if err != nil && n.raft.State() == raft.Leader {
		n.raftLog.planned.Store(false)
	}
	return err
}

// leaderServers is how Join and SetMetadata start: this node must
// lead (leaderOnly), and the write works from its latest configuration.
func (n *Node) leaderServers(ctx context.Context) ([]raft.Server, error) {
	if err := n.leaderOnly(ctx); err != nil {
		return nil, err
	}
	return n.servers()
}

// validateMeta checks a member's metadata as a membership write takes it.
func validateMeta(meta *fsm.NodeMeta) error {
	if err := fsm.ValidateNode(meta); err != nil {
		return fmt.Errorf("%w: %v", ErrMembership, err)
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
