package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// MaxBodyBytes bounds every request body (SPEC §3).
const MaxBodyBytes = 8 << 20

// MaxHashes bounds hashes or tokens per request (SPEC §11).
const MaxHashes = 1 << 20

// readBody reads the whole body, at most MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("%w: limit is %d bytes", errTooLarge, MaxBodyBytes)
		}
		return nil, badRequest("", "reading body: %v", err)
	}
	return body, nil
}

// decodeBody reads and decodes a JSON object into v, turning every
// decoding failure into a 400 that names the field. An empty body is
// allowed only when optional is set (v is left untouched).
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return badRequest("", "request body is required (a JSON object)")
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "unexpected data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("", "malformed JSON at offset %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := jsonPath(typ.Field)
		switch {
		case field == "":
			return badRequest("", "expected a JSON object, got %s", typ.Value)
		case strings.HasSuffix(field, "kv_events_endpoints") && strings.HasPrefix(typ.Type.String(), "uint"):
			// The map's keys are dp ranks; encoding/json reports a bad key
			// as a number of the key type.
			return badRequest(field, "keys must be dp ranks (non-negative integers), got %q",
				strings.TrimPrefix(typ.Value, "number "))
		}
		return badRequest(field, "expected %s, got %s", typeName(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: unexpected end of input")
	}
	return badRequest("", "malformed JSON: %v", err)
}

// jsonPath drops the Go names of embedded structs from a decoding error's
// field path, leaving the JSON field names users sent. Every JSON name of
// this API is lowercase snake_case; Go type names have capitals.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && strings.ToLower(p) == p {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

// typeName words a Go type for API users.
func typeName(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "uint"):
		return "a non-negative integer"
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "map"), strings.HasPrefix(t, "struct"), strings.Contains(t, "."):
		return "an object"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return t
}

// present reports whether a raw field was given with a non-null value.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(bytes.TrimSpace(raw)) != "null"
}

// parseHashes decodes a JSON array of 64-bit hashes. Values may be signed
// (−2^63 … −1, reinterpreted bit for bit as unsigned) or unsigned up to
// 2^64−1. raw is already syntactically valid JSON.
func parseHashes(field string, raw json.RawMessage) ([]uint64, error) {
	out := []uint64{}
	err := scanIntArray(field, raw, func(i int, neg bool, mag uint64) error {
		if neg {
			if mag > 1<<63 {
				return badRequest(fmt.Sprintf("%s[%d]", field, i), "below the signed 64-bit range")
			}
			out = append(out, -mag)
			return nil
		}
		out = append(out, mag)
		return nil
	})
	return out, err
}

// parseTokens decodes a JSON array of token ids (unsigned 32-bit).
func parseTokens(field string, raw json.RawMessage) ([]uint32, error) {
	out := []uint32{}
	err := scanIntArray(field, raw, func(i int, neg bool, mag uint64) error {
		if neg || mag > math.MaxUint32 {
			return badRequest(fmt.Sprintf("%s[%d]", field, i), "token ids are unsigned 32-bit integers")
		}
		out = append(out, uint32(mag))
		return nil
	})
	return out, err
}

// scanIntArray walks a JSON array of integers without going through
// interface values or json.Number, which matters for prompts of thousands
// of hashes. It calls add with each element's sign and magnitude.
func scanIntArray(field string, raw json.RawMessage, add func(i int, neg bool, mag uint64) error) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || b[0] != '[' {
		return badRequest(field, "expected an array of integers")
	}
	i, n := 1, 0
	skip := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	skip()
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		skip()
		if n >= MaxHashes {
			return badRequest(field, "more than %d entries", MaxHashes)
		}
		elem := func() string { return fmt.Sprintf("%s[%d]", field, n) }
		neg := i < len(b) && b[i] == '-'
		if neg {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return badRequest(elem(), "expected an integer")
		}
		if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
			return badRequest(elem(), "expected an integer, got a fraction or exponent")
		}
		mag, err := strconv.ParseUint(string(b[start:i]), 10, 64)
		if err != nil {
			return badRequest(elem(), "outside the 64-bit range")
		}
		if err := add(n, neg && mag != 0, mag); err != nil {
			return err
		}
		n++
		skip()
		if i >= len(b) {
			return badRequest(field, "unterminated array")
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return nil
		default:
			return badRequest(field, "expected ',' or ']' after element %d", n-1)
		}
	}
}
