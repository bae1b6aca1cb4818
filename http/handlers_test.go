package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
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

// step is one request of a scripted conversation with a service and the
// answer it must get.
type step struct {
	name, method, path, body string
	status                   int
	want                     string // the body, or for errors a part of it
}

// run sends the step to the service at url, fails the test on another
// answer and returns the answer's headers.
func (st step) run(t *testing.T, url string) http.Header {
	t.Helper()
	status, hdr, body := call(t, st.method, url+st.path, st.body)
	body = strings.TrimSpace(body)
	if status != st.status {
		t.Fatalf("%s: %s %s = %d %s, want %d", st.name, st.method, st.path, status, body, st.status)
	}
	if (status == 200 && body != st.want) || (status != 200 && !strings.Contains(body, st.want)) {
		t.Fatalf("%s: body %s\nwant %s", st.name, body, st.want)
	}
	return hdr
}

// Test_HandlerOutcomes injects, through fakes, the failures a real cluster
// produces only under faults, and checks each reaches the client with its
// code, status and Retry-After.
func Test_HandlerOutcomes(t *testing.T) {
	selectBody := `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`
	joinBody := `{"id":"n2","raft_addr":"127.0.0.1:7001"}`
	// A request a follower forwarded: the receiver answers it itself, so
	// its not_leader reaches the client (the follower then asks again).
	forwarded := []string{api.HeaderForwardedBy, "n2"}
	notLeader := fmt.Errorf("%w: leader is n3 at 127.0.0.1:7003", cluster.ErrNotLeader)
	// cluster.Node reports a read or write that lost the leadership midway
	// as not_leader (or no_leader when no successor is known yet), and a
	// write handed to raft before that as unknown_outcome.
	lostLeadership := fmt.Errorf("%w: leadership lost while verifying", cluster.ErrNotLeader)
	unknownOutcome := fmt.Errorf("%w: leadership lost", cluster.ErrUnknownOutcome)
	notFound := func(id string) error { return fmt.Errorf("%w: %q", scheduler.ErrReservationNotFound, id) }
	boom := errors.New("boom")
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
		{"selection behind the catalog it requires", func(f *fakeNode) {
			f.waitApplied = func(context.Context, uint64) error {
				return fmt.Errorf("%w: n1 has applied catalog_index 3, the request needs 9", cluster.ErrCatalogBehind)
			}
		}, "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16,"require_catalog":true}`,
			[]string{api.HeaderIndex, "9"}, 503, api.CodeCatalogBehind},
		{"catalog read behind its session index", func(f *fakeNode) {
			f.waitApplied = func(context.Context, uint64) error { return cluster.ErrCatalogBehind }
		}, "GET", "/workers", "", []string{api.HeaderIndex, "9"}, 503, api.CodeCatalogBehind},
		{"booking without a schedulable worker", func(f *fakeNode) {
			if _, err := f.log.Upsert(fsm.Worker{WorkerID: 1, ModelName: fsm.DefaultScope, TenantID: fsm.DefaultScope, DataParallelSize: 1}); err != nil {
				panic(err)
			}
			f.reserve = func(scheduler.ReserveRequest) (scheduler.Booking, error) {
				return scheduler.Booking{}, scheduler.ErrNotReady
			}
		}, "POST", "/reservations", `{"reservation_id":"r","worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, nil, 503, api.CodeNotReady},
		{"booking in a partition the catalog never held", func(f *fakeNode) {
			f.reserve = func(scheduler.ReserveRequest) (scheduler.Booking, error) {
				return scheduler.Booking{}, scheduler.ErrNotReady
			}
		}, "POST", "/reservations", `{"reservation_id":"r","worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, nil, 503, api.CodeUnknownPartition},
		{"a bug is a 500, not a crash", func(f *fakeNode) {
			f.sel = func(scheduler.SelectRequest) (scheduler.Selection, error) {
				return scheduler.Selection{}, fmt.Errorf("boom")
			}
		}, "POST", "/select", selectBody, nil, 500, api.CodeInternal},

		// linearizable catalog reads
		{"linearizable read without a leader", func(f *fakeNode) {
			f.linearizable = func(context.Context) (*fsm.Catalog, error) { return nil, cluster.ErrNoLeader }
		}, "GET", "/workers?consistency=linearizable", "", nil, 503, api.CodeNoLeader},
		{"linearizable read forwarded to a former leader", func(f *fakeNode) {
			f.linearizable = func(context.Context) (*fsm.Catalog, error) { return nil, notLeader }
		}, "GET", "/workers?consistency=linearizable", "", forwarded, 503, api.CodeNotLeader},
		{"linearizable read losing the leadership, forwarded", func(f *fakeNode) {
			f.linearizable = func(context.Context) (*fsm.Catalog, error) { return nil, lostLeadership }
		}, "GET", "/workers/1?consistency=linearizable", "", forwarded, 503, api.CodeNotLeader},
		{"linearizable read losing the leadership, no successor yet", func(f *fakeNode) {
			f.linearizable = func(context.Context) (*fsm.Catalog, error) { return nil, lostLeadership }
			f.leader = func(context.Context) (cluster.LeaderInfo, error) { return cluster.LeaderInfo{}, cluster.ErrNoLeader }
		}, "GET", "/workers?consistency=linearizable", "", nil, 503, api.CodeNoLeader},

		// membership changes
		{"join with an unknown outcome", func(f *fakeNode) {
			f.join = func(context.Context, api.JoinRequest) error { return unknownOutcome }
		}, "POST", "/cluster/join", joinBody, nil, 503, api.CodeUnknownOutcome},
		{"join forwarded to a former leader", func(f *fakeNode) {
			f.join = func(context.Context, api.JoinRequest) error { return notLeader }
		}, "POST", "/cluster/join", joinBody, forwarded, 503, api.CodeNotLeader},
		{"remove with an unknown outcome", func(f *fakeNode) {
			f.remove = func(context.Context, string) error { return unknownOutcome }
		}, "POST", "/cluster/remove", `{"id":"n2"}`, nil, 503, api.CodeUnknownOutcome},
		{"remove forwarded to a former leader", func(f *fakeNode) {
			f.remove = func(context.Context, string) error { return notLeader }
		}, "POST", "/cluster/remove", `{"id":"n2"}`, forwarded, 503, api.CodeNotLeader},
		{"step down with an unknown outcome", func(f *fakeNode) {
			f.stepDown = func(context.Context) error { return unknownOutcome }
		}, "POST", "/cluster/stepdown", "", nil, 503, api.CodeUnknownOutcome},
		{"step down forwarded to a former leader", func(f *fakeNode) {
			f.stepDown = func(context.Context) error { return notLeader }
		}, "POST", "/cluster/stepdown", "", forwarded, 503, api.CodeNotLeader},
		{"metadata without a leader", func(f *fakeNode) {
			f.setMetadata = func(context.Context, fsm.NodeMeta) error { return cluster.ErrNoLeader }
		}, "POST", "/cluster/metadata", `{"id":"n2","http_addr":"127.0.0.1:8002"}`, nil, 503, api.CodeNoLeader},

		// reservation lifecycle
		{"prefill_complete of an unknown reservation", func(f *fakeNode) {
			f.prefillComplete = notFound
		}, "POST", "/reservations/r1/prefill_complete", "", nil, 404, api.CodeNotFound},
		{"prefill_complete failing", func(f *fakeNode) {
			f.prefillComplete = func(string) error { return boom }
		}, "POST", "/reservations/r1/prefill_complete", "", nil, 500, api.CodeInternal},
		{"output_block of an unknown reservation", func(f *fakeNode) {
			f.outputBlock = func(id string, _ *float64) error { return notFound(id) }
		}, "POST", "/reservations/r1/output_block", `{"decay_fraction":0.5}`, nil, 404, api.CodeNotFound},
		{"output_block failing", func(f *fakeNode) {
			f.outputBlock = func(string, *float64) error { return boom }
		}, "POST", "/reservations/r1/output_block", "", nil, 500, api.CodeInternal},
		{"free of an unknown reservation", func(f *fakeNode) {
			f.free = notFound
		}, "DELETE", "/reservations/r1", "", nil, 404, api.CodeNotFound},
		{"free failing", func(f *fakeNode) {
			f.free = func(string) error { return boom }
		}, "DELETE", "/reservations/r1", "", nil, 500, api.CodeInternal},
		{"get an unknown reservation", func(f *fakeNode) {
			f.reservation = func(id string) (scheduler.ReservationInfo, error) { return scheduler.ReservationInfo{}, notFound(id) }
		}, "GET", "/reservations/r1", "", nil, 404, api.CodeNotFound},
		{"get a reservation failing", func(f *fakeNode) {
			f.reservation = func(string) (scheduler.ReservationInfo, error) { return scheduler.ReservationInfo{}, boom }
		}, "GET", "/reservations/r1", "", nil, 500, api.CodeInternal},
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
			// Every 503 invites a retry but unknown_partition, which no
			// retry mends.
			if (status == 503 && tt.code != api.CodeUnknownPartition) != (hdr.Get("Retry-After") != "") {
				t.Fatalf("Retry-After %q on a %d %s", hdr.Get("Retry-After"), status, tt.code)
			}
		})
	}
}

