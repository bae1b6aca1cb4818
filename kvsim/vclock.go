package kvsim

import (
	"sync/atomic"
	"time"
)

// VirtualEpoch is the instant a virtual-time replay starts at when its
// VirtualClock is made by NewVirtualClock with a zero epoch: a fixed date,
// so that two runs read the same times.
var VirtualEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// VirtualClock is a timed replay's clock as code outside the replay reads
// it: a fixed epoch plus the replay's current virtual offset. Give its Now
// to a kvselect node's scheduler (scheduler.Config.Now) and the node
// learns prefill durations, decays prefill load and expires bookings in
// simulated time.
//
// TimedReplay is its only writer (TimedOptions.Clock), from the replay's
// goroutine; Now is safe from any goroutine. The offset never goes back.
type VirtualClock struct {
	epoch  time.Time
	offset atomic.Int64 // nanoseconds since epoch
}

// NewVirtualClock returns a clock at epoch (VirtualEpoch when zero).
func NewVirtualClock(epoch time.Time) *VirtualClock {
	if epoch.IsZero() {
		epoch = VirtualEpoch
	}
	return &VirtualClock{epoch: epoch}
}

// Now is the epoch plus the current virtual offset.
func (c *VirtualClock) Now() time.Time { return c.epoch.Add(c.Offset()) }

// Offset is the virtual time since the epoch.
func (c *VirtualClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Epoch is the instant offset 0 stands for.
func (c *VirtualClock) Epoch() time.Time { return c.epoch }

// advance moves the clock to d, never back.
func (c *VirtualClock) advance(d time.Duration) {
	if d > c.Offset() {
		c.offset.Store(int64(d))
	}
}
