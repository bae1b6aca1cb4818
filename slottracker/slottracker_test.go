package slottracker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/slottracker"
)

// harness is one slot tracker on a real loopback listener with a clock
// the test moves, and the calls a peer's test suite would make.
type harness struct {
	t     *testing.T
	srv   *slottracker.Server
	base  string
	clock atomic.Int64 // unix nanoseconds
}

func mustStart(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t}
	h.clock.Store(time.Unix(1_700_000_000, 0).UnixNano())
	cfg := slottracker.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Now = func() time.Time { return time.Unix(0, h.clock.Load()) }
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := slottracker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.srv, h.base = srv, "http://"+srv.Addr()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

func (h *harness) advance(d time.Duration) { h.clock.Add(int64(d)) }

// call sends one request and returns the status, headers and body.
func (h *harness) call(method, path string, body io.Reader) (int, http.Header, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// expect sends a request and checks its status; for want < 400 it returns
// the body, for errors it checks the body is {"error": "...", ...}.
func (h *harness) expect(method, path, body string, want int) []byte {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	status, _, raw := h.call(method, path, rd)
	if status != want {
		h.t.Fatalf("%s %s %s: status %d, want %d; body %s", method, path, body, status, want, raw)
	}
	if want >= 400 {
		mustErrorBody(h.t, raw)
	}
	return raw
}

func (h *harness) post(path, body string, want int) []byte {
	h.t.Helper()
	return h.expect(http.MethodPost, path, body, want)
}

// ok posts a write that must succeed with {"status": "ok"}.
func (h *harness) ok(path, body string, want int) {
	h.t.Helper()
	jsonEqual(h.t, h.post(path, body, want), `{"status": "ok"}`)
}

func (h *harness) register(model, tenant string, worker, blockSize, dpStart, dpSize int) {
	h.t.Helper()
	h.ok("/register", fmt.Sprintf(`{"worker_id": %d, "model_name": %q, "tenant_id": %q, "block_size": %d, "dp_start": %d, "dp_size": %d}`,
		worker, model, tenant, blockSize, dpStart, dpSize), http.StatusCreated)
}

func (h *harness) add(body string) { h.t.Helper(); h.ok("/add", body, http.StatusCreated) }

// loads checks GET /loads (with a query) against the JSON want.
func (h *harness) loads(query, want string) {
	h.t.Helper()
	jsonEqual(h.t, h.expect(http.MethodGet, "/loads"+query, "", http.StatusOK), want)
}

func mustErrorBody(t *testing.T, raw []byte) string {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("error body is not JSON: %q", raw)
	}
	msg, ok := body["error"].(string)
	if !ok || msg == "" {
		t.Fatalf("error body has no error message: %s", raw)
	}
	return msg
}

// jsonEqual compares a body with the expected JSON, ignoring layout.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body is not JSON: %q", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("body\n  %s\nwant\n  %s", bytes.TrimSpace(got), want)
	}
}

func load(worker, rank, prefill, decode int) string {
	return fmt.Sprintf(`{"model_name": "llama-3-8b", "tenant_id": "default", "worker_id": %d, "dp_rank": %d, "active_prefill_tokens": %d, "active_decode_blocks": %d}`,
		worker, rank, prefill, decode)
}

