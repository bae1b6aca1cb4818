package http

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/promx"
	"github.com/kvselect/kvselect/scheduler"
)

// Config wires the service to the node's parts, each through the narrow
// interface its handlers need (interfaces.go).
type Config struct {
	Catalog   CatalogReader
	Writer    CatalogWriter
	Leader    Leadership
	Cluster   ClusterAdmin
	Leases    LeaseKeeper
	Selector  Selector
	Loads     LoadReader
	Index     IndexReader
	Listeners ListenerReader // may be nil
	// Recovery says whether the index is still being recovered from a
	// peer (/ready's recovering; /dump refuses meanwhile); nil: never.
	Recovery RecoveryReader
	// CatchUp latches the node's first catch-up with a leader
	// (/readyz?for=selection); nil: judged from the status of the moment.
	CatchUp CatchUpReader
	// ReplicaSync is nil when the node runs without replica sync: its
	// routes then answer 409. Service.SetReplicaSync sets it later.
	ReplicaSync ReplicaSync
	// Gatherer serves /metrics; Registerer takes the HTTP metrics.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Auth holds the admin token (--auth-token-file): with one, routes
	// need a bearer token as their access class and Scope say
	// (access.go). It is read on every request, so a rotation applies to
	// the next one. nil or empty: every route is open.
	Auth *authtoken.Holder
	// Selection holds the selection token (--selection-token-file),
	// accepted besides the admin token on the routes of classes selection
	// and worker; nil: none.
	Selection *authtoken.Holder
	// Scope is what the admin token protects; "" means ScopeAll.
	Scope Scope
	// PeerScheme is how this node calls the others (forwarding, and the
	// Location of a redirect): "http" (the default) or "https" when the
	// cluster serves TLS. PeerTLS configures those calls' TLS (the CA
	// that signs the peers' certificates); nil: the system's roots.
	PeerScheme string
	PeerTLS    *tls.Config
	// CatalogWait bounds waiting for a catalog index: min_catalog_index
	// and X-Kvselect-Index on reads, and a forwarded write's local apply
	// (SPEC: 2 s).
	CatalogWait time.Duration
	// ForwardTimeout bounds one request forwarded to the leader.
	ForwardTimeout time.Duration
	// NodePolicy is the node's own default policy (--policy), which GET
	// /policies shows besides the catalog's; empty: the shipped default.
	NodePolicy scheduler.PolicySpec
	Logger     *slog.Logger
}

// Service is kvselect's HTTP API.
type Service struct {
	cfg     Config
	log     *slog.Logger
	router  *mux.Router
	allow   []pathMethods // the methods of each path, for 405's Allow
	metrics *httpMetrics
	client  *http.Client // forwards to the leader
	// sync is the replica sync the routes use: Config.ReplicaSync, then
	// SetReplicaSync's (replicasync.go).
	sync atomic.Pointer[replicaSyncBox]
	// failures keeps repeated request failures at DEBUG (faillog.go).
	failures failureLog
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
	if cfg.PeerScheme == "" {
		cfg.PeerScheme = "http"
	}
	s := &Service{cfg: cfg, log: cfg.Logger.With("component", "http"), metrics: newHTTPMetrics(cfg.Registerer),
		client: newForwardClient(cfg.PeerTLS)}
	s.router, s.allow = s.buildRouter()
	s.SetReplicaSync(cfg.ReplicaSync)
	return s
}

// ServeHTTP implements http.Handler. Paths with dot or empty segments are
// refused before routing: a cleaned path would name another resource
// (DELETE /workers/9/../2 is not DELETE /workers/2), and the API never
// redirects to one.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkPath(r.URL.Path); err != nil {
		s.fail(w, err)
		return
	}
	s.router.ServeHTTP(w, r)
}

// wrap adds authentication, metrics and error rendering to a handler.
func (s *Service) wrap(route, access string, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		err := s.authorize(sw, r, access)
		if err == nil {
			err = h(sw, r)
		}
		if err != nil {
			s.fail(sw, err)
		}
		s.metrics.Observe(route, r.Method, sw.status, time.Since(start))
		switch {
		// A 5xx is worth a warning when it is a failure. not_ready is the
		// node answering as it should while it cannot serve yet (the
		// caller asks another node or waits), like /ready's 503, which
		// is no error at all: both are requests like any other.
		// unknown_partition is the caller's mistake, told to the caller.
		case sw.status >= 500 && err != nil && codeOf(err) != api.CodeNotReady && codeOf(err) != api.CodeUnknownPartition:
			s.logFailure(r, sw.status, err)
		default:
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"duration", time.Since(start))
		}
	})
}

