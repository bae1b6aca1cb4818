package http

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler"
)

// Errors raised by the HTTP layer itself.
var (
	errBadRequest   = errors.New("bad request")
	errTooLarge     = errors.New("request body too large")
	errUnauthorized = errors.New("missing or invalid bearer token")
	errNoRoute      = errors.New("no such route")
	errMethod       = errors.New("method not allowed")
)

// requestError is a 400 whose message starts with the offending field.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Unwrap() error { return errBadRequest }

// badRequest builds a 400 error whose message starts with the field.
func badRequest(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &requestError{msg: msg}
}

// errorMapping is the one place that turns errors into HTTP statuses and
// machine-readable codes. Order matters: the first match wins.
var errorMapping = []struct {
	err    error
	status int
	code   string
}{
	{errBadRequest, http.StatusBadRequest, "bad_request"},
	{errTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large"},
	{errUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{errNoRoute, http.StatusNotFound, "not_found"},
	{errMethod, http.StatusMethodNotAllowed, "method_not_allowed"},
	{fsm.ErrInvalidCommand, http.StatusBadRequest, "bad_request"},
	{fsm.ErrWorkerNotFound, http.StatusNotFound, "not_found"},
	{scheduler.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{scheduler.ErrNotReady, http.StatusServiceUnavailable, "not_ready"},
	{scheduler.ErrWorkerNotFound, http.StatusNotFound, "not_found"},
	{scheduler.ErrReservationNotFound, http.StatusNotFound, "not_found"},
	{scheduler.ErrDuplicateReservation, http.StatusConflict, "conflict"},
	{indexer.ErrUnknownPartition, http.StatusNotFound, "not_found"},
	{cluster.ErrNotLeader, http.StatusServiceUnavailable, "not_leader"},
	{cluster.ErrNoLeader, http.StatusServiceUnavailable, "no_leader"},
	{cluster.ErrUnknownOutcome, http.StatusServiceUnavailable, "unknown_outcome"},
	{cluster.ErrCatalogBehind, http.StatusServiceUnavailable, "catalog_behind"},
	{cluster.ErrMembership, http.StatusConflict, "conflict"},
	{cluster.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
}

// statusOf returns the HTTP status and code for err; unknown errors are
// 500 "internal".
func statusOf(err error) (int, string) {
	for _, m := range errorMapping {
		if errors.Is(err, m.err) {
			return m.status, m.code
		}
	}
	return http.StatusInternalServerError, "internal"
}

// errorBody is every error response: {"error": message, "code": code}.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}
