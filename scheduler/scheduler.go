package scheduler

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// Scheduler chooses worker ranks for prompts and tracks the active load of
// the requests booked on this node.
//
// Locking: mu guards the partition map; each partition's mu guards its
// ranks, load and reservations; resMu guards the node-wide reservation id
// index (and the tombstones of replica sync). Lock order: partition.mu, then resMu. Scheduler.mu is never held
// while taking a partition lock.
type Scheduler struct {
	cfg     Config
	idx     *indexer.Indexer
	now     func() time.Time
	log     *slog.Logger
	metrics *metrics

	mu    sync.RWMutex
	parts map[fsm.PartitionKey]*partition

	resMu    sync.Mutex
	resIndex map[string]*partition
	// capacity counts the bookings held against the node's bounds
	// (capacity.go); resMu guards it.
	capacity capacity

	pending *pendingSelections

	// Replica sync (replica.go): where this node's events go, as which
	// node; tombstones of early frees, guarded by resMu. Anti-entropy
	// (antientropy.go): the frees of other nodes' bookings their origin
	// has not confirmed, and the bookings asked of an origin, guarded by
	// aeMu (taken after a partition lock, never before one).
	publisher    Publisher
	nodeID       string
	tombstones   *tombstones
	aeMu         sync.Mutex
	pendingFrees *aeRecords
	wanted       *aeRecords

	handles atomic.Uint64

	// stale is the ranks this node does not select (SetStale), read when
	// a rank is created; the map is replaced, never changed.
	stale atomic.Pointer[map[indexer.RankKey]struct{}]

	// policies are the catalog's (SetPolicies), replaced whole;
	// defaultPolicy is the node's own, for what they do not cover.
	policies      atomic.Pointer[policyTable]
	defaultPolicy *resolvedPolicy
}

type partition struct {
	key fsm.PartitionKey

	mu        sync.Mutex
	blockSize uint32
	ranks     []*rankLoad // schedulable ranks by (worker, rank)
	byKey     map[indexer.RankKey]*rankLoad
	workers   map[uint64]*fsm.Worker // schedulable workers
	freeSlots []int
	slots     int
	// thresholds are the model's busy thresholds (busy.go).
	thresholds fsm.Thresholds

	active       map[uint64]*activeBlock
	reservations map[string]*reservation
	handles      map[uint64]*reservation
	fifo         *list.List // reservations in admission order

	rng *mrand.Rand
	// turn is the round-robin policy's counter.
	turn uint64
	// now is the scheduler's clock; defaultRate its default prefill
	// throughput (ttft.go).
	now         func() time.Time
	defaultRate float64
	noDecay     bool
	// rate is the partition's prefill throughput, from every rank's
	// samples (ttft.go).
	rate rateEstimate
	// scratch for one request, reused under mu
	prefix []int32
	cands  []Candidate
}

// New returns a scheduler reading overlaps from idx.
func New(cfg Config, idx *indexer.Indexer, log *slog.Logger) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	def, err := resolvePolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	return &Scheduler{
		defaultPolicy: def,
		cfg:           cfg, idx: idx, now: now, log: log.With("component", "scheduler"),
		metrics: newMetrics(), parts: map[fsm.PartitionKey]*partition{}, resIndex: map[string]*partition{},
		pending: newPendingSelections(), tombstones: newTombstones(),
		capacity:     newCapacity(cfg.MaxReservations, cfg.MaxReservedBlocks),
		pendingFrees: newAERecords(), wanted: newAERecords(),
	}, nil
}

// Config returns the scheduler's settings.
func (s *Scheduler) Config() Config { return s.cfg }

func (s *Scheduler) partition(key fsm.PartitionKey) *partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.parts[key]
}

func (s *Scheduler) newPartition(key fsm.PartitionKey) *partition {
	h := fnv.New64a()
	h.Write([]byte(key.String()))
	return &partition{
		key: key, byKey: map[indexer.RankKey]*rankLoad{}, workers: map[uint64]*fsm.Worker{},
		active: map[uint64]*activeBlock{}, reservations: map[string]*reservation{},
		handles: map[uint64]*reservation{}, fifo: list.New(),
		rng: mrand.New(mrand.NewPCG(s.cfg.Seed, h.Sum64())),
		now: s.now, defaultRate: s.cfg.DefaultTokensPerSecond, noDecay: s.cfg.NoPrefillDecay,
	}
}

// ApplyCatalog brings ranks in line with a catalog change: the
// partition's schedulable ranks (fsm.Partition.Ranks) become candidates;
// ranks of workers that left the catalog (or the rank range) lose their
// reservations; ranks of workers that are only incomplete stop being
// candidates but keep their load until it ends.
func (s *Scheduler) ApplyCatalog(ch *fsm.Change) {
	for _, key := range ch.Partitions {
		s.reconcilePartition(key, ch.Cur)
	}
	s.applyThresholds(ch)
}

