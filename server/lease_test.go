package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_LeaseLapseDropsWorkerAndReservations: a worker registered with a
// lease and renewed through a follower lives; once renewals stop, the
// leader removes it through the log, and every node drops it together
// with the reservations booked on it and their load.
func Test_LeaseLapseDropsWorkerAndReservations(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	fs := c.Followers()
	a, b := fs[0], fs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clientOf := func(base string) *client.Client {
		cl, err := client.New(client.Config{Addrs: []string{base}, RetryTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ca, cb := clientOf(a.URL()), clientOf(b.URL())
	spec := func(id uint64, ttl uint32) api.WorkerSpec {
		return api.WorkerSpec{WorkerID: id, ModelName: "m", Endpoint: fmt.Sprintf("http://w%d", id), BlockSize: 16,
			KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1"}, LeaseTTLSeconds: ttl}
	}
	if _, err := ca.RegisterWorker(ctx, spec(1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.RegisterWorker(ctx, spec(2, 0)); err != nil {
		t.Fatal(err)
	}
	lease, err := ca.KeepAlive(ctx, 1) // through follower a, to the leader
	if err != nil || lease.LeaseTTLSeconds != 1 || lease.ExpiresInMs != 1000 {
		t.Fatalf("keepalive through a follower: %+v %v", lease, err)
	}
	// Book on worker 1 through follower b (it has applied the
	// registration: session consistency carries the index).
	cb.ObserveCatalogIndex(ca.CatalogIndex())
	toks := make([]uint32, 64)
	for i := range toks {
		toks[i] = uint32(i + 1)
	}
	var booked bool
	for i := 0; i < 16 && !booked; i++ {
		sel, err := cb.SelectAndReserve(ctx, api.SelectRequest{Prompt: api.Prompt{ModelName: "m", TokenIDs: toks}, ReservationID: api.ID(fmt.Sprintf("r%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		booked = sel.WorkerID == 1
	}
	if !booked {
		t.Fatal("nothing booked on worker 1 in 16 tries")
	}

	servertest.Eventually(t, "worker 1's lease lapses on every node", func() error {
		for _, s := range c.Live() {
			cat, err := servertest.Catalog(s)
			if err != nil {
				return err
			}
			if _, ok := cat.Worker(1); ok {
				return fmt.Errorf("%s still has worker 1", s.Node.ID())
			}
		}
		return nil
	})
	for _, s := range c.Live() {
		if _, ok := s.Node.Catalog().Worker(2); !ok {
			t.Fatalf("%s lost worker 2, which has no lease", s.Node.ID())
		}
	}
	loads, err := cb.Loads(ctx, "m", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range loads {
		for _, wl := range pl.Loads {
			if wl.WorkerID == 1 {
				t.Fatalf("load of the expired worker remains on %s: %+v", b.Node.ID(), wl)
			}
		}
	}
	page, err := cb.Reservations(ctx, api.ReservationsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Reservations {
		if r.WorkerID == 1 {
			t.Fatalf("reservation %s on the expired worker remains: %+v", r.ReservationID, r)
		}
	}
	_, err = ca.KeepAlive(ctx, 1)
	var e *client.Error
	if !errors.As(err, &e) || e.Code != api.CodeNotFound {
		t.Fatalf("keepalive after the lapse: %v", err)
	}
	var expired float64
	for _, s := range c.Live() {
		v, _ := scrapeNode(t, s).value("kvselect_worker_leases_expired_total", nil)
		expired += v
	}
	if expired != 1 {
		t.Fatalf("the leaders counted %v expiries, want 1", expired)
	}
}

// Test_KVSimKeepsLeasesAndLetsThemLapse: kvsim registers its workers with
// a lease and renews them through a follower; a worker deleted behind its
// back is registered again at the next round, also once the node kvsim
// registered through has stopped; once kvsim stops renewing, every node
// drops its workers.
func Test_KVSimKeepsLeasesAndLetsThemLapse(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	follower := c.Followers()[0]
	sim, err := kvsim.Start(kvsim.Config{Workers: 2, BlockSize: 16, CacheBlocks: 64, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sim.Register(ctx, follower.URL()); err != nil {
		t.Fatal(err)
	}
	keep, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sim.KeepLeases(keep, follower.URL())
	}()
	defer func() { stop(); <-done }()

	everyNode := func(what string, want bool, ids ...uint64) {
		t.Helper()
		servertest.Eventually(t, what, func() error {
			for _, s := range c.Live() {
				cat, err := servertest.Catalog(s)
				if err != nil {
					return err
				}
				for _, id := range ids {
					if _, ok := cat.Worker(id); ok != want {
						return fmt.Errorf("%s: worker %d present=%v", s.Node.ID(), id, ok)
					}
				}
			}
			return nil
		})
	}
	everyNode("both workers registered with their lease", true, 1, 2)
	if w, _ := c.Leader().Node.Catalog().Worker(1); w.LeaseTTLSeconds != 1 {
		t.Fatalf("registered without the lease: %+v", w)
	}
	cl, err := client.New(client.Config{Addrs: []string{c.Leader().URL()}, RetryTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteWorker(ctx, 2); err != nil {
		t.Fatal(err)
	}
	everyNode("kvsim registers the deleted worker again", true, 2)

	// The node kvsim registered through stops: renewals go on through
	// the others (another deletion comes back again).
	c.Stop(c.Index(follower))
	cl, err = client.New(client.Config{Addrs: []string{c.Leader().URL()}, RetryTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteWorker(ctx, 2); err != nil {
		t.Fatal(err)
	}
	everyNode("kvsim registers it again through another node", true, 1, 2)

	stop()
	<-done
	everyNode("kvsim stopped: its workers' leases lapse", false, 1, 2)
}
