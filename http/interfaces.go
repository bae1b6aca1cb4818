package http

import (
	"context"
	"io"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/zmqsync"
)

// The handlers reach the node's parts only through these interfaces, each
// holding the few methods some handlers call. A node wires them to its
// cluster.Node, scheduler and indexer; handler tests wire fakes that fail
// on purpose (unknown_outcome, catalog_behind, a leader that changes)
// without starting Raft.

// CatalogReader reads the replicated catalog on this node.
type CatalogReader interface {
	// Catalog is the local catalog (consistency=local).
	Catalog() *fsm.Catalog
	// WaitApplied waits until this node has applied catalog index idx,
	// side effects included, or fails with cluster.ErrCatalogBehind.
	WaitApplied(ctx context.Context, idx uint64) error
	// LinearizableCatalog is a read-index read on the leader.
	LinearizableCatalog(ctx context.Context) (*fsm.Catalog, error)
}

// CatalogWriter replicates catalog commands through the leader.
type CatalogWriter interface {
	Apply(ctx context.Context, cmd fsm.Command) (*fsm.Result, error)
}

// Leadership is what leader routing (forwarding and redirects) needs.
type Leadership interface {
	ID() string
	IsLeader() bool
	// WaitForLeaderHTTP returns a leader whose HTTP address is known (or
	// this node), waiting for an election up to ctx.
	WaitForLeaderHTTP(ctx context.Context) (cluster.LeaderInfo, error)
	// LeaderWait bounds how long a leader-only request waits for one.
	LeaderWait() time.Duration
	// HasLeader reports whether the node knows a leader now (itself
	// included); without one, no catalog entry can reach it.
	HasLeader() bool
	// AnnounceCommit has the leader tell followers its commit index now,
	// so that a follower waiting to apply a write it forwarded need not
	// wait for Raft's next append (cluster.Node.AnnounceCommit).
	AnnounceCommit(index uint64)
}

// LeaseKeeper renews worker leases on the leader (cluster.Node.KeepAlive):
// per id a state or an error, or one error for the whole call (not the
// leader, no leader).
type LeaseKeeper interface {
	KeepAlive(ctx context.Context, ids []uint64) ([]cluster.LeaseState, []error, error)
}

// ClusterAdmin reports and changes the membership.
type ClusterAdmin interface {
	Status() api.ClusterStatus
	// Removed is closed once this node is out of the committed
	// configuration (cluster.Node.Removed): /ready answers 503 from then
	// on, while the node shuts down.
	Removed() <-chan struct{}
	Join(ctx context.Context, req api.JoinRequest) error
	Remove(ctx context.Context, id string) error
	StepDown(ctx context.Context) error
	SetMetadata(ctx context.Context, meta fsm.NodeMeta) error
}

// Selector chooses worker ranks and books and ends reservations.
type Selector interface {
	Select(req scheduler.SelectRequest) (scheduler.Selection, error)
	Reserve(req scheduler.ReserveRequest) (scheduler.Booking, error)
	PrefillComplete(id string) error
	OutputBlock(id string, decay *float64) error
	Free(id string) error
	PotentialLoads(key fsm.PartitionKey, pr scheduler.Prompt) ([]scheduler.PotentialLoad, error)
	OverlapScores(key fsm.PartitionKey, pr scheduler.Prompt) (scheduler.OverlapScores, error)
}

// LoadReader shows the active load and the bookings behind it.
type LoadReader interface {
	Loads(model, tenant string) []scheduler.PartitionLoads
	Reservations(f scheduler.ReservationFilter) ([]scheduler.ReservationInfo, bool)
	Reservation(id string) (scheduler.ReservationInfo, error)
	// Unchecked lists the busy thresholds t that cannot be checked for
	// worker w, with why.
	Unchecked(t fsm.Thresholds, w *fsm.Worker) []string
}

// ReplicaSync manages this node's replica-sync peers (zmqsync.Syncer);
// nil in Config when replica sync is off.
type ReplicaSync interface {
	Register(endpoint string) (created bool, err error)
	Deregister(endpoint string) error
	Peers() []zmqsync.PeerStatus
	// Advertised is the endpoint the other nodes subscribe to.
	Advertised() string
}

// IndexReader snapshots the prefix index.
type IndexReader interface {
	// WriteDump streams GET /dump's JSON document to w, one partition
	// snapshot at a time (indexer.Indexer.WriteDump).
	WriteDump(ctx context.Context, w io.Writer) (indexer.DumpStats, error)
}

// RecoveryReader reports whether the node is still recovering its KV
// index from a peer's dump at startup (server/recovery.go).
type RecoveryReader interface {
	Recovering() bool
}

// CatchUpReader reports whether the node has, since it started, caught up
// once with a leader's commit index (server/readiness.go latches it, and
// judges it with CatchUpReason); GET /readyz?for=selection needs that.
type CatchUpReader interface {
	CaughtUp() bool
}

// ListenerReader reports a worker's KV event listener per rank (nil when
// it has none).
type ListenerReader func(worker uint64) map[uint32]ingest.RankStatus
