package scheduler

import (
	"fmt"

	"github.com/kvselect/kvselect/indexer"
)

// Retries of select_and_reserve (SPEC §3.3). A caller whose answer was
// lost (a timeout, a reset connection, a node that answered as it died)
// sends the same request again with the same reservation_id: it must get
// its booking, not a 409 without a worker, and not a second booking. So a
// repeat of an id already booked on this node with the same prompt (same
// partition, isl and sequence hashes) answers what the booking answered,
// marked Replayed, and books nothing. The same id with another prompt is a
// real conflict: 409.
//
// A booking made here by select_and_reserve keeps its answer (answer);
// one mirrored from a peer, or made through POST /reservations, has no
// answer to give back, so its answer is rebuilt from the booking (worker,
// rank, booked prefill) and the prompt's match now, which a caller that
// failed over from the booking node uses the same way.

// replay answers a select_and_reserve whose reservation id is already
// booked on this node: ok with the booking's answer when the prompt is
// the same, ErrDuplicateReservation when it is not, and neither when the
// id is free. p.mu is held; overlaps are the prompt's match.
func (s *Scheduler) replay(p *partition, req *SelectRequest, overlaps []indexer.Overlap) (Selection, bool, error) {
	s.resMu.Lock()
	q, taken := s.resIndex[req.ReservationID]
	s.resMu.Unlock()
	if !taken {
		return Selection{}, false, nil
	}
	r := p.reservations[req.ReservationID]
	if q != p || r == nil || !r.samePrompt(&req.Prompt) {
		return Selection{}, false, fmt.Errorf("%w: %q, with another prompt", ErrDuplicateReservation, req.ReservationID)
	}
	if r.answer != nil {
		sel := *r.answer
		sel.Replayed = true
		return sel, true, nil
	}
	sel := Selection{
		Partition: p.key, WorkerID: r.rank.key.Worker, DPRank: r.rank.key.Rank,
		Endpoint: r.rank.worker.Endpoint, BlockSize: p.blockSize,
		Overlap:                summarize(r.rank.worker, overlaps, p.blockSize),
		EffectivePrefillTokens: req.Prompt.ISL - s.cachedTokens(p, r.rank.key, overlaps, req.Prompt.ISL),
		ReservationID:          r.id, Replayed: true,
	}
	if s.trackPrefill(s.partitionPolicy(p.key)) {
		sel.EffectivePrefillTokens = r.prefill
	}
	return sel, true, nil
}

// samePrompt reports whether pr is the prompt r was booked with: the same
// isl and sequence hashes. r.blocks holds the hashes as booked, each once
// (book skips a repeat within a request), so pr's may only add repeats of
// hashes already seen.
func (r *reservation) samePrompt(pr *Prompt) bool {
	if r.isl != pr.ISL || len(pr.SequenceHashes) < len(r.blocks) {
		return false
	}
	var seen map[uint64]struct{} // built on the first repeat only
	j := 0
	for _, h := range pr.SequenceHashes {
		if j < len(r.blocks) && r.blocks[j] == h {
			j++
			if seen != nil {
				seen[h] = struct{}{}
			}
			continue
		}
		if seen == nil {
			seen = make(map[uint64]struct{}, j)
			for _, b := range r.blocks[:j] {
				seen[b] = struct{}{}
			}
		}
		if _, ok := seen[h]; !ok {
			return false
		}
	}
	return j == len(r.blocks)
}
