package http

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/ingest"
)

// workerInput is the body of POST /workers and PATCH /workers/{id}: the
// catalog patch plus the id. Pointers tell "absent" from zero values;
// unknown fields are ignored.
type workerInput struct {
	WorkerID *uint64 `json:"worker_id"`
	fsm.WorkerPatch
}

// patch returns the catalog patch after the checks JSON cannot express.
func (in *workerInput) patch() (fsm.WorkerPatch, error) {
	if in.KVEventsEndpoints != nil && in.KVEventsEndpoint != nil {
		return fsm.WorkerPatch{}, badRequest("kv_events_endpoint", "give kv_events_endpoint or kv_events_endpoints, not both")
	}
	return in.WorkerPatch, nil
}

// workerWritten is the answer to a catalog write: the record plus the Raft
// index it was applied at.
type workerWritten struct {
	*fsm.Worker
	CatalogIndex uint64 `json:"catalog_index"`
}

func (s *Service) upsertWorker(w http.ResponseWriter, r *http.Request) error {
	var in workerInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.WorkerID == nil {
		return badRequest("worker_id", "required")
	}
	p, err := in.patch()
	if err != nil {
		return err
	}
	// A new record is the patch applied to defaults: dp size 1, rank 0.
	worker := p.Apply(&fsm.Worker{WorkerID: *in.WorkerID, DataParallelSize: 1})
	if err := fsm.ValidateSpec(worker); err != nil {
		return err
	}
	res, err := s.cfg.Node.Apply(r.Context(), fsm.CmdUpsertWorker, fsm.UpsertWorker{Worker: *worker})
	if err != nil {
		return err
	}
	return s.written(w, http.StatusCreated, res)
}

func (s *Service) patchWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := pathWorkerID(r)
	if err != nil {
		return err
	}
	var in workerInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.WorkerID != nil && *in.WorkerID != id {
		return badRequest("worker_id", "%d does not match the path's %d", *in.WorkerID, id)
	}
	p, err := in.patch()
	if err != nil {
		return err
	}
	// Check the result against the local record first so that bad input
	// never reaches the log; the FSM checks again against the latest one.
	if cur, ok := s.cfg.Node.Catalog().Worker(id); ok {
		if err := fsm.ValidateSpec(p.Apply(cur)); err != nil {
			return err
		}
	}
	res, err := s.cfg.Node.Apply(r.Context(), fsm.CmdPatchWorker, fsm.PatchWorker{WorkerID: id, Patch: p})
	if err != nil {
		return err
	}
	return s.written(w, http.StatusOK, res)
}

func (s *Service) deleteWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := pathWorkerID(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Node.Apply(r.Context(), fsm.CmdDeleteWorker, fsm.DeleteWorker{WorkerID: id})
	if err != nil {
		return err
	}
	return s.written(w, http.StatusOK, res)
}

func (s *Service) written(w http.ResponseWriter, status int, res *fsm.Result) error {
	w.Header().Set(headerIndex, strconv.FormatUint(res.Index, 10))
	return writeJSON(w, status, workerWritten{Worker: res.Worker, CatalogIndex: res.Index})
}

// catalog reads the catalog at the requested consistency.
func (s *Service) catalog(r *http.Request) (*fsm.Catalog, error) {
	switch c := r.URL.Query().Get("consistency"); c {
	case "", "local":
		return s.cfg.Node.Catalog(), nil
	case "linearizable":
		return s.cfg.Node.LinearizableCatalog(r.Context())
	default:
		return nil, badRequest("consistency", "must be local or linearizable, got %q", c)
	}
}

func (s *Service) listWorkers(w http.ResponseWriter, r *http.Request) error {
	c, err := s.catalog(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	w.Header().Set(headerIndex, strconv.FormatUint(c.Index(), 10))
	return writeJSON(w, http.StatusOK, s.views(c.Workers(q.Get("model_name"), q.Get("tenant_id"))))
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
	w.Header().Set(headerIndex, strconv.FormatUint(c.Index(), 10))
	return writeJSON(w, http.StatusOK, s.views([]*fsm.Worker{rec})[0])
}

// workerView is a catalog record as reads show it: with this node's
// listener status per rank, which is local state, not catalog.
type workerView struct {
	*fsm.Worker
	Listeners map[string]ingest.RankStatus `json:"listeners,omitempty"`
}

func (s *Service) views(ws []*fsm.Worker) []workerView {
	out := make([]workerView, len(ws))
	for i, w := range ws {
		out[i].Worker = w
		if s.cfg.Listeners != nil {
			out[i].Listeners = s.cfg.Listeners(w.WorkerID)
		}
	}
	return out
}

func pathWorkerID(r *http.Request) (uint64, error) {
	raw := mux.Vars(r)["id"]
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, badRequest("worker_id", "%q in the path is not an unsigned 64-bit integer", raw)
	}
	return id, nil
}
