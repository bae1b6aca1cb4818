package scheduler

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Booking bounds (SPEC §11): a node holds at most MaxReservations bookings
// and MaxReservedBlocks booked blocks (the sum of the bookings' sequence
// hashes), its own and mirrored ones together, so that its memory follows
// the bounds whoever calls it. Mirrored bookings may use at most half of
// each bound: past it a peer's admission is dropped (DropCapacity), so
// peers, or a peer's caller, can never take the room this node's own
// callers book in. A local booking that would pass a bound is refused with
// ErrCapacity (429 with Retry-After): bookings end within seconds to
// minutes, so a caller retries.
//
// Why blocks and not bytes: a booking's memory is a fixed part (the
// reservation, its index entries and fifo element, about 360 bytes) plus
// one part per block (its active-block entry and holder, and its sequence
// hash: about 116 bytes when no other booking shares the block, measured
// by Test_BytesPerBookedBlock), so the two counts bound the memory, and
// both are numbers an operator can reason about (prompts, block size).

// Default bounds. At the measured ~116 bytes per unshared booked block and
// ~360 bytes per booking, the defaults hold at most about 0.5 GiB of
// booked blocks and 45 MiB of bookings: room for 131,072 requests in
// flight of 32 blocks each (512 tokens at block size 16) or 4 requests of
// the largest prompt a request may carry (2^20 blocks).
const (
	DefaultMaxReservations   = 1 << 17
	DefaultMaxReservedBlocks = 1 << 22
)

// capacity counts what the node holds against the bounds; the scheduler's
// resMu guards it, so that an id's claim and its charge are one step.
type capacity struct {
	maxReservations, maxBlocks int64
	local, mirrored            usage
}

type usage struct{ reservations, blocks int64 }

func newCapacity(maxReservations, maxBlocks int64) capacity {
	return capacity{maxReservations: maxReservations, maxBlocks: maxBlocks}
}

// take charges one booking of blocks, or fails with ErrCapacity when it
// would pass a bound: the node's own bound for a local booking, half of it
// for a mirrored one.
func (c *capacity) take(mirrored bool, blocks int64) error {
	res, blk := c.local.reservations+c.mirrored.reservations+1, c.local.blocks+c.mirrored.blocks+blocks
	if mirrored && (2*(c.mirrored.reservations+1) > c.maxReservations || 2*(c.mirrored.blocks+blocks) > c.maxBlocks) {
		return fmt.Errorf("%w: mirrored bookings may use half of --max-reservations (%d) and --max-reserved-blocks (%d)",
			ErrCapacity, c.maxReservations, c.maxBlocks)
	}
	switch {
	case res > c.maxReservations:
		return fmt.Errorf("%w: the node holds %d bookings, --max-reservations is %d; retry once bookings end",
			ErrCapacity, res-1, c.maxReservations)
	case blk > c.maxBlocks:
		return fmt.Errorf("%w: the node holds %d booked blocks, this booking has %d and --max-reserved-blocks is %d; retry once bookings end",
			ErrCapacity, blk-blocks, blocks, c.maxBlocks)
	}
	u := &c.local
	if mirrored {
		u = &c.mirrored
	}
	u.reservations++
	u.blocks += blocks
	return nil
}

// mirrorsFull reports whether mirrors hold their half of either bound.
func (c *capacity) mirrorsFull() bool {
	return 2*(c.mirrored.reservations+1) > c.maxReservations || 2*c.mirrored.blocks >= c.maxBlocks
}

// release returns what take charged.
func (c *capacity) release(mirrored bool, blocks int64) {
	u := &c.local
	if mirrored {
		u = &c.mirrored
	}
	u.reservations--
	u.blocks -= blocks
}

// Capacity is what the node holds against its booking bounds.
type Capacity struct {
	MaxReservations, MaxReservedBlocks   int64
	LocalReservations, LocalBlocks       int64
	MirroredReservations, MirroredBlocks int64
}

// Capacity reports the bookings held against the bounds.
func (s *Scheduler) Capacity() Capacity {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	c := &s.capacity
	return Capacity{MaxReservations: c.maxReservations, MaxReservedBlocks: c.maxBlocks,
		LocalReservations: c.local.reservations, LocalBlocks: c.local.blocks,
		MirroredReservations: c.mirrored.reservations, MirroredBlocks: c.mirrored.blocks}
}

var capacityDesc = prometheus.NewDesc("kvselect_reservation_capacity_used",
	"Bookings held against the bounds: kind reservations or blocks, source local or mirrored.",
	[]string{"kind", "source"}, nil)

var capacityMaxDesc = prometheus.NewDesc("kvselect_reservation_capacity_max",
	"The booking bounds: --max-reservations (kind reservations) and --max-reserved-blocks (kind blocks).",
	[]string{"kind"}, nil)

type capacityCollector struct{ s *Scheduler }

func (c capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- capacityDesc
	ch <- capacityMaxDesc
}

func (c capacityCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.s.Capacity()
	for _, m := range []struct {
		kind, source string
		v            int64
	}{
		{"reservations", "local", v.LocalReservations}, {"blocks", "local", v.LocalBlocks},
		{"reservations", "mirrored", v.MirroredReservations}, {"blocks", "mirrored", v.MirroredBlocks},
	} {
		ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(m.v), m.kind, m.source)
	}
	ch <- prometheus.MustNewConstMetric(capacityMaxDesc, prometheus.GaugeValue, float64(v.MaxReservations), "reservations")
	ch <- prometheus.MustNewConstMetric(capacityMaxDesc, prometheus.GaugeValue, float64(v.MaxReservedBlocks), "blocks")
}
