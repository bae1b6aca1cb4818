package indexer

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/kvselect/kvselect/fsm"
)

// Indexer holds one prefix index per partition and applies KV cache events
// to it. Which ranks exist follows the catalog (ApplyCatalog): only ranks of
// schedulable workers are indexed, and events for any other rank are
// dropped.
//
// Locking: mu guards the partition maps. Each partition has two locks of
// its own (see partition), so applies to one partition never block
// matches on another, and within a partition a match waits for at most
// one bounded step of an apply. Lock order is Indexer.mu, then
// partition.apply, then partition.mu.
type Indexer struct {
	mu       sync.RWMutex
	parts    map[fsm.PartitionKey]*partition
	byWorker map[uint64]*partition
	metrics  *metrics
	log      *slog.Logger
}

// partition is one index with its locks. apply serialises every change
// of the partition (a whole batch, dump batch, catalog change or
// compaction); dumps, watermarks and block sizes are read under it. mu is
// the match lock, a plain sync.RWMutex: Match (and Stats) hold it shared;
// a writer, holding apply, holds it exclusively only while it changes
// what Match reads, in steps of at most stepChanges membership changes
// (writeSteps). What Match reads thus changes only under both, so either
// one keeps it still; the rest (engine-hash tables, watermarks) changes
// under apply alone.
type partition struct {
	key       fsm.PartitionKey
	apply     sync.Mutex
	mu        sync.RWMutex
	blockSize uint32
	ix        *partIndex
	workers   map[uint64][]uint32 // indexed worker → its ranks
}

func newPartition(key fsm.PartitionKey, blockSize uint32) *partition {
	p := &partition{key: key, blockSize: blockSize, workers: map[uint64][]uint32{}}
	p.ix = p.newIndex()
	return p
}

// newIndex returns an empty index that steps under p's match lock.
func (p *partition) newIndex() *partIndex {
	ix := newPartIndex()
	ix.steps.mu = &p.mu
	return ix
}

// lockApply takes p.apply; unlockApply ends any step the writer still
// holds and releases it.
func (p *partition) lockApply() { p.apply.Lock() }

func (p *partition) unlockApply() {
	p.ix.steps.release()
	p.apply.Unlock()
}

// New returns an empty indexer.
func New(log *slog.Logger) *Indexer {
	if log == nil {
		log = slog.Default()
	}
	return &Indexer{
		parts:    map[fsm.PartitionKey]*partition{},
		byWorker: map[uint64]*partition{},
		metrics:  newMetrics(),
		log:      log.With("component", "indexer"),
	}
}

// Batch is one message's worth of events for one rank.
type Batch struct {
	// Seq is the rank's sequence number of this batch; with HasSeq it
	// becomes the rank's watermark.
	Seq    uint64
	HasSeq bool
	Events []Event
	// Reset clears the rank (its blocks and watermark) before the events
	// apply, in the same critical section: an engine restart.
	Reset bool
}

// Apply applies a batch of events for one rank. Each event is applied or
// rejected on its own (a stored event with an unknown parent is rejected
// whole); the outcome of each is counted.
func (x *Indexer) Apply(rk RankKey, b Batch) (ApplyStats, error) {
	var st ApplyStats
	p, r, ok := x.lockRank(rk)
	if !ok {
		x.countUnknown(b.Events, &st)
		return st, fmt.Errorf("%w: worker %d rank %d", ErrUnknownRank, rk.Worker, rk.Rank)
	}
	if b.Reset {
		st.BlocksRemoved += p.ix.clearRank(r)
		r.seq, r.hasSeq = 0, false
		p.ix.steps.release()
	}
	var outcomes [8]Outcome // most batches hold a handful of events
	out := p.applyEvents(r, b.Events, &st, outcomes[:0])
	if b.HasSeq {
		r.seq, r.hasSeq = b.Seq, true
	}
	p.finishApply(&st)
	x.record(b.Events, out, &st)
	return st, nil
}

