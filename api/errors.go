package api

import "net/http"

// Code is the machine-readable "code" of an error answer. Codes are stable:
// clients decide what to do from them (retry elsewhere, retry later, give
// up), so a code is never renamed.
type Code string

// Error codes and the situations they name.
const (
	// CodeBadRequest: the request is malformed or a value is out of range;
	// the message starts with the field at fault.
	CodeBadRequest Code = "bad_request"
	// CodePayloadTooLarge: the body exceeds MaxBodyBytes.
	CodePayloadTooLarge Code = "payload_too_large"
	// CodeUnauthorized: the route needs a bearer token, and the request
	// carries none the node accepts.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden: the request carries the selection token, and the
	// route needs the admin token.
	CodeForbidden Code = "forbidden"
	// CodeNotFound: no such route, worker, reservation, pending
	// selection or policy entry.
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed: the route exists but not for this method; the
	// answer's Allow header lists the methods it takes.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeConflict: a reservation id already booked, a membership
	// change that is not possible, or a new policy entry past
	// MaxPolicies.
	CodeConflict Code = "conflict"
	// CodeCapacity: the booking would pass the node's bounds on the
	// bookings it holds (--max-reservations, --max-reserved-blocks).
	// Nothing was booked; retry after Retry-After, on this node or another.
	CodeCapacity Code = "capacity"
	// CodeNotReady: no schedulable worker in the partition; on GET
	// /readyz, the node is not a caught-up member of the cluster.
	CodeNotReady Code = "not_ready"
	// CodeUnknownPartition: the catalog holds no worker for the
	// request's (model_name, tenant_id) and never held one it remembers
	// (a partition emptied by deletes or lapsed leases stays not_ready):
	// most likely a misspelt name, which no retry mends. The message
	// lists the partitions the catalog holds. 503 like not_ready, for
	// Dynamo's clients, but without Retry-After.
	CodeUnknownPartition Code = "unknown_partition"
	// CodeOverloaded: every schedulable worker is busy (load shedding).
	CodeOverloaded Code = "overloaded"
	// CodeNotLeader: the node that received a leader-only request is not
	// the leader. Nothing was written.
	CodeNotLeader Code = "not_leader"
	// CodeNoLeader: no leader is known (an election is running, or there
	// is no quorum). Nothing was written.
	CodeNoLeader Code = "no_leader"
	// CodeUnknownOutcome: a write reached the leader's log but its fate
	// is unknown (leadership lost, timeout). Catalog writes are
	// idempotent upserts and deletes, so clients retry them.
	CodeUnknownOutcome Code = "unknown_outcome"
	// CodeCatalogBehind: the node has not applied the catalog index the
	// request asked for (min_catalog_index, X-Kvselect-Index) in time.
	// Nothing was booked.
	CodeCatalogBehind Code = "catalog_behind"
	// CodeShuttingDown: the node is stopping. Nothing was written.
	CodeShuttingDown Code = "shutting_down"
	// CodeInternal: a bug; the message says what failed.
	CodeInternal Code = "internal"
)

// codeStatus is the HTTP status of each code.
var codeStatus = map[Code]int{
	CodeBadRequest:       http.StatusBadRequest,
	CodePayloadTooLarge:  http.StatusRequestEntityTooLarge,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeConflict:         http.StatusConflict,
	CodeCapacity:         http.StatusTooManyRequests,
	CodeNotReady:         http.StatusServiceUnavailable,
	CodeUnknownPartition: http.StatusServiceUnavailable,
	CodeOverloaded:       http.StatusServiceUnavailable,
	CodeNotLeader:        http.StatusServiceUnavailable,
	CodeNoLeader:         http.StatusServiceUnavailable,
	CodeUnknownOutcome:   http.StatusServiceUnavailable,
	CodeCatalogBehind:    http.StatusServiceUnavailable,
	CodeShuttingDown:     http.StatusServiceUnavailable,
	CodeInternal:         http.StatusInternalServerError,
}

// Status is the HTTP status that goes with the code (500 for a code this
// package does not know).
func (c Code) Status() int {
	if s, ok := codeStatus[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes lists every code, for documentation and tests.
func Codes() []Code {
	out := make([]Code, 0, len(codeStatus))
	for c := range codeStatus {
		out = append(out, c)
	}
	return out
}

// NothingWritten reports whether an answer with this code proves that the
// request changed nothing anywhere: the node was not (or no longer) the
// leader, no leader was known, or the node was shutting down before it
// started. Such a request is safe to send again, to this node or another,
// whatever it was.
func (c Code) NothingWritten() bool {
	switch c {
	case CodeNotLeader, CodeNoLeader, CodeShuttingDown:
		return true
	}
	return false
}

// Error is the body of every error answer but the load-shedding one:
// {"error": "<message>", "code": "<code>"}.
type Error struct {
	Message string `json:"error"`
	Code    Code   `json:"code"`
}

// Busy is the body of a 503 from /select or /select_and_reserve when every
// schedulable worker is busy, in the shape of Dynamo's load shedding
// (seed 001); it comes with Retry-After.
type Busy struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}

// BusyMessage and BusyType are the fixed values of a Busy body.
const (
	BusyMessage = "Service temporarily unavailable: All workers are busy, please retry later"
	BusyType    = "service_unavailable"
)
