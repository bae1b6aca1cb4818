package http

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// indexWith returns an indexer with one two-rank worker in model "m" and
// a few stored blocks, and the log that drives its catalog.
func indexWith(t *testing.T) (*indexer.Indexer, *fsm.Log) {
	t.Helper()
	ix := indexer.New(slog.New(slog.DiscardHandler))
	log := fsm.NewLog(ix.ApplyCatalog)
	if _, err := log.Upsert(fsm.Worker{WorkerID: 1, ModelName: "m", Endpoint: "http://w", BlockSize: 16, DataParallelSize: 2,
		KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1", 1: "tcp://127.0.0.1:2"}}); err != nil {
		t.Fatal(err)
	}
	return ix, log
}

func fill(t *testing.T, ix *indexer.Indexer) {
	t.Helper()
	for rank := range uint32(2) {
		var blocks []indexer.StoredBlock
		for i := range uint64(300) {
			blocks = append(blocks, indexer.StoredBlock{Hash: 1000*uint64(rank) + i + 1, Local: i + 7})
		}
		ev := indexer.Event{Kind: indexer.EventStored, Tier: indexer.TierDevice, Blocks: blocks}
		if _, err := ix.Apply(indexer.RankKey{Worker: 1, Rank: rank}, indexer.Batch{Seq: 41, HasSeq: true, Events: []indexer.Event{ev}}); err != nil {
			t.Fatal(err)
		}
	}
}

// getDump sends GET (or HEAD) /dump with an Accept-Encoding, letting
// nothing decompress it on the way.
func getDump(t *testing.T, url, method, accept string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url+api.PathDump, nil)
	if accept != "" {
		req.Header.Set(api.HeaderAcceptEncoding, accept)
	}
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// Test_DumpGzipRoundTrip: the same dump plain and gzip-compressed, and a
// compressed dump streams into another index that then dumps identically.
func Test_DumpGzipRoundTrip(t *testing.T) {
	src, _ := indexWith(t)
	fill(t, src)
	url := serve(t, newFakeNode().service(func(c *Config) { c.Index = src }))
	var want bytes.Buffer
	if _, err := src.WriteDump(context.Background(), &want); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, accept string
		gzip                 bool
	}{
		{"plain", "GET", "", false},
		{"gzip", "GET", "gzip", true},
		{"gzip among others", "GET", "br;q=1.0, GZIP;q=0.5", true},
		{"any", "GET", "*", true},
		{"gzip refused", "GET", "gzip;q=0, identity", false},
		{"head", "HEAD", "gzip", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := getDump(t, url, tc.method, tc.accept)
			if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderIndex) == "" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			if got := resp.Header.Get(api.HeaderContentEncoding) == api.EncodingGzip; got != tc.gzip {
				t.Fatalf("Content-Encoding %q, want gzip %v", resp.Header.Get(api.HeaderContentEncoding), tc.gzip)
			}
			if tc.method == "HEAD" {
				if len(raw) != 0 {
					t.Fatalf("HEAD has a body of %d bytes", len(raw))
				}
				return
			}
			body := raw
			if tc.gzip {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
				if len(raw) >= len(body) {
					t.Fatalf("gzip made %d bytes of %d", len(raw), len(body))
				}
			}
			if !bytes.Equal(body, want.Bytes()) {
				t.Fatalf("dump body differs from WriteDump's:\n%s\n%s", body, want.Bytes())
			}
			if !tc.gzip {
				return
			}
			dst, _ := indexWith(t)
			zr, _ := gzip.NewReader(bytes.NewReader(raw))
			st, err := dst.LoadDump(context.Background(), zr, indexer.LoadOptions{})
			if err != nil || st.Blocks != 600 || st.Watermarks != 2 {
				t.Fatalf("load: %+v %v", st, err)
			}
			var again bytes.Buffer
			if _, err := dst.WriteDump(context.Background(), &again); err != nil || !bytes.Equal(again.Bytes(), want.Bytes()) {
				t.Fatalf("loaded index dumps differently (%v)", err)
			}
		})
	}
}

type recoveringFlag struct{ atomic.Bool }

func (f *recoveringFlag) Recovering() bool { return f.Load() }

// Test_RecoveringNodeRefusesDump: while the node recovers, /ready says so
// and /dump answers 503 not_ready (its partial index must not seed
// another node's); afterwards both are back to normal.
func Test_RecoveringNodeRefusesDump(t *testing.T) {
	f := newFakeNode()
	var flag recoveringFlag
	flag.Store(true)
	url := serve(t, f.service(func(c *Config) { c.Recovery = &flag }))
	ready := func() api.Ready {
		resp, err := http.Get(url + api.PathReady)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r api.Ready
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if !ready().Recovering {
		t.Fatal("/ready does not say recovering")
	}
	resp, raw := getDump(t, url, "GET", "gzip")
	var e api.Error
	_ = json.Unmarshal(raw, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Code != api.CodeNotReady || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("dump while recovering: %d %s", resp.StatusCode, raw)
	}
	flag.Store(false)
	if ready().Recovering {
		t.Fatal("/ready still says recovering")
	}
	if resp, raw := getDump(t, url, "GET", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("dump after recovery: %d %s", resp.StatusCode, raw)
	}
}
