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

// Test_NodeEpochs: a node's epoch is the index at which its current
// incarnation was first written. It grows at every new incarnation, stays
// when the same one or none is written again, and never repeats, even for
// a node deleted and added again.
func Test_NodeEpochs(t *testing.T) {
	h := newHarness(t)
	set := func(inc uint64) Command {
		return SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "h:1", Incarnation: inc}}
	}
	steps := []struct {
		name      string
		cmd       Command
		wantEpoch uint64 // 0: the index of this command
		keep      bool   // the epoch of the step before
	}{
		{"no incarnation yet", set(0), 0, false},
		{"first incarnation", set(7), 0, false},
		{"the same again", set(7), 0, true},
		{"without incarnation", set(0), 0, true},
		{"a restart", set(8), 0, false},
		{"back to an older incarnation is a new start too", set(7), 0, false},
		{"deleted", DeleteNode{ID: "n1"}, 0, false},
		{"added again with the old incarnation", set(7), 0, false},
	}
	var epoch uint64
	for i, st := range steps {
		res := h.apply(st.cmd)
		if res.Err != nil {
			t.Fatalf("%s: %v", st.name, res.Err)
		}
		n, ok := h.f.Catalog().Node("n1")
		switch {
		case st.name == "deleted":
			if ok {
				t.Fatalf("%s: still there", st.name)
			}
			continue
		case i == 0:
			if n.Epoch != 0 {
				t.Fatalf("%s: epoch %d", st.name, n.Epoch)
			}
			continue
		case st.keep:
			if n.Epoch != epoch {
				t.Fatalf("%s: epoch %d, want %d kept", st.name, n.Epoch, epoch)
			}
		default:
			if n.Epoch != res.Index || n.Epoch <= epoch {
				t.Fatalf("%s: epoch %d, want index %d above %d", st.name, n.Epoch, res.Index, epoch)
			}
		}
		epoch = n.Epoch
	}
}

// Test_ClusterID: the first id written stays; writing it again changes
// nothing; another one is refused with ErrClusterIDSet; an invalid one
// never applies; snapshots keep it.
func Test_ClusterID(t *testing.T) {
	for _, bad := range []string{"", "00000000000000000000000000000000", "5f0c", "zz0c2d3e4a1b6c7d8e9fa0b1c2d3e4f5",
		"5f0c2d3e4a1b6c7d8e9fa0b1c2d3e4f5aa"} {
		if _, err := ParseClusterID(bad); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("ParseClusterID(%q) = %v", bad, err)
		}
	}
	a, _ := ParseClusterID("5f0c2d3e4a1b6c7d8e9fa0b1c2d3e4f5")
	b, _ := ParseClusterID("00000000000000000000000000000001")
	h := newHarness(t)
	if !h.f.Catalog().ClusterID().IsZero() || h.f.Catalog().ClusterID().String() != "" {
		t.Fatal("a new catalog has a cluster id")
	}
	for _, st := range []struct {
		id      ClusterID
		wantErr error
	}{{a, nil}, {a, nil}, {b, ErrClusterIDSet}, {ClusterID{}, ErrInvalidCommand}} {
		if res := h.apply(SetClusterID{ID: st.id}); !errors.Is(res.Err, st.wantErr) {
			t.Fatalf("set %s: %v, want %v", st.id, res.Err, st.wantErr)
		}
		if got := h.f.Catalog().ClusterID(); got != a {
			t.Fatalf("cluster id %s after setting %s", got, st.id)
		}
	}
	snap, _ := h.f.Snapshot()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil || restored.Catalog().ClusterID() != a {
		t.Fatalf("restored %s, %v", restored.Catalog().ClusterID(), err)
	}
	for _, bad := range []string{
		`{"version":4,"index":1,"cluster_id":"00000000000000000000000000000000","workers":[]}`,
		`{"version":4,"index":1,"cluster_id":"xyz","workers":[]}`,
		`{"version":5,"index":1,"workers":[]}`,
	} {
		if err := New().Restore(io.NopCloser(strings.NewReader(bad))); err == nil {
			t.Fatalf("restore of %s succeeded", bad)
		}
	}
}
