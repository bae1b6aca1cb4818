package cluster

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/poll"
)

// Test_MembersWithoutRules: the switch waits for every member of the
// configuration, voter or not, to advertise the rules in its own record.
func Test_MembersWithoutRules(t *testing.T) {
	catalog := func(nodes ...fsm.NodeMeta) *fsm.Catalog {
		l := &fsm.Log{FSM: fsm.New()}
		for _, m := range nodes {
			if res, err := l.Apply(fsm.SetNode{Node: m}); err != nil || res.Err != nil {
				t.Fatalf("apply: %v %v", err, res.Err)
			}
		}
		return l.FSM.Catalog()
	}
	node := func(id string, inc uint64, rules uint32) fsm.NodeMeta {
		return fsm.NodeMeta{ID: id, HTTPAddr: "h:1", Incarnation: inc, CatalogRules: rules}
	}
	servers := func(ids ...string) []raft.Server {
		var out []raft.Server
		for i, id := range ids {
			s := raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter}
			if i == 2 {
				s.Suffrage = raft.Nonvoter
			}
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		name    string
		c       *fsm.Catalog
		servers []raft.Server
		want    []string
	}{
		{"every member knows them", catalog(node("n1", 1, 1), node("n2", 2, 1), node("n3", 3, 1)),
			servers("n1", "n2", "n3"), nil},
		{"a member of the release before", catalog(node("n1", 1, 1), node("n2", 2, 0), node("n3", 3, 1)),
			servers("n1", "n2", "n3"), []string{"n2"}},
		{"a non-voter of the release before", catalog(node("n1", 1, 1), node("n2", 2, 1), node("n3", 3, 0)),
			servers("n1", "n2", "n3"), []string{"n3"}},
		{"a member without a record yet", catalog(node("n1", 1, 1), node("n2", 2, 1)),
			servers("n1", "n2", "n3"), []string{"n3"}},
		{"a member restarted on the release before", catalog(node("n1", 1, 1), node("n2", 2, 1), node("n2", 5, 0)),
			servers("n1", "n2"), []string{"n2"}},
		{"records of removed nodes do not count", catalog(node("n1", 1, 1), node("n9", 9, 0)),
			servers("n1"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := membersWithoutRules(tt.c, tt.servers, fsm.CatalogRulesCurrent); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("membersWithoutRules = %v, want %v", got, tt.want)
			}
		})
	}
}

// rulesRecorder records the index at which the catalog rules went on.
type rulesRecorder struct {
	mu sync.Mutex
	at uint64
}

func (r *rulesRecorder) observe(ch *fsm.Change) {
	if ch.Prev.CatalogRules() == 0 && ch.Cur.CatalogRules() != 0 {
		r.mu.Lock()
		r.at = ch.Cur.Index()
		r.mu.Unlock()
	}
}

func (r *rulesRecorder) index() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

// Test_CatalogRulesOnNewCluster: a cluster this release bootstraps has
// the rules on from its first entries, written with the cluster id before
// any node record, and its record advertises them.
func Test_CatalogRulesOnNewCluster(t *testing.T) {
	cfg := TestConfig("n1", t.TempDir())
	cfg.HTTPAdvertise = "127.0.0.1:1"
	var rec rulesRecorder
	n := mustOpen(t, cfg, rec.observe)
	poll.Eventually(t, testWait, "the node has an epoch", func() error { return zeroErr(n.Epoch()) })
	if rules := n.Catalog().CatalogRules(); rules != fsm.CatalogRulesCurrent {
		t.Fatalf("catalog rules %d on a new cluster", rules)
	}
	if at := rec.index(); at == 0 || at >= n.Epoch() {
		t.Fatalf("rules switched on at index %d, the node's first record at %d", at, n.Epoch())
	}
	if m, _ := n.Catalog().Node("n1"); m.CatalogRules != fsm.CatalogRulesCurrent {
		t.Fatalf("record %+v does not advertise the rules", m)
	}
}

// Test_CatalogRulesAfterUpgrade: a node that runs as the release before
// never switches the rules on; restarted on this release, it does, once
// its record advertises them.
func Test_CatalogRulesAfterUpgrade(t *testing.T) {
	cfg := TestConfig("n1", t.TempDir())
	cfg.HTTPAdvertise = "127.0.0.1:1"
	cfg.NoCatalogRules = true
	n := mustOpen(t, cfg, nil)
	poll.Eventually(t, testWait, "the node has an epoch", func() error { return zeroErr(n.Epoch()) })
	if _, err := n.Apply(ctx(t), fsm.UpsertWorker{Worker: worker(1)}); err != nil {
		t.Fatal(err)
	}
	waitMetadataRounds(t, n, 2) // the upsert's round and one after: either would have switched
	if rules := n.Catalog().CatalogRules(); rules != 0 {
		t.Fatalf("catalog rules %d written by a node of the release before", rules)
	}
	if m, _ := n.Catalog().Node("n1"); m.CatalogRules != 0 {
		t.Fatalf("record %+v advertises rules", m)
	}
	n.Close()
	cfg.NoCatalogRules = false
	n2 := mustOpen(t, cfg, nil)
	poll.Eventually(t, testWait, "the catalog rules are on", func() error { return zeroErr(uint64(n2.Catalog().CatalogRules())) })
	if m, _ := n2.Catalog().Node("n1"); m.CatalogRules != fsm.CatalogRulesCurrent || m.Incarnation != n2.Incarnation() {
		t.Fatalf("record %+v", m)
	}
}

// waitMetadataRounds waits until n has made k more publishMetadata
// passes, each of which would have written the rules switch if it were
// due: what a test that expects no switch waits for.
func waitMetadataRounds(t *testing.T, n *Node, k uint64) {
	t.Helper()
	target := n.MetadataRounds() + k
	poll.Eventually(t, testWait, fmt.Sprintf("%s: %d metadata rounds", n.ID(), k), func() error {
		if got := n.MetadataRounds(); got < target {
			return fmt.Errorf("at round %d", got)
		}
		return nil
	})
}
