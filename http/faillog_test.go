package http

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/testlog"
)

// Test_FailureLogAdmits: per code, the first failure is a warning, its
// repeats within the window are not, and the first one after the window
// is again, carrying how many were left out; internal errors always are.
func Test_FailureLogAdmits(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := &failureLog{now: func() time.Time { return now }}
	steps := []struct {
		advance    time.Duration
		code       api.Code
		warn       bool
		suppressed int
	}{
		{0, api.CodeNoLeader, true, 0},
		{time.Second, api.CodeNoLeader, false, 0},
		{time.Second, api.CodeUnknownOutcome, true, 0}, // another code has its own window
		{0, api.CodeInternal, true, 0},                 // never held back
		{0, api.CodeInternal, true, 0},
		{10 * time.Second, api.CodeNoLeader, false, 0},
		{failureLogWindow, api.CodeNoLeader, true, 2},
		{time.Second, api.CodeNoLeader, false, 0},
		{failureLogWindow, api.CodeNoLeader, true, 1},
		{failureLogWindow, api.CodeNoLeader, true, 0},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if warn, n, _ := l.admit(s.code); warn != s.warn || n != s.suppressed {
			t.Fatalf("step %d (%s): warn %v, suppressed %d; want %v, %d", i, s.code, warn, n, s.warn, s.suppressed)
		}
	}
}

// Test_RepeatedFailuresLogOneWarning: a node without a leader that fails
// every write logs one warning for the lot, not one per request.
func Test_RepeatedFailuresLogOneWarning(t *testing.T) {
	f := newFakeNode()
	f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, cluster.ErrNoLeader }
	var logs testlog.Buffer
	url := serve(t, f.service(func(c *Config) {
		c.Logger = logs.Logger(slog.LevelInfo)
	}))
	const requests = 25
	for range requests {
		if status, _, body := call(t, "DELETE", url+"/workers/1", ""); status != 503 {
			t.Fatalf("DELETE /workers/1: %d %s", status, body)
		}
	}
	got := logs.String()
	if n := strings.Count(got, `level=WARN msg="request failed"`); n != 1 || !strings.Contains(got, "code=no_leader") {
		t.Fatalf("%d requests failing alike logged %d warnings, want 1 naming the code:\n%s", requests, n, got)
	}
}

// Test_FailureLogReportsEndedWindows: the repeats of a code that went to
// DEBUG are reported once its window is over even if that code never
// fails again: by the next failure of another code, or when the service
// closes. They used to be reported only by a later failure of the same
// code, and were lost when none came (a leader back for good).
func Test_FailureLogReportsEndedWindows(t *testing.T) {
	f := newFakeNode()
	var failWith atomic.Pointer[error]
	f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, *failWith.Load() }
	var logs testlog.Buffer
	svc := f.service(func(c *Config) {
		c.Logger = logs.Logger(slog.LevelInfo)
	})
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	svc.failures.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	url := serve(t, svc)
	fail := func(err error, times int) {
		t.Helper()
		failWith.Store(&err)
		for range times {
			if status, _, body := call(t, "DELETE", url+"/workers/1", ""); status != 503 {
				t.Fatalf("DELETE /workers/1: %d %s", status, body)
			}
		}
	}
	summary := func(code api.Code, n int) string {
		return fmt.Sprintf(`msg="request failures repeated at DEBUG since the last warning with this code" component=http code=%s repeats_at_debug=%d`, code, n)
	}

	fail(cluster.ErrNoLeader, 4) // a WARN, 3 repeats at DEBUG
	advance(failureLogWindow)
	fail(cluster.ErrUnknownOutcome, 3) // its WARN reports no_leader's 3 first; 2 repeats at DEBUG
	if got := logs.String(); !strings.Contains(got, summary(api.CodeNoLeader, 3)) {
		t.Fatalf("a failure with another code after no_leader's window does not report its 3 repeats:\n%s", got)
	}
	svc.Close()
	got := logs.String()
	if !strings.Contains(got, summary(api.CodeUnknownOutcome, 2)) {
		t.Fatalf("closing the service does not report unknown_outcome's 2 repeats:\n%s", got)
	}
	if n := strings.Count(got, "repeats_at_debug="); n != 2 {
		t.Fatalf("%d reports of repeats, want 2 (each count once):\n%s", n, got)
	}
}
