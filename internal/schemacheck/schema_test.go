package schemacheck

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	root := map[string]any{"components": map[string]any{"schemas": map[string]any{
		"U64": map[string]any{"type": "integer", "minimum": jsonNum("0"), "maximum": jsonNum("18446744073709551615")},
		"Obj": map[string]any{"type": "object", "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"$ref": "#/components/schemas/U64"},
				"s": map[string]any{"type": "string", "pattern": "^[a-z]+$", "maxLength": jsonNum("3")},
				"e": map[string]any{"enum": []any{"x", "y"}},
				"t": map[string]any{"type": "string", "format": "date-time"},
				"n": map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "null"}}},
				"m": map[string]any{"type": "object", "propertyNames": map[string]any{"pattern": "^[0-9]+$"},
					"additionalProperties": map[string]any{"type": "boolean"}},
				"l": map[string]any{"type": "array", "maxItems": jsonNum("2"), "items": map[string]any{"type": "number"}},
			}},
		"Closed": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"a": true}},
		"Odd":    map[string]any{"type": "string", "contains": true},
	}}}
	for _, tc := range []struct {
		name, schema, value, want string // want "" means valid
	}{
		{"valid", "Obj", `{"a":18446744073709551615,"s":"ab","e":"x","t":"2026-11-25T05:00:00.5Z","n":null,"m":{"0":true},"l":[1,2.5]}`, ""},
		{"u64 overflow", "Obj", `{"a":18446744073709551616}`, "outside the maximum"},
		{"negative", "Obj", `{"a":-1}`, "outside the minimum"},
		{"fraction", "Obj", `{"a":1.5}`, "expected type integer"},
		{"missing", "Obj", `{}`, `required property "a" is missing`},
		{"pattern", "Obj", `{"a":1,"s":"A"}`, "does not match"},
		{"length", "Obj", `{"a":1,"s":"abcd"}`, "maxLength"},
		{"enum", "Obj", `{"a":1,"e":"z"}`, "not one of"},
		{"date-time", "Obj", `{"a":1,"t":"yesterday"}`, "RFC 3339"},
		{"anyOf", "Obj", `{"a":1,"n":"x"}`, "matches none of anyOf"},
		{"propertyNames", "Obj", `{"a":1,"m":{"x":true}}`, "does not match"},
		{"map values", "Obj", `{"a":1,"m":{"1":2}}`, "expected type boolean"},
		{"maxItems", "Obj", `{"a":1,"l":[1,2,3]}`, "maxItems"},
		{"strict", "Obj", `{"a":1,"zz":1}`, `"zz" is not documented`},
		{"closed", "Closed", `{"a":1,"b":2}`, `"b" is not allowed`},
		{"unsupported keyword", "Odd", `"x"`, "not supported"},
		{"dangling ref", "Nope", `1`, "does not resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Decode([]byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			err = New(root, true).Validate(map[string]any{"$ref": "#/components/schemas/" + tc.schema}, v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid value refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestMatchTemplate(t *testing.T) {
	for _, tc := range []struct {
		tmpl, path string
		ok         bool
	}{
		{"/workers/{id}", "/workers/7", true},
		{"/workers/{id}", "/workers/", false},
		{"/workers/{id}", "/workers/7/x", false},
		{"/reservations/{id}/output_block", "/reservations/r-1/output_block", true},
		{"/reservations/{id}/output_block", "/reservations/r-1/prefill_complete", false},
	} {
		if _, ok := matchTemplate(tc.tmpl, tc.path); ok != tc.ok {
			t.Errorf("matchTemplate(%q, %q) = %v", tc.tmpl, tc.path, ok)
		}
	}
}

func jsonNum(s string) any { v, _ := Decode([]byte(s)); return v }
