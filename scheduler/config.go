package scheduler

import (
	"errors"
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

// Validate rejects settings the cost function cannot use. Each error
// wraps ErrInvalidConfig and names the field, and the flag that sets it.
// There are no zero defaults here: a zero weight and a false switch are
// settings, so a Config starts from DefaultConfig.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"HostCacheHitWeight (--host-cache-hit-weight)", c.HostCacheHitWeight},
		{"DiskCacheHitWeight (--disk-cache-hit-weight)", c.DiskCacheHitWeight},
	} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, invalid("%s must be a finite number >= 0, got %v", f.name, f.v))
		}
	}
	if err := ValidatePolicy(c.Policy); err != nil {
		errs = append(errs, fmt.Errorf("%w: Policy (--policy and its parameters): %w", ErrInvalidConfig, err))
	}
	if !(c.DefaultTokensPerSecond > 0) || math.IsInf(c.DefaultTokensPerSecond, 0) {
		errs = append(errs, invalid("DefaultTokensPerSecond (--predicted-ttft-default-tokens-per-s) must be a finite number > 0, got %v",
			c.DefaultTokensPerSecond))
	}
	if c.ActiveRequestExpiry <= 0 {
		errs = append(errs, invalid("ActiveRequestExpiry (--active-request-expiry-secs) must be positive, got %v", c.ActiveRequestExpiry))
	}
	// Two: mirrors may use half of each bound, and half of one is none.
	if c.MaxReservations < 2 {
		errs = append(errs, invalid("MaxReservations (--max-reservations) must be at least 2, got %d", c.MaxReservations))
	}
	if c.MaxReservedBlocks < 2 {
		errs = append(errs, invalid("MaxReservedBlocks (--max-reserved-blocks) must be at least 2, got %d", c.MaxReservedBlocks))
	}
	return errors.Join(errs...)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
