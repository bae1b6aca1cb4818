package slottracker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/promx"
	"github.com/kvselect/kvselect/scheduler"
)

// Worker is one registration: a contiguous range of dp ranks of one
// worker in one tracker (GET /workers lists these).
type Worker struct {
	WorkerID  uint64 `json:"worker_id"`
	ModelName string `json:"model_name"`
	TenantID  string `json:"tenant_id"`
	BlockSize uint32 `json:"block_size"`
	DPStart   uint32 `json:"dp_start"`
	DPSize    uint32 `json:"dp_size"`
}

// Load is one rank's active load (GET /loads).
type Load struct {
	ModelName           string `json:"model_name"`
	TenantID            string `json:"tenant_id"`
	WorkerID            uint64 `json:"worker_id"`
	DPRank              uint32 `json:"dp_rank"`
	ActivePrefillTokens int64  `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  int64  `json:"active_decode_blocks"`
}

// PotentialLoad is one rank's load if a request were added to it (POST
// /potential_loads).
type PotentialLoad struct {
	WorkerID               uint64 `json:"worker_id"`
	DPRank                 uint32 `json:"dp_rank"`
	PotentialPrefillTokens int64  `json:"potential_prefill_tokens"`
	PotentialDecodeBlocks  int64  `json:"potential_decode_blocks"`
}

// Service holds every tracker of one process.
type Service struct {
	expiry time.Duration
	now    func() time.Time
	log    *slog.Logger
	// idx is the empty index every tracker's scheduler reads: slot
	// trackers receive no KV events, and their bookings name their
	// prefill, so nothing ever matches against it.
	idx *indexer.Indexer

	// requests counts the API's requests; registry is what GET /metrics
	// serves (metrics.go).
	requests *promx.Requests
	registry *prometheus.Registry

	mu       sync.RWMutex
	trackers map[fsm.PartitionKey]*tracker
	closed   bool
	wg       sync.WaitGroup // the trackers' sweepers
}

// tracker is one (model_name, tenant_id): its catalog and the scheduler
// that follows it. catalog is written only under Service.mu.
type tracker struct {
	key     fsm.PartitionKey
	catalog *fsm.Log
	sched   *scheduler.Scheduler
	stop    chan struct{} // stops the sweeper; closed once, under Service.mu
}

// NewService returns a service with no trackers. expiry is how long after
// /add a request is freed if nobody frees it; now is the clock (nil:
// time.Now).
func NewService(expiry time.Duration, now func() time.Time, log *slog.Logger) (*Service, error) {
	if expiry <= 0 {
		return nil, fmt.Errorf("active request expiry must be positive, got %v", expiry)
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{
		expiry: expiry, now: now, log: log.With("component", "slottracker"),
		idx: indexer.New(log), trackers: map[fsm.PartitionKey]*tracker{}, requests: promx.NewRequests(),
	}
	s.registry = s.newRegistry()
	return s, nil
}

func (s *Service) newTracker(key fsm.PartitionKey) (*tracker, error) {
	cfg := scheduler.DefaultConfig()
	cfg.ActiveRequestExpiry, cfg.Now = s.expiry, s.now
	// The caller reports every request's life here; prefill load is
	// active until it says prefill_complete, as in Dynamo's slot tracker.
	cfg.NoPrefillDecay = true
	sched, err := scheduler.New(cfg, s.idx, s.log.With("model_name", key.Model, "tenant_id", key.Tenant))
	if err != nil {
		return nil, err
	}
	return &tracker{key: key, catalog: fsm.NewLog(sched.ApplyCatalog), sched: sched, stop: make(chan struct{})}, nil
}

// checkKey validates a tracker key and fills the default tenant.
func checkKey(key *fsm.PartitionKey) error {
	if key.Tenant == "" {
		key.Tenant = fsm.DefaultScope
	}
	switch {
	case key.Model == "":
		return invalid("model_name", "must not be empty")
	case len(key.Model) > fsm.MaxStringLen:
		return invalid("model_name", "longer than %d bytes", fsm.MaxStringLen)
	case len(key.Tenant) > fsm.MaxStringLen:
		return invalid("tenant_id", "longer than %d bytes", fsm.MaxStringLen)
	}
	return nil
}

func checkRequestID(id string) error {
	switch {
	case id == "":
		return invalid("request_id", "must not be empty")
	case len(id) > api.MaxIDLen:
		return invalid("request_id", "%d bytes, at most %d", len(id), api.MaxIDLen)
	}
	return nil
}

func checkNewTokens(n int64) error {
	if n < 0 || n > scheduler.MaxISLTokens {
		return invalid("new_isl_tokens", "must be between 0 and %d, got %d", int64(scheduler.MaxISLTokens), n)
	}
	return nil
}

func checkHashes(seq []uint64) error {
	if len(seq) > api.MaxHashes {
		return invalid("sequence_hashes", "more than %d entries", api.MaxHashes)
	}
	return nil
}

// checkRegistration applies the seed's rules, then the catalog's limits,
// with the slot tracker's field names.
func checkRegistration(w *Worker) error {
	switch {
	case w.BlockSize == 0:
		return invalid("block_size", "must be greater than 0")
	case w.BlockSize > fsm.MaxBlockSize:
		return invalid("block_size", "must be at most %d", fsm.MaxBlockSize)
	case w.DPSize == 0:
		return invalid("dp_size", "must be greater than 0")
	case uint64(w.DPStart)+uint64(w.DPSize) > math.MaxUint32:
		return invalid("dp_start", "dp range overflows u32: start=%d size=%d", w.DPStart, w.DPSize)
	case w.DPSize > fsm.MaxDataParallelSize:
		return invalid("dp_size", "must be at most %d", fsm.MaxDataParallelSize)
	case uint64(w.DPStart)+uint64(w.DPSize) > fsm.MaxRank:
		return invalid("dp_start", "the dp range must end at or below %d, got start=%d size=%d", fsm.MaxRank, w.DPStart, w.DPSize)
	}
	return nil
}

// placeholderEndpoint stands for the endpoint and KV events endpoints the
// catalog needs to call a worker schedulable. Nothing dials it: no
// listener runs in slot tracker mode.
const placeholderEndpoint = "inproc://kvselect-slot-tracker"

// catalogWorker is the catalog record of a registration.
func catalogWorker(w *Worker) fsm.Worker {
	cw := fsm.Worker{
		WorkerID: w.WorkerID, ModelName: w.ModelName, TenantID: w.TenantID, Endpoint: placeholderEndpoint,
		BlockSize: w.BlockSize, DataParallelStartRank: w.DPStart, DataParallelSize: w.DPSize,
		KVEventsEndpoints: make(map[uint32]string, w.DPSize),
	}
	for i := range w.DPSize {
		cw.KVEventsEndpoints[w.DPStart+i] = placeholderEndpoint
	}
	return cw
}

// Register adds a worker's dp range to its tracker, creating the tracker
// on its first registration.
func (s *Service) Register(w Worker) error {
	key := fsm.PartitionKey{Model: w.ModelName, Tenant: w.TenantID}
	if err := checkKey(&key); err != nil {
		return err
	}
	w.TenantID = key.Tenant
	if err := checkRegistration(&w); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	t, fresh := s.trackers[key], false
	if t == nil {
		var err error
		if t, err = s.newTracker(key); err != nil {
			return err
		}
		fresh = true
	}
	cat := t.catalog.FSM.Catalog()
	if _, dup := cat.Worker(w.WorkerID); dup {
		return fmt.Errorf("%w: worker %d for model=%s tenant=%s", ErrDuplicateWorker, w.WorkerID, key.Model, key.Tenant)
	}
	if p, ok := cat.Partition(key); ok {
		if p.BlockSize != w.BlockSize {
			return fmt.Errorf("%w for model=%s tenant=%s: existing=%d, requested=%d",
				ErrBlockSizeMismatch, key.Model, key.Tenant, p.BlockSize, w.BlockSize)
		}
		if len(p.Ranks)+int(w.DPSize) > fsm.MaxRanksPerPartition {
			return fmt.Errorf("%w: model=%s tenant=%s has %d ranks, at most %d",
				ErrRankLimit, key.Model, key.Tenant, len(p.Ranks), fsm.MaxRanksPerPartition)
		}
	}
	res, err := t.catalog.Upsert(catalogWorker(&w))
	if err != nil {
		return err
	}
	if res.Err != nil {
		// The checks above mirror the catalog's; this is the second line.
		return fmt.Errorf("%w: %v", ErrInvalid, res.Err)
	}
	if !res.Worker.Schedulable() {
		// Unreachable while the checks above cover the catalog's rules;
		// never leave a worker that /add cannot use.
		if _, err := t.catalog.Apply(fsm.DeleteWorker{WorkerID: w.WorkerID}); err != nil {
			return err
		}
		return fmt.Errorf("worker %d is not schedulable: %v", w.WorkerID, res.Worker.NotSchedulableReasons)
	}
	if fresh {
		s.trackers[key] = t
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t.sched.RunSweeper(t.stop)
		}()
	}
	return nil
}

// Unregister removes a worker's dp range and drops its active requests at
// once (the scheduler drops a rank's reservations when the rank leaves the
// catalog). The tracker goes with its last worker.
func (s *Service) Unregister(key fsm.PartitionKey, workerID uint64) error {
	if err := checkKey(&key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	notFound := fmt.Errorf("%w: worker %d for model=%s tenant=%s", ErrWorkerNotFound, workerID, key.Model, key.Tenant)
	t := s.trackers[key]
	if t == nil {
		return notFound
	}
	res, err := t.catalog.Apply(fsm.DeleteWorker{WorkerID: workerID})
	switch {
	case err != nil:
		return err
	case errors.Is(res.Err, fsm.ErrWorkerNotFound):
		return notFound
	case res.Err != nil:
		return res.Err
	}
	if t.catalog.FSM.Catalog().Len() == 0 {
		delete(s.trackers, key)
		close(t.stop)
	}
	return nil
}

// Workers lists the registrations, sorted by (model_name, tenant_id,
// worker_id), keeping those that match the non-empty filters.
func (s *Service) Workers(model, tenant string) []Worker {
	out := []Worker{}
	for _, t := range s.matching(model, tenant) {
		for _, w := range t.catalog.FSM.Catalog().Workers("", "") {
			out = append(out, Worker{
				WorkerID: w.WorkerID, ModelName: w.ModelName, TenantID: w.TenantID,
				BlockSize: w.BlockSize, DPStart: w.DataParallelStartRank, DPSize: w.DataParallelSize,
			})
		}
	}
	return out
}

// matching returns the trackers that match the non-empty filters, sorted
// by key.
func (s *Service) matching(model, tenant string) []*tracker {
	s.mu.RLock()
	var out []*tracker
	for k, t := range s.trackers {
		if (model == "" || k.Model == model) && (tenant == "" || k.Tenant == tenant) {
			out = append(out, t)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *tracker) int {
		return cmp.Or(cmp.Compare(a.key.Model, b.key.Model), cmp.Compare(a.key.Tenant, b.key.Tenant))
	})
	return out
}

// tracker returns the tracker of a validated key.
func (s *Service) tracker(key fsm.PartitionKey) (*tracker, error) {
	s.mu.RLock()
	t := s.trackers[key]
	s.mu.RUnlock()
	if t == nil {
		return nil, fmt.Errorf("%w for model=%s tenant=%s", ErrTrackerNotFound, key.Model, key.Tenant)
	}
	return t, nil
}

// Add books a request's prompt blocks on a registered rank, with
// newTokens prefill tokens (0: no prefill load).
func (s *Service) Add(key fsm.PartitionKey, requestID string, workerID uint64, dpRank uint32, seq []uint64, newTokens int64) error {
	if err := checkKey(&key); err != nil {
		return err
	}
	if err := checkRequestID(requestID); err != nil {
		return err
	}
	if err := checkNewTokens(newTokens); err != nil {
		return err
	}
	if err := checkHashes(seq); err != nil {
		return err
	}
	t, err := s.tracker(key)
	if err != nil {
		return err
	}
	_, err = t.sched.Reserve(scheduler.ReserveRequest{
		ID: requestID, Partition: key, WorkerID: workerID, DPRank: dpRank,
		// The booked prefill is exactly new_isl_tokens; the scheduler
		// wants an input length of at least 1 and at least the prefill,
		// and keeps it only for inspection, which this mode does not
		// serve.
		Prompt:           scheduler.Prompt{SequenceHashes: seq, ISL: max(newTokens, 1)},
		EffectivePrefill: &newTokens,
	})
	switch {
	case errors.Is(err, scheduler.ErrWorkerNotFound):
		return fmt.Errorf("%w: worker %d dp_rank %d for model=%s tenant=%s", ErrWorkerNotFound, workerID, dpRank, key.Model, key.Tenant)
	case errors.Is(err, scheduler.ErrDuplicateReservation):
		return fmt.Errorf("%w: request %q for model=%s tenant=%s", ErrDuplicateRequest, requestID, key.Model, key.Tenant)
	case errors.Is(err, scheduler.ErrInvalid): // checked above; the second line
		return &FieldError{Problem: strings.TrimPrefix(err.Error(), scheduler.ErrInvalid.Error()+": ")}
	}
	return err
}

// PrefillComplete ends an active request's prefill load; a repeat is a
// no-op.
func (s *Service) PrefillComplete(key fsm.PartitionKey, requestID string) error {
	t, err := s.lifecycle(&key, requestID)
	if err != nil {
		return err
	}
	if err := t.sched.PrefillComplete(requestID); errors.Is(err, scheduler.ErrReservationNotFound) {
		return fmt.Errorf("%w: request %q for model=%s tenant=%s", ErrRequestNotFound, requestID, key.Model, key.Tenant)
	} else if err != nil {
		return err
	}
	return nil
}

// Free ends a request and releases its blocks and any prefill left. It is
// idempotent while the tracker exists: an unknown request is a no-op.
func (s *Service) Free(key fsm.PartitionKey, requestID string) error {
	t, err := s.lifecycle(&key, requestID)
	if err != nil {
		return err
	}
	if err := t.sched.Free(requestID); err != nil && !errors.Is(err, scheduler.ErrReservationNotFound) {
		return err
	}
	return nil
}

func (s *Service) lifecycle(key *fsm.PartitionKey, requestID string) (*tracker, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkRequestID(requestID); err != nil {
		return nil, err
	}
	return s.tracker(*key)
}

// Loads returns every registered rank's active load, sorted by
// (model_name, tenant_id, worker_id, dp_rank), keeping those that match
// the non-empty filters.
func (s *Service) Loads(model, tenant string) []Load {
	out := []Load{}
	for _, t := range s.matching(model, tenant) {
		for _, pl := range t.sched.Loads(t.key.Model, t.key.Tenant) {
			for _, l := range pl.Loads {
				out = append(out, Load{
					ModelName: pl.Partition.Model, TenantID: pl.Partition.Tenant,
					WorkerID: l.WorkerID, DPRank: l.DPRank, ActivePrefillTokens: l.ActivePrefillTokens,
					ActiveDecodeBlocks: blocks(l.ActiveDecodeBlocks),
				})
			}
		}
	}
	return out
}

// blocks turns the scheduler's decode load into whole blocks. Only output
// blocks with decay fractions make it fractional, and this mode has none.
func blocks(b float64) int64 { return int64(math.Round(b)) }

// PotentialLoads projects, for every rank of the tracker, its load if the
// request were added to it: active prefill plus newTokens, and active
// decode blocks plus the request's distinct hashes not active there.
func (s *Service) PotentialLoads(key fsm.PartitionKey, seq []uint64, newTokens int64) ([]PotentialLoad, error) {
	if err := checkKey(&key); err != nil {
		return nil, err
	}
	if err := checkNewTokens(newTokens); err != nil {
		return nil, err
	}
	if err := checkHashes(seq); err != nil {
		return nil, err
	}
	t, err := s.tracker(key)
	if err != nil {
		return nil, err
	}
	projected, err := t.sched.ProjectLoads(key, seq, newTokens)
	if errors.Is(err, scheduler.ErrNotReady) {
		// The tracker lost its last worker since the lookup.
		return nil, fmt.Errorf("%w for model=%s tenant=%s", ErrTrackerNotFound, key.Model, key.Tenant)
	} else if err != nil {
		return nil, err
	}
	out := make([]PotentialLoad, len(projected))
	for i, p := range projected {
		out[i] = PotentialLoad{WorkerID: p.WorkerID, DPRank: p.DPRank,
			PotentialPrefillTokens: p.PrefillTokens, PotentialDecodeBlocks: blocks(p.DecodeBlocks)}
	}
	return out, nil
}

// SweepExpired frees, in every tracker, the requests added longer ago than
// the expiry, and returns how many it freed. Each tracker's sweeper does
// this on its own schedule; tests with an injected clock call it directly.
func (s *Service) SweepExpired() int {
	n := 0
	for _, t := range s.matching("", "") {
		n += t.sched.SweepExpired()
	}
	return n
}

// Close stops every tracker's sweeper and refuses further registrations.
func (s *Service) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, t := range s.trackers {
			close(t.stop)
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}
