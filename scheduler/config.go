package scheduler

import (
	"fmt"
	"math"
	"time"
)

// Config holds the scheduling settings of SPEC §6. The zero value is not
// useful; start from DefaultConfig.
type Config struct {
	// OverlapScoreWeight scales the prefill term of the cost.
	OverlapScoreWeight float64
	// Temperature 0 picks the cheapest rank (ties at random); above 0
	// samples with a softmax over normalised costs.
	Temperature float64
	// HostCacheHitWeight and DiskCacheHitWeight credit blocks found on the
	// host and disk tiers relative to device blocks (weight 1).
	HostCacheHitWeight float64
	DiskCacheHitWeight float64
	// TrackPrefillTokens books effective prefill tokens as load and puts
	// them in the cost.
	TrackPrefillTokens bool
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
		OverlapScoreWeight:  1.0,
		Temperature:         0,
		HostCacheHitWeight:  0.75,
		DiskCacheHitWeight:  0.25,
		TrackPrefillTokens:  true,
		ActiveRequestExpiry: 300 * time.Second,
		MaxReservations:     DefaultMaxReservations,
		MaxReservedBlocks:   DefaultMaxReservedBlocks,
	}
}

// Validate rejects settings the cost function cannot use.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"overlap score weight", c.OverlapScoreWeight}, {"temperature", c.Temperature},
		{"host cache hit weight", c.HostCacheHitWeight}, {"disk cache hit weight", c.DiskCacheHitWeight},
	} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s must be a finite number >= 0, got %v", f.name, f.v)
		}
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

// Override adjusts one request's scheduling (router_config_override).
type Override struct {
	OverlapScoreWeight *float64
	Temperature        *float64
}
