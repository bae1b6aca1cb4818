package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
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
		fe := decodeError(err)
		if fe.Problem == unknownFieldProblem {
			fe.Field = unknownFieldPath(body, reflect.TypeOf(v), fe.Field)
		}
		return fe
	}
	if _, err := dec.Token(); err != io.EOF {
		return &FieldError{Problem: "unexpected data after the JSON object"}
	}
	return nil
}

// unknownFieldPrefix is how encoding/json words a refused field (it has no
// error type for it).
const unknownFieldPrefix = "json: unknown field "

// unknownFieldProblem is the Problem of an unknown field's FieldError.
const unknownFieldProblem = "unknown field (check its spelling; see GET " + PathOpenAPI + ")"

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
		return &FieldError{name, unknownFieldProblem}
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

// unknownFieldPath returns the JSON path of the unknown field name that
// decoding body into t refused: encoding/json names an unknown field
// without its path ("temprature", not "router_config_override.
// temprature"), unlike a mistyped one. It walks body again, in order,
// looking for the first key t has no field for, as encoding/json does;
// this runs only on a refused body, never on the hot path. Should the walk
// find another key than name (field rules it does not model), name is
// returned as it is.
func unknownFieldPath(body []byte, t reflect.Type, name string) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	path, key, found := firstUnknownKey(dec, t, "")
	if !found || key != name {
		return name
	}
	return path
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// firstUnknownKey consumes one JSON value from dec, to be decoded into t
// (nil: any value), and returns the path and name of its first object key
// that t has no field for. Values of types that decode themselves
// (json.Unmarshaler) are only skipped.
func firstUnknownKey(dec *json.Decoder, t reflect.Type, path string) (string, string, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil
	}
	tok, err := dec.Token()
	if err != nil {
		return "", "", false
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return "", "", false
			}
			key, _ := tok.(string)
			var elem reflect.Type
			var sub string
			switch {
			case fields != nil:
				var ok bool
				if elem, ok = fieldType(fields, key); !ok {
					return joinPath(path, key), key, true
				}
				sub = joinPath(path, key)
			case t != nil && t.Kind() == reflect.Map:
				elem, sub = t.Elem(), path+"["+strconv.Quote(key)+"]"
			}
			if p, k, found := firstUnknownKey(dec, elem, sub); found {
				return p, k, true
			}
		}
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if p, k, found := firstUnknownKey(dec, elem, path+"["+strconv.Itoa(i)+"]"); found {
				return p, k, true
			}
		}
	default:
		return "", "", false // a scalar
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return "", "", false
	}
	return "", "", false
}

// jsonFields maps the JSON names of struct t's fields, those of embedded
// structs included, to their types, as encoding/json names them (tag name,
// else the Go name; "-" skipped; unexported fields ignored). A field
// shadows those of the structs embedded beside it.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			embedded = append(embedded, ft)
		case !f.IsExported():
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
	for _, et := range embedded {
		for name, ft := range jsonFields(et) {
			if _, shadowed := fields[name]; !shadowed {
				fields[name] = ft
			}
		}
	}
	return fields
}

// fieldType finds key among fields as encoding/json matches keys: exactly,
// else case-insensitively.
func fieldType(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t, true
		}
	}
	return nil, false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
