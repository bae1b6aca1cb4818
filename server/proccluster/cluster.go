package proccluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/childproc"
	"github.com/kvselect/kvselect/internal/faultproxy"
)

// ErrConfig is what Start wraps for a Config it cannot run.
var ErrConfig = errors.New("proccluster: bad config")

// Link kinds: the three ports one node dials on another, and a node's
// two kinds of connection to a worker rank.
const (
	KindRaft   = "raft"
	KindHTTP   = "http"
	KindSync   = "sync"
	KindKV     = "kv"
	KindReplay = "replay"
)

// Config describes the cluster Start runs.
type Config struct {
	// Bin is the kvselect binary.
	Bin string
	// Dir holds the node data dirs (n1/, n2/, …) and logs (n1.log, …).
	// It is created if missing; data dirs and logs of nodes an earlier
	// run left there are removed first (ClearDirs).
	Dir string
	// Nodes is the number of nodes (default 3).
	Nodes int
	// Tag heads each start line in the nodes' logs (childproc.Proc.Tag).
	Tag string
	// Token, when set, is the admin token: written to Dir's TokenFile,
	// named by every node's --auth-token-file, and carried by the nodes'
	// clients.
	Token string
	// Links puts a faultproxy.Link on every directed inter-node link
	// (raft, http, sync): node i dials node j only through the links
	// i->j, which its --peer-dial names.
	Links bool
	// Workers are worker addresses each node reaches through links of its
	// own (--kv-dial), to cut a node off its KV events.
	Workers []WorkerAddr
	// Options, when set, adjusts node i's options after the harness's
	// choices (loopback addresses, data dir, initial cluster, peer and
	// KV dials, token file).
	Options func(i int, o *NodeOptions)
	// HTTPClient is the transport of the nodes' clients (default: one
	// with a 2 s timeout, so a stuck node cannot stall a wait).
	HTTPClient *http.Client
	// HTTPS makes the nodes' URLs https (the nodes serve TLS; HTTPClient
	// trusts them).
	HTTPS bool
	// Logger receives the harness's own progress (default: discarded).
	Logger *slog.Logger
}

// WorkerAddr is one TCP address nodes dial for a worker rank.
type WorkerAddr struct {
	Worker uint64
	Rank   uint32
	Kind   string // KindKV or KindReplay
	Addr   string // host:port as the worker registered it
}

func (cfg *Config) scheme() string {
	if cfg.HTTPS {
		return "https"
	}
	return "http"
}

