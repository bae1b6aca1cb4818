package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/schemacheck"
)

var update = flag.Bool("update", false, "rewrite openapi.json from the wire types and the table of operations")

// encodeDocument renders the document as openapi.json holds it: indented,
// keys sorted, no HTML escaping (descriptions quote "<model>:<tenant>").
func encodeDocument(t *testing.T, doc any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The served document is the one built from the wire types: a field
// added to a body, or an operation added to the table, shows up here.
func TestOpenAPIDocumentIsCurrent(t *testing.T) {
	want := encodeDocument(t, buildOpenAPI())
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(api.OpenAPI(), want) {
		t.Fatalf("api/openapi.json is not what the wire types and the operations table give; " +
			"run: go test ./api -run OpenAPIDocumentIsCurrent -update, and review the diff")
	}
}

// Every schema of the document is one this package's checker understands,
// every $ref resolves, and every code, path and operation id is there.
func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	doc, err := schemacheck.ParseDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if doc.Root["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc.Root["openapi"])
	}
	schemas := doc.Root["components"].(map[string]any)["schemas"].(map[string]any)
	for name, s := range schemas {
		// Validating null against each schema walks every keyword the
		// value reaches; an unsupported keyword or a dangling $ref shows.
		if err := doc.Validate(s, nil); err != nil && strings.Contains(err.Error(), "not supported") ||
			err != nil && strings.Contains(err.Error(), "does not resolve") {
			t.Errorf("schema %s: %v", name, err)
		}
	}
	ids := map[string]bool{}
	for _, op := range doc.Operations() {
		id, _ := op.Spec["operationId"].(string)
		if id == "" || ids[id] {
			t.Errorf("%s %s: operationId %q missing or repeated", op.Method, op.Path, id)
		}
		ids[id] = true
	}
	codes := schemas["Error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	var got []string
	for _, c := range codes {
		got = append(got, c.(string))
	}
	var want []string
	for _, c := range api.Codes() {
		want = append(want, string(c))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("documented codes %v, api.Codes %v", got, want)
	}
}

// The recorded exchanges (an HTTP tour of a real cluster wrote them; see
// http's TestTourMatchesOpenAPI) still fit the document: a schema made
// stricter than what the server sends fails here.
func TestRecordedExamplesMatchOpenAPI(t *testing.T) {
	doc, err := schemacheck.ParseDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "examples", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(doc.Operations()) {
		t.Fatalf("%d recorded examples for %d operations; record them with: go test ./http -run TourMatchesOpenAPI -record",
			len(files), len(doc.Operations()))
	}
	covered := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var x schemacheck.Exchange
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := doc.Check(x); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		if op, ok := doc.Find(x.Method, x.Path); ok && x.Status < 300 {
			covered[op.Method+" "+op.Path] = true
		}
	}
	for _, op := range doc.Operations() {
		if !covered[op.Method+" "+op.Path] {
			t.Errorf("no recorded success of %s %s", op.Method, op.Path)
		}
	}
}

// The checker itself refuses what it must: a test that cannot fail
// proves nothing.
func TestRecordedExampleCheckerFails(t *testing.T) {
	doc, err := schemacheck.ParseDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		x    schemacheck.Exchange
		want string
	}{
		{"unknown route", schemacheck.Exchange{Method: "GET", Path: "/nope", Status: 200}, "no operation"},
		{"unknown route, odd body", schemacheck.Exchange{Method: "GET", Path: "/nope", Status: 404,
			ContentType: "application/json", Response: json.RawMessage(`{"error":"x"}`)}, `"code" is missing`},
		{"unknown request field", schemacheck.Exchange{Method: "POST", Path: api.PathSelect,
			Request: json.RawMessage(`{"token_ids":[1],"blocksize":16}`), Status: 503, ContentType: "application/json",
			Response: json.RawMessage(`{"error":"x","code":"not_ready"}`)}, `"blocksize" is not allowed`},
		{"bad id", schemacheck.Exchange{Method: "POST", Path: api.PathReservations,
			Request: json.RawMessage(`{"reservation_id":"a/b","selection_id":"s"}`), Status: 404, ContentType: "application/json",
			Response: json.RawMessage(`{"error":"x","code":"not_found"}`)}, "does not match"},
		{"undocumented answer field", schemacheck.Exchange{Method: "GET", Path: api.PathHealth, Status: 200,
			ContentType: "application/json", Response: json.RawMessage(`{"status":"ok","extra":1}`)}, "not documented"},
		{"unknown code", schemacheck.Exchange{Method: "GET", Path: api.PathHealth, Status: 500,
			ContentType: "application/json", Response: json.RawMessage(`{"error":"x","code":"oops"}`)}, "not one of"},
		{"missing answer field", schemacheck.Exchange{Method: "DELETE", Path: "/reservations/r1", Status: 200,
			ContentType: "application/json", Response: json.RawMessage(`{"status":"ok"}`)}, `"reservation_id" is missing`},
		{"hash out of range", schemacheck.Exchange{Method: "POST", Path: api.PathSelect,
			Request: json.RawMessage(`{"block_hashes":[18446744073709551616],"sequence_hashes":[1],"isl_tokens":1}`),
			Status:  503, ContentType: "application/json", Response: json.RawMessage(`{"error":"x","code":"not_ready"}`)}, "outside the maximum"},
		{"undeclared query", schemacheck.Exchange{Method: "GET", Path: api.PathLoads, Query: "modle=x", Status: 200,
			ContentType: "application/json", Response: json.RawMessage(`[]`)}, "not declared"},
		{"wrong media type", schemacheck.Exchange{Method: "GET", Path: api.PathMetrics, Status: 200,
			ContentType: "application/json", Response: json.RawMessage(`{}`)}, "the document says"},
		{"undeclared header", schemacheck.Exchange{Method: "GET", Path: api.PathHealth, Status: 200,
			Headers: map[string]string{api.HeaderApplied: "false"}, ContentType: "application/json",
			Response: json.RawMessage(`{"status":"ok"}`)}, "does not declare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := doc.Check(tc.x)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
