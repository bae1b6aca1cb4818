package scheduler

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// Test_ConfigValidate: DefaultConfig is valid, a zero weight is a setting,
// and what the cost function cannot use is refused with ErrInvalidConfig,
// naming the field and its flag.
func Test_ConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"zero tier weights", func(c *Config) { c.HostCacheHitWeight, c.DiskCacheHitWeight = 0, 0 }, ""},
		{"smallest bounds", func(c *Config) { c.MaxReservations, c.MaxReservedBlocks = 2, 2 }, ""},
		{"zero value", func(c *Config) { *c = Config{} }, "MaxReservations (--max-reservations) must be at least 2, got 0"},
		{"negative host weight", func(c *Config) { c.HostCacheHitWeight = -1 }, "HostCacheHitWeight (--host-cache-hit-weight) must be a finite number >= 0, got -1"},
		{"NaN disk weight", func(c *Config) { c.DiskCacheHitWeight = math.NaN() }, "DiskCacheHitWeight (--disk-cache-hit-weight)"},
		{"unknown policy", func(c *Config) { c.Policy = PolicySpec{Name: "no-such-policy"} }, "Policy (--policy and its parameters)"},
		{"zero tokens per second", func(c *Config) { c.DefaultTokensPerSecond = 0 }, "DefaultTokensPerSecond (--predicted-ttft-default-tokens-per-s) must be a finite number > 0, got 0"},
		{"infinite tokens per second", func(c *Config) { c.DefaultTokensPerSecond = math.Inf(1) }, "DefaultTokensPerSecond"},
		{"zero expiry", func(c *Config) { c.ActiveRequestExpiry = 0 }, "ActiveRequestExpiry (--active-request-expiry-secs) must be positive"},
		{"negative expiry", func(c *Config) { c.ActiveRequestExpiry = -time.Second }, "ActiveRequestExpiry"},
		{"one reservation", func(c *Config) { c.MaxReservations = 1 }, "MaxReservations (--max-reservations) must be at least 2, got 1"},
		{"one reserved block", func(c *Config) { c.MaxReservedBlocks = 1 }, "MaxReservedBlocks (--max-reserved-blocks) must be at least 2, got 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
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
