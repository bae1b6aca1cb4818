package kvsim

import (
	"fmt"
	"time"
)

// RankID names one engine rank: a worker and its data-parallel rank.
type RankID struct {
	WorkerID uint64 `json:"worker_id"`
	DPRank   uint32 `json:"dp_rank"`
}

// Fleet is the set of timed engines a TimedReplay serves, one per worker
// rank, in (worker, rank) order. Routers see it through its methods. A
// Fleet is for one replay: the replay fills its caches and queues. Its
// methods are for the replay's goroutine (the routers it calls), not for
// concurrent use.
type Fleet struct {
	cfg     EngineConfig
	ids     []RankID
	index   map[RankID]int
	engines []*engine
}

// NewFleet returns a fleet of workers × dpSize engines whose caches
// publish nothing (a pure simulation). Worker ids start at
// DefaultFirstWorkerID, as a Sim's do.
func NewFleet(cfg EngineConfig, workers, dpSize int) (*Fleet, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if workers < 1 || dpSize < 1 || workers*dpSize > MaxRanks {
		return nil, fmt.Errorf("%w: a fleet needs 1 to %d ranks, got %d workers × %d", ErrInvalidConfig, MaxRanks, workers, dpSize)
	}
	f := newFleet(cfg)
	for w := range workers {
		for r := range dpSize {
			f.add(RankID{WorkerID: DefaultFirstWorkerID + uint64(w), DPRank: uint32(r)}, newMemStore(cfg.CacheBlocks))
		}
	}
	return f, nil
}

// NewSimFleet returns a fleet over a running Sim's worker ranks: each
// engine keeps its blocks in the rank's cache, so every store and
// eviction is published as KV events the way Worker.Serve publishes them.
// The block size and cache size are the Sim's; cfg gives the rest.
func NewSimFleet(sim *Sim, cfg EngineConfig) (*Fleet, error) {
	cfg.BlockSize, cfg.CacheBlocks = sim.cfg.BlockSize, sim.cfg.CacheBlocks
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := newFleet(cfg)
	for _, w := range sim.workers {
		for r, rs := range w.ranks {
			f.add(RankID{WorkerID: w.id, DPRank: uint32(r)}, rs)
		}
	}
	return f, nil
}

func newFleet(cfg EngineConfig) *Fleet {
	return &Fleet{cfg: cfg, index: map[RankID]int{}}
}

func (f *Fleet) add(id RankID, store blockStore) {
	f.index[id] = len(f.ids)
	f.ids = append(f.ids, id)
	f.engines = append(f.engines, newEngine(f.cfg, store))
}

// Config returns the fleet's engine configuration (each engine's, unless
// SetEngineConfig gave one its own).
func (f *Fleet) Config() EngineConfig { return f.cfg }

// SetEngineConfig gives engine i timings and limits of its own (a slower
// or faster GPU in a mixed fleet). The block size and the cache size stay
// the fleet's: zero takes them, another value is an error, as is a zero
// field that the fleet's configuration does not fill. Call it before the
// replay.
func (f *Fleet) SetEngineConfig(i int, cfg EngineConfig) error {
	if i < 0 || i >= len(f.engines) {
		return fmt.Errorf("%w: engine %d of %d", ErrInvalidConfig, i, len(f.engines))
	}
	if (cfg.BlockSize != 0 && cfg.BlockSize != f.cfg.BlockSize) || (cfg.CacheBlocks != 0 && cfg.CacheBlocks != f.cfg.CacheBlocks) {
		return fmt.Errorf("%w: engine %d: block size and cache size are the fleet's (%d, %d)", ErrInvalidConfig, i, f.cfg.BlockSize, f.cfg.CacheBlocks)
	}
	cfg.BlockSize, cfg.CacheBlocks = f.cfg.BlockSize, f.cfg.CacheBlocks
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("engine %d: %w", i, err)
	}
	f.engines[i].cfg = cfg
	return nil
}

// EngineConfig returns engine i's configuration.
func (f *Fleet) EngineConfig(i int) EngineConfig { return f.engines[i].cfg }

// Len is the number of engine ranks.
func (f *Fleet) Len() int { return len(f.ids) }

// Rank returns the id of engine i.
func (f *Fleet) Rank(i int) RankID { return f.ids[i] }

// Index returns the engine of a worker rank.
func (f *Fleet) Index(id RankID) (int, bool) {
	i, ok := f.index[id]
	return i, ok
}

// Active is the number of requests on engine i, waiting or running.
func (f *Fleet) Active(i int) int { return f.engines[i].active() }

// CachedPrefix is how many leading blocks of the request's prompt engine
// i holds now. It does not touch the cache (a look only a router that sees every cache has).
func (f *Fleet) CachedPrefix(i int, req *TimedRequest) int {
	return f.engines[i].store.prefix(req.chain)
}

// CachedBlocks is the number of blocks engine i caches.
func (f *Fleet) CachedBlocks(i int) int { return f.engines[i].store.len() }

// TimedRequest is one trace request in a timed replay. Routers read it;
// the replay fills in the rest as it runs. Times are offsets from the
// replay's start, in virtual (or, with Realtime, wall-clock) time.
type TimedRequest struct {
	// Index is the request's position in the trace.
	Index int
	// Arrival is the trace timestamp divided by the replay's speed.
	Arrival time.Duration
	// Tokens is the prompt (TraceTokens); released when the request ends.
	Tokens []uint32
	// OutputLength is the number of tokens to generate, at least 1.
	OutputLength int
	// Rank is the engine the router chose (-1 before routing).
	Rank int
	// Admitted is when the engine took the request into its running
	// batch; HitTokens is how much of the prompt its cache held then.
	Admitted  time.Duration
	HitTokens int
	// FirstToken is when the prefill ended; Done when the last token is out.
	FirstToken, Done time.Duration

	chain []uint64 // engine block hashes of Tokens
}
