package http_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/schemacheck"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

var record = flag.Bool("record", false, "write the OpenAPI tour's exchanges to ../api/testdata/examples")

// examplesDir is where the tour's exchanges are recorded, for api's
// TestRecordedExamplesMatchOpenAPI.
var examplesDir = filepath.Join("..", "api", "testdata", "examples")

// tour drives a real cluster through every operation and checks each
// exchange against the OpenAPI document as it happens.
type tour struct {
	t    *testing.T
	doc  *schemacheck.Document
	hc   *http.Client // never follows redirects: a 307 is an answer
	seen []schemacheck.Exchange
}

// documentedHeaders are the answer headers an exchange records (and the
// document must declare when present).
var documentedHeaders = []string{api.HeaderIndex, api.HeaderServedBy, api.HeaderApplied,
	api.HeaderCatalogBehind, api.HeaderReplayed, "Retry-After", "Location", "Allow", "WWW-Authenticate"}

// call sends one request and checks its status and the exchange.
func (tr *tour) call(name string, s *server.Server, method, target string, body any, status int) map[string]any {
	tr.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			tr.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, s.URL()+target, bytes.NewReader(raw))
	if err != nil {
		tr.t.Fatal(err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := tr.hc.Do(req)
	if err != nil {
		tr.t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tr.t.Fatal(err)
	}
	if resp.StatusCode != status {
		tr.t.Fatalf("%s: %s %s = %d %s, want %d", name, method, target, resp.StatusCode, out, status)
	}
	path, query, _ := strings.Cut(target, "?")
	x := schemacheck.Exchange{Name: name, Method: method, Path: path, Query: query, Status: resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type")}
	if len(raw) > 0 {
		x.Request = raw
	}
	for _, h := range documentedHeaders {
		if v := resp.Header.Get(h); v != "" {
			if x.Headers == nil {
				x.Headers = map[string]string{}
			}
			x.Headers[h] = v
		}
	}
	if strings.HasPrefix(x.ContentType, "application/json") {
		x.Response = out
	} else if len(out) > 0 {
		x.Text = fmt.Sprintf("(%d bytes of %s)", len(out), x.ContentType)
	}
	if err := tr.doc.Check(x); err != nil {
		tr.t.Errorf("%s: %v", name, err)
	}
	tr.seen = append(tr.seen, x)
	if len(out) == 0 || out[0] != '{' {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		tr.t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestTourMatchesOpenAPI walks every operation of the API on a real
// three-node cluster, with successes and the errors clients handle, and
// checks every request and answer against GET /openapi.json's schemas
// (strictly: an answer field the document does not describe fails). With
// -record it also writes the exchanges to api/testdata/examples, which
// api's tests validate on their own.
func TestTourMatchesOpenAPI(t *testing.T) {
	c := servertest.StartCluster(t, 3, func(_ int, cfg *server.Config) {
		cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"}
	})
	leader, fs := c.Leader(), c.Followers()
	f1, f2 := fs[0], fs[1]
	tr := &tour{t: t, hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
	docResp, err := http.Get(f1.URL() + api.PathOpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(docResp.Body)
	docResp.Body.Close()
	if tr.doc, err = schemacheck.ParseDocument(served); err != nil {
		t.Fatal(err)
	}

	tr.call("health", f1, "GET", "/health", nil, 200)
	tr.call("health-head", f1, "HEAD", "/health", nil, 200)
	tr.call("openapi", f1, "GET", "/openapi.json", nil, 200)
	tr.call("ready-without-workers", f1, "GET", "/ready", nil, 503)

	// The catalog, written through a follower, the leader, and refused.
	w1 := tr.call("register-through-follower", f1, "POST", "/workers", workerBody(1, 2), 201)
	tr.call("register-on-leader", leader, "POST", "/workers",
		merge(workerBody(2, 1), map[string]any{"total_kv_blocks": 4096, "max_num_batched_tokens": 8192}), 201)
	tr.call("register-redirect", f2, "POST", "/workers?redirect=true", workerBody(2, 1), 307)
	tr.call("register-incomplete", leader, "POST", "/workers",
		map[string]any{"worker_id": 3, "model_name": "model", "block_size": 32}, 201)
	tr.call("patch", f2, "PATCH", "/workers/3", map[string]any{"endpoint": "http://worker3:8000"}, 200)
	tr.call("register-misspelt-field", f1, "POST", "/workers", map[string]any{"worker_id": 4, "blocksize": 16}, 400)
	tr.call("patch-unknown-worker", f1, "PATCH", "/workers/99", map[string]any{"endpoint": "http://x:1"}, 404)
	// Leases: renewed through a follower, one or many at a time.
	tr.call("register-leased", f2, "POST", "/workers", merge(workerBody(5, 1), map[string]any{"lease_ttl_s": 60}), 201)
	tr.call("keepalive-through-follower", f1, "POST", "/workers/5/keepalive", nil, 200)
	tr.call("keepalive-batch", f2, "POST", "/workers/keepalive", map[string]any{"worker_ids": []uint64{5, 1, 99}}, 200)
	tr.call("keepalive-without-lease", leader, "POST", "/workers/1/keepalive", nil, 409)
	tr.call("keepalive-unknown-worker", f1, "POST", "/workers/99/keepalive", nil, 404)
	tr.call("delete-leased", leader, "DELETE", "/workers/5", nil, 200)
	idx := fmt.Sprint(w1["catalog_index"])
	tr.call("list-workers", f2, "GET", "/workers?model_name=model", nil, 200)
	tr.call("list-workers-linearizable", f2, "GET", "/workers?consistency=linearizable", nil, 200)
	tr.call("get-worker", f1, "GET", "/workers/1", nil, 200)
	tr.call("get-worker-unknown", f1, "GET", "/workers/99", nil, 404)
	tr.call("ready", f1, "GET", "/ready", nil, 200)
	tr.call("metrics", f1, "GET", "/metrics", nil, 200)
	tr.call("wrong-method", f1, "PUT", "/workers", nil, 405)
	tr.call("unknown-route", f1, "GET", "/nope", nil, 404)
	tr.call("too-large", f1, "POST", "/select", bytes.Repeat([]byte(" "), api.MaxBodyBytes+1), 413)

	// Selection on a follower, with blocks in its index.
	cache(t, f1, 1, 0, indexer.TierDevice, 0, 11, 12, 13, 14)
	cache(t, f1, 1, 0, indexer.TierHost, 14, 15, 16)
	cache(t, f1, 1, 1, indexer.TierDisk, 0, 11, 12)
	prompt := map[string]any{"model_name": "model", "block_hashes": []uint64{11, 12, 13, 14, 15, 16, 17, 18},
		"sequence_hashes": []uint64{21, 22, 23, 24, 25, 26, 27, 28}, "isl_tokens": 128, "min_catalog_index": w1["catalog_index"]}
	tr.call("select", f1, "POST", "/select", merge(prompt, map[string]any{"selection_id": "sel-1",
		"router_config_override": map[string]any{"overlap_score_weight": 1.0, "router_temperature": 0.0}}), 200)
	tr.call("select-policy", f1, "POST", "/select", merge(prompt, map[string]any{
		"router_config_override": map[string]any{"policy": "agentic", "prefill_load_scale": 2.0, "assume_kv_reuse": false}}), 200)
	tr.call("select-tokens", f1, "POST", "/select", map[string]any{"model_name": "model", "routing_group": "default",
		"token_ids": []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}}, 200)
	tr.call("select-unknown-model", f1, "POST", "/select", map[string]any{"model_name": "nope", "token_ids": []uint32{1}}, 503)
	tr.call("select-catalog-behind", f2, "POST", "/select", merge(prompt, map[string]any{"min_catalog_index": 1 << 40, "require_catalog": true}), 503)
	tr.call("select-catalog-behind-answered", f2, "POST", "/select", merge(prompt, map[string]any{"min_catalog_index": 1 << 40}), 200)
	tr.call("reserve-selection", f1, "POST", "/reservations", map[string]any{"reservation_id": "r-1", "selection_id": "sel-1"}, 201)
	tr.call("reserve-selection-again", f1, "POST", "/reservations", map[string]any{"reservation_id": "r-9", "selection_id": "sel-1"}, 404)
	tr.call("reserve-bad-id", f1, "POST", "/reservations", map[string]any{"reservation_id": "a/b", "selection_id": "sel-1"}, 400)
	tr.call("select-and-reserve", f1, "POST", "/select_and_reserve", merge(prompt, map[string]any{"reservation_id": "r-2"}), 200)
	tr.call("select-and-reserve-retry", f1, "POST", "/select_and_reserve", merge(prompt, map[string]any{"reservation_id": "r-2"}), 200)
	tr.call("select-and-reserve-duplicate", f1, "POST", "/select_and_reserve", merge(prompt, map[string]any{"reservation_id": "r-2",
		"sequence_hashes": []uint64{21, 22, 23, 24, 25, 26, 27, 29}}), 409)
	tr.call("reserve-worker", f1, "POST", "/reservations", map[string]any{"reservation_id": "r-3", "model_name": "model",
		"worker_id": 2, "dp_rank": 0, "sequence_hashes": []uint64{21, 22, 31}, "isl_tokens": 48, "effective_prefill_tokens": 48}, 201)
	page := tr.call("list-reservations", f1, "GET", "/reservations?model_name=model&limit=2", nil, 200)
	tr.call("list-reservations-next", f1, "GET", "/reservations?cursor="+fmt.Sprint(page["next_cursor"]), nil, 200)
	tr.call("list-reservations-by-worker", f1, "GET", "/reservations?worker_id=2", nil, 200)
	tr.call("prefill-complete", f1, "POST", "/reservations/r-1/prefill_complete", nil, 200)
	tr.call("output-block", f1, "POST", "/reservations/r-1/output_block", nil, 200)
	tr.call("output-block-decay", f1, "POST", "/reservations/r-1/output_block", map[string]any{"decay_fraction": 0.5}, 200)
	tr.call("output-block-bad-decay", f1, "POST", "/reservations/r-1/output_block", map[string]any{"decay_fraction": 2}, 400)
	tr.call("get-reservation", f1, "GET", "/reservations/r-1", nil, 200)
	servertest.Eventually(t, "replica sync mirrors r-1 on another node", func() error {
		if _, err := f2.Scheduler.Reservation("r-1"); err != nil {
			return err
		}
		return nil
	})
	tr.call("get-mirrored-reservation", f2, "GET", "/reservations/r-1", nil, 200)
	tr.call("loads", f1, "GET", "/loads?model_name=model", nil, 200)
	tr.call("potential-loads", f1, "POST", "/potential_loads", prompt, 200)
	tr.call("overlap-scores", f1, "POST", "/overlap_scores", prompt, 200)
	tr.call("dump", f1, "GET", "/dump", nil, 200)

	// Load shedding's thresholds, written through a follower.
	tr.call("busy-threshold-set", f1, "POST", "/busy_threshold",
		map[string]any{"model": "model", "active_decode_blocks_threshold": 0.85, "active_prefill_tokens_threshold": 10000}, 200)
	tr.call("busy-threshold-merge", leader, "POST", "/busy_threshold", map[string]any{"model": "model", "active_prefill_tokens_threshold": 20000}, 200)
	tr.call("busy-threshold-read", f2, "POST", "/busy_threshold", map[string]any{"model": "model"}, 200)
	tr.call("busy-threshold-out-of-range", f1, "POST", "/busy_threshold", map[string]any{"model": "model", "active_decode_blocks_threshold": 1.5}, 400)
	tr.call("busy-threshold-list", f2, "GET", "/busy_threshold", nil, 200)
	tr.call("list-workers-thresholds-not-checked", f1, "GET", "/workers/1", nil, 200)
	tr.call("busy-threshold-clear", f2, "DELETE", "/busy_threshold?model=model", nil, 200)

	// Selection policies, written through a follower: a partition's, and
	// the cluster default (model_name "*").
	tr.call("policy-set", f1, "PUT", "/policies", map[string]any{"model_name": "model", "policy": "two-tier",
		"parameters": map[string]any{"cache_threshold": 0.6, "assume_kv_reuse": false}}, 200)
	tr.call("policy-set-default", leader, "PUT", "/policies", map[string]any{"model_name": "*", "policy": "round-robin"}, 200)
	tr.call("policy-unknown-parameter", f2, "PUT", "/policies", map[string]any{"model_name": "model", "policy": "two-tier",
		"parameters": map[string]any{"cache_treshold": 0.6}}, 400)
	tr.call("policy-list", f2, "GET", "/policies", nil, 200)
	tr.call("policy-delete", f2, "DELETE", "/policies?model_name=model", nil, 200)
	tr.call("policy-delete-absent", f1, "DELETE", "/policies?model_name=model", nil, 404)
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		tr.call("free-"+id, f1, "DELETE", "/reservations/"+id, nil, 200)
	}
	tr.call("free-unknown", f1, "DELETE", "/reservations/r-1", nil, 404)
	tr.call("prefill-complete-unknown", f1, "POST", "/reservations/r-1/prefill_complete", nil, 404)

	// The cluster: status, metadata, a member added and removed, a
	// step-down.
	st := tr.call("cluster-status", f2, "GET", "/cluster/status", nil, 200)
	if st["catalog_index"] == nil || idx == "" {
		t.Fatalf("cluster status %v", st)
	}
	tr.call("cluster-metadata", f1, "POST", "/cluster/metadata", map[string]any{"id": servertest.NodeID(c.Index(f1)),
		"http_addr": strings.TrimPrefix(f1.URL(), "http://")}, 200)
	// The leader checks that a joiner's Raft address answers.
	joiner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer joiner.Close()
	tr.call("cluster-join", f1, "POST", "/cluster/join", map[string]any{"id": "n9", "raft_addr": joiner.Addr().String()}, 200)
	tr.call("cluster-remove", f2, "POST", "/cluster/remove", map[string]any{"id": "n9"}, 200)
	tr.call("cluster-remove-again", f2, "POST", "/cluster/remove", map[string]any{"id": "n9"}, 200)
	tr.call("delete-worker", f2, "DELETE", "/workers/3", nil, 200)

	// Replica-sync peers: the members are followed without asking.
	tr.call("replica-sync-peers", f1, "GET", "/replica_sync/peers", nil, 200)
	status := tr.call("replica-sync-status", f1, "GET", "/replica_sync/status", nil, 200)
	member := fmt.Sprint(status["peers"].([]any)[0].(map[string]any)["endpoint"])
	tr.call("replica-sync-register", f1, "POST", "/replica_sync/register_peer", map[string]any{"endpoint": "tcp://127.0.0.1:1"}, 201)
	tr.call("replica-sync-register-again", f1, "POST", "/replica_sync/register_peer", map[string]any{"endpoint": "tcp://127.0.0.1:1"}, 200)
	tr.call("replica-sync-register-bad", f1, "POST", "/replica_sync/register_peer", map[string]any{"endpoint": "http://x:1"}, 400)
	tr.call("replica-sync-deregister", f1, "POST", "/replica_sync/deregister_peer", map[string]any{"endpoint": "tcp://127.0.0.1:1"}, 200)
	tr.call("replica-sync-deregister-unknown", f1, "POST", "/replica_sync/deregister_peer", map[string]any{"endpoint": "tcp://127.0.0.1:1"}, 404)
	tr.call("replica-sync-deregister-member", f1, "POST", "/replica_sync/deregister_peer", map[string]any{"endpoint": member}, 409)
	tr.call("cluster-stepdown", f1, "POST", "/cluster/stepdown", nil, 200)

	// An orchestrator's readiness probe, once the step-down's election is
	// over and f1 has caught up with the new leader.
	servertest.Eventually(t, "f1 is a caught-up member again", func() error {
		resp, err := http.Get(f1.URL() + api.PathReadyz)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz = %d", resp.StatusCode)
		}
		return nil
	})
	tr.call("readyz", f1, "GET", "/readyz", nil, 200)
	tr.call("readyz-selection", f1, "GET", "/readyz?for=selection", nil, 200)
	tr.call("readyz-bad-for", f1, "GET", "/readyz?for=writes", nil, 400)

	// Every operation of the document succeeded at least once.
	done := map[string]bool{}
	for _, x := range tr.seen {
		if op, ok := tr.doc.Find(x.Method, x.Path); ok && x.Status < 300 {
			done[op.Method+" "+op.Path] = true
		}
	}
	for _, op := range tr.doc.Operations() {
		if !done[op.Method+" "+op.Path] {
			t.Errorf("the tour never succeeded at %s %s", op.Method, op.Path)
		}
	}
	if *record && !t.Failed() {
		writeExamples(t, tr.seen)
	}
}

// writeExamples replaces the recorded examples with the tour's.
func writeExamples(t *testing.T, xs []schemacheck.Exchange) {
	old, _ := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	for _, f := range old {
		os.Remove(f)
	}
	if err := os.MkdirAll(examplesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	unsafe := regexp.MustCompile(`[^a-z0-9-]+`)
	const keep = 16 << 10 // bodies past this are not worth a file
	for i, x := range xs {
		if len(x.Request) > keep {
			x.Request = nil
		}
		if len(x.Response) > keep {
			x.Text, x.Response = fmt.Sprintf("(%d bytes of %s, not recorded)", len(x.Response), x.ContentType), nil
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(x); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%02d-%s.json", i, unsafe.ReplaceAllString(x.Name, "-"))
		if err := os.WriteFile(filepath.Join(examplesDir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
