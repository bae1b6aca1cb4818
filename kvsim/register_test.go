package kvsim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func Test_Register(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"created", http.StatusCreated, `{"worker_id":1}`, ""},
		{"rejected", http.StatusBadRequest, `{"error":"block_size must be greater than 0"}`, "block_size must be greater than 0"},
		{"unauthorized", http.StatusUnauthorized, `{"error":"missing token","code":"unauthorized"}`, "HTTP 401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				regs []api.WorkerFields
				auth []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/workers" {
					http.NotFound(w, r)
					return
				}
				var reg api.WorkerFields
				if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				mu.Lock()
				regs = append(regs, reg)
				auth = append(auth, r.Header.Get("Authorization"))
				mu.Unlock()
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()

			s := mustStart(t, Config{Workers: 2, FirstWorkerID: 5, DPSize: 2, AuthToken: "secret", EndpointBase: "http://127.0.0.1:8093"})
			err := s.Register(context.Background(), srv.URL+"/")
			mu.Lock()
			defer mu.Unlock()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(regs) != 2 || *regs[0].WorkerID != 5 || *regs[1].WorkerID != 6 || len(*regs[1].KVEventsEndpoints) != 2 {
					t.Fatalf("registered %+v", regs)
				}
				// The endpoint a caller sends the request to is where kvsim
				// serves the worker, not a port-0 placeholder.
				if regs[1].Endpoint == nil || *regs[1].Endpoint != "http://127.0.0.1:8093/workers/6" {
					t.Fatalf("worker 6 registered endpoint %v", regs[1].Endpoint)
				}
				if auth[0] != "Bearer secret" {
					t.Fatalf("Authorization %q", auth[0])
				}
				return
			}
			var herr *client.Error
			if err == nil || !errors.As(err, &herr) || herr.Status != tt.status || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want client.Error %d mentioning %q", err, tt.status, tt.wantErr)
			}
			if len(regs) != 1 {
				t.Fatalf("kept registering after a failure: %d calls", len(regs))
			}
		})
	}
}

func Test_RegisterUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s := mustStart(t, Config{})
	// The client keeps retrying a node that cannot be reached (it may be
	// starting) until the context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := s.Register(ctx, url); err == nil {
		t.Fatal("Register succeeded against a closed server")
	}
}