// fail renders err as {"error", "code"} with the code's status (the
// load-shedding 503 as api.Busy).
func (s *Service) fail(w http.ResponseWriter, err error) {
	code := codeOf(err)
	// unknown_partition is a 503 for Dynamo's clients, but nothing a
	// retry mends: no Retry-After invites one.
	if st := code.Status(); (st == http.StatusServiceUnavailable || st == http.StatusTooManyRequests) && code != api.CodeUnknownPartition {
		w.Header().Set("Retry-After", "1")
	}
	if code == api.CodeOverloaded {
		// Load shedding answers in Dynamo's shape (seed 001), which its
		// clients already handle.
		_ = writeJSON(w, code.Status(), api.Busy{Message: api.BusyMessage, Type: api.BusyType, Code: code.Status()})
		return
	}
	_ = writeJSON(w, code.Status(), api.Error{Message: err.Error(), Code: code})
}

// writeJSON writes v as the answer. HTML escaping is off: error messages
// quote user input and ranges ("must be >= 0"), which must read as sent.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// setIndex sets the catalog index header of an answer.
func setIndex(w http.ResponseWriter, idx uint64) {
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(idx, 10))
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// httpMetrics are the request metrics every kvselect HTTP server shares
// (promx) and the node's forwarding.
type httpMetrics struct {
	*promx.Requests
	forwards *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		Requests: promx.NewRequests(),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_http_forwards_total",
			Help: "Requests forwarded to the leader: relayed, retry (nothing reached a leader), unknown (outcome lost), unapplied (relayed before this node applied the write).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(append(m.Collectors(), m.forwards)...)
	return m
}

func (s *Service) health(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, api.Health{Status: api.StatusOK})
}

func (s *Service) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

func (s *Service) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(api.OpenAPI())
	return err
}

// waitCatalog gives read-your-writes across nodes: it waits up to
// CatalogWait for this node to apply the catalog index a request carries
// (the body's min_catalog_index, or the X-Kvselect-Index header; the
// larger wins).
func (s *Service) waitCatalog(r *http.Request, fromBody uint64) error {
	idx, err := requestedIndex(r, fromBody)
	if err != nil || idx == 0 {
		return err
	}
	return s.waitIndex(r.Context(), idx, s.cfg.CatalogWait)
}

// waitSelectionCatalog is waitCatalog for the routes that select or book
// (SPEC §3.1). Selection never needs a quorum: a node that has not reached
// the requested index in time answers from the catalog it has, and says
// so in HeaderCatalogBehind (its applied index), unless the prompt sets
// require_catalog, which keeps the 503 catalog_behind. Clients send the
// highest index they have seen with every selection, so without this a
// client that read through a healthy node and then failed over to one cut
// off from the leader would be refused every selection. A node that knows
// no leader does not wait at all (no entry can arrive), so a cut-off node
// answers at once rather than after CatalogWait per selection.
func (s *Service) waitSelectionCatalog(w http.ResponseWriter, r *http.Request, in *api.Prompt) error {
	idx, err := requestedIndex(r, in.MinCatalogIndex)
	if err != nil || idx == 0 {
		return err
	}
	wait := s.cfg.CatalogWait
	if !in.RequireCatalog && !s.cfg.Leader.HasLeader() {
		wait = 0
	}
	err = s.waitIndex(r.Context(), idx, wait)
	if err == nil || in.RequireCatalog || !errors.Is(err, cluster.ErrCatalogBehind) {
		return err
	}
	w.Header().Set(api.HeaderCatalogBehind, strconv.FormatUint(s.cfg.Catalog.Catalog().Index(), 10))
	return nil
}

// requestedIndex is the catalog index a request asks for: the body's
// min_catalog_index or the X-Kvselect-Index header, the larger; 0 for none.
func requestedIndex(r *http.Request, fromBody uint64) (uint64, error) {
	idx := fromBody
	if h := r.Header.Get(api.HeaderIndex); h != "" {
		v, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			return 0, badRequest(api.HeaderIndex, "must be a non-negative integer, got %q", h)
		}
		idx = max(idx, v)
	}
	return idx, nil
}

// waitIndex waits up to wait for this node to apply idx (a zero wait
// only checks).
func (s *Service) waitIndex(ctx context.Context, idx uint64, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return s.cfg.Catalog.WaitApplied(ctx, idx)
}
