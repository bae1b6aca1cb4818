package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/faultproxy"
	"github.com/kvselect/kvselect/internal/poll"
)

func worker(id uint64) fsm.Worker {
	return fsm.Worker{WorkerID: id, ModelName: "m", Endpoint: "http://w", BlockSize: 16, DataParallelSize: 1,
		KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:5557"}}
}

func mustOpen(t *testing.T, cfg Config, observer fsm.Observer) *Node {
	t.Helper()
	n, err := Open(cfg, observer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// testWait bounds a test's wait for a condition (poll.Eventually).
const testWait = 20 * time.Second

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

type recorder struct {
	mu      sync.Mutex
	changes []fsm.WorkerChange
}

func (r *recorder) observe(ch *fsm.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, ch.Workers...)
}

func Test_ApplyNotifiesObserversBeforeReturning(t *testing.T) {
	var rec recorder
	n := mustOpen(t, TestConfig("n1", t.TempDir()), rec.observe)
	res, err := n.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(7)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Index == 0 || !res.Worker.Schedulable() {
		t.Fatalf("result = %+v", res)
	}
	rec.mu.Lock()
	got := len(rec.changes)
	rec.mu.Unlock()
	if got != 1 {
		t.Fatalf("observer saw %d changes when Apply returned, want 1", got)
	}
	// The FSM's verdicts come back as errors, with the index still set.
	res, err = n.Apply(ctx(t), fsm.DeleteWorker{WorkerID: 99})
	if !errors.Is(err, fsm.ErrWorkerNotFound) || res == nil || res.Index == 0 {
		t.Fatalf("delete unknown = %+v, %v", res, err)
	}
	if err := n.WaitApplied(ctx(t), res.Index); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.WaitApplied(short, res.Index+100); !errors.Is(err, ErrCatalogBehind) {
		t.Fatalf("wait for a future index: %v", err)
	}
}

func Test_RestartKeepsCatalog(t *testing.T) {
	dir := t.TempDir()
	cfg := TestConfig("n1", dir)
	cfg.SnapshotThreshold = 4 // exercise snapshot + log replay on restart
	cfg.TrailingLogs = 2
	cfg.SnapshotInterval = 50 * time.Millisecond
	n, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitForLeader(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for id := range uint64(10) {
		if _, err := n.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Apply(ctx(t), fsm.DeleteWorker{WorkerID: 3}); err != nil {
		t.Fatal(err)
	}
	want := n.Catalog()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	var rec recorder
	n2 := mustOpen(t, cfg, rec.observe)
	if err := n2.WaitApplied(ctx(t), want.Index()); err != nil {
		t.Fatal(err)
	}
	got := n2.Catalog()
	if d := fsm.NewChange(want, got).Workers; got.Len() != 9 || len(d) != 0 && !sameRecords(d) {
		t.Fatalf("restarted catalog has %d workers, diff %+v", got.Len(), d)
	}
	if _, ok := got.Worker(3); ok {
		t.Fatal("deleted worker came back")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.changes) < 9 {
		t.Fatalf("observers saw %d changes on restart, want the 9 restored workers", len(rec.changes))
	}
}

// sameRecords reports whether every change is between equal records
// (restored records are new pointers with the same content).
func sameRecords(d []fsm.WorkerChange) bool {
	for _, c := range d {
		if c.Old == nil || c.New == nil || c.Old.WorkerID != c.New.WorkerID || c.Old.ModifyIndex != c.New.ModifyIndex ||
			c.Old.Schedulable() != c.New.Schedulable() {
			return false
		}
	}
	return true
}

func Test_LinearizableReadAndStatus(t *testing.T) {
	cfg := TestConfig("n1", t.TempDir())
	cfg.HTTPAdvertise = "127.0.0.1:18092"
	n := mustOpen(t, cfg, nil)
	res, err := n.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(1)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := n.LinearizableCatalog(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Index() < res.Index {
		t.Fatalf("linearizable read at %d misses write at %d", c.Index(), res.Index)
	}
	st := n.Status()
	if st.State != "leader" || st.Leader.ID != "n1" || st.Leader.HTTPAddr != "127.0.0.1:18092" ||
		st.AppliedIndex < res.Index || len(st.Members) != 1 || !st.Members[0].Reachable || st.Members[0].Suffrage != "Voter" {
		t.Fatalf("status = %+v", st)
	}
}

func Test_MembershipOnSingleNode(t *testing.T) {
	n := mustOpen(t, TestConfig("n1", t.TempDir()), nil)
	tests := []struct {
		name string
		op   func() error
	}{
		{"step down alone", func() error { return n.StepDown(ctx(t)) }},
		{"remove last voter", func() error { return n.Remove(ctx(t), "n1") }},
		{"join without address", func() error { return n.Join(ctx(t), api.JoinRequest{ID: "n2"}) }},
		{"join unspecified address", func() error { return n.Join(ctx(t), api.JoinRequest{ID: "n2", RaftAddr: "0.0.0.0:7000"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); !errors.Is(err, ErrMembership) {
				t.Fatalf("err = %v, want ErrMembership", err)
			}
		})
	}
	// Removing an id that is not a member is a harmless no-op.
	if err := n.Remove(ctx(t), "ghost"); err != nil {
		t.Fatal(err)
	}
}

func Test_ConfigValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "node id"},
		{"unspecified advertise", func(c *Config) { c.RaftAdvertise = "0.0.0.0:7000" }, "unspecified"},
		{"bad bind", func(c *Config) { c.RaftBind = "nope" }, "raft bind"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = time.Hour }, "lease"},
		{"initial cluster without this node", func(c *Config) {
			c.InitialCluster = []Peer{{"n2", "127.0.0.1:7002"}, {"n3", "127.0.0.1:7003"}}
		}, "does not list this node"},
		{"initial cluster at another address", func(c *Config) {
			c.RaftAdvertise = "127.0.0.1:7001"
			c.InitialCluster = []Peer{{"n1", "127.0.0.1:7009"}}
		}, "advertises 127.0.0.1:7001"},
		{"initial cluster and join", func(c *Config) {
			c.InitialCluster = []Peer{{"n1", "127.0.0.1:7001"}}
			c.Join = []string{"http://127.0.0.1:8092"}
		}, "not both"},
		{"duplicate member", func(c *Config) {
			c.InitialCluster = []Peer{{"n1", "127.0.0.1:7001"}, {"n1", "127.0.0.1:7002"}}
		}, "listed twice"},
		{"unspecified http advertise", func(c *Config) { c.HTTPAdvertise = "0.0.0.0:8092" }, "http advertise"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := TestConfig("n1", t.TempDir())
			tt.mutate(&cfg)
			if _, err := Open(cfg, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want mention of %q", err, tt.want)
			}
		})
	}
	// Binding 0.0.0.0 without an advertise address cannot work for peers.
	cfg := TestConfig("n1", t.TempDir())
	cfg.RaftBind = "0.0.0.0:0"
	if n, err := Open(cfg, nil); err == nil {
		n.Close()
		t.Fatal("opened a node advertising 0.0.0.0")
	}
}

func Test_DataDirLocked(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, TestConfig("n1", dir), nil)
	cfg := TestConfig("n1", dir)
	cfg.BoltOpenTimeout = 100 * time.Millisecond
	n, err := Open(cfg, nil)
	if err == nil {
		n.Close()
		t.Fatal("a second node opened a data dir in use")
	}
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "a kvselect node still running with --data-dir "+dir) {
		t.Fatalf("a data dir in use: %v; want %v with what to do", err, ErrDataDirInUse)
	}
}

