package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/childproc"
	"github.com/kvselect/kvselect/internal/faultproxy"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
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
	KindRaft = "raft"
	KindHTTP = "http"
	KindSync = "sync"
)

// Cluster is a running set of real kvselect processes, every directed
// inter-node connection routed through its own Link, plus an optional
// kvsim process. Its methods are safe for concurrent use; faults and
// process control may be applied while clients run.
type Cluster struct {
	cfg   Config
	nodes []*clusterNode
	links map[[2]int][]*Link // [from, to] → raft, http, sync links
	// workerLinks[i] are node i's links to kvsim's workers (--kv-dial).
	workerLinks map[int][]*Link
	sim         *childproc.Proc
	simRegs     []api.WorkerPatch // kvsim's workers, as it registers them
	// simControl is kvsim's control API base URL ("" without kvsim).
	simControl string
	simCtl     *kvsim.ControlClient

	evMu   sync.Mutex
	events []NemesisEvent

	probeMu sync.Mutex
	probes  []api.Prompt // IndexProbes

	closeOnce sync.Once
	closeErr  error
}

// clusterNode is one kvselect process and its addresses.
type clusterNode struct {
	id       string
	url      string // http://127.0.0.1:port
	raftAddr string
	syncAddr string
	proc     *childproc.Proc
	cl       *client.Client // pinned to this node
}

// StartCluster starts cfg.Nodes kvselect processes forming a new cluster
// and, with cfg.Workers > 0, a kvsim process whose workers are registered
// and followed by every node. It returns once the cluster is healthy
// (WaitHealthy) and every node listens to every worker. On error nothing
// it started keeps running.
func StartCluster(ctx context.Context, cfg Config) (*Cluster, error) {
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
	// A port chosen free can be taken by someone else before the node
	// binds it; then start again on new ports, from empty data dirs.
	for attempt := 1; ; attempt++ {
		c, err := startCluster(ctx, cfg)
		if err == nil || attempt == 3 || !c.lostPortRace() {
			return c, err
		}
		cfg.Logger.Warn("a node lost its port to another process; starting again", "attempt", attempt, "err", err)
		if err := clearDataDirs(cfg.Dir, cfg.Nodes); err != nil {
			return nil, err
		}
	}
}

