package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Catalog is an immutable view of the worker catalog as of a Raft index.
// The FSM publishes a new Catalog on every apply; holders of an old one keep
// a consistent snapshot for as long as they like.
type Catalog struct {
	index      uint64
	workers    map[uint64]*Worker
	partitions map[PartitionKey]*Partition
	nodes      map[string]NodeMeta
	thresholds map[string]Thresholds // by model
	clusterID  ClusterID
	policies   map[PartitionKey]Policy // selection policies (policy.go)
	// policySeeded is set once a cluster default was ever written.
	policySeeded bool
	// retired are the partitions that lost their last worker, with the
	// index at which they did (known.go); shared until an editor writes.
	retired map[PartitionKey]uint64
	// rules are the catalog rules applied (rules.go); 0 before the
	// switch.
	rules uint32
}

// Partition is the catalog's view of one (model, tenant) scope. Its fields
// are derived once per change, when the catalog is built, so that the
// indexer, the scheduler and the listeners read the same answer instead of
// each computing its own.
type Partition struct {
	Key PartitionKey
	// BlockSize is sticky: the partition keeps the block size it has
	// while any of its workers is registered with that size. Only when
	// none is left does the most senior worker with a positive block size
	// set it (see derivePartition); 0 when there is none.
	BlockSize uint32
	// Workers are the ids of all workers of the partition, ascending.
	Workers []uint64
	// Schedulable are the ids of its schedulable workers, ascending.
	Schedulable []uint64
	// Ranks are the dp ranks of its schedulable workers, by (worker,
	// rank): what the index indexes, the scheduler scores and the
	// listeners subscribe to.
	Ranks []RankKey
}

// WorkerRanks returns the partition's schedulable ranks of one worker (a
// subslice of Ranks; empty when the worker is not schedulable).
func (p *Partition) WorkerRanks(id uint64) []RankKey {
	i, _ := slices.BinarySearchFunc(p.Ranks, id, func(rk RankKey, id uint64) int { return cmp.Compare(rk.Worker, id) })
	j := i
	for j < len(p.Ranks) && p.Ranks[j].Worker == id {
		j++
	}
	return p.Ranks[i:j:j]
}

// RankKey names one dp rank of one worker.
type RankKey struct {
	Worker uint64
	Rank   uint32
}

// CompareRankKeys orders rank keys by worker, then rank.
func CompareRankKeys(a, b RankKey) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Rank, b.Rank))
}

// EmptyCatalog returns the catalog of a fresh cluster.
func EmptyCatalog() *Catalog {
	return &Catalog{workers: map[uint64]*Worker{}, partitions: map[PartitionKey]*Partition{}, nodes: map[string]NodeMeta{}}
}

// Index is the Raft index of the last command applied to this catalog.
func (c *Catalog) Index() uint64 { return c.index }

// Len is the number of workers.
func (c *Catalog) Len() int { return len(c.workers) }

// Worker returns the record with the given id.
func (c *Catalog) Worker(id uint64) (*Worker, bool) {
	w, ok := c.workers[id]
	return w, ok
}

