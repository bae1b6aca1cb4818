package fsm

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Result is what Apply returns for every command, through raft's
// ApplyFuture.Response.
type Result struct {
	// Index is the Raft index at which the command was applied.
	Index uint64
	// Worker is the record after the command (upsert, patch) or the record
	// removed (delete); nil for node and threshold commands.
	Worker *Worker
	// Thresholds is the model's record after a threshold command.
	Thresholds *Thresholds
	// Policy is the entry after a set_policy or init_policy (nil when
	// init_policy left the catalog without a default), or the entry
	// delete_policy removed.
	Policy *Policy
	// Err is a deterministic outcome such as ErrWorkerNotFound.
	Err error
	// Skipped is set for an entry of a type this binary does not know
	// that was flagged IgnoreUnknown.
	Skipped bool
}

// outcome is what a handler did: the id of the worker it wrote, or the
// record it removed; the model of a threshold command; none for node
// commands.
type outcome struct {
	wrote   uint64
	wroteOK bool
	removed *Worker
	// thresholds names the model whose thresholds a command wrote.
	thresholds string
	// policy is the key of the policy entry a command wrote;
	// removedPolicy the entry it removed.
	policy        *PartitionKey
	removedPolicy *Policy
}

// handler decodes one command type's payload and applies it to the
// editor. Every handler has this one shape.
type handler func(e *editor, payload []byte) (outcome, error)

// handlers is the dispatch table. Adding a command means a type in
// command.go, its log format in logformat.go and a row here.
var handlers = map[CommandType]handler{
	CmdUpsertWorker: applyUpsert,
	CmdPatchWorker:  applyPatch,
	CmdDeleteWorker: applyDelete,
	CmdExpireLease:  applyExpireLease,
	CmdSetNode:      applySetNode,
	CmdDeleteNode:   applyDeleteNode,
	CmdSetClusterID: applySetClusterID,

	CmdSetThresholds:   applySetThresholds,
	CmdClearThresholds: applyClearThresholds,
	CmdInitThresholds:  applyInitThresholds,

	CmdSetPolicy:    applySetPolicy,
	CmdDeletePolicy: applyDeletePolicy,
	CmdInitPolicy:   applyInitPolicy,

	CmdEnableCatalogRules: applyEnableCatalogRules,
}

// FSM implements raft.FSM over the worker catalog.
type FSM struct {
	// mu serialises Apply and Restore. Raft never runs them concurrently;
	// the lock makes that an invariant of this type rather than of raft.
	mu      sync.Mutex
	cur     atomic.Pointer[Catalog]
	changed chan struct{}
	skipped atomic.Uint64
}

var _ raft.FSM = (*FSM)(nil)

// New returns an FSM holding an empty catalog.
func New() *FSM {
	f := &FSM{changed: make(chan struct{}, 1)}
	f.cur.Store(EmptyCatalog())
	return f
}

// Catalog returns the current catalog. It never blocks.
func (f *FSM) Catalog() *Catalog { return f.cur.Load() }

// Changed receives a value after the catalog changes. Notifications
// coalesce: one receive may stand for many applies, so readers must compare
// catalogs rather than count signals.
func (f *FSM) Changed() <-chan struct{} { return f.changed }

// Skipped counts the entries of unknown types flagged IgnoreUnknown that
// this FSM skipped (written by a newer binary).
func (f *FSM) Skipped() uint64 { return f.skipped.Load() }

// Apply applies one log entry. It panics on an empty entry, an unknown
// command type without the IgnoreUnknown flag, or an undecodable payload:
// every node would hit the same entry, and skipping it silently would make
// this node's catalog diverge from the log.
func (f *FSM) Apply(l *raft.Log) any {
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("fsm: empty command at index %d", l.Index))
	}
	t := CommandType(l.Data[0])
	h, ok := handlers[t&^IgnoreUnknown]
	f.mu.Lock()
	defer f.mu.Unlock()
	if !ok {
		if t&IgnoreUnknown == 0 {
			panic(fmt.Sprintf("fsm: unknown command type %d at index %d (written by a newer kvselect?)", l.Data[0], l.Index))
		}
		// A newer binary's command that it marked safe to skip: the index
		// still advances, so waiters on it are released.
		f.skipped.Add(1)
		f.publish(newEditor(f.cur.Load(), l.Index).next)
		return &Result{Index: l.Index, Skipped: true}
	}
	e := newEditor(f.cur.Load(), l.Index)
	out, err := h(e, l.Data[1:])
	if err != nil {
		// A rejected command changes nothing but still advances the index,
		// so waiters on this index are released.
		f.publish(newEditor(f.cur.Load(), l.Index).next)
		return &Result{Index: l.Index, Err: err}
	}
	next := e.finish()
	f.publish(next)
	res := &Result{Index: l.Index, Worker: out.removed}
	if out.wroteOK {
		res.Worker = next.workers[out.wrote]
	}
	if out.thresholds != "" {
		t := next.thresholds[out.thresholds]
		res.Thresholds = &t
	}
	res.Policy = out.removedPolicy
	if out.policy != nil {
		if p, ok := next.policies[*out.policy]; ok {
			res.Policy = &p
		}
	}
	return res
}