// clearDataDirs removes the data dirs and logs of nodes n1..nodes and
// kvsim's log under dir, and nothing else there.
func clearDataDirs(dir string, nodes int) error {
	paths := []string{filepath.Join(dir, "kvsim.log")}
	for i := range nodes {
		paths = append(paths, filepath.Join(dir, NodeID(i)), filepath.Join(dir, NodeID(i)+".log"))
	}
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// lostPortRace reports whether a node exited because a port it was
// given was taken ("address already in use" in its log).
func (c *Cluster) lostPortRace() bool {
	for _, n := range c.nodes {
		if n.proc == nil || n.proc.ExitedOnItsOwn() == nil {
			continue
		}
		if b, err := os.ReadFile(n.proc.LogPath); err == nil && strings.Contains(string(b), "address already in use") {
			return true
		}
	}
	return false
}

func startCluster(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	c := &Cluster{cfg: cfg, links: map[[2]int][]*Link{}, workerLinks: map[int][]*Link{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	n := cfg.Nodes
	// The chosen ports stay reserved (their listeners open) while the
	// links pick theirs, so no link is handed a node's port; each node's
	// are released just before it starts.
	ports, reserved, err := childproc.ReservePorts(3*n + 1)
	if err != nil {
		return c, err
	}
	defer childproc.CloseAll(reserved)
	// kvsim starts first: every node is started with --kv-dial for its
	// workers' addresses, which kvsim picks.
	var simAddrs []workerAddr
	if cfg.Workers > 0 {
		childproc.CloseAll(reserved[3*n:])
		if err := c.startSim(ctx, ports[3*n]); err != nil {
			return c, err
		}
		if simAddrs, err = c.simAddrs(); err != nil {
			return c, err
		}
	}
	tokenPath, err := writeTokenFile(cfg.Dir, cfg.Token)
	if err != nil {
		return c, err
	}
	var initial []string
	for i := range n {
		node := &clusterNode{
			id:       NodeID(i),
			url:      fmt.Sprintf("http://127.0.0.1:%d", ports[i]),
			raftAddr: fmt.Sprintf("127.0.0.1:%d", ports[n+i]),
			syncAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*n+i]),
		}
		hc := &http.Client{Timeout: 2 * time.Second}
		if node.cl, err = client.New(client.Config{Addrs: []string{node.url}, Pinned: true, HTTPClient: hc, Token: cfg.Token}); err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, node)
		initial = append(initial, node.id+"="+node.raftAddr)
	}
	// One link per (from, to, kind); node i dials node j only through
	// the links from i to j, which its --peer-dial names.
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			to := c.nodes[j]
			for _, k := range []struct{ kind, target string }{
				{KindRaft, to.raftAddr}, {KindHTTP, strings.TrimPrefix(to.url, "http://")}, {KindSync, to.syncAddr},
			} {
				l, err := faultproxy.NewLink(fmt.Sprintf("%s->%s/%s", NodeID(i), NodeID(j), k.kind), i, j, k.kind, k.target)
				if err != nil {
					return c, err
				}
				c.links[[2]int{i, j}] = append(c.links[[2]int{i, j}], l)
			}
		}
	}
	for i, node := range c.nodes {
		var dial []string
		for j := range n {
			if ls := c.links[[2]int{i, j}]; ls != nil {
				dial = append(dial, fmt.Sprintf("%s=%s/%s/%s", NodeID(j), ls[0].Addr(), ls[1].Addr(), ls[2].Addr()))
			}
		}
		args := nodeArgs(cfg, node, initial, tokenPath)
		if len(dial) > 0 {
			args = append(args, "--peer-dial", strings.Join(dial, ","))
		}
		if len(simAddrs) > 0 {
			kvDial, err := c.addWorkerLinks(i, simAddrs)
			if err != nil {
				return c, err
			}
			args = append(args, "--kv-dial", kvDial)
		}
		args = append(args, cfg.ExtraArgs...)
		node.proc = &childproc.Proc{Tag: "jepsen", Name: node.id, Path: filepath.Join(cfg.Bin, "kvselect"), Args: args,
			LogPath: filepath.Join(cfg.Dir, node.id+".log")}
	}
	for i, node := range c.nodes {
		childproc.CloseAll([]net.Listener{reserved[i], reserved[n+i], reserved[2*n+i]})
		if err := node.proc.Start(); err != nil {
			return c, err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return c, err
	}
	cfg.Logger.Info("cluster up", "nodes", n, "dir", cfg.Dir)
	if cfg.Workers > 0 {
		if err := c.registerSim(ctx); err != nil {
			return c, err
		}
		cfg.Logger.Info("kvsim up", "workers", cfg.Workers, "control", c.simControl)
	}
	return c, nil
}

