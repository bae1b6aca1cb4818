package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// The partition of the policy tests: a model name with a slash, which is
// why DELETE /policies takes query parameters.
var policyPartition = fsm.PartitionKey{Model: "org/model", Tenant: "t"}

// policyPrompt is a prompt whose two blocks only worker 1's rank 0 holds
// (cachePolicyPrefix): Dynamo's cost picks that rank every time, while
// round-robin takes every eligible rank in turn.
var policyPrompt = fmt.Sprintf(`{"model_name": %q, "tenant_id": %q, "block_hashes": [11, 12], "sequence_hashes": [21, 22], "isl_tokens": 32}`,
	policyPartition.Model, policyPartition.Tenant)

// cachePolicyPrefix puts policyPrompt's blocks in s's index, on worker 1's
// rank 0, once s has finished recovering its index (a recovery would
// replace what was put before it).
func cachePolicyPrefix(t *testing.T, s *server.Server) {
	t.Helper()
	servertest.Eventually(t, s.Node.ID()+" recovers its index", func() error {
		if s.Recovering() {
			return fmt.Errorf("still recovering")
		}
		return nil
	})
	ev := indexer.Event{Kind: indexer.EventStored, Tier: indexer.TierDevice,
		Blocks: []indexer.StoredBlock{{Hash: 1011, Local: 11}, {Hash: 1012, Local: 12}}}
	if _, err := s.Indexer.Apply(indexer.RankKey{Worker: 1, Rank: 0}, indexer.Batch{Events: []indexer.Event{ev}}); err != nil {
		t.Fatal(err)
	}
}

// picks selects n times on s, once s has applied catalog index idx, and
// returns the ranks chosen in order, as "worker/rank".
func picks(t *testing.T, s *server.Server, idx uint64, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		r := call(t, "POST", s.URL()+api.PathSelect, policyPrompt, api.HeaderIndex, strconv.FormatUint(idx, 10))
		var sel api.Selection
		if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &sel) != nil {
			t.Fatalf("select on %s: %d %s", s.Node.ID(), r.status, r.body)
		}
		out[i] = fmt.Sprintf("%d/%d", sel.WorkerID, sel.DPRank)
	}
	return out
}

// roundRobin reports whether ps takes the partition's three ranks in turn.
func roundRobin(ps []string) bool {
	seen := map[string]bool{}
	for i, p := range ps {
		seen[p] = true
		if i >= 3 && p != ps[i-3] || i >= 1 && p == ps[i-1] {
			return false
		}
	}
	return len(seen) == 3
}

