package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const workerBody = `{"worker_id":7,"endpoint":"http://w7:8000","block_size":16}`

// Test_LeaderFollowing checks where a write lands, given what
// /cluster/status says and which nodes are up.
func Test_LeaderFollowing(t *testing.T) {
	tests := []struct {
		name string
		// setup wires nodes a and b; it returns --addr.
		setup func(t *testing.T, a, b *fakeNode) string
		// writeTo is the node expected to receive the write; other the one
		// that must not.
		writeTo, other string
		query          string // expected query of the write on writeTo
		wantOut        string
	}{
		{
			name: "status names the leader's address: write goes to it",
			setup: func(t *testing.T, a, b *fakeNode) string {
				a.status("a", "follower", "b", b.host())
				b.answer("POST /workers", http.StatusCreated, storedWorker, headerIndex, "12", headerServed, "b")
				return a.URL
			},
			writeTo: "b", other: "a", wantOut: "worker 7 stored: schedulable\napplied at index 12 by b\n",
		},
		{
			name: "leader address unknown: redirect=true to the follower, 307 followed",
			setup: func(t *testing.T, a, b *fakeNode) string {
				a.status("a", "follower", "b", "")
				a.mux.HandleFunc("POST /workers", func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Query().Get("redirect") != "true" {
						writeTestJSON(w, http.StatusServiceUnavailable, apiErr("not_leader", "forwarding not expected"))
						return
					}
					http.Redirect(w, r, b.URL+"/workers", http.StatusTemporaryRedirect)
				})
				b.answer("POST /workers", http.StatusCreated, storedWorker, headerIndex, "12", headerServed, "b")
				return a.URL
			},
			writeTo: "b", wantOut: "worker 7 stored: schedulable\napplied at index 12 by b\n",
		},
		{
			name: "the node reached leads: no redirect asked",
			setup: func(t *testing.T, a, b *fakeNode) string {
				a.status("a", "leader", "a", a.host())
				a.answer("POST /workers", http.StatusCreated, storedWorker, headerIndex, "12")
				return a.URL
			},
			writeTo: "a", other: "b", wantOut: "worker 7 stored: schedulable\napplied at index 12\n",
		},
		{
			name: "first address down: the next one is asked",
			setup: func(t *testing.T, a, b *fakeNode) string {
				b.status("b", "leader", "b", b.host())
				b.answer("POST /workers", http.StatusCreated, storedWorker, headerIndex, "12", headerServed, "b")
				return deadAddr(t) + "," + b.URL
			},
			writeTo: "b", other: "a", wantOut: "worker 7 stored: schedulable\napplied at index 12 by b\n",
		},
		{
			name: "leader's address unreachable: the node reached forwards",
			setup: func(t *testing.T, a, b *fakeNode) string {
				a.status("a", "follower", "c", deadAddr(t))
				a.answer("POST /workers", http.StatusCreated, storedWorker, headerIndex, "12", headerServed, "c")
				return a.URL
			},
			writeTo: "a", other: "b", wantOut: "worker 7 stored: schedulable\napplied at index 12 by c\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := map[string]*fakeNode{"a": newFakeNode(t), "b": newFakeNode(t)}
			addr := tt.setup(t, nodes["a"], nodes["b"])
			out, errOut, code := runCLI(t, "--addr", addr, "--token-file", tokenFile(t, "s3cret"), "workers", "add", workerBody)
			if code != exitOK || out != tt.wantOut {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0, %q", code, out, errOut, tt.wantOut)
			}
			got := nodes[tt.writeTo].requests("POST /workers")
			last := got[len(got)-1]
			if last.body != workerBody || last.auth != "Bearer s3cret" || last.contentType != "application/json" {
				t.Fatalf("write on %s: %+v", tt.writeTo, last)
			}
			if tt.other != "" && len(nodes[tt.other].requests("POST /workers")) != 0 {
				t.Fatalf("node %s got the write too", tt.other)
			}
		})
	}
}

// Test_RedirectChain checks that 307s are followed with the method, body
// and token, at most maxRedirects times.
func Test_RedirectChain(t *testing.T) {
	tests := []struct {
		name     string
		hops     int
		wantCode int
		wantErr  string
	}{
		{name: "one hop", hops: 1, wantCode: exitOK},
		{name: "five hops", hops: maxRedirects, wantCode: exitOK},
		{name: "six hops", hops: maxRedirects + 1, wantCode: exitError, wantErr: "stopped after 5 redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.status("a", "follower", "", "")
			n.mux.HandleFunc("PATCH /workers/{id}", func(w http.ResponseWriter, r *http.Request) {
				hop := len(n.requests("PATCH /workers/7"))
				if hop <= tt.hops {
					// A relative Location, as a proxy might send.
					http.Redirect(w, r, "/workers/7?hop="+string(rune('0'+hop)), http.StatusTemporaryRedirect)
					return
				}
				writeTestJSON(w, http.StatusOK, storedWorker)
			})
			_, errOut, code := runCLI(t, "--addr", n.URL, "--token-file", tokenFile(t, "tok"), "workers", "patch", "7", `{"endpoint":"x"}`)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errOut, tt.wantCode, tt.wantErr)
			}
			for _, g := range n.requests("PATCH /workers/7") {
				if g.body != `{"endpoint":"x"}` || g.auth != "Bearer tok" {
					t.Fatalf("hop lost the body or token: %+v", g)
				}
			}
			if got := n.requests("PATCH /workers/7")[0].query; got != "redirect=true" {
				t.Fatalf("first PATCH query %q, want redirect=true", got)
			}
		})
	}
}

