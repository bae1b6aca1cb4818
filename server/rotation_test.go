package server_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_TokenRotationWithoutOutage rotates both tokens of a running
// cluster the way the README says, one node at a time, each step a file
// rewrite and the reload SIGHUP triggers:
//
//	phase 1: every node "old\nnew"   (sends old, accepts both)
//	phase 2: every node "new\nold"   (sends new, accepts both)
//	         clients switch to new
//	phase 3: every node "new"
//
// After every step it probes every node as a client would (a booking, its
// mirror on every other node through replica sync, its free, a catalog
// write and a keepalive forwarded to the leader) and checks that no node
// has answered 401 or 403 to anyone, nor dropped a replica-sync message as
// unauthenticated, since the cluster started: the node's own calls (join,
// metadata, /dump for recovery, forwards) and the MACs included. In the
// middle of phase 2 a phase-1 node restarts (its index recovery fetches a
// peer's /dump with its token) and a fourth node joins through it with
// phase-2 files. At the end, the old tokens are refused everywhere; and a
// one-line rotation of one node, as before two-line files, is seen by the
// same checks as the outage it is. Raft connections are authenticated with
// the same tokens (cluster/raftauth.go) and checked alike: none refused
// all along, and the control's refused.
func Test_TokenRotationWithoutOutage(t *testing.T) {
	dir := t.TempDir()
	files := func(i int) (admin, selection string) {
		return filepath.Join(dir, fmt.Sprintf("n%d-admin", i+1)), filepath.Join(dir, fmt.Sprintf("n%d-selection", i+1))
	}
	// write gives node i's files the phase's contents.
	write := func(i int, ph phase) {
		t.Helper()
		admin, selection := files(i)
		writeToken(t, admin, ph.admin, 0o600)
		writeToken(t, selection, ph.selection, 0o600)
	}
	// fromFiles is what kvselect's main does at start: read the files.
	fromFiles := func(i int, cfg *server.Config) {
		admin, selection := files(i)
		var err error
		if cfg.AuthToken, cfg.AuthTokenAlso, err = authtoken.ReadFile(admin); err != nil {
			t.Error(err)
		}
		if cfg.SelectionToken, cfg.SelectionTokenAlso, err = authtoken.ReadFile(selection); err != nil {
			t.Error(err)
		}
		cfg.AuthTokenFile, cfg.SelectionTokenFile = admin, selection
		cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"}
	}
	start := phase{"start", "old", "sel-old"}
	for i := range 4 {
		write(i, start)
	}
	c := servertest.StartCluster(t, 3, fromFiles)
	r := &rotation{t: t, c: c, admin: "old", selection: "sel-old"}

	// One engine (kvsim) to select, and a leased worker in another model
	// to keep alive.
	sim, err := kvsim.Start(kvsim.Config{Workers: 1, BlockSize: 16, CacheBlocks: 64, AuthToken: "old"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sim.Register(ctx, c.Leader().URL()); err != nil {
		t.Fatal(err)
	}
	leased := `{"worker_id": 2, "model_name": "leased", "endpoint": "http://w2", "block_size": 16,
		"kv_events_endpoint": "tcp://127.0.0.1:1", "lease_ttl_s": 3600}`
	if rep := call(t, "POST", c.Leader().URL()+api.PathWorkers, leased, r.as(r.admin)...); rep.status != 201 {
		t.Fatalf("register the leased worker: %d %s", rep.status, rep.body)
	}
	r.waitMeshed()
	r.probe("at start")

	reload := func(i int, ph phase) {
		t.Helper()
		write(i, ph)
		if err := c.Nodes[i].ReloadAuthToken(); err != nil {
			t.Fatalf("reload n%d: %v", i+1, err)
		}
		r.probe(fmt.Sprintf("%s, n%d reloaded", ph.name, i+1))
	}
	phase1 := phase{"phase 1", "old\nnew", "sel-old\nsel-new"}
	phase2 := phase{"phase 2", "new\nold", "sel-new\nsel-old"}
	phase3 := phase{"phase 3", "new", "sel-new"}

	for i := range 3 {
		reload(i, phase1)
	}
	r.clientsAlso("new", "sel-new") // every node accepts the new tokens: clients may switch from now on
	r.probe("phase 1 done, clients with either token")

	reload(0, phase2)
	// n3, still in phase 1, restarts: it sends old (n1 accepts it as its
	// second line) when it recovers its index from a peer's /dump.
	served := func() float64 { // by n1 and n2, which keep running
		return r.total("kvselect_http_requests_total", map[string]string{"route": api.PathDump, "status": "200"}, c.Nodes[0], c.Nodes[1])
	}
	dumps := served()
	c.Stop(2)
	c.RestartWith(2, func(cfg *server.Config) { fromFiles(2, cfg) })
	servertest.Eventually(t, "n3 recovers its index from a peer", func() error {
		if c.Nodes[2].Recovering() {
			return errors.New("still recovering")
		}
		if got := served(); got <= dumps {
			return fmt.Errorf("no peer served a /dump (%v before, %v now)", dumps, got)
		}
		return nil
	})
	r.waitMeshed()
	r.probe("phase 2, n3 restarted in phase 1")
	// A new node in phase 2 joins through n3, in phase 1: it sends new,
	// which n3 accepts as its second line, and n3 forwards as itself.
	write(3, phase2)
	c.Add(c.Nodes[2].URL())
	c.WaitConverged()
	r.waitMeshed()
	r.probe("phase 2, n4 joined")
	for i := 1; i < 4; i++ {
		reload(i, phase2)
	}

	r.clients("new", "sel-new")
	r.probe("phase 2 done, clients switched")
	for i := range 4 {
		reload(i, phase3)
	}
	for _, s := range c.Live() {
		for _, tok := range []string{"old", "sel-old"} {
			if rep := call(t, "GET", s.URL()+api.PathLoads, "", r.as(tok)...); rep.status != 401 {
				t.Fatalf("%s after the rotation: %s answered %d", s.Node.ID(), tok, rep.status)
			}
		}
	}

	// The control: one node alone switched to a one-line file of another
	// token. Its forwarded writes and its replica-sync messages are
	// refused, and the checks above see it.
	f := c.Followers()[0]
	admin, _ := files(c.Index(f))
	writeToken(t, admin, "newer", 0o600)
	if err := f.ReloadAuthToken(); err != nil {
		t.Fatal(err)
	}
	var patch reply
	servertest.Eventually(t, "a write forwarded by the node with another token gets an answer other than 503", func() error {
		if patch = call(t, "PATCH", f.URL()+"/workers/2", `{"endpoint": "http://w2-control"}`, r.as("newer")...); patch.status == 503 {
			return fmt.Errorf("%d %s", patch.status, patch.body)
		}
		return nil
	})
	if patch.status != 401 {
		t.Fatalf("a write forwarded by the node with another token: %d %s, want the leader's 401", patch.status, patch.body)
	}
	book := call(t, "POST", f.URL()+api.PathSelectAndReserve, booking("control"), r.as("sel-new")...)
	if book.status != 200 {
		t.Fatalf("booking on %s: %d %s", f.Node.ID(), book.status, book.body)
	}
	servertest.Eventually(t, "the others drop its replica-sync messages as unauthenticated", func() error {
		if n := r.total("kvselect_replica_sync_dropped_messages_total", map[string]string{"reason": "unauthenticated"}); n == 0 {
			return errors.New("no unauthenticated drop yet")
		}
		return nil
	})
	if r.refusals() == 0 {
		t.Fatal("the outage check does not see a refused forward")
	}
	// Raft: the node drops the connections it accepted under new, and
	// refuses the leader's next ones.
	servertest.Eventually(t, "Raft connections to the node with another token are refused", func() error {
		if r.raftRefusals() == 0 {
			return errors.New("none yet")
		}
		return nil
	})
}

// phase is the content of every node's token files at one step.
type phase struct{ name, admin, selection string }

// rotation probes a cluster as its clients would.
type rotation struct {
	t                *testing.T
	c                *servertest.Cluster
	admin, selection string // the tokens clients send
	alsoAdmin        string // a second token clients may send ("" none)
	alsoSelection    string
	probes           int
}

func (r *rotation) clients(admin, selection string) {
	r.admin, r.selection, r.alsoAdmin, r.alsoSelection = admin, selection, "", ""
}

func (r *rotation) clientsAlso(admin, selection string) {
	r.alsoAdmin, r.alsoSelection = admin, selection
}

// as is the Authorization header with token, for call.
func (r *rotation) as(token string) []string { return []string{"Authorization", "Bearer " + token} }

// booking is a select_and_reserve body of a 17-token prompt with reservation id.
func booking(id string) string {
	return fmt.Sprintf(`{"token_ids": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17], "reservation_id": %q}`, id)
}

// probe checks every node as a client: a booking on it, mirrored on every
// other node, freed; a catalog write and a keepalive through it (forwarded
// by a follower); with every token clients may send. Then that no node
// has refused anyone since the start.
func (r *rotation) probe(when string) {
	r.t.Helper()
	type creds struct{ admin, selection string }
	all := []creds{{r.admin, r.selection}}
	if r.alsoAdmin != "" {
		all = append(all, creds{r.alsoAdmin, r.alsoSelection})
	}
	live := r.c.Live()
	for _, cr := range all {
		for _, s := range live {
			r.probes++
			id := fmt.Sprintf("probe-%d", r.probes)
			if rep := call(r.t, "POST", s.URL()+api.PathSelectAndReserve, booking(id), r.as(cr.selection)...); rep.status != 200 {
				r.t.Fatalf("%s: booking on %s with %s: %d %s", when, s.Node.ID(), cr.selection, rep.status, rep.body)
			}
			for _, o := range live {
				if o == s {
					continue
				}
				servertest.Eventually(r.t, fmt.Sprintf("%s: %s mirrors %s's booking", when, o.Node.ID(), s.Node.ID()), func() error {
					if rep := call(r.t, "GET", o.URL()+"/reservations/"+id, "", r.as(cr.selection)...); rep.status != 200 {
						return fmt.Errorf("%d %s", rep.status, rep.body)
					}
					return nil
				})
			}
			if rep := call(r.t, "DELETE", s.URL()+"/reservations/"+id, "", r.as(cr.selection)...); rep.status != 200 {
				r.t.Fatalf("%s: free on %s: %d %s", when, s.Node.ID(), rep.status, rep.body)
			}
			patch := fmt.Sprintf(`{"endpoint": "http://w2-%d"}`, r.probes)
			r.leaderWrite(when, s, "PATCH", "/workers/2", patch, cr.admin)
			r.leaderWrite(when, s, "POST", "/workers/2/keepalive", "", cr.selection)
		}
	}
	if n := r.refusals(); n != 0 {
		r.t.Fatalf("%s: the nodes have answered 401 or 403 %v times", when, n)
	}
	if n := r.total("kvselect_replica_sync_dropped_messages_total", map[string]string{"reason": "unauthenticated"}); n != 0 {
		r.t.Fatalf("%s: %v replica-sync messages dropped as unauthenticated", when, n)
	}
	if n := r.raftRefusals(); n != 0 {
		r.t.Fatalf("%s: %v Raft connections refused for their token", when, n)
	}
}

// raftRefusals counts the Raft connections every running node refused
// because the peer did not prove a token the node accepts (or did not
// try), either way.
func (r *rotation) raftRefusals() float64 {
	var n float64
	for _, reason := range []string{"bad_mac", "refused", "no_handshake", "wrong_address"} {
		n += r.total("kvselect_raft_connections_refused_total", map[string]string{"reason": reason})
	}
	return n
}

// leaderWrite sends a leader-only request through s, which forwards it
// when it follows. Both requests of the probe are idempotent, so it is
// sent again while the answer is a 503 (a leader change in the middle of
// a membership change is no outage of authentication); any other answer
// but 200 fails the test.
func (r *rotation) leaderWrite(when string, s *server.Server, method, path, body, token string) {
	r.t.Helper()
	servertest.Eventually(r.t, fmt.Sprintf("%s: %s %s through %s", when, method, path, s.Node.ID()), func() error {
		rep := call(r.t, method, s.URL()+path, body, r.as(token)...)
		switch rep.status {
		case 200:
			return nil
		case 503:
			return fmt.Errorf("%d %s", rep.status, rep.body)
		}
		r.t.Fatalf("%s: %s %s through %s with %s: %d %s", when, method, path, s.Node.ID(), token, rep.status, rep.body)
		return nil
	})
}

// refusals counts the 401 and 403 answers of every running node.
func (r *rotation) refusals() float64 {
	return r.total("kvselect_http_requests_total", map[string]string{"status": "401"}) +
		r.total("kvselect_http_requests_total", map[string]string{"status": "403"})
}

// total sums a metric over nodes (default: the running ones), read from
// their registries.
func (r *rotation) total(family string, labels map[string]string, nodes ...*server.Server) float64 {
	r.t.Helper()
	if len(nodes) == 0 {
		nodes = r.c.Live()
	}
	var sum float64
	for _, s := range nodes {
		v, _ := gather(r.t, s).value(family, labels)
		sum += v
	}
	return sum
}

// waitMeshed waits until every running node has the whole catalog and
// follows every other one's replica sync.
func (r *rotation) waitMeshed() {
	r.t.Helper()
	sc := &syncCluster{t: r.t, c: r.c, token: r.admin}
	sc.waitMeshed()
}
