package fsm

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// The golden files in testdata/log were written by the release before the
// log format got its own types (when entries were the API's JSON). These
// tests keep old entries decoding to the same catalog forever, and pin the
// encoder: it must still write them byte for byte, or a change of the
// format needs a new command type and a new golden file.

func golden(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "log", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func Test_GoldenEntries(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	w7 := Worker{WorkerID: 7, ModelName: "llama3:8b", TenantID: "team-a", Endpoint: "http://w7:8000", BlockSize: 16,
		DataParallelStartRank: 2, DataParallelSize: 2,
		KVEventsEndpoints: map[uint32]string{2: "tcp://w7:5557", 3: "tcp://w7:5558"},
		ReplayEndpoint:    "tcp://w7:5560", TotalKVBlocks: 4096, MaxNumBatchedTokens: 8192}
	// Applied in this order, each golden entry must leave worker 7 (or
	// the nodes) exactly so.
	steps := []goldenStep{
		{"upsert_worker.v1.bin", UpsertWorker{Worker: w7}, func(t *testing.T, c *Catalog) {
			w := mustWorker(t, c, 7)
			want := w7
			want.CreateIndex, want.ModifyIndex, want.BlockSizeIndex = 1, 1, 1
			want.schedulable = true
			if !reflect.DeepEqual(*w, want) {
				t.Fatalf("worker = %+v\nwant     %+v", *w, want)
			}
		}},
		{"patch_worker.v1.bin", PatchWorker{WorkerID: 7, Patch: WorkerPatch{Endpoint: ptr("http://w7:9000"),
			BlockSize: u32(32), DataParallelSize: u32(1), KVEventsEndpoint: ptr("tcp://w7:6000"), TotalKVBlocks: u64(0)}},
			func(t *testing.T, c *Catalog) {
				w := mustWorker(t, c, 7)
				if w.Endpoint != "http://w7:9000" || w.BlockSize != 32 || w.DataParallelSize != 1 || w.TotalKVBlocks != 0 ||
					!reflect.DeepEqual(w.KVEventsEndpoints, map[uint32]string{2: "tcp://w7:6000"}) ||
					w.ModifyIndex != 2 || w.BlockSizeIndex != 2 || w.CreateIndex != 1 || !w.Schedulable() {
					t.Fatalf("patched worker = %+v", *w)
				}
			}},
		{"patch_worker_map.v1.bin", PatchWorker{WorkerID: 7, Patch: WorkerPatch{ModelName: ptr("m2"), TenantID: ptr(""),
			DataParallelStartRank: u32(0), KVEventsEndpoints: &map[uint32]string{0: "tcp://w7:7000", 1: "tcp://w7:7001"},
			ReplayEndpoint: ptr(""), MaxNumBatchedTokens: u64(1024)}},
			func(t *testing.T, c *Catalog) {
				w := mustWorker(t, c, 7)
				reasons := []string{"kv_events endpoint for dp_rank 1 is outside the data parallel range [0, 1)"}
				if w.ModelName != "m2" || w.TenantID != DefaultScope || w.DataParallelStartRank != 0 || w.ReplayEndpoint != "" ||
					w.MaxNumBatchedTokens != 1024 || len(w.KVEventsEndpoints) != 2 || w.Schedulable() ||
					!reflect.DeepEqual(w.NotSchedulableReasons, reasons) {
					t.Fatalf("patched worker = %+v", *w)
				}
			}},
		{"set_node.v1.bin", SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "10.0.0.1:8092", ReplicaSync: "tcp://10.0.0.1:9092"}},
			func(t *testing.T, c *Catalog) {
				if n, ok := c.Node("n1"); !ok || n != (NodeMeta{ID: "n1", HTTPAddr: "10.0.0.1:8092", ReplicaSync: "tcp://10.0.0.1:9092", ModifyIndex: 4}) {
					t.Fatalf("node = %+v", n)
				}
			}},
		{"delete_node.v1.bin", DeleteNode{ID: "n1"}, func(t *testing.T, c *Catalog) {
			if len(c.Nodes()) != 0 {
				t.Fatalf("nodes = %+v", c.Nodes())
			}
		}},
		{"delete_worker.v1.bin", DeleteWorker{WorkerID: 7}, func(t *testing.T, c *Catalog) {
			if c.Len() != 0 || len(c.Partitions()) != 0 {
				t.Fatalf("catalog after delete: %d workers", c.Len())
			}
		}},
	}
	runGoldenSteps(t, steps)
}

func mustWorker(t *testing.T, c *Catalog, id uint64) *Worker {
	t.Helper()
	w, ok := c.Worker(id)
	if !ok {
		t.Fatalf("worker %d missing", id)
	}
	return w
}