func (f *FSM) publish(c *Catalog) {
	f.cur.Store(c)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func applyUpsert(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[upsertWorkerV1](CmdUpsertWorker, payload)
	w := cmd.Worker.decode(false)
	if err := ValidateSpec(w); err != nil {
		return outcome{}, err
	}
	w.CreateIndex, w.ModifyIndex = e.next.index, e.next.index
	if w.LeaseTTLSeconds > 0 {
		w.LeaseIndex = e.next.index // a registration renews the lease
	}
	old, ok := e.next.workers[w.WorkerID]
	if ok {
		w.CreateIndex = old.CreateIndex
	}
	w.BlockSizeIndex = blockSizeIndex(old, w, e.next.index)
	e.put(w)
	return outcome{wrote: w.WorkerID, wroteOK: true}, nil
}

func applyPatch(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[patchWorkerV1](CmdPatchWorker, payload)
	old, ok := e.next.workers[cmd.WorkerID]
	if !ok {
		return outcome{}, fmt.Errorf("%w: %d", ErrWorkerNotFound, cmd.WorkerID)
	}
	patch := cmd.Patch.decode()
	w := patch.Apply(old)
	if err := ValidateSpec(w); err != nil {
		return outcome{}, err
	}
	w.ModifyIndex = e.next.index
	switch {
	case w.LeaseTTLSeconds == 0:
		w.LeaseIndex = 0
	case patch.LeaseTTLSeconds != nil:
		w.LeaseIndex = e.next.index // setting lease_ttl_s renews the lease
	}
	w.BlockSizeIndex = blockSizeIndex(old, w, e.next.index)
	w.schedulable, w.NotSchedulableReasons = false, nil
	e.put(w)
	return outcome{wrote: w.WorkerID, wroteOK: true}, nil
}

// blockSizeIndex keeps a worker's block-size seniority while its block
// size stays the same and restarts it when the block size changes.
func blockSizeIndex(old, w *Worker, index uint64) uint64 {
	if old != nil && old.BlockSize == w.BlockSize {
		return old.BlockSizeIndex
	}
	return index
}

func applyDelete(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[deleteWorkerV1](CmdDeleteWorker, payload)
	old, ok := e.next.workers[cmd.WorkerID]
	if !ok {
		return outcome{}, fmt.Errorf("%w: %d", ErrWorkerNotFound, cmd.WorkerID)
	}
	e.remove(cmd.WorkerID)
	return outcome{removed: old}, nil
}

func applyExpireLease(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[expireLeaseV1](CmdExpireLease, payload)
	old, ok := e.next.workers[cmd.WorkerID]
	switch {
	case !ok:
		return outcome{}, fmt.Errorf("%w: %d", ErrWorkerNotFound, cmd.WorkerID)
	case old.ModifyIndex != cmd.ModifyIndex || old.LeaseTTLSeconds == 0:
		return outcome{}, fmt.Errorf("%w: worker %d changed at index %d after the leader judged index %d",
			ErrLeaseRenewed, cmd.WorkerID, old.ModifyIndex, cmd.ModifyIndex)
	}
	e.remove(cmd.WorkerID)
	return outcome{removed: old}, nil
}

// Snapshot returns the current catalog; it is immutable, so no copy is made.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{c: f.cur.Load()}, nil
}

type snapshot struct{ c *Catalog }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(encodeSnapshot(s.c)); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist catalog snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

