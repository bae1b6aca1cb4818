package http

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/scheduler"
)

// Test_BusyThresholdRequests: the threshold routes' answers, in order on
// one node: validation names the field and writes nothing, a set merges,
// a POST without thresholds reads, a clear hides the model from the list.
func Test_BusyThresholdRequests(t *testing.T) {
	f := newFakeNode()
	url := serve(t, f.service())
	steps := []step{
		{"empty list", "GET", "/busy_threshold", "", 200, `{"thresholds":[]}`},
		{"decode above 1", "POST", "/busy_threshold", `{"model":"m","active_decode_blocks_threshold":1.5}`, 400, `active_decode_blocks_threshold: must be between 0 and 1, got 1.5`},
		{"decode below 0", "POST", "/busy_threshold", `{"model":"m","active_decode_blocks_threshold":-0.1}`, 400, `active_decode_blocks_threshold: must be between 0 and 1`},
		{"negative tokens", "POST", "/busy_threshold", `{"model":"m","active_prefill_tokens_threshold":-1}`, 400, `active_prefill_tokens_threshold: must be >= 0, got -1`},
		{"fractional tokens", "POST", "/busy_threshold", `{"model":"m","active_prefill_tokens_threshold":1.5}`, 400, `active_prefill_tokens_threshold`},
		{"decode as a string", "POST", "/busy_threshold", `{"model":"m","active_decode_blocks_threshold":"0.5"}`, 400, `active_decode_blocks_threshold`},
		{"no model", "POST", "/busy_threshold", `{"active_decode_blocks_threshold":0.5}`, 400, `model: required`},
		{"misspelt field", "POST", "/busy_threshold", `{"model":"m","active_decode_block_threshold":0.5}`, 400, `active_decode_block_threshold`},
		{"no body", "POST", "/busy_threshold", ``, 400, `request body is required`},
		{"nothing written by bad requests", "GET", "/busy_threshold", "", 200, `{"thresholds":[]}`},
		{"read of an unknown model", "POST", "/busy_threshold", `{"model":"m"}`, 200,
			`{"model":"m","active_decode_blocks_threshold":null,"active_prefill_tokens_threshold":null}`},
		{"set both", "POST", "/busy_threshold", `{"model":"m","active_decode_blocks_threshold":0.85,"active_prefill_tokens_threshold":10000}`, 200,
			`{"model":"m","active_decode_blocks_threshold":0.85,"active_prefill_tokens_threshold":10000}`},
		{"set one keeps the other", "POST", "/busy_threshold", `{"model":"m","active_prefill_tokens_threshold":0}`, 200,
			`{"model":"m","active_decode_blocks_threshold":0.85,"active_prefill_tokens_threshold":0}`},
		{"null keeps a value", "POST", "/busy_threshold", `{"model":"m","active_decode_blocks_threshold":null,"active_prefill_tokens_threshold":5}`, 200,
			`{"model":"m","active_decode_blocks_threshold":0.85,"active_prefill_tokens_threshold":5}`},
		{"bounds are valid", "POST", "/busy_threshold", `{"model":"a","active_decode_blocks_threshold":0}`, 200,
			`{"model":"a","active_decode_blocks_threshold":0,"active_prefill_tokens_threshold":null}`},
		{"list, sorted", "GET", "/busy_threshold", "", 200,
			`{"thresholds":[{"model":"a","active_decode_blocks_threshold":0,"active_prefill_tokens_threshold":null},{"model":"m","active_decode_blocks_threshold":0.85,"active_prefill_tokens_threshold":5}]}`},
		{"clear without a model", "DELETE", "/busy_threshold", "", 400, `model: required`},
		{"clear", "DELETE", "/busy_threshold?model=m", "", 200,
			`{"model":"m","active_decode_blocks_threshold":null,"active_prefill_tokens_threshold":null}`},
		{"a cleared model is not listed", "GET", "/busy_threshold", "", 200,
			`{"thresholds":[{"model":"a","active_decode_blocks_threshold":0,"active_prefill_tokens_threshold":null}]}`},
		{"wrong method", "PUT", "/busy_threshold", "", 405, `method_not_allowed`},
	}
	for _, st := range steps {
		st.run(t, url)
	}
	if _, ok := f.Catalog().Thresholds("m"); !ok {
		t.Fatal("the cleared model lost its record (initial thresholds would apply again)")
	}
}

// Test_OverloadedAnswersInDynamoShape: load shedding's 503 carries seed
// 001's body and Retry-After on both selection routes.
func Test_OverloadedAnswersInDynamoShape(t *testing.T) {
	f := newFakeNode()
	f.sel = func(req scheduler.SelectRequest) (scheduler.Selection, error) {
		return scheduler.Selection{}, fmt.Errorf("%w in %s", scheduler.ErrOverloaded, req.Partition)
	}
	url := serve(t, f.service())
	for _, path := range []string{"/select", "/select_and_reserve"} {
		status, hdr, body := call(t, "POST", url+path, `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`)
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"message": api.BusyMessage, "type": "service_unavailable", "code": 503.0}
		if status != 503 || hdr.Get("Retry-After") == "" || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %d %v (Retry-After %q), want 503 %v", path, status, got, hdr.Get("Retry-After"), want)
		}
	}
}
