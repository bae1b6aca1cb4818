package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kvselect/kvselect/api"
)

// Error is an error answer of a kvselect node.
type Error struct {
	Method string
	URL    string
	Status int
	// Code is the API's machine-readable code (api.CodeNotFound, ...).
	// An answer without one gets a code derived from its status.
	Code    api.Code
	Message string
	// AfterUnknownOutcome is set when this answer came to a retry of a
	// catalog write whose first attempt had an unknown outcome: a
	// not_found from a DELETE then most likely means the first attempt
	// deleted the worker.
	AfterUnknownOutcome bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s: %s (HTTP %d)", e.Method, e.URL, e.Code, e.Message, e.Status)
}

// CodeOf returns the API code of err when it is (or wraps) an *Error, and
// "" otherwise (a transport failure, a cancelled context).
func CodeOf(err error) api.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// UnknownPartition reports whether err is a node's answer that the
// catalog never held a worker for the request's model_name and tenant_id
// (api.CodeUnknownPartition): most likely a misspelt name, which no retry
// mends, unlike api.CodeNotReady (an outage: retry later or elsewhere).
// Both are HTTP 503; the message lists the partitions the catalog holds.
func UnknownPartition(err error) bool { return CodeOf(err) == api.CodeUnknownPartition }

// decodeError reads an error answer: {"error", "code"}, or the load
// shedding body {"message", "type", "code": 503}; anything else keeps the
// status's text.
func decodeError(method, url string, status int, body []byte) *Error {
	e := &Error{Method: method, URL: url, Status: status}
	var generic struct {
		Error   string          `json:"error"`
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(body, &generic) == nil {
		var code string
		switch {
		case json.Unmarshal(generic.Code, &code) == nil && code != "":
			e.Code, e.Message = api.Code(code), generic.Error
		case generic.Type == api.BusyType:
			e.Code, e.Message = api.CodeOverloaded, generic.Message
		}
	}
	if e.Code == "" {
		e.Code = api.Code(strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_")))
	}
	if e.Message == "" {
		e.Message = snippet(body)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// snippet is the start of a body on one line.
func snippet(b []byte) string {
	const max = 200
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
