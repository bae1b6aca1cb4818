package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func workerIn(id uint64, model, tenant string) Worker {
	w := completeWorker(id, 16)
	w.ModelName, w.TenantID = model, tenant
	return w
}

// Test_CheckPartitionKnown: a partition is known while the catalog holds
// a worker for it, schedulable or not, and after its last worker left;
// it is unknown when no worker was ever registered for it.
func Test_CheckPartitionKnown(t *testing.T) {
	incomplete := workerIn(3, "half", "t")
	incomplete.Endpoint = ""
	tests := []struct {
		name    string
		cmds    []Command
		key     PartitionKey
		unknown bool
	}{
		{"empty catalog", nil, PartitionKey{"m", "default"}, true},
		{"held", []Command{UpsertWorker{Worker: workerIn(1, "m", "default")}}, PartitionKey{"m", "default"}, false},
		{"typo of the model", []Command{UpsertWorker{Worker: workerIn(1, "llama3", "default")}}, PartitionKey{"llama", "default"}, true},
		{"typo of the tenant", []Command{UpsertWorker{Worker: workerIn(1, "m", "team-a")}}, PartitionKey{"m", "team-b"}, true},
		{"only incomplete workers", []Command{UpsertWorker{Worker: incomplete}}, PartitionKey{"half", "t"}, false},
		{"last worker deleted", []Command{UpsertWorker{Worker: workerIn(1, "m", "default")}, DeleteWorker{WorkerID: 1}},
			PartitionKey{"m", "default"}, false},
		{"last worker moved to another model", []Command{UpsertWorker{Worker: workerIn(1, "m", "default")},
			PatchWorker{WorkerID: 1, Patch: WorkerPatch{ModelName: ptr("n")}}}, PartitionKey{"m", "default"}, false},
		{"registered again after it emptied", []Command{UpsertWorker{Worker: workerIn(1, "m", "default")},
			DeleteWorker{WorkerID: 1}, UpsertWorker{Worker: workerIn(2, "m", "default")}}, PartitionKey{"m", "default"}, false},
		{"a rejected command registers nothing", []Command{PatchWorker{WorkerID: 9, Patch: WorkerPatch{ModelName: ptr("m")}}},
			PartitionKey{"m", "default"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for _, c := range tt.cmds {
				h.apply(c)
			}
			err := h.f.Catalog().CheckPartitionKnown(tt.key)
			if got := errors.Is(err, ErrUnknownPartition); got != tt.unknown {
				t.Fatalf("CheckPartitionKnown = %v, want unknown %v", err, tt.unknown)
			}
			// A node restored from a snapshot answers alike.
			restored := New()
			if err := restored.Restore(io.NopCloser(bytes.NewReader(h.persist()))); err != nil {
				t.Fatal(err)
			}
			if got := errors.Is(restored.Catalog().CheckPartitionKnown(tt.key), ErrUnknownPartition); got != tt.unknown {
				t.Fatalf("after restore: unknown %v, want %v", got, tt.unknown)
			}
		})
	}
}

// Test_UnknownPartitionMessage: the message names the partition asked for
// and lists, bounded, the partitions the catalog holds.
func Test_UnknownPartitionMessage(t *testing.T) {
	h := newHarness(t)
	err := h.f.Catalog().CheckPartitionKnown(PartitionKey{"llama", "default"})
	if want := `unknown partition: no worker was ever registered for model_name "llama" tenant_id "default"; the catalog holds no worker at all`; err == nil || err.Error() != want {
		t.Fatalf("empty catalog: %v\nwant %s", err, want)
	}
	h.upsert(workerIn(1, "llama3:8b", "team-a"))
	h.upsert(workerIn(2, "llama3:8b", "default"))
	err = h.f.Catalog().CheckPartitionKnown(PartitionKey{"llama", "default"})
	if want := `unknown partition: no worker was ever registered for model_name "llama" tenant_id "default"; the catalog holds 2 partition(s) (model_name/tenant_id): "llama3:8b"/"default", "llama3:8b"/"team-a"`; err == nil || err.Error() != want {
		t.Fatalf("two partitions: %v\nwant %s", err, want)
	}
	for i := range MaxListedPartitions + 5 {
		h.upsert(workerIn(uint64(10+i), fmt.Sprintf("m%02d", i), "default"))
	}
	msg := h.f.Catalog().CheckPartitionKnown(PartitionKey{"llama", "default"}).Error()
	if !strings.Contains(msg, "holds 17 partition(s)") || !strings.Contains(msg, `"m07"/"default" and 7 more (GET /workers lists them)`) ||
		strings.Contains(msg, `"m08"`) {
		t.Fatalf("bounded listing: %s", msg)
	}
}

// Test_RetiredPartitionsBounded: past MaxRetiredPartitions emptied
// partitions, the one emptied longest ago is forgotten first.
func Test_RetiredPartitionsBounded(t *testing.T) {
	h := newHarness(t)
	key := func(i int) PartitionKey { return PartitionKey{fmt.Sprintf("m%d", i), DefaultScope} }
	for i := range MaxRetiredPartitions + 1 {
		h.upsert(workerIn(1, key(i).Model, DefaultScope))
		h.apply(DeleteWorker{WorkerID: 1})
	}
	c := h.f.Catalog()
	if len(c.retired) != MaxRetiredPartitions {
		t.Fatalf("%d retired partitions, want %d", len(c.retired), MaxRetiredPartitions)
	}
	if err := c.CheckPartitionKnown(key(0)); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("oldest emptied partition still known: %v", err)
	}
	if err := c.CheckPartitionKnown(key(1)); err != nil {
		t.Fatalf("second oldest forgotten: %v", err)
	}
}

// Test_RestoreRejectsBadRetired: the optional field passes the same
// scrutiny as the rest of a snapshot.
func Test_RestoreRejectsBadRetired(t *testing.T) {
	const worker = `{"worker_id":1,"model_name":"m","tenant_id":"default","endpoint":"http://w","block_size":16,"data_parallel_start_rank":0,"data_parallel_size":1,"kv_events_endpoints":{"0":"tcp://h:1"},"create_index":1,"modify_index":1,"block_size_index":1,"lifecycle":"schedulable"}`
	tests := []struct{ name, retired, want string }{
		{"holds workers", `[{"model_name":"m","tenant_id":"default","index":1}]`, "holds workers"},
		{"twice", `[{"model_name":"x","tenant_id":"default","index":1},{"model_name":"x","tenant_id":"default","index":2}]`, "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := `{"version":5,"index":3,"workers":[` + worker + `],"retired_partitions":` + tt.retired + `,"catalog_rules":1}`
			err := New().Restore(io.NopCloser(strings.NewReader(snap)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("restore = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
