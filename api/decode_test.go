package api

import (
	"errors"
	"testing"
)

func Test_Decode(t *testing.T) {
	tests := []struct {
		body    string
		field   string
		problem string // a prefix; "" when the body decodes
	}{
		{`{"model_name":"m","token_ids":[1,2]}`, "", ""},
		{`  {"reservation_id":"r-1"}  `, "", ""},
		{`null`, "", "request body must be a JSON object"},
		{`[]`, "", "request body must be a JSON object"},
		{`{"model_name":`, "", "malformed JSON"},
		{`{"model_name":"m"} {}`, "", "unexpected data after the JSON object"},
		{`{"modelname":"m"}`, "modelname", "unknown field"},
		{`{"router_config_override":{"weight":1}}`, "router_config_override.weight", "unknown field"},
		{`{"router_config_override":{"temprature":1}}`, "router_config_override.temprature", "unknown field"},
		{`{"block_hashes":[1,2],"router_config_override":{"overlap_score_weight":1,"temp":2},"x":3}`, "router_config_override.temp", "unknown field"},
		{`{"router_config_override":{"router_temperature":1},"weigth":1}`, "weigth", "unknown field"},
		{`{"Model_Name":"m","router_config_override":{"Router_Temperature":1,"t":1}}`, "router_config_override.t", "unknown field"},
		{`{"router_config_override":null,"reservation_id":"r","x":{"y":1}}`, "x", "unknown field"},
		{`{"model_name":7}`, "model_name", "expected a string, got number"},
		{`{"isl_tokens":"16"}`, "isl_tokens", "expected an integer, got string"},
		{`{"block_hashes":[1,"x"]}`, "block_hashes[1]", "expected an integer"},
		{`{"reservation_id":"a/b"}`, "reservation_id", "byte 1 is '/'"},
		{`{"reservation_id":"é"}`, "reservation_id", `byte 0 is '\xc3'`},
		{`{"router_config_override":{"router_temperature":"hot"}}`, "router_config_override.router_temperature", "expected a number"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var v struct {
				SelectRequest
				ReservationID ID `json:"reservation_id"`
			}
			err := Decode([]byte(tt.body), &v)
			if tt.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || len(fe.Problem) < len(tt.problem) || fe.Problem[:len(tt.problem)] != tt.problem {
				t.Fatalf("error %#v, want field %q problem %q...", err, tt.field, tt.problem)
			}
		})
	}
}

// Test_UnknownFieldPath: an unknown field is named by its full JSON path
// whatever holds it: a nested object, an array element, a map value or an
// embedded struct, matched case-insensitively as encoding/json does.
func Test_UnknownFieldPath(t *testing.T) {
	type inner struct {
		Known int `json:"known"`
	}
	type embedded struct {
		Shared inner `json:"shared"`
		Deep   inner `json:"deep"`
	}
	type outer struct {
		embedded
		Shared inner            `json:"shared"` // shadows embedded.Shared
		List   []inner          `json:"list"`
		ByName map[string]inner `json:"by_name"`
		Skip   inner            `json:"-"`
		ID     ID               `json:"id"`
		Plain  *inner
	}
	tests := []struct{ body, field string }{
		{`{"nope":1}`, "nope"},
		{`{"shared":{"known":1,"nope":1}}`, "shared.nope"},
		{`{"deep":{"nope":1}}`, "deep.nope"},
		{`{"list":[{"known":1},{"nope":1}]}`, "list[1].nope"},
		{`{"by_name":{"a":{"known":1},"b c":{"nope":1}}}`, `by_name["b c"].nope`},
		{`{"DEEP":{"Known":1},"plain":{"nope":1}}`, "plain.nope"},
		{`{"id":"r","-":{"known":1}}`, "-"},
		{`{"list":[{"known":2}],"id":null,"Skip":{"known":1}}`, "Skip"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var v outer
			var fe *FieldError
			if err := Decode([]byte(tt.body), &v); !errors.As(err, &fe) || fe.Field != tt.field ||
				fe.Problem != unknownFieldProblem {
				t.Fatalf("error %#v, want field %q unknown", err, tt.field)
			}
		})
	}
}

// Test_ValidateID: a refused byte is shown as sent, a non-ASCII one as a
// hex escape rather than the Latin-1 character of its value.
func Test_ValidateID(t *testing.T) {
	tests := []struct{ id, problem string }{
		{"r-1", ""},
		{"", "invalid id: must not be empty"},
		{"é", `invalid id: byte 0 is '\xc3'; ids are printable ASCII without spaces`},
		{"ab\xff", `invalid id: byte 2 is '\xff'; ids are printable ASCII without spaces`},
		{"a b", `invalid id: byte 1 is ' '; ids are printable ASCII without spaces`},
		{"a\tb", `invalid id: byte 1 is '\t'; ids are printable ASCII without spaces`},
		{"a\x7f", `invalid id: byte 1 is '\x7f'; ids are printable ASCII without spaces`},
		{"a?b", `invalid id: byte 1 is '?'; ids must not contain '/', '?', '#' or '%'`},
		{".", `invalid id: "." is a dot segment, which cannot name a resource in a path`},
		{"..", `invalid id: ".." is a dot segment, which cannot name a resource in a path`},
		{"...", ""},
		{".a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			err := ValidateID(tt.id)
			if tt.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBadID) || err.Error() != tt.problem {
				t.Fatalf("ValidateID(%q) = %v, want %s", tt.id, err, tt.problem)
			}
		})
	}
}
