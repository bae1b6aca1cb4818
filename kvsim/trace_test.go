package kvsim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/testvectors"
)

func Test_ReadTrace(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{"two lines", `{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [1]}` + "\n" +
			`{"timestamp": 12.5, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2]}`, 2, ""},
		{"blank lines skipped", "\n" + `{"input_length": 1, "hash_ids": [9]}` + "\n\n", 1, ""},
		{"empty", "", 0, ""},
		{"bad json", `{"input_length": 1}` + "\n" + `{"input_length": `, 0, "line 2"},
		{"wrong type", `{"hash_ids": ["x"]}`, 0, "line 1"},
		{"negative hash id", `{"hash_ids": [-1]}`, 0, "line 1"},
		{"negative input", "\n" + `{"input_length": -5}`, 0, "line 2: input_length"},
		{"huge input", `{"input_length": 99999999999}`, 0, "input_length"},
		{"trailing garbage", `{"input_length": 1} x`, 0, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs, err := ReadTrace(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(reqs) != tt.want {
				t.Fatalf("ReadTrace = %d requests, %v; want %d", len(reqs), err, tt.want)
			}
		})
	}
}

func Test_ReadSharedTrace(t *testing.T) {
	f, err := os.Open(testvectors.TracePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) < 1000 || reqs[0].InputLength != 40160 || len(reqs[0].HashIDs) != 79 {
		t.Fatalf("read %d requests, first %+v", len(reqs), reqs[0].InputLength)
	}
}

func Test_TraceTokens(t *testing.T) {
	a := TraceRequest{InputLength: 10, HashIDs: []uint64{7, 8, 9}}
	b := TraceRequest{InputLength: 12, HashIDs: []uint64{7, 8, 3}}
	ta, tb := TraceTokens(a, 4), TraceTokens(b, 4)
	if len(ta) != 10 || len(tb) != 12 {
		t.Fatalf("lengths %d, %d", len(ta), len(tb))
	}
	if !slices.Equal(ta[:8], tb[:8]) {
		t.Fatal("shared hash ids must give shared tokens")
	}
	if slices.Equal(ta[8:10], tb[8:10]) {
		t.Fatal("different hash ids gave the same tokens")
	}
	if !slices.Equal(ta, TraceTokens(a, 4)) {
		t.Fatal("not deterministic")
	}
	for _, tok := range ta {
		if tok >= traceVocabulary {
			t.Fatalf("token %d out of vocabulary", tok)
		}
	}
	tests := []struct {
		name string
		req  TraceRequest
		tbt  int
		want int
	}{
		{"input longer than hash ids", TraceRequest{InputLength: 100, HashIDs: []uint64{1}}, 4, 4},
		{"no hash ids", TraceRequest{InputLength: 100}, 4, 0},
		{"negative input", TraceRequest{InputLength: -1, HashIDs: []uint64{1}}, 4, 0},
		{"default block tokens", TraceRequest{InputLength: 600, HashIDs: []uint64{1, 2}}, 0, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(TraceTokens(tt.req, tt.tbt)); got != tt.want {
				t.Fatalf("len = %d, want %d", got, tt.want)
			}
		})
	}
}

// sharedPrefixTrace returns n requests that all start with the same two
// hash ids and end with one of their own.
func sharedPrefixTrace(n int) []TraceRequest {
	reqs := make([]TraceRequest, n)
	for i := range reqs {
		reqs[i] = TraceRequest{InputLength: 3 * 64, HashIDs: []uint64{1, 2, uint64(100 + i)}}
	}
	return reqs
}

func Test_ReplayTraceRoundRobin(t *testing.T) {
	s := mustStart(t, Config{Workers: 2, DPSize: 2, BlockSize: 16})
	st, err := ReplayTrace(context.Background(), s, sharedPrefixTrace(9), ReplayOptions{TraceBlockTokens: 64, Limit: 8, ProgressEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 8 requests of 12 blocks over 4 ranks: each rank misses the shared 8
	// blocks once, then hits them once.
	want := ReplayStats{Requests: 8, PromptBlocks: 96, HitBlocks: 32, HitRate: 32.0 / 96}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	for _, w := range s.Workers() {
		for rank := range 2 {
			if n := w.CachedBlocks(rank); n != 16 {
				t.Fatalf("worker %d rank %d caches %d blocks, want 16", w.ID(), rank, n)
			}
		}
	}
	if !strings.Contains(st.String(), "hit_rate=0.3333") {
		t.Fatalf("String() = %q", st.String())
	}
}

func Test_ReplayTraceSelect(t *testing.T) {
	tests := []struct {
		name       string
		answer     string
		status     int
		wantErrors int
		wantHits   int
	}{
		{"always worker 2 rank 1", `{"worker_id": 2, "dp_rank": 1}`, http.StatusOK, 0, 8 * 4},
		{"unknown worker", `{"worker_id": 9, "dp_rank": 0}`, http.StatusOK, 5, 0},
		{"unknown rank", `{"worker_id": 1, "dp_rank": 2}`, http.StatusOK, 5, 0},
		{"missing fields", `{}`, http.StatusOK, 5, 0},
		{"not ready", `{"error": "no schedulable worker", "code": "not_ready"}`, http.StatusServiceUnavailable, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				bodies []api.SelectRequest
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/select" {
					http.NotFound(w, r)
					return
				}
				var body api.SelectRequest
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				mu.Lock()
				bodies = append(bodies, body)
				mu.Unlock()
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.answer))
			}))
			defer srv.Close()

			s := mustStart(t, Config{Workers: 2, DPSize: 2, BlockSize: 16, Model: "m", Tenant: "t"})
			st, err := ReplayTrace(context.Background(), s, sharedPrefixTrace(5), ReplayOptions{TraceBlockTokens: 64, SelectURL: srv.URL + "/"})
			if err != nil {
				t.Fatal(err)
			}
			if st.Requests != 5 || st.Errors != tt.wantErrors || st.HitBlocks != tt.wantHits {
				t.Fatalf("stats %+v, want %d errors and %d hit blocks", st, tt.wantErrors, tt.wantHits)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 5 || bodies[0].ModelName != "m" || bodies[0].TenantID != "t" || len(bodies[0].TokenIDs) != 192 {
				t.Fatalf("select bodies: %d, first %+v", len(bodies), bodies[0].ModelName)
			}
		})
	}
}

func Test_ReplayTraceCancelled(t *testing.T) {
	s := mustStart(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := ReplayTrace(ctx, s, sharedPrefixTrace(3), ReplayOptions{Speed: 1})
	if !errors.Is(err, context.Canceled) || st.Requests != 0 {
		t.Fatalf("ReplayTrace = %+v, %v", st, err)
	}
}
