package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/promx"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/zmqsync"
)

// Server is a running node.
type Server struct {
	cfg       Config
	log       *slog.Logger
	Node      *cluster.Node
	Indexer   *indexer.Indexer
	Scheduler *scheduler.Scheduler
	Ingest    *ingest.Manager
	Registry  *prometheus.Registry

	// sync is the replica-sync transport (Sync); nil while replica sync
	// is off. It is set once, at start or by runReplicaSyncSwitch.
	sync atomic.Pointer[zmqsync.Syncer]
	// syncMu orders handing catalogs to replica sync: applyCatalogChange
	// and useReplicaSync, which hands it delivered, the catalog the
	// parts saw last. syncKick wakes runReplicaSyncSwitch.
	syncMu    sync.Mutex
	delivered *fsm.Catalog
	syncKick  chan struct{}
	api       *httpd.Service

	ln   net.Listener
	http *http.Server
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	// recovering is true from Start until the KV index recovery is over
	// (recovery.go).
	recovering atomic.Bool
	// caughtUp latches the node's first catch-up with a leader, judged
	// against leaderCommit, the highest commit index the leader reported
	// for itself (readiness.go). statusOf and askLeaderCommit stand in
	// for the Raft node in tests (nil: s.Node's).
	caughtUp        atomic.Bool
	leaderCommit    atomic.Uint64
	statusOf        func() api.ClusterStatus
	askLeaderCommit func(context.Context) (uint64, error)
	// thresholdsKick wakes runInitialThresholds (thresholds.go).
	thresholdsKick chan struct{}
	// auth is the admin token every part reads when it checks or sends
	// it, selection the selection token the HTTP check reads (auth.go).
	auth, selection *authtoken.Holder
	// cert is the certificate the API serves; nil without TLS (tls.go).
	cert *servingCert
	// scheme is "https" with TLS, else "http"; peerTLS configures the
	// node's https calls to other nodes (nil: the system's roots).
	scheme  string
	peerTLS *tls.Config
}

