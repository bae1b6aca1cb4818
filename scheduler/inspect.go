package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// RankLoad is one rank's active load.
type RankLoad struct {
	WorkerID            uint64
	DPRank              uint32
	ActivePrefillTokens int64
	ActiveDecodeBlocks  float64
	ActiveRequests      int
	// Busy says the rank is over one of its model's busy thresholds.
	Busy bool
}

// PartitionLoads is GET /loads for one partition.
type PartitionLoads struct {
	Partition fsm.PartitionKey
	Loads     []RankLoad
}

// Loads returns the active load of every known rank (schedulable or still
// carrying reservations), by partition and rank, filtered by the non-empty
// model and tenant.
func (s *Scheduler) Loads(model, tenant string) []PartitionLoads {
	s.mu.RLock()
	var parts []*partition
	for k, p := range s.parts {
		if (model == "" || k.Model == model) && (tenant == "" || k.Tenant == tenant) {
			parts = append(parts, p)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(parts, func(a, b *partition) int {
		return cmp.Or(cmp.Compare(a.key.Model, b.key.Model), cmp.Compare(a.key.Tenant, b.key.Tenant))
	})
	out := make([]PartitionLoads, 0, len(parts))
	now := s.now()
	for _, p := range parts {
		p.mu.Lock()
		pl := PartitionLoads{Partition: p.key, Loads: make([]RankLoad, 0, len(p.byKey))}
		for _, rl := range p.byKey {
			v := rl.view(now)
			v.Busy = p.thresholds.Set() && s.rankBusy(&p.thresholds, rl, v.ActivePrefillTokens, s.trackPrefill(s.partitionPolicy(p.key)))
			pl.Loads = append(pl.Loads, v)
		}
		p.mu.Unlock()
		slices.SortFunc(pl.Loads, func(a, b RankLoad) int {
			return cmp.Or(cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DPRank, b.DPRank))
		})
		out = append(out, pl)
	}
	return out
}

func (rl *rankLoad) view(now time.Time) RankLoad {
	return RankLoad{
		WorkerID: rl.key.Worker, DPRank: rl.key.Rank, ActivePrefillTokens: rl.prefillAt(now),
		ActiveDecodeBlocks: rl.decodeBlocks(), ActiveRequests: rl.requests,
	}
}

// PotentialLoad is one row of /potential_loads.
type PotentialLoad struct {
	WorkerID               uint64
	DPRank                 uint32
	PotentialPrefillTokens int64
	PotentialDecodeBlocks  float64
	ActiveRequests         int
}

// PotentialLoads projects the load of every schedulable rank if the prompt
// were booked on it.
func (s *Scheduler) PotentialLoads(key fsm.PartitionKey, pr Prompt) ([]PotentialLoad, error) {
	var out []PotentialLoad
	err := s.withScores(key, &pr, func(_ *partition, cands []Candidate) {
		out = make([]PotentialLoad, len(cands))
		for i, c := range cands {
			out[i] = PotentialLoad{WorkerID: c.rank.key.Worker, DPRank: c.rank.key.Rank,
				PotentialPrefillTokens: c.potentialPrefill, PotentialDecodeBlocks: c.potentialDecode,
				ActiveRequests: c.Requests}
		}
	})
	return out, err
}

// OverlapRow is one schedulable rank's tiered match, in blocks: the device
// prefix, then the further blocks found on host after it (HostExt), then
// the further ones found on disk after those (DiskExt).
type OverlapRow struct {
	WorkerID     uint64
	DPRank       uint32
	DeviceBlocks uint32
	HostExt      uint32
	DiskExt      uint32
	CreditBlocks float64
}

// OverlapScores is the answer of /overlap_scores.
type OverlapScores struct {
	BlockSize uint32
	NumBlocks int
	Rows      []OverlapRow
}

// OverlapScores reports every schedulable rank's match for the prompt.
func (s *Scheduler) OverlapScores(key fsm.PartitionKey, pr Prompt) (OverlapScores, error) {
	var out OverlapScores
	err := s.withScores(key, &pr, func(p *partition, cands []Candidate) {
		out = OverlapScores{BlockSize: p.blockSize, NumBlocks: len(pr.BlockHashes), Rows: make([]OverlapRow, len(cands))}
		for i, c := range cands {
			out.Rows[i] = OverlapRow{WorkerID: c.rank.key.Worker, DPRank: c.rank.key.Rank,
				DeviceBlocks: c.DeviceBlocks, HostExt: c.HostExt, DiskExt: c.DiskExt,
				CreditBlocks: float64(c.DeviceBlocks) + c.lower}
		}
	})
	return out, err
}

// withScores scores the prompt against every schedulable rank and hands
// the candidates to fn under the partition lock.
func (s *Scheduler) withScores(key fsm.PartitionKey, pr *Prompt, fn func(*partition, []Candidate)) error {
	p := s.partition(key)
	if p == nil {
		return fmt.Errorf("%w in %s", ErrNotReady, key)
	}
	overlaps, err := s.match(p, pr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ranks) == 0 {
		return fmt.Errorf("%w in %s", ErrNotReady, key)
	}
	fn(p, s.score(p, pr, overlaps, s.trackPrefill(s.partitionPolicy(p.key))))
	return nil
}

// Schedulable reports how many ranks are candidates in the partition.
func (s *Scheduler) Schedulable(key fsm.PartitionKey) int {
	p := s.partition(key)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ranks)
}