// Test_SeedFlow walks seed 003's examples: register a two-rank worker,
// add requests that share a prefix, read the loads, project a request,
// complete prefill and free.
func Test_SeedFlow(t *testing.T) {
	h := mustStart(t)
	h.register("llama-3-8b", "default", 7, 16, 0, 2)
	h.loads("", `[`+load(7, 0, 0, 0)+`,`+load(7, 1, 0, 0)+`]`)

	h.add(`{"model_name": "llama-3-8b", "tenant_id": "default", "request_id": "req-123", "worker_id": 7, "dp_rank": 0,
		"sequence_hashes": [101, -22, 303], "new_isl_tokens": 48}`)
	h.loads("", `[`+load(7, 0, 48, 3)+`,`+load(7, 1, 0, 0)+`]`)

	// A second request on the same rank sharing the first two blocks: the
	// prefill tokens add up (48 + 16), the shared blocks count once.
	h.add(`{"model_name": "llama-3-8b", "request_id": "req-456", "worker_id": 7, "dp_rank": 0,
		"sequence_hashes": [101, -22], "new_isl_tokens": 16}`)
	h.loads("", `[`+load(7, 0, 64, 3)+`,`+load(7, 1, 0, 0)+`]`)

	// Seed example of /potential_loads, with the loads above: rank 0 holds
	// three of the four blocks.
	got := h.post("/potential_loads", `{"model_name": "llama-3-8b", "tenant_id": "default",
		"sequence_hashes": [101, -22, 303, 404], "new_isl_tokens": 48}`, http.StatusOK)
	jsonEqual(t, got, `[
		{"worker_id": 7, "dp_rank": 0, "potential_prefill_tokens": 112, "potential_decode_blocks": 4},
		{"worker_id": 7, "dp_rank": 1, "potential_prefill_tokens": 48, "potential_decode_blocks": 4}]`)

	// prefill_complete removes exactly that request's prefill tokens; a
	// repeat is a no-op.
	h.ok("/prefill_complete", `{"model_name": "llama-3-8b", "tenant_id": "default", "request_id": "req-123"}`, http.StatusOK)
	h.loads("", `[`+load(7, 0, 16, 3)+`,`+load(7, 1, 0, 0)+`]`)
	h.ok("/prefill_complete", `{"model_name": "llama-3-8b", "request_id": "req-123"}`, http.StatusOK)
	h.loads("", `[`+load(7, 0, 16, 3)+`,`+load(7, 1, 0, 0)+`]`)

	// Free releases the blocks only this request held and its prefill.
	h.ok("/free", `{"model_name": "llama-3-8b", "request_id": "req-123"}`, http.StatusOK)
	h.loads("", `[`+load(7, 0, 16, 2)+`,`+load(7, 1, 0, 0)+`]`)
	h.ok("/free", `{"model_name": "llama-3-8b", "request_id": "req-456"}`, http.StatusOK)
	h.loads("", `[`+load(7, 0, 0, 0)+`,`+load(7, 1, 0, 0)+`]`)

	// Free is idempotent while the tracker exists, unknown ids included;
	// prefill_complete of an unknown request is a 404.
	h.ok("/free", `{"model_name": "llama-3-8b", "request_id": "req-123"}`, http.StatusOK)
	h.ok("/free", `{"model_name": "llama-3-8b", "request_id": "never-added"}`, http.StatusOK)
	h.post("/prefill_complete", `{"model_name": "llama-3-8b", "request_id": "req-123"}`, http.StatusNotFound)
}

