package ingest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

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
	if got := h.m.JudgeStale(); got != nil {
		t.Fatalf("stale before StaleAfter: %v", got)
	}
	if st := h.status(2); st.DownSince.IsZero() || st.Stale {
		t.Fatalf("worker 2 down since %v, stale %v", st.DownSince, st.Stale)
	}
	advance(31 * time.Second)
	if st := h.status(2); st.Stale {
		t.Fatalf("worker 2 stale before any judgement: %+v", st)
	}
	got := h.m.JudgeStale()
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

// The listener-state metric counts a stale listener as stale, not as
// failed or connecting, from the judgement that found it stale to the one
// that finds it back (the verdict the scheduler selects by), and forgets
// it when the listener stops.
func TestStaleListenerStateMetric(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	p := newTestPub(t, false)
	h := newHarnessWith(t, func(c *Config) { c.StaleAfter = 30 * time.Second; c.Now = clock })
	gauges := func() map[State]float64 {
		out := map[State]float64{}
		for _, s := range []State{StateConnecting, StateActive, StateFailed, stateStale} {
			out[s] = gather(t, h.m.Collectors(), "kvselect_kv_listeners", string(s))
		}
		return out
	}
	// down counts connecting and failed alike: a retrying listener may be
	// in either when the gauges are read.
	down := func(g map[State]float64) float64 { return g[StateConnecting] + g[StateFailed] }
	h.register(1, p.endpoint, "")
	h.register(2, fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), "") // nobody listens
	eventually(t, "worker 1 active", func() bool { return h.status(1).State == StateActive })

	p.pub.Close() // the engine goes away
	eventually(t, "worker 1 down", func() bool { return h.status(1).State != StateActive })
	advance(31 * time.Second)
	h.m.JudgeStale()
	if g := gauges(); g[stateStale] != 2 || down(g) != 0 || g[StateActive] != 0 {
		t.Fatalf("after judging both stale: gauges %v, want stale 2 and nothing else", g)
	}

	p.pub = zmq4.NewPub(p.ctx) // the engine is back on the same address
	if err := p.pub.Listen(p.endpoint); err != nil {
		t.Fatalf("listen again on %s: %v", p.endpoint, err)
	}
	eventually(t, "worker 1 active again", func() bool { return h.status(1).State == StateActive })
	if st, g := h.status(1), gauges(); !st.Stale || g[stateStale] != 2 {
		t.Fatalf("worker 1 back before the next judgement: stale %v, gauges %v; want it still stale as the scheduler sees it", st.Stale, g)
	}
	got := h.m.JudgeStale()
	if _, ok := got[indexer.RankKey{Worker: 2}]; !ok || len(got) != 1 {
		t.Fatalf("stale ranks %v, want worker 2 rank 0 only", got)
	}
	if g := gauges(); g[stateStale] != 1 || g[StateActive] != 1 || down(g) != 0 {
		t.Fatalf("after worker 1 came back: gauges %v, want stale 1, active 1", g)
	}

	h.remove(2)
	if g := gauges(); g[stateStale] != 0 || g[StateActive] != 1 || down(g) != 0 {
		t.Fatalf("after removing stale worker 2: gauges %v, want active 1 only", g)
	}
}