// nodeArgs is node's command line (before --peer-dial, --kv-dial and
// cfg.ExtraArgs): loopback addresses, Raft timings and snapshot settings
// from cfg, the long booking expiry, and authentication on every route.
func nodeArgs(cfg Config, node *clusterNode, initial []string, tokenPath string) []string {
	_, httpPort, _ := net.SplitHostPort(strings.TrimPrefix(node.url, "http://"))
	_, syncPort, _ := net.SplitHostPort(node.syncAddr)
	return []string{
		"--node-id", node.id, "--bind", "127.0.0.1", "--port", httpPort,
		"--raft-addr", node.raftAddr, "--data-dir", filepath.Join(cfg.Dir, node.id),
		"--initial-cluster", strings.Join(initial, ","),
		"--replica-sync-port", syncPort,
		"--raft-heartbeat-timeout", cfg.ElectionTimeout.String(),
		"--raft-election-timeout", cfg.ElectionTimeout.String(),
		"--raft-leader-lease-timeout", (cfg.ElectionTimeout / 2).String(),
		"--raft-snapshot-threshold", strconv.FormatUint(cfg.SnapshotThreshold, 10),
		// Snapshots within a second or two of the threshold, keeping
		// few entries after them, so snapshot-catch-up compacts past
		// an isolated follower in seconds.
		"--raft-snapshot-interval", "1s", "--raft-trailing-logs", strconv.FormatUint(cfg.TrailingLogs, 10),
		"--active-request-expiry-secs", strconv.FormatFloat(cfg.ActiveRequestExpiry.Seconds(), 'f', -1, 64),
		// The admin token on every route (SPEC §11's default with a
		// token, named anyway): forwarding, index recovery and the
		// replica-sync MAC all run authenticated under the faults.
		"--auth-token-file", tokenPath, "--auth-scope", "all",
		"--log-level", "info",
	}
}

// NodeID is the Raft id of node index i ("n1" for 0).
func NodeID(i int) string { return "n" + strconv.Itoa(i+1) }

// NodeIndex is the index of the node with Raft id id.
func (c *Cluster) NodeIndex(id string) (int, bool) {
	for i, n := range c.nodes {
		if n.id == id {
			return i, true
		}
	}
	return 0, false
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

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
func (c *Cluster) URL(i int) string { return c.nodes[i].url }

// URLs are every node's base URL, in index order.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.nodes))
	for i := range c.nodes {
		out[i] = c.URL(i)
	}
	return out
}

// SimURL is kvsim's control API base URL ("" when no kvsim runs).
func (c *Cluster) SimURL() string { return c.simControl }

// WorkerIDs are the kvsim workers' ids (1..Workers).
func (c *Cluster) WorkerIDs() []uint64 {
	out := make([]uint64, c.cfg.Workers)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// LogPath is node i's log file.
func (c *Cluster) LogPath(i int) string { return c.nodes[i].proc.LogPath }

// Live lists the nodes whose process runs and is not paused.
func (c *Cluster) Live() []int {
	var out []int
	for i, n := range c.nodes {
		if n.proc.Live() {
			out = append(out, i)
		}
	}
	return out
}

// Running reports whether node i's process exists (paused or not).
func (c *Cluster) Running(i int) bool {
	_, ok := c.nodes[i].proc.Running()
	return ok
}

// Paused reports whether node i is stopped by SIGSTOP.
func (c *Cluster) Paused(i int) bool { return c.nodes[i].proc.IsPaused() }

// Kill sends SIGKILL to node i and waits until it is reaped.
func (c *Cluster) Kill(i int) { c.nodes[i].proc.Stop(syscall.SIGKILL, 0) }

// Stop sends SIGTERM to node i and waits for it to exit (SIGKILL after
// 10 s).
func (c *Cluster) Stop(i int) { c.nodes[i].proc.Stop(syscall.SIGTERM, 10*time.Second) }

// Pause stops node i with SIGSTOP: it keeps its sockets but answers
// nothing.
func (c *Cluster) Pause(i int) error { return c.nodes[i].proc.SetPaused(true) }

// Resume continues node i after Pause (SIGCONT).
func (c *Cluster) Resume(i int) error { return c.nodes[i].proc.SetPaused(false) }

// Restart starts node i again with the same command line and data dir;
// a running node is stopped first (SIGTERM).
func (c *Cluster) Restart(i int) error {
	c.Stop(i)
	return c.nodes[i].proc.Start()
}

// status asks node i for /cluster/status within a short bound.
func (c *Cluster) status(ctx context.Context, i int) (*api.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.nodes[i].cl.ClusterStatus(ctx)
}

// statuses asks each node of among in parallel; a missing entry did not
// answer.
func (c *Cluster) statuses(ctx context.Context, among []int) (map[int]*api.ClusterStatus, map[int]error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out, errs := map[int]*api.ClusterStatus{}, map[int]error{}
	for _, i := range among {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.status(ctx, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = err
			} else {
				out[i] = st
			}
		}()
	}
	wg.Wait()
	return out, errs
}

