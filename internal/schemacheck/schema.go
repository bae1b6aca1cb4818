package schemacheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("does not match the schema")

// Decode parses JSON the way Validate expects it: numbers as json.Number,
// so that integers keep every digit.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// Validator checks values against schemas of one document, which holds
// the targets of every $ref ("#/components/schemas/Name").
type Validator struct {
	root   map[string]any
	strict bool
	re     map[string]*regexp.Regexp
}

// New returns a validator over the decoded document root. In strict mode
// undeclared object properties are errors.
func New(root map[string]any, strict bool) *Validator {
	return &Validator{root: root, strict: strict, re: map[string]*regexp.Regexp{}}
}

// Validate checks value against schema; every problem found is listed,
// each starting with the JSON path of the value at fault.
func (v *Validator) Validate(schema, value any) error {
	var probs []string
	v.check("$", schema, value, &probs)
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(probs, "; "))
}

func (v *Validator) check(path string, schema, value any, probs *[]string) {
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool {
			if !b {
				*probs = append(*probs, path+": no value is allowed here")
			}
			return
		}
		*probs = append(*probs, fmt.Sprintf("%s: schema is %T, not an object", path, schema))
		return
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := v.resolve(ref)
		if err != nil {
			*probs = append(*probs, path+": "+err.Error())
			return
		}
		v.check(path, target, value, probs)
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys) // problems in a stable order
	for _, k := range keys {
		v.keyword(path, s, k, value, probs)
	}
	if obj, ok := value.(map[string]any); ok && v.strict && s["additionalProperties"] == nil && hasType(s, "object") {
		props, _ := s["properties"].(map[string]any)
		for _, name := range sortedKeys(obj) {
			if _, declared := props[name]; !declared {
				*probs = append(*probs, fmt.Sprintf("%s: property %q is not documented", path, name))
			}
		}
	}
}

// hasType reports whether the schema declares type t (alone or in a list).
func hasType(s map[string]any, t string) bool {
	switch ty := s["type"].(type) {
	case string:
		return ty == t
	case []any:
		return slices.Contains(ty, any(t))
	}
	return false
}

