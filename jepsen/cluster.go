package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/faultproxy"
	"github.com/kvselect/kvselect/server/proccluster"
)

// Config describes the cluster StartCluster runs.
type Config struct {
	// Bin is the directory holding the kvselect and kvsim binaries.
	Bin string
	// Dir is the run directory: node data dirs (n1/, n2/, ...) and logs
	// (n1.log, ..., kvsim.log). It is created if missing and kept; data
	// dirs an earlier run left there are removed first.
	Dir string
	// Nodes is the number of kvselect nodes (default 3).
	Nodes int
	// ExtraArgs are appended to every node's command line; a flag given
	// here overrides the harness's choice (the last one wins).
	ExtraArgs []string
	// Workers is the number of kvsim workers to start and register
	// (model Model, ids 1..Workers); 0 starts no kvsim.
	Workers int
	// Model is the workers' model_name (default "jepsen").
	Model string
	// ElectionTimeout is every node's Raft heartbeat and election timeout
	// (default 1 s; the leader lease is half of it).
	ElectionTimeout time.Duration
	// SnapshotThreshold is --raft-snapshot-threshold (default 128), low
	// so that snapshots happen within seconds of writes.
	SnapshotThreshold uint64
	// TrailingLogs is --raft-trailing-logs (default DefaultTrailingLogs):
	// the entries a leader keeps after a snapshot. snapshot-catch-up reads
	// it from here, so the nemesis and the nodes agree.
	TrailingLogs uint64
	// ActiveRequestExpiry is --active-request-expiry-secs (default
	// LoadExpiry, far longer than any run): a booking nobody frees stays
	// as load, so the loads check sees it.
	ActiveRequestExpiry time.Duration
	// Token is the admin token every node requires on every route but
	// /health, /ready, /readyz and /openapi.json (--auth-token-file,
	// --auth-scope all) and keys the replica-sync MAC with; every request
	// of the harness carries it. Empty: a random one.
	Token string
	// Base is the origin of NemesisEvent times (default: when
	// StartCluster was called). Share it with the workload's history.
	Base time.Time
	// Logger receives the harness's own progress (default: discarded).
	Logger *slog.Logger
}