// Start builds and starts a node: it listens on HTTPAddr, opens (or
// bootstraps) the Raft node and serves the API until Close.
func Start(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		if cfg.Cluster.RaftListener != nil {
			cfg.Cluster.RaftListener.Close() // as cluster.Open would have
		}
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, Registry: prometheus.NewRegistry(), stop: make(chan struct{}),
		thresholdsKick: make(chan struct{}, 1), syncKick: make(chan struct{}, 1), auth: authtoken.NewHolder(cfg.AuthToken),
		selection: authtoken.NewHolder(cfg.SelectionToken)}
	s.auth.SetTokens(cfg.AuthToken, cfg.AuthTokenAlso)
	s.selection.SetTokens(cfg.SelectionToken, cfg.SelectionTokenAlso)
	scheme, peerTLSConfig, err := peerTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	s.scheme, s.peerTLS = scheme, peerTLSConfig
	if cfg.TLS != nil {
		if s.cert, err = loadServingCert(cfg.TLS.CertFile, cfg.TLS.KeyFile); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	s.ln = ln
	if cfg.Cluster.HTTPAdvertise == "" {
		cfg.Cluster.HTTPAdvertise = httpAdvertise(ln.Addr().String(), cfg.Cluster.RaftAdvertise)
	}
	cfg.Cluster.Logger = cfg.Logger
	cfg.Cluster.Auth = s.auth // inter-node calls carry the token
	cfg.Cluster.PeerScheme, cfg.Cluster.PeerTLS = scheme, peerTLSConfig
	// Drawn here, not in Open: the catalog observer needs it from the
	// first change it sees (replica sync's epoch).
	cfg.Cluster.Incarnation = cmp.Or(cfg.Cluster.Incarnation, cluster.NewIncarnation())
	s.cfg.Cluster.Incarnation = cfg.Cluster.Incarnation
	s.cfg.Cluster.HTTPAdvertise = cfg.Cluster.HTTPAdvertise // replica sync advertises its host

	s.Indexer = indexer.New(cfg.Logger)
	if s.Scheduler, err = scheduler.New(cfg.Scheduler, s.Indexer, cfg.Logger); err != nil {
		ln.Close()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if cfg.Ingest.Logger == nil {
		cfg.Ingest.Logger = cfg.Logger
	}
	// Listeners wait for the index recovery, which releases them once the
	// watermarks they replay from are set (recovery.go).
	cfg.Ingest.Hold = true
	s.recovering.Store(true)
	s.Ingest = ingest.New(s.Indexer, cfg.Ingest)
	syncOn, syncWhy := decideReplicaSync(cfg.ReplicaSync, cfg.Cluster, 0)
	if cfg.ReplicaSync != nil {
		s.Scheduler.SetPublisher(syncPublisher{s}, cfg.Cluster.NodeID)
	}
	if syncOn {
		sy, err := startReplicaSync(cfg, s.Scheduler, s.auth, s.log)
		if err != nil {
			s.Ingest.Close()
			ln.Close()
			return nil, err
		}
		s.sync.Store(sy)
		cfg.Cluster.ReplicaSyncAdvertise = sy.Advertised()
	}
	if s.Node, err = cluster.Open(cfg.Cluster, s.applyCatalogChange); err != nil {
		if sy := s.Sync(); sy != nil {
			sy.Close()
		}
		s.Ingest.Close()
		ln.Close()
		return nil, err
	}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), promx.BuildInfo())
	for _, cs := range [][]prometheus.Collector{s.Node.Collectors(), s.Indexer.Collectors(), s.Scheduler.Collectors(), s.Ingest.Collectors()} {
		s.Registry.MustRegister(cs...)
	}
	var rs httpd.ReplicaSync
	if sy := s.Sync(); sy != nil {
		s.Registry.MustRegister(sy.Collectors()...)
		rs = sy
	}
	s.api = httpd.New(httpd.Config{
		Catalog: s.Node, Writer: s.Node, Leader: s.Node, Cluster: s.Node, Leases: s.Node,
		Selector: s.Scheduler, Loads: s.Scheduler, Index: s.Indexer, Listeners: s.Ingest.Status, ReplicaSync: rs, Recovery: s, CatchUp: s,
		Gatherer: s.Registry, Registerer: s.Registry,
		Auth: s.auth, Selection: s.selection, Scope: cfg.AuthScope, CatalogWait: cfg.CatalogWait,
		PeerScheme: scheme, PeerTLS: peerTLSConfig,
		ForwardTimeout: cfg.Cluster.ForwardTimeout, NodePolicy: cfg.Scheduler.Policy, Logger: cfg.Logger,
	})
	// Bounded everything (SPEC §11): a slow or stuck client cannot hold a
	// connection forever. Writes get more room for large /dump answers.
	s.http = &http.Server{Handler: s.api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute,
		// net/http's own complaints (a failed TLS handshake, say) go
		// through the node's logger, in its format.
		ErrorLog: slog.NewLogLogger(cfg.Logger.With("component", "http").Handler(), slog.LevelWarn)}
	if s.cert != nil {
		s.http.TLSConfig = s.cert.serverTLS()
	}
	s.wg.Add(4)
	go s.judgeStaleRanks()
	go s.watchCatchUp()
	go func() {
		defer s.wg.Done()
		serve := s.http.Serve
		if s.cert != nil {
			serve = func(ln net.Listener) error { return s.http.ServeTLS(ln, "", "") } // the certificate is GetCertificate's
		}
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.Scheduler.RunSweeper(s.stop)
	}()
	if cfg.InitialThresholds.set() {
		s.wg.Add(1)
		go s.runInitialThresholds()
	}
	if s.Node.Bootstrapped() {
		s.wg.Add(1)
		go s.runSeedPolicy()
	}
	// Alone as far as the flags tell, the Raft state of a restart may
	// have more to say: try the switch once now, and decide on its
	// outcome (switchReplicaSync logs the "on" line itself, so the
	// cases below must not log another).
	startedNow, syncErr := false, error(nil)
	if s.Sync() == nil && cfg.ReplicaSync != nil {
		startedNow, syncErr = s.switchReplicaSync()
	}
	switch sy := s.Sync(); {
	case startedNow:
	case sy != nil:
		s.logReplicaSync(sy, syncWhy)
	case cfg.ReplicaSync != nil:
		// Off until a node joins (or, after a failed start, until a
		// retry binds).
		s.logReplicaSync(nil, syncWhy)
		s.wg.Add(1)
		go s.runReplicaSyncSwitch(syncErr)
	default:
		s.logReplicaSync(nil, syncWhy)
	}
	s.startRecovery()
	s.log.Info("kvselect node started", "node_id", cfg.Cluster.NodeID, "http", ln.Addr().String(),
		"http_advertise", cfg.Cluster.HTTPAdvertise, "scheme", scheme, "raft", s.Node.RaftAddr(), "data_dir", cfg.Cluster.DataDir,
		"authenticated", cfg.AuthToken != "", "auth_scope", cmp.Or(cfg.AuthScope, httpd.ScopeAll),
		"selection_token", cfg.SelectionToken != "")
	if cfg.AuthToken == "" {
		s.log.Warn("running without authentication: every route, bookings and catalog writes included, is open to anyone who can reach the port, replica sync accepts any peer's messages, and the Raft port takes catalog writes from anyone who can reach it (set --auth-token-file)",
			"raft", s.Node.RaftAddr())
	}
	s.warnWeakTokens(&cfg)
	return s, nil
}

