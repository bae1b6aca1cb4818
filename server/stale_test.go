package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_StaleViewsAgree: once a rank's KV event listener has been down past
// --stale-listener-after, the node stops selecting it, and from that
// moment /workers and /ready show its listener stale and the worker not
// schedulable here (lifecycle still schedulable: the catalog is
// untouched), and the listener-state metric counts it as stale, not as
// failed (SPEC §3.7).
func Test_StaleViewsAgree(t *testing.T) {
	cfg := servertest.Config("n1", t.TempDir())
	cfg.Ingest.StaleAfter = 300 * time.Millisecond
	s := servertest.MustStart(t, cfg)
	kv, err := client.New(client.Config{Addrs: []string{s.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "tcp://" + ln.Addr().String()
	ln.Close() // nobody publishes there
	if _, err := kv.RegisterWorker(ctx, api.WorkerSpec{WorkerID: 1, Endpoint: "http://w1", BlockSize: 16,
		KVEventsEndpoints: map[uint32]string{0: dead}}); err != nil {
		t.Fatal(err)
	}
	// The scheduler learns the verdict after the views do, so once it
	// refuses, the views must already say why.
	servertest.Eventually(t, "the node stops selecting worker 1", func() error {
		_, err := kv.Select(ctx, api.SelectRequest{Prompt: api.Prompt{TokenIDs: prompt(1, 2)}})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Code != api.CodeNotReady {
			return fmt.Errorf("select answered %v", err)
		}
		return nil
	})

	ws, err := kv.Workers(ctx, client.WorkersOptions{})
	if err != nil || len(ws) != 1 {
		t.Fatalf("workers: %v %+v", err, ws)
	}
	w := ws[0]
	if w.Lifecycle != api.LifecycleSchedulable || w.SchedulableHere == nil || *w.SchedulableHere || w.Listeners[0].State != api.ListenerStale {
		t.Fatalf("GET /workers: lifecycle %q, schedulable_here %v, listener %+v; want schedulable, false, stale",
			w.Lifecycle, w.SchedulableHere, w.Listeners[0])
	}
	ready, err := kv.Ready(ctx)
	if err != nil {
		t.Fatalf("GET /ready: %v", err)
	}
	if ready.Ready || ready.SchedulableWorkers != 0 || len(ready.Workers) != 1 ||
		ready.Workers[0].Listeners[0].State != api.ListenerStale {
		t.Fatalf("GET /ready: %+v; want not ready, no schedulable worker, its listener stale", ready)
	}
	sc := scrapeNode(t, s)
	for state, want := range map[string]float64{api.ListenerStale: 1, api.ListenerFailed: 0, api.ListenerConnecting: 0, api.ListenerActive: 0} {
		if got, _ := sc.value("kvselect_kv_listeners", map[string]string{"state": state}); got != want {
			t.Errorf("kvselect_kv_listeners{state=%q} = %v, want %v", state, got, want)
		}
	}
}
