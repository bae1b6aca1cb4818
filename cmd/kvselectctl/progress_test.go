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

// fastProgress makes every wait report at once, for the rest of the test,
// on a clock that never ticks: the lines come from the waits alone.
func fastProgress(t *testing.T) {
	old := progressEvery
	progressEvery = 0
	t.Cleanup(func() { progressEvery = old })
	useClock(t, newFakeClock())
}

func useClock(t *testing.T, c clock) {
	old := progressClock
	progressClock = c
	t.Cleanup(func() { progressClock = old })
}

// fakeClock is a clock the test moves: advance moves it on and delivers
// one tick to the ticker.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	ticks   chan time.Time
	started chan struct{} // closed when the ticker is asked for
	stopped chan struct{} // closed when the ticker is stopped
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ticks: make(chan time.Time), started: make(chan struct{}),
		stopped: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Ticker(time.Duration) (<-chan time.Time, func()) {
	close(c.started)
	return c.ticks, func() { close(c.stopped) }
}

// advance moves the clock by d and ticks (the ticker's goroutine takes
// the tick before advance returns).
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	c.ticks <- now
}

// lineWriter is a stderr that the ticker's goroutine and the test share:
// each complete line is also sent on lines.
type lineWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, l := range strings.SplitAfter(string(p), "\n") {
		if strings.HasSuffix(l, "\n") {
			w.lines <- strings.TrimSuffix(l, "\n")
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Test_ProgressWhileAnAttemptHangs: once a write has met no_leader, a
// line comes every second even while the next attempt is held by the
// node (as a node holds a write for its --leader-wait, 5 s by default):
// the clock's ticks drive the lines, not the attempts.
func Test_ProgressWhileAnAttemptHangs(t *testing.T) {
	clk := newFakeClock()
	useClock(t, clk)
	n := fakenode.New(t)
	n.Status("n1", api.StateFollower, "", "")
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the node closes, should the test fail
	attempts := 0
	var attemptsMu sync.Mutex
	n.Mux.HandleFunc("POST /workers", func(w http.ResponseWriter, r *http.Request) {
		attemptsMu.Lock()
		attempts++
		first := attempts == 1
		attemptsMu.Unlock()
		if first {
			fakenode.WriteJSON(w, http.StatusServiceUnavailable, api.Error{Message: "no leader", Code: api.CodeNoLeader})
			return
		}
		select { // the second attempt waits for the test
		case <-release:
		case <-r.Context().Done():
			return
		}
		fakenode.WriteJSON(w, http.StatusCreated, map[string]any{"worker_id": 7, "catalog_index": 12})
	})
	stderr := &lineWriter{lines: make(chan string, 16)}
	var stdout strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--addr", n.URL, "--timeout", "1h", "workers", "add", `{"worker_id":7}`}, &stdout, stderr)
	}()
	select {
	case <-clk.started: // the first no_leader has been reported
	case c := <-code:
		t.Fatalf("exit %d without a ticker; stderr:\n%s", c, stderr.String())
	case <-time.After(time.Minute): // a bound, should the ticker never start
		t.Fatalf("no ticker after the first no_leader; stderr:\n%s", stderr.String())
	}
	want := []string{"1s, no_leader", "2s, no_leader", "3s, no_leader"}
	for _, w := range want {
		clk.advance(time.Second)
		select {
		case l := <-stderr.lines:
			if l != "kvselectctl: waiting for a leader… ("+w+")" {
				t.Fatalf("stderr line %q, want (%s)", l, w)
			}
		case c := <-code:
			t.Fatalf("exit %d before the attempt was released; stderr:\n%s", c, stderr.String())
		}
	}
	releaseOnce.Do(func() { close(release) })
	if c := <-code; c != exitOK || !strings.Contains(stdout.String(), "worker 7 stored") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", c, stdout.String(), stderr.String())
	}
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

// Test_StepDownStopsTheLeaderWaitLine: a step-down retried while no node
// knew a leader started the "waiting for a leader" ticker; once the
// step-down has answered, the ticker is gone before the wait for the next
// leader begins (that wait has its own line), so the two never interleave.
func Test_StepDownStopsTheLeaderWaitLine(t *testing.T) {
	clk := newFakeClock()
	useClock(t, clk)
	n := fakenode.New(t)
	follower := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Term: 3, Leader: api.LeaderRef{ID: "n1"}}
	elected := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Term: 4, Leader: api.LeaderRef{ID: "n2"}}
	n.Answers("POST /cluster/stepdown", fakenode.Error(api.CodeNoLeader, "x"), fakenode.OK(http.StatusOK, follower))
	var polledOnce sync.Once
	polled, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	n.Mux.HandleFunc("GET /cluster/status", func(w http.ResponseWriter, r *http.Request) {
		if len(n.Requests("POST /cluster/stepdown")) < 2 { // the client looking for the leader after no_leader
			fakenode.WriteJSON(w, http.StatusOK, api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Term: 3})
			return
		}
		polledOnce.Do(func() { close(polled) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fakenode.WriteJSON(w, http.StatusOK, elected)
	})
	var stdout, stderr strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--addr", n.URL, "--timeout", "1h", "cluster", "stepdown"}, &stdout, &stderr)
	}()
	select {
	case <-polled: // the step-down has answered; the wait for the next leader polls
	case c := <-code:
		t.Fatalf("exit %d before polling; stderr:\n%s", c, stderr.String())
	}
	select {
	case <-clk.started:
	default:
		t.Fatal("the no_leader retry started no ticker")
	}
	select {
	case <-clk.stopped:
	default:
		t.Fatal("the leader-wait ticker still runs while the step-down waits for the next leader")
	}
	releaseOnce.Do(func() { close(release) })
	if c := <-code; c != exitOK || !strings.Contains(stdout.String(), "leader after:  n2") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", c, stdout.String(), stderr.String())
	}
}
