package slottracker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/kvselect/kvselect/api"
)

// handlerFunc is a route's handler: it returns errors instead of writing
// them.
type handlerFunc func(http.ResponseWriter, *http.Request) error

// route is one row of the API.
type route struct {
	method, path string
	h            handlerFunc
}

// routes is the whole API of seed 003 in one table.
func (s *Service) routes() []route {
	return []route{
		{http.MethodPost, "/register", s.handleRegister},
		{http.MethodPost, "/unregister", s.handleUnregister},
		{http.MethodGet, "/workers", s.handleWorkers},
		{http.MethodPost, "/add", s.handleAdd},
		{http.MethodPost, "/prefill_complete", s.handlePrefillComplete},
		{http.MethodPost, "/free", s.handleFree},
		{http.MethodGet, "/loads", s.handleLoads},
		{http.MethodPost, "/potential_loads", s.handlePotentialLoads},
		{http.MethodGet, "/health", s.handleHealth},
		{http.MethodGet, "/metrics", s.handleMetrics},
	}
}

// Handler returns the HTTP API on an http.ServeMux: one "METHOD /path"
// pattern per route, so paths match exactly and HEAD is served wherever
// GET is. Each path also has a pattern without a method, which answers
// the methods it does not take with a JSON 405 whose Allow header lists
// those it does; "/" answers every other path with a JSON 404 (the mux's
// own 404 and 405 are plain text).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.serveRoute(rt.path, rt.h))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
		if rt.method == http.MethodGet {
			allowed[rt.path] = append(allowed[rt.path], http.MethodHead)
		}
	}
	for path, methods := range allowed {
		slices.Sort(methods)
		mux.Handle(path, s.methodNotAllowed(path, strings.Join(methods, ", ")))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.instrument(routeUnmatched, methodOther, w, func(w http.ResponseWriter) {
			writeError(w, fmt.Errorf("%w: %s", errNoRoute, r.URL.Path))
		})
	})
	return mux
}

// serveRoute answers a route's requests with its handler, counted under
// the route's path and the request's method (one the path takes).
func (s *Service) serveRoute(path string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.instrument(path, r.Method, w, func(w http.ResponseWriter) {
			if err := h(w, r); err != nil {
				writeError(w, err)
			}
		})
	})
}

// methodNotAllowed answers a known path's other methods: a 405 that
// lists those it takes, counted under methodOther.
func (s *Service) methodNotAllowed(path, allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.instrument(path, methodOther, w, func(w http.ResponseWriter) {
			w.Header().Set("Allow", allow)
			writeError(w, fmt.Errorf("%w: %s %s (allowed: %s)", errMethod, r.Method, path, allow))
		})
	})
}

// writeJSON answers v. A failed write means the client is gone; there is
// no one left to tell.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return nil
}

// writeOK is the answer of every successful write.
func writeOK(w http.ResponseWriter, status int) error {
	return writeJSON(w, status, map[string]string{"status": "ok"})
}

// writeError answers {"error": ..., "code": ...} with the error's status.
func writeError(w http.ResponseWriter, err error) {
	code := codeOf(err)
	writeJSON(w, code.Status(), map[string]string{"error": err.Error(), "code": string(code)})
}

// readRequest reads a body of at most api.MaxBodyBytes and decodes it
// (decodeRequest).
func readRequest(w http.ResponseWriter, r *http.Request, v request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("%w: limit is %d bytes", errTooLarge, api.MaxBodyBytes)
		}
		return &FieldError{Problem: "reading body: " + err.Error()}
	}
	return decodeRequest(body, v)
}

// filters reads the optional model_name and tenant_id query parameters;
// any other parameter is refused, so a misspelt filter never silently
// lists everything.
func filters(r *http.Request) (model, tenant string, err error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", "", invalid("query", "%v", err)
	}
	for name, vals := range q {
		switch {
		case name != "model_name" && name != "tenant_id":
			return "", "", invalid(name, "unknown query parameter (want model_name or tenant_id)")
		case len(vals) > 1:
			return "", "", invalid(name, "given %d times", len(vals))
		}
	}
	return q.Get("model_name"), q.Get("tenant_id"), nil
}

func (s *Service) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var req registerRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	err := s.Register(Worker{
		WorkerID: *req.WorkerID, ModelName: *req.ModelName, TenantID: req.TenantID,
		BlockSize: *req.BlockSize, DPStart: *req.DPStart, DPSize: *req.DPSize,
	})
	if err != nil {
		return err
	}
	return writeOK(w, http.StatusCreated)
}

func (s *Service) handleUnregister(w http.ResponseWriter, r *http.Request) error {
	var req unregisterRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	if err := s.Unregister(keyOf(req.ModelName, req.TenantID), *req.WorkerID); err != nil {
		return err
	}
	return writeOK(w, http.StatusOK)
}

func (s *Service) handleWorkers(w http.ResponseWriter, r *http.Request) error {
	model, tenant, err := filters(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.Workers(model, tenant))
}

func (s *Service) handleAdd(w http.ResponseWriter, r *http.Request) error {
	var req addRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	err := s.Add(keyOf(req.ModelName, req.TenantID), *req.RequestID, *req.WorkerID, *req.DPRank, req.SequenceHashes, req.NewISLTokens)
	if err != nil {
		return err
	}
	return writeOK(w, http.StatusCreated)
}

func (s *Service) handlePrefillComplete(w http.ResponseWriter, r *http.Request) error {
	var req lifecycleRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	if err := s.PrefillComplete(keyOf(req.ModelName, req.TenantID), *req.RequestID); err != nil {
		return err
	}
	return writeOK(w, http.StatusOK)
}

func (s *Service) handleFree(w http.ResponseWriter, r *http.Request) error {
	var req lifecycleRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	if err := s.Free(keyOf(req.ModelName, req.TenantID), *req.RequestID); err != nil {
		return err
	}
	return writeOK(w, http.StatusOK)
}

func (s *Service) handleLoads(w http.ResponseWriter, r *http.Request) error {
	model, tenant, err := filters(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.Loads(model, tenant))
}

func (s *Service) handlePotentialLoads(w http.ResponseWriter, r *http.Request) error {
	var req potentialLoadsRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	loads, err := s.PotentialLoads(keyOf(req.ModelName, req.TenantID), req.SequenceHashes, req.NewISLTokens)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, loads)
}

// handleHealth is liveness only: 200 with an empty body as soon as the
// listener is up.
func (s *Service) handleHealth(w http.ResponseWriter, _ *http.Request) error {
	w.WriteHeader(http.StatusOK)
	return nil
}
