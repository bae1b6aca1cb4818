package nodeflags

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/cluster"
	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/envflag"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/zmqsync"
)

// ErrVersion is what Parse returns for --version.
var ErrVersion = errors.New("version asked")

// Env is where flags are read from the environment: KVSELECT_<FLAG>,
// then Dynamo's names for the scheduling settings.
var Env = envflag.Env{Prefix: "KVSELECT", Fallbacks: map[string][]string{
	"overlap-score-weight":         {"DYN_KV_OVERLAP_SCORE_WEIGHT", "DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT"},
	"overlap-score-credit":         {"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT"},
	"prefill-load-scale":           {"DYN_ROUTER_PREFILL_LOAD_SCALE"},
	"decode-active-request-weight": {"DYN_ROUTER_DECODE_ACTIVE_REQUEST_WEIGHT"},
	"assume-kv-reuse":              {"DYN_ROUTER_ASSUME_KV_REUSE"},
	"router-temperature":           {"DYN_ROUTER_TEMPERATURE"},
	"host-cache-hit-weight":        {"DYN_ROUTER_HOST_CACHE_HIT_WEIGHT"},
	"disk-cache-hit-weight":        {"DYN_ROUTER_DISK_CACHE_HIT_WEIGHT"},
	"track-prefill-tokens":         {"DYN_ROUTER_TRACK_PREFILL_TOKENS"},
	"active-request-expiry-secs":   {"DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS"},
}}

// Parse turns the command line and environment into a node Config. It
// returns flag.ErrHelp after printing the help (-h, --help, --help-all),
// ErrVersion for --version, and a *UsageError for a wrong command line.
func Parse(args []string) (server.Config, error) {
	return parse(args, true)
}

// Check parses a node's command line as kvselect would, the environment
// left out: a harness that builds one learns of a flag that does not
// exist, a value that does not parse or a combination kvselect refuses
// at once, in kvselect's own words, rather than from a process that
// exits. Token files named must exist, as they must for the node.
func Check(args []string) error {
	_, err := Config(args)
	return err
}

// Config is the node Config a command line alone makes, the environment
// left out: what a harness started a node with, read back from its
// arguments rather than from a copy of a value.
func Config(args []string) (server.Config, error) {
	return parse(args, false)
}

