package poll

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrTimeout is what Until and Within wrap when the wait ran out.
var ErrTimeout = errors.New("timed out")

// fatal marks an error that ends a wait at once.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }
func (f fatal) Unwrap() error { return f.err }

// Fatal wraps err so that Until stops at once with it: the condition
// knows that waiting longer cannot help (a process exited, say).
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return fatal{err}
}

// Until calls cond every interval until it returns nil (Until returns
// nil), an error made by Fatal (Until returns it, wrapped), or ctx ends.
// Then the error names what was awaited, ctx's error and cond's last
// error from a call the deadline did not cut short.
func Until(ctx context.Context, interval time.Duration, what string, cond func(context.Context) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		var f fatal
		if errors.As(err, &f) {
			return fmt.Errorf("waiting until %s: %w", what, f.err)
		}
		if ctx.Err() == nil || last == nil {
			last = err // not the deadline cutting a call short
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w: %w (last: %w)", what, ErrTimeout, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Within is Until with a timeout of its own on top of ctx's.
func Within(ctx context.Context, timeout, interval time.Duration, what string, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Until(ctx, interval, what, cond)
}

// T is the part of testing.TB that Eventually uses.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Eventually polls cond every 10 ms until it returns nil and fails the
// test with the last error after timeout (or at once on a Fatal error).
func Eventually(t T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	err := Within(context.Background(), timeout, 10*time.Millisecond, what, func(context.Context) error { return cond() })
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// Sleep waits d, or less when ctx ends first (then it returns ctx's
// error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