func Test_GoldenSnapshots(t *testing.T) {
	tests := []struct {
		file         string
		nodes        int
		blockSizeIdx uint64 // of worker 7
		reencodes    bool   // Persist of the restored catalog gives the same bytes
	}{
		// The cluster id is an optional field of version 3, so that the
		// release before (it reads up to 3, ignoring unknown fields) can
		// install this release's snapshots during a rolling upgrade.
		{"snapshot.v3-cluster-id.json", 2, 1, true},
		// So are the policies and the seed mark (Test_GoldenSnapshotPolicies).
		{"snapshot.v3-policies.json", 2, 1, true},
		// Written by no release, still read.
		{"snapshot.v4.json", 2, 1, false},
		{"snapshot.v3.json", 2, 1, true},
		{"snapshot.v2.json", 2, 1, true},
		{"snapshot.v1.json", 0, 1, false},
		{"snapshot.v1-before-block-size-index.json", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data := golden(t, tt.file)
			f := New()
			if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
				t.Fatal(err)
			}
			c := f.Catalog()
			w3, w7 := mustWorker(t, c, 3), mustWorker(t, c, 7)
			if c.Index() != 4 || c.Len() != 2 || len(c.Nodes()) != tt.nodes || !w3.Schedulable() || !w7.Schedulable() {
				t.Fatalf("restored index %d, %d workers, %d nodes", c.Index(), c.Len(), len(c.Nodes()))
			}
			if w7.ModelName != "llama3:8b" || w7.TenantID != "team-a" || w7.DataParallelStartRank != 2 ||
				w7.ReplayEndpoint != "tcp://w7:5560" || w7.TotalKVBlocks != 4096 || w7.CreateIndex != 1 ||
				w7.BlockSizeIndex != tt.blockSizeIdx || w3.ModelName != DefaultScope {
				t.Fatalf("worker 7 = %+v", *w7)
			}
			if p, _ := c.Partition(PartitionKey{"llama3:8b", "team-a"}); p == nil ||
				!reflect.DeepEqual(p.Ranks, []RankKey{{Worker: 7, Rank: 2}, {Worker: 7, Rank: 3}}) {
				t.Fatalf("partition = %+v", p)
			}
			wantID := ""
			var wantEpoch uint64
			if tt.file == "snapshot.v4.json" || tt.file == "snapshot.v3-cluster-id.json" || tt.file == "snapshot.v3-policies.json" {
				wantID, wantEpoch = goldenClusterID, 3
			}
			if n1, _ := c.Node("n1"); c.ClusterID().String() != wantID || n1.Epoch != wantEpoch {
				t.Fatalf("cluster id %q, n1 %+v", c.ClusterID(), n1)
			}
			if !tt.reencodes {
				return
			}
			snap, _ := f.Snapshot()
			var sink memSink
			if err := snap.Persist(&sink); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sink.Bytes(), data) {
				t.Fatalf("snapshot encoder drifted:\n got %s\nwant %s", sink.Bytes(), data)
			}
		})
	}
}

// Test_GoldenThresholdEntries pins the threshold commands' format like
// Test_GoldenEntries does the worker commands', and their semantics: init
// applies once per model, set merges, clear keeps an empty record that a
// later init does not overwrite.
func Test_GoldenThresholdEntries(t *testing.T) {
	f64 := func(v float64) *float64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	const model = "llama3:8b"
	steps := []struct {
		file string
		cmd  Command
		want Thresholds
	}{
		{"init_thresholds.v1.bin", InitThresholds{Model: model, ActiveDecodeBlocks: f64(0.85), ActivePrefillTokens: u64(10000)},
			Thresholds{Model: model, ActiveDecodeBlocks: f64(0.85), ActivePrefillTokens: u64(10000), ModifyIndex: 1}},
		{"set_thresholds.v1.bin", SetThresholds{Model: model, ActivePrefillTokens: u64(5000)},
			Thresholds{Model: model, ActiveDecodeBlocks: f64(0.85), ActivePrefillTokens: u64(5000), ModifyIndex: 2}},
		{"clear_thresholds.v1.bin", ClearThresholds{Model: model}, Thresholds{Model: model, ModifyIndex: 3}},
		// Init over a cleared record changes nothing.
		{"init_thresholds.v1.bin", InitThresholds{Model: model, ActiveDecodeBlocks: f64(0.85), ActivePrefillTokens: u64(10000)},
			Thresholds{Model: model, ModifyIndex: 3}},
	}
	f := New()
	for i, st := range steps {
		t.Run(st.file, func(t *testing.T) {
			data := golden(t, st.file)
			res := f.Apply(&raft.Log{Index: uint64(i + 1), Data: data}).(*Result)
			if res.Err != nil || res.Skipped || res.Thresholds == nil || !reflect.DeepEqual(*res.Thresholds, st.want) {
				t.Fatalf("apply: %+v", res)
			}
			if got, ok := f.Catalog().Thresholds(model); !ok || !reflect.DeepEqual(got, st.want) {
				t.Fatalf("thresholds = %+v, want %+v", got, st.want)
			}
			enc, err := EncodeCommand(st.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data) {
				t.Fatalf("encoder drifted from the v1 format:\n got %s\nwant %s", enc, data)
			}
		})
	}
}

