package http

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/schemacheck"
)

// The router and the OpenAPI document list the same operations, with the
// same access level and the same node answering: a route added to one and
// not the other fails here.
func TestRouterMatchesOpenAPI(t *testing.T) {
	doc, err := schemacheck.ParseDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	type facts struct{ access, where string }
	documented := map[string]facts{}
	for _, op := range doc.Operations() {
		access, _ := op.Spec["x-kvselect-access"].(string)
		where, _ := op.Spec["x-kvselect-runs-on"].(string)
		documented[op.Method+" "+op.Path] = facts{access, where}
	}
	routed := map[string]facts{}
	for _, rt := range newFakeNode().service().routes() {
		routed[rt.method+" "+rt.path] = facts{rt.access, rt.where}
	}
	for k, f := range routed {
		d, ok := documented[k]
		switch {
		case !ok:
			t.Errorf("%s is routed but not in api/openapi.json", k)
		case d != f:
			t.Errorf("%s: router says access %q on %q, the document %q on %q", k, f.access, f.where, d.access, d.where)
		}
	}
	for k := range documented {
		if _, ok := routed[k]; !ok {
			t.Errorf("%s is in api/openapi.json but not routed", k)
		}
	}
}

// GET /openapi.json serves the embedded document, HEAD too.
func TestServesOpenAPI(t *testing.T) {
	srv := httptest.NewServer(newFakeNode().service())
	defer srv.Close()
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, srv.URL+api.PathOpenAPI, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", method, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if want := api.OpenAPI(); method == http.MethodGet && !bytes.Equal(body, want) ||
			method == http.MethodHead && len(body) != 0 {
			t.Fatalf("%s: body of %d bytes", method, len(body))
		}
	}
	var ids []string
	doc, _ := schemacheck.ParseDocument(api.OpenAPI())
	for _, op := range doc.Operations() {
		ids = append(ids, op.Spec["operationId"].(string))
	}
	if !slices.Contains(ids, "selectAndReserve") {
		t.Fatalf("operation ids %v", ids)
	}
}
