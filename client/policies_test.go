package client

import (
	"net/http"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// Test_PolicyCalls: the policy calls' requests on the wire (method, path,
// query, body) and their answers, the write's index joining the session.
func Test_PolicyCalls(t *testing.T) {
	n := fakenode.New(t)
	stored := api.PolicyWritten{Policy: api.Policy{ModelName: "org/m", TenantID: "default", Name: "two-tier",
		Parameters: api.PolicyParameters{"cache_threshold": 0.6, "assume_kv_reuse": false}, ModifyIndex: 9}, CatalogIndex: 9}
	n.Answer("PUT /policies", http.StatusOK, stored, api.HeaderIndex, "9")
	n.Answer("DELETE /policies", http.StatusOK, stored, api.HeaderIndex, "10")
	n.Answer("GET /policies", http.StatusOK, api.Policies{Policies: []api.Policy{stored.Policy},
		NodeDefault: api.PolicySpec{Name: "dynamo-default", Parameters: api.PolicyParameters{}}}, api.HeaderIndex, "10")
	c := mustClient(t, Config{Addrs: []string{n.URL}})
	ctx := ctxFor(t)

	w, err := c.SetPolicy(ctx, api.PolicyRequest{ModelName: "org/m", Policy: "two-tier",
		Parameters: api.PolicyParameters{"cache_threshold": 0.6, "assume_kv_reuse": false}})
	if err != nil || w.CatalogIndex != 9 || w.Parameters["assume_kv_reuse"] != false || w.Parameters["cache_threshold"] != 0.6 {
		t.Fatalf("SetPolicy = %+v, %v", w, err)
	}
	if got := n.Requests("PUT /policies"); len(got) != 1 ||
		got[0].Body != `{"model_name":"org/m","policy":"two-tier","parameters":{"assume_kv_reuse":false,"cache_threshold":0.6}}` {
		t.Fatalf("PUT sent %+v", got)
	}
	for _, tt := range []struct{ model, tenant, query string }{
		{"org/m", "", "model_name=org%2Fm"},
		{"org/m", "t", "model_name=org%2Fm&tenant_id=t"},
		{api.AnyModel, "", "model_name=%2A"},
	} {
		if _, err := c.DeletePolicy(ctx, tt.model, tt.tenant); err != nil {
			t.Fatal(err)
		}
		got := n.Requests("DELETE /policies")
		if last := got[len(got)-1]; last.Query != tt.query || last.Body != "" {
			t.Fatalf("DeletePolicy(%q, %q) sent %+v", tt.model, tt.tenant, last)
		}
	}
	ps, err := c.Policies(ctx, false)
	if err != nil || len(ps.Policies) != 1 || ps.NodeDefault.Name != "dynamo-default" {
		t.Fatalf("Policies = %+v, %v", ps, err)
	}
	if got := n.Requests("GET /policies"); len(got) != 1 || got[0].Index != "10" {
		t.Fatalf("GET sent %+v (want the session's index 10)", got)
	}
	if c.CatalogIndex() != 10 {
		t.Fatalf("session index %d", c.CatalogIndex())
	}
}
