package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

var (
	goldenPolicyKey = PartitionKey{Model: "llama3:8b", Tenant: "team-a"}
	clusterDefault  = PartitionKey{Model: AnyModel}
)

// Test_GoldenPolicyEntries pins the policy commands' log format (types
// 11-13, flagged IgnoreUnknown) like Test_GoldenEntries does the worker
// commands', and what they do: set stores or replaces, an init after a
// cluster default was written changes nothing, delete removes.
func Test_GoldenPolicyEntries(t *testing.T) {
	twoTier := Policy{Key: goldenPolicyKey, Name: "two-tier",
		Params: map[string]float64{"cache_threshold": 0.6, "assume_kv_reuse": 0}}
	steps := []goldenStep{
		{"set_policy.v1.bin", SetPolicy{Key: twoTier.Key, Name: twoTier.Name, Params: twoTier.Params}, func(t *testing.T, c *Catalog) {
			want := twoTier
			want.ModifyIndex = 1
			if got, ok := c.Policy(goldenPolicyKey); !ok || !reflect.DeepEqual(got, want) || c.DefaultPolicySeeded() {
				t.Fatalf("policy = %+v, seeded %v", got, c.DefaultPolicySeeded())
			}
		}},
		{"set_policy_default.v1.bin", SetPolicy{Key: clusterDefault, Name: "round-robin"}, func(t *testing.T, c *Catalog) {
			want := Policy{Key: clusterDefault, Name: "round-robin", ModifyIndex: 2}
			if got, ok := c.Policy(clusterDefault); !ok || !reflect.DeepEqual(got, want) || !c.DefaultPolicySeeded() {
				t.Fatalf("cluster default = %+v, seeded %v", got, c.DefaultPolicySeeded())
			}
		}},
		// An operator wrote the default first: the seed changes nothing.
		{"init_policy.v1.bin", InitPolicy{Name: "dynamo-default", Params: map[string]float64{"overlap_score_credit": 2}},
			func(t *testing.T, c *Catalog) {
				if got, _ := c.Policy(clusterDefault); got.Name != "round-robin" || got.ModifyIndex != 2 {
					t.Fatalf("cluster default = %+v", got)
				}
			}},
		{"delete_policy.v1.bin", DeletePolicy{Key: goldenPolicyKey}, func(t *testing.T, c *Catalog) {
			if _, ok := c.Policy(goldenPolicyKey); ok || c.PolicyCount() != 1 {
				t.Fatalf("policies after delete = %+v", c.Policies())
			}
		}},
	}
	runGoldenSteps(t, steps)
	for _, st := range steps {
		if data := golden(t, st.file); CommandType(data[0])&IgnoreUnknown == 0 {
			t.Errorf("%s is written as type %#x, want the IgnoreUnknown flag", st.file, data[0])
		}
	}
}

// Test_InitPolicySeedsOnce: the seed applies to a catalog that never had
// a cluster default, once; an operator's delete of the default sticks,
// through a snapshot too.
func Test_InitPolicySeedsOnce(t *testing.T) {
	f := New()
	res := f.Apply(&raft.Log{Index: 1, Data: golden(t, "init_policy.v1.bin")}).(*Result)
	want := Policy{Key: clusterDefault, Name: "dynamo-default", Params: map[string]float64{"overlap_score_credit": 2}, ModifyIndex: 1}
	if res.Err != nil || res.Policy == nil || !reflect.DeepEqual(*res.Policy, want) || !f.Catalog().DefaultPolicySeeded() {
		t.Fatalf("seed: %+v", res)
	}
	l := &Log{FSM: f, index: 1}
	if res, _ := l.Apply(DeletePolicy{Key: clusterDefault}); res.Err != nil || res.Policy == nil || res.Policy.Name != "dynamo-default" {
		t.Fatalf("delete of the default: %+v", res)
	}
	restored := New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(persisted(t, f)))); err != nil {
		t.Fatal(err)
	}
	for name, fsm := range map[string]*FSM{"live": f, "restored": restored} {
		res := fsm.Apply(&raft.Log{Index: 3, Data: golden(t, "init_policy.v1.bin")}).(*Result)
		if res.Err != nil || res.Policy != nil || fsm.Catalog().PolicyCount() != 0 || !fsm.Catalog().DefaultPolicySeeded() {
			t.Fatalf("%s: a second seed after the delete: %+v, policies %+v", name, res, fsm.Catalog().Policies())
		}
	}
}

