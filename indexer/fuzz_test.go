package indexer

import (
	"encoding/json"
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
		if _, err := h.x.Load(keyM, &d); err != nil {
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