func Test_DataDirBelongsToOneNode(t *testing.T) {
	dir := t.TempDir()
	n := mustOpen(t, TestConfig("n1", dir), nil)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := Open(TestConfig("n2", dir), nil); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("opened n1's data dir as n2: %v", err)
	}
	mustOpen(t, TestConfig("n1", dir), nil) // the owner still can
}

func Test_ParsePeers(t *testing.T) {
	tests := []struct {
		in      string
		want    []Peer
		wantErr string
	}{
		{"", nil, ""},
		{"n1=127.0.0.1:7001", []Peer{{"n1", "127.0.0.1:7001"}}, ""},
		{"n1=kv-0.kv:7092, n2=kv-1.kv:7092", []Peer{{"n1", "kv-0.kv:7092"}, {"n2", "kv-1.kv:7092"}}, ""},
		{"n1", nil, "not id=host:port"},
		{"=127.0.0.1:7001", nil, "not id=host:port"},
		{"n1=0.0.0.0:7001", nil, "unspecified"},
		{"n1=127.0.0.1:7001,n2=127.0.0.1:7001", nil, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePeers(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func Test_ParsePeerDial(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]PeerDial
		wantErr bool
	}{
		{"", map[string]PeerDial{}, false},
		{"n2=127.0.0.1:9101/127.0.0.1:9201/127.0.0.1:9301", map[string]PeerDial{"n2": {"127.0.0.1:9101", "127.0.0.1:9201", "127.0.0.1:9301"}}, false},
		{"n2=127.0.0.1:9101,n3=127.0.0.1:9102/127.0.0.1:9202", map[string]PeerDial{
			"n2": {Raft: "127.0.0.1:9101"}, "n3": {Raft: "127.0.0.1:9102", HTTP: "127.0.0.1:9202"}}, false},
		{"n2=a:1/b:2/c:3/d:4", nil, true},
		{"n2", nil, true},
		{"n2=0.0.0.0:1", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePeerDial(tt.in)
			if (err != nil) != tt.wantErr || !tt.wantErr && !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v (err %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// Test_InitialClusterWithNames forms a cluster whose members advertise DNS
// names, as StatefulSet pods do: the names stay names in the configuration
// and are resolved when dialled.
func Test_InitialClusterWithNames(t *testing.T) {
	var peers []Peer
	var lns []net.Listener
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: "localhost:" + port})
	}
	var nodes []*Node
	for i, p := range peers {
		cfg := TestConfig(p.ID, t.TempDir())
		cfg.RaftListener, cfg.RaftAdvertise, cfg.InitialCluster = lns[i], p.RaftAddr, peers
		n, err := Open(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	leader := waitLeader(t, nodes)
	res, err := leader.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.WaitApplied(ctx(t), res.Index); err != nil {
			t.Fatalf("%s: %v", n.ID(), err)
		}
		st := n.Status()
		for i, m := range st.Members {
			if m.RaftAddr != peers[i].RaftAddr {
				t.Fatalf("%s sees member %s at %s, want %s", n.ID(), m.ID, m.RaftAddr, peers[i].RaftAddr)
			}
		}
	}
}

// Test_JoinNeverRisksQuorum: a member that cannot be reached is refused,
// and one that never catches up stays a non-voter, so a one-node cluster
// keeps its leader and takes writes either way.
func Test_JoinNeverRisksQuorum(t *testing.T) {
	n := mustOpen(t, TestConfig("n1", t.TempDir()), nil)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	if err := n.Join(ctx(t), api.JoinRequest{ID: "n2", RaftAddr: closedAddr}); !errors.Is(err, ErrMembership) ||
		!strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("join of an unreachable address: %v", err)
	}
	// Something listens, but it is not a kvselect node: it is admitted as a
	// non-voter and never promoted, because it never asks.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for range 2 {
		if err := n.Join(ctx(t), api.JoinRequest{ID: "n3", RaftAddr: silent.Addr().String()}); err != nil {
			t.Fatalf("join: %v", err)
		}
	}
	st := n.Status()
	if len(st.Members) != 2 || st.Members[1].ID != "n3" || st.Members[1].Suffrage != "Nonvoter" {
		t.Fatalf("members = %+v", st.Members)
	}
	if _, err := n.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(1)}); err != nil {
		t.Fatalf("write with a silent non-voter: %v", err)
	}
	if !n.IsLeader() {
		t.Fatal("lost leadership")
	}
}

