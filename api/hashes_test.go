package api

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

// FuzzHashes checks the hand-written array scanner behind Hashes and
// TokenIDs against encoding/json on any valid JSON: both accept the same
// inputs and agree on every value, errors name their position, and
// nothing panics.
func FuzzHashes(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzHashes.
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || isNull(raw) {
			return // the JSON decoder rejects these before the scanner runs; null is absent
		}
		var got Hashes
		err := got.UnmarshalJSON(raw)
		want, ok := referenceHashes(raw)
		if err != nil {
			var typ *json.UnmarshalTypeError
			if !errors.As(err, &typ) {
				t.Fatalf("error is not a *json.UnmarshalTypeError: %v", err)
			}
			if _, isArray := ValueProblem(typ); !isArray {
				t.Fatalf("ValueProblem does not recognise %v", err)
			}
			if ok && len(want) <= MaxHashes {
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
		var tokens TokenIDs
		if err := tokens.UnmarshalJSON(raw); err == nil {
			for i, tok := range tokens {
				if uint64(tok) != want[i] {
					t.Fatalf("token %d of %q = %d, want %d", i, raw, tok, want[i])
				}
			}
		}
	})
}

// Test_HashesInABody: a bad element is reported with the path of the field
// that holds it, and signed values read back as their unsigned bits.
func Test_HashesInABody(t *testing.T) {
	tests := []struct {
		body      string
		want      Hashes
		wantField string
		wantMsg   string
	}{
		{`{"block_hashes":[1,-1,18446744073709551615]}`, Hashes{1, 1<<64 - 1, 1<<64 - 1}, "", ""},
		{`{"block_hashes":[]}`, Hashes{}, "", ""},
		{`{"block_hashes":[1,2.5]}`, nil, "Prompt.block_hashes.[1]", "expected an integer, got a fraction or exponent"},
		{`{"block_hashes":[-9223372036854775809]}`, nil, "Prompt.block_hashes.[0]", "below the signed 64-bit range"},
		{`{"block_hashes":[18446744073709551616]}`, nil, "Prompt.block_hashes.[0]", "outside the 64-bit range"},
		{`{"block_hashes":"x"}`, nil, "Prompt.block_hashes", "expected an array of integers"},
		{`{"token_ids":[4294967296]}`, nil, "Prompt.token_ids.[0]", "token ids are unsigned 32-bit integers"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var in SelectRequest
			err := json.Unmarshal([]byte(tt.body), &in)
			if tt.wantMsg == "" {
				if err != nil || len(in.BlockHashes) != len(tt.want) || in.BlockHashes == nil {
					t.Fatalf("decoded %v, %v; want %v", in.BlockHashes, err, tt.want)
				}
				for i := range tt.want {
					if in.BlockHashes[i] != tt.want[i] {
						t.Fatalf("decoded %v, want %v", in.BlockHashes, tt.want)
					}
				}
				return
			}
			var typ *json.UnmarshalTypeError
			if !errors.As(err, &typ) {
				t.Fatalf("error %v is not a type error", err)
			}
			msg, ok := ValueProblem(typ)
			if !ok || msg != tt.wantMsg || typ.Field != tt.wantField {
				t.Fatalf("error field %q message %q, want %q %q", typ.Field, msg, tt.wantField, tt.wantMsg)
			}
		})
	}
}
