// Package backoff is kvselect's one reconnect loop (Loop: the KV event
// listeners and the replica-sync peers), the delay between its attempts
// (Backoff): exponential, with jitter, reset by an attempt that got
// somewhere, and a say in which failures are worth a warning; and the
// bounds a Config that leaves them zero gets (Bounds).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff doubles the delay after each failure, from Min up to Max, and
// adds up to 20 % jitter so that many loops that fail together do not
// retry together. The zero value is not usable; use New.
type Backoff struct {
	min, max time.Duration
	delay    time.Duration
	failures int // in a row, since the last Reset
}

// New returns a Backoff starting at min (at least 1 ms) and capped at max
// (at least min).
func New(lo, hi time.Duration) *Backoff {
	lo = max(lo, time.Millisecond)
	return &Backoff{min: lo, max: max(hi, lo), delay: lo}
}

// Reset starts over from Min: the last attempt made progress.
func (b *Backoff) Reset() { b.delay, b.failures = b.min, 0 }

// Next records one more failure and returns how long to wait before the
// next attempt, how many failures in a row that makes, and whether this
// one deserves a warning: the first, then every 10th, so an endpoint that
// stays down does not flood the log (the caller logs the others at debug).
func (b *Backoff) Next() (wait time.Duration, failures int, warn bool) {
	warn = b.failures%10 == 0
	b.failures++
	wait = b.delay + time.Duration(rand.Int64N(int64(b.delay)/5+1))
	b.delay = min(2*b.delay, b.max)
	return wait, b.failures, warn
}

// DefaultMin and DefaultMax are the reconnect delays a Config that leaves
// them zero gets (the KV event listeners and the replica-sync peers alike).
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 5 * time.Second
)

// Bounds is the one rule for a Config's reconnect bounds: a zero min
// becomes DefaultMin, and a max below min (zero included) becomes
// DefaultMax, or min when that is larger. A negative min is kept, for the
// Config's Validate to refuse.
func Bounds(lo, hi time.Duration) (time.Duration, time.Duration) {
	if lo == 0 {
		lo = DefaultMin
	}
	if hi < lo {
		hi = max(DefaultMax, lo)
	}
	return lo, hi
}
