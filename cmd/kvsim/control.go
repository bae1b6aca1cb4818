package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/kvsim"
)

// maxControlBody bounds control API request bodies.
const maxControlBody = 8 << 20

// controlAPI is the HTTP control surface of a running Sim; package kvsim
// defines its paths and bodies (kvsim.PathWorkers, kvsim.PromptRequest,
// …) and its client, kvsim.ControlClient.
//
// Errors are a kvsim.ErrorBody: 400 for a bad body, 404 for an unknown
// worker, rank or route, 405 (with Allow) for a wrong method.
type controlAPI struct {
	sim *kvsim.Sim
	log *slog.Logger
}

// handler routes by ServeMux patterns; jsonMisses turns the mux's own
// plain-text 404 and 405 into the API's JSON errors.
func (c *controlAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+kvsim.PathWorkers, c.listWorkers)
	mux.HandleFunc("GET "+kvsim.PathWorkers+"/{id}", c.getWorker)
	mux.HandleFunc("POST "+kvsim.PathWorkers+"/{id}/prompt", c.workerPrompt)
	mux.HandleFunc("POST "+kvsim.PathPrompt, c.prompt)
	mux.HandleFunc("POST "+kvsim.PathReset, c.rankAction((*kvsim.Worker).Reset))
	mux.HandleFunc("POST "+kvsim.PathRestart, c.rankAction((*kvsim.Worker).Restart))
	return jsonMisses(mux)
}

// jsonMisses serves r by mux, unless no pattern matches: then the mux's
// answer (404, or 405 with its Allow header) is kept but its body is the
// API's JSON error.
func jsonMisses(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		miss := &statusOnly{header: http.Header{}}
		h.ServeHTTP(miss, r)
		if miss.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", miss.header.Get("Allow"))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		if miss.status != http.StatusNotFound { // a redirect to the clean path, say
			maps.Copy(w.Header(), miss.header)
			w.WriteHeader(miss.status)
			return
		}
		noRoute(w, r)
	})
}

// statusOnly is a ResponseWriter that keeps the status and headers of
// the mux's own answer and drops its body.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return len(b), nil
}
func (s *statusOnly) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func noRoute(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s", r.URL.Path))
}

func (c *controlAPI) listWorkers(w http.ResponseWriter, _ *http.Request) {
	regs := make([]api.WorkerFields, 0, len(c.sim.Workers()))
	for _, wk := range c.sim.Workers() {
		regs = append(regs, wk.Registration().Body())
	}
	writeJSON(w, http.StatusOK, regs)
}

// pathWorker is the {id} of /workers/{id}; a path whose id is not a
// number is no route.
func pathWorker(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		noRoute(w, r)
		return 0, false
	}
	return id, true
}

func (c *controlAPI) getWorker(w http.ResponseWriter, r *http.Request) {
	id, ok := pathWorker(w, r)
	if !ok {
		return
	}
	if wk, ok := c.worker(w, &id); ok {
		writeJSON(w, http.StatusOK, wk.Registration().Body())
	}
}

func (c *controlAPI) prompt(w http.ResponseWriter, r *http.Request) {
	var req kvsim.PromptRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if wk, ok := c.worker(w, req.WorkerID); ok {
		serve(w, wk, req.DPRank, req.TokenIDs)
	}
}

func (c *controlAPI) workerPrompt(w http.ResponseWriter, r *http.Request) {
	id, ok := pathWorker(w, r)
	if !ok {
		return
	}
	var req kvsim.WorkerPromptRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if wk, ok := c.worker(w, &id); ok {
		serve(w, wk, req.DPRank, req.TokenIDs)
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

// rankAction serves /reset and /restart: act on one rank, or on every rank
// when dp_rank is absent.
func (c *controlAPI) rankAction(act func(*kvsim.Worker, int) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req kvsim.RankRequest
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
	writeJSON(w, status, kvsim.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
