package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/server/proccluster"
)

// buildKvselect compiles this package into a temporary directory. Only the
// test binary runs under the race detector; the nodes are plain builds.
func buildKvselect(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvselect")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// procNode is one kvselect process of the harness (proccluster.Node),
// with what the tests add: a token and an HTTPS client for its polls.
// Only the test goroutine touches it.
type procNode struct {
	*proccluster.Node
	i            int    // index in the cluster
	id, httpAddr string // the Node's, under the tests' names
	logPath      string
	// token, when set, goes on the harness's own status polls (a node
	// with --auth-token-file guards /cluster/status).
	token string
	// https, when set, is the client of a node that serves HTTPS (it
	// trusts the node's CA); its URLs are then https.
	https *http.Client
	// mayExit, when set, says the test expects the process to exit on
	// its own: eventually does not fail on it.
	mayExit bool
}

// url is the node's HTTP base URL followed by path.
func (n *procNode) url(path string) string {
	if n.https != nil {
		return "https://" + n.httpAddr + path
	}
	return "http://" + n.httpAddr + path
}

// pollClient is the client of the harness's polls of n.
func (n *procNode) pollClient() *http.Client {
	if n.https != nil {
		return n.https
	}
	return pollClient
}

// exited reports whether the process has exited.
func (n *procNode) exited() bool {
	_, running := n.Proc.Running()
	return !running
}

// procCluster is a cluster of real kvselect processes n1..nN on loopback,
// formed with --initial-cluster, run by the process harness. Every
// process is stopped and reaped when the test ends, and on failure each
// node's log tail is shown.
type procCluster struct {
	t     *testing.T
	pc    *proccluster.Cluster
	nodes []*procNode
}

// startProcCluster starts n nodes that bootstrap one cluster together,
// each with extra flags appended. It does not wait for the cluster to form.
func startProcCluster(t *testing.T, bin string, n int, extra ...string) *procCluster {
	t.Helper()
	return startProcs(t, bin, n, func(o *proccluster.NodeOptions) { o.Extra = extra })
}

// startFastFailover starts three nodes that bootstrap one cluster with
// short Raft timeouts (500 ms, the leader lease half that), for the tests
// that kill or remove nodes and wait for the next leader, logging at
// logLevel.
func startFastFailover(t *testing.T, logLevel string) *procCluster {
	t.Helper()
	return startProcs(t, buildKvselect(t), 3, func(o *proccluster.NodeOptions) {
		o.LogLevel = logLevel
		o.ElectionTimeout = 500 * time.Millisecond
	})
}

// startProcs starts n nodes with the harness's options, changed by opts.
func startProcs(t *testing.T, bin string, n int, opts func(*proccluster.NodeOptions)) *procCluster {
	t.Helper()
	pc, err := proccluster.Start(proccluster.Config{Bin: bin, Dir: t.TempDir(), Nodes: n, Tag: "test",
		Options: func(_ int, o *proccluster.NodeOptions) {
			o.ReplicaSyncPort = 0 // the node's default: a port the OS chooses
			opts(o)
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := &procCluster{t: t, pc: pc}
	for i, node := range pc.Nodes() {
		c.nodes = append(c.nodes, c.wrap(i, node))
	}
	// Cleanups run last-in first-out: stop every process, then show logs.
	t.Cleanup(c.showLogsOnFailure)
	t.Cleanup(func() { pc.Close() })
	return c
}

func (c *procCluster) wrap(i int, node *proccluster.Node) *procNode {
	return &procNode{Node: node, i: i, id: node.ID, httpAddr: node.HTTPAddr, logPath: node.Proc.LogPath}
}

// start runs node's process again with its options.
func (c *procCluster) start(node *procNode) {
	c.t.Helper()
	if err := c.pc.StartNode(node.i); err != nil {
		c.t.Fatalf("start %s: %v", node.id, err)
	}
}

// kill sends SIGKILL to node and waits until it is gone.
func (c *procCluster) kill(node *procNode) { c.pc.Kill(node.i) }

// signal sends sig to node.
func (c *procCluster) signal(node *procNode, sig syscall.Signal) {
	c.t.Helper()
	if err := node.Proc.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// terminateAll sends SIGTERM to every running node at once and checks
// that each shuts down gracefully, exiting with status 0 within timeout.
// Nodes that already exited are left out.
func (c *procCluster) terminateAll(timeout time.Duration) {
	c.t.Helper()
	var running []*procNode
	for _, node := range c.nodes {
		if !node.exited() {
			running = append(running, node)
		}
	}
	for _, node := range running {
		if err := node.Proc.Signal(syscall.SIGTERM); err != nil {
			c.t.Errorf("SIGTERM %s: %v", node.id, err)
		}
	}
	poll.Eventually(c.t, timeout, "every node exits after SIGTERM", func() error {
		for _, node := range running {
			if !node.exited() {
				return fmt.Errorf("%s still running", node.id)
			}
		}
		return nil
	})
	for _, node := range running {
		if err := node.Proc.ExitErr(); err != nil {
			c.t.Errorf("%s did not exit cleanly after SIGTERM: %v", node.id, err)
		}
	}
}

func (c *procCluster) showLogsOnFailure() {
	if !c.t.Failed() {
		return
	}
	for _, node := range c.nodes {
		c.t.Logf("--- tail of %s (%s):\n%s", node.id, node.logPath, proccluster.Tail(node.logPath, 40, reconnectNoise))
	}
}

// reconnectNoise marks the warning each node logs on every failed dial of
// a worker's KV event endpoint; the test's workers point at a closed port,
// so these would drown everything else in the log tails, which leave them
// out.
const reconnectNoise = "kv events connection failed"

// eventually polls cond until it returns nil and fails the test with the
// last error after timeout. It also fails at once when a node has exited
// on its own (unless mayExit), or when another goroutine failed the test.
func (c *procCluster) eventually(what string, timeout time.Duration, cond func() error) {
	c.t.Helper()
	poll.Eventually(c.t, timeout, what, func() error {
		for _, node := range c.nodes {
			if err := node.Proc.ExitedOnItsOwn(); err != nil && !node.mayExit {
				return poll.Fatal(fmt.Errorf("%s exited: %w", node.id, err))
			}
		}
		if c.t.Failed() {
			return poll.Fatal(errors.New("the test failed meanwhile"))
		}
		return cond()
	})
}

// waitAgreement waits until every node reports the same leader, the
// leader says it leads, and every member's HTTP address is known on every
// node. It returns the leader.
func (c *procCluster) waitAgreement(timeout time.Duration) *procNode {
	c.t.Helper()
	var leader *procNode
	c.eventually("the nodes agree on a leader", timeout, func() error {
		leader = nil
		for _, node := range c.nodes {
			st, err := clusterStatus(node)
			if err != nil {
				return err
			}
			if st.Leader.ID == "" {
				return fmt.Errorf("%s knows no leader (state %s)", node.id, st.State)
			}
			if leader == nil {
				if leader = c.node(st.Leader.ID); leader == nil {
					return fmt.Errorf("%s sees unknown leader %q", node.id, st.Leader.ID)
				}
			}
			if st.Leader.ID != leader.id {
				return fmt.Errorf("%s sees leader %s, another node sees %s", node.id, st.Leader.ID, leader.id)
			}
			if node == leader && st.State != "leader" {
				return fmt.Errorf("%s is named leader but is %s", node.id, st.State)
			}
			if len(st.Members) != len(c.nodes) {
				return fmt.Errorf("%s sees %d members, want %d", node.id, len(st.Members), len(c.nodes))
			}
			for _, m := range st.Members {
				if m.HTTPAddr == "" {
					return fmt.Errorf("%s does not know the HTTP address of %s yet", node.id, m.ID)
				}
			}
		}
		return nil
	})
	return leader
}

func (c *procCluster) node(id string) *procNode {
	for _, node := range c.nodes {
		if node.id == id {
			return node
		}
	}
	return nil
}

// index is node's position in c.nodes.
func (c *procCluster) index(node *procNode) int {
	c.t.Helper()
	i := slices.Index(c.nodes, node)
	if i < 0 {
		c.t.Fatalf("unknown node %s", node.id)
	}
	return i
}

// pollClient is for status polls: a stuck node must not stall a poll loop.
var pollClient = &http.Client{Timeout: time.Second}

// answer is one HTTP response, read in full.
type answer struct {
	status int
	body   []byte
}

// code is the machine-readable error code of an error answer.
func (a answer) code() string {
	var eb struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(a.body, &eb)
	return eb.Code
}

func (a answer) String() string {
	return fmt.Sprintf("%d %s", a.status, strings.TrimSpace(string(a.body)))
}

// send makes one JSON request with client and reads the whole answer;
// header holds pairs of header names and values.
func send(ctx context.Context, client *http.Client, method, url, body string, header ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, raw}, nil
}

// getJSON GETs path on node into v, requiring 200.
func getJSON(node *procNode, path string, v any) error {
	var header []string
	if node.token != "" {
		header = []string{api.HeaderAuthorization, api.Bearer(node.token)}
	}
	a, err := send(context.Background(), node.pollClient(), http.MethodGet, node.url(path), "", header...)
	if err != nil {
		return fmt.Errorf("%s: %w", node.id, err)
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %v", path, node.id, a)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("GET %s on %s: %w", path, node.id, err)
	}
	return nil
}

func clusterStatus(node *procNode) (api.ClusterStatus, error) {
	var st api.ClusterStatus
	err := getJSON(node, "/cluster/status", &st)
	return st, err
}

// localWorkerIDs returns the worker ids in node's own catalog (GET
// /workers at the default, local consistency), in the order listed.
func localWorkerIDs(node *procNode) ([]uint64, error) {
	var records []struct {
		WorkerID uint64 `json:"worker_id"`
	}
	if err := getJSON(node, api.PathWorkers, &records); err != nil {
		return nil, err
	}
	ids := make([]uint64, len(records))
	for i, r := range records {
		ids[i] = r.WorkerID
	}
	return ids, nil
}
