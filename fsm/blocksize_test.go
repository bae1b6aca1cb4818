package fsm

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// blockSizeStep is one catalog write of a block-size sequence: an upsert
// of a complete worker with block size bs, a patch of its block size, or
// (del) a delete.
type blockSizeStep struct {
	id    uint64
	bs    uint32
	patch bool
	del   bool
}

func (s blockSizeStep) command() Command {
	switch {
	case s.del:
		return DeleteWorker{WorkerID: s.id}
	case s.patch:
		return PatchWorker{WorkerID: s.id, Patch: WorkerPatch{BlockSize: ptr(s.bs)}}
	}
	return UpsertWorker{Worker: completeWorker(s.id, s.bs)}
}

func reg(id uint64, bs uint32) blockSizeStep     { return blockSizeStep{id: id, bs: bs} }
func patchBS(id uint64, bs uint32) blockSizeStep { return blockSizeStep{id: id, bs: bs, patch: true} }
func del(id uint64) blockSizeStep                { return blockSizeStep{id: id, del: true} }

// blockSizeCases are sequences of registrations, patches and deletions in
// partition m/default, with the block size and the schedulable workers
// they must end with.
var blockSizeCases = []struct {
	name        string
	steps       []blockSizeStep
	blockSize   uint32
	schedulable []uint64
}{
	// Issue 23: one worker registered with the wrong size outlives the
	// correct ones registered before it, while a correct one registered
	// after it remains: the partition stays 16.
	{"mis-registered worker outlives the senior ones",
		[]blockSizeStep{reg(1, 16), reg(2, 16), reg(3, 32), reg(4, 16), del(1), del(2)}, 16, []uint64{4}},
	{"no worker of the size left: the senior one sets it",
		[]blockSizeStep{reg(1, 16), reg(3, 32), del(1)}, 32, []uint64{3}},
	{"a later worker of the old size does not take it back",
		[]blockSizeStep{reg(1, 16), reg(3, 32), del(1), reg(4, 16)}, 32, []uint64{3}},
	{"the size survives a delete that leaves one holder",
		[]blockSizeStep{reg(1, 16), reg(2, 32), reg(3, 16), del(1), reg(5, 32), del(2)}, 16, []uint64{3}},
	{"a patch away from the size by the last holder lets it go",
		[]blockSizeStep{reg(1, 16), reg(2, 32), patchBS(1, 32)}, 32, []uint64{1, 2}},
	{"a patch away from the size by one of two holders keeps it",
		[]blockSizeStep{reg(1, 16), reg(2, 16), reg(3, 32), patchBS(1, 32)}, 16, []uint64{2}},
	{"a re-registration with another size keeps it while others hold it",
		[]blockSizeStep{reg(1, 16), reg(2, 32), reg(3, 16), reg(1, 32), del(3)}, 32, []uint64{1, 2}},
	{"emptied partition starts afresh",
		[]blockSizeStep{reg(1, 16), reg(2, 32), del(1), del(2), reg(3, 64), reg(4, 16)}, 64, []uint64{3}},
	{"workers without a size do not hold one",
		[]blockSizeStep{reg(1, 0), reg(2, 32), reg(3, 16)}, 32, []uint64{2}},
}

// Test_StickyBlockSize: a partition keeps its block size while any worker
// registered with it remains, whatever the seniority of the others.
func Test_StickyBlockSize(t *testing.T) {
	for _, tt := range blockSizeCases {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for _, st := range tt.steps {
				if res := h.apply(st.command()); res.Err != nil {
					t.Fatalf("%+v: %v", st, res.Err)
				}
			}
			checkBlockSize(t, h.f.Catalog(), tt.blockSize, tt.schedulable)
		})
	}
}

// Test_StickyBlockSizeAcrossSnapshots: a node that restores a snapshot
// taken at any point of a sequence and applies the rest of the log ends
// with the same catalog, byte for byte, as the node that applied it all
// live; and so does every snapshot along the way.
func Test_StickyBlockSizeAcrossSnapshots(t *testing.T) {
	for _, tt := range blockSizeCases {
		t.Run(tt.name, func(t *testing.T) {
			live := newHarness(t)
			var snaps [][]byte
			for _, st := range tt.steps {
				snaps = append(snaps, live.persist())
				live.apply(st.command())
			}
			want := live.persist()
			for cut, snap := range snaps {
				restored := New()
				if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
					t.Fatalf("restore at step %d: %v", cut, err)
				}
				h := &harness{t: t, log: &Log{FSM: restored, index: uint64(cut)}, f: restored}
				for _, st := range tt.steps[cut:] {
					h.apply(st.command())
				}
				if got := h.persist(); !bytes.Equal(got, want) {
					t.Fatalf("restored at step %d, then replayed:\n got %s\nwant %s", cut, got, want)
				}
				checkBlockSize(t, restored.Catalog(), tt.blockSize, tt.schedulable)
			}
		})
	}
}

