package ingest

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/kvselect/kvselect/internal/backoff"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid ingest configuration")

// MinQueueBytes is the smallest Config.QueueBytes Validate accepts: one
// listener must be able to buffer a burst of ordinary KV event messages.
const MinQueueBytes = 1 << 20

// DefaultConfig returns every default of Config: a zero field of the
// Config given to New takes its value from here.
func DefaultConfig() Config {
	return Config{
		Threads:       runtime.GOMAXPROCS(0),
		BackoffMin:    backoff.DefaultMin,
		BackoffMax:    backoff.DefaultMax,
		ReplayTimeout: 10 * time.Second,
		QueueLen:      4096,
		QueueBytes:    64 << 20,
		StaleAfter:    30 * time.Second,
		Now:           time.Now,
		Logger:        slog.Default(),
	}
}

// withDefaults fills c's zero fields from DefaultConfig, and the backoff
// bounds by backoff.Bounds.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Threads = cmp.Or(c.Threads, d.Threads)
	c.ReplayTimeout = cmp.Or(c.ReplayTimeout, d.ReplayTimeout)
	c.StaleAfter = cmp.Or(c.StaleAfter, d.StaleAfter)
	c.QueueLen = cmp.Or(c.QueueLen, d.QueueLen)
	c.QueueBytes = cmp.Or(c.QueueBytes, d.QueueBytes)
	c.BackoffMin, c.BackoffMax = backoff.Bounds(c.BackoffMin, c.BackoffMax)
	c.Logger = cmp.Or(c.Logger, d.Logger)
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}

// Validate checks the configuration as New will use it, zero fields
// replaced by their defaults (so a zero is always valid). Each error
// names the field, and the flag that sets it.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Threads < 1 {
		errs = append(errs, invalid("Threads (--threads) must be at least 1, got %d", c.Threads))
	}
	if c.BackoffMin < 0 {
		errs = append(errs, invalid("BackoffMin must be positive, got %s", c.BackoffMin))
	}
	if c.ReplayTimeout < 0 {
		errs = append(errs, invalid("ReplayTimeout (--kv-replay-timeout) must be positive, got %s", c.ReplayTimeout))
	}
	if c.QueueLen < 1 {
		errs = append(errs, invalid("QueueLen must be at least 1, got %d", c.QueueLen))
	}
	if c.QueueBytes < MinQueueBytes {
		errs = append(errs, invalid("QueueBytes (--kv-queue-bytes) must be at least 1 MiB, got %d", c.QueueBytes))
	}
	if c.StaleAfter < 0 {
		errs = append(errs, invalid("StaleAfter (--stale-listener-after) must be positive, got %s", c.StaleAfter))
	}
	return errors.Join(errs...)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
