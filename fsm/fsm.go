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
	// removed (delete).
	Worker *Worker
	// Err is a deterministic outcome such as ErrWorkerNotFound.
	Err error
}

// handler applies one command type to the editor. It returns the id of the
// worker it wrote, or the record it removed.
type handler func(e *editor, payload []byte) (id uint64, removed *Worker, err error)

// handlers is the dispatch table. Adding a command means adding a type in
// command.go and a row here; nothing else changes.
var handlers = map[CommandType]handler{
	CmdUpsertWorker: applyUpsert,
	CmdPatchWorker:  applyPatch,
	CmdDeleteWorker: applyDelete,
	CmdSetNode:      applySetNode,
	CmdDeleteNode:   applyDeleteNode,
}

// FSM implements raft.FSM over the worker catalog.
type FSM struct {
	// mu serialises Apply and Restore. Raft never runs them concurrently;
	// the lock makes that an invariant of this type rather than of raft.
	mu      sync.Mutex
	cur     atomic.Pointer[Catalog]
	changed chan struct{}
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

// Apply applies one log entry. It panics on an unknown command type or an
// undecodable payload: every node would hit the same entry, and skipping it
// silently would make this node's catalog diverge from the log.
func (f *FSM) Apply(l *raft.Log) any {
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("fsm: empty command at index %d", l.Index))
	}
	t := CommandType(l.Data[0])
	h, ok := handlers[t]
	if !ok {
		panic(fmt.Sprintf("fsm: unknown command type %d at index %d", l.Data[0], l.Index))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := newEditor(f.cur.Load(), l.Index)
	id, removed, err := h(e, l.Data[1:])
	if err != nil {
		// A rejected command changes nothing but still advances the index,
		// so waiters on this index are released.
		f.publish(newEditor(f.cur.Load(), l.Index).next)
		return &Result{Index: l.Index, Err: err}
	}
	next := e.finish()
	f.publish(next)
	switch {
	case removed != nil:
		return &Result{Index: l.Index, Worker: removed}
	case t == CmdSetNode || t == CmdDeleteNode:
		return &Result{Index: l.Index}
	}
	return &Result{Index: l.Index, Worker: next.workers[id]}
}

func (f *FSM) publish(c *Catalog) {
	f.cur.Store(c)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func decode(t CommandType, payload []byte, v any) {
	if err := json.Unmarshal(payload, v); err != nil {
		panic(fmt.Sprintf("fsm: undecodable %s payload: %v", t, err))
	}
}

func applyUpsert(e *editor, payload []byte) (uint64, *Worker, error) {
	var cmd UpsertWorker
	decode(CmdUpsertWorker, payload, &cmd)
	w := cmd.Worker.clone()
	w.normalize()
	if err := ValidateSpec(w); err != nil {
		return 0, nil, err
	}
	w.CreateIndex, w.ModifyIndex = e.next.index, e.next.index
	old, ok := e.next.workers[w.WorkerID]
	if ok {
		w.CreateIndex = old.CreateIndex
	}
	w.BlockSizeIndex = blockSizeIndex(old, w, e.next.index)
	w.Lifecycle, w.NotSchedulableReasons = "", nil
	e.put(w)
	return w.WorkerID, nil, nil
}

func applyPatch(e *editor, payload []byte) (uint64, *Worker, error) {
	var cmd PatchWorker
	decode(CmdPatchWorker, payload, &cmd)
	old, ok := e.next.workers[cmd.WorkerID]
	if !ok {
		return 0, nil, fmt.Errorf("%w: %d", ErrWorkerNotFound, cmd.WorkerID)
	}
	w := cmd.Patch.Apply(old)
	if err := ValidateSpec(w); err != nil {
		return 0, nil, err
	}
	w.ModifyIndex = e.next.index
	w.BlockSizeIndex = blockSizeIndex(old, w, e.next.index)
	w.Lifecycle, w.NotSchedulableReasons = "", nil
	e.put(w)
	return w.WorkerID, nil, nil
}

// blockSizeIndex keeps a worker's block-size seniority while its block
// size stays the same and restarts it when the block size changes.
func blockSizeIndex(old, w *Worker, index uint64) uint64 {
	if old != nil && old.BlockSize == w.BlockSize {
		return old.BlockSizeIndex
	}
	return index
}

func applyDelete(e *editor, payload []byte) (uint64, *Worker, error) {
	var cmd DeleteWorker
	decode(CmdDeleteWorker, payload, &cmd)
	old, ok := e.next.workers[cmd.WorkerID]
	if !ok {
		return 0, nil, fmt.Errorf("%w: %d", ErrWorkerNotFound, cmd.WorkerID)
	}
	e.remove(cmd.WorkerID)
	return 0, old, nil
}

// snapshotFormat is the on-disk form of a snapshot. Derived fields are
// written for human readers and recomputed on restore.
type snapshotFormat struct {
	Version int        `json:"version"`
	Index   uint64     `json:"index"`
	Workers []*Worker  `json:"workers"`
	Nodes   []NodeMeta `json:"nodes,omitempty"`
}

// snapshotVersion 2 added node metadata; version 1 snapshots (workers
// only) still restore.
const snapshotVersion = 2

// Snapshot returns the current catalog; it is immutable, so no copy is made.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{c: f.cur.Load()}, nil
}

type snapshot struct{ c *Catalog }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	err := json.NewEncoder(sink).Encode(snapshotFormat{
		Version: snapshotVersion,
		Index:   s.c.index,
		Workers: s.c.Workers("", ""),
		Nodes:   s.c.Nodes(),
	})
	if err != nil {
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
	var snap snapshotFormat
	if err := json.NewDecoder(rc).Decode(&snap); err != nil {
		return fmt.Errorf("restore catalog snapshot: %w", err)
	}
	if snap.Version != 1 && snap.Version != snapshotVersion {
		return fmt.Errorf("restore catalog snapshot: unsupported version %d", snap.Version)
	}
	e := newEditor(EmptyCatalog(), snap.Index)
	for i, w := range snap.Workers {
		if w == nil {
			return fmt.Errorf("restore catalog snapshot: worker %d is null", i)
		}
		if _, dup := e.next.workers[w.WorkerID]; dup {
			return fmt.Errorf("restore catalog snapshot: worker %d appears twice", w.WorkerID)
		}
		w.normalize()
		// A snapshot is only as trustworthy as the disk it came from:
		// records must pass the same checks as commands.
		if err := ValidateSpec(w); err != nil {
			return fmt.Errorf("restore catalog snapshot: worker %d: %w", w.WorkerID, err)
		}
		w.Lifecycle, w.NotSchedulableReasons = "", nil
		e.put(w)
	}
	for _, n := range snap.Nodes {
		if _, dup := e.next.nodes[n.ID]; dup {
			return fmt.Errorf("restore catalog snapshot: node %q appears twice", n.ID)
		}
		if err := ValidateNode(&n); err != nil {
			return fmt.Errorf("restore catalog snapshot: node %q: %w", n.ID, err)
		}
		e.setNode(n)
	}
	next := e.finish()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publish(next)
	return nil
}
