package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerRemindEvery is how often a peer that stays unreachable is reported
// again.
const peerRemindEvery = time.Minute

// peerHealth reports a Raft peer's outages from the outcome of every RPC
// this node sends it (rpcTransport): one WARN once RPCs to it have failed
// for grace, a reminder WARN every remindEvery while they keep failing,
// saying for how long, and one INFO when it answers again. hashicorp/raft
// logs each failed RPC at ERROR, several times a second while a peer is
// down, and nothing when it answers again; the hclog adapter therefore
// demotes those lines (peerFailureMessages) and this is what an operator
// reads.
//
// State is kept per peer id. Failures shorter than grace are no outage: a
// peer that restarts leaves a pooled connection that fails once, and the
// next RPC redials and is answered. A reminder only follows a failure: a
// node that stops sending to a peer (a follower after an election it
// lost) stops claiming anything about it. Failures after remindEvery
// without one start a new outage. A peer removed from the configuration
// is forgotten.
type peerHealth struct {
	log         *slog.Logger
	now         func() time.Time // injectable for tests
	grace       time.Duration
	remindEvery time.Duration

	down  atomic.Int32 // len(peers): lets answered skip the lock when all is well
	mu    sync.Mutex
	peers map[raft.ServerID]*peerOutage
}

// peerOutage is a run of failed RPCs to one peer, as this node sees it.
type peerOutage struct {
	addr        raft.ServerAddress
	since       time.Time // first failure
	lastFailure time.Time
	warned      bool      // the outage has been reported
	reported    time.Time // last WARN
	failures    int       // failed RPCs since since
}

// newPeerHealth reports outages once RPCs have failed for grace (the
// heartbeat timeout: as long as a follower waits for its leader).
func newPeerHealth(log *slog.Logger, grace time.Duration) *peerHealth {
	return &peerHealth{log: log, now: time.Now, grace: grace, remindEvery: peerRemindEvery,
		peers: map[raft.ServerID]*peerOutage{}}
}

// failed records an RPC to a peer that got no answer.
func (h *peerHealth) failed(id raft.ServerID, addr raft.ServerAddress, rpc string, err error) {
	if errors.Is(err, raft.ErrTransportShutdown) {
		return // this node is shutting down, the peer may be fine
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.peers[id]
	if !ok {
		h.down.Add(1)
	}
	if !ok || now.Sub(o.lastFailure) >= h.remindEvery {
		o = &peerOutage{addr: addr, since: now} // nothing heard for a while: a new run
		h.peers[id] = o
	}
	o.failures++
	o.lastFailure = now
	switch {
	case !o.warned && now.Sub(o.since) >= h.grace:
		o.warned, o.reported = true, now
		h.log.Warn("raft peer unreachable", "peer_id", string(id), "peer_addr", string(addr),
			"down_for", now.Sub(o.since).Round(time.Millisecond).String(), "failed_rpcs", o.failures, "rpc", rpc, "err", err)
	case o.warned && now.Sub(o.reported) >= h.remindEvery:
		o.reported = now
		h.log.Warn("raft peer still unreachable", "peer_id", string(id), "peer_addr", string(addr),
			"down_for", now.Sub(o.since).Round(time.Second).String(), "failed_rpcs", o.failures, "rpc", rpc, "err", err)
	}
}

// answered records an RPC to a peer that got an answer.
func (h *peerHealth) answered(id raft.ServerID) {
	if h.down.Load() == 0 {
		return
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.peers[id]
	if !ok {
		return
	}
	delete(h.peers, id)
	h.down.Add(-1)
	level, msg := slog.LevelDebug, "raft peer answered again"
	if o.warned {
		level, msg = slog.LevelInfo, "raft peer reachable again"
	}
	h.log.Log(context.Background(), level, msg, "peer_id", string(id), "peer_addr", string(o.addr),
		"down_for", now.Sub(o.since).Round(time.Millisecond).String(), "failed_rpcs", o.failures)
}

// forget drops a peer removed from the configuration: raft stops sending
// to it, so no answer would ever end its outage.
func (h *peerHealth) forget(id raft.ServerID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.peers[id]; ok {
		delete(h.peers, id)
		h.down.Add(-1)
	}
}

// rpcTransport is the Raft transport with every outgoing RPC's outcome
// reported to peerHealth. Raft calls it with the peer's id and
// configured address, so outages are keyed by id whatever --peer-dial
// routes the connection through. Replication is never pipelined
// (newTransport sets MaxRPCsInFlight 1; AppendEntriesPipeline says so), so
// every append is an AppendEntries whose outcome is reported here.
type rpcTransport struct {
	*raft.NetworkTransport
	health *peerHealth
}

func newRPCTransport(trans *raft.NetworkTransport, health *peerHealth) *rpcTransport {
	return &rpcTransport{NetworkTransport: trans, health: health}
}

// The interfaces raft looks for on its transport: pre-vote and Close.
var (
	_ raft.WithPreVote = (*rpcTransport)(nil)
	_ raft.WithClose   = (*rpcTransport)(nil)
)

func (t *rpcTransport) record(id raft.ServerID, target raft.ServerAddress, rpc string, err error) error {
	if err != nil {
		t.health.failed(id, target, rpc, err)
	} else {
		t.health.answered(id)
	}
	return err
}

func (t *rpcTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.record(id, target, "AppendEntries", t.NetworkTransport.AppendEntries(id, target, args, resp))
}

func (t *rpcTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.record(id, target, "RequestVote", t.NetworkTransport.RequestVote(id, target, args, resp))
}

func (t *rpcTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.record(id, target, "RequestPreVote", t.NetworkTransport.RequestPreVote(id, target, args, resp))
}

func (t *rpcTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.record(id, target, "InstallSnapshot", t.NetworkTransport.InstallSnapshot(id, target, args, resp, data))
}

func (t *rpcTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.record(id, target, "TimeoutNow", t.NetworkTransport.TimeoutNow(id, target, args, resp))
}

// AppendEntriesPipeline refuses: raft then replicates with plain
// AppendEntries (see newTransport for why pipelining is off). The refusal
// says nothing about the peer, so it is not reported.
func (t *rpcTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
