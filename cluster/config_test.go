package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Test_ConfigValidate: TestConfig is valid, Logger and SnapshotsRetained
// take defaults when zero, and every refusal wraps ErrInvalidConfig,
// naming what is wrong (Test_ConfigValidation covers Open's).
func Test_ConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" when valid
	}{
		{"test config", func(*Config) {}, ""},
		{"zero snapshots retained and logger", func(c *Config) { c.SnapshotsRetained, c.Logger = 0, nil }, ""},
		{"zero snapshot interval", func(c *Config) { c.SnapshotInterval = 0 }, "SnapshotInterval (--raft-snapshot-interval) must be positive, got 0s"},
		{"negative snapshot interval", func(c *Config) { c.SnapshotInterval = -time.Second }, "SnapshotInterval (--raft-snapshot-interval) must be positive"},
		{"negative snapshots retained", func(c *Config) { c.SnapshotsRetained = -1 }, "SnapshotsRetained must be at least 1, got -1"},
		{"zero heartbeat", func(c *Config) { c.HeartbeatTimeout = 0 }, "raft timeouts must be positive"},
		{"zero join timeout", func(c *Config) { c.JoinTimeout = 0 }, "join and forward timeouts must be positive"},
		{"zero apply timeout", func(c *Config) { c.ApplyTimeout = 0 }, "apply and bolt open timeouts must be positive"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "data dir is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := TestConfig("n1", t.TempDir())
			tt.mutate(&c)
			err := c.withDefaults().Validate()
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
