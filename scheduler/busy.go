package scheduler

import "github.com/kvselect/kvselect/fsm"

// Load shedding (SPEC §8, seed 001). A rank is busy when its active load
// exceeds one of its model's thresholds: active decode blocks above the
// fraction ActiveDecodeBlocks of the worker's total_kv_blocks, or active
// prefill tokens above ActivePrefillTokens. A threshold whose input is
// unknown is not checked: the decode fraction without total_kv_blocks, the
// prefill count when prefill tokens are not tracked. A worker is busy only
// when all its schedulable ranks are; busy workers are not candidates,
// and when every schedulable worker is busy a selection fails with
// ErrOverloaded.
//
// The load is this node's view: its own bookings and those replica sync
// brought from the other nodes. The thresholds are the catalog's, so every
// node sheds alike for the same load.

// rankBusy reports whether a rank is over one of the thresholds t, with
// prefill its active prefill tokens as settled by the caller (prefillAt).
// Called with the rank's partition lock held.
func (s *Scheduler) rankBusy(t *fsm.Thresholds, rl *rankLoad, prefill int64, track bool) bool {
	if d := t.ActiveDecodeBlocks; d != nil && rl.worker != nil && rl.worker.TotalKVBlocks > 0 &&
		rl.decodeBlocks() > *d*float64(rl.worker.TotalKVBlocks) {
		return true
	}
	if pt := t.ActivePrefillTokens; pt != nil && track {
		if prefill > 0 && uint64(prefill) > *pt {
			return true
		}
	}
	return false
}

// shed drops from cands (sorted by worker, then rank, as p.ranks is) every
// rank of a busy worker, in place. Called with p.mu held.
func (s *Scheduler) shed(p *partition, cands []Candidate, track bool) []Candidate {
	if !p.thresholds.Set() {
		return cands
	}
	out := cands[:0]
	for i := 0; i < len(cands); {
		j, busy := i, true
		for ; j < len(cands) && cands[j].rank.key.Worker == cands[i].rank.key.Worker; j++ {
			busy = busy && s.rankBusy(&p.thresholds, cands[j].rank, cands[j].PrefillTokens, track)
		}
		if !busy {
			out = append(out, cands[i:j]...)
		}
		i = j
	}
	return out
}

// Unchecked lists the thresholds of t that cannot be checked for worker w
// on this node, with why; /workers shows them with the worker.
func (s *Scheduler) Unchecked(t fsm.Thresholds, w *fsm.Worker) []string {
	var out []string
	if t.ActiveDecodeBlocks != nil && w.TotalKVBlocks == 0 {
		out = append(out, "active_decode_blocks_threshold not checked: total_kv_blocks is unknown")
	}
	if t.ActivePrefillTokens != nil && !s.trackPrefill(s.partitionPolicy(w.Partition())) {
		out = append(out, "active_prefill_tokens_threshold not checked: prefill tokens are not tracked (track-prefill-tokens is off)")
	}
	return out
}

// applyThresholds gives every partition of the changed models their new
// thresholds.
func (s *Scheduler) applyThresholds(ch *fsm.Change) {
	if len(ch.Thresholds) == 0 {
		return
	}
	changed := make(map[string]bool, len(ch.Thresholds))
	for _, m := range ch.Thresholds {
		changed[m] = true
	}
	s.mu.RLock()
	var parts []*partition
	for k, p := range s.parts {
		if changed[k.Model] {
			parts = append(parts, p)
		}
	}
	s.mu.RUnlock()
	for _, p := range parts {
		t, _ := ch.Cur.Thresholds(p.key.Model)
		p.mu.Lock()
		p.thresholds = t
		p.mu.Unlock()
	}
}