// Workers returns the records sorted by (model_name, tenant_id, worker_id),
// keeping those that match the non-empty filters.
func (c *Catalog) Workers(model, tenant string) []*Worker {
	out := make([]*Worker, 0, len(c.workers))
	for _, w := range c.workers {
		if (model == "" || w.ModelName == model) && (tenant == "" || w.TenantID == tenant) {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, compareWorkers)
	return out
}

// Partition returns the partition with the given key.
func (c *Catalog) Partition(k PartitionKey) (*Partition, bool) {
	p, ok := c.partitions[k]
	return p, ok
}

// members returns the records of the partition's workers.
func (c *Catalog) members(p *Partition) []*Worker {
	out := make([]*Worker, len(p.Workers))
	for i, id := range p.Workers {
		out[i] = c.workers[id]
	}
	return out
}

// Partitions returns every partition sorted by key.
func (c *Catalog) Partitions() []*Partition {
	out := slices.Collect(maps.Values(c.partitions))
	slices.SortFunc(out, func(a, b *Partition) int { return comparePartitionKeys(a.Key, b.Key) })
	return out
}

func compareWorkers(a, b *Worker) int {
	if c := comparePartitionKeys(a.Partition(), b.Partition()); c != 0 {
		return c
	}
	return cmp.Compare(a.WorkerID, b.WorkerID)
}

func comparePartitionKeys(a, b PartitionKey) int {
	if c := cmp.Compare(a.Model, b.Model); c != 0 {
		return c
	}
	return cmp.Compare(a.Tenant, b.Tenant)
}

// Change is one step of the catalog as its observers see it: the catalog
// before and after, and what differs between them, computed once for all
// observers.
type Change struct {
	Prev, Cur *Catalog
	// Workers are the workers whose records differ, by ascending id.
	// Records are immutable, so pointer inequality is the test; derived
	// fields (lifecycle) count as changes.
	Workers []WorkerChange
	// Partitions are, sorted, the partitions that hold a changed worker
	// before or after the change.
	Partitions []PartitionKey
	// Thresholds are, sorted, the models whose busy thresholds changed.
	Thresholds []string
	// Policies are, sorted, the keys whose policy entries were written
	// or removed ({AnyModel, ""} for the cluster default).
	Policies []PartitionKey
}

// WorkerChange is one worker's difference. Old is nil for an insert, New
// is nil for a delete.
type WorkerChange struct {
	Old, New *Worker
}

// Observer is told about each catalog change, in index order.
type Observer func(*Change)

// NewChange diffs two catalogs.
func NewChange(prev, cur *Catalog) *Change {
	ch := &Change{Prev: prev, Cur: cur}
	for id, nw := range cur.workers {
		if ow := prev.workers[id]; ow != nw {
			ch.Workers = append(ch.Workers, WorkerChange{Old: ow, New: nw})
		}
	}
	for id, ow := range prev.workers {
		if _, ok := cur.workers[id]; !ok {
			ch.Workers = append(ch.Workers, WorkerChange{Old: ow})
		}
	}
	slices.SortFunc(ch.Workers, func(a, b WorkerChange) int { return cmp.Compare(a.ID(), b.ID()) })
	seen := map[PartitionKey]bool{}
	for _, c := range ch.Workers {
		for _, w := range []*Worker{c.Old, c.New} {
			if w != nil {
				seen[w.Partition()] = true
			}
		}
	}
	ch.Partitions = slices.Collect(maps.Keys(seen))
	slices.SortFunc(ch.Partitions, comparePartitionKeys)
	ch.Thresholds = writtenOrRemoved(prev.thresholds, cur.thresholds, func(t Thresholds) uint64 { return t.ModifyIndex })
	slices.Sort(ch.Thresholds)
	ch.Policies = writtenOrRemoved(prev.policies, cur.policies, func(p Policy) uint64 { return p.ModifyIndex })
	slices.SortFunc(ch.Policies, comparePartitionKeys)
	return ch
}

// writtenOrRemoved returns, unsorted, the keys whose records cur wrote
// since prev (another modifyIndex, or new) or removed.
func writtenOrRemoved[K comparable, V any](prev, cur map[K]V, modifyIndex func(V) uint64) []K {
	var out []K
	for k, v := range cur {
		if o, ok := prev[k]; !ok || modifyIndex(o) != modifyIndex(v) {
			out = append(out, k)
		}
	}
	for k := range prev {
		if _, ok := cur[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// ID is the id of the changed worker.
func (c WorkerChange) ID() uint64 {
	if c.New != nil {
		return c.New.WorkerID
	}
	return c.Old.WorkerID
}

// editor builds the next catalog from the current one. It copies the
// top-level maps once and replaces records, never mutating shared ones.
type editor struct {
	next    *Catalog
	touched map[PartitionKey]bool
	// nodesCopied, thresholdsCopied and policiesCopied are set once
	// next.nodes, next.thresholds and next.policies are private copies.
	nodesCopied, thresholdsCopied, policiesCopied bool
	// retiredCopied: next.retired is a private copy.
	retiredCopied bool
}

func newEditor(cur *Catalog, index uint64) *editor {
	return &editor{
		next: &Catalog{
			index:        index,
			workers:      maps.Clone(cur.workers),
			partitions:   maps.Clone(cur.partitions),
			nodes:        cur.nodes,      // node metadata is copied on first write
			thresholds:   cur.thresholds, // so are thresholds
			clusterID:    cur.clusterID,
			policies:     cur.policies, // and policies
			policySeeded: cur.policySeeded,
			retired:      cur.retired, // copied on first write too
			rules:        cur.rules,
		},
		touched: map[PartitionKey]bool{},
	}
}

func (e *editor) put(w *Worker) {
	if old, ok := e.next.workers[w.WorkerID]; ok {
		e.touched[old.Partition()] = true
	}
	e.next.workers[w.WorkerID] = w
	e.touched[w.Partition()] = true
}

func (e *editor) remove(id uint64) {
	if old, ok := e.next.workers[id]; ok {
		e.touched[old.Partition()] = true
		delete(e.next.workers, id)
	}
}

func (e *editor) setNode(n NodeMeta) {
	e.copyNodes()
	e.next.nodes[n.ID] = n
}

func (e *editor) deleteNode(id string) {
	e.copyNodes()
	delete(e.next.nodes, id)
}

func (e *editor) copyNodes() { ownMap(&e.next.nodes, &e.nodesCopied) }

// ownMap makes *m, a map next may share with earlier catalogs, a private
// copy the first time the editor writes to it (*copied records that it
// did), so that no catalog a reader holds ever changes.
func ownMap[K comparable, V any](m *map[K]V, copied *bool) {
	if *copied {
		return
	}
	*m = maps.Clone(*m)
	if *m == nil {
		*m = map[K]V{}
	}
	*copied = true
}

// finish recomputes the partitions that changed and the lifecycle of their
// workers, then returns the new catalog.
func (e *editor) finish() *Catalog {
	members := map[PartitionKey][]*Worker{}
	for k := range e.touched {
		members[k] = nil
	}
	for _, w := range e.next.workers {
		if _, ok := members[w.Partition()]; ok {
			members[w.Partition()] = append(members[w.Partition()], w)
		}
	}
	for k, ws := range members {
		prev, existed := e.next.partitions[k]
		if len(ws) == 0 {
			if existed {
				delete(e.next.partitions, k)
				if e.next.stickyRules() {
					e.retire(k)
				}
			}
			continue
		}
		e.unretire(k)
		var held uint32
		if existed && e.next.stickyRules() {
			held = prev.BlockSize // before the switch, the members alone decide
		}
		e.next.partitions[k] = e.derivePartition(k, ws, held)
	}
	return e.next
}

// derivePartition sets the partition's block size and every member's
// lifecycle. Both depend only on the members and on the block size the
// partition held before the change (held: 0 for a new partition, and
// always before the catalog rules switched the sticky size on), which
// every node has derived alike from the same log, or restored from the same
// snapshot (encodeSnapshot keeps the block sizes the members alone would
// not give), so every node computes the same result.
func (e *editor) derivePartition(k PartitionKey, ws []*Worker, held uint32) *Partition {
	slices.SortFunc(ws, func(a, b *Worker) int { return cmp.Compare(a.WorkerID, b.WorkerID) })
	p := &Partition{Key: k, Workers: make([]uint64, len(ws))}
	for i, w := range ws {
		p.Workers[i] = w.WorkerID
	}
	senior := bySeniority(ws)
	p.BlockSize = stickyBlockSize(senior, held)
	reasons := make(map[uint64][]string, len(ws))
	ranks := 0
	for _, w := range senior {
		r := staticReasons(w)
		if w.BlockSize != 0 && p.BlockSize != 0 && w.BlockSize != p.BlockSize {
			r = append(r, fmt.Sprintf(
				"block_size mismatch for model/tenant: existing=%d requested=%d", p.BlockSize, w.BlockSize))
		}
		if len(r) == 0 {
			if ranks+int(w.DataParallelSize) > MaxRanksPerPartition {
				r = append(r, fmt.Sprintf("partition rank limit reached: at most %d ranks per model/tenant", MaxRanksPerPartition))
			} else {
				ranks += int(w.DataParallelSize)
			}
		}
		reasons[w.WorkerID] = r
	}
	for _, w := range ws {
		reasons := reasons[w.WorkerID]
		schedulable := len(reasons) == 0
		if w.schedulable != schedulable || !slices.Equal(w.NotSchedulableReasons, reasons) {
			c := w.clone()
			c.schedulable, c.NotSchedulableReasons = schedulable, reasons
			e.next.workers[w.WorkerID] = c
		}
		if schedulable {
			p.Schedulable = append(p.Schedulable, w.WorkerID)
			for _, rank := range w.Ranks() {
				p.Ranks = append(p.Ranks, RankKey{Worker: w.WorkerID, Rank: rank})
			}
		}
	}
	return p
}

// bySeniority orders workers by who has held their block size longest,
// then who came first, then the lower id. The rank limit admits workers in
// this order, and a partition without a block size takes its first
// worker's.
func bySeniority(ws []*Worker) []*Worker {
	out := slices.Clone(ws)
	slices.SortFunc(out, func(a, b *Worker) int {
		return cmp.Or(cmp.Compare(a.BlockSizeIndex, b.BlockSizeIndex),
			cmp.Compare(a.CreateIndex, b.CreateIndex), cmp.Compare(a.WorkerID, b.WorkerID))
	})
	return out
}

// stickyBlockSize is the partition's block size: the one it held, while
// any member is registered with it, so that a worker registered with the
// wrong size stays the odd one out however long it outlives the workers
// registered before it; else the most senior member's (bySeniority); 0
// when no member has one.
func stickyBlockSize(bySeniority []*Worker, held uint32) uint32 {
	if held != 0 && slices.ContainsFunc(bySeniority, func(w *Worker) bool { return w.BlockSize == held }) {
		return held
	}
	return seniorBlockSize(bySeniority)
}

// seniorBlockSize is the block size of the most senior worker that has
// one: what the members alone say, without the partition's history.
func seniorBlockSize(bySeniority []*Worker) uint32 {
	for _, w := range bySeniority {
		if w.BlockSize != 0 {
			return w.BlockSize
		}
	}
	return 0
}
