package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
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

// procNode is one kvselect process. Its addresses, data dir and flags stay
// the same across restarts. Only the test goroutine touches it, except
// for the waiter goroutine that sets exitErr before closing done.
type procNode struct {
	id       string
	httpAddr string
	args     []string
	logPath  string
	// token, when set, goes on the harness's own status polls (a node
	// with --auth-token-file guards /cluster/status).
	token string
	// https, when set, is the client of a node that serves HTTPS (it
	// trusts the node's CA); its URLs are then https.
	https *http.Client

	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
	exitErr error         // cmd.Wait's result, read after done
	wantUp  bool          // the test expects the process to be running
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
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// procCluster is a cluster of real kvselect processes n1..nN on loopback,
// formed with --initial-cluster. Every process is killed and reaped when
// the test ends, and on failure each node's log tail is shown.
type procCluster struct {
	t     *testing.T
	bin   string
	nodes []*procNode
}

// startProcCluster starts n nodes that bootstrap one cluster together,
// each with extra flags appended. It does not wait for the cluster to form.
func startProcCluster(t *testing.T, bin string, n int, extra ...string) *procCluster {
	t.Helper()
	root := t.TempDir()
	c := &procCluster{t: t, bin: bin}
	ports := freePorts(t, 2*n)
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, ports[n+i]))
	}
	for i := range n {
		id := "n" + strconv.Itoa(i+1)
		node := &procNode{
			id:       id,
			httpAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])),
			logPath:  filepath.Join(root, id+".log"),
		}
		node.args = append([]string{
			"--node-id", id,
			"--bind", "127.0.0.1",
			"--port", strconv.Itoa(ports[i]),
			"--raft-addr", "127.0.0.1:" + strconv.Itoa(ports[n+i]),
			"--data-dir", filepath.Join(root, id),
			"--initial-cluster", strings.Join(initial, ","),
		}, extra...)
		c.nodes = append(c.nodes, node)
	}
	// Cleanups run last-in first-out: kill every process, then show logs.
	t.Cleanup(c.showLogsOnFailure)
	t.Cleanup(c.killAll)
	for _, node := range c.nodes {
		c.start(node)
	}
	return c
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago. All listeners stay open until every port is chosen, so the kernel
// cannot hand out the same port twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// childEnv is the test's environment without the variables kvselect reads
// its settings from, so the command line alone configures the nodes.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KVSELECT_") && !strings.HasPrefix(kv, "DYN_") {
			env = append(env, kv)
		}
	}
	return env
}

// start runs node's process, appending its output to its log file.
func (c *procCluster) start(node *procNode) {
	c.t.Helper()
	f, err := os.OpenFile(node.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(f, "=== test: start %s %s\n", node.id, strings.Join(node.args, " "))
	cmd := exec.Command(c.bin, node.args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, childEnv()
	if err := cmd.Start(); err != nil {
		f.Close()
		c.t.Fatalf("start %s: %v", node.id, err)
	}
	done := make(chan struct{})
	node.cmd, node.done, node.wantUp = cmd, done, true
	go func() {
		node.exitErr = cmd.Wait()
		f.Close()
		close(done)
	}()
}

// kill sends SIGKILL to node and waits until it is gone.
func (c *procCluster) kill(node *procNode) {
	c.t.Helper()
	node.wantUp = false
	if err := node.cmd.Process.Kill(); err != nil && !node.exited() {
		c.t.Fatalf("kill %s: %v", node.id, err)
	}
	<-node.done
}

// terminateAll sends SIGTERM to every running node at once and checks
// that each shuts down gracefully, exiting with status 0 within timeout.
// Nodes that already exited as the test expected are left out.
func (c *procCluster) terminateAll(timeout time.Duration) {
	c.t.Helper()
	var running []*procNode
	for _, node := range c.nodes {
		if !node.wantUp && node.exited() {
			continue
		}
		running = append(running, node)
	}
	for _, node := range running {
		node.wantUp = false
		if err := node.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			c.t.Errorf("SIGTERM %s: %v", node.id, err)
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, node := range running {
		select {
		case <-node.done:
			if node.exitErr != nil {
				c.t.Errorf("%s did not exit cleanly after SIGTERM: %v", node.id, node.exitErr)
			}
		case <-deadline.C:
			c.t.Fatalf("%s still running %v after SIGTERM", node.id, timeout)
		}
	}
}

func (c *procCluster) killAll() {
	for _, node := range c.nodes {
		if node.done != nil && !node.exited() {
			_ = node.cmd.Process.Kill()
			<-node.done
		}
	}
}

func (c *procCluster) showLogsOnFailure() {
	if !c.t.Failed() {
		return
	}
	for _, node := range c.nodes {
		c.t.Logf("--- tail of %s (%s):\n%s", node.id, node.logPath, tail(node.logPath, 40))
	}
}

// reconnectNoise marks the warning each node logs on every failed dial of
// a worker's KV event endpoint; the test's workers point at a closed port,
// so these would drown everything else in the log tails.
const reconnectNoise = "kv events connection failed"

// tail returns the last n lines of the file at path, leaving out
// reconnect warnings but saying how many there were.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	noise := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), reconnectNoise) {
			noise++
			continue
		}
		if lines = append(lines, sc.Text()); len(lines) > n {
			lines = lines[1:]
		}
	}
	return fmt.Sprintf("(%d %q warnings left out)\n%s", noise, reconnectNoise, strings.Join(lines, "\n"))
}

// eventually polls cond until it returns nil and fails the test with the
// last error after timeout. It also fails at once when a node the test
// expects to run has exited, or when another goroutine failed the test.
func (c *procCluster) eventually(what string, timeout time.Duration, cond func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, node := range c.nodes {
			if node.wantUp && node.exited() {
				c.t.Fatalf("waiting until %s: %s exited: %v", what, node.id, node.exitErr)
			}
		}
		if c.t.Failed() {
			c.t.FailNow()
		}
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting until %s: %v", timeout, what, err)
		}
		<-tick.C
	}
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
	if err := getJSON(node, "/workers", &records); err != nil {
		return nil, err
	}
	ids := make([]uint64, len(records))
	for i, r := range records {
		ids[i] = r.WorkerID
	}
	return ids, nil
}