// Leader is the leader every live node agrees on, now (no waiting).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	return c.LeaderAmong(ctx, c.Live())
}

// LeaderAmong is the leader the nodes of among agree on, now: every one
// answers, names the same leader, and that leader is one of them and
// says it leads. Use it on one side of a partition.
func (c *Cluster) LeaderAmong(ctx context.Context, among []int) (int, error) {
	if len(among) == 0 {
		return 0, errors.New("no node to ask")
	}
	sts, errs := c.statuses(ctx, among)
	for i, err := range errs {
		return 0, fmt.Errorf("%s: %w", NodeID(i), err)
	}
	leader := ""
	for _, i := range among {
		id := sts[i].Leader.ID
		if id == "" {
			return 0, fmt.Errorf("%s knows no leader", NodeID(i))
		}
		if leader != "" && id != leader {
			return 0, fmt.Errorf("nodes disagree on the leader: %s and %s", leader, id)
		}
		leader = id
	}
	li, ok := c.NodeIndex(leader)
	if !ok || !slices.Contains(among, li) {
		return 0, fmt.Errorf("leader %s is not among %v", leader, among)
	}
	if sts[li].State != api.StateLeader {
		return 0, fmt.Errorf("%s is named leader but is %s", leader, sts[li].State)
	}
	return li, nil
}

// WaitLeader polls LeaderAmong(among) until it succeeds (nil among: the
// live nodes at each poll) or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context, among []int) (int, error) {
	var leader int
	err := poll.Until(ctx, pollEvery, "a leader is agreed", func(ctx context.Context) error {
		nodes := among
		if nodes == nil {
			nodes = c.Live()
		}
		var err error
		leader, err = c.LeaderAmong(ctx, nodes)
		return err
	})
	return leader, err
}

// WaitHealthy waits until every live node answers /health, they agree on
// a leader that knows every member's HTTP address, and every live node
// has applied the leader's catalog index. It fails early when a node's
// process has exited on its own.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return poll.Until(ctx, pollEvery, "the cluster is healthy", func(ctx context.Context) error {
		for i, n := range c.nodes {
			if err := n.proc.ExitedOnItsOwn(); err != nil {
				return poll.Fatal(fmt.Errorf("%s exited: %v (see %s)", NodeID(i), err, n.proc.LogPath))
			}
		}
		live := c.Live()
		for _, i := range live {
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.nodes[i].cl.Health(hctx)
			cancel()
			if err != nil {
				return fmt.Errorf("%s /health: %w", NodeID(i), err)
			}
		}
		li, err := c.LeaderAmong(ctx, live)
		if err != nil {
			return err
		}
		sts, errs := c.statuses(ctx, live)
		for i, err := range errs {
			return fmt.Errorf("%s: %w", NodeID(i), err)
		}
		lead := sts[li]
		if len(lead.Members) != len(c.nodes) {
			return fmt.Errorf("leader %s has %d members", lead.NodeID, len(lead.Members))
		}
		for _, m := range lead.Members {
			if m.HTTPAddr == "" {
				return fmt.Errorf("leader %s does not know %s's HTTP address", lead.NodeID, m.ID)
			}
		}
		for _, i := range live {
			if sts[i].CatalogIndex < lead.CatalogIndex {
				return fmt.Errorf("%s applied catalog index %d, leader %d", NodeID(i), sts[i].CatalogIndex, lead.CatalogIndex)
			}
		}
		return nil
	})
}

