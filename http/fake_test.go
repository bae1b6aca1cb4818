package http

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler"
)

// fakeNode stands in for a node's parts behind the handlers' interfaces,
// in the style of rqlite's MockStore: each behaviour a test wants to change
// is a function field; the others answer as a lone, healthy leader would,
// with a catalog driven by an fsm.Log.
type fakeNode struct {
	id  string
	log *fsm.Log

	apply        func(ctx context.Context, cmd fsm.Command) (*fsm.Result, error)
	waitApplied  func(ctx context.Context, idx uint64) error
	linearizable func(ctx context.Context) (*fsm.Catalog, error)
	isLeader     func() bool
	hasLeader    func() bool // nil: a leader is known
	leader       func(ctx context.Context) (cluster.LeaderInfo, error)

	status      func() api.ClusterStatus
	join        func(ctx context.Context, req api.JoinRequest) error
	remove      func(ctx context.Context, id string) error
	stepDown    func(ctx context.Context) error
	setMetadata func(ctx context.Context, meta fsm.NodeMeta) error
	keepAlive   func(ctx context.Context, ids []uint64) ([]cluster.LeaseState, []error, error)

	sel             func(req scheduler.SelectRequest) (scheduler.Selection, error)
	reserve         func(req scheduler.ReserveRequest) (scheduler.Booking, error)
	prefillComplete func(id string) error
	outputBlock     func(id string, decay *float64) error
	free            func(id string) error
	reservation     func(id string) (scheduler.ReservationInfo, error)

	announced   atomic.Int64  // AnnounceCommit calls
	announcedAt atomic.Uint64 // the index of the last one
	removed     chan struct{} // Removed; nil: never
}

func newFakeNode() *fakeNode { return &fakeNode{id: "n1", log: fsm.NewLog()} }

