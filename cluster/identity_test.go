package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/poll"
)

// Test_PlanClusterID: a leader draws a cluster id only for a catalog that
// never had one; a catalog with an epoch but no id lost it (a snapshot of
// the release before ids) and copies it instead of splitting the cluster.
func Test_PlanClusterID(t *testing.T) {
	id, _ := fsm.ParseClusterID("5f0c2d3e4a1b6c7d8e9fa0b1c2d3e4f5")
	catalog := func(cmds ...fsm.Command) *fsm.Catalog {
		l := fsm.NewLog()
		for _, c := range cmds {
			if res, err := l.Apply(c); err != nil || res.Err != nil {
				t.Fatalf("apply %T: %v %v", c, err, res.Err)
			}
		}
		return l.FSM.Catalog()
	}
	plain := fsm.SetNode{Node: fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1"}}
	withIncarnation := fsm.SetNode{Node: fsm.NodeMeta{ID: "n2", HTTPAddr: "h:2", Incarnation: 9}}
	tests := []struct {
		name string
		c    *fsm.Catalog
		want clusterIDPlan
	}{
		{"fresh cluster", catalog(), idCreate},
		{"a fresh cluster's first leader, already listed", catalog(plain), idCreate},
		{"data dir of the release before ids, or restored from its snapshot: ask", catalog(plain,
			fsm.SetNode{Node: fsm.NodeMeta{ID: "n3", HTTPAddr: "h:3"}}), idAsk},
		{"has an id", catalog(fsm.SetClusterID{ID: id}, withIncarnation), idKeep},
		{"an epoch without an id: lost", catalog(plain, withIncarnation), idCopy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planClusterID(tt.c, "n1"); got != tt.want {
				t.Fatalf("plan = %d, want %d", got, tt.want)
			}
		})
	}
}

// Test_MetaCurrent: a node's own record is current only with its
// incarnation; a writer without one asks only for the addresses.
func Test_MetaCurrent(t *testing.T) {
	cur := fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1", ReplicaSync: "tcp://h:2", Incarnation: 5, Epoch: 12}
	tests := []struct {
		name string
		meta fsm.NodeMeta
		want bool
	}{
		{"same", fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1", ReplicaSync: "tcp://h:2", Incarnation: 5}, true},
		{"no incarnation", fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1", ReplicaSync: "tcp://h:2"}, true},
		{"a new process", fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1", ReplicaSync: "tcp://h:2", Incarnation: 6}, false},
		{"moved", fsm.NodeMeta{ID: "n1", HTTPAddr: "h:3", ReplicaSync: "tcp://h:2", Incarnation: 5}, false},
		{"replica sync off", fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1", Incarnation: 5}, false},
		{"now advertises catalog rules", fsm.NodeMeta{ID: "n1", HTTPAddr: "h:1", ReplicaSync: "tcp://h:2", Incarnation: 5,
			CatalogRules: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metaCurrent(cur, tt.meta); got != tt.want {
				t.Fatalf("metaCurrent = %v", got)
			}
		})
	}
}

// Test_ClusterIDAndEpochs: a new cluster's first leader writes a cluster
// id before any incarnation; every node's process gets an epoch, and a
// restart gets a higher one while the id stays.
func Test_ClusterIDAndEpochs(t *testing.T) {
	dir := t.TempDir()
	cfg := TestConfig("n1", dir)
	cfg.HTTPAdvertise = "127.0.0.1:1"
	n := mustOpen(t, cfg, nil)
	var first uint64
	poll.Eventually(t, testWait, "the node has an epoch", func() error { first = n.Epoch(); return zeroErr(first) })
	id := n.ClusterID()
	if id.IsZero() {
		t.Fatal("no cluster id once the node has an epoch")
	}
	if st := n.Status(); st.ClusterID != id.String() || len(st.Members) != 1 || st.Members[0].Epoch != first {
		t.Fatalf("status %+v", st)
	}
	n.Close()
	n2 := mustOpen(t, cfg, nil)
	var second uint64
	poll.Eventually(t, testWait, "the restarted node has an epoch", func() error { second = n2.Epoch(); return zeroErr(second) })
	if second <= first || n2.ClusterID() != id || n2.Incarnation() == n.Incarnation() {
		t.Fatalf("after a restart: epoch %d (was %d), cluster id %s (was %s)", second, first, n2.ClusterID(), id)
	}
}

func zeroErr(v uint64) error {
	if v == 0 {
		return errors.New("still 0")
	}
	return nil
}

// Test_ClusterIDFromMembers: a leader without a cluster id asks the other
// members: it copies the id one of them reports, draws one only when every
// one of them answers without one (errNoMemberHasID), and waits when one
// cannot be asked (errNoClusterID alone), since that one may hold it.
func Test_ClusterIDFromMembers(t *testing.T) {
	id, _ := fsm.ParseClusterID("5f0c2d3e4a1b6c7d8e9fa0b1c2d3e4f5")
	member := func(clusterID string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(api.ClusterStatus{NodeID: "m", ClusterID: clusterID})
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	down := func() string {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := strings.TrimPrefix(srv.URL, "http://")
		srv.Close()
		return addr
	}
	tests := []struct {
		name    string
		members []string
		want    fsm.ClusterID
		wantErr error
		noneHas bool
	}{
		{"one member has it", []string{member(""), member(id.String())}, id, nil, false},
		{"none has one", []string{member(""), member("")}, fsm.ClusterID{}, errNoMemberHasID, true},
		{"one cannot be asked", []string{member(""), down()}, fsm.ClusterID{}, errNoClusterID, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mustOpen(t, TestConfig("n1", t.TempDir()), nil)
			for i, addr := range tt.members {
				if _, err := n.Apply(ctx(t), fsm.SetNode{Node: fsm.NodeMeta{ID: fmt.Sprintf("m%d", i), HTTPAddr: addr}}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := n.clusterIDFromMembers(ctx(t))
			if got != tt.want || !errors.Is(err, tt.wantErr) || errors.Is(err, errNoMemberHasID) != tt.noneHas {
				t.Fatalf("= %s, %v; want %s, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