// parse is Parse; useEnv false leaves the environment out.
func parse(args []string, useEnv bool) (server.Config, error) {
	hostname, _ := os.Hostname()
	if hostname == "" {
		hostname = "kvselect"
	}
	fs := flag.NewFlagSet("kvselect", flag.ContinueOnError)
	// The flags' defaults are the packages' (DefaultConfig), but for
	// --threads: 4, the flag's default since it came, where a Config
	// built in code gets GOMAXPROCS.
	ingestDefaults := ingest.DefaultConfig()
	var (
		port          = fs.Int("port", 8092, "HTTP port")
		bind          = fs.String("bind", "0.0.0.0", "address the HTTP API binds")
		nodeID        = fs.String("node-id", hostname, "stable Raft node id")
		dataDir       = fs.String("data-dir", "./kvselect-data", "directory for Raft log, stable store and snapshots")
		raftAddr      = fs.String("raft-addr", "127.0.0.1:7092", "address the Raft transport binds")
		raftAdvertise = fs.String("raft-advertise", "", "Raft address other nodes dial (default: --raft-addr; never 0.0.0.0)")
		httpAdvertise = fs.String("http-advertise", "", "HTTP address other nodes and redirects use (default: bind:port, loopback for 0.0.0.0)")
		authTokenFile = fs.String("auth-token-file", "", "file holding the admin bearer token: one line, or two during a rotation (the first is sent and signs replica-sync messages, both are accepted); SIGHUP reads it again")
		authScope     = fs.String("auth-scope", "all", "what the admin token protects: all (every route but /health, /ready, /readyz and /openapi.json) or admin (a trusted network: only catalog, threshold, cluster and replica-sync writes, /dump and keepalives)")
		selTokenFile  = fs.String("selection-token-file", "", "file holding a second token, for Ray callers: accepted on selection, bookings, loads, keepalives and catalog reads, 403 elsewhere; one or two lines; needs --auth-token-file; SIGHUP reads it again")
		tlsCertFile   = fs.String("tls-cert-file", "", "PEM certificate (with its chain) to serve HTTPS with; the node then calls the others over https too; SIGHUP reads it again")
		tlsKeyFile    = fs.String("tls-key-file", "", "PEM private key of --tls-cert-file")
		tlsCAFile     = fs.String("tls-ca-file", "", "PEM CA certificates the node trusts when it calls other nodes over https (default: the system's roots)")
		logLevel      = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat     = fs.String("log-format", "text", "text or json")
		threads       = fs.Int("threads", 4, "KV event decode/apply workers (listeners beyond this wait their turn)")
		kvBackoffMax  = fs.Duration("kv-reconnect-max", ingestDefaults.BackoffMax, "longest delay between reconnects to a worker's KV event endpoint")
		kvReplayWait  = fs.Duration("kv-replay-timeout", ingestDefaults.ReplayTimeout, "how long one replay request to a worker may take")
		staleAfter    = fs.Duration("stale-listener-after", ingestDefaults.StaleAfter, "a rank whose KV event listener stays down this long is shown stale and not selected by this node (the catalog keeps it)")
		kvQueueBytes  = fs.Int64("kv-queue-bytes", ingestDefaults.QueueBytes, "live KV event bytes one listener buffers while it applies or replays; past it messages are dropped, then replayed or counted lost")
		initial       = fs.String("initial-cluster", "", "members of a new cluster, id=raft-host:port,... (the same on every node; ignored once the data dir holds Raft state)")
		join          = fs.String("join", "", "HTTP URLs of existing members, comma separated: ask them to add this node as a voter (never bootstraps)")
		joinTimeout   = fs.Duration("join-timeout", cluster.DefaultConfig().JoinTimeout, "how long --join keeps trying before start-up fails")
		peerDial      = fs.String("peer-dial", "", "fault-injection: id=raft/http/replica-sync addresses to dial for a peer instead of the advertised ones")
		kvDial        = fs.String("kv-dial", "", "fault-injection: host:port=host:port,... addresses to dial instead of those in workers' KV event and replay endpoints")
		indexerPeers  = fs.String("indexer-peers", "", "HTTP URLs, comma separated, asked in order for a /dump to recover the KV index from at start (default: the other cluster members)")
		syncOn        = fs.Bool("replica-sync", true, "share active load with the other members by replica sync (ZMQ), on whenever the Raft configuration has more than one member; false turns it off")
		syncPort      = fs.Int("replica-sync-port", 0, "port of the replica-sync ZMQ PUB (binds tcp://<bind>:<port>); 0: one the OS chooses, published in the catalog; a port named here also turns replica sync on for a node alone in its cluster")
		syncAdvertise = fs.String("replica-sync-advertise", "", "replica-sync endpoint other nodes dial (default: tcp://<host of --http-advertise>:<port>); needs --replica-sync-port")
		syncPeers     = fs.String("replica-sync-peers", "", "replica-sync endpoints to follow besides the cluster members, comma separated (tcp://host:port); turns replica sync on for a node alone in its cluster too")

		heartbeat     = fs.Duration("raft-heartbeat-timeout", cluster.DefaultConfig().HeartbeatTimeout, "Raft heartbeat timeout")
		election      = fs.Duration("raft-election-timeout", cluster.DefaultConfig().ElectionTimeout, "Raft election timeout")
		lease         = fs.Duration("raft-leader-lease-timeout", cluster.DefaultConfig().LeaderLeaseTimeout, "Raft leader lease timeout")
		commit        = fs.Duration("raft-commit-timeout", cluster.DefaultConfig().CommitTimeout, "Raft commit timeout")
		leaderWait    = fs.Duration("leader-wait", cluster.DefaultConfig().LeaderWait, "how long a write waits for an election before failing with no_leader")
		applyTimeout  = fs.Duration("apply-timeout", cluster.DefaultConfig().ApplyTimeout, "how long a catalog write may wait to enter the Raft log")
		forwardWait   = fs.Duration("forward-timeout", cluster.DefaultConfig().ForwardTimeout, "how long a request forwarded to the leader may take")
		snapshotAt    = fs.Uint64("raft-snapshot-threshold", cluster.DefaultConfig().SnapshotThreshold, "log entries between Raft snapshots")
		snapshotEvery = fs.Duration("raft-snapshot-interval", cluster.DefaultConfig().SnapshotInterval, "how often Raft checks whether to snapshot (it waits a random time between this and twice it)")
		trailingLogs  = fs.Uint64("raft-trailing-logs", cluster.DefaultConfig().TrailingLogs, "log entries Raft keeps after a snapshot, so a follower slightly behind needs no snapshot")
		defaults      = scheduler.DefaultConfig()
		policy        = fs.String("policy", defaults.Policy.Name, "the node's default selection policy, and the cluster default the catalog starts with at bootstrap: "+strings.Join(scheduler.PolicyNames(), ", "))
		tokensPerSec  = fs.Float64("predicted-ttft-default-tokens-per-s", defaults.DefaultTokensPerSecond, "prefill throughput a rank is assumed to have until it has learned its own from booking-to-prefill_complete timings (5 samples)")
		assumeReuse   = fs.Bool("assume-kv-reuse", defaults.AssumeKVReuse, "false: sequence hashes derived from token_ids are replaced by random values per block, so in-flight requests never share active blocks")
		hostWeight    = fs.Float64("host-cache-hit-weight", defaults.HostCacheHitWeight, "credit of a host-tier block relative to a device block")
		diskWeight    = fs.Float64("disk-cache-hit-weight", defaults.DiskCacheHitWeight, "credit of a disk-tier block relative to a device block")
		trackPrefill  = fs.Bool("track-prefill-tokens", defaults.TrackPrefillTokens, "book effective prefill tokens as load and cost")
		expirySecs    = fs.Float64("active-request-expiry-secs", defaults.ActiveRequestExpiry.Seconds(), "free reservations this long after admission")
		maxRes        = fs.Int64("max-reservations", defaults.MaxReservations, "bookings this node holds at most, its own and mirrored from peers (mirrors use at most half); past it a booking gets 429 capacity")
		maxBlocks     = fs.Int64("max-reserved-blocks", defaults.MaxReservedBlocks, "booked blocks (sequence hashes) this node holds at most, its own and mirrored (mirrors use at most half); about 116 bytes of memory each")
		thresholds    server.InitialThresholds
	)
	fs.Func("active-decode-blocks-threshold", "initial busy threshold of every model: a fraction 0-1 of a rank's total_kv_blocks (later set through /busy_threshold; default: none)",
		func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("must be a fraction from 0 to 1, got %q", v)
			}
			thresholds.ActiveDecodeBlocks = &f
			return nil
		})
	fs.Func("active-prefill-tokens-threshold", "initial busy threshold of every model: active prefill tokens of a rank (later set through /busy_threshold; default: none)",
		func(v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("must be a token count >= 0, got %q", v)
			}
			thresholds.ActivePrefillTokens = &n
			return nil
		})
	// The cost parameters of --policy: set only when given, so a policy
	// that does not take one is not handed its default.
	policyParams := map[string]float64{}
	for _, p := range []struct{ flag, param, usage string }{
		{"overlap-score-credit", "overlap_score_credit", "credit per cached device block in the cost (policy parameter; default 1)"},
		{"prefill-load-scale", "prefill_load_scale", "scale of the cost's prefill term after credit (policy parameter; default 1)"},
		{"decode-active-request-weight", "decode_active_request_weight", "cost per active request (policy parameter; default 0)"},
		{"overlap-score-weight", "overlap_score_weight", "deprecated (Dynamo's older name): sets prefill-load-scale; 0 also sets overlap-score-credit to 0"},
		{"router-temperature", "router_temperature", "0 picks the cheapest worker; > 0 samples a softmax over costs (policy parameter; default 0)"},
	} {
		fs.Func(p.flag, p.usage, func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("must be a number, got %q", v)
			}
			policyParams[p.param] = f
			return nil
		})
	}
	Env.Annotate(fs)
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	if err := NodeCommand.Parse(fs, args); err != nil {
		return server.Config{}, err
	}
	if *showVersion {
		return server.Config{}, ErrVersion
	}
	if useEnv {
		if err := Env.Apply(fs); err != nil {
			return server.Config{}, err
		}
	}

	logger, err := NewLogger(*logLevel, *logFormat)
	if err != nil {
		return server.Config{}, err
	}
	cl := cluster.DefaultConfig()
	cl.NodeID, cl.DataDir = *nodeID, *dataDir
	cl.RaftBind, cl.RaftAdvertise, cl.HTTPAdvertise = *raftAddr, *raftAdvertise, *httpAdvertise
	cl.HeartbeatTimeout, cl.ElectionTimeout, cl.LeaderLeaseTimeout = *heartbeat, *election, *lease
	cl.CommitTimeout, cl.LeaderWait, cl.ApplyTimeout, cl.ForwardTimeout = *commit, *leaderWait, *applyTimeout, *forwardWait
	cl.SnapshotThreshold, cl.SnapshotInterval, cl.TrailingLogs = *snapshotAt, *snapshotEvery, *trailingLogs
	cl.JoinTimeout = *joinTimeout
	if cl.RaftAdvertise == "" {
		cl.RaftAdvertise = *raftAddr
	}
	if cl.InitialCluster, err = cluster.ParsePeers(*initial); err != nil {
		return server.Config{}, fmt.Errorf("--initial-cluster: %w", err)
	}
	if cl.PeerDial, err = cluster.ParsePeerDial(*peerDial); err != nil {
		return server.Config{}, fmt.Errorf("--peer-dial: %w", err)
	}
	kvDialMap, err := ingest.ParseDial(*kvDial)
	if err != nil {
		return server.Config{}, fmt.Errorf("--kv-dial: %w", err)
	}
	cl.Join = splitList(*join)
	scheme := "http"
	if *tlsCertFile != "" || *tlsKeyFile != "" {
		scheme = "https"
	}
	recoveryPeers, err := server.ParsePeerURLs(*indexerPeers, scheme)
	if err != nil {
		return server.Config{}, fmt.Errorf("--indexer-peers (env %s): %w", envflag.Name(Env.Prefix, "indexer-peers"), err)
	}

	sc := scheduler.DefaultConfig()
	sc.Policy = scheduler.PolicySpec{Name: *policy}
	if len(policyParams) > 0 {
		sc.Policy.Params = policyParams
	}
	sc.AssumeKVReuse, sc.DefaultTokensPerSecond = *assumeReuse, *tokensPerSec
	sc.HostCacheHitWeight, sc.DiskCacheHitWeight = *hostWeight, *diskWeight
	sc.TrackPrefillTokens = *trackPrefill
	sc.ActiveRequestExpiry = time.Duration(*expirySecs * float64(time.Second))
	sc.MaxReservations, sc.MaxReservedBlocks = *maxRes, *maxBlocks

	cfg := server.Config{
		HTTPAddr: net.JoinHostPort(*bind, strconv.Itoa(*port)), Cluster: cl, Scheduler: sc, Logger: logger,
		Ingest: ingest.Config{Threads: *threads, BackoffMax: *kvBackoffMax, ReplayTimeout: *kvReplayWait, QueueBytes: *kvQueueBytes, Dial: kvDialMap,
			StaleAfter: *staleAfter},
		Recovery: server.RecoveryConfig{Peers: recoveryPeers}, InitialThresholds: thresholds,
	}
	if *port < 0 || *port > 65535 { // before Validate, to name the environment variable too
		return cfg, fmt.Errorf("--port (env %s) must be from 0 to 65535, got %d", envflag.Name(Env.Prefix, "port"), *port)
	}
	if cfg.ReplicaSync, err = replicaSyncConfig(*syncOn, *bind, *syncPort, *syncAdvertise, *syncPeers); err != nil {
		return cfg, err
	}
	if err := authConfig(&cfg, *authTokenFile, *selTokenFile, *authScope); err != nil {
		return cfg, err
	}
	if err := tlsConfig(&cfg, *tlsCertFile, *tlsKeyFile, *tlsCAFile); err != nil {
		return cfg, err
	}
	// One place checks values: the same Validate server.Start runs, so
	// a bad flag fails here, before anything starts, with the message a
	// Config built in code would get.
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// replicaSyncConfig is replica sync as the flags say (SPEC §2): on, once
// the node has a second member, by default, on a port the OS chooses
// (--replica-sync-port 0); from the start on a named port or with
// --replica-sync-peers; nil with --replica-sync=false.
func replicaSyncConfig(on bool, bind string, port int, advertise, peers string) (*server.ReplicaSyncConfig, error) {
	if !on {
		if port != 0 || advertise != "" || peers != "" {
			return nil, fmt.Errorf("--replica-sync=false (env %s) turns replica sync off: drop --replica-sync-port, --replica-sync-advertise and --replica-sync-peers",
				envflag.Name(Env.Prefix, "replica-sync"))
		}
		return nil, nil
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("--replica-sync-port (env %s) must be from 0 (the OS chooses) to 65535, got %d", envflag.Name(Env.Prefix, "replica-sync-port"), port)
	}
	rc := &server.ReplicaSyncConfig{Listen: "tcp://" + net.JoinHostPort(bind, strconv.Itoa(port)), Advertise: advertise,
		Peers: splitList(peers)}
	rc.Auto = port == 0 && len(rc.Peers) == 0
	if port == 0 && advertise != "" {
		return nil, errors.New("--replica-sync-advertise needs --replica-sync-port: the endpoint it advertises names the port, which the OS would choose otherwise")
	}
	for _, ep := range append(rc.Peers, advertise) {
		if ep == "" {
			continue
		}
		if err := zmqsync.ValidateEndpoint(ep); err != nil {
			return nil, fmt.Errorf("--replica-sync-peers/--replica-sync-advertise: %w", err)
		}
	}
	return rc, nil
}

