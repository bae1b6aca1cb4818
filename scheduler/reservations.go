package scheduler

import (
	"fmt"
	"math"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// claimID registers a reservation id on this node and charges a booking of
// blocks against the node's bounds (capacity.go), or fails if the id is
// taken or the node is full. Called with p.mu held, so the claim and the
// booking are one step for any other request on this partition.
func (s *Scheduler) claimID(id string, p *partition, blocks int) error {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	if _, taken := s.resIndex[id]; taken {
		return fmt.Errorf("%w: %q", ErrDuplicateReservation, id)
	}
	if err := s.capacity.take(false, int64(blocks)); err != nil {
		return err
	}
	s.resIndex[id] = p
	return nil
}

// book records a reservation on a rank; p.mu is held and the id claimed.
// verified says whether seq was checked to chain the prompt's block hashes.
func (s *Scheduler) book(p *partition, id string, rl *rankLoad, seq []uint64, verified bool, isl, prefill int64) *reservation {
	now := s.now()
	res := &reservation{
		id: id, handle: s.handles.Add(1), rank: rl, charged: int64(len(seq)),
		isl: isl, prefill: prefill, admitted: now, local: now, verified: verified,
	}
	p.book(res, seq)
	s.publishAdmission(p, res)
	return res
}

func (s *Scheduler) bookLocked(p *partition, id string, rl *rankLoad, pr *Prompt, prefill int64) *reservation {
	return s.book(p, id, rl, pr.SequenceHashes, chained(pr.SequenceHashes, pr.BlockHashes), pr.ISL, prefill)
}

// ReserveRequest books a request on a rank chosen elsewhere (the Ray
// select-then-reserve flow): either a selection /select remembered
// (SelectionID), or a worker rank and a prompt.
type ReserveRequest struct {
	ID string
	// SelectionID books the choice remembered under it; the fields
	// below are then unused.
	SelectionID string
	Partition   fsm.PartitionKey
	WorkerID    uint64
	DPRank      uint32
	// Prompt needs SequenceHashes and ISL; BlockHashes (or tokens) let the
	// node compute the effective prefill when it is not supplied.
	Prompt Prompt
	// EffectivePrefill, when set, is booked as prefill load as is; it must
	// not exceed ISL.
	EffectivePrefill *int64
}

// Booking is what a reservation booked.
type Booking struct {
	Partition     fsm.PartitionKey
	WorkerID      uint64
	DPRank        uint32
	PrefillTokens int64
}

// Reserve books a reservation on the given rank, or the remembered
// selection.
func (s *Scheduler) Reserve(req ReserveRequest) (Booking, error) {
	if req.ID == "" {
		return Booking{}, fmt.Errorf("%w: reservation_id is required", ErrInvalid)
	}
	if req.SelectionID != "" {
		return s.reserveSelection(req.ID, req.SelectionID)
	}
	prefill, err := s.reserveRank(req)
	return Booking{Partition: req.Partition, WorkerID: req.WorkerID, DPRank: req.DPRank, PrefillTokens: prefill}, err
}

func (s *Scheduler) reserveRank(req ReserveRequest) (int64, error) {
	if ep := req.EffectivePrefill; ep != nil && (*ep < 0 || *ep > req.Prompt.ISL) {
		return 0, fmt.Errorf("%w: effective_prefill_tokens %d must be between 0 and isl_tokens %d",
			ErrInvalid, *ep, req.Prompt.ISL)
	}
	p := s.partition(req.Partition)
	if p == nil {
		return 0, fmt.Errorf("%w: worker %d in %s", ErrWorkerNotFound, req.WorkerID, req.Partition)
	}
	var overlaps []indexer.Overlap
	if req.EffectivePrefill == nil {
		var err error
		if overlaps, err = s.match(p, &req.Prompt); err != nil {
			return 0, err
		}
	} else {
		p.mu.Lock()
		req.Prompt.resolve(p.blockSize)
		p.mu.Unlock()
		if err := req.Prompt.validate(); err != nil {
			return 0, err
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	rl := p.byKey[indexer.RankKey{Worker: req.WorkerID, Rank: req.DPRank}]
	if rl == nil || !rl.schedulable {
		return 0, fmt.Errorf("%w: worker %d dp_rank %d in %s", ErrWorkerNotFound, req.WorkerID, req.DPRank, req.Partition)
	}
	if !s.assumeKVReuse(s.partitionPolicy(p.key)) {
		p.unshareSequence(&req.Prompt, req.ID)
	}
	prefill := int64(0)
	switch {
	case req.EffectivePrefill != nil:
		prefill = *req.EffectivePrefill
	case s.trackPrefill(s.partitionPolicy(p.key)):
		prefill = req.Prompt.ISL - s.cachedTokens(p, rl.key, overlaps, req.Prompt.ISL)
	}
	if err := s.claimID(req.ID, p, len(req.Prompt.SequenceHashes)); err != nil {
		return 0, err
	}
	s.bookLocked(p, req.ID, rl, &req.Prompt, prefill)
	return prefill, nil
}

// cachedTokens is the weighted cache credit of one rank, capped at isl.
func (s *Scheduler) cachedTokens(p *partition, rk indexer.RankKey, overlaps []indexer.Overlap, isl int64) int64 {
	for _, o := range overlaps {
		if o.Worker == rk.Worker && o.Rank == rk.Rank {
			credit := float64(o.Device) + s.cfg.HostCacheHitWeight*float64(o.HostExt) + s.cfg.DiskCacheHitWeight*float64(o.DiskExt)
			return cachedTokens(credit, p.blockSize, isl)
		}
	}
	return 0
}

// withReservation runs fn on a live reservation under its partition lock.
func (s *Scheduler) withReservation(id string, fn func(p *partition, r *reservation)) error {
	s.resMu.Lock()
	p := s.resIndex[id]
	s.resMu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %q", ErrReservationNotFound, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reservations[id]
	if r == nil { // freed between the two lookups
		return fmt.Errorf("%w: %q", ErrReservationNotFound, id)
	}
	fn(p, r)
	return nil
}

// PrefillComplete clears the reservation's prefill load; repeating it is a
// no-op.
// It is published to the peers whether the booking was made here or
// mirrored from one.
func (s *Scheduler) PrefillComplete(id string) error {
	return s.withReservation(id, func(p *partition, r *reservation) {
		if p.completePrefill(r, true) {
			s.publishEnd(replica.KindPrefillComplete, r)
		}
	})
}

// OutputBlock adds one output block to the reservation's decode load, with
// an optional decay fraction in [0, 1].
func (s *Scheduler) OutputBlock(id string, decay *float64) error {
	if decay != nil && (*decay < 0 || *decay > 1 || math.IsNaN(*decay)) {
		return fmt.Errorf("%w: decay_fraction must be between 0 and 1, got %v", ErrInvalid, *decay)
	}
	return s.withReservation(id, func(p *partition, r *reservation) { p.addOutputBlock(r, decay) })
}

// Free ends a reservation and removes all its load. It is published to
// the peers whether the booking was made here or mirrored from one.
func (s *Scheduler) Free(id string) error {
	return s.withReservation(id, func(p *partition, r *reservation) {
		p.unbook(r)
		s.forget(r)
		s.publishEnd(replica.KindFree, r)
		if r.origin != "" && s.publisher != nil {
			s.notePendingFree(r) // until its origin's live set confirms it
		}
	})
}

// SweepExpired frees reservations admitted longer ago than the expiry and
// returns how many it freed. Reservations sit in admission order, so each
// sweep costs only what it frees.
func (s *Scheduler) SweepExpired() int {
	cutoff := s.now().Add(-s.cfg.ActiveRequestExpiry)
	s.mu.RLock()
	parts := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		parts = append(parts, p)
	}
	s.mu.RUnlock()
	freed := 0
	for _, p := range parts {
		var ended []*reservation
		p.mu.Lock()
		for e := p.fifo.Front(); e != nil; e = p.fifo.Front() {
			r := e.Value.(*reservation)
			if r.admitted.After(cutoff) {
				break
			}
			p.unbook(r)
			ended = append(ended, r)
		}
		s.forget(ended...)
		p.mu.Unlock()
		freed += len(ended)
	}
	s.pending.sweep(s.now())
	if freed > 0 {
		s.metrics.expired.Add(float64(freed))
		s.log.Info("expired reservations freed", "count", freed, "expiry", s.cfg.ActiveRequestExpiry)
	}
	return freed
}

// RunSweeper calls SweepExpired periodically until stop is closed.
func (s *Scheduler) RunSweeper(stop <-chan struct{}) {
	every := min(max(s.cfg.ActiveRequestExpiry/10, 100*time.Millisecond), 10*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.SweepExpired()
		}
	}
}