// Test_GoldenEntriesIgnoreNewFields: entries as a newer binary writes them,
// with optional fields this binary does not know (the omitempty rule of
// logformat.go; inside records and at the top level), apply exactly like
// the same entries without those fields. The decoder must ignore unknown
// fields, never reject them: rejecting would panic every older node.
func Test_GoldenEntriesIgnoreNewFields(t *testing.T) {
	steps := []struct{ known, newer string }{
		{"upsert_worker.v1.bin", "upsert_worker.v1-newer-fields.bin"},
		{"patch_worker.v1.bin", "patch_worker.v1-newer-fields.bin"},
		{"set_node.v1.bin", "set_node.v1-newer-fields.bin"},
	}
	fromKnown, fromNewer := New(), New()
	for i, st := range steps {
		t.Run(st.newer, func(t *testing.T) {
			entry := func(name string) *raft.Log { return &raft.Log{Index: uint64(i + 1), Data: golden(t, name)} }
			want := fromKnown.Apply(entry(st.known)).(*Result)
			got := fromNewer.Apply(entry(st.newer)).(*Result)
			if got.Err != nil || got.Skipped || !reflect.DeepEqual(got, want) {
				t.Fatalf("entry with new fields: %+v\nwithout:               %+v", got, want)
			}
			if a, b := persisted(t, fromNewer), persisted(t, fromKnown); !bytes.Equal(a, b) {
				t.Fatalf("catalogs differ:\nwith new fields %s\nwithout         %s", a, b)
			}
		})
	}
}

func persisted(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// goldenStep is one golden log entry: its file, the command it encodes,
// and what applying it (after the steps before it) must leave.
type goldenStep struct {
	file  string
	cmd   Command
	check func(t *testing.T, c *Catalog)
}

// runGoldenSteps applies each step's golden entry, in order, to one FSM
// and checks what it leaves, and that the current encoder still writes the
// entry byte for byte.
func runGoldenSteps(t *testing.T, steps []goldenStep) {
	t.Helper()
	f := New()
	for i, st := range steps {
		t.Run(st.file, func(t *testing.T) {
			data := golden(t, st.file)
			res := f.Apply(&raft.Log{Index: uint64(i + 1), Data: data}).(*Result)
			if res.Err != nil || res.Skipped {
				t.Fatalf("apply: %+v", res)
			}
			st.check(t, f.Catalog())
			enc, err := EncodeCommand(st.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data) {
				t.Fatalf("encoder drifted from the format:\n got %q\nwant %q", enc, data)
			}
		})
	}
}

// goldenClusterID is the id in set_cluster_id.v1.bin and snapshot.v4.json.
const goldenClusterID = "5f0c2d3e4a1b6c7d8e9fa0b1c2d3e4f5"

// Test_GoldenClusterIDAndIncarnation pins the log format of the cluster id
// (type 10, flagged IgnoreUnknown) and of a node record with an
// incarnation, and what they do: the first id stays, and an incarnation
// new to the record makes its epoch the entry's index.
func Test_GoldenClusterIDAndIncarnation(t *testing.T) {
	id, err := ParseClusterID(goldenClusterID)
	if err != nil {
		t.Fatal(err)
	}
	n1 := NodeMeta{ID: "n1", HTTPAddr: "10.0.0.1:8092", ReplicaSync: "tcp://10.0.0.1:9092", Incarnation: 0x1d2c3b4a59687766}
	steps := []goldenStep{
		{"set_cluster_id.v1.bin", SetClusterID{ID: id}, func(t *testing.T, c *Catalog) {
			if c.ClusterID() != id {
				t.Fatalf("cluster id %s", c.ClusterID())
			}
		}},
		{"set_node.v1-incarnation.bin", SetNode{Node: n1}, func(t *testing.T, c *Catalog) {
			want := n1
			want.ModifyIndex, want.Epoch = 2, 2
			if got, _ := c.Node("n1"); got != want {
				t.Fatalf("node = %+v, want %+v", got, want)
			}
		}},
		// Written again (a retry): the epoch stays.
		{"set_node.v1-incarnation.bin", SetNode{Node: n1}, func(t *testing.T, c *Catalog) {
			if got, _ := c.Node("n1"); got.Epoch != 2 || got.ModifyIndex != 3 {
				t.Fatalf("node = %+v", got)
			}
		}},
		// Without an incarnation (an operator's join): the epoch stays.
		{"set_node.v1.bin", SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "10.0.0.1:8092", ReplicaSync: "tcp://10.0.0.1:9092"}},
			func(t *testing.T, c *Catalog) {
				if got, _ := c.Node("n1"); got.Epoch != 2 || got.Incarnation != n1.Incarnation {
					t.Fatalf("node = %+v", got)
				}
			}},
	}
	runGoldenSteps(t, steps)
	if data := golden(t, "set_cluster_id.v1.bin"); CommandType(data[0]) != CmdSetClusterID|IgnoreUnknown {
		t.Fatalf("set_cluster_id is written as type %#x, want the IgnoreUnknown flag", data[0])
	}
}
