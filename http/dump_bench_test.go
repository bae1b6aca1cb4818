package http

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// The recovery benchmark's index: 256 ranks (32 workers × 8), documents
// of 512 blocks that start with one of 32 shared 64-block system prompts,
// each cached by two ranks, in 16-block BlockStored events: ~0.92 M
// distinct blocks, ~2 M (block, rank) memberships, as in the indexer's
// benchmarks.
const (
	benchWorkers, benchRanks = 32, 8
	benchDocs, benchDocLen   = 2048, 512
	benchPrompts, benchShare = 32, 64
)

// benchIndex returns an indexer with the benchmark's catalog; filled, it
// also holds the blocks.
func benchIndex(b *testing.B, filled bool) *indexer.Indexer {
	b.Helper()
	x := indexer.New(slog.New(slog.DiscardHandler))
	log := fsm.NewLog(x.ApplyCatalog)
	for id := range uint64(benchWorkers) {
		w := fsm.Worker{WorkerID: id + 1, ModelName: "bench", Endpoint: "http://w", BlockSize: 16,
			DataParallelSize: benchRanks, KVEventsEndpoints: map[uint32]string{}}
		for r := range uint32(benchRanks) {
			w.KVEventsEndpoints[r] = "tcp://127.0.0.1:" + strconv.Itoa(5000+int(r))
		}
		if _, err := log.Upsert(w); err != nil {
			b.Fatal(err)
		}
	}
	if !filled {
		return x
	}
	doc := make([]uint64, benchDocLen)
	for d := range benchDocs {
		for i := range doc {
			if i < benchShare {
				doc[i] = uint64(d%benchPrompts)<<32 | uint64(i) | 1<<62
			} else {
				doc[i] = uint64(d)<<32 | uint64(i)
			}
		}
		for rep := range 2 {
			r := (d*(2*rep+1) + 97*rep) % (benchWorkers * benchRanks)
			rk := indexer.RankKey{Worker: uint64(r/benchRanks) + 1, Rank: uint32(r % benchRanks)}
			salt := rk.Worker<<20 | uint64(rk.Rank)
			engine := func(i int) uint64 { return indexer.ChainHash(salt^doc[0], doc[i]) ^ uint64(i) }
			var evs []indexer.Event
			for i := 0; i < len(doc); i += 16 {
				ev := indexer.Event{Kind: indexer.EventStored, Tier: indexer.TierDevice}
				if i > 0 {
					ev.HasParent, ev.Parent = true, engine(i-1)
				}
				for j := i; j < i+16; j++ {
					ev.Blocks = append(ev.Blocks, indexer.StoredBlock{Hash: engine(j), Local: doc[j]})
				}
				evs = append(evs, ev)
			}
			if _, err := x.Apply(rk, indexer.Batch{Seq: uint64(d), HasSeq: true, Events: evs}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return x
}

// heapPeak samples HeapInuse (bytes in in-use heap spans) every 5 ms
// until stopped, and returns its peak above the level at start.
type heapPeak struct {
	base, peak uint64
	stop       chan struct{}
	done       sync.WaitGroup
}

func startHeapPeak() *heapPeak {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapPeak{base: ms.HeapInuse, peak: ms.HeapInuse, stop: make(chan struct{})}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			h.peak = max(h.peak, ms.HeapInuse)
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// end returns the peak HeapInuse above the start, in MB.
func (h *heapPeak) end() float64 {
	close(h.stop)
	h.done.Wait()
	return float64(h.peak-h.base) / 1e6
}

// rssHWM resets the process's peak RSS (Linux: /proc/self/clear_refs) and
// returns a function that reports the new peak (VmHWM) above the RSS at
// reset, in MB; NaN elsewhere.
func rssHWM() func() float64 {
	read := func(field string) float64 {
		f, err := os.Open("/proc/self/status")
		if err != nil {
			return -1
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				return kb / 1e3
			}
		}
		return -1
	}
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return func() float64 { return -1 }
	}
	base := read("VmRSS")
	return func() float64 { return read("VmHWM") - base }
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// fetchAndLoad sends GET /dump (gzip or not) and streams the answer into
// dst, as a recovering node does. It returns the bytes on the wire.
func fetchAndLoad(b *testing.B, hc *http.Client, url string, gz bool, dst *indexer.Indexer) int64 {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+api.PathDump, nil)
	if gz {
		req.Header.Set(api.HeaderAcceptEncoding, api.EncodingGzip)
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body := &countingReader{r: resp.Body}
	var in io.Reader = body
	if resp.Header.Get(api.HeaderContentEncoding) == api.EncodingGzip {
		zr, err := gzip.NewReader(body)
		if err != nil {
			b.Fatal(err)
		}
		in = zr
	}
	if dst == nil {
		_, err = io.Copy(io.Discard, in)
	} else {
		_, err = dst.LoadDump(context.Background(), in, indexer.LoadOptions{})
	}
	if err != nil {
		b.Fatal(err)
	}
	return body.n
}

// BenchmarkDumpTransfer measures index recovery (SPEC §12: a 1 M-block
// index dumped, transferred and loaded in ≤ 10 s): a source index is
// served by GET /dump on a loopback HTTP server, and a second in-process
// indexer streams it in with LoadDump, plain and gzip. Both sides share
// one process, so memory is measured side by side in separate passes:
//
//   - server-peak-heap-MB: peak HeapInuse above the start while the dump
//     is served and the client discards it (the serving side alone);
//   - loader-peak-heap-MB: the same while the dump is loaded from bytes
//     already in memory (the loading side alone, the loaded index
//     included);
//   - e2e-peak-heap-MB and rss-hwm-MB: the whole recovery, as peak
//     HeapInuse and as peak RSS (VmHWM, reset before) above the start;
//   - index-heap-MB: HeapInuse of the loaded index itself, for scale.
//
// Every figure is from the last iteration; run with -benchtime 1x.
func BenchmarkDumpTransfer(b *testing.B) {
	src := benchIndex(b, true)
	var blocks int
	for _, st := range src.Stats() {
		blocks += st.Blocks
	}
	srv := newFakeNode().service(func(c *Config) { c.Index = src })
	ts := httptest.NewServer(srv)
	defer ts.Close()
	url := ts.URL
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()
	for _, gz := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(b *testing.B) {
			var wire int64
			var e2e, heapE2E, rss, heapServer, heapLoader, indexMB float64
			for range b.N {
				// The whole recovery, timed, with the default GC.
				dst := benchIndex(b, false)
				hp, hwm := startHeapPeak(), rssHWM()
				start := time.Now()
				wire = fetchAndLoad(b, hc, url, gz, dst)
				e2e = time.Since(start).Seconds()
				heapE2E, rss = hp.end(), hwm()
				dst = nil

				// Memory, side by side, with GOGC=10: the heap then holds
				// little garbage, and its peak is close to the live peak
				// (with GOGC=100 it is mostly the pacer's headroom over
				// the source index).
				old := debug.SetGCPercent(10)
				hp = startHeapPeak()
				fetchAndLoad(b, hc, url, gz, nil) // the serving side alone
				heapServer = hp.end()
				raw := &strings.Builder{}
				if _, err := src.WriteDump(context.Background(), raw); err != nil {
					b.Fatal(err)
				}
				dst = benchIndex(b, false)
				hp = startHeapPeak() // the loading side alone, from bytes in memory
				if _, err := dst.LoadDump(context.Background(), strings.NewReader(raw.String()), indexer.LoadOptions{}); err != nil {
					b.Fatal(err)
				}
				heapLoader = hp.end()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				indexMB = float64(ms.HeapInuse-hp.base) / 1e6 // the loaded index, live
				debug.SetGCPercent(old)
				runtime.KeepAlive(dst)
				runtime.KeepAlive(raw)
			}
			b.ReportMetric(float64(blocks), "blocks")
			b.ReportMetric(float64(wire)/1e6, "wire-MB")
			b.ReportMetric(e2e, "recovery-s")
			b.ReportMetric(heapServer, "server-peak-heap-MB")
			b.ReportMetric(heapLoader, "loader-peak-heap-MB")
			b.ReportMetric(heapE2E, "e2e-peak-heap-MB")
			b.ReportMetric(rss, "rss-hwm-MB")
			b.ReportMetric(indexMB, "index-heap-MB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
