package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// shedModel is the model of the load-shedding tests (the one the
// replica-sync probes of waitMeshed book on): two one-rank
// workers of 4 KV blocks each.
const shedModel = "default"

func nodeClient(t *testing.T, s *server.Server) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Addrs: []string{s.URL()}, RetryTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// candidates returns the workers a selection on s may pick, "overloaded"
// when it sheds the request, or another error's code.
func candidates(ctx context.Context, cl *client.Client) (string, error) {
	seen := map[uint64]bool{}
	hot := 1e9 // samples the candidates uniformly, whatever their cost
	for i := range 32 {
		sel, err := cl.Select(ctx, api.SelectRequest{Prompt: api.Prompt{ModelName: shedModel,
			BlockHashes: api.Hashes{uint64(500 + i)}, SequenceHashes: api.Hashes{uint64(500 + i)}, ISLTokens: 16},
			RouterConfigOverride: &api.RouterConfigOverride{RouterTemperature: &hot}})
		if code := client.CodeOf(err); code != "" {
			return string(code), nil
		}
		if err != nil {
			return "", err
		}
		seen[sel.WorkerID] = true
	}
	var ws []uint64
	for w := range seen {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	return fmt.Sprint(ws), nil
}

// Test_LoadSheddingAcrossTheCluster: the initial thresholds of the
// command line reach every model once; bookings made on one node (and
// mirrored by replica sync) make the same workers busy on all three; when
// every worker is busy every node sheds; thresholds survive a restart and
// a leader change, and a cleared model does not get the initial values
// back.
func Test_LoadSheddingAcrossTheCluster(t *testing.T) {
	half := 0.5
	c := servertest.StartCluster(t, 3, func(i int, cfg *server.Config) {
		withReplicaSync(i, cfg)
		cfg.InitialThresholds = server.InitialThresholds{ActiveDecodeBlocks: &half}
	})
	sc := &syncCluster{t: t, c: c}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.Leader()
	admin := nodeClient(t, c.Followers()[0])
	for id := uint64(1); id <= 2; id++ {
		if _, err := admin.RegisterWorker(ctx, api.WorkerSpec{WorkerID: id, ModelName: shedModel, Endpoint: "http://w", BlockSize: 16,
			KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1"}, TotalKVBlocks: 4}); err != nil {
			t.Fatal(err)
		}
	}
	sc.waitMeshed()
	clients := make([]*client.Client, len(c.Nodes))
	for i, s := range c.Nodes {
		clients[i] = nodeClient(t, s)
	}
	everywhere := func(what, want string) {
		t.Helper()
		servertest.Eventually(t, what, func() error {
			for i, cl := range clients {
				if cl == nil {
					continue
				}
				got, err := candidates(ctx, cl)
				if err != nil || got != want {
					return fmt.Errorf("node %d: candidates %s (%v), want %s", i+1, got, err, want)
				}
			}
			return nil
		})
	}
	thresholdsOn := func(cl *client.Client, want string) error {
		got, err := cl.BusyThresholds(ctx, false)
		if err != nil {
			return err
		}
		var s []string
		for _, th := range got.Thresholds {
			s = append(s, fmt.Sprintf("%s:%v:%v", th.Model, deref(th.ActiveDecodeBlocksThreshold), deref(th.ActivePrefillTokensThreshold)))
		}
		if fmt.Sprint(s) != want {
			return fmt.Errorf("thresholds %v, want %s", s, want)
		}
		return nil
	}
	servertest.Eventually(t, "the initial thresholds reach the model on every node", func() error {
		for _, cl := range clients {
			if err := thresholdsOn(cl, "[default:0.5:<nil>]"); err != nil {
				return err
			}
		}
		return nil
	})

	zero := int64(0)
	book := func(node int, id string, worker uint64) {
		t.Helper()
		w := worker
		if _, err := clients[node].Reserve(ctx, api.ReserveRequest{ReservationID: api.ID(id), WorkerID: &w,
			Prompt:                 api.Prompt{ModelName: shedModel, SequenceHashes: api.Hashes{worker*10 + 1, worker*10 + 2, worker*10 + 3}, ISLTokens: 48},
			EffectivePrefillTokens: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	book(0, "a", 1) // 3 of 4 blocks > 0.5
	everywhere("worker 1 busy on every node", "[2]")
	book(1, "b", 2)
	everywhere("every worker busy: every node sheds", string(api.CodeOverloaded))
	if err := clients[2].Free(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	everywhere("worker 1 free again on every node", "[1]")

	// An operator's change survives a restart of a follower and a change
	// of leader.
	if _, err := admin.SetBusyThreshold(ctx, api.BusyThresholdRequest{Model: shedModel, ActiveDecodeBlocksThreshold: ptrTo(0.9)}); err != nil {
		t.Fatal(err)
	}
	everywhere("0.9 leaves both workers free", "[1 2]")
	fi := c.Index(c.Followers()[0])
	c.Stop(fi)
	clients[fi] = nodeClient(t, c.Restart(fi))
	li := c.Index(leader)
	c.Stop(li)
	clients[li] = nil
	servertest.Eventually(t, "a new leader", func() error {
		if c.Leader() == leader {
			return fmt.Errorf("old leader still leads")
		}
		return nil
	})
	for i, cl := range clients {
		if cl == nil {
			continue
		}
		servertest.Eventually(t, fmt.Sprintf("node %d keeps the operator's threshold", i+1), func() error {
			return thresholdsOn(cl, "[default:0.9:<nil>]")
		})
	}

	// Cleared, the model stays cleared under a new leader that has the
	// initial thresholds too: a new model gets them, the cleared one not.
	live := clients[fi]
	if _, err := live.ClearBusyThreshold(ctx, shedModel); err != nil {
		t.Fatal(err)
	}
	if _, err := live.RegisterWorker(ctx, api.WorkerSpec{WorkerID: 3, ModelName: "other", Endpoint: "http://w", BlockSize: 16,
		KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the new model gets the initial thresholds, the cleared one does not", func() error {
		return thresholdsOn(live, "[other:0.5:<nil>]")
	})
	book(fi, "c", 1)
	book(fi, "d", 2)
	if got, err := candidates(ctx, live); err != nil || got != "[1 2]" {
		t.Fatalf("a cleared model shed: %s %v", got, err)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func ptrTo[T any](v T) *T { return &v }
