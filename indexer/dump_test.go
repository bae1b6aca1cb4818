package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/fsm"
)

// tenantWorker is testWorker in a given tenant.
func tenantWorker(id uint64, model, tenant string, bs uint32, ranks int) fsm.Worker {
	w := testWorker(id, model, bs, ranks)
	w.TenantID = tenant
	return w
}

// randomPaths draws n query paths of 1 to maxLen local hashes from a small
// alphabet (1-3), so that the paths share prefixes.
func randomPaths(rng *rand.Rand, n, maxLen int) [][]uint64 {
	paths := make([][]uint64, 0, n)
	for range n {
		p := make([]uint64, 1+rng.IntN(maxLen))
		for i := range p {
			p[i] = 1 + rng.Uint64N(3)
		}
		paths = append(paths, p)
	}
	return paths
}

// randomFill applies n random events (seeded) to every rank of a
// partition, with increasing sequence numbers, and returns the query paths
// it drew from.
func randomFill(h *catalogHarness, key fsm.PartitionKey, seed uint64, n int) [][]uint64 {
	rng := rand.New(rand.NewPCG(seed, 11))
	paths := randomPaths(rng, 8, 30)
	part := h.x.parts[key]
	ranks := part.ix.rankKeysSorted()
	for i := range n {
		rk := ranks[rng.IntN(len(ranks))]
		ev := randomEvent(rng, part.ix.byRank[rk], paths[rng.IntN(len(paths))])
		h.x.Apply(rk, Batch{Seq: uint64(i), HasSeq: true, Events: []Event{*ev}})
	}
	return paths
}

// collidingCatalog registers two partitions whose plain dump keys are
// both "x:y:z" (model "x:y" + tenant "z", model "x" + tenant "y:z"), plus
// an ordinary one.
func collidingCatalog(h *catalogHarness) []fsm.PartitionKey {
	h.apply(fsm.UpsertWorker{Worker: tenantWorker(1, "x:y", "z", 16, 2)})
	h.apply(fsm.UpsertWorker{Worker: tenantWorker(2, "x", "y:z", 16, 1)})
	h.apply(fsm.UpsertWorker{Worker: tenantWorker(3, "m", "default", 32, 2)})
	return []fsm.PartitionKey{{Model: "x:y", Tenant: "z"}, {Model: "x", Tenant: "y:z"}, keyM}
}

func writeDump(t *testing.T, x *Indexer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := x.WriteDump(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// encodeDump is what encoding/json makes of Dump() (HTML escaping off, as
// the HTTP layer encodes).
func encodeDump(t *testing.T, x *Indexer) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x.Dump()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sameMatches fails unless both indexes answer every path identically in
// every partition.
func sameMatches(t *testing.T, a, b *Indexer, keys []fsm.PartitionKey, paths [][]uint64) {
	t.Helper()
	for _, k := range keys {
		for _, q := range paths {
			ma, _, _ := a.Match(k, q, nil)
			mb, _, _ := b.Match(k, q, nil)
			if !slices.Equal(ma, mb) {
				t.Fatalf("%s query %v: source %+v, loaded %+v", k, q, ma, mb)
			}
		}
	}
}

func Test_DumpKeyCollision(t *testing.T) {
	src, dst := newCatalogHarness(t), newCatalogHarness(t)
	keys := collidingCatalog(src)
	collidingCatalog(dst)
	var paths [][]uint64
	for i, k := range keys {
		paths = append(paths, randomFill(src, k, uint64(i), 200)...)
	}
	d := src.x.Dump()
	if len(d) != 3 {
		t.Fatalf("dump has %d partitions, want 3: one vanished", len(d))
	}
	for key, want := range map[string]fsm.PartitionKey{"x:y:z": keys[1], "x:y:z#2": keys[0], "m:default": keyM} {
		pd := d[key]
		if pd == nil || pd.ModelName != want.Model || pd.TenantID != want.Tenant {
			t.Fatalf("dump[%q] = %+v, want partition %s", key, pd, want)
		}
	}
	raw := writeDump(t, src.x)
	st, err := dst.x.LoadDump(context.Background(), bytes.NewReader(raw), LoadOptions{})
	if err != nil || st.Partitions != 3 || st.Skipped != 0 || st.SkippedPartitions != 0 {
		t.Fatalf("load: %+v %v", st, err)
	}
	sameMatches(t, src.x, dst.x, keys, paths)
	if again := writeDump(t, dst.x); !bytes.Equal(again, raw) {
		t.Fatalf("dump of the loaded index differs:\n%s\n%s", raw, again)
	}
}

// Test_WriteDumpStreamsDump: the streamed document is byte for byte the
// encoding of Dump(), and streaming it into another index reproduces the
// source exactly (matches and dump).
func Test_WriteDumpStreamsDump(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			src, dst := newCatalogHarness(t), newCatalogHarness(t)
			keys := collidingCatalog(src)
			collidingCatalog(dst)
			var paths [][]uint64
			for i, k := range keys {
				paths = append(paths, randomFill(src, k, seed*10+uint64(i), 300)...)
			}
			raw := writeDump(t, src.x)
			if enc := encodeDump(t, src.x); !bytes.Equal(raw, enc) {
				t.Fatalf("WriteDump:\n%s\nencoding/json of Dump():\n%s", raw, enc)
			}
			// Tiny batches: many lock acquisitions, same result.
			st, err := dst.x.LoadDump(context.Background(), bytes.NewReader(raw), LoadOptions{BatchBlocks: 3})
			if err != nil || st.Skipped != 0 {
				t.Fatalf("load: %+v %v", st, err)
			}
			for _, k := range keys {
				if err := dst.x.parts[k].ix.check(); err != nil {
					t.Fatal(err)
				}
			}
			sameMatches(t, src.x, dst.x, keys, paths)
			if again := writeDump(t, dst.x); !bytes.Equal(again, raw) {
				t.Fatalf("dump of the loaded index differs")
			}
		})
	}
}

