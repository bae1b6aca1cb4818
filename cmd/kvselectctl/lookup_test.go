package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// Test_WorkersGet: one catalog record by id, from the home node or,
// with --linearizable, from the leader with consistency=linearizable.
func Test_WorkersGet(t *testing.T) {
	n := leaderNode(t)
	n.Answer("GET /workers/7", http.StatusOK, map[string]any{"worker_id": 7, "model_name": "llama", "tenant_id": "default",
		"endpoint": "http://w7:8000", "block_size": 16, "data_parallel_size": 1, "lifecycle": "schedulable",
		"listeners": map[string]any{"0": map[string]any{"state": "active"}}})
	n.Answer("GET /workers/8", http.StatusNotFound, apiErr("not_found", "worker not found: 8"))
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		wantQuery  string // of the last GET /workers/7
	}{
		{name: "table", args: []string{"workers", "get", "7"}, wantStdout: `WORKER  MODEL  TENANT   ENDPOINT        BLOCK  DP_RANKS  LIFECYCLE    LISTENERS
7       llama  default  http://w7:8000  16     0         schedulable  0:active
`},
		{name: "linearizable", args: []string{"workers", "get", "--linearizable", "7"}, wantStdout: "WORKER  MODEL",
			wantQuery: "consistency=linearizable"},
		{name: "json", args: []string{"--json", "workers", "get", "7"}, wantStdout: "{\n  \"block_size\": 16,"},
		{name: "unknown", args: []string{"workers", "get", "8"}, wantCode: exitError,
			wantStderr: "kvselectctl: not_found: worker not found: 8 (HTTP 404)\n"},
		{name: "not an id", args: []string{"workers", "get", "w7"}, wantCode: exitUsage,
			wantStderr: `kvselectctl: worker id "w7" is not an unsigned 64-bit integer`},
		{name: "no id", args: []string{"workers", "get"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: workers get: wrong number of arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if code != tt.wantCode || !strings.HasPrefix(out, tt.wantStdout) || !strings.HasPrefix(errOut, tt.wantStderr) {
				t.Fatalf("exit %d, stdout:\n%s\nstderr %q; want exit %d, stdout starting\n%s\nstderr starting %q",
					code, out, errOut, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.wantCode == exitOK {
				got := n.Requests("GET /workers/7")
				if q := got[len(got)-1].Query; q != tt.wantQuery {
					t.Fatalf("query %q, want %q", q, tt.wantQuery)
				}
			}
		})
	}
}

// Test_ReservationsFree: a stuck booking is freed by id on the node
// --addr names first; an unknown id is not_found. get is show.
func Test_ReservationsFree(t *testing.T) {
	n := leaderNode(t)
	n.Answer("DELETE /reservations/req-1", http.StatusOK, api.ReservationAck{Status: api.StatusOK, ReservationID: "req-1"})
	n.Answer("DELETE /reservations/req-2", http.StatusNotFound, apiErr("not_found", "reservation not found: req-2"))
	n.Answer("GET /reservations/req-1", http.StatusOK, map[string]any{"reservation_id": "req-1", "model_name": "llama",
		"tenant_id": "default", "worker_id": 3, "dp_rank": 0, "blocks": 4, "prefill_tokens": 64,
		"admitted_at": time.Now().UTC().Format(time.RFC3339Nano), "origin": "local"})
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "free", args: []string{"reservations", "free", "req-1"}, wantStdout: "reservation req-1 freed on " + n.URL + "\n"},
		{name: "free --json", args: []string{"--json", "reservations", "free", "req-1"},
			wantStdout: "{\n  \"status\": \"ok\",\n  \"reservation_id\": \"req-1\"\n}\n"},
		{name: "free an unknown booking", args: []string{"reservations", "free", "req-2"}, wantCode: exitError,
			wantStderr: "kvselectctl: not_found: reservation not found: req-2 (HTTP 404)\n"},
		{name: "free without an id", args: []string{"reservations", "free"}, wantCode: exitUsage,
			wantStderr: "kvselectctl: reservations free: wrong number of arguments"},
		{name: "get", args: []string{"reservations", "get", "req-1"},
			wantStdout: "RESERVATION  MODEL  TENANT   WORKER  RANK  BLOCKS  PREFILL_TOKENS  PREFILL_DONE  OUTPUT_BLOCKS  AGE  ORIGIN\n" +
				"req-1        llama  default  3       0     4       64              no            0              "}, // then the age
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"--addr", n.URL}, tt.args...)...)
			if code != tt.wantCode || !strings.HasPrefix(out, tt.wantStdout) || (tt.name != "get" && out != tt.wantStdout) || !strings.HasPrefix(errOut, tt.wantStderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr starting %q",
					code, out, errOut, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	// A free is never sent twice: a second one could end a booking that
	// reused the id.
	if got := len(n.Requests("DELETE /reservations/req-1")); got != 2 {
		t.Fatalf("%d DELETE /reservations/req-1, want one per run", got)
	}
}
