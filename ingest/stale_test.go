package ingest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/indexer"
)

// A rank is stale once its listener has been down (never through, or
// failing since it was last active) longer than StaleAfter; a live one
// never is, whatever the clock says. Staleness is only shown: the
// listener keeps retrying.
func TestStaleRanks(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	p := newTestPub(t, true)
	h := newHarnessWith(t, func(c *Config) { c.StaleAfter = 30 * time.Second; c.Now = clock })
	h.register(1, p.endpoint, p.replayEP)
	h.register(2, fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), "") // nobody listens
	eventually(t, "worker 1 active, worker 2 failing", func() bool {
		return h.status(1).State == StateActive && h.status(2).State == StateFailed
	})
	if got := h.m.StaleRanks(); got != nil {
		t.Fatalf("stale before StaleAfter: %v", got)
	}
	if st := h.status(2); st.DownSince.IsZero() || st.Stale {
		t.Fatalf("worker 2 down since %v, stale %v", st.DownSince, st.Stale)
	}
	advance(31 * time.Second)
	got := h.m.StaleRanks()
	if _, ok := got[indexer.RankKey{Worker: 2}]; !ok || len(got) != 1 {
		t.Fatalf("stale ranks %v, want worker 2 rank 0 only", got)
	}
	if st := h.status(1); st.Stale || !st.DownSince.IsZero() {
		t.Fatalf("an active listener counts as down: %+v", st)
	}
	if st := h.status(2); !st.Stale {
		t.Fatalf("worker 2 not stale: %+v", st)
	}
}
