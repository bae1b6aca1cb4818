package http

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/scheduler"
)

// Config wires the service to the node's parts.
type Config struct {
	Node      *cluster.Node
	Indexer   *indexer.Indexer
	Scheduler *scheduler.Scheduler
	// Listeners reports a worker's KV event listener per rank (nil when
	// it has none); it adds "listeners" to worker records on reads.
	Listeners func(worker uint64) map[string]ingest.RankStatus
	// Gatherer serves /metrics; Registerer takes the HTTP metrics.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// AuthToken, when set, is required as a bearer token on catalog and
	// cluster writes and /dump; with AuthAll on every route but /health.
	AuthToken string
	AuthAll   bool
	// CatalogWait bounds waiting for min_catalog_index (SPEC: 2 s).
	CatalogWait time.Duration
	// ForwardTimeout bounds one request forwarded to the leader.
	ForwardTimeout time.Duration
	Logger         *slog.Logger
}

// Service is kvselect's HTTP API.
type Service struct {
	cfg     Config
	log     *slog.Logger
	router  *mux.Router
	metrics *httpMetrics
	client  *http.Client // forwards to the leader
}

// New builds the service and its routes.
func New(cfg Config) *Service {
	if cfg.CatalogWait == 0 {
		cfg.CatalogWait = 2 * time.Second
	}
	if cfg.ForwardTimeout == 0 {
		cfg.ForwardTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	s := &Service{cfg: cfg, log: cfg.Logger.With("component", "http"), metrics: newHTTPMetrics(cfg.Registerer),
		client: newForwardClient()}
	s.router = s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// access levels of a route.
const (
	open      = iota // never needs a token
	selection        // needs a token only with AuthAll
	admin            // needs a token whenever one is configured
)

// routes is the whole API in one table.
func (s *Service) routes() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { s.fail(w, errNoRoute) })
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { s.fail(w, errMethod) })
	for _, rt := range []struct {
		method, path string
		access       int
		where        int
		h            func(http.ResponseWriter, *http.Request) error
	}{
		{"GET", "/health", open, anyNode, s.health},
		{"GET", "/ready", selection, anyNode, s.ready},
		{"GET", "/metrics", selection, anyNode, s.serveMetrics},

		{"GET", "/workers", selection, onLeaderIfLinz, s.listWorkers},
		{"POST", "/workers", admin, onLeader, s.upsertWorker},
		{"GET", "/workers/{id}", selection, onLeaderIfLinz, s.getWorker},
		{"PATCH", "/workers/{id}", admin, onLeader, s.patchWorker},
		{"DELETE", "/workers/{id}", admin, onLeader, s.deleteWorker},

		{"POST", "/select", selection, anyNode, s.selectWorker},
		{"POST", "/select_and_reserve", selection, anyNode, s.selectAndReserve},
		{"POST", "/reservations", selection, anyNode, s.createReservation},
		{"POST", "/reservations/{id}/prefill_complete", selection, anyNode, s.prefillComplete},
		{"POST", "/reservations/{id}/output_block", selection, anyNode, s.outputBlock},
		{"DELETE", "/reservations/{id}", selection, anyNode, s.deleteReservation},

		{"GET", "/loads", selection, anyNode, s.loads},
		{"POST", "/potential_loads", selection, anyNode, s.potentialLoads},
		{"POST", "/overlap_scores", selection, anyNode, s.overlapScores},
		{"GET", "/dump", admin, anyNode, s.dump},

		{"GET", "/cluster/status", selection, anyNode, s.clusterStatus},
		{"POST", "/cluster/join", admin, onLeader, s.clusterJoin},
		{"POST", "/cluster/remove", admin, onLeader, s.clusterRemove},
		{"POST", "/cluster/stepdown", admin, onLeader, s.clusterStepDown},
		{"POST", "/cluster/metadata", admin, onLeader, s.clusterMetadata},
	} {
		h := rt.h
		switch rt.where {
		case onLeader:
			h = s.leaderRoute(h)
		case onLeaderIfLinz:
			h = s.linearizableOnLeader(h)
		}
		r.Handle(rt.path, s.wrap(rt.path, rt.access, h)).Methods(rt.method)
	}
	return r
}

// wrap adds authentication, metrics and error rendering to a handler.
func (s *Service) wrap(route string, access int, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		var err error
		if s.needsToken(access) && !s.authorized(r) {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="kvselect"`)
			err = errUnauthorized
		} else {
			err = h(sw, r)
		}
		if err != nil {
			s.fail(sw, err)
		}
		s.metrics.observe(route, r.Method, sw.status, time.Since(start))
		if sw.status >= 500 {
			s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", sw.status, "err", err)
		} else {
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"duration", time.Since(start))
		}
	})
}

func (s *Service) needsToken(access int) bool {
	return s.cfg.AuthToken != "" && (access == admin || access == selection && s.cfg.AuthAll)
}

func (s *Service) authorized(r *http.Request) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(s.cfg.AuthToken)) == 1
}

// fail renders err as {"error", "code"} with the mapped status.
func (s *Service) fail(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: err.Error(), Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	forwards *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvselect_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2.5, 14),
		}, []string{"route"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_http_forwards_total",
			Help: "Requests forwarded to the leader: relayed, retry (nothing reached a leader), unknown (outcome lost).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.requests, m.latency, m.forwards)
	return m
}

func (m *httpMetrics) observe(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

func (s *Service) health(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Service) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

// waitCatalog honours min_catalog_index (body field or X-Kvselect-Index
// header): it waits up to CatalogWait for this node to apply that index.
func (s *Service) waitCatalog(r *http.Request, fromBody *uint64) error {
	var idx uint64
	if fromBody != nil {
		idx = *fromBody
	}
	if h := r.Header.Get(headerIndex); h != "" {
		v, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			return badRequest(headerIndex, "must be a non-negative integer")
		}
		idx = max(idx, v)
	}
	if idx == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CatalogWait)
	defer cancel()
	return s.cfg.Node.WaitApplied(ctx, idx)
}

const headerIndex = "X-Kvselect-Index"