// Test_CatalogWriteFailures: policy and busy threshold writes fail like
// worker writes when the cluster cannot take them.
func Test_CatalogWriteFailures(t *testing.T) {
	writes := []struct{ method, path, body string }{
		{"PUT", "/policies?model_name=m", `{"model_name":"m","policy":"random"}`},
		{"DELETE", "/policies?model_name=m", ""},
		{"POST", "/busy_threshold?model=m", `{"model":"m","active_prefill_tokens_threshold":1}`},
		{"DELETE", "/busy_threshold?model=m", ""},
	}
	for _, tt := range []struct {
		err  error
		code api.Code
	}{
		{cluster.ErrNoLeader, api.CodeNoLeader},
		{fmt.Errorf("%w: leadership lost", cluster.ErrUnknownOutcome), api.CodeUnknownOutcome},
	} {
		f := newFakeNode()
		f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, tt.err }
		url := serve(t, f.service())
		for _, w := range writes {
			status, hdr, body := call(t, w.method, url+w.path, w.body)
			if status != 503 || !strings.Contains(body, string(tt.code)) || hdr.Get("Retry-After") == "" {
				t.Fatalf("%s %s with %v: %d %s", w.method, w.path, tt.err, status, body)
			}
		}
	}
}

// Test_PrefillCompleteBody: prefill_complete takes no body fields. No body
// or {} completes the prefill; a field is refused, naming it, before the
// reservation is touched.
func Test_PrefillCompleteBody(t *testing.T) {
	tests := []struct {
		body   string
		status int
		prefix string // of the error message
	}{
		{"", 200, ""},
		{"{}", 200, ""},
		{" { } ", 200, ""},
		{`{"x":1}`, 400, `{"error":"x: unknown field`},
		{`{"decay_fraction":0.5}`, 400, `{"error":"decay_fraction: unknown field`},
		{`null`, 400, `{"error":"request body must be a JSON object"`},
		{`{} {}`, 400, `{"error":"unexpected data after the JSON object"`},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var completed []string
			f := newFakeNode()
			f.prefillComplete = func(id string) error {
				completed = append(completed, id)
				return nil
			}
			status, _, body := call(t, "POST", serve(t, f.service())+"/reservations/r1/prefill_complete", tt.body)
			if status != tt.status || !strings.HasPrefix(body, tt.prefix) {
				t.Fatalf("body %q = %d %s, want %d %s...", tt.body, status, body, tt.status, tt.prefix)
			}
			if want := status == 200; want != (len(completed) == 1 && completed[0] == "r1") {
				t.Fatalf("body %q = %d, completed %v", tt.body, status, completed)
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

// Test_ForwardedWriteAnnouncesCommit: the leader answering a write a
// follower forwarded has the commit announced at once, so the follower,
// which answers only once it has applied the write, need not wait for
// Raft's next append. Reads, failed writes and writes sent to the leader
// directly announce nothing.
func Test_ForwardedWriteAnnouncesCommit(t *testing.T) {
	forwarded := []string{api.HeaderForwardedBy, "n2"}
	for _, tt := range []struct {
		name         string
		method, path string
		body         string
		headers      []string
		fail         bool
		want         int64
	}{
		{"forwarded register", "POST", "/workers", registration, forwarded, false, 1},
		{"forwarded delete", "DELETE", "/workers/1", "", forwarded, false, 1},
		{"write sent to the leader", "POST", "/workers", registration, nil, false, 0},
		{"forwarded write that failed", "POST", "/workers", registration, forwarded, true, 0},
		{"forwarded linearizable read", "GET", "/workers?consistency=linearizable", "", forwarded, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			if tt.fail {
				f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, cluster.ErrNoLeader }
			}
			url := serve(t, f.service())
			if tt.path == "/workers/1" { // something to delete, written to the leader directly
				if status, _, body := call(t, "POST", url+"/workers", registration); status != 201 {
					t.Fatalf("register: %d %s", status, body)
				}
			}
			status, hdr, body := call(t, tt.method, url+tt.path, tt.body, tt.headers...)
			if (status < 300) == tt.fail {
				t.Fatalf("%s %s = %d %s", tt.method, tt.path, status, body)
			}
			if got := f.announced.Load(); got != tt.want {
				t.Fatalf("%d announcements, want %d", got, tt.want)
			}
			if at := strconv.FormatUint(f.announcedAt.Load(), 10); tt.want > 0 && at != hdr.Get(api.HeaderIndex) {
				t.Fatalf("announced index %s, the answer carries %s", at, hdr.Get(api.HeaderIndex))
			}
		})
	}
}

// Test_ReadyTurns503WhenRemoved: a node with schedulable workers is ready
// until it is removed from the cluster; from then on /ready answers 503
// with ready false while the node shuts down.
func Test_ReadyTurns503WhenRemoved(t *testing.T) {
	f := newFakeNode()
	f.removed = make(chan struct{})
	if _, err := f.log.Apply(fsm.UpsertWorker{Worker: fsm.Worker{WorkerID: 1, ModelName: "m", Endpoint: "http://w1",
		BlockSize: 16, DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: "tcp://h:1"}}}); err != nil {
		t.Fatal(err)
	}
	url := serve(t, f.service())
	ready := func() (int, api.Ready) {
		status, _, body := call(t, "GET", url+"/ready", "")
		var r api.Ready
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%d %s: %v", status, body, err)
		}
		return status, r
	}
	if status, r := ready(); status != 200 || !r.Ready || r.SchedulableWorkers != 1 {
		t.Fatalf("before the removal: %d %+v", status, r)
	}
	close(f.removed)
	if status, r := ready(); status != 503 || r.Ready || r.SchedulableWorkers != 1 {
		t.Fatalf("after the removal: %d %+v", status, r)
	}
}

