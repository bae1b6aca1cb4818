package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// harness applies commands at increasing indexes, like raft would.
type harness struct {
	t   *testing.T
	log *Log
	f   *FSM
}

func newHarness(t *testing.T) *harness {
	l := NewLog()
	return &harness{t: t, log: l, f: l.FSM}
}

func (h *harness) apply(c Command) *Result {
	h.t.Helper()
	res, err := h.log.Apply(c)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func (h *harness) upsert(w Worker) *Result { return h.apply(UpsertWorker{Worker: w}) }

func completeWorker(id uint64, bs uint32) Worker {
	return Worker{
		WorkerID: id, ModelName: "m", Endpoint: "http://w",
		BlockSize: bs, DataParallelSize: 1,
		KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:5557"},
	}
}

func ptr[T any](v T) *T { return &v }

func Test_Lifecycle(t *testing.T) {
	tests := []struct {
		name    string
		worker  Worker
		reasons []string
	}{
		{"complete", completeWorker(1, 16), nil},
		{"no endpoint", func() Worker { w := completeWorker(1, 16); w.Endpoint = ""; return w }(),
			[]string{"endpoint is required"}},
		{"block size zero", completeWorker(1, 0), []string{"block_size must be greater than 0"}},
		{"missing rank endpoint", func() Worker { w := completeWorker(1, 16); w.DataParallelSize = 2; return w }(),
			[]string{"kv_events endpoint is required for dp_rank 1"}},
		{"endpoint outside range", func() Worker {
			w := completeWorker(1, 16)
			w.KVEventsEndpoints = map[uint32]string{0: "tcp://h:1", 7: "tcp://h:2"}
			return w
		}(), []string{"kv_events endpoint for dp_rank 7 is outside the data parallel range [0, 1)"}},
		{"several", Worker{WorkerID: 1, DataParallelStartRank: 2, DataParallelSize: 2}, []string{
			"endpoint is required", "block_size must be greater than 0",
			"kv_events endpoint is required for dp_rank 2", "kv_events endpoint is required for dp_rank 3",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			res := h.upsert(tt.worker)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			w := res.Worker
			if !reflect.DeepEqual(w.NotSchedulableReasons, tt.reasons) {
				t.Fatalf("reasons = %q, want %q", w.NotSchedulableReasons, tt.reasons)
			}
			if w.Schedulable() != (len(tt.reasons) == 0) {
				t.Fatalf("schedulable = %v with reasons %q", w.Schedulable(), tt.reasons)
			}
			if w.ModelName != "m" && w.ModelName != DefaultScope || w.TenantID != DefaultScope {
				t.Fatalf("scope defaults not applied: %q/%q", w.ModelName, w.TenantID)
			}
		})
	}
}

func Test_BlockSizeSetByOldestWorker(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(5, 16)) // oldest
	res := h.upsert(completeWorker(2, 32))
	want := []string{"block_size mismatch for model/tenant: existing=16 requested=32"}
	if !reflect.DeepEqual(res.Worker.NotSchedulableReasons, want) {
		t.Fatalf("reasons = %q, want %q", res.Worker.NotSchedulableReasons, want)
	}
	if p, _ := h.f.Catalog().Partition(PartitionKey{"m", "default"}); p.BlockSize != 16 {
		t.Fatalf("partition block size = %d, want 16", p.BlockSize)
	}
	// Re-registering the oldest keeps its create index, so it still wins.
	h.upsert(completeWorker(5, 16))
	if w, _ := h.f.Catalog().Worker(2); w.Schedulable() {
		t.Fatal("worker 2 became schedulable after upsert of the oldest")
	}
	// Deleting the oldest hands the partition to worker 2.
	h.apply(DeleteWorker{WorkerID: 5})
	w, _ := h.f.Catalog().Worker(2)
	if !w.Schedulable() {
		t.Fatalf("worker 2 is not schedulable: %q", w.NotSchedulableReasons)
	}
	if p, _ := h.f.Catalog().Partition(PartitionKey{"m", "default"}); p.BlockSize != 32 {
		t.Fatalf("partition block size = %d, want 32", p.BlockSize)
	}
	// Other partitions are unaffected by m's block size.
	other := completeWorker(9, 64)
	other.ModelName = "other"
	if res := h.upsert(other); !res.Worker.Schedulable() {
		t.Fatalf("worker in another model: %q", res.Worker.NotSchedulableReasons)
	}
}

