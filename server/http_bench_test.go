package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/benchutil"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// The /select-over-HTTP workload (issue 15, SPEC §12): 8 workers × 8 dp
// ranks = 64 ranks; 8192 documents of 128 blocks of 16 tokens (1 M
// blocks, 2 M memberships: a node's index at a realistic size, which also
// sets how often the garbage collector runs), each starting with one of 16
// shared 32-block system prompts and cached by two ranks. Requests cycle
// over 256 of the documents.
const (
	httpWorkers, httpRanks     = 8, 8
	httpDocs, httpDocBlocks    = 8192, 128
	httpQueried                = 256
	httpPrompts, httpShared    = 16, 32
	httpBlockSize              = 16
	httpConns                  = 16
	httpClosedFor, httpOpenFor = 5 * time.Second, 5 * time.Second
	httpSteadyRate             = 2000 // requests per second
)

// httpDocTokens are document d's token ids, drawn from a ~152 k-token
// vocabulary (Qwen2's) so that the request bodies have a real model's
// size: its shared prompt's from one seed, the rest from the document's.
func httpDocTokens(d int) []uint32 {
	const vocab = 151_936
	toks := make([]uint32, httpDocBlocks*httpBlockSize)
	shared := rand.New(rand.NewPCG(uint64(d%httpPrompts), 1))
	own := rand.New(rand.NewPCG(uint64(d), 2))
	for i := range toks {
		if i < httpShared*httpBlockSize {
			toks[i] = uint32(shared.IntN(vocab))
		} else {
			toks[i] = uint32(own.IntN(vocab))
		}
	}
	return toks
}

// BenchmarkSelectHTTP measures POST /select on one node over loopback
// against GET /health on the same server in the same run (the HTTP
// stack's ceiling): throughput with 16 closed-loop connections, then
// latency under open-loop load (2 000 req/s, and half the /select
// throughput), timed from when each request was due. The load generator
// runs in the same process on the same two cores, as wrk on the same
// machine would. Run it with -benchtime 1x.
func BenchmarkSelectHTTP(b *testing.B) {
	// Its workers have no engines (the index is filled directly), so their
	// listeners never connect: keep them from turning stale mid-run.
	c := servertest.StartCluster(b, 1, func(_ int, cfg *server.Config) { cfg.Ingest.StaleAfter = time.Hour })
	s := c.Leader()
	hc := benchutil.NewLoadClient(httpConns)
	for w := range httpWorkers {
		eps := map[string]string{}
		for r := range httpRanks {
			eps[fmt.Sprint(r)] = "tcp://127.0.0.1:1" // never dialled successfully; the index is filled below
		}
		body, _ := json.Marshal(map[string]any{"worker_id": w + 1, "model_name": "bench", "endpoint": "http://w",
			"block_size": httpBlockSize, "data_parallel_size": httpRanks, "kv_events_endpoints": eps})
		resp, err := hc.Post(s.URL()+api.PathWorkers, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("register worker %d: %d", w+1, resp.StatusCode)
		}
	}
	bodies := make([][]byte, 0, httpQueried)
	for d := range httpDocs {
		toks := httpDocTokens(d)
		locals := indexer.BlockHashes(toks, httpBlockSize, "")
		for k := range 2 {
			r := (d*(2*k+1) + 29*k) % (httpWorkers * httpRanks)
			rk := indexer.RankKey{Worker: uint64(r/httpRanks + 1), Rank: uint32(r % httpRanks)}
			ev := indexer.Event{Kind: indexer.EventStored, Tier: indexer.TierDevice}
			for i, l := range locals {
				ev.Blocks = append(ev.Blocks, indexer.StoredBlock{Hash: uint64(d)<<20 | uint64(i)<<4 | uint64(k), Local: l})
			}
			if _, err := s.Indexer.Apply(rk, indexer.Batch{Events: []indexer.Event{ev}}); err != nil {
				b.Fatal(err)
			}
		}
		if d%(httpDocs/httpQueried) == 0 {
			body, _ := json.Marshal(map[string]any{"model_name": "bench", "token_ids": toks})
			bodies = append(bodies, body)
		}
	}
	var seq atomic.Uint64
	health := func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+api.PathHealth, nil)
	}
	sel := func(ctx context.Context) (*http.Request, error) {
		body := bodies[seq.Add(1)%httpQueried]
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+api.PathSelect, bytes.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}
	ctx := context.Background()
	for range b.N {
		hres, err := benchutil.ClosedLoop(ctx, hc, httpConns, httpClosedFor, http.StatusOK, health)
		if err != nil {
			b.Fatal(err)
		}
		sres, err := benchutil.ClosedLoop(ctx, hc, httpConns, httpClosedFor, http.StatusOK, sel)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("health (closed, %d conns): %v", httpConns, hres)
		b.Logf("select (closed, %d conns): %v", httpConns, sres)
		b.ReportMetric(hres.PerSecond(), "health-req/s")
		b.ReportMetric(sres.PerSecond(), "select-req/s")
		b.ReportMetric(sres.PerSecond()/hres.PerSecond(), "select/health")
		// Latency under open-loop load, /health at the same rate as the
		// baseline: at a steady httpSteadyRate, and at half of what
		// /select just sustained.
		for _, load := range []struct {
			name string
			rate float64
		}{{"steady", httpSteadyRate}, {"half", sres.PerSecond() / 2}} {
			for _, route := range []struct {
				name string
				req  benchutil.Request
			}{{"health", health}, {"select", sel}} {
				res, err := benchutil.OpenLoop(ctx, hc, load.rate, 4*httpConns, httpOpenFor, http.StatusOK, route.req)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("%s (open, %.0f req/s): %v, %d sent late", route.name, load.rate, res, res.Behind)
				b.ReportMetric(float64(res.Percentile(0.50).Nanoseconds()), route.name+"-"+load.name+"-p50-ns")
				b.ReportMetric(float64(res.Percentile(0.99).Nanoseconds()), route.name+"-"+load.name+"-p99-ns")
			}
		}
	}
}
