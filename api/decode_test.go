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
		{`{"router_config_override":{"weight":1}}`, "weight", "unknown field"},
		{`{"model_name":7}`, "model_name", "expected a string, got number"},
		{`{"isl_tokens":"16"}`, "isl_tokens", "expected an integer, got string"},
		{`{"block_hashes":[1,"x"]}`, "block_hashes[1]", "expected an integer"},
		{`{"reservation_id":"a/b"}`, "reservation_id", "byte 1 is '/'"},
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
