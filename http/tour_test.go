package http_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/version"
)

// Test_PathsAreNeverCleaned: a path with dot segments is refused with a
// JSON 400, never redirected to another resource (a client following a
// redirect would delete worker 1 here).
func Test_PathsAreNeverCleaned(t *testing.T) {
	s, c := startNode(t)
	c.expect(201, "POST", "/workers", defaultScopeWorker(1))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/workers/999/../1", "/workers/999/%2e%2e/1", "/workers/./1", "/reservations/x/../../workers/1"} {
		req, err := http.NewRequest("DELETE", s.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("DELETE %s = %d, Location %q", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	c.expect(200, "GET", "/workers/1", nil) // still there
}

// Test_MethodsAndHead: HEAD works wherever GET does, and every 405 says
// which methods the path takes.
func Test_MethodsAndHead(t *testing.T) {
	_, c := startNode(t)
	for _, path := range []string{"/health", "/workers", "/cluster/status", "/metrics", "/openapi.json"} {
		if r := c.do("HEAD", path, nil); r.status != 200 || len(r.raw) != 0 {
			t.Fatalf("HEAD %s = %d %q", path, r.status, r.raw)
		}
	}
	for _, tt := range []struct{ method, path, allow string }{
		{"PUT", "/workers", "GET, HEAD, POST"},
		{"POST", "/workers/1", "DELETE, GET, HEAD, PATCH"},
		{"GET", "/select", "POST"},
		{"DELETE", "/health", "GET, HEAD"},
		{"PUT", "/reservations/r1", "DELETE, GET, HEAD"},
		{"GET", "/reservations/r1/prefill_complete", "POST"},
	} {
		r := c.do(tt.method, tt.path, nil)
		if r.status != 405 || r.header.Get("Allow") != tt.allow || r.json(t)["code"] != "method_not_allowed" {
			t.Fatalf("%s %s = %d, Allow %q, want %q", tt.method, tt.path, r.status, r.header.Get("Allow"), tt.allow)
		}
	}
}

// Test_RoutingGroupAlias: routing_group, Dynamo's newer name for tenant_id,
// scopes a request like tenant_id does.
func Test_RoutingGroupAlias(t *testing.T) {
	_, c := startNode(t)
	w := workerBody(1, 1)
	w["tenant_id"] = "team-a"
	c.expect(201, "POST", "/workers", w)
	prompt := `"model_name":"model","block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16`
	for _, body := range []string{
		`{` + prompt + `,"routing_group":"team-a"}`,
		`{` + prompt + `,"routing_group":"team-a","tenant_id":"team-a"}`,
	} {
		if sel := c.expect(200, "POST", "/select", body); sel["tenant_id"] != "team-a" {
			t.Fatalf("select %s = %v", body, sel)
		}
	}
	c.expect(503, "POST", "/select", `{`+prompt+`,"routing_group":"team-b"}`)

	// On registrations and patches too, and as the listings' filter.
	w2 := workerBody(2, 1)
	w2["routing_group"] = "team-b"
	if rec := c.expect(201, "POST", "/workers", w2); rec["tenant_id"] != "team-b" {
		t.Fatalf("registered with routing_group: %v", rec)
	}
	if rec := c.expect(200, "PATCH", "/workers/2", `{"routing_group":"team-c"}`); rec["tenant_id"] != "team-c" {
		t.Fatalf("patched with routing_group: %v", rec)
	}
	c.expect(400, "PATCH", "/workers/2", `{"routing_group":"team-c","tenant_id":"team-d"}`)
	for _, path := range []string{"/workers?routing_group=team-c", "/workers?tenant_id=team-c&routing_group=team-c"} {
		list := c.expectList(200, "GET", path, nil)
		if len(list) != 1 || list[0].(map[string]any)["worker_id"] != 2.0 {
			t.Fatalf("GET %s = %v", path, list)
		}
	}
	for _, path := range []string{"/workers?tenant_id=a&routing_group=b", "/loads?routing_group=x&tenant_id=y", "/reservations?tenant_id=a&routing_group=b"} {
		c.expect(400, "GET", path, nil)
	}
	if loads := c.expectList(200, "GET", "/loads?routing_group=team-a", nil); len(loads) != 1 {
		t.Fatalf("loads of team-a: %v", loads)
	}
}

// Test_PendingSelection walks Dynamo's pending-selection booking: /select
// with a selection_id remembers the choice; POST /reservations books
// exactly it by id alone, once; a failed booking leaves it for a retry.
func Test_PendingSelection(t *testing.T) {
	s, c := startNode(t)
	c.expect(201, "POST", "/workers", workerBody(1, 2))
	cache(t, s, 1, 1, indexer.TierDevice, 0, 11, 12)
	prompt := `"model_name":"model","block_hashes":[11,12,13],"sequence_hashes":[21,22,23],"isl_tokens":48`
	sel := c.expect(200, "POST", "/select", `{`+prompt+`,"selection_id":"s-1"}`)
	if sel["selection_id"] != "s-1" || sel["dp_rank"] != 1.0 || num(t, sel, "effective_prefill_tokens") != 16 {
		t.Fatalf("select = %v", sel)
	}
	checkLoad(t, loadsOf(t, c), "1/1", 0, 0, 0) // /select books nothing
	// Another booking already holds the id: refused, selection kept.
	c.expect(201, "POST", "/reservations", `{"reservation_id":"taken","worker_id":1,"sequence_hashes":[9],"isl_tokens":16,"model_name":"model"}`)
	c.expect(409, "POST", "/reservations", `{"reservation_id":"taken","selection_id":"s-1"}`)
	booked := c.expect(201, "POST", "/reservations", `{"reservation_id":"r-1","selection_id":"s-1"}`)
	if booked["worker_id"] != 1.0 || booked["dp_rank"] != 1.0 || num(t, booked, "effective_prefill_tokens") != 16 ||
		booked["selection_id"] != "s-1" || booked["model_name"] != "model" {
		t.Fatalf("booking = %v", booked)
	}
	checkLoad(t, loadsOf(t, c), "1/1", 16, 3, 1)
	// Single use.
	if r := c.do("POST", "/reservations", `{"reservation_id":"r-2","selection_id":"s-1"}`); r.status != 404 ||
		!strings.Contains(string(r.raw), "no pending selection") {
		t.Fatalf("second booking = %d %s", r.status, r.raw)
	}
}

// Test_ReservationInspection lists and shows bookings with their state.
func Test_ReservationInspection(t *testing.T) {
	_, c := startNode(t)
	c.expect(201, "POST", "/workers", workerBody(1, 1))
	c.expect(201, "POST", "/workers", workerBody(2, 1))
	for i, worker := range []int{1, 2, 1, 2, 1} {
		c.expect(201, "POST", "/reservations", fmt.Sprintf(
			`{"reservation_id":"r-%d","model_name":"model","worker_id":%d,"sequence_hashes":[%d,%d],"isl_tokens":32,"effective_prefill_tokens":20}`,
			i, worker, 100+i, 200+i))
	}
	c.expect(200, "POST", "/reservations/r-0/prefill_complete", nil)
	c.expect(200, "POST", "/reservations/r-0/output_block", `{"decay_fraction":0.5}`)
	c.expect(200, "POST", "/reservations/r-0/output_block", nil)

	one := c.expect(200, "GET", "/reservations/r-0", nil)
	admitted, err := time.Parse(time.RFC3339Nano, one["admitted_at"].(string))
	if err != nil || time.Since(admitted) > time.Minute || one["origin"] != "local" || one["prefill_complete"] != true ||
		num(t, one, "output_blocks") != 2 || num(t, one, "decay_fraction") != 0.5 || num(t, one, "blocks") != 2 ||
		num(t, one, "prefill_tokens") != 20 || num(t, one, "isl_tokens") != 32 || one["worker_id"] != 1.0 {
		t.Fatalf("GET /reservations/r-0 = %v (%v)", one, err)
	}

	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/reservations?model_name=model&limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		p := c.expect(200, "GET", path, nil)
		for _, r := range p["reservations"].([]any) {
			ids = append(ids, r.(map[string]any)["reservation_id"].(string))
		}
		next, _ := p["next_cursor"].(string)
		if next == "" {
			break
		}
		if page > 3 {
			t.Fatal("paging does not end")
		}
		cursor = next
	}
	if got := strings.Join(ids, " "); got != "r-0 r-1 r-2 r-3 r-4" {
		t.Fatalf("paged ids = %s", got)
	}
	p := c.expect(200, "GET", "/reservations?worker_id=2", nil)
	if n := len(p["reservations"].([]any)); n != 2 || p["next_cursor"] != nil {
		t.Fatalf("worker 2's bookings: %v", p)
	}
	if p := c.expect(200, "GET", "/reservations?model_name=other", nil); len(p["reservations"].([]any)) != 0 {
		t.Fatalf("other model: %v", p)
	}
}

// Test_BuildInfo: /metrics says which build runs.
func Test_BuildInfo(t *testing.T) {
	_, c := startNode(t)
	r := c.do("GET", "/metrics", nil)
	want := fmt.Sprintf(`version="%s"} 1`, version.Version)
	if !strings.Contains(string(r.raw), "kvselect_build_info{") || !strings.Contains(string(r.raw), want) {
		t.Fatalf("/metrics lacks kvselect_build_info with %s", want)
	}
}
