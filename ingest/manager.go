package ingest

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/zmqx"
)

// Config tunes the listeners. Zero values take DefaultConfig's
// (config.go); Validate says what else is refused.
type Config struct {
	// Threads bounds how many listeners decode and apply at once
	// (--threads); 0 means GOMAXPROCS.
	Threads int
	// BackoffMin and BackoffMax bound the reconnect delay (doubling, with
	// up to 20% jitter). Defaults 100ms and 5s.
	BackoffMin, BackoffMax time.Duration
	// ReplayTimeout bounds one replay request, end marker included.
	// Default 10s.
	ReplayTimeout time.Duration
	// QueueLen and QueueBytes bound the live messages a listener buffers
	// while it replays or applies: past either, new live messages are
	// dropped, counted (kvselect_kv_messages_total{status=
	// "dropped_queue_full"}) and recovered as a gap. Defaults 4096
	// messages and 64 MiB; one message larger than QueueBytes is still
	// taken into an empty queue.
	QueueLen   int
	QueueBytes int64
	// Hold keeps listeners from starting until Release: the manager tracks
	// the listeners the catalog calls for (they show as connecting) but
	// starts none, so a node can first load its index from a peer's dump
	// and set the watermarks each listener then replays from.
	Hold bool
	// Dial maps a registered endpoint's host:port to the one dialed
	// instead (--kv-dial, fault injection; see ParseDial).
	Dial map[string]string
	// StaleAfter is how long a rank's listener may stay down (not
	// connected: failed, or retrying, or never through) before the
	// rank counts as stale: shown so and not selected by this node
	// (SPEC §3.7, --stale-listener-after). Default 30s.
	StaleAfter time.Duration
	// Now is the clock staleness is judged by (tests); nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Manager runs one listener per (worker, rank) of every schedulable worker
// in the catalog, feeding the indexer. It is a catalog observer: each
// catalog change starts, restarts or stops listeners to match.
type Manager struct {
	ix      *indexer.Indexer
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	sem     chan struct{}

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	held      bool // listeners are tracked but not started (Config.Hold) until Release
	listeners map[indexer.RankKey]*listener

	misordered atomic.Uint64 // listeners started for ranks the index did not know
}

// Misordered counts listeners started for a rank the index did not know
// yet: a catalog change delivered to the listeners before the indexer. It
// stays 0 on a correctly wired node (tests check it).
func (m *Manager) Misordered() uint64 { return m.misordered.Load() }

// New returns a manager with no listeners; ApplyCatalog starts them. The
// owner checks cfg with Validate first (server.Start does).
func New(ix *indexer.Indexer, cfg Config) *Manager {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		ix: ix, cfg: cfg, log: cfg.Logger.With("component", "ingest"),
		metrics: newMetrics(), sem: make(chan struct{}, cfg.Threads),
		ctx: ctx, cancel: cancel, listeners: map[indexer.RankKey]*listener{}, held: cfg.Hold,
	}
}

// Release starts the listeners held since New (Config.Hold), each from its
// rank's watermark as the index holds it now, and every later one at
// once. It is idempotent, and a no-op after Close.
func (m *Manager) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held || m.closed {
		return
	}
	m.held = false
	for _, l := range m.listeners {
		l.start(m.ctx)
	}
	m.log.Info("kv event listeners released", "listeners", len(m.listeners))
}

// Held reports whether listeners are still held (Config.Hold, no Release
// yet).
func (m *Manager) Held() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

func (m *Manager) acquire() { m.sem <- struct{}{} }
func (m *Manager) release() { <-m.sem }

// ApplyCatalog brings the listeners of the changed workers in line with
// the catalog: one per dp rank of each schedulable worker (the ranks the
// indexer indexes). The node's catalog observer calls it after the
// indexer's, so a new rank exists in the index before its first event
// arrives. A listener whose endpoint changed is stopped, its rank cleared
// (a new endpoint is a new engine, with its own blocks and sequence
// numbers), and started again.
func (m *Manager) ApplyCatalog(ch *fsm.Change) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, wc := range ch.Workers {
		want := m.specs(ch.Cur, wc.New)
		for rk, l := range m.listeners {
			if rk.Worker != wc.ID() {
				continue
			}
			sp, ok := want[rk]
			if ok && sp == l.spec {
				continue
			}
			l.stop()
			delete(m.listeners, rk)
			if ok && sp.endpoint != l.spec.endpoint {
				if _, err := m.ix.Apply(rk, indexer.Batch{Reset: true}); err == nil {
					m.log.Info("kv events endpoint changed; rank cleared", "worker_id", rk.Worker, "dp_rank", rk.Rank,
						"old", l.spec.endpoint, "new", sp.endpoint)
				}
			}
		}
		for rk, sp := range want {
			if _, ok := m.listeners[rk]; ok {
				continue
			}
			if _, ok := m.ix.BlockSize(rk); !ok {
				// The node delivers catalog changes to the index first; a
				// rank it does not know would drop this listener's events.
				m.misordered.Add(1)
				m.log.Error("catalog change reached the listeners before the index (wiring bug); events of this rank are dropped until it is indexed",
					"worker_id", rk.Worker, "dp_rank", rk.Rank)
			}
			l := newListener(m, sp)
			m.listeners[rk] = l
			if !m.held {
				l.start(m.ctx)
			}
		}
	}
}

