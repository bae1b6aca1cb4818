package http

import (
	"errors"
	"fmt"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/zmqsync"
)

// Errors raised by the HTTP layer itself.
var (
	errBadRequest   = errors.New("bad request")
	errTooLarge     = errors.New("request body too large")
	errUnauthorized = errors.New("missing or invalid bearer token")
	errForbidden    = errors.New("forbidden")
	errNoRoute      = errors.New("no such route")
	errMethod       = errors.New("method not allowed")
	// errRecovering: /dump on a node whose own index is still being
	// recovered; its partial index must not seed another node's.
	errRecovering = errors.New("this node is still recovering its KV index from a peer; ask another node")
	// errCatalogUnsettled: a partition the catalog does not know, on a
	// node that cannot tell yet whether it was registered
	// (Service.partitionErr).
	errCatalogUnsettled = errors.New("not ready")
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

// errorCodes is the one place that turns the node's errors into the API's
// codes (and, through api.Code.Status, HTTP statuses). Order matters: the
// first match wins.
var errorCodes = []struct {
	err  error
	code api.Code
}{
	{errBadRequest, api.CodeBadRequest},
	{errTooLarge, api.CodePayloadTooLarge},
	{errUnauthorized, api.CodeUnauthorized},
	{errForbidden, api.CodeForbidden},
	{errNoRoute, api.CodeNotFound},
	{errMethod, api.CodeMethodNotAllowed},
	{errRecovering, api.CodeNotReady},
	{errCatalogUnsettled, api.CodeNotReady},
	{fsm.ErrInvalidCommand, api.CodeBadRequest},
	{fsm.ErrWorkerNotFound, api.CodeNotFound},
	{fsm.ErrPolicyNotFound, api.CodeNotFound},
	{fsm.ErrTooManyPolicies, api.CodeConflict},
	{fsm.ErrUnknownPartition, api.CodeUnknownPartition},
	{scheduler.ErrInvalid, api.CodeBadRequest},
	{scheduler.ErrNotReady, api.CodeNotReady},
	{scheduler.ErrOverloaded, api.CodeOverloaded},
	{scheduler.ErrWorkerNotFound, api.CodeNotFound},
	{scheduler.ErrReservationNotFound, api.CodeNotFound},
	{scheduler.ErrNoPendingSelection, api.CodeNotFound},
	{scheduler.ErrDuplicateReservation, api.CodeConflict},
	{scheduler.ErrCapacity, api.CodeCapacity},
	{indexer.ErrUnknownPartition, api.CodeNotFound},
	{cluster.ErrNotLeader, api.CodeNotLeader},
	{cluster.ErrNoLeader, api.CodeNoLeader},
	{cluster.ErrUnknownOutcome, api.CodeUnknownOutcome},
	{cluster.ErrCatalogBehind, api.CodeCatalogBehind},
	{cluster.ErrMembership, api.CodeConflict},
	{cluster.ErrNoLease, api.CodeConflict},
	{cluster.ErrClosed, api.CodeShuttingDown},
	{errReplicaSyncOff, api.CodeConflict},
	{zmqsync.ErrEndpoint, api.CodeBadRequest},
	{zmqsync.ErrPeerNotFound, api.CodeNotFound},
	{zmqsync.ErrMemberPeer, api.CodeConflict},
	{zmqsync.ErrTooManyPeers, api.CodeConflict},
	{zmqsync.ErrClosed, api.CodeShuttingDown},
}

// codeOf returns the API code for err; unknown errors are "internal".
func codeOf(err error) api.Code {
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return api.CodeInternal
}
