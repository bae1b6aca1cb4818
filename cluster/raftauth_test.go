package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/faultproxy"
	"github.com/kvselect/kvselect/internal/poll"
)

// holder is a node's tokens as a token file holds them: one line, or two
// (the one sent first); "" for none.
func holder(file string) *authtoken.Holder {
	token, also, _ := strings.Cut(file, "\n")
	h := authtoken.NewHolder(token)
	h.SetTokens(token, also)
	return h
}

// authStream is a stream on loopback with the tokens of file and a fake
// raft that takes its connections: every connection Accept returns comes
// out of the channel, and the test closes it (raft's handler would).
// Everything is stopped when the test ends.
func authStream(t *testing.T, file string, c streamConfig) (*tcpStream, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.auth = holder(file)
	s := newTCPStream(ln, c)
	accepted := make(chan net.Conn, 16)
	taken := make(chan struct{})
	go func() {
		defer close(taken)
		for {
			conn, err := s.Accept()
			if err != nil {
				return
			}
			accepted <- conn
		}
	}()
	t.Cleanup(func() {
		s.Close()
		<-taken
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
		s.drain()
	})
	return s, accepted
}

// refused is how many connections s refused in that direction for that
// reason.
func refused(t *testing.T, s *tcpStream, direction, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := s.refusals.counter.WithLabelValues(direction, reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// waitRefused waits until s has refused one more inbound connection for
// reason than before (admit runs beside the test).
func waitRefused(t *testing.T, s *tcpStream, reason string, before float64) {
	t.Helper()
	poll.Eventually(t, testWait, "an inbound "+reason+" refusal", func() error {
		if got := refused(t, s, "inbound", reason); got != before+1 {
			return fmt.Errorf("%v refused, want %v", got, before+1)
		}
		return nil
	})
}

// Test_RaftHandshakeBetweenTokenFiles: two streams authenticate each other
// when their token files are one phase apart in the README's rotation
// (each sends its first line, which the other accepts), in either role, and
// refuse each other otherwise, each side saying why. After a handshake
// raft's bytes pass through untouched.
func Test_RaftHandshakeBetweenTokenFiles(t *testing.T) {
	for _, tt := range []struct {
		name             string
		dialer, acceptor string
		// inbound and outbound are the reasons of the acceptor's and the
		// dialer's refusal; "" for none.
		inbound, outbound string
	}{
		{"one token", "tok", "tok", "", ""},
		{"start, phase 1", "old", "old\nnew", "", ""},
		{"phase 1, start", "old\nnew", "old", "", ""},
		{"phase 1, phase 2", "old\nnew", "new\nold", "", ""},
		{"phase 2, phase 1", "new\nold", "old\nnew", "", ""},
		{"phase 2, phase 3", "new\nold", "new", "", ""},
		{"phase 3, phase 2", "new", "new\nold", "", ""},
		{"another token", "a", "b", reasonBadMAC, reasonRefused},
		// Phase 1 skipped: the one sending the new token is refused, and
		// the one holding old alone refuses the other's proof.
		{"phase 2, start", "new\nold", "old", reasonBadMAC, reasonRefused},
		{"start, phase 2", "old", "new\nold", "", reasonBadMAC},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acceptor, accepted := authStream(t, tt.acceptor, streamConfig{})
			dialer, _ := authStream(t, tt.dialer, streamConfig{})
			inBefore := refused(t, acceptor, "inbound", cmpOr(tt.inbound, reasonBadMAC))
			conn, err := dialer.Dial(raft.ServerAddress(acceptor.Addr().String()), time.Second)
			if tt.outbound == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				defer conn.Close()
				if _, err := conn.Write([]byte("raft bytes")); err != nil {
					t.Fatal(err)
				}
				rc := <-accepted
				defer rc.Close() // as raft's handler does
				got := make([]byte, len("raft bytes"))
				if _, err := io.ReadFull(rc, got); err != nil || string(got) != "raft bytes" {
					t.Fatalf("raft read %q, %v", got, err)
				}
				return
			}
			var he *handshakeError
			if !errors.As(err, &he) || he.reason != tt.outbound {
				t.Fatalf("dial: %v, want a refusal for %s", err, tt.outbound)
			}
			if got := refused(t, dialer, "outbound", tt.outbound); got != 1 {
				t.Errorf("outbound %s refusals: %v", tt.outbound, got)
			}
			if tt.inbound != "" {
				waitRefused(t, acceptor, tt.inbound, inBefore)
				select {
				case c := <-accepted:
					t.Fatalf("raft got a connection from %s", c.RemoteAddr())
				default:
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dialerAnswer is a dialer's answer to challenge nonceA naming addr,
// signed as role with token.
func dialerAnswer(nonceA []byte, addr, token, role string) []byte {
	nonceD := make([]byte, nonceSize)
	rand.Read(nonceD)
	msg := append([]byte(raftAuthMagic), nonceD...)
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(addr)))
	msg = append(msg, addr...)
	return append(msg, handshakeMAC(token, role, nonceA, nonceD, addr)...)
}

// challenge connects to addr and reads the acceptor's challenge.
func challenge(t *testing.T, addr string) (net.Conn, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hello := make([]byte, len(raftAuthMagic)+nonceSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		t.Fatalf("no challenge: %v", err)
	}
	if !bytes.HasPrefix(hello, []byte(raftAuthMagic)) {
		t.Fatalf("challenge %q", hello)
	}
	return conn, hello[len(raftAuthMagic):]
}

// Test_RaftHandshakeRefusesForgeries: a node with a token refuses, before
// raft sees a byte, whoever does not answer its fresh challenge with a MAC
// under its token for its own address: raft spoken at once, a MAC under
// another token, a genuine answer replayed on a new connection, a MAC for
// another address, the acceptor's own proof reflected, an answer cut
// short, or silence past the deadline. The connection is closed without a
// proof and the reason counted; a genuine answer gets the proof and raft
// the connection.
func Test_RaftHandshakeRefusesForgeries(t *testing.T) {
	const deadline = 300 * time.Millisecond
	s, accepted := authStream(t, "tok\nalso", streamConfig{handshakeTimeout: deadline})
	self := s.Addr().String()

	// A genuine answer, recorded for the replay below.
	conn, nonceA := challenge(t, self)
	genuine := dialerAnswer(nonceA, self, "tok", roleDialer)
	if _, err := conn.Write(genuine); err != nil {
		t.Fatal(err)
	}
	proof := make([]byte, 1+macSize)
	if _, err := io.ReadFull(conn, proof); err != nil {
		t.Fatalf("no proof for a genuine answer: %v", err)
	}
	if proof[0] != verdictAccepted {
		t.Fatalf("verdict %d for a genuine answer", proof[0])
	}
	if proof = proof[1:]; !bytes.Equal(proof, handshakeMAC("tok", roleAcceptor, nonceA, genuine[len(raftAuthMagic):len(raftAuthMagic)+nonceSize], self)) {
		t.Fatal("the proof is not the acceptor's MAC under its first token")
	}
	(<-accepted).Close()

	for _, tt := range []struct {
		name   string
		answer func(nonceA []byte) []byte // nil: send nothing
		reason string
	}{
		{"raft without the handshake", func([]byte) []byte { return []byte("\x00\x83\xa6Term\xcd\x03\xe8 and the rest of an AppendEntries") }, reasonNoHandshake},
		{"the second line signs too", func(n []byte) []byte { return dialerAnswer(n, self, "also", roleDialer) }, ""},
		{"another token", func(n []byte) []byte { return dialerAnswer(n, self, "guess", roleDialer) }, reasonBadMAC},
		{"a replayed answer", func([]byte) []byte { return genuine }, reasonBadMAC},
		{"another address", func(n []byte) []byte { return dialerAnswer(n, "127.0.0.1:1", "tok", roleDialer) }, reasonWrongAddress},
		{"the acceptor's role", func(n []byte) []byte { return dialerAnswer(n, self, "tok", roleAcceptor) }, reasonBadMAC},
		{"cut short", func(n []byte) []byte { a := dialerAnswer(n, self, "tok", roleDialer); return a[:len(a)-1] }, reasonTimeout},
		{"silence", nil, reasonTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := refused(t, s, "inbound", cmpOr(tt.reason, reasonBadMAC))
			conn, nonce := challenge(t, self)
			if bytes.Equal(nonce, nonceA) {
				t.Fatal("the challenge repeats")
			}
			start := time.Now()
			if tt.answer != nil {
				if _, err := conn.Write(tt.answer(nonce)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := io.ReadAll(io.LimitReader(conn, 1+macSize))
			if errors.Is(err, syscall.ECONNRESET) { // closed with some of the answer unread
				err = nil
			}
			if tt.reason == "" {
				if err != nil || len(got) != 1+macSize || got[0] != verdictAccepted {
					t.Fatalf("verdict and proof %x, %v", got, err)
				}
				(<-accepted).Close()
				return
			}
			// A proof it refused gets the refused verdict, and nothing
			// else; an answer that is no proof at all, nothing.
			want := []byte{}
			if tt.reason == reasonBadMAC || tt.reason == reasonWrongAddress {
				want = []byte{verdictRefused}
			}
			if !bytes.Equal(got, want) || err != nil {
				t.Fatalf("the acceptor answered %x (%v), want %x and the connection closed", got, err, want)
			}
			if took := time.Since(start); tt.reason == reasonTimeout && (took < deadline/2 || took > 10*deadline) {
				t.Errorf("cut after %v, the deadline is %v", took, deadline)
			}
			waitRefused(t, s, tt.reason, before)
			select {
			case c := <-accepted:
				t.Fatalf("raft got a connection from %s", c.RemoteAddr())
			default:
			}
		})
	}
	poll.Eventually(t, testWait, "no handshake left in progress", func() error {
		if n := len(s.slots); n != 0 {
			return fmt.Errorf("%d slots taken", n)
		}
		return nil
	})
}

// Test_RaftHandshakeRefusesImpostors: a dialer sends raft nothing until
// the peer has proved it holds the token for the address the dialer means
// to reach. A listener that never challenges (a node without a token, or
// of a release before the handshake) fails at the deadline; one that
// proves with another token is refused. A proxy in the way is refused by
// the node behind it, which is not at the address the dialer names, unless
// the dialer knows whom the proxy leads to (--peer-dial): a relay cannot
// lend one node's proof to another address.
func Test_RaftHandshakeRefusesImpostors(t *testing.T) {
	const deadline = 300 * time.Millisecond
	acceptor, _ := authStream(t, "tok", streamConfig{})
	proxy := faultproxy.Start(t, acceptor.Addr().String())
	impostor := func(t *testing.T, behave func(conn net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		t.Cleanup(func() { ln.Close(); <-done })
		go func() {
			defer close(done)
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			behave(conn)
		}()
		return ln.Addr().String()
	}
	for _, tt := range []struct {
		name    string
		target  func(t *testing.T) string
		signFor func(string) string
		reason  string // "" for success
	}{
		{"silent listener", func(t *testing.T) string {
			return impostor(t, func(conn net.Conn) { io.Copy(io.Discard, conn) })
		}, nil, reasonTimeout},
		{"another token", func(t *testing.T) string {
			return impostor(t, func(conn net.Conn) {
				nonceA := make([]byte, nonceSize)
				conn.Write(append([]byte(raftAuthMagic), nonceA...))
				head := make([]byte, len(raftAuthMagic)+nonceSize+2)
				io.ReadFull(conn, head)
				n := int(binary.BigEndian.Uint16(head[len(head)-2:]))
				rest := make([]byte, n+macSize)
				io.ReadFull(conn, rest)
				conn.Write([]byte{verdictAccepted})
				conn.Write(handshakeMAC("guess", roleAcceptor, nonceA, head[len(raftAuthMagic):len(raftAuthMagic)+nonceSize], string(rest[:n])))
				io.Copy(io.Discard, conn)
			})
		}, nil, reasonBadMAC},
		// A peer that stops after the dialer's proof (a restart) sends
		// no verdict: an outage, not a refusal of this node's token.
		{"a peer stopping mid-handshake", func(t *testing.T) string {
			return impostor(t, func(conn net.Conn) {
				conn.Write(append([]byte(raftAuthMagic), make([]byte, nonceSize)...))
				head := make([]byte, len(raftAuthMagic)+nonceSize+2)
				io.ReadFull(conn, head)
				n := int(binary.BigEndian.Uint16(head[len(head)-2:]))
				io.ReadFull(conn, make([]byte, n+macSize))
			})
		}, nil, reasonClosed},
		{"a relay", func(*testing.T) string { return proxy.Addr() }, nil, reasonRefused},
		{"--peer-dial", func(*testing.T) string { return proxy.Addr() },
			func(string) string { return acceptor.Addr().String() }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dialer, _ := authStream(t, "tok", streamConfig{handshakeTimeout: deadline, signFor: tt.signFor})
			start := time.Now()
			conn, err := dialer.Dial(raft.ServerAddress(tt.target(t)), 10*time.Second)
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				conn.Close()
				return
			}
			var he *handshakeError
			if !errors.As(err, &he) || he.reason != tt.reason {
				t.Fatalf("dial: %v, want a refusal for %s", err, tt.reason)
			}
			if took := time.Since(start); took > 10*deadline {
				t.Errorf("the dial took %v, the handshake deadline is %v", took, deadline)
			}
		})
	}
}

// Test_RaftHandshakesAreBounded: past the bound on handshakes in
// progress, a new connection is closed at once, without a challenge, and
// counted; once the silent ones are cut at their deadline, peers get in
// again.
func Test_RaftHandshakesAreBounded(t *testing.T) {
	const deadline = 300 * time.Millisecond
	s, accepted := authStream(t, "tok", streamConfig{handshakeTimeout: deadline, maxHandshakes: 2})
	for range 2 {
		challenge(t, s.Addr().String()) // and silence
	}
	extra, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if got, err := io.ReadAll(extra); len(got) != 0 || err != nil {
		t.Fatalf("a connection past the bound read %q, %v", got, err)
	}
	if got := refused(t, s, "inbound", reasonBusy); got != 1 {
		t.Fatalf("busy refusals: %v", got)
	}
	dialer, _ := authStream(t, "tok", streamConfig{})
	poll.Eventually(t, testWait, "a peer gets in once the silent ones are cut", func() error {
		conn, err := dialer.Dial(raft.ServerAddress(s.Addr().String()), time.Second)
		if err != nil {
			return err
		}
		conn.Close()
		(<-accepted).Close()
		return nil
	})
}

// Test_RaftRefusalsLogRateLimited: refusals are counted one by one but
// logged at WARN once a minute per direction and reason, the next WARN
// saying how many went unlogged; an outbound handshake cut short is a
// peer's outage, logged by peerHealth, and only at DEBUG here.
func Test_RaftRefusalsLogRateLimited(t *testing.T) {
	logs := newLogCapture(slog.LevelDebug)
	r := newRefusals(slog.New(logs))
	now := time.Unix(1000, 0)
	r.nowFor = func() time.Time { return now }
	bad := refuse(reasonBadMAC, "bad")
	for range 5 {
		r.record("inbound", "10.0.0.9:4000", bad)
	}
	r.record("outbound", "10.0.0.8:7092", bad) // another direction: its own limit
	// A peer down or stopping: peerHealth's to report, DEBUG here.
	r.record("outbound", "10.0.0.8:7092", refuse(reasonClosed, "EOF"))
	now = now.Add(refusalLogEvery)
	r.record("inbound", "10.0.0.9:4001", bad)

	var warns []logRecord
	for _, rec := range logs.all() {
		if rec.Level == slog.LevelWarn {
			warns = append(warns, rec)
		}
	}
	if len(warns) != 3 || warns[0].Attrs["direction"] != "inbound" || warns[1].Attrs["direction"] != "outbound" ||
		warns[2].Attrs["not_logged_since_last"] != "4" || warns[2].Attrs["reason"] != reasonBadMAC {
		t.Fatalf("warnings: %+v", warns)
	}
	if debug := logs.count(func(rec logRecord) bool { return rec.Level == slog.LevelDebug }); debug != 5 {
		t.Errorf("%d refusals at DEBUG, want 5", debug)
	}
	var m dto.Metric
	if err := r.counter.WithLabelValues("inbound", reasonBadMAC).Write(&m); err != nil || m.GetCounter().GetValue() != 6 {
		t.Errorf("counted %v, want 6 (%v)", m.GetCounter().GetValue(), err)
	}
}

// Test_NodeWithTokenRefusesBareRaft: a node with a token takes no RPC
// from a peer that speaks raft without the handshake: the heartbeat of a
// far higher term fails at the transport and the node's term stays where
// it was.
func Test_NodeWithTokenRefusesBareRaft(t *testing.T) {
	peers, lns := bindPeers(t, 3)
	cfg := TestConfig("n1", t.TempDir())
	cfg.RaftListener, cfg.InitialCluster, cfg.Auth = lns[0], peers, holder("tok")
	n, err := Open(cfg, nil) // n2 and n3 never run: n1 campaigns alone
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	lns[1].Close()
	lns[2].Close()
	ghost, from := ghostPeer(t, peers[1])
	term := n.raft.CurrentTerm()
	err = ghost.AppendEntries("n1", raft.ServerAddress(peers[0].RaftAddr),
		&raft.AppendEntriesRequest{RPCHeader: from, Term: term + 1000, Leader: from.Addr}, &raft.AppendEntriesResponse{})
	if err == nil {
		t.Fatal("a heartbeat without the handshake was answered")
	}
	if got := n.raft.CurrentTerm(); got >= term+1000 {
		t.Fatalf("the node moved to term %d", got)
	}
	waitRefused(t, n.stream, reasonNoHandshake, 0)
}

// Test_AuthenticatedCluster: a cluster whose nodes hold tokens one
// rotation phase apart ("old\nnew" and "new\nold") forms, elects and
// replicates; a follower stopped while the leader compacts its log
// catches up on restart (a snapshot sent over an authenticated
// connection); a fourth node joins (the leader's probe passes the
// handshake) and is promoted; a node with another token is refused at
// the probe. No node refuses a member's connection all along.
func Test_AuthenticatedCluster(t *testing.T) {
	peers, lns := bindPeers(t, 3)
	files := []string{"old\nnew", "new\nold", "old\nnew"}
	cfgs := make([]Config, 3)
	nodes := make([]*Node, 3)
	for i, p := range peers {
		cfgs[i] = TestConfig(p.ID, t.TempDir())
		cfgs[i].RaftBind, cfgs[i].InitialCluster, cfgs[i].Auth = p.RaftAddr, peers, holder(files[i])
		cfgs[i].SnapshotThreshold, cfgs[i].TrailingLogs, cfgs[i].SnapshotInterval = 8, 2, 50*time.Millisecond
		cfg := cfgs[i]
		cfg.RaftListener = lns[i]
		n, err := Open(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
	})
	write := func(id uint64) uint64 {
		t.Helper()
		var index uint64
		poll.Eventually(t, testWait, fmt.Sprintf("write %d", id), func() error {
			res, err := waitLeader(t, nodes).Apply(ctx(t), fsm.UpsertWorker{Worker: worker(id)})
			if err != nil {
				return err
			}
			index = res.Index
			return nil
		})
		return index
	}
	caughtUp := func(ns []*Node, index uint64) {
		t.Helper()
		for _, n := range ns {
			if err := n.WaitApplied(ctx(t), index); err != nil {
				t.Fatal(err)
			}
		}
	}
	caughtUp(nodes, write(1))

	leader := waitLeader(t, nodes)
	f := slices.IndexFunc(nodes, func(n *Node) bool { return n != leader })
	if err := nodes[f].Close(); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for id := uint64(2); id <= 30; id++ {
		last = write(id)
	}
	poll.Eventually(t, testWait, "the leader compacts its log", func() error {
		leader := waitLeader(t, nodes)
		if snaps, _ := filepath.Glob(filepath.Join(leader.cfg.DataDir, "snapshots", "*")); len(snaps) == 0 {
			return errors.New("no snapshot yet")
		}
		return nil
	})
	restarted, err := Open(cfgs[f], nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes[f] = restarted
	caughtUp(nodes, last)
	if got := restarted.Catalog().Len(); got != 30 {
		t.Fatalf("the restarted follower has %d workers, want 30", got)
	}
	// raft restores the FSM before it records the snapshot it installed.
	poll.Eventually(t, testWait, "the restarted follower has installed the leader's snapshot", func() error {
		if snap := restarted.raft.Stats()["last_snapshot_index"]; snap == "0" {
			return errors.New("no snapshot: the log was not compacted past it, and the test proves nothing about InstallSnapshot")
		}
		return nil
	})

	// A fourth node, in phase 2, joins.
	cfg4 := TestConfig("n4", t.TempDir())
	cfg4.Auth, cfg4.Join = holder("new\nold"), []string{"http://127.0.0.1:1"} // never bootstraps; the test admits it
	n4, err := openParts(cfg4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n4.Close() })
	for _, caught := range []bool{false, true} {
		poll.Eventually(t, testWait, fmt.Sprintf("n4 joins (caught up %v)", caught), func() error {
			return waitLeader(t, nodes).Join(ctx(t), api.JoinRequest{ID: "n4", RaftAddr: n4.RaftAddr(), CaughtUp: caught})
		})
		caughtUp([]*Node{n4}, last)
	}
	poll.Eventually(t, testWait, "n4 sees itself a voter", func() error {
		if s, ok := n4.suffrage(); !ok || s != raft.Voter {
			return fmt.Errorf("n4 is %v (listed %v)", s, ok)
		}
		return nil
	})
	caughtUp(append(slices.Clone(nodes), n4), write(31))

	// A node with another token is refused at the probe.
	cfg5 := TestConfig("n5", t.TempDir())
	cfg5.Auth, cfg5.Join = holder("stranger"), []string{"http://127.0.0.1:1"}
	n5, err := openParts(cfg5, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n5.Close() })
	leader = waitLeader(t, nodes)
	if err := leader.Join(ctx(t), api.JoinRequest{ID: "n5", RaftAddr: n5.RaftAddr()}); !errors.Is(err, ErrMembership) ||
		!strings.Contains(err.Error(), "raft handshake") {
		t.Fatalf("join of a node with another token: %v", err)
	}
	if got := refused(t, leader.stream, "outbound", reasonRefused); got != 1 {
		t.Errorf("the leader counted %v refusals of its proof, want 1", got)
	}
	waitRefused(t, n5.stream, reasonBadMAC, 0)

	for _, n := range append(nodes, n4) {
		for _, dir := range []string{"inbound", "outbound"} {
			for _, reason := range []string{reasonNoHandshake, reasonWrongAddress, reasonBadMAC} {
				if got := refused(t, n.stream, dir, reason); got != 0 {
					t.Errorf("%s refused %v %s connections for %s", n.ID(), got, dir, reason)
				}
			}
		}
	}
}

// Test_RaftConnectionOutlivesNoToken: a connection lets raft read on
// while its node still accepts the token it was authenticated with (a
// rotation's phase 2 keeps the old token as its second line), and is
// closed at its next read or write once the node drops that token (phase
// 3), on either side: nothing more reaches raft or leaves it under a token
// no longer valid.
func Test_RaftConnectionOutlivesNoToken(t *testing.T) {
	for _, tt := range []struct {
		name           string
		reload         string // "acceptor" or "dialer"
		file           string // its new token file
		dropped        bool
		inbound, outbd error // what raft gets when dropped
	}{
		{"acceptor keeps old as its second line", "acceptor", "new\nold", false, nil, nil},
		{"dialer keeps old as its second line", "dialer", "new\nold", false, nil, nil},
		{"acceptor drops old", "acceptor", "new", true, io.EOF, nil},
		{"dialer drops old", "dialer", "new", true, nil, errTokenDropped},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acceptor, accepted := authStream(t, "old\nnew", streamConfig{})
			dialer, _ := authStream(t, "old\nnew", streamConfig{})
			out, err := dialer.Dial(raft.ServerAddress(acceptor.Addr().String()), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			in := <-accepted
			defer in.Close()
			s := map[string]*tcpStream{"acceptor": acceptor, "dialer": dialer}[tt.reload]
			token, also, _ := strings.Cut(tt.file, "\n")
			s.auth.SetTokens(token, also)

			// Both ways: a request to the acceptor, its answer back.
			_, werr := out.Write([]byte("request"))
			got := make([]byte, len("request"))
			_, rerr := io.ReadFull(in, got)
			if !tt.dropped {
				if werr != nil || rerr != nil || string(got) != "request" {
					t.Fatalf("request: %v, %q %v", werr, got, rerr)
				}
				if _, err := in.Write([]byte("answer")); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(out, make([]byte, len("answer"))); err != nil {
					t.Fatalf("answer: %v", err)
				}
				return
			}
			if tt.inbound != nil {
				if rerr != tt.inbound {
					t.Fatalf("raft's read on the acceptor: %q %v, want %v", got, rerr, tt.inbound)
				}
				return
			}
			// The dialer dropped the token: its raft sends nothing more
			// and reads nothing more.
			if !errors.Is(werr, tt.outbd) || rerr != io.EOF {
				t.Fatalf("request: %v, acceptor's raft read %q %v", werr, got, rerr)
			}
			if _, err := out.Read(make([]byte, 8)); !errors.Is(err, tt.outbd) {
				t.Fatalf("raft's read on the dialer: %v, want %v", err, tt.outbd)
			}
		})
	}
}