func checkBlockSize(t *testing.T, c *Catalog, blockSize uint32, schedulable []uint64) {
	t.Helper()
	p, ok := c.Partition(PartitionKey{"m", DefaultScope})
	if !ok {
		t.Fatal("partition m/default missing")
	}
	if p.BlockSize != blockSize || !reflect.DeepEqual(p.Schedulable, schedulable) {
		t.Fatalf("partition block size %d, schedulable %v; want %d, %v", p.BlockSize, p.Schedulable, blockSize, schedulable)
	}
	for _, id := range p.Workers {
		w, _ := c.Worker(id)
		mismatch := strings.Contains(strings.Join(w.NotSchedulableReasons, ";"), fmt.Sprintf("existing=%d", blockSize))
		if w.BlockSize != blockSize && w.BlockSize != 0 && !mismatch {
			t.Fatalf("worker %d (block size %d) reasons %q, want a mismatch with %d", id, w.BlockSize, w.NotSchedulableReasons, blockSize)
		}
	}
}

// Test_SnapshotBlockSizesOnlyWhereHistoryMatters: the snapshot carries a
// partition's block size only when its workers alone would give another,
// so a catalog without such history persists as it always did.
func Test_SnapshotBlockSizesOnlyWhereHistoryMatters(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	h.upsert(completeWorker(2, 32))
	if snap := h.persist(); bytes.Contains(snap, []byte("partition_block_sizes")) {
		t.Fatalf("snapshot without history carries block sizes: %s", snap)
	}
	h.upsert(completeWorker(3, 16))
	h.apply(DeleteWorker{WorkerID: 1})
	if snap := h.persist(); !bytes.Contains(snap, []byte(`"partition_block_sizes":[{"model_name":"m","tenant_id":"default","block_size":16}]`)) {
		t.Fatalf("snapshot lost the sticky block size: %s", snap)
	}
}

// Test_RestoreRejectsBadBlockSizes: the optional field passes the same
// scrutiny as the rest of a snapshot.
func Test_RestoreRejectsBadBlockSizes(t *testing.T) {
	const worker = `{"worker_id":1,"model_name":"m","tenant_id":"default","endpoint":"http://w","block_size":16,"data_parallel_start_rank":0,"data_parallel_size":1,"kv_events_endpoints":{"0":"tcp://h:1"},"create_index":1,"modify_index":1,"block_size_index":1,"lifecycle":"schedulable"}`
	tests := []struct {
		name, sizes, want string
	}{
		{"zero", `[{"model_name":"m","tenant_id":"default","block_size":0}]`, "must be 1 to"},
		{"too large", `[{"model_name":"m","tenant_id":"default","block_size":1000000}]`, "must be 1 to"},
		{"no worker", `[{"model_name":"x","tenant_id":"default","block_size":16}]`, "has no worker"},
		{"twice", `[{"model_name":"m","tenant_id":"default","block_size":16},{"model_name":"m","tenant_id":"default","block_size":16}]`, "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := `{"version":5,"index":1,"workers":[` + worker + `],"partition_block_sizes":` + tt.sizes + `,"catalog_rules":1}`
			err := New().Restore(io.NopCloser(strings.NewReader(snap)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("restore = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Test_GoldenSnapshotBlockSizes pins the partition_block_sizes field (in a
// version-5 snapshot, the catalog rules on): the
// partition of the takeover sequence (16, 16, 32, 16, then the first two
// deleted) restores at 16, with the 32 worker incomplete, and the snapshot
// re-encodes to the same bytes.
func Test_GoldenSnapshotBlockSizes(t *testing.T) {
	data := golden(t, "snapshot.v5-catalog-rules.json")
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	checkBlockSize(t, f.Catalog(), 16, []uint64{4})
	h := &harness{t: t, f: f}
	if got := h.persist(); !bytes.Equal(got, data) {
		t.Fatalf("snapshot encoder drifted:\n got %s\nwant %s", got, data)
	}
}
