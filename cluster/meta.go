package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// LeaderInfo locates the leader for clients and for forwarding.
type LeaderInfo struct {
	// ID is the leader's node id; empty when no leader is known.
	ID string
	// HTTPAddr is the leader's advertised HTTP address, for redirects;
	// empty until its metadata is known.
	HTTPAddr string
	// DialHTTP is where this node sends forwarded requests: HTTPAddr, or
	// the --peer-dial override.
	DialHTTP string
}

// knownLeader is raft's leader, except while this node campaigns: a
// candidate knows no leader. hashicorp/raft (v1.7.3) can leave a stale one
// set there. A leader handing over sends the target TimeoutNow, which
// clears the leader and makes it a candidate; a heartbeat the old leader
// sent a moment earlier, handled on the transport's fast path beside the
// main loop, then sets the old leader again, and a candidate clears it
// only when its state next changes. With the others gone that is never,
// and the node would name a dead leader, forward writes to it and pass
// for led (Test_NoQuorum caught it under load). Every reading of the
// leader in this package goes through here.
func (n *Node) knownLeader() (raft.ServerAddress, raft.ServerID) {
	addr, id := n.raft.LeaderWithID()
	if n.raft.State() == raft.Candidate {
		return "", ""
	}
	return addr, id
}

// Leader returns what this node knows about the current leader.
func (n *Node) Leader() LeaderInfo {
	_, id := n.knownLeader()
	info := LeaderInfo{ID: string(id)}
	switch {
	case id == "":
		return info
	case string(id) == n.cfg.NodeID:
		info.HTTPAddr = n.cfg.HTTPAdvertise
	default:
		if m, ok := n.Catalog().Node(string(id)); ok {
			info.HTTPAddr = m.HTTPAddr
		}
	}
	info.DialHTTP = info.HTTPAddr
	if d, ok := n.cfg.PeerDial[info.ID]; ok && d.HTTP != "" {
		info.DialHTTP = d.HTTP
	}
	return info
}

// HasLeader reports whether this node knows a leader now, itself
// included.
func (n *Node) HasLeader() bool {
	_, id := n.knownLeader()
	return id != ""
}

// WaitForLeaderHTTP waits until a leader other than this node is known
// together with its HTTP address, or this node leads. It fails with
// ErrNoLeader when ctx ends first.
func (n *Node) WaitForLeaderHTTP(ctx context.Context) (LeaderInfo, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		leaderCh, catalogCh := n.changes()
		info := n.Leader()
		if info.ID == n.cfg.NodeID || info.DialHTTP != "" {
			return info, nil
		}
		select {
		case <-leaderCh:
		case <-catalogCh:
		case <-tick.C: // in case a leader observation was dropped
		case <-n.stop:
			return info, ErrClosed
		case <-ctx.Done():
			if info.ID != "" {
				return info, fmt.Errorf("%w: the HTTP address of leader %s is not known yet", ErrNoLeader, info.ID)
			}
			return info, fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
		}
	}
}

// changes returns channels closed at the next leader change and the next
// catalog change. Take them before reading the state they guard.
func (n *Node) changes() (leader, catalog <-chan struct{}) {
	n.mu.Lock()
	leader = n.leaderChanged
	n.mu.Unlock()
	return leader, n.watcher.changed()
}

// pollEvery backs up leader observations, which raft drops rather than
// block when our channel is full.
const pollEvery = 100 * time.Millisecond

// recheckEvery is how often publishMetadata looks again without a trigger.
const recheckEvery = time.Second

// LeaderWait is how long writes wait for an election.
func (n *Node) LeaderWait() time.Duration { return n.cfg.LeaderWait }

// selfMeta is the metadata this node publishes about itself.
func (n *Node) selfMeta() fsm.NodeMeta {
	m := fsm.NodeMeta{ID: n.cfg.NodeID, HTTPAddr: n.cfg.HTTPAdvertise, ReplicaSync: *n.replicaSync.Load(),
		Incarnation: n.incarnation}
	if !n.cfg.NoCatalogRules {
		m.CatalogRules = fsm.CatalogRulesCurrent
	}
	return m
}

// metaCurrent reports whether the catalog's record cur already says what
// meta does; an incarnation of 0 (a writer that knows none) asks nothing
// of the record's, nor of its catalog rules, which go with it.
func metaCurrent(cur, meta fsm.NodeMeta) bool {
	return cur.HTTPAddr == meta.HTTPAddr && cur.ReplicaSync == meta.ReplicaSync &&
		(meta.Incarnation == 0 || cur.Incarnation == meta.Incarnation && cur.CatalogRules == meta.CatalogRules)
}