// applyCatalogChange is the one place catalog changes reach this node's
// parts, called by the cluster's watcher outside the FSM, in index order.
// The order matters:
//
//  1. the indexer creates and drops partitions and ranks, and forgets a
//     deleted worker's blocks;
//  2. the scheduler makes ranks candidates or drops them with their
//     reservations (its matches read the index of step 1), and takes the
//     catalog's selection policies whenever an entry changed (at start
//     and after a restore too: the first change is from an empty
//     catalog, a restore's from the catalog before it);
//  3. the listeners start last, so no KV event arrives for a rank the
//     index does not know yet, and stop for ranks already gone;
//  4. replica sync learns the cluster id and this node's epoch, and
//     follows the members the catalog names (their metadata and epochs),
//     after the scheduler knows the ranks their events name; a member that
//     restarted or left has its mirrored bookings dropped here.
func (s *Server) applyCatalogChange(ch *fsm.Change) {
	s.Indexer.ApplyCatalog(ch)
	s.Scheduler.ApplyCatalog(ch)
	if len(ch.Policies) > 0 {
		s.Scheduler.SetPolicies(catalogPolicies(ch.Cur))
	}
	s.Ingest.ApplyCatalog(ch)
	s.syncMu.Lock()
	s.delivered = ch.Cur
	if sy := s.Sync(); sy != nil {
		sy.SetIdentity(replicaIdentity(ch.Cur, s.cfg.Cluster))
		sy.SetMembers(replicaMembers(ch.Cur, s.cfg.Cluster.PeerDial))
	}
	s.syncMu.Unlock()
	select {
	case s.syncKick <- struct{}{}: // a join comes with a catalog change
	default:
	}
	if len(ch.Partitions) > 0 && s.cfg.InitialThresholds.set() {
		s.kickThresholds()
	}
}

// httpAdvertise is the default --http-advertise: the bound address, or for
// a wildcard bind the host other nodes already use for this node's Raft
// (--raft-advertise), so a multi-host cluster that sets only that flag
// does not publish a loopback HTTP address; loopback otherwise.
func httpAdvertise(bound, raftAdvertise string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return bound
	}
	if rh, _, err := net.SplitHostPort(raftAdvertise); err == nil && rh != "" {
		if ip := net.ParseIP(rh); ip == nil || !ip.IsUnspecified() {
			return net.JoinHostPort(rh, port)
		}
	}
	return advertisable(bound)
}

// advertisable replaces an unspecified host by loopback.
func advertisable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Removed is closed once this node has been removed from the cluster
// (cluster.Node.Removed): /ready answers 503 from then on, and the owner
// shuts the node down with Close, as kvselect's main does.
func (s *Server) Removed() <-chan struct{} { return s.Node.Removed() }

// Addr is the address the API listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the API's base URL (https with TLS).
func (s *Server) URL() string { return s.scheme + "://" + advertisable(s.Addr()) }

// Close stops the node: the HTTP server drains requests until ctx ends,
// then Raft hands over leadership (when there are other voters) and shuts
// down.
func (s *Server) Close(ctx context.Context) error { return s.shutdown(ctx, false) }

// Crash stops the node abruptly, as if the process were killed: open
// connections are cut and there is no leadership hand-over. For tests.
func (s *Server) Crash() error { return s.shutdown(context.Background(), true) }

func (s *Server) shutdown(ctx context.Context, crash bool) error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		if crash {
			s.http.Close()
			err = s.Node.Crash()
		} else {
			if herr := s.http.Shutdown(ctx); herr != nil {
				s.http.Close()
			}
			err = s.Node.Close()
		}
		s.Ingest.Close()
		s.api.Close() // the request failures' repeats no later failure reported
		s.wg.Wait()   // runReplicaSyncSwitch may start replica sync until it returns
		if sy := s.Sync(); sy != nil {
			sy.Close()
		}
		s.log.Info("kvselect node stopped", "node_id", s.cfg.Cluster.NodeID)
	})
	return err
}

// judgeStaleRanks hands the scheduler, every staleCheckEvery, the ranks
// whose KV event listener has been down longer than --stale-listener-after
// (SPEC §3.7): this node stops selecting them until their listener is
// back. Every round sets the whole set, so a rank created between rounds
// is judged at the next one.
func (s *Server) judgeStaleRanks() {
	defer s.wg.Done()
	tick := time.NewTicker(staleCheckEvery)
	defer tick.Stop()
	var was int
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		stale := s.Ingest.JudgeStale()
		s.Scheduler.SetStale(stale)
		if len(stale) != was {
			s.log.Info("ranks with a stale KV event listener changed; stale ranks are not selected by this node",
				"stale_ranks", len(stale), "was", was)
			was = len(stale)
		}
	}
}

// staleCheckEvery is how often listener staleness reaches the scheduler.
const staleCheckEvery = time.Second
