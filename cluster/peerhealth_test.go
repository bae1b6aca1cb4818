package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/internal/poll"
)

// healthStep is one event a peerHealth sees, after the clock moves by wait.
type healthStep struct {
	wait   time.Duration
	fail   raft.ServerID // an RPC to this peer failed
	err    error         // its error (connection refused by default)
	answer raft.ServerID // an RPC to this peer was answered
	forget raft.ServerID // this peer left the configuration
}

// failures is n failed RPCs to peer, every apart.
func failures(peer raft.ServerID, n int, every time.Duration) []healthStep {
	out := make([]healthStep, n)
	for i := range out {
		out[i] = healthStep{wait: every, fail: peer}
	}
	return out
}

func steps(groups ...[]healthStep) []healthStep { return slices.Concat(groups...) }

func one(s healthStep) []healthStep { return []healthStep{s} }

// Test_PeerHealth drives peerHealth with a fake clock: failures that last
// less than the grace are no outage, a flood of failures is one WARN, a
// reminder follows every interval while failures go on, and the first
// answer is one INFO saying for how long the peer was down.
func Test_PeerHealth(t *testing.T) {
	const grace, remind = time.Second, time.Minute
	tests := []struct {
		name  string
		steps []healthStep
		want  []string
	}{
		{"answers while healthy say nothing",
			steps(one(healthStep{answer: "n2"}), one(healthStep{wait: time.Second, answer: "n3"})),
			nil},
		{"a blip shorter than the grace is no outage",
			steps(failures("n2", 3, 100*time.Millisecond), one(healthStep{answer: "n2"})),
			[]string{"DEBUG raft peer answered again n2 down_for=200ms failed_rpcs=3"}},
		{"a flood of failures is one warning",
			failures("n2", 500, 20*time.Millisecond),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=51"}},
		{"a reminder every interval while failures go on",
			failures("n2", 130, time.Second),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=2",
				"WARN raft peer still unreachable n2 down_for=1m1s failed_rpcs=62",
				"WARN raft peer still unreachable n2 down_for=2m1s failed_rpcs=122"}},
		{"the first answer after an outage is one info",
			steps(failures("n2", 20, 100*time.Millisecond), one(healthStep{wait: 500 * time.Millisecond, answer: "n2"}),
				one(healthStep{wait: time.Millisecond, answer: "n2"})),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=11",
				"INFO raft peer reachable again n2 down_for=2.4s failed_rpcs=20"}},
		{"an answer after reminders",
			steps(failures("n2", 90, time.Second), one(healthStep{wait: time.Second, answer: "n2"})),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=2",
				"WARN raft peer still unreachable n2 down_for=1m1s failed_rpcs=62",
				"INFO raft peer reachable again n2 down_for=1m30s failed_rpcs=90"}},
		{"each peer has its own outage",
			steps(failures("n2", 3, time.Second), failures("n3", 3, time.Second), one(healthStep{answer: "n2"}),
				failures("n3", 2, time.Second), one(healthStep{answer: "n3"})),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=2",
				"WARN raft peer unreachable n3 down_for=1s failed_rpcs=2",
				"INFO raft peer reachable again n2 down_for=5s failed_rpcs=3",
				"INFO raft peer reachable again n3 down_for=4s failed_rpcs=5"}},
		{"failures far apart are no outage",
			failures("n2", 3, 2*remind),
			nil},
		{"failures after a quiet interval are a new outage",
			steps(failures("n2", 3, time.Second), one(healthStep{wait: 2 * remind}), failures("n2", 3, time.Second)),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=2",
				"WARN raft peer unreachable n2 down_for=1s failed_rpcs=2"}},
		{"a removed peer is forgotten",
			steps(failures("n2", 3, time.Second), one(healthStep{forget: "n2"}), one(healthStep{answer: "n2"})),
			[]string{"WARN raft peer unreachable n2 down_for=1s failed_rpcs=2"}},
		{"this node shutting down is no outage",
			steps(failures("n2", 1, 0), one(healthStep{wait: 2 * grace, fail: "n2", err: fmt.Errorf("append: %w", raft.ErrTransportShutdown)})),
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newLogCapture(slog.LevelDebug)
			h := newPeerHealth(slog.New(c), grace)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			h.now = func() time.Time { return now }
			refused := errors.New("dial tcp 127.0.0.1:7002: connect: connection refused")
			for _, s := range tt.steps {
				now = now.Add(s.wait)
				switch {
				case s.fail != "":
					err := s.err
					if err == nil {
						err = refused
					}
					h.failed(s.fail, raft.ServerAddress("addr-"+s.fail), "AppendEntries", err)
				case s.answer != "":
					h.answered(s.answer)
				case s.forget != "":
					h.forget(s.forget)
				}
			}
			var got []string
			for _, r := range c.all() {
				line := fmt.Sprintf("%s %s %s", r.Level, r.Msg, r.Attrs["peer_id"])
				if d, ok := r.Attrs["down_for"]; ok {
					line += fmt.Sprintf(" down_for=%s failed_rpcs=%s", d, r.Attrs["failed_rpcs"])
				}
				if r.Attrs["peer_addr"] != "addr-"+r.Attrs["peer_id"] {
					t.Errorf("%s: peer_addr %q", line, r.Attrs["peer_addr"])
				}
				got = append(got, line)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("logged\n  %q\nwant\n  %q", got, tt.want)
			}
			if want := int32(len(h.peers)); h.down.Load() != want {
				t.Fatalf("down = %d, %d peers tracked", h.down.Load(), want)
			}
		})
	}
}

