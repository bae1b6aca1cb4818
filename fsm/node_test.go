package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func Test_NodeMetadata(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	workersBefore := h.f.Catalog()
	tests := []struct {
		name    string
		body    Command
		wantErr error
		want    []NodeMeta // nodes after the command, ModifyIndex ignored
	}{
		{"set n1", SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "127.0.0.1:9001"}}, nil,
			[]NodeMeta{{ID: "n1", HTTPAddr: "127.0.0.1:9001"}}},
		{"set n2 with replica sync", SetNode{Node: NodeMeta{ID: "n2", HTTPAddr: "kv-1.kv:8092", ReplicaSync: "tcp://kv-1.kv:5600"}}, nil,
			[]NodeMeta{{ID: "n1", HTTPAddr: "127.0.0.1:9001"}, {ID: "n2", HTTPAddr: "kv-1.kv:8092", ReplicaSync: "tcp://kv-1.kv:5600"}}},
		{"replace n1", SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "127.0.0.1:9009"}}, nil,
			[]NodeMeta{{ID: "n1", HTTPAddr: "127.0.0.1:9009"}, {ID: "n2", HTTPAddr: "kv-1.kv:8092", ReplicaSync: "tcp://kv-1.kv:5600"}}},
		{"no id", SetNode{Node: NodeMeta{HTTPAddr: "h:1"}}, ErrInvalidCommand, nil},
		{"bad http addr", SetNode{Node: NodeMeta{ID: "n3", HTTPAddr: "nohost"}}, ErrInvalidCommand, nil},
		{"bad replica sync", SetNode{Node: NodeMeta{ID: "n3", HTTPAddr: "h:1", ReplicaSync: "ipc:///x"}}, ErrInvalidCommand, nil},
		{"delete unknown", DeleteNode{ID: "n9"}, ErrNodeNotFound, nil},
		{"delete n1", DeleteNode{ID: "n1"}, nil,
			[]NodeMeta{{ID: "n2", HTTPAddr: "kv-1.kv:8092", ReplicaSync: "tcp://kv-1.kv:5600"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.f.Catalog()
			res := h.apply(tt.body)
			if !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", res.Err, tt.wantErr)
			}
			got := h.f.Catalog().Nodes()
			if tt.wantErr != nil {
				if !reflect.DeepEqual(got, before.Nodes()) {
					t.Fatalf("rejected command changed nodes: %+v", got)
				}
				return
			}
			for i := range got {
				got[i].ModifyIndex = 0
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("nodes = %+v, want %+v", got, tt.want)
			}
			// The catalog published before this command is immutable.
			if len(before.Nodes()) > 0 && reflect.DeepEqual(before.Nodes(), h.f.Catalog().Nodes()) {
				t.Fatal("node write did not produce a new node set")
			}
		})
	}
	if len(NewChange(workersBefore, h.f.Catalog()).Workers) != 0 {
		t.Fatal("node commands changed worker records")
	}
}

func Test_SnapshotKeepsNodes(t *testing.T) {
	h := newHarness(t)
	h.upsert(completeWorker(1, 16))
	h.apply(SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "127.0.0.1:9001", ReplicaSync: "tcp://127.0.0.1:9301"}})
	h.apply(SetNode{Node: NodeMeta{ID: "n2", HTTPAddr: "127.0.0.1:9002"}})
	restored := New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(h.persist()))); err != nil {
		t.Fatal(err)
	}
	if got, want := restored.Catalog().Nodes(), h.f.Catalog().Nodes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored nodes %+v, want %+v", got, want)
	}

	// Snapshots written before node metadata existed still restore.
	v1 := `{"version":1,"index":4,"workers":[{"worker_id":1,"model_name":"m","tenant_id":"default","endpoint":"http://w","block_size":16,"data_parallel_start_rank":0,"data_parallel_size":1,"kv_events_endpoints":{"0":"tcp://127.0.0.1:5557"}}]}`
	old := New()
	if err := old.Restore(io.NopCloser(strings.NewReader(v1))); err != nil {
		t.Fatal(err)
	}
	if c := old.Catalog(); c.Len() != 1 || len(c.Nodes()) != 0 || c.Index() != 4 {
		t.Fatalf("v1 restore: len=%d nodes=%d index=%d", c.Len(), len(c.Nodes()), c.Index())
	}
	for _, bad := range []string{
		`{"version":2,"index":1,"workers":[],"nodes":[{"id":"n1","http_addr":"h:1"},{"id":"n1","http_addr":"h:2"}]}`,
		`{"version":2,"index":1,"workers":[],"nodes":[{"id":"","http_addr":"h:1"}]}`,
	} {
		if err := New().Restore(io.NopCloser(strings.NewReader(bad))); err == nil {
			t.Fatalf("restore of %s succeeded", bad)
		}
	}
}
