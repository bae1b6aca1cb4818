package ingest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Test_ConfigValidate: zero fields are the defaults and valid; what the
// listeners cannot run with is refused with ErrInvalidConfig, naming the
// field.
func Test_ConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" when valid
	}{
		{"zero value", func(*Config) {}, ""},
		{"defaults", func(c *Config) { *c = DefaultConfig() }, ""},
		{"smallest queue", func(c *Config) { c.QueueBytes = MinQueueBytes }, ""},
		{"backoff max below min takes the default", func(c *Config) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond }, ""},
		{"negative threads", func(c *Config) { c.Threads = -1 }, "Threads (--threads) must be at least 1, got -1"},
		{"queue under 1 MiB", func(c *Config) { c.QueueBytes = 512 }, "QueueBytes (--kv-queue-bytes) must be at least 1 MiB, got 512"},
		{"negative queue length", func(c *Config) { c.QueueLen = -3 }, "QueueLen must be at least 1, got -3"},
		{"negative stale-after", func(c *Config) { c.StaleAfter = -time.Second }, "StaleAfter (--stale-listener-after) must be positive, got -1s"},
		{"negative replay timeout", func(c *Config) { c.ReplayTimeout = -time.Second }, "ReplayTimeout (--kv-replay-timeout) must be positive"},
		{"negative backoff", func(c *Config) { c.BackoffMin = -time.Second }, "BackoffMin must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want == "":
			case !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate = %v, want ErrInvalidConfig saying %q", err, tt.want)
			}
		})
	}
}