// Test_SelectionBehindTheCatalog: a node that has not reached the index a
// selection asks for answers from its own catalog, with the index it has in
// X-Kvselect-Catalog-Behind (SPEC §3.1), on every route that selects or
// books; it waits for the index only while it knows a leader, since
// without one no entry can arrive; require_catalog keeps the 503.
func Test_SelectionBehindTheCatalog(t *testing.T) {
	bodies := map[string]string{
		"/select":             `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16%s}`,
		"/select_and_reserve": `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16%s}`,
		"/potential_loads":    `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16%s}`,
		"/overlap_scores":     `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16%s}`,
		"/reservations":       `{"reservation_id":"r","worker_id":1,"sequence_hashes":[1],"isl_tokens":16%s}`,
	}
	for _, leader := range []bool{true, false} {
		for path, body := range bodies {
			t.Run(fmt.Sprintf("%s leader=%v", path, leader), func(t *testing.T) {
				f := newFakeNode()
				f.hasLeader = func() bool { return leader }
				var waited atomic.Bool
				f.waitApplied = func(ctx context.Context, idx uint64) error {
					if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
						<-ctx.Done()
						waited.Store(ctx.Err() == context.DeadlineExceeded && leader)
					}
					return fmt.Errorf("%w: fake", cluster.ErrCatalogBehind)
				}
				url := serve(t, f.service())
				status, hdr, raw := call(t, "POST", url+path, fmt.Sprintf(body, `,"min_catalog_index":9`))
				if status/100 != 2 || hdr.Get(api.HeaderCatalogBehind) != fmt.Sprint(f.Catalog().Index()) {
					t.Fatalf("= %d, %s %q: %s", status, api.HeaderCatalogBehind, hdr.Get(api.HeaderCatalogBehind), raw)
				}
				if leader != waited.Load() {
					t.Fatalf("waited for the index: %v, with a leader known: %v", waited.Load(), leader)
				}
				status, hdr, raw = call(t, "POST", url+path, fmt.Sprintf(body, `,"min_catalog_index":9,"require_catalog":true`))
				if status != 503 || hdr.Get(api.HeaderCatalogBehind) != "" || !strings.Contains(string(raw), "catalog_behind") {
					t.Fatalf("with require_catalog = %d %s", status, raw)
				}
			})
		}
	}
}

// Test_ReplicaSyncDisabled: a node without replica sync answers Dynamo's
// peers list as an empty array with 200 (Dynamo's clients read it as is),
// its status as disabled, and refuses peer changes with 409 (SPEC §3.6).
func Test_ReplicaSyncDisabled(t *testing.T) {
	url := serve(t, newFakeNode().service())
	for _, tt := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/replica_sync/peers", "", 200, "[]\n"},
		{"GET", "/replica_sync/status", "", 200, `{"enabled":false,"peers":[]}` + "\n"},
		{"POST", "/replica_sync/register_peer", `{"endpoint":"tcp://127.0.0.1:1"}`, 409, `"code":"conflict"`},
		{"POST", "/replica_sync/deregister_peer", `{"endpoint":"tcp://127.0.0.1:1"}`, 409, `"code":"conflict"`},
	} {
		status, _, body := call(t, tt.method, url+tt.path, tt.body)
		if status != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, status, body, tt.status, tt.want)
		}
	}
}
