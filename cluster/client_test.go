package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// Test_PeerCallRetryable: a failed join or metadata call is retried by its
// API code, whatever the HTTP status: when nothing was written, and after
// unknown_outcome (both calls are idempotent); never after a verdict,
// internal included. Answers come from a real HTTP server through the
// real client, so the codes are the ones the client decodes.
func Test_PeerCallRetryable(t *testing.T) {
	answer := func(code api.Code) string { return fmt.Sprintf(`{"error":"test","code":%q}`, code) }
	tests := []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"not leader", http.StatusServiceUnavailable, answer(api.CodeNotLeader), true},
		{"no leader", http.StatusServiceUnavailable, answer(api.CodeNoLeader), true},
		{"shutting down", http.StatusServiceUnavailable, answer(api.CodeShuttingDown), true},
		{"unknown outcome", http.StatusServiceUnavailable, answer(api.CodeUnknownOutcome), true},
		{"internal", http.StatusInternalServerError, answer(api.CodeInternal), false},
		{"conflict", http.StatusConflict, answer(api.CodeConflict), false},
		{"bad request", http.StatusBadRequest, answer(api.CodeBadRequest), false},
		{"unauthorized", http.StatusUnauthorized, answer(api.CodeUnauthorized), false},
		// A 5xx without a kvselect code proves nothing was written.
		{"bad gateway without code", http.StatusBadGateway, "upstream down", false},
		{"503 without code", http.StatusServiceUnavailable, "", false},
	}
	p := newPeerClient(nil, 5*time.Second, "", nil)
	calls := []struct {
		name string
		do   func(ctx context.Context, addr string) error
	}{
		{"join", func(ctx context.Context, addr string) error {
			return p.join(ctx, addr, api.JoinRequest{ID: "n2", RaftAddr: "127.0.0.1:1"})
		}},
		{"metadata", func(ctx context.Context, addr string) error {
			return p.metadata(ctx, addr, fsm.NodeMeta{ID: "n2", HTTPAddr: "127.0.0.1:2"})
		}},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tt.status)
			fmt.Fprint(w, tt.body)
		}))
		for _, c := range calls {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				err := c.do(ctx(t), srv.URL)
				if err == nil {
					t.Fatal("call succeeded")
				}
				if got := retryable(fmt.Errorf("join via %s: %w", srv.URL, err)); got != tt.want {
					t.Fatalf("retryable(%v) = %v, want %v", err, got, tt.want)
				}
			})
		}
		srv.Close()
	}

	t.Run("no answer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		for _, c := range calls {
			if err := c.do(ctx(t), addr); err == nil || !retryable(err) {
				t.Fatalf("%s to a closed port: retryable(%v) = false", c.name, err)
			}
		}
	})
	if retryable(nil) {
		t.Fatal("retryable(nil) = true")
	}
}

// Test_PeerCallTokenRotation: the node's own calls carry the token current
// at the time of the call, so a rotation (SIGHUP) applies to the next one.
func Test_PeerCallTokenRotation(t *testing.T) {
	seen := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get(api.HeaderAuthorization)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	auth := authtoken.NewHolder("old")
	p := newPeerClient(auth, 5*time.Second, "", nil)
	meta := fsm.NodeMeta{ID: "n2", HTTPAddr: "127.0.0.1:2"}
	_ = p.metadata(ctx(t), srv.URL, meta)
	auth.Set("new")
	_ = p.join(ctx(t), srv.URL, api.JoinRequest{ID: "n2", RaftAddr: "127.0.0.1:1"})
	if first, second := <-seen, <-seen; first != "Bearer old" || second != "Bearer new" {
		t.Fatalf("Authorization before and after the rotation: %q, %q", first, second)
	}
}