// Test_LoadDynamoDump loads the Dynamo standalone indexer's format: no
// model_name, tenant_id or watermarks, the partition named by its key.
func Test_LoadDynamoDump(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
	h.apply(fsm.UpsertWorker{Worker: tenantWorker(2, "llama3:8b", "default", 16, 1)})
	const dynamo = `{
	  "m:default": {"block_size": 16, "events": [
	    {"worker_id": 1, "storage_tier": "device", "event": {"event_id": 7, "dp_rank": 1,
	      "data": {"stored": {"parent_hash": null, "blocks": [{"block_hash": 100, "tokens_hash": 1}, {"block_hash": 101, "tokens_hash": 2}]}}}},
	    {"worker_id": 1, "storage_tier": "host_pinned", "event": {"event_id": 8, "dp_rank": 1,
	      "data": {"stored": {"parent_hash": 101, "blocks": [{"block_hash": 102, "tokens_hash": 3}]}}}}]},
	  "llama3:8b:default": {"block_size": 16, "events": [
	    {"worker_id": 2, "storage_tier": "device", "event": {"event_id": 1, "dp_rank": 0,
	      "data": {"stored": {"parent_hash": null, "blocks": [{"block_hash": 5, "tokens_hash": 1}]}}}}]}
	}`
	st, err := h.x.LoadDump(context.Background(), strings.NewReader(dynamo), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The second key splits at its first ':' into model "llama3", tenant
	// "8b:default": a partition this node does not have (the documented
	// ambiguity), so it is skipped, not misapplied.
	want := LoadStats{Partitions: 1, SkippedPartitions: 1, Events: 2, Skipped: 1, Blocks: 3}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	got, _, _ := h.x.Match(keyM, []uint64{1, 2, 3}, nil)
	if len(got) != 1 || got[0].Worker != 1 || got[0].Rank != 1 || got[0].Device != 2 || got[0].HostExt != 1 {
		t.Fatalf("match = %+v", got)
	}
	if _, ok := h.x.Watermark(RankKey{Worker: 1, Rank: 1}); ok {
		t.Fatal("a dump without watermarks set one")
	}
}

// Test_LoadDumpFailureClearsWhatItApplied cuts a dump at every few bytes:
// each cut load fails, and leaves every rank exactly as empty as before.
func Test_LoadDumpFailureClearsWhatItApplied(t *testing.T) {
	src := newCatalogHarness(t)
	keys := collidingCatalog(src)
	for i, k := range keys {
		randomFill(src, k, uint64(i), 100)
	}
	raw := writeDump(t, src.x)
	dst := newCatalogHarness(t)
	collidingCatalog(dst)
	empty := writeDump(t, dst.x)
	for cut := 0; cut < len(raw)-1; cut += 1 + len(raw)/97 {
		_, err := dst.x.LoadDump(context.Background(), bytes.NewReader(raw[:cut]), LoadOptions{BatchBlocks: 2})
		if !errors.Is(err, ErrBadDump) || !errors.Is(err, io.ErrUnexpectedEOF) && cut > 0 {
			t.Fatalf("cut at %d: err = %v", cut, err)
		}
		if got := writeDump(t, dst.x); !bytes.Equal(got, empty) {
			t.Fatalf("cut at %d left:\n%s", cut, got)
		}
		for _, k := range keys {
			if err := dst.x.parts[k].ix.check(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func Test_LoadDumpRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"not an object", `[]`},
		{"events before block_size", `{"m:default":{"events":[]}}`},
		{"model_name after events", `{"m:default":{"block_size":16,"events":[],"model_name":"other"}}`},
		{"block_size after events", `{"m:default":{"block_size":16,"events":[],"block_size":32}}`},
		{"trailing data", `{} {}`},
		{"bad event", `{"m:default":{"block_size":16,"events":[{"worker_id":"one"]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCatalogHarness(t)
			h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
			if _, err := h.x.LoadDump(context.Background(), strings.NewReader(tc.doc), LoadOptions{}); !errors.Is(err, ErrBadDump) {
				t.Fatalf("err = %v, want ErrBadDump", err)
			}
		})
	}
}

// Test_LoadDumpSkips: what cannot apply here is counted, not fatal.
func Test_LoadDumpSkips(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	doc := `{"m:default":{"model_name":"m","tenant_id":"default","block_size":16,"extra":{"x":[1]},"events":[
		{"worker_id":9,"storage_tier":"device","event":{"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1,"tokens_hash":1}]}}}},
		{"worker_id":1,"storage_tier":"tape","event":{"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1,"tokens_hash":1}]}}}},
		{"worker_id":1,"storage_tier":"device","event":{"dp_rank":4294967296,"data":{}}},
		{"worker_id":1,"storage_tier":"device","event":{"dp_rank":0,"data":{"removed":{}}}},
		{"worker_id":1,"storage_tier":"device","event":{"dp_rank":0,"data":{"stored":{"parent_hash":77,"blocks":[{"block_hash":1,"tokens_hash":1}]}}}},
		{"worker_id":1,"storage_tier":"device","event":{"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1,"tokens_hash":1}]}}}}],
		"watermarks":[{"worker_id":1,"dp_rank":0,"seq":4},{"worker_id":9,"dp_rank":0,"seq":4}]},
	  "m:other":{"block_size":16,"events":[{"worker_id":1}],"watermarks":[]},
	  "m:default#2":{"model_name":"m","tenant_id":"default","block_size":32,"events":[{"worker_id":1}]}}`
	st, err := h.x.LoadDump(context.Background(), strings.NewReader(doc), LoadOptions{})
	want := LoadStats{Partitions: 1, SkippedPartitions: 2, Events: 1, Skipped: 7, Blocks: 1, Watermarks: 1}
	if err != nil || st != want {
		t.Fatalf("stats %+v %v, want %+v", st, err, want)
	}
	if seq, ok := h.x.Watermark(RankKey{Worker: 1}); !ok || seq != 4 {
		t.Fatalf("watermark %d %v", seq, ok)
	}
}

// Test_DumpSplitsLongChains: a chain longer than MaxDumpEventBlocks is
// dumped as several events, each continuing the last, and loads back the
// same.
func Test_DumpSplitsLongChains(t *testing.T) {
	src, dst := newCatalogHarness(t), newCatalogHarness(t)
	for _, h := range []*catalogHarness{src, dst} {
		h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	}
	const n = 2*MaxDumpEventBlocks + 10
	ev := Event{Kind: EventStored, Tier: TierDevice}
	q := make([]uint64, n)
	for i := range n {
		ev.Blocks = append(ev.Blocks, StoredBlock{Hash: uint64(1_000_000 + i), Local: uint64(i + 1)})
		q[i] = uint64(i + 1)
	}
	if _, err := src.x.Apply(RankKey{Worker: 1}, Batch{Events: []Event{ev}}); err != nil {
		t.Fatal(err)
	}
	pd := src.x.Dump()["m:default"]
	if len(pd.Events) != 3 {
		t.Fatalf("%d events for a chain of %d blocks, want 3", len(pd.Events), n)
	}
	for i, e := range pd.Events {
		if blocks := len(e.Event.Data.Stored.Blocks); blocks > MaxDumpEventBlocks {
			t.Fatalf("event %d has %d blocks", i, blocks)
		}
	}
	if _, err := dst.x.LoadDump(context.Background(), bytes.NewReader(writeDump(t, src.x)), LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	sameMatches(t, src.x, dst.x, []fsm.PartitionKey{keyM}, [][]uint64{q})
}

// endless is a reader of a prefix followed by one pattern forever.
type endless struct {
	prefix, pattern []byte
	served          int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(e.prefix) > 0 {
			k := copy(p[n:], e.prefix)
			e.prefix = e.prefix[k:]
			n += k
			continue
		}
		n += copy(p[n:], e.pattern)
	}
	e.served += int64(n)
	return n, nil
}

// Test_LoadDumpBoundsOneValue: one endless event (a peer gone mad) is
// refused once it passes the bound, instead of being held in memory.
func Test_LoadDumpBoundsOneValue(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	for _, where := range []string{
		`{"m:default":{"block_size":16,"events":[{"worker_id":1,"storage_tier":"device","event":{"event_id":1,"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[`,
		`{"m:default":{"block_size":16,"unknown":[`,
	} {
		in := &endless{prefix: []byte(where), pattern: []byte(`{"block_hash":1,"tokens_hash":1},`)}
		const limit = 1 << 20
		_, err := h.x.LoadDump(context.Background(), in, LoadOptions{MaxValueBytes: limit})
		if !errors.Is(err, ErrBadDump) || in.served > 4*limit {
			t.Fatalf("err %v after %d bytes", err, in.served)
		}
	}
}
