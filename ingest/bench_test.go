package ingest

import (
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/kvsim"
)

// Ingestion benchmarks: BlockStored events of 16 blocks of 16 tokens,
// each rank's messages one long chain, from benchRanks publishers.
// BenchmarkIngestZMQ measures the whole path (PUB → guarded SUB →
// decode → local hashes → index) and BenchmarkIngestInProcess the same
// payloads without ZMQ, as the baseline in the same run.
const (
	benchRanks     = 8
	benchBlocks    = 16 // blocks per event
	benchBlockSize = 16
)

// benchPayloads pre-encodes n messages per rank so the publisher costs
// next to nothing while the node ingests.
func benchPayloads(b *testing.B, n int) [][][]byte {
	out := make([][][]byte, benchRanks)
	tokens := make([]uint32, benchBlocks*benchBlockSize)
	hashes := make([]uint64, benchBlocks)
	for r := range benchRanks {
		out[r] = make([][]byte, n)
		var parent *uint64
		for i := range n {
			for j := range hashes {
				hashes[j] = uint64(r)<<48 | uint64(i*benchBlocks+j+1)
			}
			for k := range tokens {
				tokens[k] = uint32(i*len(tokens)+k) ^ uint32(r)<<24
			}
			var par any
			if parent != nil {
				par = *parent
			}
			out[r][i] = encode(b, []any{1.0, []any{[]any{"BlockStored", hashes, par, tokens, benchBlockSize, nil, "GPU"}}, 0})
			last := hashes[len(hashes)-1]
			parent = &last
		}
	}
	return out
}

func benchHarness(b *testing.B) (*indexer.Indexer, *Manager, *fsm.Log) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ix := indexer.New(quiet)
	m := New(ix, Config{Logger: quiet, QueueLen: 1 << 16})
	b.Cleanup(m.Close)
	return ix, m, fsm.NewLog(ix.ApplyCatalog, m.ApplyCatalog)
}

func register(b *testing.B, lg *fsm.Log, id uint64, endpoint string) {
	if _, err := lg.Upsert(fsm.Worker{WorkerID: id, Endpoint: "http://w", BlockSize: benchBlockSize,
		DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: endpoint}}); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkIngestZMQ(b *testing.B) {
	n := max(b.N/benchRanks, 1)
	payloads := benchPayloads(b, n)
	ix, m, lg := benchHarness(b)
	pubs := make([]*testPub, benchRanks)
	for r := range pubs {
		pubs[r] = newTestPub(b, false)
		register(b, lg, uint64(r+1), pubs[r].endpoint)
	}
	for _, p := range pubs {
		p.subscribed()
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for r, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := []byte("kv-events")
			for i, pl := range payloads[r] {
				// One write per message, as a libzmq engine and kvsim do
				// (Send would write each frame's header and body apart).
				if err := p.pub.SendMulti(zmq4.NewMsgFrom(topic, be8(uint64(i)), pl)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for r := range pubs {
		eventually(b, "every message applied", func() bool {
			seq, ok := ix.Watermark(indexer.RankKey{Worker: uint64(r + 1)})
			return ok && seq == uint64(n-1)
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	for r := range pubs {
		if st := m.Status(uint64(r + 1))[0]; st.LostMessages != 0 || st.DroppedMalformed != 0 {
			b.Fatalf("rank %d lost messages: %+v", r, st)
		}
	}
	reportIngest(b, ix, n, elapsed)
}

func BenchmarkIngestInProcess(b *testing.B) {
	n := max(b.N/benchRanks, 1)
	payloads := benchPayloads(b, n)
	ix, _, lg := benchHarness(b)
	for r := range benchRanks {
		// Endpoints nobody listens on: the listeners just retry.
		register(b, lg, uint64(r+1), "tcp://127.0.0.1:1")
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for r := range benchRanks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dec indexer.WireDecoder
			rk := indexer.RankKey{Worker: uint64(r + 1)}
			for i, pl := range payloads[r] {
				batch, err := dec.Decode(pl)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := ix.ApplyWire(rk, uint64(i), batch); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportIngest(b, ix, n, elapsed)
}

// reportIngest checks that every block landed and reports blocks/s.
func reportIngest(b *testing.B, ix *indexer.Indexer, n int, elapsed time.Duration) {
	want := benchRanks * n * benchBlocks
	got := 0
	for _, st := range ix.Stats() {
		got += st.Memberships
	}
	if got != want {
		b.Fatalf("index holds %d memberships, want %d", got, want)
	}
	b.ReportMetric(float64(want)/elapsed.Seconds(), "blocks/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkIngestKVSim is the same path fed by kvsim itself: 8 simulated
// workers serve distinct 16-block prompts (hashing, LRU and encoding on
// the same cores as the node), and the clock stops when every rank's
// watermark reaches kvsim's last sequence number.
func BenchmarkIngestKVSim(b *testing.B) {
	n := max(b.N/benchRanks, 1)
	sim, err := kvsim.Start(kvsim.Config{Workers: benchRanks, BlockSize: benchBlockSize,
		CacheBlocks: n * benchBlocks, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sim.Close() })
	ix, m, lg := benchHarness(b)
	for _, w := range sim.Workers() {
		reg := w.Registration()
		if _, err := lg.Upsert(fsm.Worker{WorkerID: reg.WorkerID, Endpoint: reg.Endpoint, BlockSize: benchBlockSize,
			DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: reg.KVEventsEndpoints[0]},
			ReplayEndpoint: reg.ReplayEndpoint}); err != nil {
			b.Fatal(err)
		}
	}
	for _, w := range sim.Workers() {
		eventually(b, "listener active", func() bool { return m.Status(w.ID())[0].State == StateActive })
	}
	prompts := make([][]uint32, n)
	for i := range prompts {
		prompts[i] = make([]uint32, benchBlocks*benchBlockSize)
		for k := range prompts[i] {
			prompts[i][k] = uint32(i*len(prompts[i]) + k)
		}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for wi, w := range sim.Workers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range prompts {
				p = slices.Clone(p)
				p[0] ^= uint32(wi+1) << 24 // distinct per worker
				if _, err := w.Serve(0, p); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, w := range sim.Workers() {
		last, _ := w.LastSeq(0)
		eventually(b, "every message applied", func() bool {
			seq, ok := ix.Watermark(indexer.RankKey{Worker: w.ID()})
			return ok && seq == last
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportIngest(b, ix, n, elapsed)
}
