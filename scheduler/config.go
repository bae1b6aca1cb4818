package scheduler

import (
	"fmt"
	"math"
	"time"
)

// Config holds the scheduling settings of SPEC §6. The zero value is not
// useful; start from DefaultConfig.
type Config struct {
	// Policy is the node's default policy (policy.go), used for a
	// partition the catalog names none for; --policy seeds the catalog's
	// cluster default with it at bootstrap.
	Policy PolicySpec
	// HostCacheHitWeight and DiskCacheHitWeight credit blocks found on the
	// host and disk tiers relative to device blocks (weight 1).
	HostCacheHitWeight float64
	DiskCacheHitWeight float64
	// TrackPrefillTokens books effective prefill tokens as load and puts
	// them in the cost.
	TrackPrefillTokens bool
	// AssumeKVReuse false replaces the sequence hashes derived from
	// token ids by random values per block (Dynamo's meaning).
	AssumeKVReuse bool
	// DefaultTokensPerSecond is a rank's assumed prefill throughput until
	// it has learned its own (ttft.go).
	DefaultTokensPerSecond float64
	// NoPrefillDecay keeps a booking's prefill load in full until its
	// prefill_complete or free (the slot tracker's semantics, seed 003).
	NoPrefillDecay bool
	// ActiveRequestExpiry frees reservations this long after admission.
	ActiveRequestExpiry time.Duration
	// MaxReservations and MaxReservedBlocks bound the bookings the node
	// holds, its own and mirrored ones together (capacity.go).
	MaxReservations   int64
	MaxReservedBlocks int64
	// Seed makes tie-breaking and temperature sampling reproducible; 0
	// seeds from the clock.
	Seed uint64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns Dynamo's defaults.
func DefaultConfig() Config {
	return Config{
		Policy:                 PolicySpec{Name: DefaultPolicy},
		HostCacheHitWeight:     0.75,
		DiskCacheHitWeight:     0.25,
		TrackPrefillTokens:     true,
		AssumeKVReuse:          true,
		DefaultTokensPerSecond: DefaultTokensPerSecond,
		ActiveRequestExpiry:    300 * time.Second,
		MaxReservations:        DefaultMaxReservations,
		MaxReservedBlocks:      DefaultMaxReservedBlocks,
	}
}

// Validate rejects settings the cost function cannot use.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"host cache hit weight", c.HostCacheHitWeight}, {"disk cache hit weight", c.DiskCacheHitWeight},
	} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s must be a finite number >= 0, got %v", f.name, f.v)
		}
	}
	if err := ValidatePolicy(c.Policy); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if !(c.DefaultTokensPerSecond > 0) || math.IsInf(c.DefaultTokensPerSecond, 0) {
		return fmt.Errorf("default prefill tokens per second must be a finite number > 0, got %v", c.DefaultTokensPerSecond)
	}
	if c.ActiveRequestExpiry <= 0 {
		return fmt.Errorf("active request expiry must be positive, got %v", c.ActiveRequestExpiry)
	}
	// Two: mirrors may use half of each bound, and half of one is none.
	if c.MaxReservations < 2 {
		return fmt.Errorf("max reservations must be at least 2, got %d", c.MaxReservations)
	}
	if c.MaxReservedBlocks < 2 {
		return fmt.Errorf("max reserved blocks must be at least 2, got %d", c.MaxReservedBlocks)
	}
	return nil
}
