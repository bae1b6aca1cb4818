package backoff

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

// Loop is a reconnect loop: connect, run a session until it fails, wait a
// backoff, again, until the context ends. The KV event listeners and the
// replica-sync peers both follow a stream this way; the loop owns the
// backoff, its reset and how loudly a failure is logged, the caller owns
// what a session is and what its status shows.
type Loop struct {
	// Min and Max bound the backoff (New).
	Min, Max time.Duration
	// Session runs one connection until it ends. It reports whether it
	// received anything (which resets the backoff) and why it ended.
	Session func(ctx context.Context) (received bool, err error)
	// Connecting is called before each attempt, Failed after one that
	// ended while ctx still runs. Either may be nil.
	Connecting func()
	Failed     func(err error)
	// Log gets one line per failure, with Msg and Attrs followed by err,
	// retry_in and failures: at warn for the first failure in a row and
	// every 10th after it, at debug otherwise (Backoff.Next).
	Log   *slog.Logger
	Msg   string
	Attrs []any
}

// Run runs the loop until ctx ends.
func (l Loop) Run(ctx context.Context) {
	bo := New(l.Min, l.Max)
	for ctx.Err() == nil {
		if l.Connecting != nil {
			l.Connecting()
		}
		received, err := l.Session(ctx)
		if ctx.Err() != nil {
			return
		}
		if l.Failed != nil {
			l.Failed(err)
		}
		if received {
			bo.Reset()
		}
		// An endpoint that stays down would log on every retry; the
		// caller's status has what the debug lines leave out.
		wait, failures, warn := bo.Next()
		level := slog.LevelDebug
		if warn {
			level = slog.LevelWarn
		}
		attrs := append(l.Attrs[:len(l.Attrs):len(l.Attrs)], "err", err, "retry_in", wait, "failures", failures)
		l.Log.Log(ctx, level, l.Msg, attrs...)
		if poll.Sleep(ctx, wait) != nil {
			return
		}
	}
}
