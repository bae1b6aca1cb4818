package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/server/proccluster"
)

// binDir holds kvselect and kvsim, built once by TestMain from this
// checkout, so the tests need nothing built beforehand.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kvselect-jepsen-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// Built in the server's module (the parent directory), whose go.sum
	// covers the binaries' dependencies.
	build := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "./cmd/kvselect", "./cmd/kvsim")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kvselect and kvsim: %v\n%s", err, out)
		return 1
	}
	binDir = dir
	return m.Run()
}

// mustStartCluster starts a cluster in a temporary run dir and makes sure
// it is closed, with no process left, when the test ends; on failure it
// prints the end of every log.
func mustStartCluster(t *testing.T, ctx context.Context, cfg Config) *Cluster {
	t.Helper()
	cfg.Bin = binDir
	cfg.Dir = t.TempDir()
	if keep := os.Getenv("JEPSEN_KEEP"); keep != "" { // keep the run dir for a post-mortem
		cfg.Dir = filepath.Join(keep, t.Name())
		os.RemoveAll(cfg.Dir)
	}
	c, err := StartCluster(ctx, cfg)
	if err != nil {
		dumpLogs(t, cfg.Dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, cfg.Dir)
		}
	})
	t.Cleanup(func() {
		pids := c.pids()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d still exists after Close (kill -0: %v)", pid, err)
			}
		}
	})
	return c
}

// pids are the running children (nodes and kvsim).
func (c *Cluster) pids() []int {
	var out []int
	for _, n := range c.Nodes() {
		if pid, ok := n.Proc.Running(); ok {
			out = append(out, pid)
		}
	}
	if c.sim != nil {
		if pid, ok := c.sim.Proc.Running(); ok {
			out = append(out, pid)
		}
	}
	return out
}

func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range logs {
		t.Logf("== %s (last 30 lines)\n%s", filepath.Base(p), proccluster.Tail(p, 30, ""))
	}
}

