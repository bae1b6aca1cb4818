package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// FuzzRestore feeds arbitrary bytes to Restore: it either fails and keeps
// the previous catalog, or installs a catalog whose derived state is
// consistent. It never panics.
func FuzzRestore(f *testing.F) {
	h := newHarness(&testing.T{})
	h.upsert(completeWorker(1, 16))
	h.upsert(completeWorker(2, 32))
	snap, _ := h.f.Snapshot()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		f.Fatal(err)
	}
	f.Add(sink.Bytes()) // a real snapshot; more seeds in testdata/fuzz/FuzzRestore
	f.Fuzz(func(t *testing.T, data []byte) {
		fsm := New()
		before := fsm.Catalog()
		if err := fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if fsm.Catalog() != before {
				t.Fatal("a failed restore replaced the catalog")
			}
			return
		}
		c := fsm.Catalog()
		count := 0
		for k := range c.retired {
			if _, held := c.Partition(k); held {
				t.Fatalf("partition %v is retired and holds workers", k)
			}
		}
		for _, p := range c.Partitions() {
			if p.BlockSize != 0 && !slices.ContainsFunc(c.members(p), func(w *Worker) bool { return w.BlockSize == p.BlockSize }) {
				t.Fatalf("partition %v has block size %d, which none of its workers has", p.Key, p.BlockSize)
			}
			for _, id := range p.Workers {
				w, ok := c.Worker(id)
				if !ok || w.Partition() != p.Key {
					t.Fatalf("partition %v lists worker %d wrongly", p.Key, id)
				}
				if w.Schedulable() != (len(w.NotSchedulableReasons) == 0) {
					t.Fatalf("worker %d schedulable %v with reasons %q", id, w.Schedulable(), w.NotSchedulableReasons)
				}
				count++
			}
		}
		if count != c.Len() {
			t.Fatalf("partitions list %d workers, catalog has %d", count, c.Len())
		}
	})
}
