package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// Test_Policies: what policies list, set and delete send and print, and
// their usage errors.
func Test_Policies(t *testing.T) {
	twoTier := map[string]any{"model_name": "org/llama", "tenant_id": "t", "policy": "two-tier",
		"parameters": map[string]any{"cache_threshold": 0.6, "assume_kv_reuse": false}, "modify_index": 7}
	clusterDefault := map[string]any{"model_name": "*", "tenant_id": "", "policy": "round-robin", "parameters": map[string]any{}, "modify_index": 5}
	n := leaderNode(t)
	n.Answer("GET /policies", http.StatusOK, map[string]any{"policies": []any{clusterDefault, twoTier},
		"node_default": map[string]any{"policy": "dynamo-default", "parameters": map[string]any{}}})
	n.Answer("PUT /policies", http.StatusOK, merge(twoTier, "catalog_index", 7), api.HeaderIndex, "7", api.HeaderServedBy, "n1")
	n.Answer("DELETE /policies", http.StatusOK, merge(clusterDefault, "catalog_index", 8), api.HeaderIndex, "8")
	empty := leaderNode(t)
	empty.Answer("GET /policies", http.StatusOK, map[string]any{"policies": []any{},
		"node_default": map[string]any{"policy": "two-tier", "parameters": map[string]any{"cache_threshold": 0.7}}})

	tests := []struct {
		name      string
		node      *fakenode.Node
		args      []string
		want      string // stdout
		wantRoute string
		wantQuery string
		wantBody  string
	}{
		{name: "list", args: []string{"policies", "list"}, wantRoute: "GET /policies", want: `
MODEL      TENANT  POLICY       PARAMETERS                                 INDEX
*          -       round-robin  -                                          5
org/llama  t       two-tier     assume_kv_reuse=false,cache_threshold=0.6  7
node default (--policy): dynamo-default
`},
		{name: "list, none", node: empty, args: []string{"policies", "list", "--linearizable"}, wantRoute: "GET /policies",
			wantQuery: "consistency=linearizable", want: `
no policy entries: every partition runs the node's default
node default (--policy): two-tier(cache_threshold=0.7)
`},
		{name: "set", args: []string{"policies", "set", "--model", "org/llama", "--tenant", "t", "--policy", "two-tier",
			"--param", "cache_threshold=0.6", "--param", "assume_kv_reuse=false"},
			wantRoute: "PUT /policies",
			wantBody:  `{"model_name":"org/llama","tenant_id":"t","policy":"two-tier","parameters":{"assume_kv_reuse":false,"cache_threshold":0.6}}`,
			want: `
policy of model org/llama tenant t stored: two-tier(assume_kv_reuse=false,cache_threshold=0.6)
applied at index 7 by n1
`},
		{name: "set the cluster default, a value that is no number sent as it is", args: []string{"policies", "set", "--model", "*",
			"--policy", "two-tier", "--param", "cache_threshold=high"},
			wantRoute: "PUT /policies", wantBody: `{"model_name":"*","policy":"two-tier","parameters":{"cache_threshold":"high"}}`},
		{name: "delete", args: []string{"policies", "delete", "--model", "*"}, wantRoute: "DELETE /policies", wantQuery: "model_name=%2A",
			want: `
policy of the cluster default (*) removed: round-robin
applied at index 8
`},
		{name: "rm, a model's", args: []string{"policies", "rm", "--model", "org/llama", "--tenant", "t"},
			wantRoute: "DELETE /policies", wantQuery: "model_name=org%2Fllama&tenant_id=t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := n
			if tt.node != nil {
				node = tt.node
			}
			before := len(node.Requests(tt.wantRoute))
			out, errOut, code := runCLI(t, append([]string{"--addr", node.URL}, tt.args...)...)
			if code != exitOK || (tt.want != "" && out != strings.TrimPrefix(tt.want, "\n")) {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, strings.TrimPrefix(tt.want, "\n"))
			}
			got := node.Requests(tt.wantRoute)
			if len(got) != before+1 || got[before].Body != tt.wantBody || got[before].Query != tt.wantQuery {
				t.Fatalf("%s got %+v;\nwant body %s query %q", tt.wantRoute, got[before:], tt.wantBody, tt.wantQuery)
			}
		})
	}

	for _, tt := range []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"set without a model", []string{"policies", "set", "--policy", "random"}, "kvselectctl: policies set: give --model and --policy"},
		{"set without a policy", []string{"policies", "set", "--model", "m"}, "kvselectctl: policies set: give --model and --policy"},
		{"a parameter without a value", []string{"policies", "set", "--model", "m", "--policy", "random", "--param", "x"},
			`kvselectctl: invalid argument "x" for "--param" flag: "x" is not name=value`},
		{"delete without a model", []string{"policies", "delete", "--tenant", "t"}, "kvselectctl: policies delete: give --model"},
		{"group only", []string{"policies"}, "kvselectctl: policies: missing subcommand (want one of: delete, list, set)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if first, _, _ := strings.Cut(errOut, "\n"); code != exitUsage || out != "" || !strings.HasPrefix(first, tt.wantStderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errOut, tt.wantStderr)
			}
		})
	}
}

// merge returns m with one more key.
func merge(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for mk, mv := range m {
		out[mk] = mv
	}
	return out
}