func Test_PolicyCommandsRefused(t *testing.T) {
	long := strings.Repeat("m", MaxStringLen+1)
	tooMany := map[string]float64{}
	for i := range MaxPolicyParams + 1 {
		tooMany[fmt.Sprintf("p%d", i)] = 1
	}
	tests := []struct {
		name string
		cmd  Command
		want error
		msg  string
	}{
		{"no model", SetPolicy{Key: PartitionKey{Tenant: "t"}, Name: "random"}, ErrInvalidCommand, "model_name: required"},
		{"long model", SetPolicy{Key: PartitionKey{Model: long, Tenant: "t"}, Name: "random"}, ErrInvalidCommand, "model_name: longer"},
		{"no tenant", SetPolicy{Key: PartitionKey{Model: "m"}, Name: "random"}, ErrInvalidCommand, "tenant_id: required"},
		{"long tenant", SetPolicy{Key: PartitionKey{Model: "m", Tenant: long}, Name: "random"}, ErrInvalidCommand, "tenant_id: longer"},
		{"default with a tenant", SetPolicy{Key: PartitionKey{Model: AnyModel, Tenant: "t"}, Name: "random"}, ErrInvalidCommand, "tenant_id: must be empty"},
		{"no policy", SetPolicy{Key: PartitionKey{"m", "t"}}, ErrInvalidCommand, "policy: required"},
		{"long policy", SetPolicy{Key: PartitionKey{"m", "t"}, Name: long}, ErrInvalidCommand, "policy: longer"},
		{"too many parameters", SetPolicy{Key: PartitionKey{"m", "t"}, Name: "random", Params: tooMany}, ErrInvalidCommand, "parameters: 65 parameters"},
		{"empty parameter name", SetPolicy{Key: PartitionKey{"m", "t"}, Name: "random", Params: map[string]float64{"": 1}}, ErrInvalidCommand, "parameters: a parameter name"},
		{"init without policy", InitPolicy{}, ErrInvalidCommand, "policy: required"},
		{"delete absent", DeletePolicy{Key: PartitionKey{"m", "t"}}, ErrPolicyNotFound, `model_name "m" tenant_id "t"`},
		{"delete absent default", DeletePolicy{Key: clusterDefault}, ErrPolicyNotFound, "policy not found"},
		{"delete bad key", DeletePolicy{Key: PartitionKey{Model: AnyModel, Tenant: "t"}}, ErrInvalidCommand, "tenant_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			before := h.f.Catalog()
			res := h.apply(tt.cmd)
			if !errors.Is(res.Err, tt.want) || !strings.Contains(res.Err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v containing %q", res.Err, tt.want, tt.msg)
			}
			if c := h.f.Catalog(); c.PolicyCount() != 0 || c.DefaultPolicySeeded() || c.Index() != before.Index()+1 {
				t.Fatalf("a refused command changed the catalog: %+v", c.Policies())
			}
		})
	}
}

// Test_PolicyBound: past MaxPolicies entries a new key is refused, while
// replacing an entry and deleting one still work.
func Test_PolicyBound(t *testing.T) {
	key := func(i int) PartitionKey { return PartitionKey{Model: "m", Tenant: fmt.Sprintf("t%04d", i)} }
	// A catalog at the bound, restored in one step rather than built by
	// MaxPolicies commands.
	snap := snapshotV4{Version: 2, Index: 1, Workers: []workerV1{}}
	for i := range MaxPolicies {
		snap.Policies = append(snap.Policies, encodePolicy(Policy{Key: key(i), Name: "random", ModifyIndex: 1}))
	}
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	h.log.index = 1
	if res := h.apply(SetPolicy{Key: key(MaxPolicies), Name: "random"}); !errors.Is(res.Err, ErrTooManyPolicies) {
		t.Fatalf("entry past the bound: %+v", res)
	}
	if res := h.apply(SetPolicy{Key: key(7), Name: "round-robin"}); res.Err != nil || res.Policy.Name != "round-robin" {
		t.Fatalf("replacing an entry at the bound: %+v", res)
	}
	h.apply(DeletePolicy{Key: key(0)})
	if res := h.apply(SetPolicy{Key: key(MaxPolicies), Name: "random"}); res.Err != nil {
		t.Fatalf("a new entry after a delete: %+v", res)
	}
	if n := h.f.Catalog().PolicyCount(); n != MaxPolicies {
		t.Fatalf("%d entries", n)
	}
}

