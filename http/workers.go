package http

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// workerPatch turns the wire patch into the catalog's, after the checks
// JSON cannot express.
func workerPatch(in *api.WorkerFields) (fsm.WorkerPatch, error) {
	if in.KVEventsEndpoints != nil && in.KVEventsEndpoint != nil {
		return fsm.WorkerPatch{}, badRequest("kv_events_endpoint", "give kv_events_endpoint or kv_events_endpoints, not both")
	}
	// Here, not in the catalog's apply: old log entries must still apply.
	if err := in.CheckEndpoints(); err != nil {
		return fsm.WorkerPatch{}, fieldError(err)
	}
	tenant := in.TenantID
	if in.RoutingGroup != nil {
		var given string
		if in.TenantID != nil {
			given = *in.TenantID
		}
		t, err := tenantOf(given, *in.RoutingGroup)
		if err != nil {
			return fsm.WorkerPatch{}, err
		}
		if in.TenantID == nil || *in.RoutingGroup != "" {
			tenant = &t
		}
	}
	if in.LeaseTTLSeconds != nil && *in.LeaseTTLSeconds > api.MaxLeaseTTLSeconds {
		return fsm.WorkerPatch{}, badRequest("lease_ttl_s", "%d is out of range: give 1 to %d seconds, or 0 for no lease",
			*in.LeaseTTLSeconds, api.MaxLeaseTTLSeconds)
	}
	return fsm.WorkerPatch{
		LeaseTTLSeconds: in.LeaseTTLSeconds,
		ModelName:       in.ModelName, TenantID: tenant, Endpoint: in.Endpoint, BlockSize: in.BlockSize,
		DataParallelStartRank: in.DataParallelStartRank, DataParallelSize: in.DataParallelSize,
		KVEventsEndpoints: in.KVEventsEndpoints, KVEventsEndpoint: in.KVEventsEndpoint,
		ReplayEndpoint: in.ReplayEndpoint, TotalKVBlocks: in.TotalKVBlocks, MaxNumBatchedTokens: in.MaxNumBatchedTokens,
	}, nil
}

func (s *Service) upsertWorker(w http.ResponseWriter, r *http.Request) error {
	var in api.WorkerFields
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.WorkerID == nil {
		return badRequest("worker_id", "required")
	}
	p, err := workerPatch(&in)
	if err != nil {
		return err
	}
	// A new record is the patch applied to defaults: dp size 1, rank 0.
	worker := p.Apply(&fsm.Worker{WorkerID: *in.WorkerID, DataParallelSize: 1})
	if err := fsm.ValidateSpec(worker); err != nil {
		return err
	}
	res, err := s.cfg.Writer.Apply(r.Context(), fsm.UpsertWorker{Worker: *worker})
	if err != nil {
		return err
	}
	return written(w, http.StatusCreated, res)
}

func (s *Service) patchWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := pathWorkerID(r)
	if err != nil {
		return err
	}
	var in api.WorkerFields
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.WorkerID != nil && *in.WorkerID != id {
		return badRequest("worker_id", "%d does not match the path's %d", *in.WorkerID, id)
	}
	p, err := workerPatch(&in)
	if err != nil {
		return err
	}
	if p.Empty() {
		return badRequest("", "the patch changes nothing: give at least one field to change")
	}
	// Check the result against the local record first so that bad input
	// never reaches the log; the FSM checks again against the latest one.
	if cur, ok := s.cfg.Catalog.Catalog().Worker(id); ok {
		if err := fsm.ValidateSpec(p.Apply(cur)); err != nil {
			return err
		}
	}
	res, err := s.cfg.Writer.Apply(r.Context(), fsm.PatchWorker{WorkerID: id, Patch: p})
	if err != nil {
		return err
	}
	return written(w, http.StatusOK, res)
}

func (s *Service) deleteWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := pathWorkerID(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Writer.Apply(r.Context(), fsm.DeleteWorker{WorkerID: id})
	if err != nil {
		return err
	}
	return written(w, http.StatusOK, res)
}

// written answers a catalog write with the record and the index it was
// applied at.
func written(w http.ResponseWriter, status int, res *fsm.Result) error {
	setIndex(w, res.Index)
	return writeJSON(w, status, api.WorkerWritten{Worker: workerView(res.Worker, nil), CatalogIndex: res.Index})
}