// Test_PeerOutageLogs: a follower stopped and started again is one
// "unreachable" WARN and one "reachable again" INFO on the leader, while
// raft's own line for every failed RPC (pinned here by message, so a raft
// upgrade that renames them shows) stays at DEBUG, and nothing is logged
// at ERROR.
func Test_PeerOutageLogs(t *testing.T) {
	peers, lns := bindPeers(t, 3)
	logs := make([]*logCapture, 3)
	cfgs := make([]Config, 3)
	nodes := make([]*Node, 3)
	for i, p := range peers {
		logs[i] = newLogCapture(slog.LevelDebug)
		cfgs[i] = TestConfig(p.ID, t.TempDir())
		cfgs[i].RaftBind, cfgs[i].InitialCluster, cfgs[i].Logger = p.RaftAddr, peers, slog.New(logs[i])
		cfg := cfgs[i]
		cfg.RaftListener = lns[i]
		n, err := Open(cfg, nil)
		if err != nil {
			for _, ln := range lns[i:] {
				ln.Close()
			}
			t.Fatal(err)
		}
		nodes[i] = n
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
	})
	leader := waitLeader(t, nodes)
	li := slices.Index(nodes, leader)
	vi := (li + 1) % 3
	victim := raft.ServerID(peers[vi].ID)
	about := func(r logRecord) bool { return r.Attrs["peer_id"] == string(victim) }
	rawFailure := func(msg string) func(r logRecord) bool {
		return func(r logRecord) bool { return r.Msg == msg && r.Level == slog.LevelDebug }
	}
	if err := nodes[vi].Crash(); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, testWait, "the leader has failed 10 heartbeats and an append to the stopped follower", func() error {
		hb, ae := logs[li].count(rawFailure("failed to heartbeat to")), logs[li].count(rawFailure("failed to appendEntries to"))
		if hb < 10 || ae < 1 {
			return fmt.Errorf("%d heartbeat and %d append failures logged at DEBUG", hb, ae)
		}
		return nil
	})
	if !leader.IsLeader() {
		t.Skip("the leadership moved during the outage; the counts below are the leader's")
	}
	var err error
	if nodes[vi], err = Open(cfgs[vi], nil); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, testWait, "the leader logs the follower back", func() error {
		if n := logs[li].count(func(r logRecord) bool { return about(r) && r.Msg == "raft peer reachable again" }); n != 1 {
			return fmt.Errorf("%d recovery lines", n)
		}
		return nil
	})
	if n := logs[li].count(func(r logRecord) bool { return about(r) && r.Level == slog.LevelWarn }); n != 1 {
		t.Fatalf("the leader logged %d warnings about %s, want 1: %+v", n, victim, logs[li].all())
	}
	for i, c := range logs {
		if n := c.count(func(r logRecord) bool { return r.Level >= slog.LevelError }); n != 0 {
			t.Fatalf("%s logged %d errors: %+v", peers[i].ID, n, c.all())
		}
	}
}

// Test_NoPipelinedReplication: raft asks for a pipeline and is refused, so
// it replicates with AppendEntries (hashicorp/raft's pipeline can wedge
// replication and shutdown; newTransport); the refusal is not a peer
// failure.
func Test_NoPipelinedReplication(t *testing.T) {
	health := newPeerHealth(slog.New(slog.DiscardHandler), time.Second)
	trans := newRPCTransport(nil, health)
	if _, err := trans.AppendEntriesPipeline("n2", "127.0.0.1:1"); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("pipeline: %v", err)
	}
	if n := health.down.Load(); n != 0 {
		t.Fatalf("%d peers marked down by a refused pipeline", n)
	}
}