// Links are the links from node from to node to: raft, http, sync.
func (c *Cluster) Links(from, to int) []*Link { return c.links[[2]int{from, to}] }

// AllLinks are every inter-node link.
func (c *Cluster) AllLinks() []*Link {
	var out []*Link
	for i := range c.nodes {
		for j := range c.nodes {
			out = append(out, c.Links(i, j)...)
		}
	}
	return out
}

// updateLinks changes the fault of every link from → to.
func (c *Cluster) updateLinks(from, to int, change func(*LinkFault)) {
	for _, l := range c.Links(from, to) {
		f := l.Fault()
		change(&f)
		l.SetFault(f)
	}
}

// Partition cuts the cluster into groups: a link passes (other faults
// kept) when some group holds both its ends and is blackholed otherwise.
// Groups may overlap: {0,1},{1,2} lets 1 bridge 0 and 2, which cannot
// reach each other. A node in no group is isolated.
func (c *Cluster) Partition(groups ...[]int) {
	together := func(i, j int) bool {
		for _, g := range groups {
			if slices.Contains(g, i) && slices.Contains(g, j) {
				return true
			}
		}
		return false
	}
	for i := range c.nodes {
		for j := range c.nodes {
			if i != j {
				cut := !together(i, j)
				c.updateLinks(i, j, func(f *LinkFault) { f.Blackhole = cut })
			}
		}
	}
}

// Isolate cuts node i off from every other node, both ways.
func (c *Cluster) Isolate(i int) {
	var rest []int
	for j := range c.nodes {
		if j != i {
			rest = append(rest, j)
		}
	}
	c.Partition([]int{i}, rest)
}

// OneWay blackholes every link from → to and leaves to → from alone. A
// link carries both directions of the connections from dials, so from's
// requests to to and their answers are lost while to's own connections
// to from still work.
func (c *Cluster) OneWay(from, to int) {
	c.updateLinks(from, to, func(f *LinkFault) { f.Blackhole = true })
}

// SetLatency delays every chunk on every link by d plus up to jitter.
func (c *Cluster) SetLatency(d, jitter time.Duration) {
	for _, l := range c.AllLinks() {
		f := l.Fault()
		f.Delay, f.Jitter = d, jitter
		l.SetFault(f)
	}
}

// SetFlaky makes every link cut a connection with probability p at
// accept and at each chunk.
func (c *Cluster) SetFlaky(p float64) {
	for _, l := range c.AllLinks() {
		f := l.Fault()
		f.DropProb = p
		l.SetFault(f)
	}
}

// HealAll makes every link pass, the worker links too.
func (c *Cluster) HealAll() {
	for _, l := range append(c.AllLinks(), c.allWorkerLinks()...) {
		l.Pass()
	}
}

// Recover undoes every fault: links pass, paused nodes resume, stopped
// nodes restart; then it waits until the cluster is healthy. A node that
// had exited on its own (a crash, not a fault) is restarted too, and
// reported in the error: that is a finding.
func (c *Cluster) Recover(ctx context.Context) error {
	c.HealAll()
	var errs, crashes []error
	for i, n := range c.nodes {
		if n.proc.IsPaused() {
			errs = append(errs, c.Resume(i))
		}
		if _, ok := n.proc.Running(); !ok {
			if err := n.proc.ExitedOnItsOwn(); err != nil {
				crashes = append(crashes, fmt.Errorf("%s had exited on its own (%v; see %s); restarted", NodeID(i), err, n.proc.LogPath))
			}
			errs = append(errs, n.proc.Start())
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
			c.sim.Stop(syscall.SIGTERM, 3*time.Second)
		}
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			if n.proc == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.proc.Stop(syscall.SIGTERM, 5*time.Second)
			}()
		}
		wg.Wait()
		var errs []error
		for _, l := range append(c.AllLinks(), c.allWorkerLinks()...) {
			errs = append(errs, l.Close())
		}
		c.closeErr = errors.Join(errs...)
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
