package slottracker

import (
	"errors"
	"fmt"

	"github.com/kvselect/kvselect/api"
)

// Errors of the Service. Each maps to one HTTP status (errorCodes).
var (
	// ErrInvalid: a value is out of range or missing; the message names
	// the field (see FieldError).
	ErrInvalid = errors.New("invalid request")
	// ErrTrackerNotFound: no worker is registered for the (model_name,
	// tenant_id).
	ErrTrackerNotFound = errors.New("no slot tracker")
	// ErrWorkerNotFound: the worker, or the worker's dp rank, is not
	// registered in the tracker.
	ErrWorkerNotFound = errors.New("worker not registered")
	// ErrDuplicateWorker: the worker_id is already registered in the
	// tracker.
	ErrDuplicateWorker = errors.New("worker already registered")
	// ErrBlockSizeMismatch: the tracker's workers use another block size.
	ErrBlockSizeMismatch = errors.New("block_size mismatch")
	// ErrRankLimit: the registration would take the tracker past
	// fsm.MaxRanksPerPartition ranks.
	ErrRankLimit = errors.New("tracker rank limit reached")
	// ErrRequestNotFound: no active request with that id in the tracker.
	ErrRequestNotFound = errors.New("request not active")
	// ErrDuplicateRequest: the request_id is already active in the
	// tracker.
	ErrDuplicateRequest = errors.New("request already active")
	// ErrClosed: the service is shutting down.
	ErrClosed = errors.New("slot tracker is shutting down")
)

// Errors of the HTTP layer itself.
var (
	errTooLarge = errors.New("request body too large")
	errNoRoute  = errors.New("route not found")
	errMethod   = errors.New("method not allowed")
)

// FieldError is an invalid or missing value of one field. It reads
// "field: problem" (just "problem" for the body as a whole) and unwraps to
// ErrInvalid.
type FieldError struct {
	Field, Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// errorCodes turns errors into the API's codes and, through
// api.Code.Status, HTTP statuses. The first match wins.
var errorCodes = []struct {
	err  error
	code api.Code
}{
	{ErrInvalid, api.CodeBadRequest},
	{errTooLarge, api.CodePayloadTooLarge},
	{errNoRoute, api.CodeNotFound},
	{errMethod, api.CodeMethodNotAllowed},
	{ErrTrackerNotFound, api.CodeNotFound},
	{ErrWorkerNotFound, api.CodeNotFound},
	{ErrRequestNotFound, api.CodeNotFound},
	{ErrDuplicateWorker, api.CodeConflict},
	{ErrBlockSizeMismatch, api.CodeConflict},
	{ErrRankLimit, api.CodeConflict},
	{ErrDuplicateRequest, api.CodeConflict},
	{ErrClosed, api.CodeShuttingDown},
}

// codeOf returns the API code of err; an unknown error is internal.
func codeOf(err error) api.Code {
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return api.CodeInternal
}
