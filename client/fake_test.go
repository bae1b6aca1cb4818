package client

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/api"
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
	method, path, query, auth, index, body string
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
		auth: r.Header.Get("Authorization"), index: r.Header.Get(api.HeaderIndex), body: string(body)})
	n.mu.Unlock()
	if _, pattern := n.mux.Handler(r); pattern == "" {
		writeJSON(w, http.StatusNotFound, api.Error{Message: "no such route", Code: api.CodeNotFound})
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
	n.answer("GET "+api.PathClusterStatus, http.StatusOK, api.ClusterStatus{NodeID: id, State: state,
		Leader: api.LeaderRef{ID: leaderID, HTTPAddr: leaderHTTP}, Members: []api.Member{}})
}

// answer registers a fixed JSON answer on a route, with header pairs.
func (n *fakeNode) answer(route string, status int, body any, headers ...string) {
	n.mux.HandleFunc(route, func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		writeJSON(w, status, body)
	})
}

// answers registers a sequence of answers on a route; the last repeats.
func (n *fakeNode) answers(route string, seq ...func(w http.ResponseWriter, r *http.Request)) {
	var mu sync.Mutex
	i := 0
	n.mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := seq[min(i, len(seq)-1)]
		i++
		mu.Unlock()
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(code api.Code, msg string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, code.Status(), api.Error{Message: msg, Code: code})
	}
}

func ok(status int, body any, headers ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		writeJSON(w, status, body)
	}
}

// hangUp reads the request, then closes the connection without answering:
// the request reached the node, its answer is lost.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

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

// storedWorker is the answer to a catalog write of worker 7.
var storedWorker = api.WorkerWritten{Worker: api.Worker{WorkerID: 7, ModelName: "llama", TenantID: "default",
	Lifecycle: api.LifecycleSchedulable}, CatalogIndex: 12}
