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

// oldLogHarness is a node that applies a log from its first entry with the
// catalog rules off, as every log of the release before starts.
func oldLogHarness(t *testing.T) *harness {
	f := New()
	return &harness{t: t, log: &Log{FSM: f}, f: f}
}

// enable is the switch as the leader writes it.
var enable = EnableCatalogRules{Rules: CatalogRulesCurrent}

// upgradeLog is the reviewer's sequence as the release before wrote it
// (indexes 1-6: 16, 16, 32, 16, then the first two deleted), then the
// switch (7), then a sequence that tells the rules apart: a second 32
// worker (8), and the last original 32 one deleted (9). With the sticky
// size 32 stays (worker 8 holds it); by seniority worker 4 (16) takes over.
var upgradeLog = []Command{
	UpsertWorker{Worker: completeWorker(1, 16)}, UpsertWorker{Worker: completeWorker(2, 16)},
	UpsertWorker{Worker: completeWorker(3, 32)}, UpsertWorker{Worker: completeWorker(4, 16)},
	DeleteWorker{WorkerID: 1}, DeleteWorker{WorkerID: 2},
	enable,
	UpsertWorker{Worker: completeWorker(8, 32)}, DeleteWorker{WorkerID: 3},
}

// Test_PreUpgradeSnapshotReplaysLikeTheLog: a node of this release that
// restores a snapshot the release before wrote (no partition_block_sizes,
// no retired_partitions, no catalog_rules) and applies the rest of the log
// ends, byte for byte, where a node that applied the whole log did, and so
// at every index on the way: the old rules before the switch, the new ones
// after.
func Test_PreUpgradeSnapshotReplaysLikeTheLog(t *testing.T) {
	// Block size and schedulable workers of m/default after each index.
	want := []struct {
		bs          uint32
		schedulable []uint64
	}{
		1: {16, []uint64{1}}, 2: {16, []uint64{1, 2}}, 3: {16, []uint64{1, 2}}, 4: {16, []uint64{1, 2, 4}},
		5: {16, []uint64{2, 4}},
		6: {32, []uint64{3}}, // by seniority: the rules are off
		7: {32, []uint64{3}}, // the switch changes nothing
		8: {32, []uint64{3, 8}},
		9: {32, []uint64{8}}, // sticky: 8 holds 32, though 4 is senior
	}
	tests := []struct {
		golden string
		index  int
	}{
		{"snapshot.v2-prev-release-index4.json", 4},
		{"snapshot.v2-prev-release-index6.json", 6},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			live := oldLogHarness(t)
			var liveSnaps [][]byte
			for i, c := range upgradeLog {
				live.apply(c)
				checkBlockSize(t, live.f.Catalog(), want[i+1].bs, want[i+1].schedulable)
				liveSnaps = append(liveSnaps, live.persist())
			}
			// The live node, had it run the release before, would have
			// written the golden file at that index.
			if data := golden(t, tt.golden); !bytes.Equal(liveSnaps[tt.index-1], data) {
				t.Fatalf("live snapshot at %d:\n got %s\nwant %s", tt.index, liveSnaps[tt.index-1], data)
			}
			restored := New()
			if err := restored.Restore(io.NopCloser(bytes.NewReader(golden(t, tt.golden)))); err != nil {
				t.Fatal(err)
			}
			h := &harness{t: t, log: &Log{FSM: restored, index: uint64(tt.index)}, f: restored}
			checkBlockSize(t, restored.Catalog(), want[tt.index].bs, want[tt.index].schedulable)
			for i := tt.index; i < len(upgradeLog); i++ {
				h.apply(upgradeLog[i])
				if got := h.persist(); !bytes.Equal(got, liveSnaps[i]) {
					t.Fatalf("index %d, restored then replayed:\n got %s\nwant %s", i+1, got, liveSnaps[i])
				}
			}
		})
	}
}