// catalog reads the catalog at the requested consistency. A local read
// first waits for the catalog index the request carries (X-Kvselect-Index),
// so a client reads its own writes on any node.
func (s *Service) catalog(r *http.Request) (*fsm.Catalog, error) {
	switch c := r.URL.Query().Get(api.QueryConsistency); c {
	case "", api.ConsistencyLocal:
		if err := s.waitCatalog(r, 0); err != nil {
			return nil, err
		}
		return s.cfg.Catalog.Catalog(), nil
	case api.ConsistencyLinearizable:
		return s.cfg.Catalog.LinearizableCatalog(r.Context())
	default:
		return nil, badRequest(api.QueryConsistency, "must be %s or %s, got %q",
			api.ConsistencyLocal, api.ConsistencyLinearizable, c)
	}
}

func (s *Service) listWorkers(w http.ResponseWriter, r *http.Request) error {
	c, err := s.catalog(r)
	if err != nil {
		return err
	}
	model, tenant, err := queryPartition(r)
	if err != nil {
		return err
	}
	setIndex(w, c.Index())
	return writeJSON(w, http.StatusOK, s.views(c, c.Workers(model, tenant)))
}

func (s *Service) getWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := pathWorkerID(r)
	if err != nil {
		return err
	}
	c, err := s.catalog(r)
	if err != nil {
		return err
	}
	rec, ok := c.Worker(id)
	if !ok {
		return fmt.Errorf("%w: %d", fsm.ErrWorkerNotFound, id)
	}
	setIndex(w, c.Index())
	return writeJSON(w, http.StatusOK, s.views(c, []*fsm.Worker{rec})[0])
}

// views renders catalog records of c as reads show them: with this
// node's listener status per rank and whether it would select the worker,
// which are local state, not catalog, and the busy thresholds load
// shedding cannot check for them.
func (s *Service) views(c *fsm.Catalog, ws []*fsm.Worker) []api.Worker {
	out := make([]api.Worker, len(ws))
	for i, w := range ws {
		var ls map[uint32]api.ListenerStatus
		if s.cfg.Listeners != nil {
			if st := s.cfg.Listeners(w.WorkerID); len(st) > 0 {
				ls = make(map[uint32]api.ListenerStatus, len(st))
				for rank, l := range st {
					state := string(l.State)
					if l.Stale {
						state = api.ListenerStale
					}
					ls[rank] = api.ListenerStatus{State: state, LastError: l.LastError, Endpoint: l.Endpoint,
						ReplayEndpoint: l.ReplayEndpoint, LastSeq: l.LastSeq, Messages: l.Messages, Gaps: l.Gaps,
						LostMessages: l.LostMessages, Restarts: l.Restarts, ReplayFailures: l.ReplayFailures,
						DroppedFrames: l.DroppedFrames, DroppedMalformed: l.DroppedMalformed,
						DroppedQueueFull: l.DroppedQueueFull, DroppedOversize: l.DroppedOversize, ReplayRejected: l.ReplayRejected,
						QueuedBytes: l.QueuedBytes, QueuedBytesPeak: l.QueuedBytesPeak}
				}
			}
		}
		out[i] = workerView(w, ls)
		here := w.Schedulable() && !allStale(ls)
		out[i].SchedulableHere = &here
		if t, ok := c.Thresholds(w.ModelName); ok {
			out[i].ThresholdsNotChecked = s.cfg.Loads.Unchecked(t, w)
		}
	}
	return out
}

// workerView is a catalog record on the wire.
func workerView(w *fsm.Worker, listeners map[uint32]api.ListenerStatus) api.Worker {
	lifecycle := api.LifecycleIncomplete
	if w.Schedulable() {
		lifecycle = api.LifecycleSchedulable
	}
	return api.Worker{
		WorkerID: w.WorkerID, ModelName: w.ModelName, TenantID: w.TenantID, Endpoint: w.Endpoint, BlockSize: w.BlockSize,
		DataParallelStartRank: w.DataParallelStartRank, DataParallelSize: w.DataParallelSize,
		KVEventsEndpoints: w.KVEventsEndpoints, ReplayEndpoint: w.ReplayEndpoint,
		TotalKVBlocks: w.TotalKVBlocks, MaxNumBatchedTokens: w.MaxNumBatchedTokens, LeaseTTLSeconds: w.LeaseTTLSeconds,
		CreateIndex: w.CreateIndex, ModifyIndex: w.ModifyIndex, BlockSizeIndex: w.BlockSizeIndex,
		Lifecycle: lifecycle, NotSchedulableReasons: w.NotSchedulableReasons, Listeners: listeners,
	}
}

func pathWorkerID(r *http.Request) (uint64, error) {
	raw := mux.Vars(r)["id"]
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, badRequest("worker_id", "%q in the path is not an unsigned 64-bit integer", raw)
	}
	return id, nil
}
