package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/kvsim"
)

const testTimeout = 10 * time.Second

var discard = slog.New(slog.DiscardHandler)

func Test_ParseConfig(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyToken := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyToken, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c config) {
				if c.sim.Workers != 1 || c.sim.FirstWorkerID != 1 || c.sim.BlockSize != 16 || c.sim.CacheBlocks != 4096 ||
					c.sim.Encoding != kvsim.EncodingArray || c.control != "127.0.0.1:8093" || c.traceBlockTokens != 512 ||
					c.logLevel != slog.LevelInfo || c.sim.AuthToken != "" || c.exitAfterTrace {
					t.Fatalf("defaults: %+v", c)
				}
			},
		},
		{
			name: "flags",
			args: []string{"--workers", "3", "--dp-size=2", "--encoding", "map", "--cache-blocks", "64", "--register", "http://n1:8092",
				"--trace-limit", "10", "--log-level", "debug", "--auth-token-file", tokenFile, "--replay-with-topic"},
			check: func(t *testing.T, c config) {
				if c.sim.Workers != 3 || c.sim.DPSize != 2 || c.sim.Encoding != kvsim.EncodingMap || c.sim.CacheBlocks != 64 ||
					c.register != "http://n1:8092" || c.traceLimit != 10 || c.logLevel != slog.LevelDebug ||
					c.sim.AuthToken != "s3cret" || !c.sim.ReplayWithTopic {
					t.Fatalf("flags: %+v", c)
				}
			},
		},
		{
			name: "environment, command line wins",
			args: []string{"--workers", "5"},
			env:  map[string]string{"KVSIM_WORKERS": "7", "KVSIM_FIRST_WORKER_ID": "100", "KVSIM_TRACE_BLOCK_TOKENS": "64"},
			check: func(t *testing.T, c config) {
				if c.sim.Workers != 5 || c.sim.FirstWorkerID != 100 || c.traceBlockTokens != 64 {
					t.Fatalf("env: %+v", c)
				}
			},
		},
		{name: "bad env", env: map[string]string{"KVSIM_DP_SIZE": "two"}, wantErr: "KVSIM_DP_SIZE"},
		{name: "bad encoding", args: []string{"--encoding", "json"}, wantErr: "--encoding"},
		{name: "zero workers", args: []string{"--workers", "0"}, wantErr: "--workers"},
		{name: "zero first id", args: []string{"--first-worker-id", "0"}, wantErr: "--first-worker-id"},
		{name: "negative limit", args: []string{"--trace-limit", "-1"}, wantErr: "--trace-limit"},
		{name: "negative speed", args: []string{"--trace-speed", "-1"}, wantErr: "--trace-speed"},
		{name: "exit after no trace", args: []string{"--exit-after-trace"}, wantErr: "--exit-after-trace needs --trace"},
		{
			name: "exit after trace",
			args: []string{"--trace", "t.jsonl", "--exit-after-trace"},
			check: func(t *testing.T, c config) {
				if c.trace != "t.jsonl" || !c.exitAfterTrace {
					t.Fatalf("exit after trace: %+v", c)
				}
			},
		},
		{name: "bad level", args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		{name: "bad format", args: []string{"--log-format", "xml"}, wantErr: "--log-format"},
		{name: "empty token", args: []string{"--auth-token-file", emptyToken}, wantErr: "is empty"},
		{name: "missing token", args: []string{"--auth-token-file", emptyToken + ".nope"}, wantErr: "--auth-token-file"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := parseConfig(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func Test_ParseConfigHelp(t *testing.T) {
	if _, err := parseConfig([]string{"--help"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
}

// mustStartSim starts a loopback Sim closed at the end of the test.
func mustStartSim(t *testing.T, cfg kvsim.Config) *kvsim.Sim {
	t.Helper()
	sim, err := kvsim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

func Test_ControlAPI(t *testing.T) {
	sim := mustStartSim(t, kvsim.Config{Workers: 2, DPSize: 2, BlockSize: 4})
	srv := httptest.NewServer((&controlAPI{sim: sim, log: discard}).handler())
	defer srv.Close()

	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantBody                 string // substring
	}{
		{"list workers", "GET", "/workers", "", 200, `"kv_events_endpoints":{"0":"tcp://127.0.0.1:`},
		{"prompt", "POST", "/prompt", `{"worker_id": 2, "dp_rank": 1, "token_ids": [1,2,3,4,5,6,7,8,9]}`, 200,
			`{"blocks":2,"cached_blocks":0,"stored_blocks":2,"evicted_blocks":0}`},
		{"prompt again hits", "POST", "/prompt", `{"worker_id": 2, "dp_rank": 1, "token_ids": [1,2,3,4,5,6,7,8]}`, 200,
			`"cached_blocks":2`},
		{"prompt default rank", "POST", "/prompt", `{"worker_id": 1, "token_ids": [1,2,3,4]}`, 200, `"stored_blocks":1`},
		{"reset one rank", "POST", "/reset", `{"worker_id": 2, "dp_rank": 1}`, 200, `"ok"`},
		{"reset every rank", "POST", "/reset", `{"worker_id": 1}`, 200, `"ok"`},
		{"restart", "POST", "/restart", `{"worker_id": 1, "dp_rank": 0}`, 200, `"ok"`},
		{"unknown worker", "POST", "/prompt", `{"worker_id": 9, "token_ids": []}`, 404, `unknown worker_id 9`},
		{"unknown rank", "POST", "/reset", `{"worker_id": 1, "dp_rank": 2}`, 404, `no dp rank 2`},
		{"negative rank", "POST", "/restart", `{"worker_id": 1, "dp_rank": -1}`, 400, `dp_rank`},
		{"negative prompt rank", "POST", "/prompt", `{"worker_id": 1, "dp_rank": -1, "token_ids": []}`, 404, `no dp rank -1`},
		{"missing worker", "POST", "/prompt", `{"token_ids": [1]}`, 400, `worker_id is required`},
		{"bad json", "POST", "/prompt", `{"worker_id": `, 400, `invalid JSON`},
		{"wrong type", "POST", "/prompt", `{"worker_id": "one"}`, 400, `invalid JSON`},
		{"negative token", "POST", "/prompt", `{"worker_id": 1, "token_ids": [-1]}`, 400, `invalid JSON`},
		{"unknown field", "POST", "/reset", `{"worker_id": 1, "rank": 0}`, 400, `unknown field`},
		{"trailing data", "POST", "/reset", `{"worker_id": 1} {}`, 400, `trailing data`},
		{"worker endpoint", "GET", "/workers/2", "", 200, `"worker_id":2,`},
		{"prompt at the worker endpoint", "POST", "/workers/2/prompt", `{"token_ids": [1,2,3,4,5,6,7,8]}`, 200,
			`{"blocks":2,"cached_blocks":0,"stored_blocks":2,"evicted_blocks":0}`},
		{"again at the worker endpoint", "POST", "/workers/2/prompt", `{"dp_rank": 0, "token_ids": [1,2,3,4]}`, 200,
			`"cached_blocks":1`},
		{"worker endpoint, unknown rank", "POST", "/workers/2/prompt", `{"dp_rank": 5, "token_ids": [1]}`, 404, `no dp rank 5`},
		{"worker endpoint, worker in body", "POST", "/workers/2/prompt", `{"worker_id": 1, "token_ids": [1]}`, 400, `unknown field`},
		{"unknown worker endpoint", "GET", "/workers/9", "", 404, `unknown worker_id 9`},
		{"unknown worker endpoint prompt", "POST", "/workers/9/prompt", `{"token_ids": [1]}`, 404, `unknown worker_id 9`},
		{"worker endpoint, wrong method", "GET", "/workers/2/prompt", "", 405, `not allowed`},
		{"worker endpoint, bad id", "GET", "/workers/two", "", 404, `no route`},
		{"worker endpoint, trailing slash", "GET", "/workers/2/", "", 404, `no route`},
		{"worker endpoint, unknown action", "POST", "/workers/2/reset", "{}", 404, `no route`},
		{"wrong method", "GET", "/prompt", "", 405, `not allowed`},
		{"unknown route", "GET", "/nope", "", 404, `no route /nope`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("%s %s = %d %s, want %d containing %s", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if resp.StatusCode >= 400 {
				var e struct {
					Error string `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
					t.Fatalf("error body %s is not {\"error\": ...}", body)
				}
			}
		})
	}
	w1, w2 := sim.Worker(1), sim.Worker(2)
	if w2.CachedBlocks(1) != 0 || w1.CachedBlocks(0) != 0 {
		t.Fatal("reset or restart did not empty the caches")
	}
	if _, ok := w1.LastSeq(0); ok {
		t.Fatal("restart kept rank 0's sequence")
	}
}

func Test_ResetOnSignal(t *testing.T) {
	sim := mustStartSim(t, kvsim.Config{Workers: 2, DPSize: 2, BlockSize: 2})
	for _, w := range sim.Workers() {
		for rank := range 2 {
			if _, err := w.Serve(rank, []uint32{1, 2, 3, 4}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resetOnSignal(ctx, sim, hup, discard)
	}()
	hup <- os.Interrupt // any value; main delivers SIGHUP
	hup <- os.Interrupt // the second send returns once the first reset has run
	cancel()
	<-done
	for _, w := range sim.Workers() {
		for rank := range 2 {
			last, _ := w.LastSeq(rank)
			if w.CachedBlocks(rank) != 0 || last != 2 {
				t.Fatalf("worker %d rank %d: %d blocks, last seq %d after two resets", w.ID(), rank, w.CachedBlocks(rank), last)
			}
		}
	}
}

func Test_RegisterWithRetry(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int // answers in order; the last one repeats
		wantErr   bool
		wantCalls int64
	}{
		{"first try", []int{201}, false, 1},
		{"not up yet", []int{503, 503, 201}, false, 3},
		{"rejected", []int{400}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				w.WriteHeader(tt.statuses[min(n, len(tt.statuses))-1])
				_, _ = w.Write([]byte(`{"error": "x"}`))
			}))
			defer srv.Close()
			sim := mustStartSim(t, kvsim.Config{})
			err := registerWithRetry(context.Background(), sim, srv.URL, discard)
			if (err != nil) != tt.wantErr || calls.Load() != tt.wantCalls {
				t.Fatalf("err %v after %d calls, want error=%v after %d", err, calls.Load(), tt.wantErr, tt.wantCalls)
			}
		})
	}
}

func Test_RegisterWithRetryStopsOnCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	sim := mustStartSim(t, kvsim.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := registerWithRetry(ctx, sim, srv.URL, discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// lineReader collects the lines written to a pipe.
type lineReader struct {
	lines chan string
	wg    sync.WaitGroup
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string, 256)}
	lr.wg.Add(1)
	go func() {
		defer lr.wg.Done()
		defer close(lr.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
	}()
	return lr
}

// waitFor returns the first line with the prefix.
func (lr *lineReader) waitFor(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case line, ok := <-lr.lines:
			if !ok {
				t.Fatalf("output ended before a line starting with %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line starting with %q", prefix)
		}
	}
}

// Test_Run runs the whole command in process: register with a fake
// kvselect, replay a small trace routed by its /select, use the control
// API, then shut down.
func Test_Run(t *testing.T) {
	var (
		mu         sync.Mutex
		registered []api.WorkerFields
	)
	kvselect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/workers":
			var reg api.WorkerFields
			if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			registered = append(registered, reg)
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{}`))
		case "/select":
			_, _ = w.Write([]byte(`{"worker_id": 8, "dp_rank": 1}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer kvselect.Close()

	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	line := `{"timestamp": 0, "input_length": 100, "output_length": 1, "hash_ids": [1, 2]}` + "\n"
	if err := os.WriteFile(trace, []byte(strings.Repeat(line, 4)), 0o600); err != nil {
		t.Fatal(err)
	}

	pr, pw := io.Pipe()
	out := newLineReader(pr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{
			"--workers", "2", "--first-worker-id", "7", "--dp-size", "2", "--control", "127.0.0.1:0",
			"--register", kvselect.URL, "--trace", trace, "--trace-select", kvselect.URL,
			"--trace-limit", "3", "--trace-block-tokens", "64", "--log-level", "error",
		}, pw, io.Discard, nil)
		_ = pw.Close()
	}()

	if line := out.waitFor(t, "worker 8 "); !strings.Contains(line, "kv_events=0=tcp://127.0.0.1:") {
		t.Fatalf("worker line %q", line)
	}
	ctlLine := out.waitFor(t, "control API on ")
	out.waitFor(t, "registered 2 workers")
	stats := out.waitFor(t, "trace replay: ")
	// 3 requests of 100 tokens (6 blocks of 16) on one rank: 6 + 6 hits.
	if !strings.Contains(stats, "requests=3 prompt_blocks=18 hit_blocks=12") || !strings.Contains(stats, "errors=0") {
		t.Fatalf("stats line %q", stats)
	}
	ctlURL := strings.TrimPrefix(ctlLine, "control API on ")
	if !strings.HasPrefix(ctlURL, "http://127.0.0.1:") || strings.HasSuffix(ctlURL, ":0") {
		t.Fatalf("control line %q does not give the bound port", ctlLine)
	}
	// Each worker registered the URL where the control API serves it:
	// the port --control 127.0.0.1:0 actually bound, never :0.
	mu.Lock()
	regs := slices.Clone(registered)
	mu.Unlock()
	if len(regs) != 2 || regs[1].Endpoint == nil || *regs[1].Endpoint != ctlURL+"/workers/8" {
		t.Fatalf("registrations %+v, want worker 8 at %s/workers/8", regs, ctlURL)
	}
	// A caller that got worker 8 from /select reaches it at that endpoint.
	resp, err := http.Post(*regs[1].Endpoint+"/prompt", "application/json", strings.NewReader(`{"dp_rank": 1, "token_ids": [1,2,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"blocks":0`) {
		t.Fatalf("POST %s/prompt = %d %s", *regs[1].Endpoint, resp.StatusCode, body)
	}

	resp, err = http.Get(ctlURL + "/workers")
	if err != nil {
		t.Fatal(err)
	}
	regs = nil
	err = json.NewDecoder(resp.Body).Decode(&regs)
	resp.Body.Close()
	if err != nil || len(regs) != 2 || regs[1].WorkerID == nil || *regs[1].WorkerID != 8 {
		t.Fatalf("GET /workers = %+v, %v", regs, err)
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("run did not stop")
	}
	out.wg.Wait()
}

// Test_RunExitsAfterTrace: with --exit-after-trace, run returns nil (exit
// status 0) once the replay's report is printed, without a signal.
func Test_RunExitsAfterTrace(t *testing.T) {
	pr, pw := io.Pipe()
	out := newLineReader(pr)
	errc := make(chan error, 1)
	go func() {
		errc <- run(context.Background(), []string{
			"--workers", "2", "--control", "127.0.0.1:0", "--trace", filepath.Join("testdata", "short_trace.jsonl"),
			"--trace-block-tokens", "32", "--exit-after-trace", "--log-level", "error",
		}, pw, io.Discard, nil)
		_ = pw.Close()
	}()
	// Round-robin over 2 workers, 16-token blocks: 4 blocks on worker 1,
	// the same 4 on worker 2, then the first 2 again on worker 1 (hits).
	stats := out.waitFor(t, "trace replay: ")
	if !strings.Contains(stats, "requests=3 prompt_blocks=10 hit_blocks=2 ") || !strings.Contains(stats, "errors=0") {
		t.Fatalf("stats line %q", stats)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("run kept serving after the trace with --exit-after-trace")
	}
	for line := range out.lines {
		t.Errorf("output after the report: %q", line)
	}
	out.wg.Wait()
}

func Test_ControlURL(t *testing.T) {
	tests := []struct {
		addr, advertise, want string
	}{
		{"127.0.0.1:8093", "", "http://127.0.0.1:8093"},
		{"0.0.0.0:8093", "", "http://127.0.0.1:8093"},
		{"[::]:8093", "", "http://127.0.0.1:8093"},
		{"[::1]:8093", "", "http://[::1]:8093"},
		{"0.0.0.0:8093", "sim.example", "http://sim.example:8093"},
	}
	for _, tt := range tests {
		addr, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := controlURL(addr, tt.advertise); got != tt.want {
			t.Errorf("controlURL(%s, %q) = %q, want %q", tt.addr, tt.advertise, got, tt.want)
		}
	}
}

func Test_RunFailsFast(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{}\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"bad trace", []string{"--trace", bad, "--control", ""}, "line 2"},
		{"missing trace", []string{"--trace", bad + ".nope", "--control", ""}, "--trace"},
		{"bad control address", []string{"--control", "256.0.0.1:x"}, "--control"},
		{"bad host", []string{"--host", "256.1.1.1", "--control", ""}, "bind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("run = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// Test_ControlClient: kvsim.ControlClient and this server agree on every
// path and body, and an error answer reaches the caller as ErrControl
// with kvsim's message.
func Test_ControlClient(t *testing.T) {
	sim := mustStartSim(t, kvsim.Config{Workers: 2, DPSize: 2, BlockSize: 4})
	srv := httptest.NewServer((&controlAPI{sim: sim, log: discard}).handler())
	defer srv.Close()
	ctx := context.Background()
	cc := &kvsim.ControlClient{BaseURL: srv.URL, HTTP: srv.Client()}

	regs, err := cc.Workers(ctx)
	if err != nil || len(regs) != 2 {
		t.Fatalf("Workers = %d registrations, %v", len(regs), err)
	}
	reg, err := cc.Worker(ctx, 2)
	if err != nil || reg.WorkerID == nil || *reg.WorkerID != 2 {
		t.Fatalf("Worker(2) = %+v, %v", reg, err)
	}
	res, err := cc.Prompt(ctx, 2, 1, []uint32{1, 2, 3, 4, 5, 6, 7, 8})
	if err != nil || res.StoredBlocks != 2 {
		t.Fatalf("Prompt = %+v, %v", res, err)
	}
	if err := cc.Reset(ctx, 2, 1); err != nil || sim.Worker(2).CachedBlocks(1) != 0 {
		t.Fatalf("Reset: %v, %d blocks left", err, sim.Worker(2).CachedBlocks(1))
	}
	if err := cc.Restart(ctx, 1, kvsim.AllRanks); err != nil {
		t.Fatalf("Restart every rank: %v", err)
	}
	_, err = cc.Prompt(ctx, 9, 0, []uint32{1})
	if !errors.Is(err, kvsim.ErrControl) || !strings.Contains(err.Error(), "unknown worker_id 9") {
		t.Fatalf("Prompt to an unknown worker: %v", err)
	}
	if _, err := cc.Worker(ctx, 9); !errors.Is(err, kvsim.ErrControl) {
		t.Fatalf("Worker(9): %v", err)
	}
	for path, allow := range map[string]string{kvsim.PathPrompt: "POST", "/workers/1/prompt": "POST", kvsim.PathReset: "POST"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != allow {
			t.Fatalf("GET %s = %d, Allow %q; want 405, Allow %q", path, resp.StatusCode, resp.Header.Get("Allow"), allow)
		}
	}
}