func (cfg *Config) fill() error {
	if cfg.Bin == "" || cfg.Dir == "" {
		return errors.New("jepsen: Config.Bin and Config.Dir are required")
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Nodes < 1 {
		return fmt.Errorf("jepsen: %d nodes", cfg.Nodes)
	}
	if cfg.Model == "" {
		cfg.Model = "jepsen"
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 128
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = DefaultTrailingLogs
	}
	if cfg.ActiveRequestExpiry <= 0 {
		cfg.ActiveRequestExpiry = LoadExpiry
	}
	if cfg.Token == "" {
		var err error
		if cfg.Token, err = NewToken(); err != nil {
			return err
		}
	}
	if cfg.Base.IsZero() {
		cfg.Base = time.Now()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Link kinds: the three ports one node dials on another.
const (
	KindRaft = proccluster.KindRaft
	KindHTTP = proccluster.KindHTTP
	KindSync = proccluster.KindSync
)

// Cluster is a running set of real kvselect processes, every directed
// inter-node connection routed through its own Link, plus an optional
// kvsim process: a proccluster.Cluster (which holds the processes, the
// links and the waits) with the run's configuration, kvsim, the nemesis
// events and the index probes. Its methods are safe for concurrent use;
// faults and process control may be applied while clients run.
type Cluster struct {
	*proccluster.Cluster
	cfg     Config
	sim     *proccluster.Sim   // nil without kvsim
	simRegs []api.WorkerFields // kvsim's workers, as it registers them

	evMu   sync.Mutex
	events []NemesisEvent

	probeMu sync.Mutex
	probes  []api.Prompt // IndexProbes

	closeOnce sync.Once
	closeErr  error
}

// StartCluster starts cfg.Nodes kvselect processes forming a new cluster
// and, with cfg.Workers > 0, a kvsim process whose workers are registered
// and followed by every node. It returns once the cluster is healthy
// (WaitHealthy) and every node listens to every worker. On error nothing
// it started keeps running.
func StartCluster(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	// A new cluster starts from empty data dirs: one left by an earlier
	// run in the same Dir would bring back its catalog, and the history
	// would start from a state the checkers know nothing of.
	if err := clearDataDirs(cfg.Dir, cfg.Nodes); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	// kvsim starts first: every node is started with --kv-dial for its
	// workers' addresses, which kvsim picks.
	var workers []proccluster.WorkerAddr
	if cfg.Workers > 0 {
		if err := c.startSim(ctx); err != nil {
			return c, err
		}
		if workers, err = proccluster.WorkerAddrs(c.simRegs); err != nil {
			return c, err
		}
	}
	c.Cluster, err = proccluster.StartHealthy(ctx, proccluster.Config{
		Bin: filepath.Join(cfg.Bin, "kvselect"), Dir: cfg.Dir, Nodes: cfg.Nodes, Tag: "jepsen",
		Token: cfg.Token, Links: true, Workers: workers, Options: nodeOptions(cfg), Logger: cfg.Logger,
	})
	if err != nil {
		return c, err
	}
	cfg.Logger.Info("cluster up", "nodes", cfg.Nodes, "dir", cfg.Dir)
	if cfg.Workers > 0 {
		if err := c.registerSim(ctx); err != nil {
			return c, err
		}
		cfg.Logger.Info("kvsim up", "workers", cfg.Workers, "control", c.SimURL())
	}
	return c, nil
}

// clearDataDirs removes the data dirs and logs of nodes n1..nodes and
// kvsim's log under dir, and nothing else there.
func clearDataDirs(dir string, nodes int) error {
	if err := os.RemoveAll(filepath.Join(dir, "kvsim.log")); err != nil {
		return err
	}
	return proccluster.ClearDirs(dir, nodes)
}

// nodeOptions are the harness's choices for every node, on top of the
// loopback addresses, links and token file proccluster gives it: Raft
// timings and snapshot settings from cfg, the long booking expiry, and
// authentication on every route; cfg.ExtraArgs last.
func nodeOptions(cfg Config) func(int, *proccluster.NodeOptions) {
	return func(_ int, o *proccluster.NodeOptions) {
		o.ElectionTimeout = cfg.ElectionTimeout
		o.SnapshotThreshold = cfg.SnapshotThreshold
		// Snapshots within a second or two of the threshold, keeping
		// few entries after them, so snapshot-catch-up compacts past
		// an isolated follower in seconds.
		o.SnapshotInterval, o.TrailingLogs = time.Second, cfg.TrailingLogs
		o.ActiveRequestExpiry = cfg.ActiveRequestExpiry
		// The admin token on every route (SPEC §11's default with a
		// token, named anyway): forwarding, index recovery and the
		// replica-sync MAC all run authenticated under the faults.
		o.AuthScope = "all"
		o.LogLevel = "info"
		o.Extra = cfg.ExtraArgs
	}
}

// NodeID is the Raft id of node index i ("n1" for 0).
func NodeID(i int) string { return proccluster.NodeID(i) }

// Dir is the run directory (data dirs and logs).
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Base is the origin of NemesisEvent times.
func (c *Cluster) Base() time.Time { return c.cfg.Base }

// Config is the cluster's configuration, defaults filled in.
func (c *Cluster) Config() Config { return c.cfg }

// Token is the admin token every request to the nodes carries.
func (c *Cluster) Token() string { return c.cfg.Token }

// Endpoints are every node's base URL with the token, for the workload
// and the checkers.
func (c *Cluster) Endpoints() Endpoints { return Endpoints{URLs: c.URLs(), Token: c.cfg.Token} }

// URL is node i's HTTP base URL, direct (not through a Link): clients
// talk to the nodes themselves; only node-to-node traffic is faulted.
func (c *Cluster) URL(i int) string { return c.Node(i).URL }

// WorkerIDs are the kvsim workers' ids (1..Workers).
func (c *Cluster) WorkerIDs() []uint64 {
	out := make([]uint64, c.cfg.Workers)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// LogPath is node i's log file.
func (c *Cluster) LogPath(i int) string { return c.Node(i).Proc.LogPath }

// Recover undoes every fault: links pass, paused nodes resume, stopped
// nodes restart; then it waits until the cluster is healthy. A node that
// had exited on its own (a crash, not a fault) is restarted too, and
// reported in the error: that is a finding.
func (c *Cluster) Recover(ctx context.Context) error {
	c.HealAll()
	var errs, crashes []error
	for i, n := range c.Nodes() {
		if n.Proc.IsPaused() {
			errs = append(errs, c.Resume(i))
		}
		if _, ok := n.Proc.Running(); !ok {
			if err := n.Proc.ExitedOnItsOwn(); err != nil {
				crashes = append(crashes, fmt.Errorf("%s had exited on its own (%v; see %s); restarted", NodeID(i), err, n.Proc.LogPath))
			}
			errs = append(errs, n.Proc.Start())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return errors.Join(append(crashes, err)...)
	}
	return errors.Join(append(crashes, c.WaitHealthy(ctx))...)
}

// Close stops kvsim and every node (resumed, then SIGTERM, SIGKILL after
// a few seconds) and every link. It waits until every child process is
// reaped. Safe to call more than once and on a half-started cluster.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		if c.sim != nil {
			c.sim.Close()
		}
		if c.Cluster != nil {
			c.closeErr = c.Cluster.Close()
		}
	})
	return c.closeErr
}

// pollEvery is how often the harness asks whether what it waits for holds.
const pollEvery = 100 * time.Millisecond

// Link is one directed link's fault proxy (package faultproxy); LinkFault
// is what it does to the bytes. The names stay jepsen's, for the nemeses
// and tests that use them.
type (
	Link      = faultproxy.Link
	LinkFault = faultproxy.Fault
)
