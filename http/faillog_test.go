package http

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
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
		if warn, n := l.admit(s.code); warn != s.warn || n != s.suppressed {
			t.Fatalf("step %d (%s): warn %v, suppressed %d; want %v, %d", i, s.code, warn, n, s.warn, s.suppressed)
		}
	}
}

// Test_RepeatedFailuresLogOneWarning: a node without a leader that fails
// every write logs one warning for the lot, not one per request.
func Test_RepeatedFailuresLogOneWarning(t *testing.T) {
	f := newFakeNode()
	f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, cluster.ErrNoLeader }
	var logs syncBuffer
	url := serve(t, f.service(func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
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