func (s *Scheduler) reconcilePartition(key fsm.PartitionKey, cur *fsm.Catalog) {
	cp, inCatalog := cur.Partition(key)
	s.mu.Lock()
	p := s.parts[key]
	if p == nil {
		if !inCatalog {
			s.mu.Unlock()
			return
		}
		p = s.newPartition(key)
		s.parts[key] = p
	}
	s.mu.Unlock()

	p.mu.Lock()
	worker := func(id uint64) *fsm.Worker {
		if !inCatalog {
			return nil
		}
		w, ok := cur.Worker(id)
		if !ok || w.Partition() != key {
			return nil
		}
		return w
	}
	if inCatalog {
		p.blockSize = cp.BlockSize
	}
	p.thresholds, _ = cur.Thresholds(key.Model)
	for rk, rl := range p.byKey {
		w := worker(rk.Worker)
		if w == nil || !w.HasRank(rk.Rank) {
			s.dropRank(p, rl)
			continue
		}
		rl.worker, rl.schedulable = w, w.Schedulable()
	}
	p.ranks, p.workers = p.ranks[:0], map[uint64]*fsm.Worker{}
	if inCatalog {
		for _, rk := range cp.Ranks {
			w := worker(rk.Worker)
			p.workers[w.WorkerID] = w
			rl := p.byKey[rk]
			if rl == nil {
				rl = &rankLoad{key: rk, slot: p.allocSlot()}
				if stale := s.stale.Load(); stale != nil {
					_, rl.stale = (*stale)[rk] // read under p.mu: SetStale publishes before it visits
				}
				p.byKey[rk] = rl
			}
			rl.worker, rl.schedulable = w, true
			p.ranks = append(p.ranks, rl)
		}
	}
	empty := len(p.byKey) == 0
	p.mu.Unlock()

	if empty && !inCatalog {
		s.mu.Lock()
		if s.parts[key] == p {
			delete(s.parts, key)
		}
		s.mu.Unlock()
	}
}

// dropRank frees every reservation on the rank and forgets it.
func (s *Scheduler) dropRank(p *partition, rl *rankLoad) {
	var dropped []*reservation
	for e := p.fifo.Front(); e != nil; {
		next := e.Next()
		if res := e.Value.(*reservation); res.rank == rl {
			p.unbook(res)
			dropped = append(dropped, res)
		}
		e = next
	}
	s.forget(dropped...)
	delete(p.byKey, rl.key)
	p.freeSlots = append(p.freeSlots, rl.slot)
	if len(dropped) > 0 {
		s.log.Info("reservations dropped with their worker rank", "worker_id", rl.key.Worker,
			"dp_rank", rl.key.Rank, "count", len(dropped))
	}
}

func (p *partition) allocSlot() int {
	if n := len(p.freeSlots); n > 0 {
		slot := p.freeSlots[n-1]
		p.freeSlots = p.freeSlots[:n-1]
		return slot
	}
	p.slots++
	return p.slots - 1
}

// forget releases the ids and the capacity of ended reservations.
func (s *Scheduler) forget(ended ...*reservation) {
	if len(ended) == 0 {
		return
	}
	s.resMu.Lock()
	for _, r := range ended {
		delete(s.resIndex, r.id)
		s.capacity.release(r.origin != "", r.charged)
	}
	s.resMu.Unlock()
}

func compareRankKeys(a, b indexer.RankKey) int { return fsm.CompareRankKeys(a, b) }

// MaxISLTokens bounds a prompt's length in tokens. It is far above any
// model's context, and keeps sums of prefill tokens over any number of
// reservations this node can hold far from int64 overflow.
const MaxISLTokens = 1 << 32

// Prompt is the request input shared by every selection route: either the
// hash form (BlockHashes drive the index lookup, SequenceHashes the active
// load) or token ids, hashed here with the partition's block size.
type Prompt struct {
	BlockHashes    []uint64
	SequenceHashes []uint64
	ISL            int64
	Tokens         []uint32
	HasTokens      bool
	LoraName       string
	// derived: SequenceHashes were computed here from Tokens.
	derived bool
}

// resolve fills the hash form from tokens.
func (pr *Prompt) resolve(blockSize uint32) {
	if !pr.HasTokens {
		return
	}
	pr.BlockHashes = indexer.BlockHashes(pr.Tokens, int(blockSize), pr.LoraName)
	pr.SequenceHashes = indexer.SequenceHashes(pr.BlockHashes)
	pr.ISL = int64(len(pr.Tokens))
	pr.HasTokens = false
	pr.derived = true
}

// validate checks what every route needs of a resolved prompt.
func (pr *Prompt) validate() error {
	if pr.ISL <= 0 || pr.ISL > MaxISLTokens {
		return fmt.Errorf("%w: isl_tokens must be between 1 and %d, got %d", ErrInvalid, int64(MaxISLTokens), pr.ISL)
	}
	if len(pr.SequenceHashes) != len(pr.BlockHashes) && len(pr.BlockHashes) > 0 {
		return fmt.Errorf("%w: sequence_hashes has %d entries, block_hashes %d",
			ErrInvalid, len(pr.SequenceHashes), len(pr.BlockHashes))
	}
	return nil
}

// newReservationID returns a random (version 4) UUID.
func newReservationID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
