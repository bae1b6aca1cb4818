package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// withAutoReplicaSync is kvselect's default (SPEC §2): replica sync on an
// OS-chosen port once the node has a second member.
func withAutoReplicaSync(_ int, cfg *server.Config) {
	cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0", AntiEntropyPeriod: testAntiEntropyPeriod, Auto: true}
}

// Test_ReplicaSyncStartsWhenASecondMemberJoins: a node alone in its
// cluster runs without replica sync, as Dynamo's does without the flag
// (peers [], register_peer 409); once a node joins it, both share load,
// its earlier bookings included, without a flag or a peer list: the lone
// node publishes its endpoint in its catalog metadata then.
func Test_ReplicaSyncStartsWhenASecondMemberJoins(t *testing.T) {
	c := servertest.StartCluster(t, 1, withAutoReplicaSync)
	lone := c.Nodes[0]
	sc := &syncCluster{t: t, c: c}
	ctx := context.Background()
	cl := sc.client(lone)

	if lone.Sync() != nil {
		t.Fatal("replica sync runs on a node alone in its cluster")
	}
	if peers, err := cl.ReplicaSyncPeers(ctx); err != nil || peers == nil || len(peers) != 0 {
		t.Fatalf("GET /replica_sync/peers on the lone node = %#v, %v; want []", peers, err)
	}
	if _, err := cl.RegisterReplicaSyncPeer(ctx, "tcp://127.0.0.1:1"); client.CodeOf(err) != api.CodeConflict {
		t.Fatalf("register_peer on the lone node: %v, want 409 conflict", err)
	}
	if st, err := cl.ReplicaSyncStatus(ctx); err != nil || st.Enabled {
		t.Fatalf("GET /replica_sync/status on the lone node = %+v, %v; want disabled", st, err)
	}

	sim, err := kvsim.Start(kvsim.Config{Workers: 2, BlockSize: e2eBS, CacheBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	regCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sim.Register(regCtx, lone.URL()); err != nil {
		t.Fatal(err)
	}
	sc.sim = sim
	const early = "booked-alone"
	if _, err := cl.Reserve(ctx, api.ReserveRequest{ReservationID: api.ID(early), WorkerID: api.Ptr(uint64(1)),
		Prompt: api.Prompt{SequenceHashes: []uint64{7}, ISLTokens: 16}}); err != nil {
		t.Fatal(err)
	}

	joiner := c.Add(lone.URL())
	c.WaitConverged()
	servertest.Eventually(t, "the booking made while alone reaches the joiner", func() error {
		_, err := joiner.Scheduler.Reservation(early)
		return err
	})
	if err := cl.Free(ctx, early); err != nil {
		t.Fatal(err)
	}
	sc.waitMeshed() // both follow each other, bookings cross both ways, and every load is back to 0
	servertest.Eventually(t, "the lone node's endpoint is in its catalog metadata", func() error {
		for _, s := range c.Live() {
			m, ok := s.Node.Catalog().Node(lone.Node.ID())
			if !ok || m.ReplicaSync != lone.Sync().Advertised() {
				return fmt.Errorf("%s has %s's record %+v, want replica sync %s", s.Node.ID(), lone.Node.ID(), m, lone.Sync().Advertised())
			}
		}
		return nil
	})
}