// annotations carry no validation.
var annotations = map[string]bool{"$ref": true, "description": true, "title": true, "examples": true,
	"default": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$comment": true}

func (v *Validator) keyword(path string, s map[string]any, k string, value any, probs *[]string) {
	fail := func(format string, args ...any) { *probs = append(*probs, path+": "+fmt.Sprintf(format, args...)) }
	arg := s[k]
	switch k {
	case "type":
		if !typeMatches(arg, value) {
			fail("expected type %v, got %s", arg, typeOf(value))
		}
	case "properties":
		obj, ok := value.(map[string]any)
		if !ok {
			return
		}
		props, _ := arg.(map[string]any)
		for _, name := range sortedKeys(props) {
			if pv, present := obj[name]; present {
				v.check(path+"."+name, props[name], pv, probs)
			}
		}
	case "required":
		obj, ok := value.(map[string]any)
		if !ok {
			return
		}
		for _, name := range arg.([]any) {
			if _, present := obj[name.(string)]; !present {
				fail("required property %q is missing", name)
			}
		}
	case "additionalProperties":
		obj, ok := value.(map[string]any)
		if !ok {
			return
		}
		props, _ := s["properties"].(map[string]any)
		for _, name := range sortedKeys(obj) {
			if _, declared := props[name]; declared {
				continue
			}
			if b, isBool := arg.(bool); isBool && !b {
				fail("property %q is not allowed", name)
				continue
			}
			v.check(path+"."+name, arg, obj[name], probs)
		}
	case "propertyNames":
		if obj, ok := value.(map[string]any); ok {
			for _, name := range sortedKeys(obj) {
				v.check(path+"{"+name+"}", arg, name, probs)
			}
		}
	case "items":
		if arr, ok := value.([]any); ok {
			for i, item := range arr {
				v.check(fmt.Sprintf("%s[%d]", path, i), arg, item, probs)
			}
		}
	case "minItems", "maxItems":
		if arr, ok := value.([]any); ok {
			n := intArg(arg)
			if k == "minItems" && int64(len(arr)) < n || k == "maxItems" && int64(len(arr)) > n {
				fail("%d items, %s is %d", len(arr), k, n)
			}
		}
	case "enum":
		for _, e := range arg.([]any) {
			if equal(e, value) {
				return
			}
		}
		fail("%s is not one of %v", show(value), arg)
	case "const":
		if !equal(arg, value) {
			fail("%s is not %s", show(value), show(arg))
		}
	case "minimum", "maximum":
		n, ok := value.(json.Number)
		if !ok {
			return
		}
		x, bound := num(n), num(arg.(json.Number))
		if x == nil || bound == nil {
			fail("%s: not a number", n)
			return
		}
		if c := x.Cmp(bound); k == "minimum" && c < 0 || k == "maximum" && c > 0 {
			fail("%s is outside the %s %s", n, k, arg)
		}
	case "minLength", "maxLength":
		if str, ok := value.(string); ok {
			n, l := intArg(arg), int64(len([]rune(str)))
			if k == "minLength" && l < n || k == "maxLength" && l > n {
				fail("string of length %d, %s is %d", l, k, n)
			}
		}
	case "pattern":
		str, ok := value.(string)
		if !ok {
			return
		}
		re, err := v.regexp(arg.(string))
		if err != nil {
			fail("bad pattern: %v", err)
		} else if !re.MatchString(str) {
			fail("%q does not match %s", str, arg)
		}
	case "format":
		if str, ok := value.(string); ok && arg == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				fail("%q is not an RFC 3339 date-time", str)
			}
		}
	case "allOf":
		for _, sub := range arg.([]any) {
			v.check(path, sub, value, probs)
		}
	case "anyOf", "oneOf":
		matched := 0
		var first []string
		for _, sub := range arg.([]any) {
			var p []string
			v.check(path, sub, value, &p)
			if len(p) == 0 {
				matched++
			} else if first == nil {
				first = p
			}
		}
		switch {
		case matched == 0:
			fail("matches none of %s (first: %s)", k, strings.Join(first, "; "))
		case k == "oneOf" && matched > 1:
			fail("matches %d schemas of oneOf", matched)
		}
	default:
		if !annotations[k] {
			fail("schema keyword %q is not supported by this checker", k)
		}
	}
}

// resolve follows a local reference.
func (v *Validator) resolve(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("only local references are supported, got %q", ref)
	}
	var cur any = v.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
	}
	return cur, nil
}

func (v *Validator) regexp(p string) (*regexp.Regexp, error) {
	if re, ok := v.re[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	v.re[p] = re
	return re, nil
}

func typeMatches(arg, value any) bool {
	switch t := arg.(type) {
	case string:
		return isType(t, value)
	case []any:
		for _, one := range t {
			if name, ok := one.(string); ok && isType(name, value) {
				return true
			}
		}
	}
	return false
}

func isType(name string, value any) bool {
	switch name {
	case "null":
		return value == nil
	case "boolean":
		_, ok := value.(bool)
		return ok
	case "string":
		_, ok := value.(string)
		return ok
	case "array":
		_, ok := value.([]any)
		return ok
	case "object":
		_, ok := value.(map[string]any)
		return ok
	case "number":
		n, ok := value.(json.Number)
		return ok && num(n) != nil
	case "integer":
		n, ok := value.(json.Number)
		if !ok {
			return false
		}
		f := num(n)
		return f != nil && f.IsInt()
	}
	return false
}

func typeOf(value any) string {
	switch value.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		return "number"
	}
	return fmt.Sprintf("%T", value)
}

// num parses a JSON number exactly (nil if it is not one).
func num(n json.Number) *big.Float {
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	if err != nil {
		return nil
	}
	return f
}

func intArg(arg any) int64 {
	n, _ := arg.(json.Number).Int64()
	return n
}

// equal compares decoded JSON values; numbers by value.
func equal(a, b any) bool {
	na, aok := a.(json.Number)
	nb, bok := b.(json.Number)
	if aok && bok {
		x, y := num(na), num(nb)
		return x != nil && y != nil && x.Cmp(y) == 0
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
