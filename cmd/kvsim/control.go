package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/kvsim"
)

// maxControlBody bounds control API request bodies.
const maxControlBody = 8 << 20

// controlAPI is the HTTP control surface of a running Sim:
//
//	GET  /workers               → the registrations of every worker
//	GET  /workers/{id}          → that worker's registration
//	POST /workers/{id}/prompt   {"dp_rank" (default 0), "token_ids"} → ServeResult
//	POST /prompt                {"worker_id", "dp_rank" (default 0), "token_ids"} → ServeResult
//	POST /reset                 {"worker_id", "dp_rank" (optional: every rank)}
//	POST /restart               {"worker_id", "dp_rank" (optional: every rank)}
//
// /workers/{id} is the endpoint each worker registers with kvselect, so a
// caller that got a worker from /select sends the request to
// selection.endpoint + "/prompt", as it would to a real engine.
//
// Errors are {"error": "..."}: 400 for a bad body, 404 for an unknown
// worker, rank or route, 405 for a wrong method.
type controlAPI struct {
	sim *kvsim.Sim
	log *slog.Logger
}

// handler routes requests by exact path, then method.
func (c *controlAPI) handler() http.Handler {
	routes := map[string]map[string]http.HandlerFunc{
		"/workers": {http.MethodGet: c.listWorkers},
		"/prompt":  {http.MethodPost: c.prompt},
		"/reset":   {http.MethodPost: c.rankAction((*kvsim.Worker).Reset)},
		"/restart": {http.MethodPost: c.rankAction((*kvsim.Worker).Restart)},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods, ok := routes[r.URL.Path]
		if !ok {
			methods, ok = c.workerRoutes(r.URL.Path)
		}
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s", r.URL.Path))
			return
		}
		h, ok := methods[r.Method]
		if !ok {
			allowed := make([]string, 0, len(methods))
			for m := range methods {
				allowed = append(allowed, m)
			}
			sort.Strings(allowed)
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		h(w, r)
	})
}

func (c *controlAPI) listWorkers(w http.ResponseWriter, _ *http.Request) {
	regs := make([]api.WorkerPatch, 0, len(c.sim.Workers()))
	for _, wk := range c.sim.Workers() {
		regs = append(regs, wk.Registration().Body())
	}
	writeJSON(w, http.StatusOK, regs)
}

// workerRoutes routes /workers/{id} and /workers/{id}/prompt, the paths
// under each worker's registered endpoint.
func (c *controlAPI) workerRoutes(path string) (map[string]http.HandlerFunc, bool) {
	rest, ok := strings.CutPrefix(path, "/workers/")
	if !ok {
		return nil, false
	}
	idText, sub, hasSub := strings.Cut(rest, "/")
	id, err := strconv.ParseUint(idText, 10, 64)
	switch {
	case err != nil:
		return nil, false
	case !hasSub:
		return map[string]http.HandlerFunc{http.MethodGet: c.getWorker(id)}, true
	case sub == "prompt":
		return map[string]http.HandlerFunc{http.MethodPost: c.workerPrompt(id)}, true
	}
	return nil, false
}

func (c *controlAPI) getWorker(id uint64) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if wk, ok := c.worker(w, &id); ok {
			writeJSON(w, http.StatusOK, wk.Registration().Body())
		}
	}
}

type promptRequest struct {
	WorkerID *uint64  `json:"worker_id"`
	DPRank   int      `json:"dp_rank"`
	TokenIDs []uint32 `json:"token_ids"`
}

func (c *controlAPI) prompt(w http.ResponseWriter, r *http.Request) {
	var req promptRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if wk, ok := c.worker(w, req.WorkerID); ok {
		serve(w, wk, req.DPRank, req.TokenIDs)
	}
}

// workerPromptRequest is a prompt sent to a worker's own endpoint: the
// worker is in the path.
type workerPromptRequest struct {
	DPRank   int      `json:"dp_rank"`
	TokenIDs []uint32 `json:"token_ids"`
}

func (c *controlAPI) workerPrompt(id uint64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req workerPromptRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if wk, ok := c.worker(w, &id); ok {
			serve(w, wk, req.DPRank, req.TokenIDs)
		}
	}
}

// serve runs a prompt on a worker's rank and answers its ServeResult.
func serve(w http.ResponseWriter, wk *kvsim.Worker, rank int, tokens []uint32) {
	res, err := wk.Serve(rank, tokens)
	if err != nil {
		writeSimError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

type rankRequest struct {
	WorkerID *uint64 `json:"worker_id"`
	DPRank   *int    `json:"dp_rank"`
}

// rankAction serves /reset and /restart: act on one rank, or on every rank
// when dp_rank is absent.
func (c *controlAPI) rankAction(act func(*kvsim.Worker, int) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req rankRequest
		if !decodeBody(w, r, &req) {
			return
		}
		wk, ok := c.worker(w, req.WorkerID)
		if !ok {
			return
		}
		rank := kvsim.AllRanks
		if req.DPRank != nil {
			if *req.DPRank < 0 {
				writeError(w, http.StatusBadRequest, "dp_rank must not be negative")
				return
			}
			rank = *req.DPRank
		}
		if err := act(wk, rank); err != nil {
			writeSimError(w, err)
			return
		}
		c.log.Info("control action", "path", r.URL.Path, "worker_id", wk.ID(), "dp_rank", rank)
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// worker resolves a required worker_id, answering the error itself.
func (c *controlAPI) worker(w http.ResponseWriter, id *uint64) (*kvsim.Worker, bool) {
	if id == nil {
		writeError(w, http.StatusBadRequest, "worker_id is required")
		return nil, false
	}
	wk := c.sim.Worker(*id)
	if wk == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown worker_id %d", *id))
		return nil, false
	}
	return wk, true
}

// decodeBody decodes a bounded, strict JSON body into v, answering the
// error itself.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("trailing data after the JSON body")
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", tooBig.Limit))
		return false
	}
	writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
	return false
}

func writeSimError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, kvsim.ErrUnknownRank):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, kvsim.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
