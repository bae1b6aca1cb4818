package schemacheck

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Document is a decoded OpenAPI 3.1 document.
type Document struct {
	Root map[string]any
	v    *Validator
}

// ParseDocument decodes an OpenAPI document for strict checking.
func ParseDocument(raw []byte) (*Document, error) {
	v, err := Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi document is %s, not an object", typeOf(v))
	}
	return &Document{Root: root, v: New(root, true)}, nil
}

// Operation is one method of one path template.
type Operation struct {
	Method, Path string
	Spec         map[string]any
}

// Operations lists every operation, sorted by path then method.
func (d *Document) Operations() []Operation {
	paths, _ := d.Root["paths"].(map[string]any)
	var out []Operation
	for _, p := range sortedKeys(paths) {
		item, _ := paths[p].(map[string]any)
		for _, m := range sortedKeys(item) {
			if spec, ok := item[m].(map[string]any); ok && isMethod(m) {
				out = append(out, Operation{Method: strings.ToUpper(m), Path: p, Spec: spec})
			}
		}
	}
	return out
}

func isMethod(m string) bool {
	switch m {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

// Find returns the operation that serves method on a concrete path
// ("/workers/7"), matching templated segments ("{id}") to any one
// segment; literal templates win over templated ones. HEAD is served by
// GET's operation.
func (d *Document) Find(method, path string) (Operation, bool) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	best, bestLiterals := Operation{}, -1
	for _, op := range d.Operations() {
		if op.Method != method {
			continue
		}
		if lit, ok := matchTemplate(op.Path, path); ok && lit > bestLiterals {
			best, bestLiterals = op, lit
		}
	}
	return best, bestLiterals >= 0
}

// matchTemplate reports whether path fits the template and how many of its
// segments matched literally.
func matchTemplate(tmpl, path string) (int, bool) {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return 0, false
	}
	lit := 0
	for i := range ts {
		switch {
		case strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}"):
			if ps[i] == "" {
				return 0, false
			}
		case ts[i] == ps[i]:
			lit++
		default:
			return 0, false
		}
	}
	return lit, true
}

// Exchange is one request and its answer, as a test recorded it.
type Exchange struct {
	Name        string          `json:"name"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Query       string          `json:"query,omitempty"`
	Request     json.RawMessage `json:"request,omitempty"`
	Status      int             `json:"status"`
	ContentType string          `json:"content_type"`
	// Headers are the answer's headers the document describes.
	Headers  map[string]string `json:"headers,omitempty"`
	Response json.RawMessage   `json:"response,omitempty"`
	// Text stands for an answer body that was not recorded: a non-JSON
	// one (the metrics), or one too large to keep.
	Text string `json:"text,omitempty"`
}

// Check validates an exchange against the document: the operation exists
// (or the answer is the shared 404/405 error), the request body fits its
// requestBody (unless it was refused as bad), the status is documented (or a
// default is), the answer's content type is the documented one, its body
// fits the schema, and the documented response headers it carries are
// declared.
func (d *Document) Check(x Exchange) error {
	op, ok := d.Find(x.Method, x.Path)
	if !ok {
		if x.Status == http.StatusNotFound || x.Status == http.StatusMethodNotAllowed {
			// No such route or method: the answer is the document's
			// shared error.
			op = Operation{Method: x.Method, Path: x.Path, Spec: map[string]any{
				"responses": map[string]any{"default": map[string]any{"$ref": "#/components/responses/Error"}}}}
		} else {
			return fmt.Errorf("%s %s: no operation in the document", x.Method, x.Path)
		}
	}
	where := fmt.Sprintf("%s %s (%s %s)", x.Method, x.Path, op.Method, op.Path)
	if err := d.checkQuery(op, x.Query); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	// A request answered 400 or 413 is a bad one on purpose; any other
	// answer's request must fit the document.
	if len(x.Request) > 0 && x.Status != http.StatusBadRequest && x.Status != http.StatusRequestEntityTooLarge {
		schema, err := d.requestSchema(op)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := d.validateRaw(schema, x.Request); err != nil {
			return fmt.Errorf("%s: request: %w", where, err)
		}
	}
	resp, err := d.response(op, x.Status)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	for name := range x.Headers {
		hdrs, _ := resp["headers"].(map[string]any)
		if _, ok := hdrs[name]; !ok {
			return fmt.Errorf("%s: answer %d carries header %s, which the document does not declare", where, x.Status, name)
		}
	}
	content, _ := resp["content"].(map[string]any)
	if x.Method == http.MethodHead || len(content) == 0 && len(x.Response) == 0 && x.Text == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(x.ContentType)
	if err != nil {
		return fmt.Errorf("%s: answer %d content type %q: %w", where, x.Status, x.ContentType, err)
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: answer %d is %s, the document says %v", where, x.Status, mt, sortedKeys(content))
	}
	if mt != "application/json" || len(x.Response) == 0 && x.Text != "" {
		return nil // not JSON, or a body too large to record
	}
	if err := d.validateRaw(media["schema"], x.Response); err != nil {
		return fmt.Errorf("%s: answer %d: %w", where, x.Status, err)
	}
	return nil
}

// checkQuery refuses query parameters the operation does not declare.
func (d *Document) checkQuery(op Operation, query string) error {
	if query == "" {
		return nil
	}
	declared := map[string]bool{}
	params, _ := op.Spec["parameters"].([]any)
	for _, p := range params {
		pm, _ := d.deref(p).(map[string]any)
		if pm["in"] == "query" {
			declared[pm["name"].(string)] = true
		}
	}
	for _, kv := range strings.Split(query, "&") {
		name, _, _ := strings.Cut(kv, "=")
		if !declared[name] {
			return fmt.Errorf("query parameter %q is not declared", name)
		}
	}
	return nil
}

func (d *Document) requestSchema(op Operation) (any, error) {
	body, ok := d.deref(op.Spec["requestBody"]).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("sent a body, but the operation takes none")
	}
	content, _ := body["content"].(map[string]any)
	media, ok := content["application/json"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the request body is not documented as application/json")
	}
	return media["schema"], nil
}

func (d *Document) response(op Operation, status int) (map[string]any, error) {
	resps, _ := op.Spec["responses"].(map[string]any)
	r, ok := resps[strconv.Itoa(status)]
	if !ok {
		if r, ok = resps["default"]; !ok {
			codes := sortedKeys(resps)
			sort.Strings(codes)
			return nil, fmt.Errorf("answer %d is not documented (documented: %v)", status, codes)
		}
	}
	m, ok := d.deref(r).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("answer %d: response object does not resolve", status)
	}
	return m, nil
}

// deref follows a $ref in an OpenAPI object (responses, parameters,
// request bodies).
func (d *Document) deref(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, err := d.v.resolve(ref); err == nil {
			return d.deref(target)
		}
	}
	return m
}

func (d *Document) validateRaw(schema any, raw json.RawMessage) error {
	v, err := Decode(raw)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return d.v.Validate(schema, v)
}

// Validate checks a decoded value against a schema of the document.
func (d *Document) Validate(schema, value any) error { return d.v.Validate(schema, value) }
