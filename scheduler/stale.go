package scheduler

import "github.com/kvselect/kvselect/indexer"

// SetStale replaces the set of ranks this node judges stale: their KV
// event listener has been down longer than --stale-listener-after, so the
// index no longer follows their cache (SPEC §3.7). A stale rank is not
// selected here; it stays in the catalog, keeps its reservations and
// load, and is selected again once its listener is back. The judgement is
// local: other nodes may still reach the worker.
func (s *Scheduler) SetStale(stale map[indexer.RankKey]struct{}) {
	s.stale.Store(&stale) // before the visits: a rank created meanwhile reads it under p.mu
	s.mu.RLock()
	parts := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		parts = append(parts, p)
	}
	s.mu.RUnlock()
	for _, p := range parts {
		p.mu.Lock()
		for k, rl := range p.byKey {
			_, rl.stale = stale[k]
		}
		p.mu.Unlock()
	}
}
