package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeNode is a stand-in kvselect node: routes registered per test, every
// request recorded.
type fakeNode struct {
	*httptest.Server
	mux *http.ServeMux
	mu  sync.Mutex
	got []gotRequest
}

// gotRequest is what a fake node received.
type gotRequest struct {
	method, path, query, auth, contentType, body string
}

func (g gotRequest) route() string { return g.method + " " + g.path }

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	n := &fakeNode{mux: http.NewServeMux()}
	n.Server = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.Close)
	return n
}

func (n *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	n.mu.Lock()
	n.got = append(n.got, gotRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
		auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"), body: string(body)})
	n.mu.Unlock()
	if _, pattern := n.mux.Handler(r); pattern == "" {
		writeTestJSON(w, http.StatusNotFound, map[string]string{"error": "no such route", "code": "not_found"})
		return
	}
	n.mux.ServeHTTP(w, r)
}

// host is the node's host:port, as /cluster/status advertises it.
func (n *fakeNode) host() string { return strings.TrimPrefix(n.URL, "http://") }

// requests returns what the node received on one route ("POST /workers").
func (n *fakeNode) requests(route string) []gotRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []gotRequest
	for _, g := range n.got {
		if g.route() == route {
			out = append(out, g)
		}
	}
	return out
}

// status answers /cluster/status with a node state and a leader.
func (n *fakeNode) status(id, state, leaderID, leaderHTTP string) {
	n.mux.HandleFunc("GET /cluster/status", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, http.StatusOK, map[string]any{
			"node_id": id, "state": state, "term": 3,
			"leader":       map[string]string{"id": leaderID, "http_addr": leaderHTTP},
			"commit_index": 12, "applied_index": 12, "last_contact_ms": 0, "members": []any{},
		})
	})
}

// answer registers a fixed JSON answer on a route.
func (n *fakeNode) answer(route string, status int, body any, headers ...string) {
	n.mux.HandleFunc(route, func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		writeTestJSON(w, status, body)
	})
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiErr(code, msg string) map[string]string { return map[string]string{"error": msg, "code": code} }

// storedWorker is the answer to a catalog write of worker 7.
var storedWorker = map[string]any{"worker_id": 7, "model_name": "llama", "tenant_id": "default",
	"endpoint": "http://w7:8000", "block_size": 16, "data_parallel_size": 1, "lifecycle": "schedulable", "catalog_index": 12}

// deadAddr is the address of a closed listener: dialling it is refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// tokenFile writes a token file and returns its path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs the CLI in-process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}