// Test_SignedHashes checks that a hash is the same block whether sent as
// a signed or an unsigned 64-bit integer: -22 is 2^64-22.
func Test_SignedHashes(t *testing.T) {
	h := mustStart(t)
	h.register("llama-3-8b", "default", 1, 16, 0, 1)
	h.add(`{"model_name": "llama-3-8b", "request_id": "r", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [-22]}`)
	for _, tt := range []struct{ name, hashes string }{
		{"signed", `[-22]`},
		{"unsigned", `[18446744073709551594]`},
		{"both spellings in one request", `[-22, 18446744073709551594]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := h.post("/potential_loads", `{"model_name": "llama-3-8b", "sequence_hashes": `+tt.hashes+`}`, http.StatusOK)
			jsonEqual(t, got, `[{"worker_id": 1, "dp_rank": 0, "potential_prefill_tokens": 0, "potential_decode_blocks": 1}]`)
		})
	}
	// The unsigned spelling books the same block.
	h.add(`{"model_name": "llama-3-8b", "request_id": "r2", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [18446744073709551594]}`)
	h.loads("", `[{"model_name": "llama-3-8b", "tenant_id": "default", "worker_id": 1, "dp_rank": 0,
		"active_prefill_tokens": 0, "active_decode_blocks": 1}]`)
}

// Test_Register covers the topology API: validation, conflicts, scoping
// of worker ids by (model_name, tenant_id), sorting and filters.
func Test_Register(t *testing.T) {
	h := mustStart(t)
	// Out of order on purpose: the listing is sorted.
	h.register("b-model", "default", 3, 32, 0, 1)
	h.register("a-model", "t2", 9, 16, 4, 2)
	h.register("a-model", "default", 9, 16, 0, 1) // the same id in another tracker
	h.register("a-model", "default", 2, 16, 1, 1)
	h.ok("/register", `{"worker_id": 5, "model_name": "a-model", "block_size": 16, "dp_start": 2, "dp_size": 1}`, http.StatusCreated)

	w := func(id int, model, tenant string, bs, start, size int) string {
		return fmt.Sprintf(`{"worker_id": %d, "model_name": %q, "tenant_id": %q, "block_size": %d, "dp_start": %d, "dp_size": %d}`,
			id, model, tenant, bs, start, size)
	}
	for _, tt := range []struct{ query, want string }{
		{"", `[` + strings.Join([]string{w(2, "a-model", "default", 16, 1, 1), w(5, "a-model", "default", 16, 2, 1),
			w(9, "a-model", "default", 16, 0, 1), w(9, "a-model", "t2", 16, 4, 2), w(3, "b-model", "default", 32, 0, 1)}, ",") + `]`},
		{"?model_name=a-model&tenant_id=t2", `[` + w(9, "a-model", "t2", 16, 4, 2) + `]`},
		{"?tenant_id=default", `[` + strings.Join([]string{w(2, "a-model", "default", 16, 1, 1), w(5, "a-model", "default", 16, 2, 1),
			w(9, "a-model", "default", 16, 0, 1), w(3, "b-model", "default", 32, 0, 1)}, ",") + `]`},
		{"?model_name=b-model", `[` + w(3, "b-model", "default", 32, 0, 1) + `]`},
		{"?model_name=nope", `[]`},
	} {
		t.Run("workers"+tt.query, func(t *testing.T) {
			jsonEqual(t, h.expect(http.MethodGet, "/workers"+tt.query, "", http.StatusOK), tt.want)
		})
	}
	t.Run("loads sorted and filtered", func(t *testing.T) {
		l := func(model, tenant string, id, rank int) string {
			return fmt.Sprintf(`{"model_name": %q, "tenant_id": %q, "worker_id": %d, "dp_rank": %d, "active_prefill_tokens": 0, "active_decode_blocks": 0}`,
				model, tenant, id, rank)
		}
		jsonEqual(t, h.expect(http.MethodGet, "/loads", "", http.StatusOK), `[`+strings.Join([]string{
			l("a-model", "default", 2, 1), l("a-model", "default", 5, 2), l("a-model", "default", 9, 0),
			l("a-model", "t2", 9, 4), l("a-model", "t2", 9, 5), l("b-model", "default", 3, 0)}, ",")+`]`)
		jsonEqual(t, h.expect(http.MethodGet, "/loads?model_name=a-model&tenant_id=t2", "", http.StatusOK),
			`[`+l("a-model", "t2", 9, 4)+`,`+l("a-model", "t2", 9, 5)+`]`)
	})

	for _, tt := range []struct {
		name, body string
		status     int
		field      string // the error message starts with it
	}{
		{"duplicate worker", `{"worker_id": 9, "model_name": "a-model", "block_size": 16, "dp_start": 7, "dp_size": 1}`, http.StatusConflict, "worker already registered"},
		{"block size mismatch", `{"worker_id": 10, "model_name": "a-model", "block_size": 32, "dp_start": 0, "dp_size": 1}`, http.StatusConflict, "block_size mismatch"},
		{"block size 0", `{"worker_id": 10, "model_name": "m", "block_size": 0, "dp_start": 0, "dp_size": 1}`, http.StatusBadRequest, "block_size:"},
		{"dp size 0", `{"worker_id": 10, "model_name": "m", "block_size": 16, "dp_start": 0, "dp_size": 0}`, http.StatusBadRequest, "dp_size:"},
		{"dp range overflows u32", `{"worker_id": 10, "model_name": "m", "block_size": 16, "dp_start": 4294967295, "dp_size": 1}`, http.StatusBadRequest, "dp_start: dp range overflows"},
		{"dp range past the catalog's limit", `{"worker_id": 10, "model_name": "m", "block_size": 16, "dp_start": 1048576, "dp_size": 1}`, http.StatusBadRequest, "dp_start:"},
		{"negative block size", `{"worker_id": 10, "model_name": "m", "block_size": -16, "dp_start": 0, "dp_size": 1}`, http.StatusBadRequest, "block_size:"},
		{"missing model", `{"worker_id": 10, "block_size": 16, "dp_start": 0, "dp_size": 1}`, http.StatusBadRequest, "model_name: required"},
		{"empty model", `{"worker_id": 10, "model_name": "", "block_size": 16, "dp_start": 0, "dp_size": 1}`, http.StatusBadRequest, "model_name:"},
		{"missing dp_size", `{"worker_id": 10, "model_name": "m", "block_size": 16, "dp_start": 0}`, http.StatusBadRequest, "dp_size: required"},
		{"unknown field", `{"worker_id": 10, "model_name": "m", "block_size": 16, "dp_start": 0, "dp_size": 1, "tenant": "x"}`, http.StatusBadRequest, "tenant: unknown field"},
		{"worker id as a string", `{"worker_id": "10", "model_name": "m", "block_size": 16, "dp_start": 0, "dp_size": 1}`, http.StatusBadRequest, "worker_id:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := mustErrorBody(t, h.post("/register", tt.body, tt.status))
			if !strings.HasPrefix(msg, tt.field) {
				t.Errorf("error %q does not start with %q", msg, tt.field)
			}
		})
	}

	t.Run("unregister", func(t *testing.T) {
		h.ok("/unregister", `{"worker_id": 9, "model_name": "a-model", "tenant_id": "t2"}`, http.StatusOK)
		h.post("/unregister", `{"worker_id": 9, "model_name": "a-model", "tenant_id": "t2"}`, http.StatusNotFound)
		h.post("/unregister", `{"worker_id": 4, "model_name": "a-model"}`, http.StatusNotFound)
		h.post("/unregister", `{"worker_id": 9, "model_name": "no-such-model"}`, http.StatusNotFound)
		// The other tracker's worker 9 is untouched.
		jsonEqual(t, h.expect(http.MethodGet, "/workers?model_name=a-model", "", http.StatusOK),
			`[`+w(2, "a-model", "default", 16, 1, 1)+`,`+w(5, "a-model", "default", 16, 2, 1)+`,`+w(9, "a-model", "default", 16, 0, 1)+`]`)
	})
}

// Test_LifecycleErrors covers the statuses of /add, /prefill_complete,
// /free and /potential_loads for unknown trackers, workers, ranks and
// requests, duplicates and bad bodies.
func Test_LifecycleErrors(t *testing.T) {
	h := mustStart(t)
	h.register("m", "default", 1, 16, 2, 2) // ranks 2 and 3
	h.add(`{"model_name": "m", "request_id": "r1", "worker_id": 1, "dp_rank": 2, "sequence_hashes": [1, 2], "new_isl_tokens": 32}`)

	for _, tt := range []struct {
		name, path, body string
		status           int
	}{
		{"duplicate request id", "/add", `{"model_name": "m", "request_id": "r1", "worker_id": 1, "dp_rank": 3, "sequence_hashes": []}`, http.StatusConflict},
		{"unknown tracker: add", "/add", `{"model_name": "other", "request_id": "r9", "worker_id": 1, "dp_rank": 2, "sequence_hashes": []}`, http.StatusNotFound},
		{"unknown tenant: add", "/add", `{"model_name": "m", "tenant_id": "t", "request_id": "r9", "worker_id": 1, "dp_rank": 2, "sequence_hashes": []}`, http.StatusNotFound},
		{"unknown tracker: free", "/free", `{"model_name": "other", "request_id": "r1"}`, http.StatusNotFound},
		{"unknown tracker: prefill_complete", "/prefill_complete", `{"model_name": "other", "request_id": "r1"}`, http.StatusNotFound},
		{"unknown tracker: potential_loads", "/potential_loads", `{"model_name": "other", "sequence_hashes": []}`, http.StatusNotFound},
		{"unknown worker", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 2, "dp_rank": 2, "sequence_hashes": []}`, http.StatusNotFound},
		{"rank below the range", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 1, "sequence_hashes": []}`, http.StatusNotFound},
		{"rank above the range", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 4, "sequence_hashes": []}`, http.StatusNotFound},
		{"unknown request: prefill_complete", "/prefill_complete", `{"model_name": "m", "request_id": "r9"}`, http.StatusNotFound},
		{"missing sequence_hashes", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 2}`, http.StatusBadRequest},
		{"null sequence_hashes", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 2, "sequence_hashes": null}`, http.StatusBadRequest},
		{"missing request_id", "/add", `{"model_name": "m", "worker_id": 1, "dp_rank": 2, "sequence_hashes": []}`, http.StatusBadRequest},
		{"empty request_id", "/free", `{"model_name": "m", "request_id": ""}`, http.StatusBadRequest},
		{"missing model_name", "/free", `{"request_id": "r1"}`, http.StatusBadRequest},
		{"fractional hash", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 2, "sequence_hashes": [1.5]}`, http.StatusBadRequest},
		{"hash past u64", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 2, "sequence_hashes": [18446744073709551616]}`, http.StatusBadRequest},
		{"hash below i64", "/potential_loads", `{"model_name": "m", "sequence_hashes": [-9223372036854775809]}`, http.StatusBadRequest},
		{"negative new_isl_tokens", "/add", `{"model_name": "m", "request_id": "r9", "worker_id": 1, "dp_rank": 2, "sequence_hashes": [], "new_isl_tokens": -1}`, http.StatusBadRequest},
		{"fractional new_isl_tokens", "/potential_loads", `{"model_name": "m", "sequence_hashes": [], "new_isl_tokens": 1.5}`, http.StatusBadRequest},
		{"unknown field", "/free", `{"model_name": "m", "request_id": "r1", "reservation_id": "r1"}`, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) { h.post(tt.path, tt.body, tt.status) })
	}
	// None of the refused calls changed anything.
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 2, "active_prefill_tokens": 32, "active_decode_blocks": 2},
		{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 3, "active_prefill_tokens": 0, "active_decode_blocks": 0}]`)

	t.Run("empty sequence_hashes and default new_isl_tokens", func(t *testing.T) {
		h.add(`{"model_name": "m", "request_id": "r2", "worker_id": 1, "dp_rank": 3, "sequence_hashes": []}`)
		h.loads("?model_name=m", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 2, "active_prefill_tokens": 32, "active_decode_blocks": 2},
			{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 3, "active_prefill_tokens": 0, "active_decode_blocks": 0}]`)
		h.ok("/free", `{"model_name": "m", "request_id": "r2"}`, http.StatusOK)
		h.ok("/free", `{"model_name": "m", "request_id": "r2"}`, http.StatusOK)
	})
	t.Run("request ids are scoped by tracker", func(t *testing.T) {
		h.register("m", "t2", 1, 16, 0, 1)
		h.add(`{"model_name": "m", "tenant_id": "t2", "request_id": "r1", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [5]}`)
		h.ok("/free", `{"model_name": "m", "tenant_id": "t2", "request_id": "r1"}`, http.StatusOK)
		// r1 of the default tenant is still active.
		h.ok("/prefill_complete", `{"model_name": "m", "request_id": "r1"}`, http.StatusOK)
	})
}

