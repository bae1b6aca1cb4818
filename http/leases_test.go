package http

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
)

// Test_KeepAlive: the one-worker route answers the lease or the error of
// its id; the batch route answers every id on its own; bad input is a 400
// naming the field; the lease shows in the record.
func Test_KeepAlive(t *testing.T) {
	f := newFakeNode()
	url := serve(t, f.service())
	for _, body := range []string{
		`{"worker_id":1,"endpoint":"http://w1","block_size":16,"kv_events_endpoint":"tcp://h:1","lease_ttl_s":30}`,
		`{"worker_id":2,"endpoint":"http://w2","block_size":16,"kv_events_endpoint":"tcp://h:2"}`,
	} {
		if status, _, out := call(t, "POST", url+"/workers", body); status != 201 {
			t.Fatalf("register: %d %s", status, out)
		}
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string // a fragment of the answer
	}{
		{"renew one", "POST", "/workers/1/keepalive", "", 200, `{"worker_id":1,"lease_ttl_s":30,"expires_in_ms":30000}`},
		{"no lease", "POST", "/workers/2/keepalive", "", 409, `"code":"conflict"`},
		{"unknown worker", "POST", "/workers/3/keepalive", "", 404, `"code":"not_found"`},
		{"bad id", "POST", "/workers/x/keepalive", "", 400, `worker_id`},
		{"batch", "POST", "/workers/keepalive", `{"worker_ids":[1,2,3]}`, 200,
			`{"leases":[{"worker_id":1,"lease_ttl_s":30,"expires_in_ms":30000}],"failed":[{"worker_id":2,"code":"conflict"`},
		{"empty batch", "POST", "/workers/keepalive", `{"worker_ids":[]}`, 200, `{"leases":[]}`},
		{"batch without ids", "POST", "/workers/keepalive", `{}`, 400, `worker_ids`},
		{"batch with a misspelt field", "POST", "/workers/keepalive", `{"worker_id":[1]}`, 400, `worker_id`},
		{"lease too long", "POST", "/workers", `{"worker_id":4,"lease_ttl_s":3601}`, 400, `lease_ttl_s`},
		{"record shows its lease", "GET", "/workers/1", "", 200, `"lease_ttl_s":30`},
		{"patch removes the lease", "PATCH", "/workers/1", `{"lease_ttl_s":0}`, 200, `"worker_id":1`},
		{"renewal after removal", "POST", "/workers/1/keepalive", "", 409, `"code":"conflict"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := call(t, tt.method, url+tt.path, tt.body)
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("%s %s = %d %s, want %d with %s", tt.method, tt.path, status, body, tt.status, tt.want)
			}
		})
	}
}

// Test_KeepAliveWithoutLeader: a keepalive is leader work; without one it
// fails as a whole like a catalog write.
func Test_KeepAliveWithoutLeader(t *testing.T) {
	f := newFakeNode()
	f.keepAlive = func(context.Context, []uint64) ([]cluster.LeaseState, []error, error) {
		return nil, nil, cluster.ErrNoLeader
	}
	url := serve(t, f.service())
	status, _, body := call(t, "POST", url+"/workers/keepalive", `{"worker_ids":[1]}`)
	var e api.Error
	if err := json.Unmarshal([]byte(body), &e); err != nil || status != 503 || e.Code != api.CodeNoLeader {
		t.Fatalf("%d %s", status, body)
	}
}
