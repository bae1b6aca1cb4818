package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// Test_StepDown checks what cluster stepdown prints: the leader before and
// after, once a node names the new one; or why it could not tell.
func Test_StepDown(t *testing.T) {
	members := []api.Member{{ID: "n1", RaftAddr: "r1", Suffrage: "Voter", Reachable: true},
		{ID: "n2", RaftAddr: "r2", HTTPAddr: "127.0.0.1:8002", Suffrage: "Voter", Reachable: true}}
	status := func(state, leader, leaderHTTP string) api.ClusterStatus {
		return api.ClusterStatus{NodeID: "n1", State: state, Term: 3, Leader: api.LeaderRef{ID: leader, HTTPAddr: leaderHTTP},
			CommitIndex: 9, AppliedIndex: 9, LastContactMs: 20, Members: members}
	}
	steppedDown := status(api.StateFollower, "", "")
	electing := status("candidate", "", "")
	elected := status(api.StateFollower, "n2", "127.0.0.1:8002")
	const electedTable = `
node n1  state follower  term 3  leader n2 (127.0.0.1:8002)  commit/applied 9/9  last contact 20ms ago
ID  RAFT  HTTP            SUFFRAGE  REACHABLE  LEADER
n1  r1    -               Voter     yes
n2  r2    127.0.0.1:8002  Voter     yes        *
`
	electedJSON, err := json.MarshalIndent(elected, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		flags      []string
		stepDown   http.HandlerFunc
		statuses   []http.HandlerFunc // GET /cluster/status, in turn; the last repeats
		wantCode   int
		wantStdout string
		wantStderr string // the start of stderr, on failure
		wantPolls  int    // -1: some
	}{
		{name: "the answer names the new leader", stepDown: fakenode.OK(http.StatusOK, elected),
			wantStdout: "leader before: n1\nleader after:  n2 (127.0.0.1:8002)\n" + electedTable},
		{name: "the leader that answered, from X-Kvselect-Served-By", stepDown: fakenode.OK(http.StatusOK,
			api.ClusterStatus{NodeID: "n3", Leader: api.LeaderRef{ID: "n2"}}, api.HeaderServedBy, "n1"),
			wantStdout: "leader before: n1\nleader after:  n2\n" +
				"\nnode n3  state   term 0  leader n2  commit/applied 0/0  last contact 0ms ago\nID  RAFT  HTTP  SUFFRAGE  REACHABLE  LEADER\n"},
		{name: "polls until a node names it", stepDown: fakenode.OK(http.StatusOK, steppedDown),
			statuses:   []http.HandlerFunc{fakenode.OK(http.StatusOK, electing), fakenode.Error(api.CodeNotReady, "x"), fakenode.OK(http.StatusOK, elected)},
			wantStdout: "leader before: n1\nleader after:  n2 (127.0.0.1:8002)\n" + electedTable, wantPolls: 3},
		{name: "--json: the status that names it", flags: []string{"--json"}, stepDown: fakenode.OK(http.StatusOK, steppedDown),
			statuses:   []http.HandlerFunc{fakenode.OK(http.StatusOK, electing), fakenode.OK(http.StatusOK, elected)},
			wantStdout: string(electedJSON) + "\n", wantPolls: 2},
		{name: "the old leader wins again", flags: []string{"--timeout", "300ms"}, stepDown: fakenode.OK(http.StatusOK, steppedDown),
			statuses: []http.HandlerFunc{fakenode.OK(http.StatusOK, status(api.StateLeader, "n1", ""))}, wantCode: exitError,
			wantStderr: "kvselectctl: n1 stepped down, but no new leader within 300ms: n1 says n1 leads again (term 3); " +
				"'kvselectctl cluster status' shows the cluster\n", wantPolls: -1},
		{name: "no leader within --timeout", flags: []string{"--timeout", "300ms"}, stepDown: fakenode.OK(http.StatusOK, steppedDown),
			statuses: []http.HandlerFunc{fakenode.OK(http.StatusOK, electing)}, wantCode: exitError,
			wantStderr: "kvselectctl: n1 stepped down, but no new leader within 300ms: n1 knows no leader yet (state candidate, term 3)",
			wantPolls:  -1},
		{name: "refused", stepDown: fakenode.Error(api.CodeConflict, "membership change rejected: no other voter to hand leadership to"),
			wantCode:   exitError,
			wantStderr: "kvselectctl: conflict: membership change rejected: no other voter to hand leadership to (HTTP 409)\n"},
		{name: "unknown outcome: not sent again, and said so", stepDown: fakenode.Error(api.CodeUnknownOutcome, "leadership transfer: timeout"),
			wantCode: exitError, wantStderr: "kvselectctl: unknown_outcome: leadership transfer: timeout (HTTP 503)\n" +
				"kvselectctl: the step-down may or may not have happened; 'kvselectctl cluster status' shows who leads now " +
				"(running the step-down again could move leadership twice)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakenode.New(t)
			n.Mux.HandleFunc("POST /cluster/stepdown", tt.stepDown)
			if tt.statuses != nil {
				n.Answers("GET /cluster/status", tt.statuses...)
			}
			out, errOut, code := runCLI(t, append(append([]string{"--addr", n.URL}, tt.flags...), "cluster", "stepdown")...)
			if code != tt.wantCode || out != tt.wantStdout || !strings.HasPrefix(errOut, tt.wantStderr) {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut,
					tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if got := len(n.Requests("POST /cluster/stepdown")); got != 1 {
				t.Fatalf("step-down sent %d times", got)
			}
			polls := len(n.Requests("GET /cluster/status"))
			if tt.wantPolls >= 0 && polls != tt.wantPolls || tt.wantPolls < 0 && polls < 2 {
				t.Fatalf("%d status polls, want %d", polls, tt.wantPolls)
			}
		})
	}
}