// Test_CatalogRulesSwitch: before the switch a partition's block size is
// its most senior worker's and no partition is claimed unknown; from the
// switch on the size is sticky and a partition never held is unknown. The
// switch itself changes no partition.
func Test_CatalogRulesSwitch(t *testing.T) {
	scenario := []blockSizeStep{reg(1, 16), reg(2, 16), reg(3, 32), reg(4, 16), del(1), del(2)}
	tests := []struct {
		name        string
		enableAfter int // steps applied before the switch; -1: never
		blockSize   uint32
		schedulable []uint64
	}{
		{"never switched: seniority", -1, 32, []uint64{3}},
		{"switched first: sticky", 0, 16, []uint64{4}},
		{"switched before the deletes", 4, 16, []uint64{4}},
		{"switched between the deletes", 5, 16, []uint64{4}},
		{"switched after the deletes: nothing changes", 6, 32, []uint64{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := oldLogHarness(t)
			for i := 0; i <= len(scenario); i++ {
				if i == tt.enableAfter {
					before := h.f.Catalog()
					if res := h.apply(enable); res.Err != nil {
						t.Fatal(res.Err)
					}
					after := h.f.Catalog()
					if after.CatalogRules() != CatalogRulesCurrent {
						t.Fatalf("rules %d after the switch", after.CatalogRules())
					}
					if !reflect.DeepEqual(before.Partitions(), after.Partitions()) {
						t.Fatalf("the switch changed the partitions: %+v -> %+v", before.Partitions(), after.Partitions())
					}
				}
				if i < len(scenario) {
					h.apply(scenario[i].command())
				}
			}
			checkBlockSize(t, h.f.Catalog(), tt.blockSize, tt.schedulable)
		})
	}
}

// Test_CheckPartitionKnownBeforeTheSwitch: without the retired record no
// partition is unknown (not_ready, as the release before answered); from
// the switch on a partition never held is, and one emptied after the
// switch is not.
func Test_CheckPartitionKnownBeforeTheSwitch(t *testing.T) {
	typo, emptied := PartitionKey{"llama", DefaultScope}, PartitionKey{"gone", DefaultScope}
	tests := []struct {
		name        string
		switched    bool
		typoUnknown bool
	}{
		{"rules off", false, false},
		{"rules on", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := oldLogHarness(t)
			if tt.switched {
				h.apply(enable)
			}
			h.upsert(workerIn(1, "gone", DefaultScope))
			h.apply(DeleteWorker{WorkerID: 1})
			for _, f := range []*FSM{h.f, restoreOf(t, h.persist())} {
				c := f.Catalog()
				if err := c.CheckPartitionKnown(typo); errors.Is(err, ErrUnknownPartition) != tt.typoUnknown {
					t.Fatalf("typo: %v, want unknown %v", err, tt.typoUnknown)
				}
				if err := c.CheckPartitionKnown(emptied); err != nil {
					t.Fatalf("emptied partition: %v", err)
				}
			}
		})
	}
}

func restoreOf(t *testing.T, snap []byte) *FSM {
	t.Helper()
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	return f
}

// Test_SnapshotRecordsTheSwitch: a snapshot of a catalog with the rules on
// is version 5 with catalog_rules, and restores with them on; one with the
// rules off is what the release before wrote, and restores with them off.
func Test_SnapshotRecordsTheSwitch(t *testing.T) {
	for _, switched := range []bool{false, true} {
		h := oldLogHarness(t)
		h.upsert(completeWorker(1, 16))
		h.upsert(completeWorker(2, 32))
		if switched {
			h.apply(enable)
		}
		h.upsert(completeWorker(3, 16))
		h.apply(DeleteWorker{WorkerID: 1})
		snap := h.persist()
		hasRules := bytes.Contains(snap, []byte(`"catalog_rules":1`)) && bytes.HasPrefix(snap, []byte(`{"version":5,`))
		if hasRules != switched || !switched && bytes.Contains(snap, []byte("catalog_rules")) {
			t.Fatalf("switched %v: snapshot %s", switched, snap)
		}
		restored := restoreOf(t, snap)
		if got := restored.Catalog().CatalogRules() != 0; got != switched {
			t.Fatalf("switched %v: restored rules %d", switched, restored.Catalog().CatalogRules())
		}
		again := &harness{t: t, f: restored}
		if got := again.persist(); !bytes.Equal(got, snap) {
			t.Fatalf("round trip:\n got %s\nwant %s", got, snap)
		}
		// And the restored node goes on with the same rules.
		for _, f := range []*FSM{h.f, restored} {
			l := &Log{FSM: f, index: f.Catalog().Index()}
			if _, err := l.Apply(DeleteWorker{WorkerID: 2}); err != nil {
				t.Fatal(err)
			}
		}
		if a, b := (&harness{t: t, f: h.f}).persist(), again.persist(); !bytes.Equal(a, b) {
			t.Fatalf("diverged after restore:\n%s\n%s", a, b)
		}
	}
}