// Test_PolicyAcrossTheCluster (SPEC §6.4): --policy seeds the cluster
// default once, at bootstrap; a policy PUT through a follower is forwarded
// to the leader, reaches every node and changes what /select does there
// (round-robin rotates over ranks whose state is identical, where Dynamo's
// cost keeps the one with the cached prefix); a node that installs a
// snapshot has it (and not a seed again after an operator deleted the
// default); a DELETE restores the default on every node.
func Test_PolicyAcrossTheCluster(t *testing.T) {
	c := servertest.StartCluster(t, 3, func(_ int, cfg *server.Config) {
		cfg.Cluster.SnapshotThreshold = 16
		cfg.Cluster.SnapshotInterval = 20 * time.Millisecond
		cfg.Cluster.TrailingLogs = 4
		cfg.Ingest.StaleAfter = time.Hour // no engine publishes: the listeners stay down
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clusterDefault := fsm.PartitionKey{Model: fsm.AnyModel}
	servertest.Eventually(t, "every node has the seeded cluster default", func() error {
		for _, s := range c.Live() {
			cat := s.Node.Catalog()
			p, ok := cat.Policy(clusterDefault)
			if !ok || p.Name != "dynamo-default" || cat.PolicyCount() != 1 {
				return fmt.Errorf("%s: policies %+v", s.Node.ID(), cat.Policies())
			}
		}
		return nil
	})

	follower := c.Followers()[0]
	admin := nodeClient(t, follower)
	for _, w := range []api.WorkerSpec{
		{WorkerID: 1, DataParallelSize: 2, KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1", 1: "tcp://127.0.0.1:2"}},
		{WorkerID: 2, DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:3"}},
	} {
		w.ModelName, w.TenantID, w.Endpoint, w.BlockSize = policyPartition.Model, policyPartition.Tenant, "http://w", 16
		if _, err := admin.RegisterWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	idx := admin.CatalogIndex()
	for _, s := range c.Live() {
		cachePolicyPrefix(t, s)
		if got := picks(t, s, idx, 6); slices.ContainsFunc(got, func(p string) bool { return p != "1/0" }) {
			t.Fatalf("%s under dynamo-default picked %v, want the cached rank 1/0 every time", s.Node.ID(), got)
		}
	}

	// PUT on a follower: forwarded, answered once the follower applied it.
	body := fmt.Sprintf(`{"model_name": %q, "tenant_id": %q, "policy": "round-robin"}`, policyPartition.Model, policyPartition.Tenant)
	r := call(t, "PUT", follower.URL()+api.PathPolicies, body)
	if by := r.header.Get(api.HeaderServedBy); r.status != http.StatusOK || by == "" || by == follower.Node.ID() {
		t.Fatalf("PUT through %s: %d %v %s", follower.Node.ID(), r.status, r.header, r.body)
	}
	var written api.PolicyWritten
	if err := json.Unmarshal([]byte(r.body), &written); err != nil || written.Name != "round-robin" ||
		written.CatalogIndex != r.index(t) || written.ModifyIndex != written.CatalogIndex {
		t.Fatalf("PUT answered %s", r.body)
	}
	for _, s := range c.Live() {
		if got := picks(t, s, written.CatalogIndex, 6); !roundRobin(got) {
			t.Fatalf("%s under round-robin picked %v", s.Node.ID(), got)
		}
	}

	// A node that misses the write and the operator's DELETE of the
	// seeded default, while the leader compacts its log, installs a
	// snapshot with both; it does not seed the default again.
	lag := c.Followers()[0]
	li := c.Index(lag)
	c.Stop(li)
	writer := nodeClient(t, c.Leader())
	if _, err := writer.DeletePolicy(ctx, api.AnyModel, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		if _, err := writer.SetPolicy(ctx, api.PolicyRequest{ModelName: "filler", TenantID: fmt.Sprint(i), Policy: "random"}); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, "the leader compacts its log", func() error {
		snaps, _ := filepath.Glob(filepath.Join(c.Config(c.Index(c.Leader())).Cluster.DataDir, "snapshots", "*"))
		if len(snaps) == 0 {
			return fmt.Errorf("no snapshot yet")
		}
		return nil
	})
	back := c.Restart(li)
	c.WaitConverged()
	servertest.Eventually(t, "the restarted node catches up", func() error {
		if back.Node.CatalogIndex() < writer.CatalogIndex() {
			return fmt.Errorf("at %d, want %d", back.Node.CatalogIndex(), writer.CatalogIndex())
		}
		return nil
	})
	if snaps, _ := filepath.Glob(filepath.Join(c.Config(li).Cluster.DataDir, "snapshots", "*")); len(snaps) == 0 {
		t.Fatal("the restarted node caught up without a snapshot")
	}
	cat := back.Node.Catalog()
	if p, ok := cat.Policy(policyPartition); !ok || p.Name != "round-robin" || cat.PolicyCount() != 25 {
		t.Fatalf("restored policies: %d entries, %s's %+v", cat.PolicyCount(), policyPartition, p)
	}
	if _, ok := cat.Policy(clusterDefault); ok || !cat.DefaultPolicySeeded() {
		t.Fatalf("the deleted cluster default came back: %+v", cat.Policies())
	}
	cachePolicyPrefix(t, back)
	if got := picks(t, back, writer.CatalogIndex(), 6); !roundRobin(got) {
		t.Fatalf("restored %s picked %v", back.Node.ID(), got)
	}

	// DELETE through a follower: every node is back to the default (the
	// node's own, dynamo-default, the cluster's being gone).
	del := nodeClient(t, c.Followers()[0]) // follower may be the node restarted, on a new port
	gone, err := del.DeletePolicy(ctx, policyPartition.Model, policyPartition.Tenant)
	if err != nil || gone.Name != "round-robin" {
		t.Fatalf("DELETE: %+v %v", gone, err)
	}
	for _, s := range c.Live() {
		if got := picks(t, s, gone.CatalogIndex, 6); slices.ContainsFunc(got, func(p string) bool { return p != "1/0" }) {
			t.Fatalf("%s after DELETE picked %v, want 1/0 every time", s.Node.ID(), got)
		}
	}
	if _, err := del.DeletePolicy(ctx, policyPartition.Model, policyPartition.Tenant); client.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("DELETE again: %v", err)
	}
}
