package cluster

// Races between hashicorp/raft's goroutines and what this package reads or
// writes, each played in the order that once went wrong.

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// Test_CandidateKnowsNoLeader: a node that campaigns names no leader, even
// when hashicorp/raft keeps a stale one. A leader handing over sends the
// target TimeoutNow and may have sent it a heartbeat a moment before; when
// the heartbeat is handled after the TimeoutNow, raft sets the old leader
// again on a node that is by then a candidate, and leaves it there for as
// long as the node campaigns. The test plays the old leader, n2, from a
// bare raft transport against n1, the one live node of a three-node
// configuration, with the messages in that order. Before knownLeader,
// n1's status named n2, a node that was gone, for good (Test_NoQuorum in
// the server package caught it on a loaded machine).
func Test_CandidateKnowsNoLeader(t *testing.T) {
	peers, lns := bindPeers(t, 3)
	cfg := TestConfig("n1", t.TempDir())
	cfg.RaftListener, cfg.InitialCluster = lns[0], peers
	cfg.LeaderWait = 50 * time.Millisecond // leaderOnly's wait below
	n, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	lns[1].Close() // n2 and n3 never run; n2's address is the ghost's
	lns[2].Close()

	ghost, from := ghostPeer(t, peers[1])
	target := raft.ServerAddress(peers[0].RaftAddr)

	poll.Eventually(t, testWait, "n1 campaigns with n2's heartbeat taken after its TimeoutNow", func() error {
		if n.raft.State() != raft.Candidate {
			return fmt.Errorf("n1 is %s", n.raft.State())
		}
		if _, id := n.raft.LeaderWithID(); id == "n2" {
			return nil // the stale leader is in place
		}
		// The hand-over, then the heartbeat at the term the hand-over's
		// election moved to. Another election between the two moves the
		// term again; the next round catches up.
		if err := ghost.TimeoutNow("n1", target, &raft.TimeoutNowRequest{RPCHeader: from},
			&raft.TimeoutNowResponse{}); err != nil {
			return fmt.Errorf("timeout now: %w", err)
		}
		hb := &raft.AppendEntriesRequest{RPCHeader: from, Term: n.raft.CurrentTerm(), Leader: from.Addr}
		if err := ghost.AppendEntries("n1", target, hb, &raft.AppendEntriesResponse{}); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		return fmt.Errorf("not yet")
	})
	if n.raft.State() != raft.Candidate { // nothing else talks to n1
		t.Fatalf("n1 left the candidate state: %s", n.raft.State())
	}
	if got := n.Leader(); got.ID != "" {
		t.Fatalf("a candidate names leader %+v", got)
	}
	if st := n.Status(); st.Leader.ID != "" || st.State != api.StateCandidate {
		t.Fatalf("a candidate's status: state %s, leader %+v", st.State, st.Leader)
	}
	// No leader, rather than "not the leader, n2 is": that answer sent
	// forwarded writes to the dead node.
	if err := n.leaderOnly(ctx(t)); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("a leader-only request on a candidate: %v, want ErrNoLeader", err)
	}
}

// Test_BootstrapBeforeAPeerCampaigns: a node of --initial-cluster whose
// peers already campaign is asked for its vote the moment its transport
// listens, before Open has started it. The vote leaves a term in its
// store; with the bootstrap made through the running raft after that,
// raft refused it ("bootstrap only works on new clusters") and the node
// failed to start (kvbench's routing smoke test met it on a loaded
// machine). openParts now writes the bootstrap before raft runs, so the
// vote is answered by a member that knows its cluster.
func Test_BootstrapBeforeAPeerCampaigns(t *testing.T) {
	peers, lns := bindPeers(t, 3)
	cfg := TestConfig("n3", t.TempDir())
	cfg.RaftListener, cfg.InitialCluster = lns[2], peers
	n, err := openParts(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })

	ghost, from := ghostPeer(t, peers[0])
	var vote raft.RequestVoteResponse
	if err := ghost.RequestVote("n3", raft.ServerAddress(peers[2].RaftAddr),
		&raft.RequestVoteRequest{RPCHeader: from, Term: 5, LastLogIndex: 10, LastLogTerm: 4}, &vote); err != nil {
		t.Fatal(err)
	}
	if n.raft.CurrentTerm() != 5 {
		t.Fatalf("the vote left term %d, want 5", n.raft.CurrentTerm())
	}
	if err := n.start(); err != nil {
		t.Fatalf("start after a peer's vote request: %v", err)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil || len(f.Configuration().Servers) != 3 {
		t.Fatalf("configuration %+v (%v), want the three of --initial-cluster", f.Configuration(), err)
	}
}

// ghostPeer is a bare raft transport that speaks as member p: it sends the
// RPCs a real peer would, in the order a test wants them. Closed when the
// test ends.
func ghostPeer(t *testing.T, p Peer) (*raft.NetworkTransport, raft.RPCHeader) {
	t.Helper()
	ghost, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ghost.Close() })
	return ghost, raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(p.ID), Addr: []byte(p.RaftAddr)}
}