// Test_Unregister checks that unregistering drops the worker's active
// requests at once and that registering again starts from nothing.
func Test_Unregister(t *testing.T) {
	h := mustStart(t)
	h.register("m", "default", 1, 16, 0, 1)
	h.register("m", "default", 2, 16, 0, 1)
	h.add(`{"model_name": "m", "request_id": "a", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [1, 2, 3], "new_isl_tokens": 48}`)
	h.add(`{"model_name": "m", "request_id": "b", "worker_id": 2, "dp_rank": 0, "sequence_hashes": [1], "new_isl_tokens": 16}`)

	h.ok("/unregister", `{"worker_id": 1, "model_name": "m"}`, http.StatusOK)
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 2, "dp_rank": 0, "active_prefill_tokens": 16, "active_decode_blocks": 1}]`)
	// The dropped request is gone: completing it is a 404, freeing it a no-op.
	h.post("/prefill_complete", `{"model_name": "m", "request_id": "a"}`, http.StatusNotFound)
	h.ok("/free", `{"model_name": "m", "request_id": "a"}`, http.StatusOK)

	// Registered again, worker 1 starts empty and takes the same id.
	h.register("m", "default", 1, 16, 0, 1)
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 0, "active_prefill_tokens": 0, "active_decode_blocks": 0},
		{"model_name": "m", "tenant_id": "default", "worker_id": 2, "dp_rank": 0, "active_prefill_tokens": 16, "active_decode_blocks": 1}]`)
	h.add(`{"model_name": "m", "request_id": "a", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [9]}`)

	// The last worker takes its tracker with it: calls naming the tracker
	// are 404s, free included, until a worker registers again.
	h.ok("/unregister", `{"worker_id": 1, "model_name": "m"}`, http.StatusOK)
	h.ok("/unregister", `{"worker_id": 2, "model_name": "m"}`, http.StatusOK)
	h.loads("", `[]`)
	jsonEqual(t, h.expect(http.MethodGet, "/workers", "", http.StatusOK), `[]`)
	h.post("/free", `{"model_name": "m", "request_id": "b"}`, http.StatusNotFound)
	h.register("m", "default", 2, 32, 0, 1) // a fresh tracker may take another block size
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 2, "dp_rank": 0, "active_prefill_tokens": 0, "active_decode_blocks": 0}]`)
	h.ok("/free", `{"model_name": "m", "request_id": "b"}`, http.StatusOK)
}

// Test_ExpirySweep checks that a request is removed once it is older than
// 300 s, and not before, with the clock injected.
func Test_ExpirySweep(t *testing.T) {
	h := mustStart(t)
	h.register("m", "default", 1, 16, 0, 1)
	h.add(`{"model_name": "m", "request_id": "old", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [1, 2], "new_isl_tokens": 32}`)
	h.advance(200 * time.Second)
	h.add(`{"model_name": "m", "request_id": "young", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [1], "new_isl_tokens": 16}`)

	h.advance(99 * time.Second) // old is 299 s old
	if n := h.srv.Service.SweepExpired(); n != 0 {
		t.Fatalf("swept %d requests before the expiry", n)
	}
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 0, "active_prefill_tokens": 48, "active_decode_blocks": 2}]`)

	h.advance(time.Second) // old is 300 s old
	if n := h.srv.Service.SweepExpired(); n != 1 {
		t.Fatalf("swept %d requests at the expiry, want 1", n)
	}
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 0, "active_prefill_tokens": 16, "active_decode_blocks": 1}]`)
	h.post("/prefill_complete", `{"model_name": "m", "request_id": "old"}`, http.StatusNotFound)
	h.ok("/free", `{"model_name": "m", "request_id": "old"}`, http.StatusOK)
	// The id is free again.
	h.add(`{"model_name": "m", "request_id": "old", "worker_id": 1, "dp_rank": 0, "sequence_hashes": []}`)
}

// Test_HTTPErrors covers what every route shares: JSON 404 and 405 (with
// Allow), 413 past 8 MiB, malformed JSON, /health with an empty body.
func Test_HTTPErrors(t *testing.T) {
	h := mustStart(t)
	h.register("m", "default", 1, 16, 0, 1)

	t.Run("health", func(t *testing.T) {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			status, _, raw := h.call(method, "/health", nil)
			if status != http.StatusOK || len(raw) != 0 {
				t.Errorf("%s /health: %d %q, want 200 with an empty body", method, status, raw)
			}
		}
	})
	t.Run("unknown routes", func(t *testing.T) {
		for _, path := range []string{"/nope", "/", "/health/", "/register/x", "/select"} {
			h.expect(http.MethodGet, path, "", http.StatusNotFound)
			h.post(path, `{}`, http.StatusNotFound)
		}
	})
	t.Run("wrong methods", func(t *testing.T) {
		for _, tt := range []struct{ method, path, allow string }{
			{http.MethodGet, "/register", "POST"},
			{http.MethodDelete, "/free", "POST"},
			{http.MethodPut, "/potential_loads", "POST"},
			{http.MethodPost, "/workers", "GET, HEAD"},
			{http.MethodPost, "/loads", "GET, HEAD"},
			{http.MethodPost, "/health", "GET, HEAD"},
		} {
			status, hdr, raw := h.call(tt.method, tt.path, nil)
			if status != http.StatusMethodNotAllowed || hdr.Get("Allow") != tt.allow {
				t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tt.method, tt.path, status, hdr.Get("Allow"), tt.allow)
			}
			mustErrorBody(t, raw)
		}
	})
	t.Run("body over 8 MiB", func(t *testing.T) {
		body := `{"model_name": "m", "request_id": "big", "worker_id": 1, "dp_rank": 0, "sequence_hashes": [` +
			strings.Repeat("1,", 9<<20/2) + `1]}`
		status, _, raw := h.call(http.MethodPost, "/add", strings.NewReader(body))
		if status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413; body %s", status, raw)
		}
		mustErrorBody(t, raw)
		h.ok("/free", `{"model_name": "m", "request_id": "big"}`, http.StatusOK) // nothing was booked
		h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 0, "active_prefill_tokens": 0, "active_decode_blocks": 0}]`)
	})
	t.Run("bad bodies", func(t *testing.T) {
		for _, body := range []string{
			`{`, ``, `null`, `[]`, `"x"`, `{"model_name": "m", "request_id": "r"} {}`,
			`{"model_name": "m", "request_id": "r",}`, `{"model_name": 5, "request_id": "r"}`,
		} {
			h.post("/free", body, http.StatusBadRequest)
		}
	})
	t.Run("bad queries", func(t *testing.T) {
		for _, q := range []string{"?model=m", "?model_name=a&model_name=b", "?tenant_id=%zz"} {
			h.expect(http.MethodGet, "/loads"+q, "", http.StatusBadRequest)
			h.expect(http.MethodGet, "/workers"+q, "", http.StatusBadRequest)
		}
	})
}

