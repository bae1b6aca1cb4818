package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler"
)

// Test_PolicyConstantsAgree: the wire's limits and the cluster default's
// name are the catalog's and the scheduler's.
func Test_PolicyConstantsAgree(t *testing.T) {
	if api.MaxPolicies != fsm.MaxPolicies || api.MaxPolicyParameters != fsm.MaxPolicyParams ||
		api.AnyModel != fsm.AnyModel || fsm.AnyModel != scheduler.AnyModel {
		t.Fatal("api, fsm and scheduler disagree on the policy limits or the cluster default's name")
	}
}

// Test_PolicyRequests: the policy routes' answers, in order on one node:
// validation names the field (with ValidatePolicy's words for an unknown
// policy or parameter) and writes nothing; a PUT stores and answers the
// entry with its index; the list is sorted with the node's default; a
// DELETE names the entry by query parameters and 404s when it is absent.
func Test_PolicyRequests(t *testing.T) {
	f := newFakeNode()
	url := serve(t, f.service())
	tooMany := map[string]any{}
	for i := range api.MaxPolicyParameters + 1 {
		tooMany[fmt.Sprintf("p%d", i)] = 1
	}
	tooManyBody, _ := json.Marshal(map[string]any{"model_name": "m", "policy": "random", "parameters": tooMany})
	const empty = `{"policies":[],"node_default":{"policy":"dynamo-default","parameters":{}}}`
	steps := []step{
		{"empty list", "GET", "/policies", "", 200, empty},
		{"unknown policy", "PUT", "/policies", `{"model_name":"m","policy":"nope"}`, 400, `policy: unknown policy \"nope\" (known: agentic,`},
		{"no policy", "PUT", "/policies", `{"model_name":"m"}`, 400, `policy: required: one of agentic,`},
		{"no model", "PUT", "/policies", `{"policy":"random"}`, 400, `model_name: required: a model, or \"*\" for the cluster default`},
		{"unknown parameter", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"bogus":1}}`, 400,
			`parameters.bogus: policy \"two-tier\" takes no parameter \"bogus\" (it takes cache_threshold,`},
		{"boolean as a number", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"assume_kv_reuse":1}}`, 400,
			`parameters.assume_kv_reuse: expected true or false, got the number 1`},
		{"number as a boolean", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"cache_threshold":true}}`, 400,
			`parameters.cache_threshold: expected a number, got the boolean true`},
		{"number as a string", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"cache_threshold":"0.5"}}`, 400,
			`parameters.cache_threshold: expected a number, got a string`},
		{"null parameter", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"cache_threshold":null}}`, 400,
			`parameters.cache_threshold: expected a number, got null`},
		{"out of range", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"cache_threshold":2}}`, 400,
			`parameters.cache_threshold: policy \"two-tier\" parameter \"cache_threshold\" must be between 0 and 1, got 2`},
		{"parameters not an object", "PUT", "/policies", `{"model_name":"m","policy":"random","parameters":[1]}`, 400, `parameters`},
		{"too many parameters", "PUT", "/policies", string(tooManyBody), 400, `parameters: 65 parameters, at most 64`},
		{"cluster default with a tenant", "PUT", "/policies", `{"model_name":"*","tenant_id":"t","policy":"random"}`, 400,
			`tenant_id: must be empty with model_name \"*\" (the cluster default), got \"t\"`},
		{"tenant and routing group differ", "PUT", "/policies", `{"model_name":"m","tenant_id":"a","routing_group":"b","policy":"random"}`, 400,
			`routing_group: is another name for tenant_id`},
		{"long model", "PUT", "/policies", `{"model_name":"` + strings.Repeat("m", fsm.MaxStringLen+1) + `","policy":"random"}`, 400,
			`model_name: longer than 1024 bytes`},
		{"misspelt field", "PUT", "/policies", `{"model_name":"m","polcy":"random"}`, 400, `polcy: unknown field`},
		{"no body", "PUT", "/policies", ``, 400, `request body is required`},
		{"nothing written by bad requests", "GET", "/policies", "", 200, empty},
		{"set a model's", "PUT", "/policies", `{"model_name":"m","policy":"two-tier","parameters":{"cache_threshold":0.6,"assume_kv_reuse":false}}`, 200,
			`{"model_name":"m","tenant_id":"default","policy":"two-tier","parameters":{"assume_kv_reuse":false,"cache_threshold":0.6},"modify_index":1,"catalog_index":1}`},
		{"set the cluster default", "PUT", "/policies", `{"model_name":"*","policy":"round-robin","parameters":{}}`, 200,
			`{"model_name":"*","tenant_id":"","policy":"round-robin","parameters":{},"modify_index":2,"catalog_index":2}`},
		{"set through routing_group, a model with a slash", "PUT", "/policies", `{"model_name":"org/llama","routing_group":"g","policy":"random"}`, 200,
			`{"model_name":"org/llama","tenant_id":"g","policy":"random","parameters":{},"modify_index":3,"catalog_index":3}`},
		{"replace", "PUT", "/policies", `{"model_name":"m","tenant_id":"default","policy":"least-loaded"}`, 200,
			`{"model_name":"m","tenant_id":"default","policy":"least-loaded","parameters":{},"modify_index":4,"catalog_index":4}`},
		{"list, sorted", "GET", "/policies", "", 200,
			`{"policies":[{"model_name":"*","tenant_id":"","policy":"round-robin","parameters":{},"modify_index":2},` +
				`{"model_name":"m","tenant_id":"default","policy":"least-loaded","parameters":{},"modify_index":4},` +
				`{"model_name":"org/llama","tenant_id":"g","policy":"random","parameters":{},"modify_index":3}],` +
				`"node_default":{"policy":"dynamo-default","parameters":{}}}`},
		{"delete without a model", "DELETE", "/policies?tenant_id=g", "", 400, `model_name: required`},
		{"delete the default with a tenant", "DELETE", "/policies?model_name=*&tenant_id=default", "", 400, `tenant_id: must be empty`},
		{"delete an absent entry", "DELETE", "/policies?model_name=org/llama", "", 404, `policy not found: model_name \"org/llama\" tenant_id \"default\"`},
		{"delete", "DELETE", "/policies?model_name=org%2Fllama&routing_group=g", "", 200,
			`{"model_name":"org/llama","tenant_id":"g","policy":"random","parameters":{},"modify_index":3,"catalog_index":6}`},
		{"delete the cluster default", "DELETE", "/policies?model_name=*", "", 200,
			`{"model_name":"*","tenant_id":"","policy":"round-robin","parameters":{},"modify_index":2,"catalog_index":7}`},
		{"delete it again", "DELETE", "/policies?model_name=*", "", 404, `not_found`},
		{"what is left", "GET", "/policies", "", 200,
			`{"policies":[{"model_name":"m","tenant_id":"default","policy":"least-loaded","parameters":{},"modify_index":4}],` +
				`"node_default":{"policy":"dynamo-default","parameters":{}}}`},
		{"wrong method", "POST", "/policies", "", 405, `method_not_allowed`},
	}
	for _, st := range steps {
		if hdr := st.run(t, url); st.status == 200 && hdr.Get(api.HeaderIndex) == "" {
			t.Fatalf("%s: no %s", st.name, api.HeaderIndex)
		}
	}
}