// Test_PeerDialRoutesRaftThroughProxy: with --peer-dial, n1 reaches n2's
// Raft through a proxy while the configuration keeps n2's own address.
// With a token, n1's handshake through the proxy names n2's advertised
// address, not the proxy's, so n2 accepts it.
func Test_PeerDialRoutesRaftThroughProxy(t *testing.T) {
	for _, token := range []string{"", "tok"} {
		t.Run(fmt.Sprintf("token %q", token), func(t *testing.T) { peerDialThroughProxy(t, token) })
	}
}

func peerDialThroughProxy(t *testing.T, token string) {
	peers, lns := bindPeers(t, 2)
	proxy := faultproxy.Start(t, peers[1].RaftAddr)
	var nodes []*Node
	for i, p := range peers {
		cfg := TestConfig(p.ID, t.TempDir())
		cfg.RaftListener, cfg.InitialCluster, cfg.Auth = lns[i], peers, authtoken.NewHolder(token)
		if i == 0 {
			cfg.PeerDial = map[string]PeerDial{"n2": {Raft: proxy.Addr()}}
		}
		n, err := Open(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
	})
	leader := waitLeader(t, nodes)
	// Only n1 has the override, so n1 must lead for its replication to
	// use it: a leader n2 hands over to its only peer.
	if leader != nodes[0] {
		if err := leader.StepDown(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if waitLeader(t, nodes) != nodes[0] {
			t.Fatal("n1 did not take over")
		}
	}
	res, err := nodes[0].Apply(ctx(t), fsm.UpsertWorker{Worker: worker(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.WaitApplied(ctx(t), res.Index); err != nil {
			t.Fatal(err)
		}
	}
	if proxy.Accepted() == 0 {
		t.Fatal("n1 never dialled n2 through the proxy")
	}
	for _, m := range nodes[0].Status().Members {
		if m.RaftAddr != peers[map[string]int{"n1": 0, "n2": 1}[m.ID]].RaftAddr {
			t.Fatalf("the override leaked into the configuration: %+v", m)
		}
	}
}

// bindPeers binds n Raft listeners on loopback (OS-chosen ports) and
// names them n1..n, ready for InitialCluster and Config.RaftListener.
func bindPeers(t *testing.T, n int) ([]Peer, []net.Listener) {
	t.Helper()
	peers, lns := make([]Peer, n), make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() }) // a no-op once the transport owns and closes it
		lns[i], peers[i] = ln, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: ln.Addr().String()}
	}
	return peers, lns
}

