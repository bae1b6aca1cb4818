package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
	"github.com/kvselect/kvselect/internal/testpki"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_EndToEnd drives a real single-node server through the CLI: add a
// worker, list, select, loads, cluster status, rm.
func Test_EndToEnd(t *testing.T) {
	cfg := servertest.Config("n1", t.TempDir())
	cfg.AuthToken = "s3cret"
	s := servertest.MustStart(t, cfg)
	token := tokenFile(t, "s3cret")
	ctl := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, append([]string{"--addr", s.URL(), "--token-file", token}, args...)...)
	}
	mustCtl := func(args ...string) string {
		t.Helper()
		out, errOut, code := ctl(args...)
		if code != exitOK {
			t.Fatalf("kvselectctl %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	// Nothing listens there: the listener keeps connecting, the worker is
	// schedulable all the same.
	kvEvents := "tcp://" + fakenode.DeadAddr(t)

	_, errOut, code := runCLI(t, "--addr", s.URL(), "workers", "rm", "1")
	if code != exitError || !strings.HasPrefix(errOut, "kvselectctl: unauthorized: ") || !strings.Contains(errOut, "(HTTP 401)") {
		t.Fatalf("write without a token: exit %d, stderr %q", code, errOut)
	}

	out := mustCtl("workers", "add", "--id", "1", "--model", "llama", "--endpoint", "http://w1:8000",
		"--block-size", "16", "--kv-events", kvEvents)
	m := regexp.MustCompile(`(?m)^worker 1 stored: schedulable\napplied at index (\d+) by n1\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("workers add: %q", out)
	}
	index := m[1]

	out = mustCtl("workers", "list", "--model", "llama")
	if !regexp.MustCompile(`(?m)^1\s+llama\s+default\s+http://w1:8000\s+16\s+0\s+schedulable\s+0:\w+$`).MatchString(out) {
		t.Fatalf("workers list:\n%s", out)
	}
	var listed []api.Worker
	if err := json.Unmarshal([]byte(mustCtl("workers", "list", "--linearizable", "--json")), &listed); err != nil ||
		len(listed) != 1 || listed[0].WorkerID != 1 || listed[0].Lifecycle != "schedulable" {
		t.Fatalf("workers list --linearizable --json: %+v, %v", listed, err)
	}

	tokens := "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32"
	out = mustCtl("select", "--model", "llama", "--tokens", tokens, "--min-index", index)
	if !regexp.MustCompile(`(?m)^1\s+0\s+http://w1:8000\s+0\s+0\s+0\s+32$`).MatchString(out) {
		t.Fatalf("select:\n%s", out)
	}
	out = mustCtl("select", "--model", "llama", "--tokens", tokens, "--reserve", "req-1")
	if !regexp.MustCompile(`(?m)^1\s+0\s+http://w1:8000\s+0\s+0\s+0\s+32\s+req-1$`).MatchString(out) {
		t.Fatalf("select --reserve:\n%s", out)
	}
	out = mustCtl("loads", "--model", "llama")
	if !strings.HasPrefix(out, "model llama  tenant default\n") || !regexp.MustCompile(`(?m)^1\s+0\s+32\s+\S+\s+1\s+no$`).MatchString(out) {
		t.Fatalf("loads:\n%s", out)
	}
	// Load shedding: a threshold of 0 prefill tokens makes the rank busy.
	mustCtl("thresholds", "set", "llama", "--prefill", "0")
	out = mustCtl("thresholds", "list")
	if !regexp.MustCompile(`(?m)^llama\s+-\s+0$`).MatchString(out) {
		t.Fatalf("thresholds list:\n%s", out)
	}
	if out = mustCtl("loads", "--model", "llama"); !regexp.MustCompile(`(?m)^1\s+0\s+32\s+\S+\s+1\s+yes$`).MatchString(out) {
		t.Fatalf("loads with a threshold:\n%s", out)
	}
	mustCtl("thresholds", "clear", "llama")
	// Selection policies: the bootstrap seeded the cluster default from
	// --policy; an entry for the model is set, refused, and removed.
	out = mustCtl("policies", "list")
	if !regexp.MustCompile(`(?m)^\*\s+-\s+dynamo-default\s+-\s+\d+$`).MatchString(out) ||
		!strings.HasSuffix(out, "\nnode default (--policy): dynamo-default\n") {
		t.Fatalf("policies list:\n%s", out)
	}
	out = mustCtl("policies", "set", "--model", "llama", "--policy", "two-tier", "--param", "cache_threshold=0.6", "--param", "assume_kv_reuse=false")
	if !strings.HasPrefix(out, "policy of model llama tenant default stored: two-tier(assume_kv_reuse=false,cache_threshold=0.6)\napplied at index ") {
		t.Fatalf("policies set: %q", out)
	}
	_, errOut, code = ctl("policies", "set", "--model", "llama", "--policy", "two-tier", "--param", "assume_kv_reuse=1")
	if code != exitError || !strings.HasPrefix(errOut, "kvselectctl: bad_request: parameters.assume_kv_reuse: expected true or false, got the number 1 (HTTP 400)") {
		t.Fatalf("policies set with a number for a boolean: exit %d, stderr %q", code, errOut)
	}
	if out := mustCtl("policies", "delete", "--model", "llama"); !strings.HasPrefix(out, "policy of model llama tenant default removed: two-tier(") {
		t.Fatalf("policies delete: %q", out)
	}
	if _, errOut, code = ctl("policies", "delete", "--model", "llama"); code != exitError || !strings.HasPrefix(errOut, "kvselectctl: not_found: ") {
		t.Fatalf("policies delete again: exit %d, stderr %q", code, errOut)
	}
	out = mustCtl("cluster", "status")
	if !strings.HasPrefix(out, "node n1  state leader  term ") || !regexp.MustCompile(`(?m)^n1\s+\S+\s+\S+\s+Voter\s+yes\s+\*$`).MatchString(out) {
		t.Fatalf("cluster status:\n%s", out)
	}
	// Replica sync is off on a node without --replica-sync-port: Dynamo's
	// peers list is empty, the status says off.
	if out := mustCtl("replica-sync", "status"); out != "replica sync is off on this node\n" {
		t.Fatalf("replica-sync status: %q", out)
	}
	if out := mustCtl("--json", "replica-sync", "peers"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("replica-sync peers --json: %q", out)
	}
	if out := mustCtl("dump"); !json.Valid([]byte(out)) {
		t.Fatalf("dump: %q", out)
	}
	if out := mustCtl("dump", "--json"); !json.Valid([]byte(out)) || !strings.HasPrefix(out, "{\n  \"") {
		t.Fatalf("dump --json, not indented: %q", out)
	}
	// A single node has no one to hand leadership to.
	_, errOut, code = ctl("cluster", "stepdown")
	if code != exitError || !strings.HasPrefix(errOut, "kvselectctl: conflict: ") || !strings.Contains(errOut, "no other voter") {
		t.Fatalf("stepdown of a single node: exit %d, stderr %q", code, errOut)
	}

	if out := mustCtl("workers", "rm", "1"); !strings.HasPrefix(out, "worker 1 removed\napplied at index ") {
		t.Fatalf("workers rm: %q", out)
	}
	_, errOut, code = ctl("workers", "rm", "1")
	if code != exitError || !strings.HasPrefix(errOut, "kvselectctl: not_found: ") || !strings.Contains(errOut, "(HTTP 404)") {
		t.Fatalf("rm again: exit %d, stderr %q", code, errOut)
	}
	if out := mustCtl("workers", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after rm: %q", out)
	}
}

// Test_EndToEndCluster points the CLI at the followers of a 3-node
// cluster: writes land on the leader, and after a step-down the CLI finds
// the new one by itself.
func Test_EndToEndCluster(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader, fs := c.Leader(), c.Followers()
	addr := fs[0].URL() + "," + fs[1].URL()
	mustCtl := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, append([]string{"--addr", addr}, args...)...)
		if code != exitOK {
			t.Fatalf("kvselectctl %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	out := mustCtl("workers", "add", "--id", "1", "--model", "llama", "--endpoint", "http://w1:8000",
		"--block-size", "16", "--kv-events", "tcp://"+fakenode.DeadAddr(t))
	if !strings.HasSuffix(out, " by "+leader.Node.ID()+"\n") {
		t.Fatalf("workers add via followers: %q (leader %s)", out, leader.Node.ID())
	}
	// A leased worker, renewed through the followers.
	mustCtl("workers", "add", "--id", "2", "--model", "llama", "--endpoint", "http://w2:8000",
		"--block-size", "16", "--kv-events", "tcp://"+fakenode.DeadAddr(t), "--lease-ttl", "60")
	if out := mustCtl("workers", "keepalive", "2"); !strings.Contains(out, "2       renewed  60s") {
		t.Fatalf("workers keepalive 2:\n%s", out)
	}
	out2, _, code := runCLI(t, "--addr", addr, "workers", "keepalive", "2", "1", "99")
	if code != exitError || !strings.Contains(out2, "1       conflict") || !strings.Contains(out2, "99      not_found") {
		t.Fatalf("workers keepalive 2 1 99: exit %d\n%s", code, out2)
	}
	mustCtl("workers", "rm", "2")

	out = mustCtl("cluster", "stepdown")
	next := c.WaitConverged()
	if next == leader {
		t.Fatal("leadership did not move")
	}
	// The CLI waited for a node to name the new leader before printing.
	want := fmt.Sprintf("leader before: %s\nleader after:  %s (", leader.Node.ID(), next.Node.ID())
	if !strings.HasPrefix(out, want) {
		t.Fatalf("cluster stepdown:\n%s\nwant it to start %q", out, want)
	}
	if out := mustCtl("workers", "rm", "1"); !strings.HasSuffix(out, " by "+next.Node.ID()+"\n") {
		t.Fatalf("workers rm after step-down: %q (leader %s)", out, next.Node.ID())
	}
	var st struct {
		Leader struct {
			ID string `json:"id"`
		} `json:"leader"`
		Members []json.RawMessage `json:"members"`
	}
	if err := json.Unmarshal([]byte(mustCtl("cluster", "status", "--json")), &st); err != nil ||
		st.Leader.ID != next.Node.ID() || len(st.Members) != 3 {
		t.Fatalf("cluster status --json: %+v, %v", st, err)
	}
}

// Test_EndToEndHTTPS drives a node that serves HTTPS with a CA of its own
// and two tokens: the CA and the token come from the environment
// (KVSELECT_CA_FILE, KVSELECT_TOKEN); without the CA nothing is trusted,
// and the selection token is refused an admin command with 403.
func Test_EndToEndHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ctl")
	leaf := ca.Issue(t, "n1")
	cfg := servertest.Config("n1", t.TempDir())
	cfg.TLS = &server.TLSConfig{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile}
	cfg.AuthToken, cfg.SelectionToken = "adm", "sel"
	s := servertest.MustStart(t, cfg)

	_, errOut, code := runCLI(t, "--addr", s.URL(), "--token", "adm", "cluster", "status")
	if code != exitError || !strings.Contains(errOut, "certificate signed by unknown authority") {
		t.Fatalf("without the CA: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("KVSELECT_ADDR", s.URL())
	t.Setenv("KVSELECT_CA_FILE", ca.CertFile)
	t.Setenv("KVSELECT_TOKEN", "adm")
	if out, errOut, code := runCLI(t, "cluster", "status"); code != exitOK || !strings.HasPrefix(out, "node n1  state leader") {
		t.Fatalf("cluster status over HTTPS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "--token", "sel", "dump"); code != exitError || !strings.HasPrefix(errOut, "kvselectctl: forbidden: ") ||
		!strings.Contains(errOut, "(HTTP 403)") {
		t.Fatalf("dump with the selection token: exit %d, stderr %q", code, errOut)
	}
	if out, errOut, code := runCLI(t, "--token", "sel", "loads"); code != exitOK {
		t.Fatalf("loads with the selection token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
