package http

import (
	"errors"
	"testing"

	"github.com/kvselect/kvselect/api"
)

// FuzzDecodeSelect runs the full decode and validation of a selection body
// on arbitrary bytes: it either yields a prompt that satisfies the API's
// invariants or a 400, and never panics.
func FuzzDecodeSelect(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzDecodeSelect.
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.SelectRequest
		if err := decodeJSON(body, &in); err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("decode error is not a 400: %v", err)
			}
			return
		}
		if _, err := partitionOf(&in.Prompt); err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("partition error is not a 400: %v", err)
		}
		if _, err := overrideOf(in.RouterConfigOverride); err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("override error is not a 400: %v", err)
		}
		pr, err := promptOf(&in.Prompt, true)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("prompt error is not a 400: %v", err)
			}
			return
		}
		if pr.ISL <= 0 {
			t.Fatalf("accepted isl %d", pr.ISL)
		}
		if !pr.HasTokens && len(pr.BlockHashes) != len(pr.SequenceHashes) {
			t.Fatalf("accepted %d block hashes with %d sequence hashes", len(pr.BlockHashes), len(pr.SequenceHashes))
		}
		if pr.HasTokens && (len(pr.Tokens) == 0 || int64(len(pr.Tokens)) != pr.ISL) {
			t.Fatalf("accepted %d tokens with isl %d", len(pr.Tokens), pr.ISL)
		}
	})
}