func Test_Patch(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	tests := []struct {
		name  string
		patch WorkerPatch
		check func(*Worker) bool
	}{
		{"endpoint", WorkerPatch{Endpoint: ptr("http://x")}, func(w *Worker) bool { return w.Endpoint == "http://x" }},
		{"grow dp to incomplete", WorkerPatch{DataParallelSize: ptr[uint32](2)},
			func(w *Worker) bool { return !w.Schedulable() }},
		{"endpoints map completes it", WorkerPatch{KVEventsEndpoints: &map[uint32]string{0: "tcp://a:1", 1: "tcp://a:2"}},
			func(w *Worker) bool { return w.Schedulable() && len(w.KVEventsEndpoints) == 2 }},
		{"single endpoint shorthand", WorkerPatch{DataParallelSize: ptr[uint32](1), KVEventsEndpoint: ptr("tcp://b:1")},
			func(w *Worker) bool { return w.Schedulable() && w.KVEventsEndpoints[0] == "tcp://b:1" }},
		{"clear replay", WorkerPatch{ReplayEndpoint: ptr("")}, func(w *Worker) bool { return w.ReplayEndpoint == "" }},
		{"capacity", WorkerPatch{TotalKVBlocks: ptr[uint64](1000)}, func(w *Worker) bool { return w.TotalKVBlocks == 1000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.apply(PatchWorker{WorkerID: 1, Patch: tt.patch})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if !tt.check(res.Worker) {
				t.Fatalf("unexpected record %+v", res.Worker)
			}
			if res.Worker.ModifyIndex != res.Index || res.Worker.CreateIndex != 1 {
				t.Fatalf("indexes create=%d modify=%d at %d", res.Worker.CreateIndex, res.Worker.ModifyIndex, res.Index)
			}
		})
	}
}

func Test_RejectedCommands(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	before := h.f.Catalog()
	tests := []struct {
		name string
		body Command
		want error
	}{
		{"patch unknown", PatchWorker{WorkerID: 9}, ErrWorkerNotFound},
		{"delete unknown", DeleteWorker{WorkerID: 9}, ErrWorkerNotFound},
		{"patch dp size zero", PatchWorker{WorkerID: 1, Patch: WorkerPatch{DataParallelSize: ptr[uint32](0)}}, ErrInvalidCommand},
		{"bad endpoint", UpsertWorker{Worker: Worker{WorkerID: 2, DataParallelSize: 1,
			KVEventsEndpoints: map[uint32]string{0: "http://nope"}}}, ErrInvalidCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.apply(tt.body)
			if !errors.Is(res.Err, tt.want) {
				t.Fatalf("err = %v, want %v", res.Err, tt.want)
			}
			cur := h.f.Catalog()
			if cur.Index() != res.Index {
				t.Fatalf("catalog index %d, want %d (rejections still advance it)", cur.Index(), res.Index)
			}
			if len(NewChange(before, cur).Workers) != 0 {
				t.Fatal("a rejected command changed the catalog")
			}
		})
	}
}

func Test_UnknownCommandIsFatal(t *testing.T) {
	fatal := [][]byte{
		{},                           // empty
		{0x6E, '{', '}'},             // unknown type, not flagged skippable
		{byte(CmdUpsertWorker), 'x'}, // known type, undecodable
		{byte(CmdUpsertWorker | IgnoreUnknown), 'x'}, // the flag never excuses a known type's bad payload
	}
	for _, data := range fatal {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("Apply(%q) did not panic", data)
				}
			}()
			New().Apply(&raft.Log{Index: 1, Data: data})
		}()
	}
}

