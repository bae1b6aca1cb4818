package http_test

import (
	"strings"
	"testing"
)

// Test_UnknownPartition: on every route that resolves a partition, a
// (model, tenant) the catalog never held a worker for is 503
// unknown_partition, listing the partitions it holds, with no
// Retry-After; one it holds only incomplete workers for, or whose last
// worker left, stays 503 not_ready with Retry-After: an outage, not a
// typo.
func Test_UnknownPartition(t *testing.T) {
	_, c := startNode(t)
	c.expect(201, "POST", "/workers", workerBody(1, 1)) // model/default, schedulable
	half := workerBody(2, 1)
	half["model_name"], half["endpoint"] = "half", ""
	c.expect(201, "POST", "/workers", half) // half/default, incomplete
	gone := workerBody(3, 1)
	gone["model_name"] = "gone"
	c.expect(201, "POST", "/workers", gone)
	c.expect(200, "DELETE", "/workers/3", nil) // gone/default, emptied

	prompt := `"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16`
	routes := []struct{ path, body string }{
		{"/select", `{"model_name":%q,` + prompt + `}`},
		{"/select_and_reserve", `{"model_name":%q,` + prompt + `}`},
		{"/potential_loads", `{"model_name":%q,` + prompt + `}`},
		{"/overlap_scores", `{"model_name":%q,` + prompt + `}`},
		{"/reservations", `{"reservation_id":"r","worker_id":2,"model_name":%q,"sequence_hashes":[1],"isl_tokens":16}`},
	}
	partitions := []struct {
		model, code string
	}{
		{"modle", "unknown_partition"},
		{"half", "not_ready"},
		{"gone", "not_ready"},
	}
	for _, rt := range routes {
		for _, p := range partitions {
			if rt.path == "/reservations" && p.code == "not_ready" {
				p.code = "not_found" // a known partition without that worker rank: SPEC §3.4's 404
			}
			t.Run(rt.path+"/"+p.model, func(t *testing.T) {
				c.t = t
				r := c.do("POST", rt.path, strings.Replace(rt.body, "%q", `"`+p.model+`"`, 1))
				body := r.json(t)
				if body["code"] != p.code {
					t.Fatalf("%s in %s = %d %s, want code %s", rt.path, p.model, r.status, r.raw, p.code)
				}
				msg, _ := body["error"].(string)
				switch p.code {
				case "unknown_partition":
					want := `model_name "modle" tenant_id "default"; the catalog holds 2 partition(s) (model_name/tenant_id): "half"/"default", "model"/"default"`
					if r.status != 503 || !strings.Contains(msg, want) || r.header.Get("Retry-After") != "" {
						t.Fatalf("%d Retry-After %q %q, want 503 without Retry-After, mentioning %s",
							r.status, r.header.Get("Retry-After"), msg, want)
					}
				case "not_ready":
					if r.status != 503 || r.header.Get("Retry-After") == "" {
						t.Fatalf("%d Retry-After %q, want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
					}
				}
			})
		}
	}
	c.t = t
}
