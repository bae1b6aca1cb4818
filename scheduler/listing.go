package scheduler

import (
	"cmp"
	"slices"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// ReservationInfo describes one live booking (GET /reservations).
type ReservationInfo struct {
	ID              string
	Partition       fsm.PartitionKey
	WorkerID        uint64
	DPRank          uint32
	Blocks          int
	ISL             int64
	PrefillTokens   int64
	PrefillComplete bool
	OutputBlocks    int64
	// DecayFraction is the latest output_block decay fraction; nil when
	// none was given.
	DecayFraction *float64
	Admitted      time.Time
	Expires       time.Time
	// OriginNode is the node that booked it when replica sync mirrored it
	// here; "" for a booking made on this node.
	OriginNode string
}

// ReservationFilter selects the bookings Reservations lists. Empty fields
// do not filter; After skips ids up to and including it.
type ReservationFilter struct {
	Model, Tenant string
	WorkerID      *uint64
	After         string
	Limit         int
}

// Reservations lists the live bookings that pass the filter, sorted by id,
// at most f.Limit of them; more reports whether others follow. It costs
// O(n log n) in the node's bookings: an inspection route, not a hot path.
func (s *Scheduler) Reservations(f ReservationFilter) (out []ReservationInfo, more bool) {
	s.mu.RLock()
	var parts []*partition
	for k, p := range s.parts {
		if (f.Model == "" || k.Model == f.Model) && (f.Tenant == "" || k.Tenant == f.Tenant) {
			parts = append(parts, p)
		}
	}
	s.mu.RUnlock()
	for _, p := range parts {
		p.mu.Lock()
		for id, r := range p.reservations {
			if id > f.After && (f.WorkerID == nil || r.rank.key.Worker == *f.WorkerID) {
				out = append(out, s.info(p, r))
			}
		}
		p.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b ReservationInfo) int { return cmp.Compare(a.ID, b.ID) })
	if f.Limit > 0 && len(out) > f.Limit {
		return out[:f.Limit], true
	}
	return out, false
}

// Reservation describes one live booking.
func (s *Scheduler) Reservation(id string) (ReservationInfo, error) {
	var info ReservationInfo
	err := s.withReservation(id, func(p *partition, r *reservation) { info = s.info(p, r) })
	return info, err
}

// info describes r; p.mu is held.
func (s *Scheduler) info(p *partition, r *reservation) ReservationInfo {
	info := ReservationInfo{
		ID: r.id, Partition: p.key, WorkerID: r.rank.key.Worker, DPRank: r.rank.key.Rank,
		Blocks: len(r.blocks), ISL: r.isl, PrefillTokens: r.prefill, PrefillComplete: r.prefillDone,
		OutputBlocks: r.outFull + r.outFrac, Admitted: r.admitted, Expires: r.admitted.Add(s.cfg.ActiveRequestExpiry),
		OriginNode: r.origin,
	}
	if r.fractional {
		f := float64(r.frac) / unit
		info.DecayFraction = &f
	}
	return info
}