// waitLeader polls until one of nodes leads and returns it.
func waitLeader(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var leader *Node
	poll.Eventually(t, testWait, "a leader is elected", func() error {
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
				return nil
			}
		}
		return errors.New("no node leads")
	})
	return leader
}

// Test_AnnounceCommitOnlyForNewWrites: announcing a write's commit costs
// one barrier entry, and only once. A write that changed nothing answers
// with an index an earlier announcement covered; announcing it again
// writes nothing to the log (a repeated join or metadata publish through
// a follower used to add an entry every time).
func Test_AnnounceCommitOnlyForNewWrites(t *testing.T) {
	n := mustOpen(t, TestConfig("n1", t.TempDir()), nil)
	// The lease loop writes its once-per-term barrier first; after it
	// nothing writes on its own.
	poll.Eventually(t, testWait, "the term's barrier is written", func() error {
		n.mu.Lock()
		defer n.mu.Unlock()
		if term := n.raft.CurrentTerm(); n.barrierTerm != term {
			return fmt.Errorf("barrier term %d, current %d", n.barrierTerm, term)
		}
		return nil
	})
	announced := func(idx uint64) {
		t.Helper()
		n.AnnounceCommit(idx)
		poll.Eventually(t, testWait, fmt.Sprintf("index %d is announced", idx), func() error {
			if got := n.announced.Load(); got < idx {
				return fmt.Errorf("announced up to %d", got)
			}
			return nil
		})
	}
	for round := range 3 {
		res, err := n.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(uint64(round + 1))})
		if err != nil {
			t.Fatal(err)
		}
		announced(res.Index)
		if got := n.raft.LastIndex(); got != res.Index+1 {
			t.Fatalf("round %d: write at %d, last index %d: want one barrier entry", round, res.Index, got)
		}
		for range 3 {
			n.AnnounceCommit(res.Index)
			if len(n.announce) != 0 {
				t.Fatalf("round %d: a covered index asked for another barrier", round)
			}
		}
		if got := n.raft.LastIndex(); got != res.Index+1 {
			t.Fatalf("round %d: repeated announcements moved the last index to %d", round, got)
		}
	}
}