// Test_PolicyNodeDefault: GET /policies shows the node's --policy with
// its parameters as the wire has them.
func Test_PolicyNodeDefault(t *testing.T) {
	f := newFakeNode()
	url := serve(t, f.service(func(c *Config) {
		c.NodePolicy = scheduler.PolicySpec{Name: "two-tier", Params: map[string]float64{"cache_threshold": 0.7, "track_prefill_tokens": 0}}
	}))
	_, _, body := call(t, "GET", url+"/policies", "")
	want := `{"policies":[],"node_default":{"policy":"two-tier","parameters":{"cache_threshold":0.7,"track_prefill_tokens":false}}}`
	if strings.TrimSpace(body) != want {
		t.Fatalf("body %s\nwant %s", body, want)
	}
}

// Test_PolicyBound: a new entry past api.MaxPolicies is 409 conflict,
// from the local catalog before anything is proposed, and from the FSM
// when the leader's catalog filled up meanwhile; replacing an entry works.
func Test_PolicyBound(t *testing.T) {
	f := newFakeNode()
	type record struct {
		Model  string `json:"model_name"`
		Tenant string `json:"tenant_id"`
		Policy string `json:"policy"`
	}
	snap := struct {
		Version  int      `json:"version"`
		Index    uint64   `json:"index"`
		Workers  []any    `json:"workers"`
		Policies []record `json:"policies"`
	}{Version: 2, Index: 1, Workers: []any{}}
	for i := range api.MaxPolicies {
		snap.Policies = append(snap.Policies, record{"m", fmt.Sprintf("t%04d", i), "random"})
	}
	data, _ := json.Marshal(snap)
	if err := f.log.FSM.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	proposed := 0
	f.apply = func(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
		proposed++
		return &fsm.Result{Index: 2, Policy: &fsm.Policy{Key: cmd.(fsm.SetPolicy).Key, Name: "random", ModifyIndex: 2}}, nil
	}
	url := serve(t, f.service())
	status, _, body := call(t, "PUT", url+"/policies", `{"model_name":"m","tenant_id":"new","policy":"random"}`)
	if status != 409 || !strings.Contains(body, `"code":"conflict"`) || !strings.Contains(body, "at most 4096") || proposed != 0 {
		t.Fatalf("a new entry past the bound: %d %s (%d proposed)", status, body, proposed)
	}
	if status, _, body := call(t, "PUT", url+"/policies", `{"model_name":"m","tenant_id":"t0007","policy":"random"}`); status != 200 || proposed != 1 {
		t.Fatalf("replacing an entry at the bound: %d %s", status, body)
	}
	f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) {
		return nil, fmt.Errorf("%w: the leader's catalog is full", fsm.ErrTooManyPolicies)
	}
	if status, _, body := call(t, "PUT", url+"/policies", `{"model_name":"m","tenant_id":"t0007","policy":"random"}`); status != 409 {
		t.Fatalf("the FSM's refusal: %d %s", status, body)
	}
}