// Test_PolicyChangesAndSnapshot: observers learn which keys changed, the
// listing is sorted, and a snapshot round trip keeps every entry (and
// reports no change against the catalog it came from).
func Test_PolicyChangesAndSnapshot(t *testing.T) {
	var changes [][]PartitionKey
	l := NewLog(func(ch *Change) { changes = append(changes, ch.Policies) })
	steps := []struct {
		cmd  Command
		want []PartitionKey
	}{
		{SetPolicy{Key: PartitionKey{"m", "t"}, Name: "random"}, []PartitionKey{{"m", "t"}}},
		{SetPolicy{Key: clusterDefault, Name: "round-robin"}, []PartitionKey{clusterDefault}},
		{SetPolicy{Key: PartitionKey{"a/b", "t"}, Name: "two-tier", Params: map[string]float64{"cache_threshold": 0.7}},
			[]PartitionKey{{"a/b", "t"}}},
		{SetPolicy{Key: PartitionKey{"m", "t"}, Name: "random"}, []PartitionKey{{"m", "t"}}}, // rewritten: a new index
		{UpsertWorker{Worker: completeWorker(1, 16)}, nil},
		{DeletePolicy{Key: PartitionKey{"m", "t"}}, []PartitionKey{{"m", "t"}}},
	}
	for i, st := range steps {
		if res, err := l.Apply(st.cmd); err != nil || res.Err != nil {
			t.Fatalf("step %d: %v %+v", i, err, res)
		}
		if !slices.Equal(changes[i], st.want) {
			t.Fatalf("step %d: changed %v, want %v", i, changes[i], st.want)
		}
	}
	cur := l.FSM.Catalog()
	var keys []PartitionKey
	for _, p := range cur.Policies() {
		keys = append(keys, p.Key)
	}
	if want := []PartitionKey{clusterDefault, {"a/b", "t"}}; !slices.Equal(keys, want) {
		t.Fatalf("policies %v, want %v", keys, want)
	}
	restored := New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(persisted(t, l.FSM)))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.Catalog().Policies(), cur.Policies()) || !restored.Catalog().DefaultPolicySeeded() {
		t.Fatalf("restored %+v\nwant     %+v", restored.Catalog().Policies(), cur.Policies())
	}
	if ch := NewChange(cur, restored.Catalog()); len(ch.Policies) != 0 {
		t.Fatalf("a restore of the same catalog changed %v", ch.Policies)
	}
	if ch := NewChange(EmptyCatalog(), restored.Catalog()); len(ch.Policies) != 2 {
		t.Fatalf("a restore over an empty catalog changed %v", ch.Policies)
	}
}

// Test_GoldenSnapshotPolicies: a snapshot with policies restores them, and
// snapshots written before policies restore without any (their reading
// is Test_GoldenSnapshots').
func Test_GoldenSnapshotPolicies(t *testing.T) {
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(golden(t, "snapshot.v3-policies.json")))); err != nil {
		t.Fatal(err)
	}
	c := f.Catalog()
	want := []Policy{
		{Key: clusterDefault, Name: "round-robin", ModifyIndex: 3},
		{Key: goldenPolicyKey, Name: "two-tier", Params: map[string]float64{"assume_kv_reuse": 0, "cache_threshold": 0.6}, ModifyIndex: 4},
	}
	if !reflect.DeepEqual(c.Policies(), want) || !c.DefaultPolicySeeded() {
		t.Fatalf("policies %+v, seeded %v", c.Policies(), c.DefaultPolicySeeded())
	}
	for _, old := range []string{"snapshot.v3-cluster-id.json", "snapshot.v3.json", "snapshot.v2.json", "snapshot.v1.json"} {
		f := New()
		if err := f.Restore(io.NopCloser(bytes.NewReader(golden(t, old)))); err != nil {
			t.Fatalf("%s: %v", old, err)
		}
		if f.Catalog().PolicyCount() != 0 || f.Catalog().DefaultPolicySeeded() {
			t.Fatalf("%s: policies %+v", old, f.Catalog().Policies())
		}
	}
	bad := strings.Replace(string(golden(t, "snapshot.v3-policies.json")), `"model_name":"*"`, `"model_name":"*","tenant_id":"x"`, 1)
	if err := New().Restore(io.NopCloser(strings.NewReader(bad))); err == nil || !strings.Contains(err.Error(), "tenant_id") {
		t.Fatalf("restore of a bad policy record: %v", err)
	}
}