func Test_ClusterLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := mustStartCluster(t, ctx, Config{Workers: 2})

	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s", NodeID(leader))

	// Every inter-node connection runs through the links: the leader's
	// Raft RPCs to each follower, and each node's replica-sync
	// subscription to each other node.
	if err := poll.Until(ctx, pollEvery, "raft and replica sync flow through the links", func(context.Context) error {
		for i := range c.Size() {
			for j := range c.Size() {
				if i == j {
					continue
				}
				ls := c.Links(i, j)
				if len(ls) != 3 || ls[0].Kind != KindRaft || ls[1].Kind != KindHTTP || ls[2].Kind != KindSync {
					return poll.Fatal(fmt.Errorf("links %d->%d: %v", i, j, ls))
				}
				if i == leader && ls[0].Conns() == 0 {
					return fmt.Errorf("no raft connection on %s", ls[0].Name)
				}
				if ls[2].Conns() == 0 {
					return fmt.Errorf("no replica-sync connection on %s", ls[2].Name)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A write through a follower is forwarded over its HTTP link.
	follower := others(c, leader)[0]
	fcl, err := client.New(client.Config{Addrs: []string{c.URL(follower)}, Pinned: true, Token: c.Token()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fcl.RegisterWorker(ctx, api.WorkerSpec{WorkerID: 77, ModelName: "lifecycle"}); err != nil {
		t.Fatalf("write through follower %s: %v", NodeID(follower), err)
	}
	// Every route but the open ones needs the token (--auth-scope all).
	anon, err := client.New(client.Config{Addrs: []string{c.URL(follower)}, Pinned: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Loads(ctx, "", ""); client.CodeOf(err) != "unauthorized" {
		t.Fatalf("GET /loads without the token: %v, want unauthorized", err)
	}
	if _, err := anon.Health(ctx); err != nil {
		t.Fatalf("GET /health without the token: %v", err)
	}

	// Kill the leader: the others elect one of themselves.
	c.Kill(leader)
	if slices.Contains(c.Live(), leader) {
		t.Fatalf("%s still live after Kill", NodeID(leader))
	}
	next, err := c.WaitLeader(ctx, others(c, leader))
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("killed %s is still the leader", NodeID(leader))
	}
	t.Logf("after killing %s, %s leads", NodeID(leader), NodeID(next))
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if live := c.Live(); len(live) != c.Size() {
		t.Fatalf("live %v after restart", live)
	}

	// A graceful stop and restart of a follower, and a pause: a paused
	// node runs but is not live.
	f := others(c, next)[0]
	c.Stop(f)
	if c.Running(f) {
		t.Fatalf("%s runs after Stop", NodeID(f))
	}
	if err := c.Restart(f); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(f); err != nil {
		t.Fatal(err)
	}
	if !c.Running(f) || !c.Paused(f) || slices.Contains(c.Live(), f) {
		t.Fatalf("paused %s: running %v paused %v live %v", NodeID(f), c.Running(f), c.Paused(f), c.Live())
	}
	if err := c.Resume(f); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	// Isolate the leader through its links: the majority elects another.
	n, ok := NemesisByName("partition-isolate-leader")
	if !ok {
		t.Fatal("no partition-isolate-leader nemesis")
	}
	isolated, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Inject(ctx, c); err != nil {
		t.Fatal(err)
	}
	majorityLeader, err := c.WaitLeader(ctx, others(c, isolated))
	if err != nil {
		t.Fatal(err)
	}
	if majorityLeader == isolated {
		t.Fatalf("isolated %s still leads the majority", NodeID(isolated))
	}
	if err := n.Heal(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, l := range c.AllLinks() {
		if !l.Fault().Passes() {
			t.Fatalf("%s is %v after Heal", l.Name, l.Fault())
		}
	}
	ev := c.Events()
	if len(ev) != 2 || ev[0].Phase != PhaseInject || ev[1].Phase != PhaseHeal || ev[0].Nemesis != n.Name() || ev[1].Time < ev[0].Time {
		t.Fatalf("events %+v", ev)
	}
	t.Logf("events %+v", ev)
}

// Test_WorkerLinkCut checks that a node's KV event and replay connections
// run through its worker links: with them cut, the node misses a prompt's
// blocks that the others index; once they pass, replay brings them.
func Test_WorkerLinkCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := mustStartCluster(t, ctx, Config{Workers: 1})
	for i := range c.Size() {
		ls := c.WorkerLinks(i)
		if len(ls) != 2 || ls[0].Kind != KindKV || ls[1].Kind != KindReplay {
			t.Fatalf("%s worker links %v, want kv and replay", NodeID(i), ls)
		}
		if ls[0].Conns() == 0 {
			t.Fatalf("no KV event connection on %s", ls[0].Name)
		}
	}
	prompt := api.Prompt{ModelName: c.Config().Model, TokenIDs: make(api.TokenIDs, 64)}
	for j := range prompt.TokenIDs {
		prompt.TokenIDs[j] = uint32(500 + j)
	}
	held := func(i int) (uint32, error) {
		s, err := c.Node(i).Client.OverlapScores(ctx, prompt)
		if err != nil {
			return 0, err
		}
		for _, r := range s.Workers {
			if r.WorkerID == 1 {
				return r.DeviceBlocks, nil
			}
		}
		return 0, fmt.Errorf("%s has no row for worker 1", NodeID(i))
	}
	const cut = 0
	c.CutWorkers(cut, true)
	if _, err := c.Sim().Prompt(ctx, 1, 0, prompt.TokenIDs); err != nil {
		t.Fatal(err)
	}
	if err := poll.Until(ctx, pollEvery, "the nodes with their links index the prompt", func(context.Context) error {
		for _, i := range others(c, cut) {
			if n, err := held(i); err != nil || n != 4 {
				return fmt.Errorf("%s holds %d blocks (%v)", NodeID(i), n, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := held(cut); err != nil || n != 0 {
		t.Fatalf("%s, cut off from the worker, holds %d blocks (%v)", NodeID(cut), n, err)
	}
	c.CutWorkers(cut, false)
	if err := poll.Until(ctx, pollEvery, "the node cut off catches up", func(context.Context) error {
		if n, err := held(cut); err != nil || n != 4 {
			return fmt.Errorf("%s holds %d blocks (%v)", NodeID(cut), n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Test_NodeArgs: the nodes run with the settings the checkers rely on:
// the trailing logs snapshot-catch-up reads, an expiry far past the run,
// and the token on every route.
// Test_NodeArgs: the options the harness gives every node become the
// flags the snapshot nemesis and the checks rely on, and kvselect accepts
// them.
func Test_NodeArgs(t *testing.T) {
	cfg := Config{Bin: "bin", Dir: t.TempDir()}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	if cfg.TrailingLogs != DefaultTrailingLogs || cfg.ActiveRequestExpiry != LoadExpiry || len(cfg.Token) != 64 {
		t.Fatalf("defaults %+v", cfg)
	}
	path, err := proccluster.WriteTokenFile(cfg.Dir, cfg.Token)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(path) != TokenFile {
		t.Fatalf("token file %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != cfg.Token {
		t.Fatalf("token file holds %q", b)
	}
	o := proccluster.NodeOptions{ID: "n1", AuthTokenFile: path}
	nodeOptions(cfg)(0, &o)
	args, err := o.CheckedArgs()
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ") + " "
	for _, want := range []string{"--raft-trailing-logs 64 ", "--active-request-expiry-secs 3600 ",
		"--auth-token-file " + path + " ", "--auth-scope all "} {
		if !strings.Contains(joined, want) {
			t.Errorf("node args lack %q: %s", want, joined)
		}
	}
	// The snapshot nemesis reads the trailing logs back from a node's
	// options, where ExtraArgs may override the harness's value.
	for _, tt := range []struct {
		extra []string
		want  uint64
	}{{nil, DefaultTrailingLogs}, {[]string{"--raft-trailing-logs", "16"}, 16}} {
		o := proccluster.NodeOptions{ID: "n1"}
		c := cfg
		c.ExtraArgs = tt.extra
		nodeOptions(c)(0, &o)
		eff, err := o.Effective()
		if err != nil || eff.Cluster.TrailingLogs != tt.want {
			t.Errorf("ExtraArgs %q: trailing logs %d, %v; want %d", tt.extra, eff.Cluster.TrailingLogs, err, tt.want)
		}
	}
	if LoadExpiry < 10*time.Minute {
		t.Errorf("expiry %v is not far longer than a run", LoadExpiry)
	}
}

// Test_ClearDataDirs: a run in a directory an earlier run used must not
// start from that run's Raft data or append to its logs, and must leave
// everything else alone.
func Test_ClearDataDirs(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"n1/raft.db", "n3/snapshots/1-2-3/meta.json", "n4/keep", "history.jsonl", "n2.log", "kvsim.log"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := clearDataDirs(dir, 3); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"n1": false, "n2": false, "n3": false, "n2.log": false, "kvsim.log": false,
		"n4/keep": true, "history.jsonl": true} {
		_, err := os.Stat(filepath.Join(dir, p))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", p, got, want)
		}
	}
}
