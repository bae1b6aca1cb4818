package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// FieldError is a request body that does not decode: Field is the JSON
// path of the value at fault ("block_hashes[3]", "router_config_override.
// router_temperature"), empty when the body as a whole is wrong.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Decode decodes one JSON object into v strictly, as a node does: anything
// but an object (null included), an unknown field, or data after the
// object is refused. Unknown fields are refused so that a misspelt field is
// never silently replaced by its default (a misspelt reservation_id by a
// generated one). Every failure is a *FieldError worded for API users.
func Decode(body []byte, v any) error {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return &FieldError{Problem: "request body must be a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &FieldError{Problem: "unexpected data after the JSON object"}
	}
	return nil
}

// unknownFieldPrefix is how encoding/json words a refused field (it has no
// error type for it).
const unknownFieldPrefix = "json: unknown field "

func decodeError(err error) *FieldError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &FieldError{Problem: fmt.Sprintf("malformed JSON at offset %d: %v", syn.Offset, syn)}
	case errors.As(err, &typ):
		field := jsonPath(typ.Field)
		if msg, ok := ValueProblem(typ); ok {
			return &FieldError{field, msg}
		}
		switch {
		case field == "":
			return &FieldError{Problem: "expected a JSON object, got " + typ.Value}
		case strings.HasSuffix(field, "kv_events_endpoints") && strings.HasPrefix(typ.Type.String(), "uint"):
			// The map's keys are dp ranks; encoding/json reports a bad key
			// as a number of the key type.
			return &FieldError{field, fmt.Sprintf("keys must be dp ranks (non-negative integers), got %q",
				strings.TrimPrefix(typ.Value, "number "))}
		}
		return &FieldError{field, fmt.Sprintf("expected %s, got %s", typeName(typ.Type.String()), typ.Value)}
	case strings.HasPrefix(err.Error(), unknownFieldPrefix):
		name := strings.Trim(strings.TrimPrefix(err.Error(), unknownFieldPrefix), `"`)
		return &FieldError{name, "unknown field (check its spelling; see GET " + PathOpenAPI + ")"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FieldError{Problem: "malformed JSON: unexpected end of input"}
	}
	return &FieldError{Problem: "malformed JSON: " + err.Error()}
}

// jsonPath turns a decoding error's field path into the JSON path users
// sent: it drops the Go names of embedded structs (every JSON name of this
// API is lowercase snake_case; Go type names have capitals) and joins array
// positions to their field ("block_hashes[3]").
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && strings.ToLower(p) == p {
			kept = append(kept, p)
		}
	}
	return strings.ReplaceAll(strings.Join(kept, "."), ".[", "[")
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
