package scripts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/childproc"
)

// demoTimeout bounds each wait on the demo: startup, an election, a stop.
const demoTimeout = 60 * time.Second

func Test_RunDemoSyntax(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "run-demo.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n run-demo.sh: %v\n%s", err, out)
	}
}

// Test_RunDemoRefusesASecondStart: while a demo of the checkout runs (its
// run/demo.pids names a live process: this test's, standing for the
// script), a second start, on other ports too, refuses in one line that
// says what runs and how to stop it, and leaves ./run as it was (a start
// wipes the nodes' data and makes new tokens). A pid that is gone is not
// listed.
func Test_RunDemoRefusesASecondStart(t *testing.T) {
	requireDemoTools(t)
	script, err := filepath.Abs("run-demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	running := map[string]string{
		"run/demo.pids":   fmt.Sprintf("%d run-demo.sh\n999999999 n1 http://127.0.0.1:1\n", os.Getpid()),
		"run/n1/raft.db":  "the running node's Raft log",
		"run/admin-token": "the running demo's token",
	}
	for name, content := range running {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port, raftPort, simPort := freeBases(t)
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	cmd.Env = append(childproc.Env(), "PORT="+strconv.Itoa(port), "RAFT_PORT="+strconv.Itoa(raftPort),
		"SIM_PORT="+strconv.Itoa(simPort), "BIN="+t.TempDir()) // no binaries: nothing could start
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second start: %v, want exit status 1\n%s", err, out)
	}
	pid := strconv.Itoa(os.Getpid())
	want := "make run: the demo of this checkout is still running (run-demo.sh pid " + pid + "); " +
		"stop it first with Ctrl-C where it runs, or kill " + pid + "; nothing was changed"
	if lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Fatalf("second start said:\n%s\nwant one line starting\n%s", out, want)
	}
	for name, content := range running {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != content {
			t.Errorf("%s changed: %q, %v", name, got, err)
		}
	}
}

// Test_RunDemoSurvivesANodeStop runs make run's script with free ports,
// stops n1 the way its instructions say (kill <pid>; n1 is the node the
// demo once waited on, and usually its leader), and checks that the demo
// keeps running while the other two have a leader and select; then that
// SIGTERM stops the script and everything it started.
func Test_RunDemoSurvivesANodeStop(t *testing.T) {
	requireDemoTools(t)
	bin := buildCommands(t)
	d := startDemo(t, bin)

	// The script prints each node's pid and URL, the leader marked.
	nodes := map[string]demoNode{}
	nodeLine := regexp.MustCompile(`^   (n[123]|kvsim)  pid (\d+)  (http://\S+)(  \(leader\))?$`)
	var leader string
	for len(nodes) < 4 {
		m := nodeLine.FindStringSubmatch(d.waitFor(t, nodeLine.MatchString))
		pid, _ := strconv.Atoi(m[2])
		nodes[m[1]] = demoNode{pid: pid, url: m[3]}
		if m[4] != "" {
			leader = m[1]
		}
	}
	d.waitFor(t, func(l string) bool { return l == "Ctrl-C stops everything." })
	if leader == "" {
		t.Fatal("the demo marked no node as the leader")
	}

	const victim = "n1"
	if err := syscall.Kill(nodes[victim].pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, func(l string) bool {
		return strings.HasPrefix(l, fmt.Sprintf("== %s (pid %d) has stopped", victim, nodes[victim].pid))
	})

	// The two others have a leader among themselves (a new one if n1 led)
	// and still select.
	survivor := nodes["n2"].url
	deadline := time.Now().Add(demoTimeout)
	for {
		var st struct {
			Leader struct {
				ID string `json:"id"`
			} `json:"leader"`
		}
		if err := getJSON(survivor+"/cluster/status", d.token(t), &st); err == nil && st.Leader.ID != "" && st.Leader.ID != victim {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reported a leader other than %s after %s (leader %s) stopped", survivor, victim, victim, leader)
		}
		d.mustBeRunning(t)
		time.Sleep(50 * time.Millisecond)
	}
	prompt := `{"model_name": "llama", "token_ids": [` + strings.Repeat("7,", 31) + `7]}`
	req, err := http.NewRequest("POST", survivor+"/select", strings.NewReader(prompt))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+d.token(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"endpoint":"`+nodes["kvsim"].url+"/workers/")) {
		t.Fatalf("select on %s = %d %s, want a worker at kvsim's %s/workers/{id}", survivor, resp.StatusCode, body, nodes["kvsim"].url)
	}
	d.mustBeRunning(t)

	// SIGTERM (what Ctrl-C does, for the script alone) stops the script
	// and, through its trap, the surviving nodes and kvsim.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(demoTimeout):
		t.Fatal("the demo did not stop on SIGTERM")
	}
	for id, n := range nodes {
		if id == victim {
			continue
		}
		if err := syscall.Kill(n.pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after the demo stopped: kill -0 = %v", id, n.pid, err)
		}
	}
}

type demoNode struct {
	pid int
	url string
}

