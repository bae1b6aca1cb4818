package ingest

import (
	"testing"

	"github.com/kvselect/kvselect/indexer"
)

// TestHeldListenersStartFromTheRecoveredWatermark: with Config.Hold, a
// registered rank's listener is tracked but not started; once the index
// holds a watermark (as a recovery from a peer's dump sets it), Release
// starts it, and it replays from watermark+1, not from 0.
func TestHeldListenersStartFromTheRecoveredWatermark(t *testing.T) {
	h := newHarnessWith(t, func(c *Config) { c.Hold = true })
	p := newTestPub(t, true)
	a, b, c := blockTokens(1, 1), blockTokens(2, 1), blockTokens(3, 1)
	// Published before anyone subscribed: only a replay delivers them.
	p.publish(0, storedPayload(t, []uint64{10}, nil, a), false)
	p.publish(1, storedPayload(t, []uint64{11}, nil, b), false)
	p.publish(2, storedPayload(t, []uint64{12}, nil, c), false)
	h.register(1, p.endpoint, p.replayEP)
	if !h.m.Held() {
		t.Fatal("manager not held")
	}
	if st := h.status(1); st.State != StateConnecting || st.Messages != 0 {
		t.Fatalf("held listener status %+v, want connecting with nothing applied", st)
	}
	// The recovered index says seq 1 is applied (its blocks would have come
	// with the dump; leaving them out shows what the replay fetched).
	rk := indexer.RankKey{Worker: 1}
	if !h.ix.SetWatermark(rk, 1) {
		t.Fatal("rank not indexed")
	}
	h.m.Release()
	h.m.Release() // idempotent
	h.waitSeq(1, 2)
	if h.held(1, a) != 0 || h.held(1, b) != 0 || h.held(1, c) != 1 {
		t.Fatalf("after release: a %d b %d c %d, want 0 0 1", h.held(1, a), h.held(1, b), h.held(1, c))
	}
	// A worker registered after the release starts at once.
	q := newTestPub(t, true)
	q.publish(0, storedPayload(t, []uint64{20}, nil, a), false)
	h.register(2, q.endpoint, q.replayEP)
	h.waitSeq(2, 0)
}

// TestCloseWhileHeld: a manager that never released its listeners still
// closes, and Release after Close starts nothing.
func TestCloseWhileHeld(t *testing.T) {
	h := newHarnessWith(t, func(c *Config) { c.Hold = true })
	p := newTestPub(t, true)
	h.register(1, p.endpoint, p.replayEP)
	h.register(1, p.endpoint, "") // a change stops a held listener too
	h.m.Close()
	h.m.Release()
	if ranks := h.m.Ranks(); len(ranks) != 0 {
		t.Fatalf("listeners after close: %v", ranks)
	}
}
