package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// startNode starts a one-node kvselect in process for the examples; the
// returned function stops it.
func startNode() (string, func()) {
	dir, err := os.MkdirTemp("", "kvselect-example")
	if err != nil {
		log.Fatal(err)
	}
	s, err := server.Start(servertest.Config("n1", dir))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Node.WaitForLeader(ctx); err != nil {
		log.Fatal(err)
	}
	// Selection-ready, as a readiness probe would wait for
	// (/readyz?for=selection), and with its own record in the catalog
	// (a new cluster's first entries, its cluster id and the catalog
	// rules that tell an unknown partition from one not ready, come
	// before it): until then the node answers not_ready where
	// ExampleCodeOf shows unknown_partition.
	err = poll.Until(ctx, 5*time.Millisecond, "the node catches up and publishes its metadata", func(context.Context) error {
		if !s.CaughtUp() || s.Node.Epoch() == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	return s.URL(), func() {
		_ = s.Close(context.Background())
		_ = os.RemoveAll(dir)
	}
}

// The Ray flow of Dynamo's selection service: register a worker, select a
// worker for a prompt, send the request there (not shown), book the
// selection, report the first token and the end.
func Example() {
	url, stop := startNode()
	defer stop()
	ctx := context.Background()

	kv, err := client.New(client.Config{Addrs: []string{url}})
	if err != nil {
		log.Fatal(err)
	}
	w, err := kv.RegisterWorker(ctx, api.WorkerSpec{WorkerID: 1, ModelName: "llama", Endpoint: "http://worker-1:8000",
		BlockSize: 16, KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:5557"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker", w.WorkerID, w.Lifecycle)

	prompt := make(api.TokenIDs, 64)
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}
	sel, err := kv.Select(ctx, api.SelectRequest{Prompt: api.Prompt{ModelName: "llama", TokenIDs: prompt}, SelectionID: "s-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("send to", sel.Endpoint, "rank", sel.DPRank, "prefill", sel.EffectivePrefillTokens)

	booked, err := kv.ReserveSelection(ctx, "req-1", "s-1")
	if err != nil {
		log.Fatal(err)
	}
	loads, _ := kv.Loads(ctx, "llama", "")
	fmt.Println("booked", booked.ReservationID, "load", loads[0].Loads[0].ActivePrefillTokens, "prefill tokens")

	if err := kv.PrefillComplete(ctx, "req-1"); err != nil {
		log.Fatal(err)
	}
	if err := kv.Free(ctx, "req-1"); err != nil {
		log.Fatal(err)
	}
	loads, _ = kv.Loads(ctx, "llama", "")
	fmt.Println("requests left", loads[0].Loads[0].ActiveRequests)
	// Output:
	// worker 1 schedulable
	// send to http://worker-1:8000 rank 0 prefill 64
	// booked req-1 load 64 prefill tokens
	// requests left 0
}

// Errors from a node carry the API's code.
func ExampleCodeOf() {
	url, stop := startNode()
	defer stop()
	kv, err := client.New(client.Config{Addrs: []string{url}})
	if err != nil {
		log.Fatal(err)
	}
	_, err = kv.Select(context.Background(), api.SelectRequest{Prompt: api.Prompt{ModelName: "nobody", TokenIDs: api.TokenIDs{1, 2, 3}}})
	// Both are 503s; the code says whether to retry.
	switch client.CodeOf(err) {
	case api.CodeUnknownPartition: // also client.UnknownPartition(err)
		fmt.Println("no worker was ever registered for that model: check its name")
	case api.CodeNotReady:
		fmt.Println("no schedulable worker for that model yet: retry later")
	case "":
		fmt.Println("no answer:", err)
	}
	// Output:
	// no worker was ever registered for that model: check its name
}

// A client's catalog index can be handed to another client (a Ray task, a
// process elsewhere), which then reads those writes on whatever node it
// asks.
func ExampleClient_ObserveCatalogIndex() {
	url, stop := startNode()
	defer stop()
	ctx := context.Background()
	writer, _ := client.New(client.Config{Addrs: []string{url}})
	if _, err := writer.RegisterWorker(ctx, api.WorkerSpec{WorkerID: 7, Endpoint: "http://w7:8000", BlockSize: 16,
		KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:5557"}}); err != nil {
		log.Fatal(err)
	}
	reader, _ := client.New(client.Config{Addrs: []string{url}})
	reader.ObserveCatalogIndex(writer.CatalogIndex())
	ws, _ := reader.Workers(ctx, client.WorkersOptions{})
	// The read's index is at least the write's (the node may have applied
	// more since: its own metadata, say).
	fmt.Println(len(ws), "worker, index caught up:", reader.CatalogIndex() >= writer.CatalogIndex())
	// Output:
	// 1 worker, index caught up: true
}
