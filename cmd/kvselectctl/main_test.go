package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// workerBody is a registration, as the typed client encodes it.
const workerBody = `{"worker_id":7,"endpoint":"http://w7:8000","block_size":16}`

// leaderNode is a fake node that leads its cluster.
func leaderNode(t *testing.T) *fakenode.Node {
	t.Helper()
	n := fakenode.New(t)
	n.Status("n1", "leader", "n1", n.Host())
	return n
}

func Test_ExitCodes(t *testing.T) {
	n := leaderNode(t)
	n.Answer("DELETE /workers/9", http.StatusNotFound, apiErr("not_found", "worker not found: 9"))
	n.Answer("DELETE /workers/8", http.StatusServiceUnavailable, apiErr("unknown_outcome", "leader lost mid-request"))
	n.Answer("DELETE /workers/6", http.StatusUnauthorized, apiErr("unauthorized", "missing or invalid bearer token"))
	n.Answer("POST /select", http.StatusServiceUnavailable, map[string]any{
		"message": "Service temporarily unavailable: All workers are busy, please retry later",
		"type":    "service_unavailable", "code": 503})
	n.Answer("POST /select_and_reserve", http.StatusServiceUnavailable, apiErr("unknown_partition",
		`unknown partition: no worker was ever registered for model_name "lama" tenant_id "default"`))
	n.Mux.HandleFunc("GET /loads", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	})
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // the first line of stderr
		wantAlso   string // further down stderr
	}{
		{name: "not found", args: []string{"workers", "rm", "9"}, wantCode: exitError,
			wantStderr: "kvselectctl: not_found: worker not found: 9 (HTTP 404)"},
		// The last answer, or, when --timeout ends the command during a retry, the deadline and that answer.
		{name: "unknown outcome, retried until --timeout", args: []string{"--timeout", "300ms", "workers", "rm", "8"}, wantCode: exitError,
			wantStderr: "kvselectctl: ", wantAlso: "unknown_outcome: leader lost mid-request (HTTP 503)"},
		{name: "unauthorized", args: []string{"workers", "rm", "6"}, wantCode: exitError,
			wantStderr: "kvselectctl: unauthorized: missing or invalid bearer token (HTTP 401)"},
		{name: "busy body of seed 001", args: []string{"select", "--tokens", "1,2"}, wantCode: exitError,
			wantStderr: "kvselectctl: overloaded: Service temporarily unavailable: All workers are busy, please retry later (HTTP 503)"},
		{name: "misspelt model", args: []string{"select", "--model", "lama", "--tokens", "1,2", "--reserve", "r1"}, wantCode: exitError,
			wantStderr: `kvselectctl: unknown_partition: unknown partition: no worker was ever registered for model_name "lama" tenant_id "default" (HTTP 503)`,
			wantAlso:   "'kvselectctl workers list' shows the registered ones (retrying will not help)"},
		{name: "not JSON", args: []string{"loads"}, wantCode: exitError,
			wantStderr: "kvselectctl: bad_gateway: bad gateway (HTTP 502)"},
		{name: "no command", wantCode: exitUsage, wantStderr: "kvselectctl: missing command",
			wantAlso: "Run 'kvselectctl --help' for usage."},
		{name: "unknown command", args: []string{"bogus"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "bogus" for "kvselectctl"`, wantAlso: "Run 'kvselectctl --help' for usage."},
		{name: "typo'd command", args: []string{"wokers", "list"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "wokers" for "kvselectctl"`, wantAlso: "Did you mean this?\n\tworkers\n"},
		{name: "typo'd subcommand", args: []string{"workers", "lst"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "lst" for "kvselectctl workers"`, wantAlso: "\tlist\n"},
		{name: "typo'd command after a global flag", args: []string{"--json", "cluster", "stepdwn"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "stepdwn" for "kvselectctl cluster"`, wantAlso: "\tstepdown\n"},
		{name: "typo'd command before flags of the command meant", args: []string{"selct", "--model", "x"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "selct" for "kvselectctl"`, wantAlso: "Did you mean this?\n\tselect\n"},
		{name: "typo'd subcommand before its flags", args: []string{"--json", "workers", "lst", "--model", "x"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "lst" for "kvselectctl workers"`, wantAlso: "Run 'kvselectctl workers --help' for usage."},
		{name: "typo'd command after a global flag and its value", args: []string{"--timeout", "1s", "reservation", "--model", "x"},
			wantCode: exitUsage, wantStderr: `kvselectctl: unknown command "reservation" for "kvselectctl"`, wantAlso: "\treservations\n"},
		{name: "group only", args: []string{"workers"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: workers: missing subcommand (want one of: add, get, keepalive, list, patch, rm)",
			wantAlso:   "Run 'kvselectctl workers --help' for usage."},
		{name: "unknown flag", args: []string{"--nope", "loads"}, wantCode: exitUsage, wantStderr: "kvselectctl: unknown flag: --nope"},
		{name: "typo'd flag", args: []string{"workers", "list", "--modle", "llama"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: unknown flag: --modle", wantAlso: "Did you mean this?\n\t--model\n"},
		{name: "flag of another command", args: []string{"loads", "--linearizable"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: unknown flag: --linearizable", wantAlso: "Run 'kvselectctl loads --help' for usage."},
		{name: "bad flag value", args: []string{"workers", "add", "--id", "x"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: invalid argument "x" for "--id" flag`},
		{name: "help on an unknown command", args: []string{"help", "wokers"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "wokers" for "kvselectctl"`, wantAlso: "\tworkers\n"},
		{name: "unknown shell", args: []string{"completion", "tcsh"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: unknown command "tcsh" for "kvselectctl completion"`},
		{name: "no shell", args: []string{"completion"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: completion: missing subcommand (want one of: bash, fish, powershell, zsh)"},
		{name: "missing id", args: []string{"workers", "rm"}, wantCode: exitUsage, wantStderr: "kvselectctl: workers rm: wrong number of arguments",
			wantAlso: "usage: kvselectctl workers rm <id> [flags]\nRun 'kvselectctl workers rm --help' for usage."},
		{name: "extra argument", args: []string{"cluster", "status", "n1"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: cluster status: wrong number of arguments"},
		{name: "bad id", args: []string{"workers", "rm", "x"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: worker id "x" is not an unsigned 64-bit integer`},
		{name: "no prompt", args: []string{"select"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: select: give the prompt as --tokens or --json-body, one of them"},
		{name: "bad token", args: []string{"select", "--tokens", "1,a"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: --tokens: "a" is not a token id (an unsigned 32-bit integer)`},
		{name: "bad JSON", args: []string{"workers", "add", "{bad"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: "{bad" is not a JSON object`},
		{name: "JSON and flags", args: []string{"workers", "add", "{}", "--id", "1"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: give the worker as a JSON argument or as flags, not both"},
		{name: "flags without id", args: []string{"workers", "add", "--model", "m"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: --id is required in the flags form"},
		{name: "mixed kv-events", args: []string{"workers", "add", "--id", "1", "--kv-events", "0=tcp://a:1", "--kv-events", "tcp://b:1"},
			wantCode: exitUsage, wantStderr: `kvselectctl: --kv-events "tcp://b:1": with several ranks give rank=endpoint for each`},
		{name: "thresholds set without a threshold", args: []string{"thresholds", "set", "m"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: thresholds set: give --decode and/or --prefill"},
		{name: "bad timeout", args: []string{"--timeout", "0s", "loads"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: --timeout must be positive, got 0s"},
		{name: "missing token file", args: []string{"--token-file", "/nonexistent/token", "loads"}, wantCode: exitError,
			wantStderr: "kvselectctl: --token-file: invalid auth token: open /nonexistent/token: no such file or directory"},
		{name: "token and token file", args: []string{"--token-file", "/nonexistent/token", "--token", "t", "loads"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: give --token or --token-file, not both"},
		{name: "token not for a header", args: []string{"--token", "two words", "loads"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: --token: invalid auth token: byte 3"},
		{name: "missing CA file", args: []string{"--ca-file", "/nonexistent/ca.pem", "loads"}, wantCode: exitError,
			wantStderr: "kvselectctl: --ca-file: invalid CA file: open /nonexistent/ca.pem: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			first, _, _ := strings.Cut(errOut, "\n")
			if code != tt.wantCode || !strings.HasPrefix(first, tt.wantStderr) || !strings.Contains(errOut, tt.wantAlso) {
				t.Fatalf("exit %d, stderr %q; want %d, %q ... %q", code, errOut, tt.wantCode, tt.wantStderr, tt.wantAlso)
			}
			if code != exitOK && out != "" {
				t.Fatalf("stdout %q on failure", out)
			}
		})
	}
	// A delete is idempotent: the client sends it again after an unknown
	// outcome, until --timeout.
	if got := len(n.Requests("DELETE /workers/8")); got < 2 {
		t.Fatalf("unknown_outcome: %d tries, want several", got)
	}
}

func Test_Unreachable(t *testing.T) {
	_, errOut, code := runCLI(t, "--addr", fakenode.DeadAddr(t)+","+fakenode.DeadAddr(t), "cluster", "status")
	if code != exitError || !strings.Contains(errOut, "kvselectctl: no kvselect node reachable") || !strings.Contains(errOut, "refused") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func Test_Tables(t *testing.T) {
	n := fakenode.New(t)
	n.Answer("GET /cluster/status", http.StatusOK, map[string]any{
		"node_id": "n2", "state": "follower", "term": 3, "leader": map[string]string{"id": "n1", "http_addr": ""},
		"commit_index": 12, "applied_index": 11, "last_contact_ms": 40,
		"members": []map[string]any{
			{"id": "n1", "raft_addr": "127.0.0.1:7001", "http_addr": "", "suffrage": "Voter", "reachable": true},
			{"id": "n2", "raft_addr": "127.0.0.1:7002", "http_addr": "127.0.0.1:8002", "suffrage": "Voter", "reachable": true},
			{"id": "n3", "raft_addr": "127.0.0.1:7003", "http_addr": "", "suffrage": "Nonvoter", "reachable": false},
		}})
	n.Answer("GET /workers", http.StatusOK, []map[string]any{
		{"worker_id": 1, "model_name": "llama", "tenant_id": "default", "endpoint": "http://w1:8000", "block_size": 16,
			"data_parallel_start_rank": 0, "data_parallel_size": 2, "lifecycle": "schedulable",
			"listeners": map[string]any{
				"1":  map[string]any{"state": "failed", "last_error": "connection refused"},
				"0":  map[string]any{"state": "active"},
				"10": map[string]any{"state": "connecting"}}},
		{"worker_id": 2, "model_name": "llama", "tenant_id": "t1", "endpoint": "", "block_size": 0,
			"data_parallel_start_rank": 4, "data_parallel_size": 1, "lifecycle": "incomplete",
			"not_schedulable_reasons": []string{"endpoint is required", "block_size must be greater than 0"},
			"thresholds_not_checked":  []string{"active_decode_blocks_threshold not checked: total_kv_blocks is unknown"}},
		{"worker_id": 3, "model_name": "llama", "tenant_id": "default", "endpoint": "http://w3:8000", "block_size": 16,
			"data_parallel_start_rank": 0, "data_parallel_size": 1, "lifecycle": "schedulable", "schedulable_here": false,
			"listeners": map[string]any{"0": map[string]any{"state": "stale", "last_error": "connection refused"}}},
	})
	n.Answer("GET /busy_threshold", http.StatusOK, map[string]any{"thresholds": []map[string]any{
		{"model": "llama", "active_decode_blocks_threshold": 0.85, "active_prefill_tokens_threshold": nil},
		{"model": "qwen", "active_decode_blocks_threshold": nil, "active_prefill_tokens_threshold": 10000}}})
	n.Answer("POST /busy_threshold", http.StatusOK, map[string]any{
		"model": "llama", "active_decode_blocks_threshold": 0.85, "active_prefill_tokens_threshold": 10000}, api.HeaderIndex, "21")
	n.Answer("GET /loads", http.StatusOK, []map[string]any{
		{"model_name": "llama", "tenant_id": "default", "loads": []map[string]any{
			{"worker_id": 1, "dp_rank": 0, "active_prefill_tokens": 64, "active_decode_blocks": 1.5, "active_requests": 2, "busy": true},
			{"worker_id": 1, "dp_rank": 1, "active_prefill_tokens": 0, "active_decode_blocks": 0, "active_requests": 0}}},
		{"model_name": "qwen", "tenant_id": "t1", "loads": []map[string]any{
			{"worker_id": 3, "dp_rank": 0, "active_prefill_tokens": 1024, "active_decode_blocks": 12, "active_requests": 10}}},
	})
	n.Answer("POST /select_and_reserve", http.StatusOK, map[string]any{
		"reservation_id": "r-1", "model_name": "llama", "tenant_id": "default", "worker_id": 1, "dp_rank": 1,
		"endpoint": "http://w1:8000", "block_size": 16,
		"overlap":                  map[string]any{"longest_matched": 48, "gpu": 32, "dp": map[string]int{"0": 0, "1": 32}, "cpu": 48, "disk": 0},
		"effective_prefill_tokens": 28})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "cluster status", args: []string{"cluster", "status"}, want: `
node n2  state follower  term 3  leader n1  commit/applied 12/11  last contact 40ms ago
ID  RAFT            HTTP            SUFFRAGE  REACHABLE  LEADER
n1  127.0.0.1:7001  -               Voter     yes        *
n2  127.0.0.1:7002  127.0.0.1:8002  Voter     yes
n3  127.0.0.1:7003  -               Nonvoter  no
`},
		{name: "workers list", args: []string{"workers", "list"}, want: `
WORKER  MODEL  TENANT   ENDPOINT        BLOCK  DP_RANKS  LIFECYCLE                 LISTENERS
1       llama  default  http://w1:8000  16     0-1       schedulable               0:active 1:failed 10:connecting
2       llama  t1       -               0      4         incomplete                -
3       llama  default  http://w3:8000  16     0         schedulable (stale here)  0:stale

worker 1 rank 1 listener failed: connection refused
worker 2 incomplete: endpoint is required; block_size must be greater than 0
worker 2: active_decode_blocks_threshold not checked: total_kv_blocks is unknown
worker 3 rank 0 listener stale: connection refused
`},
		{name: "thresholds list", args: []string{"thresholds", "list"}, want: `
MODEL  DECODE_BLOCKS  PREFILL_TOKENS
llama  0.85           -
qwen   -              10000
`},
		{name: "thresholds set", args: []string{"thresholds", "set", "llama", "--prefill", "10000"}, want: `
MODEL  DECODE_BLOCKS  PREFILL_TOKENS
llama  0.85           10000
applied at index 21
`},
		{name: "loads", args: []string{"loads"}, want: `
model llama  tenant default
WORKER  RANK  PREFILL_TOKENS  DECODE_BLOCKS  REQUESTS  BUSY
1       0     64              1.5            2         yes
1       1     0               0              0         no

model qwen  tenant t1
WORKER  RANK  PREFILL_TOKENS  DECODE_BLOCKS  REQUESTS  BUSY
3       0     1024            12             10        no
`},
		{name: "select and reserve", args: []string{"select", "--tokens", "1,2,3", "--reserve", "r-1"}, want: `
WORKER  DP_RANK  ENDPOINT        OVERLAP_GPU  OVERLAP_CPU  OVERLAP_DISK  EFFECTIVE_PREFILL_TOKENS  RESERVATION
1       1        http://w1:8000  32           48           0             28                        r-1
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if want := strings.TrimPrefix(tt.want, "\n"); code != exitOK || out != want {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, want)
			}
		})
	}
}

func Test_JSONOutput(t *testing.T) {
	n := leaderNode(t)
	n.Answer("GET /workers", http.StatusOK, []map[string]any{{"worker_id": 1, "lifecycle": "schedulable"}})
	n.Answer("POST /workers", http.StatusCreated, map[string]any{"worker_id": 7, "catalog_index": 12}, api.HeaderIndex, "12")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "global flag first", args: []string{"--json", "workers", "list"}, want: `[
  {
    "lifecycle": "schedulable",
    "worker_id": 1
  }
]
`},
		{name: "flag after the command", args: []string{"workers", "list", "--json"}, want: `[
  {
    "lifecycle": "schedulable",
    "worker_id": 1
  }
]
`},
		{name: "one dash, as Go's flag package took it", args: []string{"-json", "workers", "list", "-model=m"}, want: `[
  {
    "lifecycle": "schedulable",
    "worker_id": 1
  }
]
`},
		{name: "write", args: []string{"workers", "add", "--json", `{"worker_id":7}`}, want: `{
  "catalog_index": 12,
  "worker_id": 7
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if code != exitOK || out != tt.want {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, tt.want)
			}
		})
	}
}

// Test_RequestBodies checks what the flag forms send.
func Test_RequestBodies(t *testing.T) {
	workerFile := filepath.Join(t.TempDir(), "worker.json")
	if err := os.WriteFile(workerFile, []byte("\n"+workerBody+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		wantRoute string
		wantQuery string
		wantBody  string
	}{
		{name: "add, flags, ranks", args: []string{"workers", "add", "--id", "3", "--model", "llama", "--endpoint", "http://w3",
			"--block-size", "16", "--dp-size", "2", "--dp-start", "0", "--kv-events", "0=tcp://h:1", "--kv-events", "1=tcp://h:2", "--replay", "tcp://h:9"},
			wantRoute: "POST /workers",
			wantBody: `{"worker_id":3,"model_name":"llama","endpoint":"http://w3","block_size":16,"data_parallel_start_rank":0,` +
				`"data_parallel_size":2,"kv_events_endpoints":{"0":"tcp://h:1","1":"tcp://h:2"},"replay_endpoint":"tcp://h:9"}`},
		{name: "add, flags, one endpoint", args: []string{"workers", "add", "--id", "4", "--kv-events", "tcp://h:1", "--tenant", "t"},
			wantRoute: "POST /workers", wantBody: `{"worker_id":4,"tenant_id":"t","kv_events_endpoint":"tcp://h:1"}`},
		{name: "add, @file", args: []string{"workers", "add", "@" + workerFile}, wantRoute: "POST /workers", wantBody: workerBody},
		{name: "patch, flags after the id", args: []string{"workers", "patch", "4", "--endpoint", "http://x", "--total-kv-blocks", "100"},
			wantRoute: "PATCH /workers/4", wantBody: `{"endpoint":"http://x","total_kv_blocks":100}`},
		{name: "patch, JSON", args: []string{"workers", "patch", "4", `{"block_size": 32}`},
			wantRoute: "PATCH /workers/4", wantBody: `{"block_size":32}`},
		{name: "rm", args: []string{"workers", "rm", "0004"}, wantRoute: "DELETE /workers/4"},
		{name: "select, tokens", args: []string{"select", "--model", "llama", "--tokens", "1, 2,3"},
			wantRoute: "POST /select", wantBody: `{"model_name":"llama","token_ids":[1,2,3]}`},
		{name: "select, JSON body keeps hashes exact (signed read as unsigned), flags override",
			args: []string{"select", "--tenant", "t", "--min-index", "5", "--selection-id", "s-1", "--json-body",
				`{"block_hashes":[-1,18446744073709551615],"sequence_hashes":[1,2],"isl_tokens":32,"tenant_id":"x"}`},
			wantRoute: "POST /select",
			wantBody: `{"tenant_id":"t","block_hashes":[18446744073709551615,18446744073709551615],"sequence_hashes":[1,2],` +
				`"isl_tokens":32,"min_catalog_index":5,"selection_id":"s-1"}`},
		{name: "select and reserve, node picks the id", args: []string{"select", "--tokens", "7", "--reserve", ""},
			wantRoute: "POST /select_and_reserve", wantBody: `{"token_ids":[7]}`},
		{name: "cluster join", args: []string{"cluster", "join", "n2", "127.0.0.1:7002", "127.0.0.1:8002"},
			wantRoute: "POST /cluster/join", wantBody: `{"id":"n2","raft_addr":"127.0.0.1:7002","http_addr":"127.0.0.1:8002"}`},
		{name: "reservations list", args: []string{"reservations", "list", "--worker", "0", "--limit", "5"},
			wantRoute: "GET /reservations", wantQuery: "limit=5&worker_id=0"},
		{name: "reservations show", args: []string{"reservations", "show", "req-1"}, wantRoute: "GET /reservations/req-1"},
		{name: "cluster remove", args: []string{"cluster", "remove", "n2"}, wantRoute: "POST /cluster/remove", wantBody: `{"id":"n2"}`},
		{name: "cluster stepdown", args: []string{"cluster", "stepdown"}, wantRoute: "POST /cluster/stepdown"},
		{name: "loads, filters", args: []string{"loads", "--model", "llama", "--tenant", "a b"},
			wantRoute: "GET /loads", wantQuery: "model_name=llama&tenant_id=a+b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := leaderNode(t)
			n.Mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
				fakenode.WriteJSON(w, http.StatusOK, map[string]any{})
			})
			n.Answer("GET /loads", http.StatusOK, []any{})
			out, errOut, code := runCLI(t, append([]string{"--json", "--addr", n.URL}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			got := n.Requests(tt.wantRoute)
			if len(got) != 1 || got[0].Body != tt.wantBody || got[0].Query != tt.wantQuery {
				t.Fatalf("%s got %+v;\nwant body %s query %q", tt.wantRoute, got, tt.wantBody, tt.wantQuery)
			}
		})
	}
}

func Test_Environment(t *testing.T) {
	n := leaderNode(t)
	n.Answer("GET /workers", http.StatusOK, []any{})
	n.Answer("DELETE /workers/1", http.StatusOK, map[string]any{"worker_id": 1})
	t.Setenv("KVSELECT_ADDR", n.Host())
	t.Setenv("KVSELECT_TOKEN_FILE", tokenFile(t, "from-env"))
	t.Setenv("KVSELECT_JSON", "true")

	out, errOut, code := runCLI(t, "workers", "list")
	if code != exitOK || out != "[]\n" {
		t.Fatalf("env: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, _, code := runCLI(t, "workers", "rm", "1"); code != exitOK || n.Requests("DELETE /workers/1")[0].Auth != "Bearer from-env" {
		t.Fatalf("env token: exit %d, %+v", code, n.Requests("DELETE /workers/1"))
	}
	// The command line wins over the environment.
	if _, errOut, code := runCLI(t, "--addr", fakenode.DeadAddr(t), "workers", "list"); code != exitError {
		t.Fatalf("command line: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("KVSELECT_TIMEOUT", "soon")
	if _, errOut, code := runCLI(t, "workers", "list"); code != exitUsage || !strings.Contains(errOut, "KVSELECT_TIMEOUT") {
		t.Fatalf("bad env: exit %d, stderr %q", code, errOut)
	}
}

// Test_Dump: the dump as the server sends it (compact, what a node
// loads), or indented with --json, to stdout or to --out.
func Test_Dump(t *testing.T) {
	n := leaderNode(t)
	const dump = `{"llama:default":{"model_name":"llama","block_size":16,"events":[],"watermarks":[]}}` + "\n"
	const indented = `{
  "llama:default": {
    "model_name": "llama",
    "block_size": 16,
    "events": [],
    "watermarks": []
  }
}
`
	n.Mux.HandleFunc("GET /dump", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(dump)) })
	dir := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		want     string // stdout
		file     string // --out
		wantFile string
	}{
		{name: "as sent", args: []string{"dump"}, want: dump},
		{name: "--json indents", args: []string{"dump", "--json"}, want: indented},
		{name: "--out", args: []string{"dump", "--out", filepath.Join(dir, "a.json")}, file: filepath.Join(dir, "a.json"),
			want: fmt.Sprintf("wrote %d bytes to %s\n", len(dump), filepath.Join(dir, "a.json")), wantFile: dump},
		{name: "--out --json: the file indented, stdout quiet", args: []string{"--json", "dump", "--out", filepath.Join(dir, "b.json")},
			file: filepath.Join(dir, "b.json"), wantFile: indented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if code != exitOK || out != tt.want {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, tt.want)
			}
			if tt.file == "" {
				return
			}
			if data, err := os.ReadFile(tt.file); err != nil || string(data) != tt.wantFile {
				t.Fatalf("file %q, %v; want %q", data, err, tt.wantFile)
			}
		})
	}
}

func Test_WriteOutput(t *testing.T) {
	n := leaderNode(t)
	n.Answer("POST /workers", http.StatusCreated, map[string]any{"worker_id": 5, "lifecycle": "incomplete",
		"not_schedulable_reasons": []string{"endpoint is required"}, "catalog_index": 30})
	n.Answer("DELETE /workers/5", http.StatusOK, map[string]any{"worker_id": 5, "catalog_index": 31},
		api.HeaderIndex, "31", api.HeaderServedBy, "n1")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "index from the body", args: []string{"workers", "add", `{"worker_id":5}`},
			want: "worker 5 stored: incomplete (endpoint is required)\napplied at index 30\n"},
		{name: "index and node from the headers", args: []string{"workers", "rm", "5"},
			want: "worker 5 removed\napplied at index 31 by n1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if code != exitOK || out != tt.want {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, tt.want)
			}
		})
	}
}
