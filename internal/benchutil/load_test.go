package benchutil

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoadRuns(t *testing.T) {
	var served atomic.Int64
	// The closed loop runs until the server has served 50 requests, not
	// for a time: with 4 connections, one of them has then had at least
	// 12 answers before it sent the request that ended the run.
	closedCtx, endClosed := context.WithCancel(context.Background())
	defer endClosed()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) >= 50 {
			endClosed()
		}
		if r.URL.Path == "/teapot" {
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	hc := NewLoadClient(4)
	defer hc.CloseIdleConnections()
	get := func(path string) Request {
		return func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		run     func(Request) (LoadResult, error)
		path    string
		wantN   int // exact number of answered requests; -1: some
		wantErr string
	}{
		{"closed loop", func(r Request) (LoadResult, error) {
			return ClosedLoop(closedCtx, hc, 4, time.Hour, http.StatusOK, r)
		}, "/", -1, ""},
		{"open loop sends rate × duration", func(r Request) (LoadResult, error) {
			return OpenLoop(ctx, hc, 200, 4, 250*time.Millisecond, http.StatusOK, r)
		}, "/", 50, ""},
		{"unexpected status is an error", func(r Request) (LoadResult, error) {
			return OpenLoop(ctx, hc, 100, 2, 100*time.Millisecond, http.StatusOK, r)
		}, "/teapot", 0, "status 418, want 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := served.Load()
			res, err := tc.run(get(tc.path))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || res.Errors == 0 || res.Requests != 0 {
					t.Fatalf("result %+v, err %v; want errors with %q", res, err, tc.wantErr)
				}
				return
			}
			if err != nil || res.Errors != 0 {
				t.Fatalf("result %v, err %v", res, err)
			}
			if (tc.wantN < 0 && res.Requests == 0) || (tc.wantN >= 0 && res.Requests != tc.wantN) {
				t.Fatalf("%d requests answered, want %d", res.Requests, tc.wantN)
			}
			if got := served.Load() - before; got < int64(res.Requests) {
				t.Fatalf("server saw %d requests, the run counted %d", got, res.Requests)
			}
			if len(res.Latencies) != res.Requests || res.Percentile(0.5) > res.Percentile(0.99) || res.PerSecond() <= 0 {
				t.Fatalf("inconsistent result %+v", res)
			}
		})
	}
}
