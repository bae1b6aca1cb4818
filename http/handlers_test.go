package http

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler"
)

// call sends one request and returns the status, headers and body.
func call(t *testing.T, method, url, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

const registration = `{"worker_id":1,"endpoint":"http://w1","block_size":16,"kv_events_endpoint":"tcp://h:1"}`

// Test_HandlerOutcomes injects, through fakes, the failures a real cluster
// produces only under faults, and checks each reaches the client with its
// code, status and Retry-After.
func Test_HandlerOutcomes(t *testing.T) {
	selectBody := `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`
	tests := []struct {
		name         string
		fake         func(f *fakeNode)
		method, path string
		body         string
		headers      []string
		status       int
		code         api.Code
	}{
		{"write with an unknown outcome", func(f *fakeNode) {
			f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) {
				return nil, fmt.Errorf("%w: leadership lost", cluster.ErrUnknownOutcome)
			}
		}, "POST", "/workers", registration, nil, 503, api.CodeUnknownOutcome},
		{"write without a leader", func(f *fakeNode) {
			f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, cluster.ErrNoLeader }
		}, "DELETE", "/workers/1", "", nil, 503, api.CodeNoLeader},
		{"write while shutting down", func(f *fakeNode) {
			f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, cluster.ErrClosed }
		}, "PATCH", "/workers/1", `{"endpoint":"http://x"}`, nil, 503, api.CodeShuttingDown},
		{"selection behind the catalog", func(f *fakeNode) {
			f.waitApplied = func(context.Context, uint64) error {
				return fmt.Errorf("%w: n1 has applied catalog_index 3, the request needs 9", cluster.ErrCatalogBehind)
			}
		}, "POST", "/select", selectBody, []string{api.HeaderIndex, "9"}, 503, api.CodeCatalogBehind},
		{"catalog read behind its session index", func(f *fakeNode) {
			f.waitApplied = func(context.Context, uint64) error { return cluster.ErrCatalogBehind }
		}, "GET", "/workers", "", []string{api.HeaderIndex, "9"}, 503, api.CodeCatalogBehind},
		{"booking without a schedulable worker", func(f *fakeNode) {
			f.reserve = func(scheduler.ReserveRequest) (scheduler.Booking, error) {
				return scheduler.Booking{}, scheduler.ErrNotReady
			}
		}, "POST", "/reservations", `{"reservation_id":"r","worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, nil, 503, api.CodeNotReady},
		{"a bug is a 500, not a crash", func(f *fakeNode) {
			f.sel = func(scheduler.SelectRequest) (scheduler.Selection, error) {
				return scheduler.Selection{}, fmt.Errorf("boom")
			}
		}, "POST", "/select", selectBody, nil, 500, api.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			tt.fake(f)
			url := serve(t, f.service())
			status, hdr, body := call(t, tt.method, url+tt.path, tt.body, tt.headers...)
			if status != tt.status || !strings.Contains(body, `"code":"`+string(tt.code)+`"`) {
				t.Fatalf("%s %s = %d %s, want %d %s", tt.method, tt.path, status, body, tt.status, tt.code)
			}
			if (status == 503) != (hdr.Get("Retry-After") != "") {
				t.Fatalf("Retry-After %q on a %d", hdr.Get("Retry-After"), status)
			}
		})
	}
}

// Test_LeaderChanges: a follower forwards leader-only requests to the
// leader it knows; when that node answers that it is not the leader (the
// leader changed), the follower asks again and forwards to the new one.
// A node that loses leadership before writing anything does the same.
func Test_LeaderChanges(t *testing.T) {
	// Two "leaders": the old one now refuses, the new one applies.
	oldLeader := newFakeNode()
	oldLeader.apply = func(context.Context, fsm.Command) (*fsm.Result, error) {
		return nil, fmt.Errorf("%w: leader is n3", cluster.ErrNotLeader)
	}
	newLeader := newFakeNode()
	oldURL := serve(t, oldLeader.service())
	newURL := serve(t, newLeader.service())

	var asked atomic.Int64
	follower := newFakeNode()
	follower.id = "n2"
	follower.isLeader = func() bool { return false }
	follower.leader = func(context.Context) (cluster.LeaderInfo, error) {
		addr := strings.TrimPrefix(oldURL, "http://")
		if asked.Add(1) > 1 {
			addr = strings.TrimPrefix(newURL, "http://")
		}
		return cluster.LeaderInfo{ID: "nX", HTTPAddr: addr, DialHTTP: addr}, nil
	}
	// The follower applies the write itself right away (its catalog moves
	// with the leader's), so its answer waits for nothing.
	follower.waitApplied = func(context.Context, uint64) error { return nil }
	url := serve(t, follower.service())
	status, hdr, body := call(t, "POST", url+"/workers", registration)
	if status != 201 || hdr.Get(api.HeaderServedBy) != "n1" || hdr.Get(api.HeaderApplied) != "" || asked.Load() != 2 {
		t.Fatalf("forwarded write = %d %v %s after asking %d times", status, hdr, body, asked.Load())
	}
	if w, ok := newLeader.Catalog().Worker(1); !ok || w.Endpoint != "http://w1" {
		t.Fatal("the new leader did not apply the write")
	}

	// On a node that leads when the request arrives but has lost the
	// leadership by the time it applies, the write is forwarded too.
	var leading atomic.Bool
	leading.Store(true)
	demoted := newFakeNode()
	demoted.id = "n2"
	demoted.isLeader = leading.Load
	demoted.apply = func(context.Context, fsm.Command) (*fsm.Result, error) {
		leading.Store(false)
		return nil, cluster.ErrNotLeader
	}
	demoted.leader = func(context.Context) (cluster.LeaderInfo, error) {
		addr := strings.TrimPrefix(newURL, "http://")
		return cluster.LeaderInfo{ID: "n1", HTTPAddr: addr, DialHTTP: addr}, nil
	}
	demoted.waitApplied = func(context.Context, uint64) error { return nil }
	status, _, body = call(t, "DELETE", serve(t, demoted.service())+"/workers/1", "")
	if status != 200 || !strings.Contains(body, `"worker_id":1`) {
		t.Fatalf("write after losing leadership = %d %s", status, body)
	}
}

// Test_ForwardedWriteIsReadOnTheFollower: a follower relays the leader's
// answer once it has applied the write itself, so the client reads its
// write on the node it wrote through; past the bounded wait it relays the
// answer anyway, marked X-Kvselect-Applied: false.
func Test_ForwardedWriteIsReadOnTheFollower(t *testing.T) {
	leader := newFakeNode()
	leaderURL := strings.TrimPrefix(serve(t, leader.service()), "http://")
	for _, tt := range []struct {
		name        string
		catchUp     bool
		wantApplied string
	}{
		{"the follower catches up within the wait", true, ""},
		{"the follower stays behind", false, "false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			follower := newFakeNode()
			follower.id = "n2"
			follower.isLeader = func() bool { return false }
			follower.leader = func(context.Context) (cluster.LeaderInfo, error) {
				return cluster.LeaderInfo{ID: "n1", HTTPAddr: leaderURL, DialHTTP: leaderURL}, nil
			}
			var waitedFor atomic.Uint64
			follower.waitApplied = func(ctx context.Context, idx uint64) error {
				waitedFor.Store(idx)
				if tt.catchUp {
					return nil
				}
				<-ctx.Done() // the bounded wait (CatalogWait) runs out
				return cluster.ErrCatalogBehind
			}
			status, hdr, body := call(t, "POST", serve(t, follower.service())+"/workers", registration)
			if status != 201 || hdr.Get(api.HeaderApplied) != tt.wantApplied ||
				fmt.Sprint(waitedFor.Load()) != hdr.Get(api.HeaderIndex) {
				t.Fatalf("= %d, applied %q, index %s (waited for %d): %s", status, hdr.Get(api.HeaderApplied),
					hdr.Get(api.HeaderIndex), waitedFor.Load(), body)
			}
		})
	}
}
