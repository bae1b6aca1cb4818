package scheduler

import (
	"fmt"

	"github.com/kvselect/kvselect/fsm"
)

// ProjectedLoad is one rank's load if a request were booked on it, as
// the slot tracker's /potential_loads reports it (seed 003).
type ProjectedLoad struct {
	WorkerID uint64
	DPRank   uint32
	// PrefillTokens is the rank's active prefill tokens plus the
	// request's new tokens.
	PrefillTokens int64
	// DecodeBlocks is the rank's active decode blocks plus the request's
	// distinct sequence hashes that are not active on the rank.
	DecodeBlocks float64
}

// ProjectLoads projects, for every schedulable rank of the partition, the
// load a request with these sequence hashes and newTokens prefill tokens
// would add, from the active load alone (no index match, no cache credit).
//
// Unlike PotentialLoads (SPEC §6.2's A, the prompt minus its longest
// active prefix), a hash counts as already active wherever it sits in the
// prompt: the new decode blocks are the distinct hashes of the request not
// held on the rank, so the projection is exactly what booking the request
// there would add to active_decode_blocks. Callers (the slot tracker) send
// hashes the node cannot check to chain, so a prefix would undercount what
// they share. Cost: O(hashes × ranks holding them).
func (s *Scheduler) ProjectLoads(key fsm.PartitionKey, seq []uint64, newTokens int64) ([]ProjectedLoad, error) {
	if newTokens < 0 || newTokens > MaxISLTokens {
		return nil, fmt.Errorf("%w: new tokens must be between 0 and %d, got %d", ErrInvalid, int64(MaxISLTokens), newTokens)
	}
	p := s.partition(key)
	if p == nil {
		return nil, fmt.Errorf("%w in %s", ErrNotReady, key)
	}
	distinct := seq
	if len(seq) > 1 {
		seen := make(map[uint64]struct{}, len(seq))
		distinct = make([]uint64, 0, len(seq))
		for _, h := range seq {
			if _, dup := seen[h]; !dup {
				seen[h] = struct{}{}
				distinct = append(distinct, h)
			}
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ranks) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNotReady, key)
	}
	if len(p.prefix) < p.slots {
		p.prefix = make([]int32, p.slots)
	}
	held := p.prefix[:p.slots] // per rank slot: the request's hashes it holds
	clear(held)
	for _, h := range distinct {
		if ab := p.active[h]; ab != nil {
			for _, hd := range ab.holders {
				held[hd.slot]++
			}
		}
	}
	now := s.now()
	out := make([]ProjectedLoad, len(p.ranks))
	for i, rl := range p.ranks {
		out[i] = ProjectedLoad{
			WorkerID: rl.key.Worker, DPRank: rl.key.Rank,
			PrefillTokens: rl.prefillAt(now) + newTokens,
			DecodeBlocks:  rl.decodeBlocks() + float64(len(distinct)-int(held[rl.slot])),
		}
	}
	return out, nil
}