// requireDemoTools fails (under make test, which installs them) or skips
// the test when the demo's curl or python3 is missing.
func requireDemoTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("run-demo.sh needs %s (make tools installs it)", tool)
			if os.Getenv("KVSELECT_REQUIRE_DEMO") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// buildCommands builds kvselect, kvselectctl and kvsim into a temporary
// directory: the script runs them from $BIN.
func buildCommands(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin+string(filepath.Separator),
		"./cmd/kvselect", "./cmd/kvselectctl", "./cmd/kvsim")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// demo is one run of run-demo.sh in its own process group.
type demo struct {
	cmd     *exec.Cmd
	lines   chan string   // stdout, line by line; closed at EOF
	done    chan struct{} // closed once the script has exited
	waitErr error         // set before done is closed
	logPath string        // stderr: the nodes' and kvsim's logs
	seen    []string      // stdout lines read so far, for failure messages
	dir     string        // where the script runs: its tokens are in run/
}

// token is the selection token the demo made for its nodes: a caller
// needs it (the nodes guard every route but the probes').
func (d *demo) token(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.dir, "run", "selection-token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// portRange is where the test looks for free base ports: below Linux's
// ephemeral range, so no outgoing connection takes one meanwhile.
const portLow, portHigh = 20000, 30000

// startDemo starts the script on ports that are free, trying other ones
// if one was taken meanwhile.
func startDemo(t *testing.T, bin string) *demo {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port, raftPort, simPort := freeBases(t)
		d := launchDemo(t, bin, port, raftPort, simPort)
		line, ok := d.next(demoTimeout)
		if ok {
			d.seen = append(d.seen, line)
			return d
		}
		<-d.done
		logs, _ := os.ReadFile(d.logPath)
		// Another process may take a port between freeBases and the
		// script's check (or a node's bind): try other ones.
		if attempt < 3 && (bytes.Contains(logs, []byte("is in use")) || bytes.Contains(logs, []byte("address already in use"))) {
			continue
		}
		t.Fatalf("run-demo.sh printed nothing and exited: %v\n%s", d.waitErr, logs)
	}
}

// freeBases picks PORT, RAFT_PORT and SIM_PORT such that every port the
// script derives from them is free now.
func freeBases(t *testing.T) (port, raftPort, simPort int) {
	t.Helper()
	for range 100 {
		port = portLow + rand.IntN(portHigh-portLow-300)
		raftPort = portLow + rand.IntN(portHigh-portLow-300)
		simPort = portLow + rand.IntN(portHigh-portLow)
		ports := []int{simPort}
		for i := range 3 {
			ports = append(ports, port+100*i, raftPort+100*i, raftPort+1+100*i)
		}
		if allFree(ports) {
			return port, raftPort, simPort
		}
	}
	t.Fatal("found no free ports for the demo")
	return 0, 0, 0
}

// allFree reports whether every port is distinct and can be bound on
// loopback.
func allFree(ports []int) bool {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		lns = append(lns, ln)
	}
	return true
}

func launchDemo(t *testing.T, bin string, port, raftPort, simPort int) *demo {
	t.Helper()
	script, err := filepath.Abs("run-demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // the script keeps the nodes' data in ./run
	d := &demo{lines: make(chan string, 1024), done: make(chan struct{}), logPath: filepath.Join(dir, "demo.log"), dir: dir}
	logFile, err := os.Create(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command("bash", script)
	d.cmd.Dir = dir
	d.cmd.Env = append(childproc.Env(), "PORT="+strconv.Itoa(port), "RAFT_PORT="+strconv.Itoa(raftPort),
		"SIM_PORT="+strconv.Itoa(simPort), "BIN="+bin)
	d.cmd.Stderr = logFile
	// Its own process group, so that the cleanup can reach every process
	// the script started, whatever happens to the script.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := d.cmd.Process.Pid
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(d.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		d.waitErr = d.cmd.Wait()
		logFile.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // whatever is left of the group
		<-d.done
		if t.Failed() {
			logs, _ := os.ReadFile(d.logPath)
			t.Logf("demo stdout:\n%s\ndemo stderr (last 4 KiB):\n%s", strings.Join(d.seen, "\n"), tail(logs, 4096))
		}
	})
	return d
}

// next returns the next stdout line, or false at EOF or after timeout.
func (d *demo) next(timeout time.Duration) (string, bool) {
	select {
	case line, ok := <-d.lines:
		return line, ok
	case <-time.After(timeout):
		return "", false
	}
}

// waitFor returns the first stdout line that matches.
func (d *demo) waitFor(t *testing.T, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(demoTimeout)
	for {
		line, ok := d.next(time.Until(deadline))
		if !ok {
			t.Fatalf("the demo's output ended or stalled before the line waited for")
		}
		d.seen = append(d.seen, line)
		if match(line) {
			return line
		}
	}
}

// mustBeRunning fails the test if the script has exited.
func (d *demo) mustBeRunning(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
		t.Fatalf("the demo exited: %v", d.waitErr)
	default:
	}
}

func getJSON(url, token string, v any) error {
	c := http.Client{Timeout: 2 * time.Second}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
