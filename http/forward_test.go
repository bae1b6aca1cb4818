package http

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// Test_ForwardOutcomes drives forward against fake leaders: an answer is
// relayed as is; a refusal that proves nothing was written is retried;
// a lost answer is unknown_outcome for a write and no_leader for a read.
func Test_ForwardOutcomes(t *testing.T) {
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(api.HeaderForwardedBy) != "n2" || r.Header.Get("Authorization") != "Bearer tok" ||
				r.Header.Get(api.HeaderIndex) != "7" {
				http.Error(w, "forward lost a header", http.StatusTeapot)
				return
			}
			w.Header().Set(api.HeaderServedBy, "n1")
			w.Header().Set(api.HeaderIndex, "42")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	hangUp := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	// stall answers only when the forwarder gives up and hangs up.
	// (The body is read first: only then does the server watch the
	// connection and cancel the request's context when it closes.)
	stall := func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	}
	closedAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()

	tests := []struct {
		name     string
		method   string
		leader   http.HandlerFunc // nil: nothing listens
		wantDone bool
		wantErr  error
		status   int
	}{
		{"created is relayed", "POST", answer(http.StatusCreated, `{"worker_id":1}`), true, nil, http.StatusCreated},
		{"verdict is relayed", "DELETE", answer(http.StatusNotFound, `{"error":"x","code":"not_found"}`), true, nil, http.StatusNotFound},
		{"unknown outcome is relayed", "POST", answer(http.StatusServiceUnavailable, `{"error":"x","code":"unknown_outcome"}`), true, nil, http.StatusServiceUnavailable},
		{"not the leader: retry", "POST", answer(http.StatusServiceUnavailable, `{"error":"x","code":"not_leader"}`), false, nil, 0},
		{"no leader: retry", "POST", answer(http.StatusServiceUnavailable, `{"error":"x","code":"no_leader"}`), false, nil, 0},
		{"refused connection: retry", "POST", nil, false, nil, 0},
		{"write answer lost", "POST", hangUp, true, cluster.ErrUnknownOutcome, 0},
		{"read answer lost", "GET", hangUp, true, cluster.ErrNoLeader, 0},
		{"write times out", "PATCH", stall, true, cluster.ErrUnknownOutcome, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := closedAddr
			if tt.leader != nil {
				srv := httptest.NewServer(tt.leader)
				defer srv.Close()
				addr = strings.TrimPrefix(srv.URL, "http://")
			}
			s := newFakeNode().service(func(c *Config) { c.ForwardTimeout = 200 * time.Millisecond })
			req := httptest.NewRequest(tt.method, "/workers/1?x=y", strings.NewReader(`{"a":1}`))
			req.Header.Set("Authorization", "Bearer tok")
			req.Header.Set(api.HeaderIndex, "7")
			rec := httptest.NewRecorder()
			done, err := s.forward(rec, req, []byte(`{"a":1}`), "n2", cluster.LeaderInfo{ID: "n1", HTTPAddr: addr, DialHTTP: addr})
			if done != tt.wantDone || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("forward = (%v, %v), want (%v, %v)", done, err, tt.wantDone, tt.wantErr)
			}
			if tt.status == 0 {
				if rec.Body.Len() != 0 {
					t.Fatalf("wrote %q although nothing should be relayed", rec.Body.String())
				}
				return
			}
			if rec.Code != tt.status || rec.Header().Get(api.HeaderServedBy) != "n1" || rec.Header().Get(api.HeaderIndex) != "42" {
				t.Fatalf("relayed %d %v %q", rec.Code, rec.Header(), rec.Body.String())
			}
		})
	}
}

// Test_ForwardCredentials: a node with a token forwards as itself, with
// the first line of its token file, whatever the client sent (it checked
// the client's token itself); a node without one passes the client's
// Authorization on.
func Test_ForwardCredentials(t *testing.T) {
	seen := make(chan string, 1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get(api.HeaderAuthorization)
		w.WriteHeader(http.StatusOK)
	}))
	defer leader.Close()
	addr := strings.TrimPrefix(leader.URL, "http://")
	nodeToken := authtoken.NewHolder("node-new")
	nodeToken.SetTokens("node-new", "node-old")
	for _, tt := range []struct {
		name   string
		auth   *authtoken.Holder
		client string
		want   string
	}{
		{"node with a token sends its first line", nodeToken, "Bearer sel-token", "Bearer node-new"},
		{"also when the client sent none", nodeToken, "", "Bearer node-new"},
		{"node without a token passes the client's on", nil, "Bearer whatever", "Bearer whatever"},
		{"and sends none when the client sent none", nil, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeNode().service(func(c *Config) { c.Auth = tt.auth })
			req := httptest.NewRequest("POST", "/workers/1/keepalive", nil)
			if tt.client != "" {
				req.Header.Set(api.HeaderAuthorization, tt.client)
			}
			if done, err := s.forward(httptest.NewRecorder(), req, nil, "n2", cluster.LeaderInfo{ID: "n1", HTTPAddr: addr, DialHTTP: addr}); !done || err != nil {
				t.Fatalf("forward = %v, %v", done, err)
			}
			if got := <-seen; got != tt.want {
				t.Fatalf("the leader got Authorization %q, want %q", got, tt.want)
			}
		})
	}
}
