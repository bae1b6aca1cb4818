package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
)

// referenceHashes decodes a JSON array of integers with encoding/json, the
// slow obvious way, for comparison with scanIntArray.
func referenceHashes(raw []byte) ([]uint64, bool) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil || elems == nil {
		return nil, false
	}
	out := make([]uint64, len(elems))
	for i, e := range elems {
		s := string(bytes.TrimSpace(e))
		if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
			return nil, false // strings, objects, literals: not integers
		}
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			out[i] = v
		} else if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			out[i] = uint64(v)
		} else {
			return nil, false
		}
	}
	return out, true
}

// FuzzParseHashes checks the hand-written array scanner against
// encoding/json on any valid JSON: both accept the same inputs and agree
// on every value, and nothing panics.
func FuzzParseHashes(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzParseHashes.
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the JSON decoder rejects these before the scanner runs
		}
		got, err := parseHashes("h", raw)
		want, ok := referenceHashes(raw)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error is not a 400: %v", err)
			}
			if ok && len(want) <= MaxHashes && string(bytes.TrimSpace(raw)) != "null" {
				t.Fatalf("scanner rejected %q (%v) that encoding/json reads as %v", raw, err, want)
			}
			return
		}
		if !ok || len(got) != len(want) {
			t.Fatalf("scanner read %q as %v, encoding/json as %v (%v)", raw, got, want, ok)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("element %d of %q: scanner %d, encoding/json %d", i, raw, got[i], want[i])
			}
		}
		if tokens, err := parseTokens("t", raw); err == nil {
			for i, tok := range tokens {
				if uint64(tok) != want[i] {
					t.Fatalf("token %d of %q = %d, want %d", i, raw, tok, want[i])
				}
			}
		}
	})
}

// FuzzDecodeSelect runs the full decode and validation of a selection body
// on arbitrary bytes: it either yields a prompt that satisfies the API's
// invariants or a 400, and never panics.
func FuzzDecodeSelect(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzDecodeSelect.
	f.Fuzz(func(t *testing.T, body []byte) {
		var in selectInput
		if err := decodeJSON(body, &in); err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("decode error is not a 400: %v", err)
			}
			return
		}
		if _, err := in.partition(); err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("partition error is not a 400: %v", err)
		}
		if _, err := in.override(); err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("override error is not a 400: %v", err)
		}
		pr, err := in.prompt(promptRules{needBlockHashes: true})
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
