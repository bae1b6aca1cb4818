package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// Test_ProgressPace: nothing during the first interval, then a line at
// most every interval, with the time waited in whole seconds and why.
func Test_ProgressPace(t *testing.T) {
	var buf strings.Builder
	p := newProgress(&buf, "waiting for a leader")
	for _, ms := range []int{50, 150, 950, 1000, 1400, 1999, 2100, 2500, 3200} {
		p.tick(time.Duration(ms)*time.Millisecond, "no_leader")
	}
	want := "kvselectctl: waiting for a leader… (1s, no_leader)\n" +
		"kvselectctl: waiting for a leader… (2s, no_leader)\n" +
		"kvselectctl: waiting for a leader… (3s, no_leader)\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// fastProgress makes every wait report at once, for the rest of the test.
func fastProgress(t *testing.T) {
	old := progressEvery
	progressEvery = 0
	t.Cleanup(func() { progressEvery = old })
}

// Test_Progress checks that a command waiting for a leader says so on
// stderr while it waits, and that stdout holds only the result, --json
// included.
func Test_Progress(t *testing.T) {
	fastProgress(t)
	written := map[string]any{"worker_id": 7, "catalog_index": 12}
	follower := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Term: 3}
	elected := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Term: 4, Leader: api.LeaderRef{ID: "n2"}}
	tests := []struct {
		name       string
		args       []string
		setup      func(n *fakenode.Node)
		wantStdout string
		wantLines  *regexp.Regexp // every stderr line
		wantCount  int
	}{
		{name: "a write while no node knows the leader", args: []string{"workers", "add", "--json", `{"worker_id":7}`},
			setup: func(n *fakenode.Node) {
				n.Status("n1", api.StateFollower, "", "")
				n.Answers("POST /workers", fakenode.Error(api.CodeNoLeader, "x"), fakenode.Error(api.CodeNoLeader, "x"),
					fakenode.OK(http.StatusCreated, written))
			},
			wantStdout: "{\n  \"catalog_index\": 12,\n  \"worker_id\": 7\n}\n",
			wantLines:  regexp.MustCompile(`^kvselectctl: waiting for a leader… \(\d+s, no_leader\)$`), wantCount: 2},
		{name: "a step-down waiting for the next leader", args: []string{"--json", "cluster", "stepdown"},
			setup: func(n *fakenode.Node) {
				n.Answer("POST /cluster/stepdown", http.StatusOK, follower)
				n.Answers("GET /cluster/status", fakenode.OK(http.StatusOK, follower), fakenode.OK(http.StatusOK, elected))
			},
			wantStdout: `{
  "node_id": "n1",
  "cluster_id": "",
  "state": "follower",
  "term": 4,
  "leader": {
    "id": "n2",
    "http_addr": ""
  },
  "commit_index": 0,
  "applied_index": 0,
  "catalog_index": 0,
  "config_index": 0,
  "last_contact_ms": 0,
  "members": null
}
`,
			wantLines: regexp.MustCompile(`^kvselectctl: waiting for the new leader… \(\d+s\)$`), wantCount: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakenode.New(t)
			tt.setup(n)
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if code != exitOK || out != tt.wantStdout || len(lines) != tt.wantCount {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant stdout:\n%s\nand %d lines on stderr", code, out, errOut,
					tt.wantStdout, tt.wantCount)
			}
			for _, l := range lines {
				if !tt.wantLines.MatchString(l) {
					t.Fatalf("stderr line %q does not match %s", l, tt.wantLines)
				}
			}
		})
	}
}

// Test_NoProgressWhenQuick: a wait shorter than the interval prints
// nothing.
func Test_NoProgressWhenQuick(t *testing.T) {
	n := fakenode.New(t)
	n.Status("n1", api.StateFollower, "", "")
	n.Answers("DELETE /workers/7", fakenode.Error(api.CodeNoLeader, "x"), fakenode.OK(http.StatusOK, map[string]any{"worker_id": 7}))
	out, errOut, code := runCLI(t, "--addr", n.URL, "workers", "rm", "7")
	if code != exitOK || errOut != "" || out != "worker 7 removed\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