// lockRank finds the partition a rank is indexed in and takes its apply
// mutex; ok is false, with nothing locked, when the rank is not indexed.
func (x *Indexer) lockRank(rk RankKey) (p *partition, r *rankState, ok bool) {
	if p = x.lockWorker(rk.Worker); p == nil {
		return nil, nil, false
	}
	if r, ok = p.ix.byRank[rk]; !ok {
		p.unlockApply()
		return nil, nil, false
	}
	return p, r, true
}

// lockWorker finds the partition a worker is indexed in and takes its
// apply mutex; it returns nil, with nothing locked, when there is none.
func (x *Indexer) lockWorker(id uint64) *partition {
	x.mu.RLock()
	p := x.byWorker[id]
	x.mu.RUnlock()
	if p != nil {
		p.lockApply()
	}
	return p
}

// applyEvents applies events to rank r of p, whose apply mutex the caller
// holds, and appends each one's outcome to out.
func (p *partition) applyEvents(r *rankState, evs []Event, st *ApplyStats, out []Outcome) []Outcome {
	for i := range evs {
		o := p.ix.applyEvent(r, &evs[i], st)
		// The next event's checks only read: no step needed for them.
		p.ix.steps.release()
		st.Events[o]++
		out = append(out, o)
	}
	return out
}

// finishApply compacts if the batch removed blocks and releases the apply
// mutex.
func (p *partition) finishApply(st *ApplyStats) {
	if st.BlocksRemoved > 0 {
		p.ix.maybeCompact()
	}
	p.unlockApply()
}

// record counts the outcomes of a batch in the metrics, outside the
// partition's locks.
func (x *Indexer) record(evs []Event, out []Outcome, st *ApplyStats) {
	for i, o := range out {
		x.metrics.record(evs[i].Kind, o)
	}
	x.metrics.recordStats(st)
}

func (x *Indexer) countUnknown(evs []Event, st *ApplyStats) {
	for i := range evs {
		st.Events[OutcomeUnknownRank]++
		x.metrics.record(evs[i].Kind, OutcomeUnknownRank)
	}
}

// Match scores every indexed rank of the partition against the query of
// local block hashes and appends ranks with a non-zero overlap to out,
// sorted by (worker, rank). It also returns the partition's block size.
func (x *Indexer) Match(key fsm.PartitionKey, q []uint64, out []Overlap) ([]Overlap, uint32, error) {
	x.mu.RLock()
	p := x.parts[key]
	x.mu.RUnlock()
	if p == nil {
		return out, 0, fmt.Errorf("%w: %s", ErrUnknownPartition, key)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ix.match(q, out), p.blockSize, nil
}

// ApplyCatalog brings partitions and ranks in line with a catalog change:
// the partition's schedulable ranks (fsm.Partition.Ranks) are indexed,
// nothing else. It is called by the node's one catalog observer, outside
// the FSM, in index order.
func (x *Indexer) ApplyCatalog(ch *fsm.Change) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, key := range ch.Partitions {
		x.reconcilePartition(key, ch.Cur)
	}
}