// Test_RestoreRejectsBadCatalogRules: the switch's fields pass the same
// scrutiny as the rest of a snapshot.
func Test_RestoreRejectsBadCatalogRules(t *testing.T) {
	const worker = `{"worker_id":1,"model_name":"m","tenant_id":"default","endpoint":"http://w","block_size":16,"data_parallel_start_rank":0,"data_parallel_size":1,"kv_events_endpoints":{"0":"tcp://h:1"},"create_index":1,"modify_index":1,"block_size_index":1,"lifecycle":"schedulable"}`
	tests := []struct{ name, snap, want string }{
		{"newer rules", `{"version":5,"index":1,"workers":[],"catalog_rules":2}`, "catalog rules 2"},
		{"version 5 without rules", `{"version":5,"index":1,"workers":[]}`, "version 5 with catalog rules 0"},
		{"rules in an older version", `{"version":3,"index":1,"workers":[],"catalog_rules":1}`, "version 3 with catalog rules 1"},
		{"sticky sizes without rules", `{"version":2,"index":1,"workers":[` + worker + `],"partition_block_sizes":[{"model_name":"m","tenant_id":"default","block_size":16}]}`, "without catalog_rules"},
		{"retired without rules", `{"version":2,"index":1,"workers":[],"retired_partitions":[{"model_name":"x","tenant_id":"default","index":1}]}`, "without catalog_rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New().Restore(io.NopCloser(strings.NewReader(tt.snap)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("restore = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Test_EnableCatalogRulesEntry pins the entry (type 14, no IgnoreUnknown
// flag: a binary that skipped it would diverge) and its apply: writing it
// again changes nothing, rules 0 are refused, newer rules stop the node as
// an unknown command does.
func Test_EnableCatalogRulesEntry(t *testing.T) {
	data := golden(t, "enable_catalog_rules.v1.bin")
	if enc, err := EncodeCommand(enable); err != nil || !bytes.Equal(enc, data) {
		t.Fatalf("encode = %q, %v; golden %q", enc, err, data)
	}
	if CommandType(data[0])&IgnoreUnknown != 0 {
		t.Fatal("enable_catalog_rules carries the IgnoreUnknown flag")
	}
	f := New()
	apply := func(i uint64, d []byte) *Result { return f.Apply(&raft.Log{Index: i, Data: d}).(*Result) }
	if res := apply(1, data); res.Err != nil || f.Catalog().CatalogRules() != 1 {
		t.Fatalf("apply: %+v, rules %d", res, f.Catalog().CatalogRules())
	}
	if res := apply(2, data); res.Err != nil || f.Catalog().CatalogRules() != 1 {
		t.Fatalf("again: %+v, rules %d", res, f.Catalog().CatalogRules())
	}
	if res := apply(3, []byte("\x0e{\"rules\":0}")); res.Err == nil {
		t.Fatal("rules 0 accepted")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "catalog rules 2") {
			t.Fatalf("newer rules: recover() = %v", r)
		}
	}()
	apply(4, []byte("\x0e{\"rules\":2}"))
}

// Test_NodeAdvertisesCatalogRules: a node record carries the rules its
// writer's binary knows; a writer that knows no incarnation keeps the
// record's, a new incarnation replaces them, and the field survives a
// snapshot.
func Test_NodeAdvertisesCatalogRules(t *testing.T) {
	h := newHarness(t)
	node := func(inc uint64, rules uint32) Command {
		return SetNode{Node: NodeMeta{ID: "n1", HTTPAddr: "127.0.0.1:1", Incarnation: inc, CatalogRules: rules}}
	}
	steps := []struct {
		name string
		cmd  Command
		want uint32
	}{
		{"this release starts", node(7, 1), 1},
		{"an operator's write keeps them", node(0, 0), 1},
		{"the release before starts", node(8, 0), 0},
		{"this release again", node(9, 1), 1},
	}
	for _, st := range steps {
		h.apply(st.cmd)
		for _, f := range []*FSM{h.f, restoreOf(t, h.persist())} {
			if n, _ := f.Catalog().Node("n1"); n.CatalogRules != st.want {
				t.Fatalf("%s: rules %d, want %d", st.name, n.CatalogRules, st.want)
			}
		}
	}
	// A set_node of the release before has no field: 0.
	f := New()
	f.Apply(&raft.Log{Index: 1, Data: golden(t, "set_node.v1-incarnation.bin")})
	for _, n := range f.Catalog().Nodes() {
		if n.CatalogRules != 0 {
			t.Fatalf("old set_node decoded with rules %d", n.CatalogRules)
		}
	}
}
