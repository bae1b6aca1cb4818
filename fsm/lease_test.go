package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

// Test_ExpireLease: an expiry removes the record the leader judged and
// nothing else; a record changed since (re-registered, patched, lease
// removed) stays, on every node alike.
func Test_ExpireLease(t *testing.T) {
	leased := func(id uint64) Worker {
		w := completeWorker(id, 16)
		w.LeaseTTLSeconds = 10
		return w
	}
	tests := []struct {
		name    string
		between func(h *harness) // commands after the judged record
		judged  func(modify uint64) uint64
		wantErr error
	}{
		{"judged record is removed", nil, func(m uint64) uint64 { return m }, nil},
		{"re-registered since", func(h *harness) { h.upsert(leased(1)) }, func(m uint64) uint64 { return m }, ErrLeaseRenewed},
		{"patched since", func(h *harness) {
			h.apply(PatchWorker{WorkerID: 1, Patch: WorkerPatch{Endpoint: ptr("http://moved")}})
		}, func(m uint64) uint64 { return m }, ErrLeaseRenewed},
		{"lease removed since", func(h *harness) {
			h.apply(PatchWorker{WorkerID: 1, Patch: WorkerPatch{LeaseTTLSeconds: ptr[uint32](0)}})
		}, func(m uint64) uint64 { return m }, ErrLeaseRenewed},
		{"deleted since", func(h *harness) { h.apply(DeleteWorker{WorkerID: 1}) }, func(m uint64) uint64 { return m }, ErrWorkerNotFound},
		{"another index", nil, func(m uint64) uint64 { return m + 7 }, ErrLeaseRenewed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.upsert(leased(2))
			judged := h.upsert(leased(1)).Worker.ModifyIndex
			if tt.between != nil {
				tt.between(h)
			}
			res := h.apply(ExpireLease{WorkerID: 1, ModifyIndex: tt.judged(judged)})
			if !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", res.Err, tt.wantErr)
			}
			_, present := h.f.Catalog().Worker(1)
			if want := errors.Is(tt.wantErr, ErrLeaseRenewed); present != want {
				t.Fatalf("worker 1 present=%v after expiry with err %v", present, res.Err)
			}
			if tt.wantErr == nil && (res.Worker == nil || res.Worker.WorkerID != 1) {
				t.Fatalf("result names the removed record: %+v", res.Worker)
			}
			if _, ok := h.f.Catalog().Worker(2); !ok {
				t.Fatal("worker 2 went too")
			}
		})
	}
}

// Test_GoldenExpireLease pins type 9's log format: the golden file must
// decode and apply forever, and the encoder must still write it.
func Test_GoldenExpireLease(t *testing.T) {
	data := golden(t, "expire_lease.v1.bin")
	enc, err := EncodeCommand(ExpireLease{WorkerID: 7, ModifyIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, data) {
		t.Fatalf("encoder drifted from the v1 format:\n got %q\nwant %q", enc, data)
	}
	f := New()
	w := completeWorker(7, 16)
	w.LeaseTTLSeconds = 5
	up, err := EncodeCommand(UpsertWorker{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.Apply(&raft.Log{Index: 1, Data: up}).(*Result); res.Err != nil || res.Worker.LeaseTTLSeconds != 5 {
		t.Fatalf("upsert with a lease: %+v", res)
	}
	if res := f.Apply(&raft.Log{Index: 2, Data: data}).(*Result); res.Err != nil || f.Catalog().Len() != 0 {
		t.Fatalf("golden expiry: %+v, %d workers left", res, f.Catalog().Len())
	}
}

// Test_LeaseIndex: what renews a lease (SPEC §3.7) is recorded as the
// record's LeaseIndex: a registration with a lease and a patch that sets
// lease_ttl_s move it, a patch of anything else does not, and removing the
// lease clears it. It survives a snapshot, and a snapshot from before it
// existed restores it as the record's last change.
func Test_LeaseIndex(t *testing.T) {
	h := newHarness(t)
	w := completeWorker(1, 16)
	w.LeaseTTLSeconds = 10
	first := h.upsert(w).Worker
	if first.LeaseIndex != first.ModifyIndex {
		t.Fatalf("registration: lease index %d, modify index %d", first.LeaseIndex, first.ModifyIndex)
	}
	steps := []struct {
		name  string
		patch WorkerPatch
		moves bool
	}{
		{"patch of the endpoint", WorkerPatch{Endpoint: ptr("http://moved")}, false},
		{"patch that sets lease_ttl_s", WorkerPatch{LeaseTTLSeconds: ptr[uint32](20)}, true},
		{"patch that sets the same lease_ttl_s", WorkerPatch{LeaseTTLSeconds: ptr[uint32](20)}, true},
		{"patch of the replay endpoint", WorkerPatch{ReplayEndpoint: ptr("tcp://127.0.0.1:9")}, false},
	}
	last := first.LeaseIndex
	for _, s := range steps {
		res := h.apply(PatchWorker{WorkerID: 1, Patch: s.patch})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		got := res.Worker.LeaseIndex
		if s.moves && got != res.Worker.ModifyIndex || !s.moves && got != last {
			t.Fatalf("%s: lease index %d (modify index %d, before %d)", s.name, got, res.Worker.ModifyIndex, last)
		}
		last = got
	}
	snapshot := h.persist()
	restore := func(b []byte) *Worker {
		t.Helper()
		f := New()
		if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
			t.Fatal(err)
		}
		r, _ := f.Catalog().Worker(1)
		return r
	}
	if r := restore(snapshot); r.LeaseIndex != last {
		t.Fatalf("restored lease index %d, want %d", r.LeaseIndex, last)
	}
	old := bytes.Replace(snapshot, []byte(fmt.Sprintf(`,"lease_index":%d`, last)), nil, 1)
	if bytes.Equal(old, snapshot) {
		t.Fatalf("no lease_index in the snapshot: %s", snapshot)
	}
	if r := restore(old); r.LeaseIndex != r.ModifyIndex {
		t.Fatalf("a snapshot without lease_index restored %d, modify index %d", r.LeaseIndex, r.ModifyIndex)
	}
	if res := h.apply(PatchWorker{WorkerID: 1, Patch: WorkerPatch{LeaseTTLSeconds: ptr[uint32](0)}}); res.Worker.LeaseIndex != 0 {
		t.Fatalf("lease removed, lease index %d", res.Worker.LeaseIndex)
	}
}
