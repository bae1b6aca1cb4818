package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_CutOffNodeKeepsSelecting: a client that wrote through the healthy
// part of the cluster carries that write's catalog index with every
// selection; when it fails over to a node cut off from the leader, which
// never received the write, the node answers from the catalog it has and
// says so (X-Kvselect-Catalog-Behind), instead of refusing every selection
// with catalog_behind (SPEC §3.1). require_catalog keeps the refusal.
func Test_CutOffNodeKeepsSelecting(t *testing.T) {
	c, proxies := startRaftProxiedCluster(t, 3)
	leader := c.Leader()
	mustUpsert(t, leader.URL(), 1)
	victim := c.Followers()[0]
	servertest.Eventually(t, "the victim has worker 1", func() error {
		if victim.Node.CatalogIndex() < leader.Node.CatalogIndex() {
			return fmt.Errorf("at %d, leader at %d", victim.Node.CatalogIndex(), leader.Node.CatalogIndex())
		}
		return nil
	})
	// Nothing reaches the victim's Raft port from now on.
	proxies[c.Index(victim)].Cut()
	idx := mustUpsert(t, c.Leader().URL(), 2)
	if victim.Node.CatalogIndex() >= idx {
		t.Fatalf("the victim applied index %d through a cut link", idx)
	}

	r := call(t, "POST", victim.URL()+"/select", selectBody, api.HeaderIndex, strconv.FormatUint(idx, 10))
	if r.status != http.StatusOK || r.header.Get(api.HeaderCatalogBehind) != strconv.FormatUint(victim.Node.CatalogIndex(), 10) {
		t.Fatalf("selection on the cut-off node = %d, %s %q: %s", r.status, api.HeaderCatalogBehind,
			r.header.Get(api.HeaderCatalogBehind), r.body)
	}
	r = call(t, "POST", victim.URL()+"/select", `{"model_name": "m", "token_ids": [1,2,3], "require_catalog": true}`,
		api.HeaderIndex, strconv.FormatUint(idx, 10))
	if r.status != http.StatusServiceUnavailable || r.code() != string(api.CodeCatalogBehind) {
		t.Fatalf("with require_catalog = %d %s", r.status, r.body)
	}

	// The Go client, which sends its session's index, selects there too
	// and can tell the answer came from a catalog behind it.
	kv, err := client.New(client.Config{Addrs: []string{victim.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	kv.ObserveCatalogIndex(idx)
	var info client.ResponseInfo
	ctx, cancel := context.WithTimeout(client.WithResponseInfo(context.Background(), &info), 10*time.Second)
	defer cancel()
	sel, err := kv.SelectAndReserve(ctx, api.SelectRequest{Prompt: api.Prompt{ModelName: "m", TokenIDs: api.TokenIDs{1, 2, 3, 4}},
		ReservationID: "cut-off"})
	if err != nil || sel.WorkerID != 1 || info.CatalogBehind == 0 || info.CatalogBehind >= idx {
		t.Fatalf("client selection on the cut-off node = %+v %v, info %+v", sel, err, info)
	}
	// A retry of the booking (its answer lost) gets the same answer back.
	again, err := kv.SelectAndReserve(ctx, api.SelectRequest{Prompt: api.Prompt{ModelName: "m", TokenIDs: api.TokenIDs{1, 2, 3, 4}},
		ReservationID: "cut-off"})
	if err != nil || !info.Replayed || again.WorkerID != sel.WorkerID || again.DPRank != sel.DPRank {
		t.Fatalf("retry = %+v %v (first %+v), info %+v", again, err, sel, info)
	}
	proxies[c.Index(victim)].Pass()
}