// Test_ConcurrentLifecycle runs request lifecycles on two workers while a
// third worker of the same tracker registers and unregisters, and a
// reader lists loads; once every request is freed the load is zero again.
// Its point is the race detector and the final accounting.
func Test_ConcurrentLifecycle(t *testing.T) {
	h := mustStart(t)
	h.register("m", "default", 1, 16, 0, 1)
	h.register("m", "default", 2, 16, 0, 1)
	const perClient = 25
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	post := func(path, body string, want int) error {
		resp, err := http.Post(h.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != want {
			raw, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%s %s: %d, want %d: %s", path, body, resp.StatusCode, want, raw)
		}
		return nil
	}
	for c := range 4 {
		wg.Go(func() {
			for i := range perClient {
				id := fmt.Sprintf("c%d-%d", c, i)
				steps := []struct {
					path, body string
					want       int
				}{
					{"/add", fmt.Sprintf(`{"model_name": "m", "request_id": %q, "worker_id": %d, "dp_rank": 0, "sequence_hashes": [1, 2, %d], "new_isl_tokens": 16}`,
						id, 1+c%2, 100+c*perClient+i), http.StatusCreated},
					{"/prefill_complete", fmt.Sprintf(`{"model_name": "m", "request_id": %q}`, id), http.StatusOK},
					{"/free", fmt.Sprintf(`{"model_name": "m", "request_id": %q}`, id), http.StatusOK},
				}
				for _, s := range steps {
					if err := post(s.path, s.body, s.want); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range perClient {
			if err := post("/register", `{"worker_id": 3, "model_name": "m", "block_size": 16, "dp_start": 0, "dp_size": 4}`, http.StatusCreated); err != nil {
				errs <- err
				return
			}
			if err := post("/unregister", `{"worker_id": 3, "model_name": "m"}`, http.StatusOK); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() {
		for range perClient {
			resp, err := http.Get(h.base + "/loads")
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h.loads("", `[{"model_name": "m", "tenant_id": "default", "worker_id": 1, "dp_rank": 0, "active_prefill_tokens": 0, "active_decode_blocks": 0},
		{"model_name": "m", "tenant_id": "default", "worker_id": 2, "dp_rank": 0, "active_prefill_tokens": 0, "active_decode_blocks": 0}]`)
}
