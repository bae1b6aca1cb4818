package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kvselect/kvselect/api"
)

// readBody reads the whole body, at most api.MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("%w: limit is %d bytes", errTooLarge, api.MaxBodyBytes)
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

// decodeJSON decodes one JSON object strictly: anything but an object
// (null included), an unknown field, or data after the object is a 400.
// Unknown fields are refused so that a misspelt field is never silently
// replaced by its default (a misspelt reservation_id by a generated one).
func decodeJSON(body []byte, v any) error {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return badRequest("", "request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "unexpected data after the JSON object")
	}
	return nil
}

// unknownFieldPrefix is how encoding/json words a refused field (it has
// no error type for it).
const unknownFieldPrefix = "json: unknown field "

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("", "malformed JSON at offset %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := jsonPath(typ.Field)
		if msg, ok := api.ValueProblem(typ); ok {
			return badRequest(field, "%s", msg)
		}
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
	case strings.HasPrefix(err.Error(), unknownFieldPrefix):
		name := strings.Trim(strings.TrimPrefix(err.Error(), unknownFieldPrefix), `"`)
		return badRequest(name, "unknown field (check its spelling; see GET %s)", api.PathOpenAPI)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: unexpected end of input")
	}
	return badRequest("", "malformed JSON: %v", err)
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

// checkID validates a reservation or selection id given in field.
func checkID(field, id string) error {
	if err := api.ValidateID(id); err != nil {
		return badRequest(field, "%s", strings.TrimPrefix(err.Error(), api.ErrBadID.Error()+": "))
	}
	return nil
}
