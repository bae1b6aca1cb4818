package backoff

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Test_LoopRun drives the loop through scripted sessions and checks the
// calls it makes, the backoff reset and the log levels.
func Test_LoopRun(t *testing.T) {
	errDown := errors.New("down")
	tests := []struct {
		name     string
		received []bool // one per session; the loop stops after the last
		want     []string
		warns    int // failure lines at warn level
	}{
		{"one failure", []bool{false}, []string{"connecting", "session", "failed: down"}, 1},
		{"failures in a row warn once", []bool{false, false, false},
			[]string{"connecting", "session", "failed: down", "connecting", "session", "failed: down", "connecting", "session", "failed: down"}, 1},
		{"a session that received resets the backoff", []bool{false, true, false},
			[]string{"connecting", "session", "failed: down", "connecting", "session", "failed: down", "connecting", "session", "failed: down"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				mu    sync.Mutex
				calls []string
				n     int
			)
			record := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			Loop{
				Min: time.Millisecond, Max: time.Millisecond,
				Session: func(context.Context) (bool, error) {
					record("session")
					got := tt.received[n]
					if n++; n == len(tt.received) {
						cancel() // ends the loop once this session returns
					}
					return got, errDown
				},
				Connecting: func() { record("connecting") },
				Failed:     func(err error) { record("failed: " + err.Error()) },
				Log:        log, Msg: "gone", Attrs: []any{"endpoint", "e1"},
			}.Run(ctx)
			// The last session ends with ctx: not a failure.
			want := tt.want[:len(tt.want)-1]
			if strings.Join(calls, "|") != strings.Join(want, "|") {
				t.Fatalf("calls %q, want %q", calls, want)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if buf.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.received)-1 {
				t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(tt.received)-1, buf.String())
			}
			warns := 0
			for _, ln := range lines {
				if !strings.Contains(ln, `msg=gone endpoint=e1 err=down retry_in=`) {
					t.Fatalf("log line %q", ln)
				}
				if strings.Contains(ln, "level=WARN") {
					warns++
				}
			}
			if want := min(tt.warns, len(lines)); warns != want {
				t.Fatalf("%d warnings, want %d:\n%s", warns, want, buf.String())
			}
		})
	}
}

// Test_LoopStopsWhileWaiting: a context that ends during the backoff
// ends the loop without another attempt.
func Test_LoopStopsWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sessions := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop{
			Min: time.Hour, Max: time.Hour,
			Session: func(context.Context) (bool, error) { sessions++; return false, errors.New("x") },
			Failed:  func(error) { cancel() },
			Log:     slog.New(slog.DiscardHandler),
		}.Run(ctx)
	}()
	<-done
	if sessions != 1 {
		t.Fatalf("%d sessions, want 1", sessions)
	}
}