// authConfig reads the token files into cfg (SPEC §11).
func authConfig(cfg *server.Config, adminFile, selectionFile, scope string) error {
	var err error
	if cfg.AuthScope, err = httpd.ParseScope(scope); err != nil {
		return fmt.Errorf("--auth-scope (env %s): %w", envflag.Name(Env.Prefix, "auth-scope"), err)
	}
	if adminFile != "" {
		if cfg.AuthToken, cfg.AuthTokenAlso, err = authtoken.ReadFile(adminFile); err != nil {
			return fmt.Errorf("--auth-token-file (env %s): %w", envflag.Name(Env.Prefix, "auth-token-file"), err)
		}
		cfg.AuthTokenFile = adminFile // SIGHUP reads it again
	}
	if selectionFile != "" {
		if adminFile == "" {
			return errors.New("--selection-token-file needs --auth-token-file: without an admin token every route is open")
		}
		if cfg.SelectionToken, cfg.SelectionTokenAlso, err = authtoken.ReadFile(selectionFile); err != nil {
			return fmt.Errorf("--selection-token-file (env %s): %w", envflag.Name(Env.Prefix, "selection-token-file"), err)
		}
		cfg.SelectionTokenFile = selectionFile
	}
	return nil
}

// tlsConfig sets cfg's HTTPS from the --tls-* flags.
func tlsConfig(cfg *server.Config, certFile, keyFile, caFile string) error {
	switch {
	case certFile == "" && keyFile == "" && caFile == "":
		return nil
	case certFile == "" && keyFile == "":
		return errors.New("--tls-ca-file needs --tls-cert-file and --tls-key-file: a node calls the others over https when it serves https itself")
	case certFile == "" || keyFile == "":
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	cfg.TLS = &server.TLSConfig{CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
	return nil
}

// NewLogger is the logger --log-level and --log-format ask for, on
// stderr.
func NewLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
