package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/api"
)

// removalPoll is how often watchRemoval reads the configuration: raft
// tells a follower of a configuration change by no channel.
const removalPoll = 200 * time.Millisecond

// removalAskTimeout bounds asking one member whether a removal committed.
const removalAskTimeout = 2 * time.Second

// orphanHeartbeats is how many heartbeat timeouts a node that its own
// configuration lists may go without a leader before it asks the members
// whether it was removed without hearing of it.
const orphanHeartbeats = 5

// Removed returns a channel closed once this node has been removed from
// the cluster: the committed Raft configuration no longer lists it,
// although it did while this process ran. A removed node's catalog and
// member list are frozen and it can never take a write again, so its
// owner shuts it down, as an etcd member removed from its cluster does
// (kvselect's main exits 0). A node that is not listed at start, because
// it is joining or waiting to be added again, is not removed.
func (n *Node) Removed() <-chan struct{} { return n.removed }

// watchRemoval closes n.removed once this node, having been a member,
// finds itself out of the committed configuration.
//
// A follower learns the entry that removes it (the leader replicates up
// to it before it stops replicating to the node), but seldom that the
// entry committed: the commit index comes with the next append, and
// there is none. An uncommitted removal may still be undone by a new
// leader, and a node that left then would take a vote from the quorum.
// So the removal counts once a member it was listed with reports, with a
// leader known, a commit index that covers it and a configuration without
// this node. That a local commit index covers the entry only makes it ask
// at once: a node rejoining after its removal applies the removing entry
// a moment before the one that adds it again.
//
// Nor is the removing entry itself sure to arrive: the leader stops
// replicating to a removed node with one last append, and when that one
// fails the node holds a configuration that still lists it, hears from
// no leader again, and asks for votes nobody grants. So a listed node
// that has had no leader for orphanHeartbeats heartbeat timeouts asks the
// members too; it counts as removed once one reports, with a leader known,
// a configuration without this node whose index its commit index covers.
func (n *Node) watchRemoval() {
	defer n.wg.Done()
	ctx, cancel := n.untilStop()
	defer cancel()
	self := raft.ServerID(n.cfg.NodeID)
	if servers, err := n.servers(); err == nil && !listed(servers, self) {
		n.log.Info("this node is not in its raft configuration: it waits to be added (kvselectctl cluster join) and serves its last catalog meanwhile")
	}
	tick := time.NewTicker(removalPoll)
	defer tick.Stop()
	var (
		member     []raft.Server // the latest configuration that listed this node
		nextAsk    time.Time     // when to ask the members again
		backoff    time.Duration
		leaderless time.Time // since when a listed node has known no leader
	)
	ask := func() {
		backoff = min(max(2*backoff, 500*time.Millisecond), 10*time.Second)
		nextAsk = time.Now().Add(backoff)
	}
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		servers, err := n.servers()
		switch {
		case err != nil:
			continue
		case listed(servers, self):
			member = servers
			if addr, _ := n.knownLeader(); addr != "" {
				nextAsk, backoff, leaderless = time.Time{}, 0, time.Time{}
				continue
			}
			if leaderless.IsZero() {
				leaderless = time.Now()
			}
			if time.Since(leaderless) < orphanHeartbeats*n.cfg.HeartbeatTimeout || time.Now().Before(nextAsk) {
				continue
			}
			if backoff == 0 {
				// Debug: a cluster starting one node at a time, or one
				// without quorum, passes here too; only a confirmed
				// removal is worth an operator's attention (markRemoved).
				n.log.Debug("no leader for a while: asking the members whether this node is still one of them", "since", leaderless.Format(time.RFC3339))
			}
			ask()
			if by, idx, st, ok := n.confirmRemoval(ctx, member, 0); ok {
				n.markRemoved(idx, by, st)
				return
			}
			continue
		case member == nil:
			continue // not a member yet in this process
		}
		leaderless = time.Time{}
		// Even a committed removal is confirmed with a member: a node
		// rejoining after its removal may apply the removing entry (its
		// commit index covering it) a moment before the entry that adds
		// it again, which the members already hold.
		idx := n.configurationIndex()
		if n.raft.CommitIndex() < idx && time.Now().Before(nextAsk) {
			continue
		}
		if backoff == 0 {
			n.log.Debug("this node is out of the latest raft configuration; asking the members whether that committed", "config_index", idx)
		}
		ask()
		if by, _, st, ok := n.confirmRemoval(ctx, member, idx); ok {
			n.markRemoved(idx, by, st)
			return
		}
	}
}

// configurationIndex is the index of the latest configuration entry in
// the local log (the one that removed this node), or the last index when
// it is not among the last entries: comparing a commit index with a later
// index only asks for more. Status reports it as ConfigIndex (raft's own
// GetConfiguration leaves the index at 0).
func (n *Node) configurationIndex() uint64 {
	last := n.raft.LastIndex()
	for i := last; i > 0 && last-i < maxCoverScan; i-- {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err != nil {
			break
		}
		if l.Type == raft.LogConfiguration {
			return i
		}
	}
	return last
}

// confirmRemoval asks the other members of the configuration that last
// listed this node for their status, and reports the first that confirms
// the removal committed at idx, with the index and its member list. With
// idx 0 (a removal this node never received) the member's own
// configuration index stands for it.
func (n *Node) confirmRemoval(ctx context.Context, member []raft.Server, idx uint64) (by string, at uint64, members []raft.Server, ok bool) {
	for _, s := range member {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			continue
		}
		addr := n.httpAddr(id)
		if addr == "" {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, removalAskTimeout)
		st, err := n.client.status(actx, addr)
		cancel()
		if err != nil {
			n.log.Debug("asking a member whether this node's removal committed", "member", id, "err", err)
			continue
		}
		at = idx
		if at == 0 {
			at = st.ConfigIndex // 0 from a node that does not report it: no answer
		}
		if st.Leader.ID == "" || at == 0 || st.CommitIndex < at {
			continue
		}
		if slices.ContainsFunc(st.Members, func(m api.Member) bool { return m.ID == n.cfg.NodeID }) {
			continue // listed again: re-added, or the removal was undone
		}
		for _, m := range st.Members {
			members = append(members, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
		}
		return id, at, members, true
	}
	return "", 0, nil, false
}

// markRemoved says why this node stops, once, and closes n.removed.
func (n *Node) markRemoved(idx uint64, confirmedBy string, members []raft.Server) {
	ids := make([]string, 0, len(members))
	for _, s := range members {
		ids = append(ids, string(s.ID))
	}
	n.log.Warn("this node was removed from the cluster: the committed raft configuration no longer lists it; "+
		"it stops serving (to bring it back, start it again on its data dir and add it with kvselectctl cluster join)",
		"config_index", idx, "confirmed_by", confirmedBy, "members", fmt.Sprint(ids))
	close(n.removed)
}

func listed(servers []raft.Server, id raft.ServerID) bool {
	return slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id })
}