// specs lists the listeners a worker record calls for: one per rank of it
// that the catalog schedules (fsm.Partition.Ranks, the set the indexer and
// the scheduler follow too), none when it is not schedulable or deleted.
func (m *Manager) specs(cur *fsm.Catalog, w *fsm.Worker) map[indexer.RankKey]spec {
	out := map[indexer.RankKey]spec{}
	if w == nil {
		return out
	}
	cp, ok := cur.Partition(w.Partition())
	if !ok {
		return out
	}
	for _, rk := range cp.WorkerRanks(w.WorkerID) {
		sp := spec{rk: rk, endpoint: w.KVEventsEndpoints[rk.Rank]}
		if w.ReplayEndpoint != "" {
			ep, err := zmqx.RankEndpoint(w.ReplayEndpoint, rk.Rank)
			if err != nil {
				m.log.Warn("no replay endpoint for rank", "worker_id", w.WorkerID, "dp_rank", rk.Rank, "err", err)
			}
			sp.replay = ep
		}
		out[rk] = sp
	}
	return out
}

// Close stops every listener and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	ls := make([]*listener, 0, len(m.listeners))
	for _, l := range m.listeners {
		ls = append(ls, l)
	}
	m.listeners = map[indexer.RankKey]*listener{}
	m.mu.Unlock()
	m.cancel()
	for _, l := range ls {
		l.wait()
	}
}

// State of a listener; the values are the API's (api.Listener*).
type State string

const (
	StateConnecting State = api.ListenerConnecting
	StateActive     State = api.ListenerActive
	StateFailed     State = api.ListenerFailed
	stateStopped    State = "stopped" // never shown: a stopped listener is gone
	// stateStale is how the listener-state metric counts a listener judged
	// stale (RankStatus.Stale); its State goes on saying what it does.
	stateStale State = api.ListenerStale
)

// RankStatus is one rank's listener state and counters, as /workers and
// /ready show them (api.ListenerStatus).
type RankStatus struct {
	State            State
	LastError        string
	Endpoint         string
	ReplayEndpoint   string
	HasSeq           bool
	LastSeq          uint64
	Messages         uint64
	Gaps             uint64
	LostMessages     uint64
	Restarts         uint64
	ReplayFailures   uint64
	DroppedFrames    uint64
	DroppedMalformed uint64
	// Live messages dropped because the queue was full (then replayed or
	// counted lost), frames past the size limit (each cut the
	// connection), and replay replies refused (outside the asked range or
	// out of order; each failed its replay).
	DroppedQueueFull uint64
	DroppedOversize  uint64
	ReplayRejected   uint64
	// The live queue now, and the most bytes it has held.
	QueuedMessages  int
	QueuedBytes     int64
	QueuedBytesPeak int64
	// DownSince is when the listener started (not while held) or last
	// stopped being active (zero while it is active); Stale is the last
	// JudgeStale's verdict: down longer than Config.StaleAfter. A
	// listener that gets through and drops again at once restarts the
	// count each time.
	DownSince time.Time
	Stale     bool
}

// Status returns the listener status of each of a worker's ranks; nil
// when the worker has no listeners (unknown or not schedulable).
func (m *Manager) Status(worker uint64) map[uint32]RankStatus {
	m.mu.Lock()
	var ls []*listener
	for rk, l := range m.listeners {
		if rk.Worker == worker {
			ls = append(ls, l)
		}
	}
	m.mu.Unlock()
	if len(ls) == 0 {
		return nil
	}
	out := make(map[uint32]RankStatus, len(ls))
	for _, l := range ls {
		out[l.spec.rk.Rank] = l.snapshot()
	}
	return out
}

// JudgeStale judges which ranks' listeners have been down longer than
// Config.StaleAfter, records the verdict where /workers, /ready and the
// listener-state metric read it (RankStatus.Stale,
// kvselect_kv_listeners{state="stale"}), and returns the stale ranks for
// the scheduler (nil when there are none). One verdict serves the three
// views, so they agree with what the node selects until the next
// judgement; a listener back up stays stale until then. This is the
// node's local judgement, which never changes the catalog (SPEC §3.7).
func (m *Manager) JudgeStale() map[indexer.RankKey]struct{} {
	m.mu.Lock()
	defer m.mu.Unlock() // held: a listener stopped meanwhile must not be counted again
	now := m.cfg.Now()
	var out map[indexer.RankKey]struct{}
	for rk, l := range m.listeners {
		stale := l.downTooLong(now)
		l.judge(stale)
		if stale {
			if out == nil {
				out = map[indexer.RankKey]struct{}{}
			}
			out[rk] = struct{}{}
		}
	}
	return out
}

// Ranks returns the ranks that have a listener, sorted (for tests and
// inspection).
func (m *Manager) Ranks() []indexer.RankKey {
	m.mu.Lock()
	out := make([]indexer.RankKey, 0, len(m.listeners))
	for rk := range m.listeners {
		out = append(out, rk)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b indexer.RankKey) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Rank, b.Rank))
	})
	return out
}
