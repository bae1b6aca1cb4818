package api

import (
	"net/url"
	"strconv"
	"strings"
)

// Headers of leader routing and session consistency.
const (
	// HeaderIndex carries a catalog index: on every catalog write answer
	// (the Raft index the write was applied at) and catalog read answer
	// (the index of the catalog read); on a request, the index the node
	// must have applied before it answers (read-your-writes across
	// nodes), like the body field min_catalog_index.
	HeaderIndex = "X-Kvselect-Index"
	// HeaderServedBy names the node that served a leader-only request.
	HeaderServedBy = "X-Kvselect-Served-By"
	// HeaderApplied is "false" on a forwarded write's answer when the
	// follower that forwarded it had not applied the write itself within
	// the bounded wait; absent otherwise.
	HeaderApplied = "X-Kvselect-Applied"
	// HeaderForwardedBy marks a request a follower forwarded to the
	// leader; its receiver never forwards it again, so two nodes with
	// stale views of the leader cannot bounce a request between them.
	HeaderForwardedBy = "X-Kvselect-Forwarded-By"
	// HeaderCatalogBehind is set on a selection answered from a local
	// catalog that had not reached the request's min_catalog_index within
	// the wait (a node cut off from the leader keeps selecting): its value
	// is the index the node had applied. require_catalog turns this case
	// into 503 catalog_behind instead.
	HeaderCatalogBehind = "X-Kvselect-Catalog-Behind"
	// HeaderReplayed is "true" on a /select_and_reserve answer that
	// repeats an earlier booking of the same reservation_id and prompt (a
	// retry after a lost answer): nothing new was booked.
	HeaderReplayed = "X-Kvselect-Replayed"
	// HeaderIgnoredOverride lists, comma separated, the Dynamo cost
	// parameters of a request's router_config_override that its policy
	// does not take, and that were therefore not applied.
	HeaderIgnoredOverride = "X-Kvselect-Ignored-Override"
)

// Authentication (SPEC §11): with a token, every route but the open ones
// (AccessOpen) needs "Authorization: Bearer <token>" (with --auth-scope
// admin, only the routes of classes worker and admin).
const (
	HeaderAuthorization = "Authorization"
	bearerScheme        = "Bearer"
)

// Bearer is the Authorization value that carries token.
func Bearer(token string) string { return bearerScheme + " " + token }

// BearerToken returns the token of an Authorization value, and whether it
// holds one. The scheme is matched without regard to case ("bearer",
// "BEARER"), as RFC 7235 §2.1 says of every auth-scheme, and may be
// followed by more than one space; an empty token is none.
func BearerToken(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, bearerScheme) {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// Query parameters.
const (
	// QueryConsistency selects a catalog read's consistency:
	// ConsistencyLocal (default) or ConsistencyLinearizable.
	QueryConsistency = "consistency"
	// QueryRedirect "true" asks a follower to answer a leader-only request
	// with 307 to the leader instead of forwarding it.
	QueryRedirect  = "redirect"
	QueryModelName = "model_name"
	QueryTenantID  = "tenant_id"
	// QueryRoutingGroup is Dynamo's newer name for the tenant_id filter.
	QueryRoutingGroup = "routing_group"
	QueryWorkerID     = "worker_id"
	QueryCursor       = "cursor"
	QueryLimit        = "limit"
	// QueryModel names the model of DELETE /busy_threshold (Dynamo's
	// "model", as in the thresholds' bodies).
	QueryModel      = "model"
	RedirectEnabled = "true"
	// QueryFor names what GET /readyz judges readiness for: left out,
	// leader-aware write readiness; ReadyzForSelection, selection.
	QueryFor = "for"
)

// Consistency levels of catalog reads.
const (
	ConsistencyLocal        = "local"
	ConsistencyLinearizable = "linearizable"
)

// Paths of every route. Templates hold {id}; the functions below fill it.
const (
	PathHealth           = "/health"
	PathReady            = "/ready"
	PathReadyz           = "/readyz"
	PathMetrics          = "/metrics"
	PathOpenAPI          = "/openapi.json"
	PathWorkers          = "/workers"
	PathWorker           = "/workers/{id}"
	PathWorkerKeepAlive  = "/workers/{id}/keepalive"
	PathKeepAlive        = "/workers/keepalive"
	PathSelect           = "/select"
	PathSelectAndReserve = "/select_and_reserve"
	PathReservations     = "/reservations"
	PathReservation      = "/reservations/{id}"
	PathPrefillComplete  = "/reservations/{id}/prefill_complete"
	PathOutputBlock      = "/reservations/{id}/output_block"
	PathLoads            = "/loads"
	PathPotentialLoads   = "/potential_loads"
	PathOverlapScores    = "/overlap_scores"
	PathDump             = "/dump"
	PathBusyThreshold    = "/busy_threshold"
	PathPolicies         = "/policies"
	PathClusterStatus    = "/cluster/status"
	PathClusterJoin      = "/cluster/join"
	PathClusterRemove    = "/cluster/remove"
	PathClusterStepDown  = "/cluster/stepdown"
	PathClusterMetadata  = "/cluster/metadata"

	PathReplicaSyncRegister   = "/replica_sync/register_peer"
	PathReplicaSyncDeregister = "/replica_sync/deregister_peer"
	PathReplicaSyncPeers      = "/replica_sync/peers"
	PathReplicaSyncStatus     = "/replica_sync/status"
)

// WorkerPath is PathWorker for one worker id.
func WorkerPath(id uint64) string { return PathWorkers + "/" + strconv.FormatUint(id, 10) }

// KeepAlivePath is PathWorkerKeepAlive for one worker id.
func KeepAlivePath(id uint64) string { return WorkerPath(id) + "/keepalive" }

// ReservationPath is PathReservation for one reservation id.
func ReservationPath(id string) string { return PathReservations + "/" + url.PathEscape(id) }

// PrefillCompletePath is PathPrefillComplete for one reservation id.
func PrefillCompletePath(id string) string { return ReservationPath(id) + "/prefill_complete" }

// OutputBlockPath is PathOutputBlock for one reservation id.
func OutputBlockPath(id string) string { return ReservationPath(id) + "/output_block" }

// Limits both ends check (SPEC §3, §11).
const (
	// MaxBodyBytes bounds a request body (413 past it).
	MaxBodyBytes = 8 << 20
	// MaxHashes bounds the hashes or token ids of one request.
	MaxHashes = 1 << 20
	// MaxISLTokens bounds isl_tokens.
	MaxISLTokens = 1 << 32
	// MaxIDLen bounds reservation and selection ids.
	MaxIDLen = 256
	// MaxNameLen bounds model_name, tenant_id, endpoints and node ids.
	MaxNameLen = 1024
	// DefaultScope is the model_name and tenant_id of a request that
	// omits them.
	DefaultScope = "default"
	// DefaultReservationsLimit and MaxReservationsLimit bound a page of
	// GET /reservations.
	DefaultReservationsLimit = 100
	MaxReservationsLimit     = 1000
)

// Ptr returns a pointer to v, for the optional fields of request bodies.
func Ptr[T any](v T) *T { return &v }
