package ingest

import (
	"cmp"
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/zmqx"
)

// Config tunes the listeners. Zero values take the defaults.
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
	// QueueLen is how many live messages a listener buffers while it
	// replays; past that the socket pushes back. Default 4096.
	QueueLen int
	Logger   *slog.Logger
}

func (c *Config) defaults() {
	if c.Threads <= 0 {
		c.Threads = runtime.GOMAXPROCS(0)
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 100 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(5*time.Second, c.BackoffMin)
	}
	if c.ReplayTimeout <= 0 {
		c.ReplayTimeout = 10 * time.Second
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
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
	listeners map[indexer.RankKey]*listener
}

// New returns a manager with no listeners; ApplyCatalog starts them.
func New(ix *indexer.Indexer, cfg Config) *Manager {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		ix: ix, cfg: cfg, log: cfg.Logger.With("component", "ingest"),
		metrics: newMetrics(), sem: make(chan struct{}, cfg.Threads),
		ctx: ctx, cancel: cancel, listeners: map[indexer.RankKey]*listener{},
	}
}

func (m *Manager) acquire() { m.sem <- struct{}{} }
func (m *Manager) release() { <-m.sem }

// ApplyCatalog brings the listeners in line with the catalog cur. It runs
// after the indexer's ApplyCatalog, so a new rank exists in the index
// before its first event arrives. A listener whose endpoint changed is
// stopped, its rank cleared (a new endpoint is a new engine, with its own
// blocks and sequence numbers), and started again.
func (m *Manager) ApplyCatalog(_, cur *fsm.Catalog) {
	want := desired(cur, m.log)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for rk, l := range m.listeners {
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
		l := newListener(m, sp)
		m.listeners[rk] = l
		l.start(m.ctx)
	}
}

// desired lists the listeners the catalog calls for: every rank of every
// schedulable worker (the ranks the indexer indexes).
func desired(c *fsm.Catalog, log *slog.Logger) map[indexer.RankKey]spec {
	out := map[indexer.RankKey]spec{}
	for _, w := range c.Workers("", "") {
		if !w.Schedulable() {
			continue
		}
		for _, rank := range w.Ranks() {
			rk := indexer.RankKey{Worker: w.WorkerID, Rank: rank}
			sp := spec{rk: rk, endpoint: w.KVEventsEndpoints[rank]}
			if w.ReplayEndpoint != "" {
				ep, err := zmqx.RankEndpoint(w.ReplayEndpoint, rank)
				if err != nil {
					log.Warn("no replay endpoint for rank", "worker_id", w.WorkerID, "dp_rank", rank, "err", err)
				}
				sp.replay = ep
			}
			out[rk] = sp
		}
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
		<-l.done
	}
}

// State of a listener.
type State string

const (
	StateConnecting State = "connecting"
	StateActive     State = "active"
	StateFailed     State = "failed"
	stateStopped    State = "stopped"
)

// RankStatus is what /workers and /ready show for one rank's listener.
type RankStatus struct {
	State            State  `json:"state"`
	LastError        string `json:"last_error,omitempty"`
	Endpoint         string `json:"endpoint"`
	ReplayEndpoint   string `json:"replay_endpoint,omitempty"`
	HasSeq           bool   `json:"-"`
	LastSeq          uint64 `json:"last_seq"`
	Messages         uint64 `json:"messages"`
	Gaps             uint64 `json:"gaps"`
	LostMessages     uint64 `json:"lost_messages"`
	Restarts         uint64 `json:"restarts"`
	ReplayFailures   uint64 `json:"replay_failures"`
	DroppedFrames    uint64 `json:"dropped_frames"`
	DroppedMalformed uint64 `json:"dropped_malformed"`
}

// Status returns the listener status of each of a worker's ranks, keyed
// by rank as a string (as kv_events_endpoints is); nil when the worker
// has no listeners (unknown or not schedulable).
func (m *Manager) Status(worker uint64) map[string]RankStatus {
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
	out := make(map[string]RankStatus, len(ls))
	for _, l := range ls {
		out[strconv.FormatUint(uint64(l.spec.rk.Rank), 10)] = l.snapshot()
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
