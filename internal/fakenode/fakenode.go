package fakenode

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/api"
)

// Node is a fake node on a loopback test server, closed with the test.
// Mux takes the routes ("POST /workers"); a request to an unknown route is
// answered 404 not_found.
type Node struct {
	*httptest.Server
	Mux *http.ServeMux

	mu  sync.Mutex
	got []Request
}

// Request is what the node received.
type Request struct {
	Method, Path, Query string
	Auth, ContentType   string
	Index               string // X-Kvselect-Index
	Body                string
}

// Route is the request's "METHOD /path".
func (g Request) Route() string { return g.Method + " " + g.Path }

// New starts a fake node.
func New(t testing.TB) *Node {
	t.Helper()
	n := &Node{Mux: http.NewServeMux()}
	n.Server = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.Close)
	return n
}

func (n *Node) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	n.mu.Lock()
	n.got = append(n.got, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Auth: r.Header.Get(api.HeaderAuthorization), ContentType: r.Header.Get("Content-Type"),
		Index: r.Header.Get(api.HeaderIndex), Body: string(body)})
	n.mu.Unlock()
	if _, pattern := n.Mux.Handler(r); pattern == "" {
		WriteJSON(w, http.StatusNotFound, api.Error{Message: "no such route", Code: api.CodeNotFound})
		return
	}
	n.Mux.ServeHTTP(w, r)
}

// NewTLS starts a fake node that serves HTTPS with httptest's
// certificate for 127.0.0.1 (Certificate; it signs itself, so its PEM
// serves as a CA file). Failed handshakes (a client without the CA) are
// not logged.
func NewTLS(t testing.TB) *Node {
	t.Helper()
	n := &Node{Mux: http.NewServeMux()}
	n.Server = httptest.NewUnstartedServer(http.HandlerFunc(n.serve))
	n.Server.Config.ErrorLog = log.New(io.Discard, "", 0)
	n.StartTLS()
	t.Cleanup(n.Close)
	return n
}

// Host is the node's host:port, as /cluster/status advertises it.
func (n *Node) Host() string {
	return strings.TrimPrefix(strings.TrimPrefix(n.URL, "http://"), "https://")
}

// Requests returns what the node received on one route ("POST /workers").
func (n *Node) Requests(route string) []Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Request
	for _, g := range n.got {
		if g.Route() == route {
			out = append(out, g)
		}
	}
	return out
}

// All returns every request the node received, in order.
func (n *Node) All() []Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Request(nil), n.got...)
}

// Status answers /cluster/status with a node state and a leader.
func (n *Node) Status(id, state, leaderID, leaderHTTP string) {
	n.Answer("GET "+api.PathClusterStatus, http.StatusOK, api.ClusterStatus{NodeID: id, State: state, Term: 3,
		Leader: api.LeaderRef{ID: leaderID, HTTPAddr: leaderHTTP}, CommitIndex: 12, AppliedIndex: 12, Members: []api.Member{}})
}

// Answer registers a fixed JSON answer on a route, with header pairs.
func (n *Node) Answer(route string, status int, body any, headers ...string) {
	n.Mux.HandleFunc(route, OK(status, body, headers...))
}

// Answers registers a sequence of answers on a route; the last repeats.
func (n *Node) Answers(route string, seq ...http.HandlerFunc) {
	var mu sync.Mutex
	i := 0
	n.Mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := seq[min(i, len(seq)-1)]
		i++
		mu.Unlock()
		h(w, r)
	})
}

// WriteJSON writes v as a JSON answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// OK answers body with status and header pairs.
func OK(status int, body any, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		WriteJSON(w, status, body)
	}
}

// Error answers an API error with its code's status.
func Error(code api.Code, msg string) http.HandlerFunc {
	return OK(code.Status(), api.Error{Message: msg, Code: code})
}

// HangUp reads the request, then closes the connection without answering:
// the request reached the node, its answer is lost.
func HangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// DeadAddr is the address of a closed listener: dialling it is refused.
func DeadAddr(t testing.TB) string {
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
