package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Test_APIDocMatchesOpenAPI fails when docs/api.md is not what the
// generator makes from the current api/openapi.json: the document changed
// and nobody ran `make docs`, or someone edited the reference by hand.
func Test_APIDocMatchesOpenAPI(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "api", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatalf("docs/api.md: %v (run make docs)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/api.md is not what api/openapi.json gives (first difference at line %d); run make docs", firstDiffLine(got, want))
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

const tinyDoc = `{"openapi": "3.1.0", "info": {"title": "t", "description": "D|E", "version": "1"},
 "paths": {"/b": {"post": {"operationId": "postB", "summary": "Post b", "tags": ["z"],
   "x-kvselect-access": "admin", "x-kvselect-runs-on": "leader",
   "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/B"}}}},
   "responses": {"201": {"description": "Made.", "headers": {"X-Kvselect-Index": {"description": "The index."}},
     "content": {"application/json": {"schema": {"$ref": "#/components/schemas/B"}}}}}},
   "get": {"operationId": "getB", "summary": "Get b", "tags": ["z"], "x-kvselect-access": "open", "x-kvselect-runs-on": "any",
   "responses": {"200": {"description": "It."}}}},
  "/a": {"get": {"operationId": "getA", "summary": "Get a", "tags": ["y"], "x-kvselect-access": "open", "x-kvselect-runs-on": "any",
   "parameters": [{"name": "n", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 18446744073709551615}}],
   "responses": {"default": {"$ref": "#/components/responses/Error"}}}}},
 "components": {"responses": {"Error": {"description": "An error.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
  "schemas": {"B": {"type": "object", "additionalProperties": false, "required": ["id"], "properties": {
     "id": {"type": "integer", "description": "The id."},
     "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
     "by_rank": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Error"}},
     "parent": {"type": ["integer", "null"]}}},
   "Error": {"type": "object", "properties": {"error": {"type": "string"}}}}}}`

// Test_Render checks the parts of the reference a reader relies on: every
// operation in order (tag, path, method), links that land on anchors the
// page defines, field types, bounds and shared responses resolved.
func Test_Render(t *testing.T) {
	md, err := Render([]byte(tinyDoc))
	if err != nil {
		t.Fatal(err)
	}
	out := string(md)
	for _, want := range []string{
		"D\\|E",
		"| GET | [`/a`](#op-geta) | Get a | `open` | `any` |\n| GET | [`/b`](#op-getb)",
		"| POST | [`/b`](#op-postb) | Post b | `admin` | `leader` |",
		"Request body (`application/json`, required): [B](#schema-b).",
		"| `n` | query | integer | no | From 1 to 18446744073709551615. |",
		"| default | An error. | [Error](#schema-error) |",
		"| `id` | integer | yes | The id. |",
		"| `tags` | array of string (one of `\"x\"`, `\"y\"`) | no |",
		"| `by_rank` | map of string to [Error](#schema-error) | no |",
		"| `parent` | integer or null | no |",
		"Headers: `X-Kvselect-Index`: The index.",
		"Unknown fields are refused.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the reference lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "## y") > strings.Index(out, "## z") {
		t.Error("tags are not in order")
	}
	for _, anchor := range []string{"op-geta", "op-getb", "op-postb", "schema-b", "schema-error"} {
		if !strings.Contains(out, `<a id="`+anchor+`"></a>`) {
			t.Errorf("anchor %s is linked but not defined", anchor)
		}
	}
	again, _ := Render([]byte(tinyDoc))
	if !bytes.Equal(md, again) {
		t.Error("two renders of one document differ")
	}
}

func Test_RenderRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"not JSON", `{`},
		{"no paths", `{"openapi": "3.1.0", "paths": {}}`},
		{"no operationId", `{"paths": {"/a": {"get": {"summary": "x"}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Render([]byte(tc.doc)); !errors.Is(err, ErrDocument) {
				t.Fatalf("err %v, want ErrDocument", err)
			}
		})
	}
}
