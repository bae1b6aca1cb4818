package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/fsm"
)

// FuzzLoadDump loads arbitrary JSON as a peer's dump into an index with
// two registered workers: whatever it holds, nothing panics and every
// invariant of the index still holds afterwards.
func FuzzLoadDump(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzLoadDump.
	f.Fuzz(func(t *testing.T, data []byte) {
		var d PartitionDump
		if json.Unmarshal(data, &d) != nil {
			return
		}
		h := newCatalogHarness(&testing.T{})
		h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
		h.apply(fsm.UpsertWorker{Worker: testWorker(2, "m", 16, 2)})
		if _, err := h.x.LoadPartitionDump(keyM, &d); err != nil {
			return
		}
		if err := h.x.parts[keyM].ix.check(); err != nil {
			t.Fatalf("index inconsistent after load: %v", err)
		}
		for _, q := range [][]uint64{{1}, {1, 2}, {7, 8}} {
			got, _, _ := h.x.Match(keyM, q, nil)
			want := h.x.parts[keyM].ix.matchWalk(q, nil)
			if len(got) != len(want) {
				t.Fatalf("match %v: %v, walk %v", q, got, want)
			}
		}
	})
}

// FuzzLoadDumpStream streams arbitrary bytes as a whole GET /dump body
// through LoadDump into an index with two partitions whose dump keys
// collide: whatever the input, nothing panics, every invariant holds
// afterwards, and a failed load leaves every rank as empty as it found it.
func FuzzLoadDumpStream(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzLoadDumpStream (kvselect's format with a
	// key collision, Dynamo's, cut-off and reordered documents).
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newCatalogHarness(&testing.T{})
		h.apply(fsm.UpsertWorker{Worker: tenantWorker(1, "x:y", "z", 16, 2)})
		h.apply(fsm.UpsertWorker{Worker: tenantWorker(2, "x", "y:z", 16, 1)})
		keys := []fsm.PartitionKey{{Model: "x:y", Tenant: "z"}, {Model: "x", Tenant: "y:z"}}
		var empty bytes.Buffer
		if _, err := h.x.WriteDump(context.Background(), &empty); err != nil {
			t.Fatal(err)
		}
		_, err := h.x.LoadDump(context.Background(), bytes.NewReader(data), LoadOptions{BatchBlocks: 2})
		for _, k := range keys {
			if cerr := h.x.parts[k].ix.check(); cerr != nil {
				t.Fatalf("index inconsistent after load: %v", cerr)
			}
			for _, q := range [][]uint64{{1}, {1, 2}, {7, 8}} {
				got, _, _ := h.x.Match(k, q, nil)
				want := h.x.parts[k].ix.matchWalk(q, nil)
				if !slices.Equal(got, want) {
					t.Fatalf("match %v: %v, walk %v", q, got, want)
				}
			}
		}
		if err != nil {
			var after bytes.Buffer
			if _, werr := h.x.WriteDump(context.Background(), &after); werr != nil {
				t.Fatal(werr)
			}
			if !bytes.Equal(after.Bytes(), empty.Bytes()) {
				t.Fatalf("failed load (%v) left state behind:\n%s", err, after.Bytes())
			}
		}
	})
}