// service returns the HTTP API over the fake.
func (f *fakeNode) service(mutate ...func(*Config)) *Service {
	cfg := Config{Catalog: f, Writer: f, Leader: f, Cluster: f, Leases: f, Selector: f, Loads: f, Index: f,
		CatalogWait: 200 * time.Millisecond, ForwardTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mutate {
		m(&cfg)
	}
	return New(cfg)
}

func (f *fakeNode) Catalog() *fsm.Catalog { return f.log.FSM.Catalog() }

func (f *fakeNode) WaitApplied(ctx context.Context, idx uint64) error {
	if f.waitApplied != nil {
		return f.waitApplied(ctx, idx)
	}
	if f.Catalog().Index() < idx {
		return fmt.Errorf("%w: fake at %d, want %d", cluster.ErrCatalogBehind, f.Catalog().Index(), idx)
	}
	return nil
}

func (f *fakeNode) LinearizableCatalog(ctx context.Context) (*fsm.Catalog, error) {
	if f.linearizable != nil {
		return f.linearizable(ctx)
	}
	return f.Catalog(), nil
}

func (f *fakeNode) Apply(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if f.apply != nil {
		return f.apply(ctx, cmd)
	}
	res, err := f.log.Apply(cmd)
	if err != nil {
		return nil, err
	}
	return res, res.Err
}

func (f *fakeNode) ID() string { return f.id }

// KeepAlive answers as a leader that has just renewed every lease the
// catalog holds.
func (f *fakeNode) KeepAlive(ctx context.Context, ids []uint64) ([]cluster.LeaseState, []error, error) {
	if f.keepAlive != nil {
		return f.keepAlive(ctx, ids)
	}
	states, errs := make([]cluster.LeaseState, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		states[i].WorkerID = id
		w, ok := f.Catalog().Worker(id)
		switch {
		case !ok:
			errs[i] = fmt.Errorf("%w: %d", fsm.ErrWorkerNotFound, id)
		case w.LeaseTTLSeconds == 0:
			errs[i] = fmt.Errorf("%w: %d", cluster.ErrNoLease, id)
		default:
			states[i].TTL = time.Duration(w.LeaseTTLSeconds) * time.Second
			states[i].ExpiresIn = states[i].TTL
		}
	}
	return states, errs, nil
}

func (f *fakeNode) IsLeader() bool { return f.isLeader == nil || f.isLeader() }

func (f *fakeNode) WaitForLeaderHTTP(ctx context.Context) (cluster.LeaderInfo, error) {
	if f.leader != nil {
		return f.leader(ctx)
	}
	return cluster.LeaderInfo{ID: f.id}, nil
}

func (f *fakeNode) LeaderWait() time.Duration { return 300 * time.Millisecond }

func (f *fakeNode) HasLeader() bool { return f.hasLeader == nil || f.hasLeader() }

func (f *fakeNode) AnnounceCommit(index uint64) {
	f.announced.Add(1)
	f.announcedAt.Store(index)
}

func (f *fakeNode) Status() api.ClusterStatus {
	if f.status != nil {
		return f.status()
	}
	// A leader that has applied everything it committed (at least one
	// entry: a node that learned no commit index is not caught up).
	idx := f.Catalog().Index()
	return api.ClusterStatus{NodeID: f.id, State: api.StateLeader, Leader: api.LeaderRef{ID: f.id},
		CommitIndex: max(idx, 1), AppliedIndex: max(idx, 1), CatalogIndex: idx, Members: []api.Member{}}
}

func (f *fakeNode) Removed() <-chan struct{} { return f.removed }

func (f *fakeNode) Join(ctx context.Context, req api.JoinRequest) error {
	if f.join != nil {
		return f.join(ctx, req)
	}
	return nil
}

func (f *fakeNode) Remove(ctx context.Context, id string) error {
	if f.remove != nil {
		return f.remove(ctx, id)
	}
	return nil
}

func (f *fakeNode) StepDown(ctx context.Context) error {
	if f.stepDown != nil {
		return f.stepDown(ctx)
	}
	return nil
}

func (f *fakeNode) SetMetadata(ctx context.Context, meta fsm.NodeMeta) error {
	if f.setMetadata != nil {
		return f.setMetadata(ctx, meta)
	}
	return nil
}

func (f *fakeNode) Select(req scheduler.SelectRequest) (scheduler.Selection, error) {
	if f.sel != nil {
		return f.sel(req)
	}
	return scheduler.Selection{Partition: req.Partition, WorkerID: 1, Endpoint: "http://w1",
		BlockSize: 16, ReservationID: req.ReservationID}, nil
}

func (f *fakeNode) Reserve(req scheduler.ReserveRequest) (scheduler.Booking, error) {
	if f.reserve != nil {
		return f.reserve(req)
	}
	return scheduler.Booking{Partition: req.Partition, WorkerID: req.WorkerID, DPRank: req.DPRank}, nil
}

func (f *fakeNode) PrefillComplete(id string) error {
	if f.prefillComplete != nil {
		return f.prefillComplete(id)
	}
	return nil
}

func (f *fakeNode) OutputBlock(id string, decay *float64) error {
	if f.outputBlock != nil {
		return f.outputBlock(id, decay)
	}
	return nil
}

func (f *fakeNode) Free(id string) error {
	if f.free != nil {
		return f.free(id)
	}
	return nil
}

func (f *fakeNode) PotentialLoads(fsm.PartitionKey, scheduler.Prompt) ([]scheduler.PotentialLoad, error) {
	return nil, nil
}

func (f *fakeNode) OverlapScores(fsm.PartitionKey, scheduler.Prompt) (scheduler.OverlapScores, error) {
	return scheduler.OverlapScores{}, nil
}

func (f *fakeNode) Loads(string, string) []scheduler.PartitionLoads { return nil }

func (f *fakeNode) Reservations(scheduler.ReservationFilter) ([]scheduler.ReservationInfo, bool) {
	return nil, false
}

func (f *fakeNode) Reservation(id string) (scheduler.ReservationInfo, error) {
	if f.reservation != nil {
		return f.reservation(id)
	}
	return scheduler.ReservationInfo{}, fmt.Errorf("%w: %q", scheduler.ErrReservationNotFound, id)
}

// Unchecked: the fake checks every threshold but the decode fraction of
// a worker without total_kv_blocks.
func (f *fakeNode) Unchecked(t fsm.Thresholds, w *fsm.Worker) []string {
	if t.ActiveDecodeBlocks != nil && w.TotalKVBlocks == 0 {
		return []string{"active_decode_blocks_threshold not checked: total_kv_blocks is unknown"}
	}
	return nil
}

func (f *fakeNode) WriteDump(_ context.Context, w io.Writer) (indexer.DumpStats, error) {
	_, err := io.WriteString(w, "{}\n")
	return indexer.DumpStats{}, err
}

// serve starts the service on a loopback test server, closed with the test.
func serve(t *testing.T, s *Service) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}