// Restore replaces the catalog with the snapshot's. The new catalog is
// built completely before it is swapped in.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var snap snapshotV4
	if err := json.NewDecoder(rc).Decode(&snap); err != nil {
		return fmt.Errorf("restore catalog snapshot: %w", err)
	}
	if snap.Version < 1 || snap.Version > snapshotVersion {
		// Checked before any record is used: a newer version may change
		// what the records mean, not only add to them.
		return fmt.Errorf("restore catalog snapshot: unsupported version %d (this kvselect reads versions 1 to %d; a later one needs a newer kvselect)",
			snap.Version, snapshotVersion)
	}
	e := newEditor(EmptyCatalog(), snap.Index)
	switch {
	case snap.CatalogRules > CatalogRulesCurrent:
		return fmt.Errorf("restore catalog snapshot: catalog rules %d (this kvselect applies rules up to %d; a newer kvselect wrote it)",
			snap.CatalogRules, CatalogRulesCurrent)
	case (snap.Version == 5) != (snap.CatalogRules != 0):
		// Version 5 is the catalog rules' (encodeSnapshot).
		return fmt.Errorf("restore catalog snapshot: version %d with catalog rules %d (version 5, and only it, has them)",
			snap.Version, snap.CatalogRules)
	case snap.CatalogRules == 0 && (len(snap.BlockSizes) > 0 || len(snap.Retired) > 0):
		// History only the rules keep, in a snapshot that says they are
		// off: no release writes that, so the file is not to be trusted.
		return fmt.Errorf("restore catalog snapshot: partition_block_sizes or retired_partitions without catalog_rules")
	}
	// Set before finish derives the partitions: it reads them.
	e.next.rules = snap.CatalogRules
	if snap.ClusterID != "" {
		id, err := ParseClusterID(snap.ClusterID)
		if err != nil {
			return fmt.Errorf("restore catalog snapshot: %w", err)
		}
		e.next.clusterID = id
	}
	for i := range snap.Workers {
		w := snap.Workers[i].decode(true)
		if _, dup := e.next.workers[w.WorkerID]; dup {
			return fmt.Errorf("restore catalog snapshot: worker %d appears twice", w.WorkerID)
		}
		// A snapshot is only as trustworthy as the disk it came from:
		// records must pass the same checks as commands.
		if err := ValidateSpec(w); err != nil {
			return fmt.Errorf("restore catalog snapshot: worker %d: %w", w.WorkerID, err)
		}
		e.put(w)
	}
	for _, v := range snap.Nodes {
		n := v.decode(true)
		if _, dup := e.next.nodes[n.ID]; dup {
			return fmt.Errorf("restore catalog snapshot: node %q appears twice", n.ID)
		}
		if err := ValidateNode(&n); err != nil {
			return fmt.Errorf("restore catalog snapshot: node %q: %w", n.ID, err)
		}
		e.setNode(n)
	}
	for _, v := range snap.Thresholds {
		if err := ValidateThresholds(v.Model, v.ActiveDecodeBlocks); err != nil {
			return fmt.Errorf("restore catalog snapshot: thresholds of %q: %w", v.Model, err)
		}
		if _, dup := e.next.thresholds[v.Model]; dup {
			return fmt.Errorf("restore catalog snapshot: thresholds of %q appear twice", v.Model)
		}
		e.putThresholds(v.decode())
	}
	for _, v := range snap.Policies {
		p := v.decode()
		if err := ValidatePolicyEntry(p.Key, p.Name, p.Params); err != nil {
			return fmt.Errorf("restore catalog snapshot: policy of model_name %q tenant_id %q: %w", p.Key.Model, p.Key.Tenant, err)
		}
		if _, dup := e.next.policies[p.Key]; dup {
			return fmt.Errorf("restore catalog snapshot: policy of model_name %q tenant_id %q appears twice", p.Key.Model, p.Key.Tenant)
		}
		e.putPolicy(p)
	}
	if snap.DefaultPolicySeeded {
		e.next.policySeeded = true
	}
	for _, v := range snap.BlockSizes {
		k := PartitionKey{Model: v.ModelName, Tenant: v.TenantID}
		if v.BlockSize == 0 || v.BlockSize > MaxBlockSize {
			return fmt.Errorf("restore catalog snapshot: block size %d of partition %s: must be 1 to %d", v.BlockSize, k, MaxBlockSize)
		}
		if !e.touched[k] {
			return fmt.Errorf("restore catalog snapshot: block size of partition %s, which has no worker", k)
		}
		if _, dup := e.next.partitions[k]; dup {
			return fmt.Errorf("restore catalog snapshot: block size of partition %s appears twice", k)
		}
		// What the partition held before: finish derives from it as
		// apply did (derivePartition).
		e.next.partitions[k] = &Partition{Key: k, BlockSize: v.BlockSize}
	}
	if len(snap.Retired) > MaxRetiredPartitions {
		return fmt.Errorf("restore catalog snapshot: %d retired partitions, at most %d", len(snap.Retired), MaxRetiredPartitions)
	}
	for _, v := range snap.Retired {
		k := PartitionKey{Model: v.ModelName, Tenant: v.TenantID}
		if e.touched[k] {
			return fmt.Errorf("restore catalog snapshot: partition %s is retired but holds workers", k)
		}
		if _, dup := e.next.retired[k]; dup {
			return fmt.Errorf("restore catalog snapshot: retired partition %s appears twice", k)
		}
		e.copyRetired()
		e.next.retired[k] = v.Index
	}
	next := e.finish()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publish(next)
	return nil
}