// Test_UnknownSkippableCommand: an entry of a type this binary does not
// know, flagged IgnoreUnknown by the newer binary that wrote it, is skipped:
// the catalog is unchanged but its index advances, so waiters on it are
// released; a known type with the flag applies as usual.
func Test_UnknownSkippableCommand(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	before := h.f.Catalog()
	res := h.f.Apply(&raft.Log{Index: 2, Data: []byte{0x80 | 0x6E, '{', '}'}}).(*Result)
	if !res.Skipped || res.Err != nil || res.Index != 2 || h.f.Skipped() != 1 {
		t.Fatalf("result = %+v, skipped %d", res, h.f.Skipped())
	}
	after := h.f.Catalog()
	if after.Index() != 2 || len(NewChange(before, after).Workers) != 0 || after.Len() != 1 {
		t.Fatalf("skipped entry changed the catalog: index %d, %d workers", after.Index(), after.Len())
	}
	data, err := EncodeCommand(DeleteWorker{WorkerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	data[0] |= byte(IgnoreUnknown)
	if res := h.f.Apply(&raft.Log{Index: 3, Data: data}).(*Result); res.Skipped || res.Err != nil || h.f.Catalog().Len() != 0 {
		t.Fatalf("flagged known command: %+v, %d workers left", res, h.f.Catalog().Len())
	}
}

func Test_DiffAndDelete(t *testing.T) {
	h := newHarness(t)
	c0 := h.f.Catalog()
	h.upsert(completeWorker(1, 16))
	h.upsert(completeWorker(2, 16))
	c1 := h.f.Catalog()
	if d := NewChange(c0, c1).Workers; len(d) != 2 || d[0].Old != nil || d[0].New.WorkerID != 1 {
		t.Fatalf("diff after inserts = %+v", d)
	}
	res := h.apply(DeleteWorker{WorkerID: 1})
	if res.Err != nil || res.Worker.WorkerID != 1 {
		t.Fatalf("delete = %+v", res)
	}
	d := NewChange(c1, h.f.Catalog()).Workers
	if len(d) != 1 || d[0].New != nil || d[0].Old.WorkerID != 1 {
		t.Fatalf("diff after delete = %+v", d)
	}
	select {
	case <-h.f.Changed():
	default:
		t.Fatal("no change notification")
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

// persist snapshots the harness's FSM and returns the snapshot's bytes.
func (h *harness) persist() []byte {
	h.t.Helper()
	snap, err := h.f.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		h.t.Fatal(err)
	}
	return sink.Bytes()
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func Test_SnapshotRestore(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	h.upsert(completeWorker(2, 32)) // incomplete: mismatch
	w3 := completeWorker(3, 8)
	w3.TenantID = "t2"
	h.upsert(w3)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Later writes must not leak into the snapshot taken before them.
	h.apply(DeleteWorker{WorkerID: 3})
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	restored := New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	got := restored.Catalog()
	if got.Index() != 3 || got.Len() != 3 {
		t.Fatalf("restored index=%d len=%d, want 3/3", got.Index(), got.Len())
	}
	for _, id := range []uint64{1, 2, 3} {
		w, _ := got.Worker(id)
		orig := mustWorkerAt(t, sink.Bytes(), id)
		if !reflect.DeepEqual(w, orig) {
			t.Fatalf("worker %d restored as %+v, want %+v", id, w, orig)
		}
	}
	if w, _ := got.Worker(2); w.Schedulable() {
		t.Fatal("derived lifecycle not recomputed on restore")
	}
	if err := restored.Restore(io.NopCloser(strings.NewReader("{"))); err == nil {
		t.Fatal("restore of garbage succeeded")
	}
	if restored.Catalog() != got {
		t.Fatal("failed restore replaced the catalog")
	}
}

// mustWorkerAt restores a snapshot and returns one record from it; used to
// compare restored records with what was persisted.
func mustWorkerAt(t *testing.T, snap []byte, id uint64) *Worker {
	t.Helper()
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	w, ok := f.Catalog().Worker(id)
	if !ok {
		t.Fatalf("worker %d missing", id)
	}
	return w
}

func Test_Deterministic(t *testing.T) {
	// Two FSMs fed the same log end with byte-identical snapshots.
	cmds := []struct {
		body Command
	}{
		{UpsertWorker{Worker: completeWorker(3, 16)}},
		{UpsertWorker{Worker: completeWorker(1, 32)}},
		{PatchWorker{WorkerID: 3, Patch: WorkerPatch{ModelName: ptr("x")}}},
		{UpsertWorker{Worker: completeWorker(2, 32)}},
		{DeleteWorker{WorkerID: 9}},
	}
	var outs [2][]byte
	for i := range outs {
		h := newHarness(t)
		for _, c := range cmds {
			h.apply(c.body)
		}
		snap, _ := h.f.Snapshot()
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		outs[i] = sink.Bytes()
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("snapshots differ:\n%s\n%s", outs[0], outs[1])
	}
}

// Test_BlockSizeChangeLosesSeniority: the oldest worker changing its block
// size does not drag its partition along; it becomes the odd one out.
func Test_BlockSizeChangeLosesSeniority(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	h.upsert(completeWorker(2, 16))
	res := h.upsert(completeWorker(1, 32)) // re-register the oldest with another size
	want := []string{"block_size mismatch for model/tenant: existing=16 requested=32"}
	if !reflect.DeepEqual(res.Worker.NotSchedulableReasons, want) {
		t.Fatalf("worker 1 reasons = %q, want %q", res.Worker.NotSchedulableReasons, want)
	}
	if w, _ := h.f.Catalog().Worker(2); !w.Schedulable() {
		t.Fatalf("worker 2 = %q, want schedulable", w.NotSchedulableReasons)
	}
	// A patch that leaves the block size alone keeps seniority.
	h.apply(PatchWorker{WorkerID: 2, Patch: WorkerPatch{Endpoint: ptr("http://y")}})
	if p, _ := h.f.Catalog().Partition(PartitionKey{"m", "default"}); p.BlockSize != 16 {
		t.Fatalf("partition block size = %d, want 16", p.BlockSize)
	}
	// Once worker 2 leaves, worker 1 is alone and sets the size again.
	h.apply(DeleteWorker{WorkerID: 2})
	if w, _ := h.f.Catalog().Worker(1); !w.Schedulable() {
		t.Fatalf("worker 1 alone = %q", w.NotSchedulableReasons)
	}
}

func Test_PartitionRankLimit(t *testing.T) {
	h := newHarness(t)
	big := func(id uint64) Worker {
		w := completeWorker(id, 16)
		w.DataParallelStartRank = uint32(id) * MaxDataParallelSize
		w.DataParallelSize = MaxDataParallelSize
		w.KVEventsEndpoints = map[uint32]string{}
		for r := range uint32(MaxDataParallelSize) {
			w.KVEventsEndpoints[w.DataParallelStartRank+r] = "tcp://h:1"
		}
		return w
	}
	// 15 workers of 4096 ranks fit in 65535; the 16th does not.
	for id := range uint64(15) {
		if res := h.upsert(big(id)); !res.Worker.Schedulable() {
			t.Fatalf("worker %d: %q", id, res.Worker.NotSchedulableReasons)
		}
	}
	res := h.upsert(big(15))
	if res.Worker.Schedulable() || !strings.Contains(strings.Join(res.Worker.NotSchedulableReasons, ";"), "rank limit") {
		t.Fatalf("16th worker: schedulable %v, reasons %q", res.Worker.Schedulable(), res.Worker.NotSchedulableReasons)
	}
	// A small worker still fits in what is left (65535 − 15·4096 = 4095).
	small := completeWorker(100, 16)
	small.DataParallelStartRank = 200000
	small.KVEventsEndpoints = map[uint32]string{200000: "tcp://h:1"}
	if res := h.upsert(small); !res.Worker.Schedulable() {
		t.Fatalf("small worker: %q", res.Worker.NotSchedulableReasons)
	}
}

// Test_RestoreUnsupportedVersion: a snapshot of a version this binary does
// not read (a newer binary's, or one without a version) fails with an error
// naming the version, and leaves the catalog as it was: same catalog, no
// change notification, and writes go on at the next index.
func Test_RestoreUnsupportedVersion(t *testing.T) {
	newer := bytes.Replace(golden(t, "snapshot.v2.json"), []byte(`"version":2`), []byte(`"version":6`), 1)
	tests := []struct {
		name    string
		snap    string
		wantErr string
	}{
		{"newer version, empty", `{"version":6,"index":9,"workers":[]}`, "unsupported version 6"},
		{"newer version, valid records", string(newer), "unsupported version 6"},
		{"no version", `{"index":9,"workers":[]}`, "unsupported version 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.upsert(completeWorker(1, 16))
			h.apply(SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "127.0.0.1:8092"}})
			before := h.f.Catalog()
			<-h.f.Changed() // the applies above left a notification
			err := h.f.Restore(io.NopCloser(strings.NewReader(tt.snap)))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("restore = %v, want an error containing %q", err, tt.wantErr)
			}
			if h.f.Catalog() != before {
				t.Fatal("a failed restore replaced the catalog")
			}
			select {
			case <-h.f.Changed():
				t.Fatal("a failed restore notified observers")
			default:
			}
			if res := h.upsert(completeWorker(2, 16)); res.Err != nil || res.Index != before.Index()+1 {
				t.Fatalf("write after the failed restore: %+v", res)
			}
		})
	}
}
