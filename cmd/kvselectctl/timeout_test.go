package main

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// deadlines records the context deadline of every request the CLI sends.
type deadlines struct {
	mu  sync.Mutex
	got []time.Time // zero: none
}

func (d *deadlines) RoundTrip(r *http.Request) (*http.Response, error) {
	dl, _ := r.Context().Deadline()
	d.mu.Lock()
	d.got = append(d.got, dl)
	d.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func recordDeadlines(t *testing.T) *deadlines {
	d := &deadlines{}
	old := transport
	transport = d
	t.Cleanup(func() { transport = old })
	return d
}

// Test_TimeoutBoundsTheWholeCommand: --timeout is one deadline for the
// whole command. Every request, the retries of a write while no node
// knows a leader included, carries the same deadline (a per-request
// timeout let a 6 s --timeout run 10 s: an attempt started just before
// it ran its full length). A node that never answers ends the command at
// --timeout with an error that says so.
func Test_TimeoutBoundsTheWholeCommand(t *testing.T) {
	n := fakenode.New(t)
	n.Status("n1", api.StateFollower, "", "")
	n.Answer("POST /workers", http.StatusServiceUnavailable, apiErr("no_leader", "no leader"))
	n.Mux.HandleFunc("GET /loads", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }) // never answers
	var deletes sync.Mutex
	deleted := 0
	n.Mux.HandleFunc("DELETE /workers/5", func(w http.ResponseWriter, r *http.Request) {
		deletes.Lock()
		deleted++
		first := deleted == 1
		deletes.Unlock()
		if first {
			fakenode.WriteJSON(w, http.StatusServiceUnavailable, api.Error{Message: "no leader", Code: api.CodeNoLeader})
			return
		}
		<-r.Context().Done() // a node holding the retry for an election, past --timeout
	})
	tests := []struct {
		name         string
		args         []string
		wantStderr   *regexp.Regexp
		wantRequests int // at least
	}{
		{name: "a write retried while there is no leader", args: []string{"--timeout", "400ms", "workers", "add", `{"worker_id":7}`},
			// Between attempts at the deadline, the last answer; during one, the deadline and the answer before.
			wantStderr: regexp.MustCompile(`^kvselectctl: (no_leader: no leader \(HTTP 503\)|` +
				`no answer within --timeout 400ms: context deadline exceeded \(the answer before: POST \S+/workers: no_leader: no leader \(HTTP 503\)\))\n$`),
			wantRequests: 3},
		{name: "a retry still held by the node at the deadline", args: []string{"--timeout", "300ms", "workers", "rm", "5"},
			wantStderr: regexp.MustCompile(`^kvselectctl: no answer within --timeout 300ms: context deadline exceeded ` +
				`\(the answer before: DELETE \S+/workers/5: no_leader: no leader \(HTTP 503\)\)\n$`), wantRequests: 2},
		{name: "a node that never answers", args: []string{"--timeout", "200ms", "loads"},
			wantStderr: regexp.MustCompile(`^kvselectctl: no answer within --timeout 200ms: `), wantRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := recordDeadlines(t)
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if code != exitError || out != "" || !tt.wantStderr.MatchString(errOut) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and stderr matching %s", code, out, errOut, tt.wantStderr)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if len(d.got) < tt.wantRequests {
				t.Fatalf("%d requests, want at least %d", len(d.got), tt.wantRequests)
			}
			for i, dl := range d.got {
				if dl.IsZero() || !dl.Equal(d.got[0]) {
					t.Fatalf("request %d of %d has deadline %v, the first had %v: want one deadline for the command",
						i+1, len(d.got), dl, d.got[0])
				}
			}
		})
	}
}

// Test_StepDownWaitWithinTimeout: a step-down's wait for the next leader
// ends at the command's deadline, not --timeout after the step-down
// answered.
func Test_StepDownWaitWithinTimeout(t *testing.T) {
	n := fakenode.New(t)
	old := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Term: 3, Leader: api.LeaderRef{ID: "n1"}}
	n.Answer("POST /cluster/stepdown", http.StatusOK, old)
	n.Answer("GET /cluster/status", http.StatusOK, old) // n1 leads again, forever
	d := recordDeadlines(t)
	_, errOut, code := runCLI(t, "--addr", n.URL, "--timeout", "300ms", "cluster", "stepdown")
	if code != exitError || !strings.Contains(errOut, "n1 stepped down, but no new leader within 300ms") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, dl := range d.got {
		if !dl.Equal(d.got[0]) {
			t.Fatalf("request %d has deadline %v, the step-down had %v", i+1, dl, d.got[0])
		}
	}
}