func (cfg *Config) fill() error {
	if cfg.Bin == "" || cfg.Dir == "" {
		return fmt.Errorf("%w: Bin and Dir are required", ErrConfig)
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Nodes < 1 {
		return fmt.Errorf("%w: %d nodes", ErrConfig, cfg.Nodes)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Node is one kvselect process: its addresses, its options (Restart
// starts it with them again, so a test may change them first), its
// process and a client pinned to it.
type Node struct {
	ID       string
	URL      string // http(s)://127.0.0.1:port
	HTTPAddr string // 127.0.0.1:port
	RaftAddr string
	SyncAddr string
	Opts     NodeOptions
	Proc     *childproc.Proc
	Client   *client.Client
}

// Cluster is a running set of real kvselect processes on loopback. Its
// methods are safe for concurrent use, except that a Node's Opts must not
// change while Restart may read them.
type Cluster struct {
	cfg   Config
	nodes []*Node
	links map[[2]int][]*faultproxy.Link // [from, to] → raft, http, sync
	// workerLinks[i] are node i's links to the workers (--kv-dial).
	workerLinks map[int][]*faultproxy.Link

	closeOnce sync.Once
	closeErr  error
}

// NodeID is the Raft id of node index i ("n1" for 0).
func NodeID(i int) string { return "n" + strconv.Itoa(i+1) }

// ClearDirs removes the data dirs and logs of nodes n1..nodes under dir,
// and nothing else there: a new cluster must not start from an earlier
// run's Raft state or append to its logs.
func ClearDirs(dir string, nodes int) error {
	for i := range nodes {
		for _, p := range []string{filepath.Join(dir, NodeID(i)), filepath.Join(dir, NodeID(i)+".log")} {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Start starts cfg.Nodes kvselect processes that bootstrap one cluster
// together (--initial-cluster), from empty data dirs. It does not wait
// for the cluster to form (WaitHealthy does; StartHealthy does both). On
// error nothing it started keeps running.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := ClearDirs(cfg.Dir, cfg.Nodes); err != nil {
		return nil, err
	}
	return start(cfg)
}

// StartHealthy is Start, then WaitHealthy. A port chosen free can be
// taken by another process before a node binds it; then it starts again
// on new ports, from empty data dirs (three attempts).
func StartHealthy(ctx context.Context, cfg Config) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := Start(cfg)
		if err != nil {
			return nil, err
		}
		err = c.WaitHealthy(ctx)
		if err == nil {
			return c, nil
		}
		lost := c.lostPortRace()
		c.Close()
		if attempt == 3 || !lost {
			return nil, err
		}
		c.cfg.Logger.Warn("a node lost its port to another process; starting again", "attempt", attempt, "err", err)
	}
}

func start(cfg Config) (_ *Cluster, err error) {
	c := &Cluster{cfg: cfg, links: map[[2]int][]*faultproxy.Link{}, workerLinks: map[int][]*faultproxy.Link{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	n := cfg.Nodes
	// The chosen ports stay reserved (their listeners open) while the
	// links pick theirs, so no link is handed a node's port; each node's
	// are released just before it starts.
	ports, reserved, err := childproc.ReservePorts(3 * n)
	if err != nil {
		return c, err
	}
	defer childproc.CloseAll(reserved)
	tokenPath := ""
	if cfg.Token != "" {
		if tokenPath, err = WriteTokenFile(cfg.Dir, cfg.Token); err != nil {
			return c, err
		}
	}
	scheme := cfg.scheme()
	var initial []string
	for i := range n {
		node := &Node{
			ID:       NodeID(i),
			HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])),
			RaftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i])),
			SyncAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*n+i])),
		}
		node.URL = scheme + "://" + node.HTTPAddr
		if node.Client, err = client.New(client.Config{Addrs: []string{node.URL}, Pinned: true, HTTPClient: cfg.HTTPClient, Token: cfg.Token}); err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, node)
		initial = append(initial, node.ID+"="+node.RaftAddr)
	}
	if cfg.Links {
		if err := c.addPeerLinks(); err != nil {
			return c, err
		}
	}
	for i, node := range c.nodes {
		o := NodeOptions{
			ID: node.ID, Bind: "127.0.0.1", HTTPPort: ports[i], RaftAddr: node.RaftAddr,
			DataDir: filepath.Join(cfg.Dir, node.ID), InitialCluster: initial, ReplicaSyncPort: ports[2*n+i],
			AuthTokenFile: tokenPath,
		}
		for j := range n {
			if ls := c.links[[2]int{i, j}]; ls != nil {
				o.PeerDial = append(o.PeerDial, fmt.Sprintf("%s=%s/%s/%s", NodeID(j), ls[0].Addr(), ls[1].Addr(), ls[2].Addr()))
			}
		}
		if o.KVDial, err = c.addWorkerLinks(i, cfg.Workers); err != nil {
			return c, err
		}
		if cfg.Options != nil {
			cfg.Options(i, &o)
		}
		node.Opts = o
		args, err := o.CheckedArgs()
		if err != nil {
			return c, fmt.Errorf("%s's command line: %w", node.ID, err)
		}
		node.Proc = &childproc.Proc{Tag: cfg.Tag, Name: node.ID, Path: cfg.Bin, Args: args,
			LogPath: filepath.Join(cfg.Dir, node.ID+".log")}
	}
	for i, node := range c.nodes {
		childproc.CloseAll([]net.Listener{reserved[i], reserved[n+i], reserved[2*n+i]})
		if err := node.Proc.Start(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// AddNode starts node n<Size+1> on fresh loopback ports, with its own
// data dir and log in Config.Dir and no cluster flags: opts adds them
// (Join, say; none bootstraps a cluster of its own). It has no links.
// Call it from one goroutine, while nothing else uses the Cluster.
func (c *Cluster) AddNode(opts func(*NodeOptions)) (*Node, error) {
	ports, lns, err := childproc.ReservePorts(2)
	childproc.CloseAll(lns)
	if err != nil {
		return nil, err
	}
	i := len(c.nodes)
	node := &Node{ID: NodeID(i), HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		RaftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	node.URL = c.cfg.scheme() + "://" + node.HTTPAddr
	if node.Client, err = client.New(client.Config{Addrs: []string{node.URL}, Pinned: true, HTTPClient: c.cfg.HTTPClient, Token: c.cfg.Token}); err != nil {
		return nil, err
	}
	node.Opts = NodeOptions{ID: node.ID, Bind: "127.0.0.1", HTTPPort: ports[0], RaftAddr: node.RaftAddr,
		DataDir: filepath.Join(c.cfg.Dir, node.ID)}
	if opts != nil {
		opts(&node.Opts)
	}
	node.Proc = &childproc.Proc{Tag: c.cfg.Tag, Name: node.ID, Path: c.cfg.Bin, LogPath: filepath.Join(c.cfg.Dir, node.ID+".log")}
	c.nodes = append(c.nodes, node)
	return node, c.StartNode(i)
}

// addPeerLinks makes one Link per (from, to, kind).
func (c *Cluster) addPeerLinks() error {
	for i := range c.nodes {
		for j, to := range c.nodes {
			if i == j {
				continue
			}
			for _, k := range []struct{ kind, target string }{
				{KindRaft, to.RaftAddr}, {KindHTTP, to.HTTPAddr}, {KindSync, to.SyncAddr},
			} {
				l, err := faultproxy.NewLink(fmt.Sprintf("%s->%s/%s", NodeID(i), NodeID(j), k.kind), i, j, k.kind, k.target)
				if err != nil {
					return err
				}
				c.links[[2]int{i, j}] = append(c.links[[2]int{i, j}], l)
			}
		}
	}
	return nil
}

// addWorkerLinks gives node i one Link per worker address and returns
// its --kv-dial entries.
func (c *Cluster) addWorkerLinks(i int, addrs []WorkerAddr) ([]string, error) {
	var dial []string
	for _, a := range addrs {
		name := fmt.Sprintf("%s->w%d/%s", NodeID(i), a.Worker, a.Kind)
		if a.Rank != 0 {
			name += fmt.Sprintf("/r%d", a.Rank)
		}
		l, err := faultproxy.NewLink(name, i, -1, a.Kind, a.Addr)
		if err != nil {
			return nil, err
		}
		c.workerLinks[i] = append(c.workerLinks[i], l)
		dial = append(dial, a.Addr+"="+l.Addr())
	}
	return dial, nil
}

// TokenFile is the admin token's file in Config.Dir (mode 0600).
const TokenFile = "auth-token"

// WriteTokenFile writes token to dir's TokenFile, readable by its owner
// only, and returns its path, for --auth-token-file.
func WriteTokenFile(dir, token string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	// WriteFile keeps the mode of a file that exists: make sure.
	return path, os.Chmod(path, 0o600)
}

// lostPortRace reports whether a node exited because a port it was
// given was taken ("address already in use" in its log).
func (c *Cluster) lostPortRace() bool {
	for _, n := range c.nodes {
		if n.Proc == nil || n.Proc.ExitedOnItsOwn() == nil {
			continue
		}
		if b, err := os.ReadFile(n.Proc.LogPath); err == nil && strings.Contains(string(b), "address already in use") {
			return true
		}
	}
	return false
}

// Config is the cluster's configuration, defaults filled in.
func (c *Cluster) Config() Config { return c.cfg }

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// Node is node index i.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Nodes are every node, in index order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// NodeIndex is the index of the node with Raft id id.
func (c *Cluster) NodeIndex(id string) (int, bool) {
	for i, n := range c.nodes {
		if n.ID == id {
			return i, true
		}
	}
	return 0, false
}

// URLs are every node's base URL, in index order.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.URL
	}
	return out
}

// Live lists the nodes whose process runs and is not paused.
func (c *Cluster) Live() []int {
	var out []int
	for i, n := range c.nodes {
		if n.Proc.Live() {
			out = append(out, i)
		}
	}
	return out
}

// Running reports whether node i's process exists (paused or not).
func (c *Cluster) Running(i int) bool {
	_, ok := c.nodes[i].Proc.Running()
	return ok
}

// Paused reports whether node i is stopped by SIGSTOP.
func (c *Cluster) Paused(i int) bool { return c.nodes[i].Proc.IsPaused() }

// Kill sends SIGKILL to node i and waits until it is reaped.
func (c *Cluster) Kill(i int) { c.nodes[i].Proc.Stop(syscall.SIGKILL, 0) }

// Stop sends SIGTERM to node i and waits for it to exit (SIGKILL after
// 10 s).
func (c *Cluster) Stop(i int) { c.nodes[i].Proc.Stop(syscall.SIGTERM, 10*time.Second) }

// Pause stops node i with SIGSTOP: it keeps its sockets but answers
// nothing.
func (c *Cluster) Pause(i int) error { return c.nodes[i].Proc.SetPaused(true) }

// Resume continues node i after Pause (SIGCONT).
func (c *Cluster) Resume(i int) error { return c.nodes[i].Proc.SetPaused(false) }

// Restart starts node i again with its options (checked again) and data
// dir; a running node is stopped first (SIGTERM).
func (c *Cluster) Restart(i int) error {
	c.Stop(i)
	return c.StartNode(i)
}

// StartNode starts node i, which is not running, with its options.
func (c *Cluster) StartNode(i int) error {
	n := c.nodes[i]
	args, err := n.Opts.CheckedArgs()
	if err != nil {
		return fmt.Errorf("%s's command line: %w", n.ID, err)
	}
	n.Proc.Args = args
	return n.Proc.Start()
}

// Exited is the first node whose process has exited on its own (a crash,
// not the harness stopping it), as an error naming its log; nil if none.
func (c *Cluster) Exited() error {
	for _, n := range c.nodes {
		if err := n.Proc.ExitedOnItsOwn(); err != nil {
			return fmt.Errorf("%s exited: %v (see %s)", n.ID, err, n.Proc.LogPath)
		}
	}
	return nil
}

// Tail is the last lines of node i's log.
func (c *Cluster) Tail(i, lines int) string { return Tail(c.nodes[i].Proc.LogPath, lines, "") }

// Tail is the last lines of the file at path (or why it cannot be read).
// With skip, lines holding it are left out (noise, such as a reconnect
// warning logged every few milliseconds) and counted in a first line.
func Tail(path string, lines int, skip string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var out []string
	skipped := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if skip != "" && strings.Contains(sc.Text(), skip) {
			skipped++
			continue
		}
		if out = append(out, sc.Text()); len(out) > lines {
			out = out[1:]
		}
	}
	text := strings.Join(out, "\n")
	if skip != "" {
		text = fmt.Sprintf("(%d %q lines left out)\n%s", skipped, skip, text)
	}
	return text
}

// Close stops every node (resumed, then SIGTERM, SIGKILL after a few
// seconds) and every link. It waits until every process is reaped. Safe
// to call more than once and on a half-started cluster.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			if n.Proc == nil {
				continue
			}
			wg.Go(func() { n.Proc.Stop(syscall.SIGTERM, 5*time.Second) })
		}
		wg.Wait()
		var errs []error
		for _, l := range append(c.AllLinks(), c.AllWorkerLinks()...) {
			errs = append(errs, l.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