// untilStop is a context that ends when Close stops the node's
// background work (or when cancel is called).
func (n *Node) untilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// publishMetadata keeps this node's metadata in the catalog: the leader
// writes its own, a follower asks the leader through POST
// /cluster/metadata. The metadata carries this process's incarnation, so
// its first write gives the node a new epoch. On the leader it first makes
// sure the catalog has a cluster id. It runs until Close, re-checking on
// every leader or catalog change, with backoff while it cannot succeed.
func (n *Node) publishMetadata() {
	defer n.wg.Done()
	ctx, cancel := n.untilStop()
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		leaderCh, catalogCh := n.changes()
		err := n.ensureClusterID(ctx, false)
		if err == nil {
			err = n.ensureMetadata(ctx)
		}
		if err == nil {
			err = n.ensureCatalogRules(ctx)
		}
		n.metaRounds.Add(1)
		// Configuration changes (a re-add) have no channel of their own,
		// and observations may be dropped: re-check now and then anyway.
		retry := time.After(recheckEvery)
		if err != nil {
			n.log.Debug("publishing node metadata", "err", err)
			retry = time.After(backoff + rand.N(backoff/2+1))
			backoff = min(2*backoff, 5*time.Second)
		} else {
			backoff = 50 * time.Millisecond
		}
		select {
		case <-n.stop:
			return
		case <-leaderCh:
		case <-catalogCh:
		case <-n.metaKick:
		case <-retry:
		}
	}
}

// MetadataRounds counts publishMetadata's passes (metadata, cluster id
// and catalog rules each judged once): tests that check a write does not
// happen wait for rounds rather than for time.
func (n *Node) MetadataRounds() uint64 { return n.metaRounds.Load() }

// SetReplicaSyncAdvertise changes the replica-sync endpoint this node
// publishes in its metadata (tcp://host:port; "" for none): replica sync
// that starts after Open, once a second member joins a node that ran
// alone (SPEC §2). The catalog has it within a commit, while there is a
// leader.
func (n *Node) SetReplicaSyncAdvertise(endpoint string) {
	n.replicaSync.Store(&endpoint)
	select {
	case n.metaKick <- struct{}{}:
	default: // one is pending: it reads the new endpoint too
	}
}

// Members is the number of servers, voters or not, in this node's latest
// Raft configuration (entries not yet committed included); 0 when raft
// cannot tell (shut down).
func (n *Node) Members() int {
	servers, err := n.servers()
	if err != nil {
		return 0
	}
	return len(servers)
}

func (n *Node) ensureMetadata(ctx context.Context) error {
	want := n.selfMeta()
	leader := n.Leader()
	// A node re-added by an operator enters as a non-voter; having the
	// configuration that lists it, it asks to be promoted.
	if suffrage, listed := n.suffrage(); listed && suffrage != raft.Voter && leader.DialHTTP != "" && leader.ID != n.cfg.NodeID {
		return n.client.join(ctx, leader.DialHTTP, api.JoinRequest{ID: want.ID, RaftAddr: n.RaftAddr(),
			HTTPAddr: want.HTTPAddr, ReplicaSync: want.ReplicaSync, CaughtUp: true})
	}
	if leader.ID != "" && leader.ID != n.cfg.NodeID {
		// The leader decodes the body strictly (api.Decode): one of the
		// release before refuses catalog_rules as an unknown field. Its
		// record tells whether it knows them; once a leader that does
		// leads, the record differs and this node writes it again.
		lm, _ := n.Catalog().Node(leader.ID)
		want.CatalogRules = min(want.CatalogRules, lm.CatalogRules)
	}
	if cur, ok := n.Catalog().Node(want.ID); ok && metaCurrent(cur, want) {
		return nil
	}
	switch {
	case leader.ID == "":
		return ErrNoLeader
	case leader.ID == n.cfg.NodeID:
		return n.SetMetadata(ctx, want)
	case leader.DialHTTP == "":
		return fmt.Errorf("%w: HTTP address of leader %s unknown", ErrNoLeader, leader.ID)
	}
	return n.client.metadata(ctx, leader.DialHTTP, want)
}

// joinExisting asks the members listed in Join to admit this node, trying
// each in turn with backoff, then asks again to be made a voter once it
// holds the configuration that lists it. It returns when this node is a
// voter or ctx ends. A member that is not the leader forwards the requests.
func (n *Node) joinExisting(ctx context.Context) error {
	req := api.JoinRequest{ID: n.cfg.NodeID, RaftAddr: n.RaftAddr(), HTTPAddr: n.cfg.HTTPAdvertise,
		ReplicaSync: *n.replicaSync.Load()}
	backoff := 50 * time.Millisecond
	var last error
	for {
		suffrage, listed := n.suffrage()
		switch {
		case listed && suffrage == raft.Voter:
			n.log.Info("joined cluster as a voter", "raft_addr", req.RaftAddr)
			return nil
		case listed:
			req.CaughtUp = true
		}
		if err := n.askToJoin(ctx, req); err != nil {
			if !retryable(err) {
				return err
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join %v: gave up: %w", n.cfg.Join, last)
		case <-n.stop:
			return ErrClosed
		case <-time.After(backoff):
			backoff = min(2*backoff, 500*time.Millisecond)
		}
	}
}

// askToJoin posts req to the Join URLs until one answers.
func (n *Node) askToJoin(ctx context.Context, req api.JoinRequest) error {
	var errs []error
	for _, url := range n.cfg.Join {
		err := n.client.join(ctx, url, req)
		if err == nil {
			return nil
		}
		n.log.Warn("join request failed", "via", url, "caught_up", req.CaughtUp, "err", err)
		if !retryable(err) {
			return fmt.Errorf("join via %s: %w", url, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", url, err))
	}
	return errors.Join(errs...)
}
