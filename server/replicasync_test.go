package server_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/tcpproxy"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/scheduler/replica"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
	"github.com/kvselect/kvselect/zmqsync"
)

// syncCluster is a cluster with replica sync on, no peer list, and two
// kvsim workers registered through the leader.
type syncCluster struct {
	t     *testing.T
	c     *servertest.Cluster
	sim   *kvsim.Sim
	token string // the admin token, when the nodes have one
	// proxies[i] is before node i's Raft port (syncOptions.raftProxies).
	proxies []*tcpproxy.Proxy
}

// testAntiEntropyPeriod is the tests' anti-entropy period: short, so that
// healing takes a fraction of a second, long enough for a loaded machine.
const testAntiEntropyPeriod = 200 * time.Millisecond

func withReplicaSync(_ int, cfg *server.Config) {
	cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0", AntiEntropyPeriod: testAntiEntropyPeriod}
}

// syncOptions shape a syncCluster.
type syncOptions struct {
	nodes int
	token string
	// raftProxies puts a proxy before every node's Raft port (syncCluster.proxies).
	raftProxies bool
}

func startSyncCluster(t *testing.T) *syncCluster {
	t.Helper()
	return startSyncClusterWith(t, syncOptions{})
}

func startSyncClusterWith(t *testing.T, o syncOptions) *syncCluster {
	t.Helper()
	n := cmp.Or(o.nodes, 3)
	var proxies []*tcpproxy.Proxy
	if o.raftProxies {
		proxies = newProxies(t, n)
	}
	c := servertest.StartCluster(t, n, func(i int, cfg *server.Config) {
		withReplicaSync(i, cfg)
		cfg.AuthToken = o.token
		if proxies != nil {
			viaRaftProxies(proxies)(i, cfg)
		}
	})
	sim, err := kvsim.Start(kvsim.Config{Workers: 2, BlockSize: e2eBS, CacheBlocks: 64, AuthToken: o.token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sim.Register(ctx, c.Leader().URL()); err != nil {
		t.Fatal(err)
	}
	sc := &syncCluster{t: t, c: c, sim: sim, token: o.token, proxies: proxies}
	sc.waitMeshed()
	return sc
}

// waitMeshed waits until every running node has applied the whole catalog
// and follows every other running node's replica sync, actively.
func (sc *syncCluster) waitMeshed() {
	sc.t.Helper()
	leader := sc.c.Leader()
	servertest.Eventually(sc.t, "every node follows every other node's replica sync", func() error {
		for _, s := range sc.c.Live() {
			if cat, err := servertest.Catalog(s); err != nil {
				return err
			} else if cat.Index() < leader.Node.Catalog().Index() {
				return fmt.Errorf("%s is behind the leader's catalog", s.Node.ID())
			}
			var want []string
			for _, o := range sc.c.Live() {
				if o != s {
					want = append(want, o.Sync().Advertised())
				}
			}
			slices.Sort(want)
			var got []string
			for _, p := range s.Sync().Peers() {
				if p.State != zmqsync.StateActive {
					return fmt.Errorf("%s: peer %s is %s (%s)", s.Node.ID(), p.Endpoint, p.State, p.LastError)
				}
				got = append(got, p.Endpoint)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s follows %v, want %v", s.Node.ID(), got, want)
			}
		}
		return nil
	})
	// A subscription that reports active may still be in flight to its
	// publisher: probe every pair with a booking until it shows.
	for _, s := range sc.c.Live() {
		probe := "probe-" + s.Node.ID()
		cl := sc.client(s)
		ctx := context.Background()
		servertest.Eventually(sc.t, "a booking on "+s.Node.ID()+" reaches every node", func() error {
			_ = cl.Free(ctx, probe)
			if _, err := cl.Reserve(ctx, api.ReserveRequest{ReservationID: api.ID(probe), WorkerID: api.Ptr(uint64(1)),
				Prompt: api.Prompt{SequenceHashes: []uint64{99}, ISLTokens: 16}}); err != nil {
				return err
			}
			for _, o := range sc.c.Live() {
				if _, err := o.Scheduler.Reservation(probe); err != nil {
					return fmt.Errorf("%s: %w", o.Node.ID(), err)
				}
			}
			return nil
		})
		if err := cl.Free(ctx, probe); err != nil {
			sc.t.Fatal(err)
		}
	}
	sc.waitLoads("the probes are freed everywhere", func(l api.RankLoad) bool { return l.ActiveRequests == 0 })
}

// fakeMember starts a replica-sync publisher that the cluster takes for
// one of its members: the catalog gets (through leader) a node record for
// id with an incarnation, so an epoch, and the syncer publishes as id, in
// the cluster, in that epoch, with token. register makes the nodes under
// test follow it. It stands for a node of the cluster a test drives by
// hand.
func fakeMember(t *testing.T, leader *server.Server, id, token string, register func(endpoint string)) *zmqsync.Syncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	servertest.Eventually(t, "the cluster has an id", func() error {
		if leader.Node.ClusterID().IsZero() {
			return errors.New("not yet")
		}
		return nil
	})
	res, err := leader.Node.Apply(ctx, fsm.SetNode{Node: fsm.NodeMeta{ID: id, HTTPAddr: "127.0.0.1:1", Incarnation: 7}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := zmqsync.Start(zmqsync.Config{NodeID: id, Listen: "tcp://127.0.0.1:0", Auth: authtoken.NewHolder(token),
		Apply: func(string, *replica.Event) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.SetIdentity(zmqsync.Identity{ClusterID: zmqsync.ClusterID(leader.Node.ClusterID()), Epoch: res.Index})
	register(p.Endpoint())
	return p
}

// client is a client whose home is node s (bookings go there).
func (sc *syncCluster) client(s *server.Server) *client.Client {
	sc.t.Helper()
	cl, err := client.New(client.Config{Addrs: []string{s.URL()}, Token: sc.token})
	if err != nil {
		sc.t.Fatal(err)
	}
	return cl
}

// waitLoads waits until every node's /loads are the same and every row
// passes ok.
func (sc *syncCluster) waitLoads(what string, ok func(api.RankLoad) bool) []api.PartitionLoads {
	sc.t.Helper()
	var first []api.PartitionLoads
	servertest.Eventually(sc.t, what, func() error {
		first = nil
		for i, s := range sc.c.Live() {
			got, err := sc.client(s).Loads(context.Background(), "", "")
			if err != nil {
				return err
			}
			if i == 0 {
				first = got
			} else if !reflect.DeepEqual(got, first) {
				return fmt.Errorf("%s has loads %+v, %s %+v", s.Node.ID(), got, sc.c.Live()[0].Node.ID(), first)
			}
		}
		for _, pl := range first {
			for _, l := range pl.Loads {
				if !ok(l) {
					return fmt.Errorf("load %+v", l)
				}
			}
		}
		return nil
	})
	return first
}

// Test_ReplicaSyncLifecycle: a booking on one node counts on every node;
// prefill_complete on a second and free on a third bring every node's load
// back to exactly zero; the id is taken everywhere meanwhile.
func Test_ReplicaSyncLifecycle(t *testing.T) {
	sc := startSyncCluster(t)
	nodes := sc.c.Live()
	a, b, c := sc.client(nodes[0]), sc.client(nodes[1]), sc.client(nodes[2])
	ctx := context.Background()
	prompt := api.Prompt{TokenIDs: make([]uint32, 4*e2eBS)}
	for i := range prompt.TokenIDs {
		prompt.TokenIDs[i] = uint32(i + 1)
	}
	sel, err := a.SelectAndReserve(ctx, api.SelectRequest{Prompt: prompt, ReservationID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	loads := sc.waitLoads("the booking counts on every node", func(l api.RankLoad) bool {
		return l.WorkerID != sel.WorkerID || l.ActiveRequests == 1
	})
	t.Logf("loads everywhere: %+v", loads)
	info, err := b.Reservation(ctx, "r1")
	if err != nil || info.Origin != api.OriginPeer || info.OriginNode != nodes[0].Node.ID() || info.Blocks != 4 {
		t.Fatalf("r1 on %s: %+v, %v", nodes[1].Node.ID(), info, err)
	}
	if info, err := a.Reservation(ctx, "r1"); err != nil || info.Origin != api.OriginLocal {
		t.Fatalf("r1 on the booking node: %+v, %v", info, err)
	}
	// Taken everywhere once the admission arrived: another prompt under
	// the id is a conflict; the same prompt (a retry that failed over) gets
	// the booking back, booking nothing (SPEC §3.3).
	other := api.Prompt{TokenIDs: append(api.TokenIDs{}, prompt.TokenIDs[:len(prompt.TokenIDs)-1]...)}
	_, err = c.SelectAndReserve(ctx, api.SelectRequest{Prompt: other, ReservationID: "r1"})
	if client.CodeOf(err) != api.CodeConflict {
		t.Fatalf("r1 booked again on %s: %v", nodes[2].Node.ID(), err)
	}
	var info3 client.ResponseInfo
	again, err := c.SelectAndReserve(client.WithResponseInfo(ctx, &info3), api.SelectRequest{Prompt: prompt, ReservationID: "r1"})
	if err != nil || !info3.Replayed || again.WorkerID != sel.WorkerID || again.DPRank != sel.DPRank {
		t.Fatalf("a retry of r1 on %s: %+v %v (replayed %v), booked %+v", nodes[2].Node.ID(), again, err, info3.Replayed, sel)
	}
	if err := b.PrefillComplete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	sc.waitLoads("prefill_complete on b clears the prefill everywhere", func(l api.RankLoad) bool {
		return l.ActivePrefillTokens == 0
	})
	if err := c.OutputBlock(ctx, "r1", nil); err != nil { // local to c
		t.Fatal(err)
	}
	if err := c.Free(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	sc.waitLoads("the free on c ends it everywhere, to exactly zero", func(l api.RankLoad) bool {
		return l == api.RankLoad{WorkerID: l.WorkerID, DPRank: l.DPRank}
	})
	for i, cl := range []*client.Client{a, b, c} {
		if _, err := cl.Reservation(ctx, "r1"); client.CodeOf(err) != api.CodeNotFound {
			t.Fatalf("node %d still has r1: %v", i+1, err)
		}
	}
}

// Test_ReplicaSyncSteers: bookings on one node steer the next selection on
// another away from the loaded worker.
func Test_ReplicaSyncSteers(t *testing.T) {
	sc := startSyncCluster(t)
	nodes := sc.c.Live()
	a, b := sc.client(nodes[0]), sc.client(nodes[1])
	ctx := context.Background()
	prompt := func(tag uint32) api.Prompt {
		p := api.Prompt{TokenIDs: make([]uint32, 8*e2eBS)}
		for i := range p.TokenIDs {
			p.TokenIDs[i] = tag*1000 + uint32(i)
		}
		return p
	}
	first, err := b.Select(ctx, api.SelectRequest{Prompt: prompt(1)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := a.Reserve(ctx, api.ReserveRequest{ReservationID: api.ID(fmt.Sprint("busy-", i)), WorkerID: api.Ptr(first.WorkerID),
			Prompt: prompt(uint32(10 + i))}); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, "b sends the prompt to the other worker", func() error {
		sel, err := b.Select(ctx, api.SelectRequest{Prompt: prompt(1)})
		if err != nil {
			return err
		}
		if sel.WorkerID == first.WorkerID {
			return fmt.Errorf("still worker %d", sel.WorkerID)
		}
		return nil
	})
}

// Test_ReplicaSyncDropsWhatItCannotPlace: replica traffic never creates
// workers; what does not fit this node's catalog is dropped and counted.
func Test_ReplicaSyncDropsWhatItCannotPlace(t *testing.T) {
	sc := startSyncCluster(t)
	b := sc.c.Live()[1]
	ctx := context.Background()
	rogue := fakeMember(t, sc.c.Leader(), "rogue", "", func(endpoint string) {
		if created, err := sc.client(b).RegisterReplicaSyncPeer(ctx, endpoint); err != nil || !created {
			t.Fatalf("register the rogue: %v %v", created, err)
		}
	})
	ev := replica.Event{Kind: replica.KindAdmission, Model: "default", Tenant: "default", WorkerID: 99,
		BlockSize: e2eBS, SequenceHashes: []uint64{1}, ISL: 16, PrefillTokens: 16, Admitted: time.Now()}
	servertest.Eventually(t, "b counts the admission for an unknown worker as dropped", func() error {
		ev.ReservationID = fmt.Sprint("ghost-", time.Now().UnixNano())
		rogue.Publish(ev)
		for _, p := range b.Sync().Peers() {
			if p.Endpoint == rogue.Endpoint() && p.Dropped > 0 {
				return nil
			}
		}
		return errors.New("not yet")
	})
	_, metrics := get(t, b.URL()+api.PathMetrics)
	if !strings.Contains(metrics, `kvselect_replica_sync_dropped_events_total{reason="unknown_rank"}`) ||
		strings.Contains(metrics, `kvselect_replica_sync_dropped_events_total{reason="unknown_rank"} 0`) {
		t.Fatalf("no unknown_rank drop counted in /metrics")
	}
	if page, err := sc.client(b).Reservations(ctx, api.ReservationsQuery{}); err != nil || len(page.Reservations) != 0 {
		t.Fatalf("a ghost booking was made: %+v %v", page, err)
	}
	// Deregistered, the rogue is no longer followed.
	if err := sc.client(b).DeregisterReplicaSyncPeer(ctx, rogue.Endpoint()); err != nil {
		t.Fatal(err)
	}
	peers, err := sc.client(b).ReplicaSyncPeers(ctx)
	if err != nil || slices.Contains(peers, rogue.Endpoint()) || len(peers) != 2 || !slices.IsSorted(peers) {
		t.Fatalf("peers after deregistering: %+v %v", peers, err)
	}
	st, err := sc.client(b).ReplicaSyncStatus(ctx)
	if err != nil || !st.Enabled || st.Endpoint == "" || len(st.Peers) != 2 || st.Peers[0].Endpoint != peers[0] ||
		st.Peers[0].NodeID == "" || !slices.Equal(st.Peers[0].Sources, []string{api.PeerSourceMember}) {
		t.Fatalf("status after deregistering: %+v %v", st, err)
	}
}

// Test_ReplicaSyncFollowsMembership: a node that crashes and comes back
// (on another port) is followed again; a node that joins is followed by
// every member and follows them; one that leaves is dropped.
func Test_ReplicaSyncFollowsMembership(t *testing.T) {
	sc := startSyncCluster(t)
	victim := sc.c.Index(sc.c.Followers()[0])
	sc.c.Crash(victim)
	sc.c.Restart(victim)
	sc.c.WaitConverged()
	sc.waitMeshed() // bookings on the restarted node reach the others and back

	joiner := sc.c.Add(sc.c.Leader().URL())
	sc.c.WaitConverged()
	sc.waitMeshed()

	ctx := context.Background()
	if _, err := sc.client(sc.c.Leader()).Remove(ctx, joiner.Node.ID()); err != nil {
		t.Fatal(err)
	}
	gone := joiner.Sync().Advertised()
	sc.c.Stop(sc.c.Index(joiner))
	// It is followed a while longer as departed (zmqsync's linger), no
	// longer as a member.
	servertest.Eventually(t, "every member drops the node that left", func() error {
		for _, s := range sc.c.Live() {
			for _, p := range s.Sync().Peers() {
				if p.Endpoint == gone && !slices.Equal(p.Sources, []zmqsync.Source{zmqsync.SourceDeparted}) {
					return fmt.Errorf("%s still follows %s as %v", s.Node.ID(), gone, p.Sources)
				}
			}
		}
		return nil
	})
}
