package http_test

import (
	"strings"
	"testing"
	"time"

	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/server"
)

// Test_BadInput sends malformed, mistyped, incomplete and out-of-range
// requests to every route and checks the status, the machine code and that
// the message names the offending field. After all of it the node still
// works and its state is untouched.
func Test_BadInput(t *testing.T) {
	_, c := startNode(t, func(cfg *server.Config) {
		cfg.CatalogWait = 50 * time.Millisecond
		// The load check at the end reads the booking's prefill in full;
		// under -race on a loaded machine the requests between can take
		// longer than the hold before prefill fades (scheduler/ttft.go).
		cfg.Scheduler.NoPrefillDecay = true
	})
	c.expect(201, "POST", "/workers", defaultScopeWorker(1))
	okSel := `"block_hashes":[1,2],"sequence_hashes":[3,4],"isl_tokens":32`
	c.expect(200, "POST", "/select_and_reserve", `{`+okSel+`,"reservation_id":"taken"}`)

	tests := []struct {
		name, method, path, body string
		status                   int
		code, mention            string
	}{
		// catalog
		{"malformed json", "POST", "/workers", `{"worker_id":`, 400, "bad_request", "malformed JSON"},
		{"empty body", "POST", "/workers", ``, 400, "bad_request", "body is required"},
		{"array body", "POST", "/workers", `[]`, 400, "bad_request", "JSON object"},
		{"trailing data", "POST", "/workers", `{"worker_id":1} {}`, 400, "bad_request", "after the JSON object"},
		{"worker_id wrong type", "POST", "/workers", `{"worker_id":"7"}`, 400, "bad_request", "worker_id"},
		{"worker_id missing", "POST", "/workers", `{"endpoint":"http://x"}`, 400, "bad_request", "worker_id"},
		{"worker_id negative", "POST", "/workers", `{"worker_id":-1}`, 400, "bad_request", "worker_id"},
		{"block_size negative", "POST", "/workers", `{"worker_id":2,"block_size":-16}`, 400, "bad_request", "block_size"},
		{"block_size huge", "POST", "/workers", `{"worker_id":2,"block_size":1000000}`, 400, "bad_request", "block_size"},
		{"dp size zero", "POST", "/workers", `{"worker_id":2,"data_parallel_size":0}`, 400, "bad_request", "data_parallel_size"},
		{"endpoint map key", "POST", "/workers", `{"worker_id":2,"kv_events_endpoints":{"x":"tcp://h:1"}}`, 400, "bad_request", "kv_events_endpoints"},
		{"endpoint map value", "POST", "/workers", `{"worker_id":2,"kv_events_endpoints":{"0":5}}`, 400, "bad_request", "kv_events_endpoints"},
		{"endpoint scheme", "POST", "/workers", `{"worker_id":2,"kv_events_endpoints":{"0":"http://h:1"}}`, 400, "bad_request", `kv_events_endpoints["0"]`},
		{"both endpoint forms", "POST", "/workers", `{"worker_id":2,"kv_events_endpoint":"tcp://h:1","kv_events_endpoints":{"0":"tcp://h:1"}}`, 400, "bad_request", "kv_events_endpoint"},
		{"replay endpoint", "POST", "/workers", `{"worker_id":2,"replay_endpoint":"nope"}`, 400, "bad_request", "replay_endpoint"},
		{"replay endpoint with a space", "POST", "/workers", `{"worker_id":2,"replay_endpoint":"tcp://w 1:5560"}`, 400, "bad_request", "replay_endpoint"},
		{"kv events endpoint with a newline", "POST", "/workers", `{"worker_id":2,"kv_events_endpoint":"tcp://w:5557\n"}`, 400, "bad_request", "kv_events_endpoint"},
		{"kv events endpoint bad host", "POST", "/workers", `{"worker_id":2,"kv_events_endpoints":{"0":"tcp://w^x:5557"}}`, 400, "bad_request", `kv_events_endpoints["0"]`},
		{"endpoint without a scheme", "POST", "/workers", `{"worker_id":2,"endpoint":"worker:8000"}`, 400, "bad_request", "endpoint"},
		{"endpoint without a host", "POST", "/workers", `{"worker_id":2,"endpoint":"http:///generate"}`, 400, "bad_request", "endpoint"},
		{"endpoint with a space", "POST", "/workers", `{"worker_id":2,"endpoint":"http://worker :8000"}`, 400, "bad_request", "endpoint"},
		{"endpoint with a control character", "POST", "/workers", `{"worker_id":2,"endpoint":"http://worker:8000\u0007"}`, 400, "bad_request", "endpoint"},
		{"endpoint bad port", "POST", "/workers", `{"worker_id":2,"endpoint":"http://worker:70000"}`, 400, "bad_request", "endpoint"},
		{"patch endpoint malformed", "PATCH", "/workers/1", `{"endpoint":"http//worker:8000"}`, 400, "bad_request", "endpoint"},
		{"patch replay endpoint malformed", "PATCH", "/workers/1", `{"replay_endpoint":"tcp://w:0"}`, 400, "bad_request", "replay_endpoint"},
		{"null body", "POST", "/workers", `null`, 400, "bad_request", "JSON object"},
		{"unknown field", "POST", "/workers", `{"worker_id":2,"blocksize":16}`, 400, "bad_request", "blocksize"},
		{"patch null", "PATCH", "/workers/1", `null`, 400, "bad_request", "JSON object"},
		{"patch nothing", "PATCH", "/workers/1", `{}`, 400, "bad_request", "changes nothing"},
		{"patch only the id", "PATCH", "/workers/1", `{"worker_id":1}`, 400, "bad_request", "changes nothing"},
		{"patch unknown field", "PATCH", "/workers/1", `{"endpont":"http://x"}`, 400, "bad_request", "endpont"},
		{"patch unknown", "PATCH", "/workers/9", `{"endpoint":"http://x"}`, 404, "not_found", "9"},
		{"patch bad id", "PATCH", "/workers/abc", `{}`, 400, "bad_request", "worker_id"},
		{"patch id mismatch", "PATCH", "/workers/1", `{"worker_id":2}`, 400, "bad_request", "worker_id"},
		{"patch dp zero", "PATCH", "/workers/1", `{"data_parallel_size":0}`, 400, "bad_request", "data_parallel_size"},
		{"delete unknown", "DELETE", "/workers/9", ``, 404, "not_found", "9"},
		{"get bad id", "GET", "/workers/-1", ``, 400, "bad_request", "worker_id"},
		{"get unknown", "GET", "/workers/9", ``, 404, "not_found", "9"},
		{"bad consistency", "GET", "/workers?consistency=strong", ``, 400, "bad_request", "consistency"},

		// selection
		{"block_hashes missing", "POST", "/select", `{"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "block_hashes"},
		{"sequence_hashes missing", "POST", "/select", `{"block_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "sequence_hashes"},
		{"length mismatch", "POST", "/select", `{"block_hashes":[1,2],"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "sequence_hashes"},
		{"isl zero", "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":0}`, 400, "bad_request", "isl_tokens"},
		{"isl too large", "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":4294967297}`, 400, "bad_request", "isl_tokens"},
		{"isl missing", "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1]}`, 400, "bad_request", "isl_tokens"},
		{"isl wrong type", "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":"16"}`, 400, "bad_request", "isl_tokens"},
		{"hashes not array", "POST", "/select", `{"block_hashes":"1","sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "block_hashes"},
		{"hash not integer", "POST", "/select", `{"block_hashes":["a"],"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "block_hashes[0]"},
		{"hash fraction", "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1.5],"isl_tokens":16}`, 400, "bad_request", "sequence_hashes[0]"},
		{"hash above u64", "POST", "/select", `{"block_hashes":[18446744073709551616],"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "block_hashes[0]"},
		{"hash below i64", "POST", "/select", `{"block_hashes":[-9223372036854775809],"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "block_hashes[0]"},
		{"tokens and hashes", "POST", "/select", `{"token_ids":[1],"block_hashes":[1]}`, 400, "bad_request", "token_ids"},
		{"token negative", "POST", "/select", `{"token_ids":[1,-1]}`, 400, "bad_request", "token_ids[1]"},
		{"token above u32", "POST", "/select", `{"token_ids":[4294967296]}`, 400, "bad_request", "token_ids[0]"},
		{"tokens empty", "POST", "/select", `{"token_ids":[]}`, 400, "bad_request", "token_ids"},
		{"lora without tokens", "POST", "/select", `{` + okSel + `,"lora_name":"x"}`, 400, "bad_request", "lora_name"},
		{"override negative", "POST", "/select", `{` + okSel + `,"router_config_override":{"overlap_score_weight":-1}}`, 400, "bad_request", "router_config_override.overlap_score_weight"},
		{"override wrong type", "POST", "/select", `{` + okSel + `,"router_config_override":{"router_temperature":"hot"}}`, 400, "bad_request", "router_config_override.router_temperature"},
		{"model wrong type", "POST", "/select", `{` + okSel + `,"model_name":7}`, 400, "bad_request", "model_name"},
		{"unknown model", "POST", "/select", `{` + okSel + `,"model_name":"nope"}`, 503, "unknown_partition", `"nope"`},
		{"unknown tenant", "POST", "/select", `{` + okSel + `,"tenant_id":"nope"}`, 503, "unknown_partition", `"nope"`},
		{"reservation on select", "POST", "/select", `{` + okSel + `,"reservation_id":"a"}`, 400, "bad_request", "reservation_id"},
		{"catalog behind", "POST", "/select", `{` + okSel + `,"min_catalog_index":1000000,"require_catalog":true}`, 503, "catalog_behind", "1000000"},
		{"require_catalog not a bool", "POST", "/select", `{` + okSel + `,"require_catalog":"yes"}`, 400, "bad_request", "require_catalog"},
		{"min index wrong type", "POST", "/select", `{` + okSel + `,"min_catalog_index":-1}`, 400, "bad_request", "min_catalog_index"},
		{"empty reservation id", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":""}`, 400, "bad_request", "reservation_id"},
		{"misspelt reservation id", "POST", "/select_and_reserve", `{` + okSel + `,"reservationid":"r9"}`, 400, "bad_request", "reservationid"},
		{"reservation id with a slash", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":"a/b"}`, 400, "bad_request", "reservation_id"},
		{"reservation id with a space", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":"a b"}`, 400, "bad_request", "reservation_id"},
		{"reservation id not ascii", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":"é"}`, 400, "bad_request", `reservation_id: byte 0 is '\xc3'`},
		{"reservation id with a percent", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":"a%2Fb"}`, 400, "bad_request", "reservation_id"},
		{"reservation id too long", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":"` + strings.Repeat("r", 257) + `"}`, 400, "bad_request", "reservation_id"},
		{"reservation id not a string", "POST", "/select_and_reserve", `{` + okSel + `,"reservation_id":7}`, 400, "bad_request", "reservation_id"},
		{"selection id with a hash", "POST", "/select", `{` + okSel + `,"selection_id":"s#1"}`, 400, "bad_request", "selection_id"},
		{"unknown override field", "POST", "/select", `{` + okSel + `,"router_config_override":{"weight":2}}`, 400, "bad_request", "router_config_override.weight"},
		{"unknown policy", "POST", "/select", `{` + okSel + `,"router_config_override":{"policy":"fastest"}}`, 400, "bad_request", `unknown policy "fastest"`},
		{"boolean override as a number", "POST", "/select", `{` + okSel + `,"router_config_override":{"assume_kv_reuse":0}}`, 400, "bad_request", "router_config_override.assume_kv_reuse"},
		{"routing group differs from tenant", "POST", "/select", `{` + okSel + `,"tenant_id":"a","routing_group":"b"}`, 400, "bad_request", "routing_group"},
		{"duplicate reservation, another prompt", "POST", "/select_and_reserve", `{"block_hashes":[1,2],"sequence_hashes":[3,5],"isl_tokens":32,"reservation_id":"taken"}`, 409, "conflict", "taken"},
		{"potential loads malformed", "POST", "/potential_loads", `{`, 400, "bad_request", "malformed"},
		{"overlap scores missing", "POST", "/overlap_scores", `{"isl_tokens":16}`, 400, "bad_request", "block_hashes"},
		{"overlap scores unknown model", "POST", "/overlap_scores", `{` + okSel + `,"model_name":"nope"}`, 503, "unknown_partition", `"default"/"default"`},

		// reservations
		{"reservation id missing", "POST", "/reservations", `{"worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "reservation_id"},
		{"reservation worker missing", "POST", "/reservations", `{"reservation_id":"x","sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "worker_id"},
		{"prefill above isl", "POST", "/reservations", `{"reservation_id":"x","worker_id":1,"sequence_hashes":[1],"isl_tokens":16,"effective_prefill_tokens":17}`, 400, "bad_request", "effective_prefill_tokens"},
		{"prefill negative", "POST", "/reservations", `{"reservation_id":"x","worker_id":1,"sequence_hashes":[1],"isl_tokens":16,"effective_prefill_tokens":-1}`, 400, "bad_request", "effective_prefill_tokens"},
		{"reservation isl zero", "POST", "/reservations", `{"reservation_id":"x","worker_id":1,"sequence_hashes":[1],"isl_tokens":0}`, 400, "bad_request", "isl_tokens"},
		{"reservation unknown worker", "POST", "/reservations", `{"reservation_id":"x","worker_id":9,"sequence_hashes":[1],"isl_tokens":16}`, 404, "not_found", "9"},
		{"reservation unknown rank", "POST", "/reservations", `{"reservation_id":"x","worker_id":1,"dp_rank":3,"sequence_hashes":[1],"isl_tokens":16}`, 404, "not_found", "dp_rank 3"},
		{"reservation unknown model", "POST", "/reservations", `{"reservation_id":"x","model_name":"nope","worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, 503, "unknown_partition", "nope"},
		{"reservation id dot", "POST", "/reservations", `{"reservation_id":".","worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, 400, "bad_request", "reservation_id"},
		{"reservation id dot-dot", "POST", "/select_and_reserve", `{"reservation_id":"..",` + okSel + `}`, 400, "bad_request", "reservation_id"},
		{"selection id dot-dot", "POST", "/select", `{"selection_id":"..",` + okSel + `}`, 400, "bad_request", "selection_id"},
		{"reservation duplicate", "POST", "/reservations", `{"reservation_id":"taken","worker_id":1,"sequence_hashes":[1],"isl_tokens":16}`, 409, "conflict", "taken"},
		{"prefill_complete unknown", "POST", "/reservations/nope/prefill_complete", ``, 404, "not_found", "nope"},
		{"prefill_complete with a field", "POST", "/reservations/taken/prefill_complete", `{"x":1}`, 400, "bad_request", "x"},
		{"prefill_complete not an object", "POST", "/reservations/taken/prefill_complete", `[]`, 400, "bad_request", "JSON object"},
		{"output_block unknown", "POST", "/reservations/nope/output_block", `{}`, 404, "not_found", "nope"},
		{"decay above one", "POST", "/reservations/taken/output_block", `{"decay_fraction":1.5}`, 400, "bad_request", "decay_fraction"},
		{"decay negative", "POST", "/reservations/taken/output_block", `{"decay_fraction":-0.1}`, 400, "bad_request", "decay_fraction"},
		{"decay wrong type", "POST", "/reservations/taken/output_block", `{"decay_fraction":"half"}`, 400, "bad_request", "decay_fraction"},
		{"delete unknown reservation", "DELETE", "/reservations/nope", ``, 404, "not_found", "nope"},
		{"override on a reservation", "POST", "/reservations", `{"reservation_id":"x","worker_id":1,"sequence_hashes":[1],"isl_tokens":16,"router_config_override":{}}`, 400, "bad_request", "router_config_override"},
		{"selection and worker", "POST", "/reservations", `{"reservation_id":"x","selection_id":"s","worker_id":1}`, 400, "bad_request", "selection_id"},
		{"no pending selection", "POST", "/reservations", `{"reservation_id":"x","selection_id":"never-made"}`, 404, "not_found", "no pending selection"},
		{"get unknown reservation", "GET", "/reservations/nope", ``, 404, "not_found", "nope"},
		{"bad reservation id in path", "GET", "/reservations/a%20b", ``, 400, "bad_request", "reservation_id"},
		{"list bad limit", "GET", "/reservations?limit=0", ``, 400, "bad_request", "limit"},
		{"list limit too large", "GET", "/reservations?limit=1001", ``, 400, "bad_request", "limit"},
		{"list bad worker", "GET", "/reservations?worker_id=x", ``, 400, "bad_request", "worker_id"},
		{"list bad cursor", "GET", "/reservations?cursor=%21%21", ``, 400, "bad_request", "cursor"},

		// cluster
		{"join without id", "POST", "/cluster/join", `{"raft_addr":"127.0.0.1:1"}`, 400, "bad_request", "id"},
		{"join without address", "POST", "/cluster/join", `{"id":"n2"}`, 400, "bad_request", "raft_addr"},
		{"join unspecified address", "POST", "/cluster/join", `{"id":"n2","raft_addr":"0.0.0.0:7000"}`, 400, "bad_request", "raft_addr"},
		{"remove without id", "POST", "/cluster/remove", `{}`, 400, "bad_request", "id"},
		{"step down alone", "POST", "/cluster/stepdown", ``, 409, "conflict", "no other voter"},

		// routing
		{"unknown route", "GET", "/nope", ``, 404, "not_found", "no such route"},
		{"wrong method", "PUT", "/workers", `{}`, 405, "method_not_allowed", "not allowed"},
		{"wrong method select", "GET", "/select", ``, 405, "method_not_allowed", "not allowed"},
		{"dot-dot segment", "DELETE", "/workers/999/../1", ``, 400, "bad_request", "path"},
		{"dot segment", "GET", "/workers/./1", ``, 400, "bad_request", "path"},
		{"empty segment", "GET", "//workers", ``, 400, "bad_request", "path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			r := c.do(tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s %s = %d %s, want %d", tt.method, tt.path, tt.body, r.status, r.raw, tt.status)
			}
			body := r.json(t)
			if body["code"] != tt.code {
				t.Fatalf("code = %v, want %s (%s)", body["code"], tt.code, r.raw)
			}
			msg, _ := body["error"].(string)
			if !strings.Contains(msg, tt.mention) {
				t.Fatalf("error %q does not mention %q", msg, tt.mention)
			}
			// A 400 about a field starts with that field's JSON name.
			if tt.status == 400 && !strings.Contains(tt.mention, " ") && !strings.HasPrefix(msg, tt.mention) {
				t.Fatalf("error %q does not start with the field %q", msg, tt.mention)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type = %q", ct)
			}
		})
	}
	c.t = t

	// A body past 8 MiB is refused with 413.
	huge := `{"block_hashes":[` + strings.Repeat("1,", 5<<20) + `1]}`
	if r := c.do("POST", "/select", huge); r.status != 413 || r.json(t)["code"] != "payload_too_large" {
		t.Fatalf("huge body = %d %.200s", r.status, r.raw)
	}
	// More than 2^20 hashes (SPEC §11, api.MaxHashes) is a 400 naming the field, well
	// inside the body limit.
	many := `{"block_hashes":[` + strings.Repeat("1,", 1<<20) + `1],"sequence_hashes":[1],"isl_tokens":16}`
	if r := c.do("POST", "/select", many); r.status != 400 || !strings.HasPrefix(r.json(t)["error"].(string), "block_hashes") {
		t.Fatalf("2^20+1 hashes = %d %.200s", r.status, r.raw)
	}
	// Messages read as sent: no HTML escaping of ">=".
	if r := c.do("POST", "/select", `{`+okSel+`,"router_config_override":{"router_temperature":-1}}`); !strings.Contains(string(r.raw), ">= 0") {
		t.Fatalf("escaped message: %s", r.raw)
	}
	// Dynamo's cost parameters under a policy that does not take them are
	// left out and named in a header, not refused: Dynamo clients send
	// them whatever the router runs.
	if r := c.do("POST", "/select", `{`+okSel+`,"router_config_override":{"policy":"two-tier","overlap_score_credit":2,"router_temperature":0}}`); r.status != 200 ||
		r.header.Get("X-Kvselect-Ignored-Override") != "overlap_score_credit,router_temperature" {
		t.Fatalf("ignored override = %d %q %s", r.status, r.header.Get("X-Kvselect-Ignored-Override"), r.raw)
	}
	// The X-Kvselect-Index header must be a number.
	c.hdr = map[string]string{"X-Kvselect-Index": "soon"}
	if r := c.do("POST", "/select", `{`+okSel+`}`); r.status != 400 {
		t.Fatalf("bad index header = %d %s", r.status, r.raw)
	}
	c.hdr = nil

	// Nothing above changed state: one worker, one reservation.
	if r := c.do("GET", "/workers", nil); strings.Count(string(r.raw), `"worker_id"`) != 1 {
		t.Fatalf("workers after bad input: %s", r.raw)
	}
	checkLoad(t, loadsOf(t, c, "default"), "1/0", 32, 2, 1)
}

// defaultScopeWorker is a one-rank worker in the default model and tenant.
func defaultScopeWorker(id uint64) map[string]any {
	w := workerBody(id, 1)
	delete(w, "model_name")
	return w
}

// Test_Auth checks on a real node that a configured token protects admin
// routes only with --auth-scope admin, or every route but the open ones
// by default. Every route with every kind of Authorization is
// Test_AuthEveryRoute's (auth_test.go); the selection token's, the
// server's Test_AuthRoles.
func Test_Auth(t *testing.T) {
	for _, scope := range []httpd.Scope{httpd.ScopeAdmin, ""} { // "" is the default: all
		all := scope == ""
		_, c := startNode(t, func(cfg *server.Config) { cfg.AuthToken, cfg.AuthScope = "s3cret", scope })
		if r := c.do("POST", "/workers", workerBody(1, 1)); r.status != 401 || r.json(t)["code"] != "unauthorized" ||
			r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("write without token = %d %s", r.status, r.raw)
		}
		c.hdr = map[string]string{"Authorization": "Bearer wrong"}
		c.expect(401, "GET", "/dump", nil)
		c.hdr = map[string]string{"Authorization": "Bearer s3cret"}
		c.expect(201, "POST", "/workers", defaultScopeWorker(1))
		c.expect(200, "GET", "/dump", nil)
		c.hdr = nil
		c.expect(200, "GET", "/health", nil)
		want := 200
		if all {
			want = 401
		}
		if r := c.do("POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`); r.status != want {
			t.Fatalf("select without token (all=%v) = %d %s", all, r.status, r.raw)
		}
	}
}