// Test_LeaderRetry checks retries on not_leader and no_leader, and none
// on unknown_outcome or other errors.
func Test_LeaderRetry(t *testing.T) {
	notLeader := apiErr("not_leader", "node a is not the leader")
	noLeader := apiErr("no_leader", "no leader")
	tests := []struct {
		name      string
		answers   []map[string]string // answers before the success; nil: success
		timeout   time.Duration
		wantTries int
		wantCode  string // "" for success
	}{
		{name: "success at once", wantTries: 1},
		{name: "not_leader then success", answers: []map[string]string{notLeader}, wantTries: 2},
		{name: "no_leader twice then success", answers: []map[string]string{noLeader, noLeader}, wantTries: 3},
		{name: "unknown_outcome is not retried", answers: []map[string]string{apiErr("unknown_outcome", "leader lost")},
			wantTries: 1, wantCode: "unknown_outcome"},
		{name: "conflict is not retried", answers: []map[string]string{apiErr("conflict", "no")}, wantTries: 1, wantCode: "conflict"},
		{name: "gives up at the timeout", answers: repeat(notLeader, 1000), timeout: 200 * time.Millisecond, wantCode: "not_leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.status("a", "leader", "a", "")
			var tries atomic.Int64
			n.mux.HandleFunc("DELETE /workers/7", func(w http.ResponseWriter, _ *http.Request) {
				i := int(tries.Add(1)) - 1
				if i < len(tt.answers) {
					status := http.StatusServiceUnavailable
					if tt.answers[i]["code"] == "conflict" {
						status = http.StatusConflict
					}
					writeTestJSON(w, status, tt.answers[i])
					return
				}
				writeTestJSON(w, http.StatusOK, storedWorker)
			})
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			c, err := newClient(n.URL, "", timeout)
			if err != nil {
				t.Fatal(err)
			}
			c.backoff = time.Microsecond
			_, err = c.viaLeader(context.Background(), request{method: http.MethodDelete, path: "/workers/7"}, true)
			var api *apiError
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantCode != "" && (!errors.As(err, &api) || api.code != tt.wantCode):
				t.Fatalf("error %v, want code %s", err, tt.wantCode)
			}
			if tt.wantTries > 0 && int(tries.Load()) != tt.wantTries {
				t.Fatalf("%d tries, want %d", tries.Load(), tt.wantTries)
			}
		})
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Test_ReadsFirstReachable checks that reads skip dead addresses and never
// ask for the leader.
func Test_ReadsFirstReachable(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	for _, n := range []*fakeNode{a, b} {
		n.answer("GET /loads", http.StatusOK, []any{})
	}
	_, errOut, code := runCLI(t, "--addr", strings.Join([]string{deadAddr(t), a.host(), b.URL}, ","), "loads")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if len(a.requests("GET /loads")) != 1 || len(b.got) != 0 || len(a.requests("GET /cluster/status")) != 0 {
		t.Fatalf("a got %+v, b got %+v", a.got, b.got)
	}
}

// Test_LinearizableList checks that a linearizable list goes to the
// leader with consistency=linearizable.
func Test_LinearizableList(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	a.status("a", "follower", "b", b.host())
	b.answer("GET /workers", http.StatusOK, []any{})
	_, errOut, code := runCLI(t, "--addr", a.URL, "workers", "list", "--linearizable", "--model", "llama")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := b.requests("GET /workers")
	if len(got) != 1 || got[0].query != "consistency=linearizable&model_name=llama" || len(a.requests("GET /workers")) != 0 {
		t.Fatalf("b got %+v; a got %+v", got, a.got)
	}
}

func Test_ParseAddrs(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "127.0.0.1:8092", want: "http://127.0.0.1:8092"},
		{in: " n1:1, http://n2:2/ ,https://n3", want: "http://n1:1 http://n2:2 https://n3"},
		{in: "", wantErr: true},
		{in: " , ", wantErr: true},
		{in: "http://", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseAddrs(tt.in)
		if (err != nil) != tt.wantErr || strings.Join(got, " ") != tt.want {
			t.Errorf("parseAddrs(%q) = %q, %v", tt.in, got, err)
		}
	}
}