func (x *Indexer) reconcilePartition(key fsm.PartitionKey, cur *fsm.Catalog) {
	desired := map[uint64][]uint32{}
	cp, ok := cur.Partition(key)
	if ok {
		for _, rk := range cp.Ranks {
			desired[rk.Worker] = append(desired[rk.Worker], rk.Rank)
		}
	}
	p := x.parts[key]
	if len(desired) == 0 {
		if p != nil {
			x.forgetWorkers(p)
			delete(x.parts, key)
			x.log.Info("partition dropped", "partition", key.String())
		}
		return
	}
	if p == nil {
		p = newPartition(key, cp.BlockSize)
		x.parts[key] = p
		x.log.Info("partition created", "partition", key.String(), "block_size", cp.BlockSize)
	}
	p.lockApply()
	defer p.unlockApply()
	if p.blockSize != cp.BlockSize {
		// Block boundaries moved: every indexed block is meaningless now.
		x.log.Warn("partition block size changed; index reset", "partition", key.String(),
			"old", p.blockSize, "new", cp.BlockSize)
		x.forgetWorkers(p)
		p.ix.steps.change()
		old := p.ix
		p.ix, p.blockSize, p.workers = p.newIndex(), cp.BlockSize, map[uint64][]uint32{}
		old.steps.release()
	}
	for id, ranks := range p.workers {
		want := desired[id]
		for _, rank := range ranks {
			if !slices.Contains(want, rank) {
				p.ix.removeRank(RankKey{Worker: id, Rank: rank})
			}
		}
		if want == nil {
			delete(p.workers, id)
			if x.byWorker[id] == p {
				delete(x.byWorker, id)
			}
		}
	}
	for id, ranks := range desired {
		for _, rank := range ranks {
			if p.ix.addRank(RankKey{Worker: id, Rank: rank}) == nil {
				// The catalog keeps partitions under the limit; this guards
				// the index's holder counts should that ever fail.
				x.log.Error("partition rank limit reached; rank not indexed", "partition", key.String(),
					"worker_id", id, "dp_rank", rank, "limit", fsm.MaxRanksPerPartition)
			}
		}
		p.workers[id] = ranks
		x.byWorker[id] = p
	}
	p.ix.maybeCompact()
}

// forgetWorkers removes the routing entries of p's workers that still
// point at p (a worker that moved already points at its new partition).
func (x *Indexer) forgetWorkers(p *partition) {
	for id := range p.workers {
		if x.byWorker[id] == p {
			delete(x.byWorker, id)
		}
	}
}

// PartitionStats describes the size of one partition's index.
type PartitionStats struct {
	Partition       fsm.PartitionKey
	BlockSize       uint32
	Ranks           int
	Blocks          int // distinct blocks (tree nodes)
	Memberships     int // (block, rank) pairs held on at least one tier
	TierMemberships [numTiers]int
}

// Stats returns the size of every partition, sorted by key.
func (x *Indexer) Stats() []PartitionStats {
	x.mu.RLock()
	parts := make([]*partition, 0, len(x.parts))
	for _, p := range x.parts {
		parts = append(parts, p)
	}
	x.mu.RUnlock()
	out := make([]PartitionStats, 0, len(parts))
	for _, p := range parts {
		p.mu.RLock()
		out = append(out, PartitionStats{
			Partition: p.key, BlockSize: p.blockSize, Ranks: len(p.ix.byRank),
			Blocks: p.ix.live, Memberships: p.ix.memberships, TierMemberships: p.ix.tierBlocks,
		})
		p.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Partition.Model, b.Partition.Model), cmp.Compare(a.Partition.Tenant, b.Partition.Tenant))
	})
	return out
}

// withRank runs fn on a rank's state under its partition's apply mutex;
// it reports false, without calling fn, when the rank is not indexed.
func (x *Indexer) withRank(rk RankKey, fn func(p *partition, r *rankState)) bool {
	p, r, ok := x.lockRank(rk)
	if !ok {
		return false
	}
	defer p.unlockApply()
	fn(p, r)
	return true
}

// BlockSize returns the block size of the partition a rank is indexed in.
func (x *Indexer) BlockSize(rk RankKey) (bs uint32, ok bool) {
	ok = x.withRank(rk, func(p *partition, _ *rankState) { bs = p.blockSize })
	return bs, ok
}

// SetWatermark records seq as the last sequence number applied for a rank
// (for a batch whose events a dp_rank override sent to another rank). It
// reports whether the rank is indexed.
func (x *Indexer) SetWatermark(rk RankKey, seq uint64) bool {
	return x.withRank(rk, func(_ *partition, r *rankState) { r.seq, r.hasSeq = seq, true })
}

// Watermark returns the sequence number of the last batch applied for a
// rank, if any.
func (x *Indexer) Watermark(rk RankKey) (seq uint64, ok bool) {
	x.withRank(rk, func(_ *partition, r *rankState) { seq, ok = r.seq, r.hasSeq })
	return seq, ok
}
