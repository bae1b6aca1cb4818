package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/scheduler"
)

// The OpenAPI document is built here from the wire types themselves (by
// reflection) and the table of operations below, and compared with the
// embedded openapi.json that the server serves: a field added to a wire
// type, or a route added here, changes the document, and the test says so
// until openapi.json is regenerated (go test ./api -run OpenAPI -update).

// schema is one JSON Schema object; keys are sorted when encoded.
type schema = map[string]any

// param is a path, query or header parameter.
type param struct {
	name, in, desc string
	schema         schema
	required       bool
}

// resp is one documented answer: a status, what it means, its body (a Go
// wire type, or one of the special bodies) and the headers it carries.
type resp struct {
	status  string
	desc    string
	body    any
	headers []string
}

// op is one operation of the API.
type op struct {
	method, path, id, tag, summary, desc string
	// access is who may call it (its class: AccessOpen, AccessSelection,
	// AccessWorker, AccessInspect, AccessAdmin); where is which node
	// answers (RunsOnAny, ...). The router test compares both with the
	// router's table.
	access, where string
	params        []param
	// body is the request body's Go type (nil: none); required adds
	// required fields to it for this operation; optionalBody allows an
	// empty body.
	body         any
	required     []string
	optionalBody bool
	resps        []resp
}

// special bodies.
type (
	textBody    struct{}         // text/plain
	anyObject   struct{}         // any JSON object
	selectError struct{}         // Error or Busy
	arrayOf     struct{ of any } // a JSON array of a wire type
)

const (
	u64Max = "18446744073709551615"
	i64Min = "-9223372036854775808"
)

var (
	pathWorkerID = param{"id", "path", "The worker id (unsigned 64-bit).",
		schema{"type": "string", "pattern": "^[0-9]+$"}, true}
	pathReservationID = param{"id", "path", "The reservation id (see ReservationID).",
		schema{"$ref": "#/components/schemas/ReservationID"}, true}
	qModel = param{api.QueryModelName, "query", "Only this model.", schema{"type": "string"}, false}
	// qThresholdModel names the model whose thresholds DELETE clears.
	qThresholdModel = param{api.QueryModel, "query", "The model.", schema{"type": "string"}, true}
	qTenant         = param{api.QueryTenantID, "query", "Only this tenant.", schema{"type": "string"}, false}
	// qPolicyModel and qPolicyTenant name the entry DELETE /policies
	// removes.
	qPolicyModel = param{api.QueryModelName, "query", "The model, or \"*\" for the cluster default.",
		schema{"type": "string", "minLength": 1, "maxLength": api.MaxNameLen}, true}
	qPolicyTenant = param{api.QueryTenantID, "query", "The tenant (default \"default\"); left out for the cluster default.",
		schema{"type": "string", "maxLength": api.MaxNameLen}, false}
	qGroup = param{api.QueryRoutingGroup, "query", "Dynamo's newer name for tenant_id (not both, unless equal).",
		schema{"type": "string"}, false}
	qWorker = param{api.QueryWorkerID, "query", "Only this worker.",
		schema{"type": "string", "pattern": "^[0-9]+$"}, false}
	qConsistency = param{api.QueryConsistency, "query",
		"`local` (default) reads this node's catalog; `linearizable` reads the leader's after it has confirmed its leadership and applied its commit index (forwarded from followers).",
		schema{"type": "string", "enum": []string{api.ConsistencyLocal, api.ConsistencyLinearizable}}, false}
	qRedirect = param{api.QueryRedirect, "query",
		"`true` makes a follower answer 307 with the leader's Location instead of forwarding the request.",
		schema{"type": "string", "enum": []string{api.RedirectEnabled, "false"}}, false}
	qLimit = param{api.QueryLimit, "query",
		fmt.Sprintf("Page size, 1 to %d (default %d).", api.MaxReservationsLimit, api.DefaultReservationsLimit),
		schema{"type": "string", "pattern": "^[0-9]+$"}, false}
	qFor = param{api.QueryFor, "query",
		"`selection` judges whether this node can serve selections (the pod readiness probe); left out, leader-aware write readiness.",
		schema{"type": "string", "enum": []string{api.ReadyzForSelection}}, false}
	qCursor = param{api.QueryCursor, "query", "The next_cursor of the previous page.", schema{"type": "string"}, false}
	hIndex  = param{api.HeaderIndex, "header",
		"A catalog index the node must have applied before it answers (waits up to 2 s, then 503 catalog_behind): read-your-writes across nodes.",
		schema{"type": "string", "pattern": "^[0-9]+$"}, false}
)

// Response headers, by name.
var respHeaders = map[string]string{
	api.HeaderIndex:          "The catalog index of the write (or of the catalog read).",
	api.HeaderServedBy:       "The node that served a leader-only request.",
	api.HeaderApplied:        "`false` when the follower that forwarded the write had not applied it itself within 2 s.",
	"Retry-After":            "Seconds to wait before trying again.",
	"Content-Encoding":       "`gzip` when the request's Accept-Encoding allows it.",
	"Location":               "The same request on the leader.",
	"Allow":                  "The methods the path takes.",
	"WWW-Authenticate":       "The bearer challenge: `Bearer realm=\"kvselect\"`, with `error=\"insufficient_scope\"` on a 403.",
	api.HeaderCatalogBehind:  "The catalog index this node had applied when it answered from its own catalog, short of the request's min_catalog_index (the node did not reach it in time; require_catalog makes that a 503).",
	api.HeaderReplayed:       "`true` when the answer repeats an earlier booking of the same reservation_id and prompt (a retry): nothing new was booked.",
	"Content-Type":           "",
	"X-Content-Type-Options": "",
}

var (
	writeHeaders  = []string{api.HeaderIndex, api.HeaderServedBy, api.HeaderApplied}
	readHeaders   = []string{api.HeaderIndex, api.HeaderServedBy}
	catalogErrors = []resp{
		{"307", "With ?redirect=true on a follower: the leader's location.", api.Redirect{}, []string{"Location"}},
		{"400", "A field is missing, malformed, unknown or out of range; the message names it.", api.Error{}, []string{api.HeaderServedBy}},
		{"401", "The route needs the bearer token (--auth-token-file).", api.Error{}, []string{"WWW-Authenticate"}},
		{"503", "`no_leader` or `not_leader` (nothing was written: retry), `unknown_outcome` (the write may have been applied: catalog writes are idempotent, so retry), `shutting_down`.",
			api.Error{}, []string{"Retry-After", api.HeaderServedBy}},
	}
	// catalogReadErrors are those of a catalog read (GET /workers,
	// /policies, /busy_threshold), which may be linearizable.
	catalogReadErrors = []resp{
		{"400", "A field is missing, malformed, unknown or out of range; the message names it.", api.Error{}, nil},
		{"503", "`catalog_behind`, or for linearizable reads `no_leader`/`not_leader`.", api.Error{}, []string{"Retry-After"}},
	}
	promptErrors = []resp{
		{"400", "A field is missing, malformed, unknown or out of range; the message names it.", api.Error{}, nil},
		{"503", "`not_ready` (no schedulable worker in a partition the catalog holds or held workers for), `unknown_partition` (the catalog never held a worker for this model_name and tenant_id: most likely a typo, which no retry mends; the message lists the partitions it holds; no Retry-After), or `catalog_behind` (the node has not applied min_catalog_index in time and the request sets require_catalog).",
			api.Error{}, []string{"Retry-After"}},
	}
)

func with(rs []resp, more ...resp) []resp { return append(append([]resp{}, more...), rs...) }

// operations is the whole HTTP API; http's router test keeps it and the
// router in agreement.
var operations = []op{
	{method: "GET", path: api.PathHealth, id: "health", access: api.AccessOpen, where: api.RunsOnAny, tag: "health", summary: "Liveness",
		desc:  "200 while the process serves HTTP.",
		resps: []resp{{"200", "Alive.", api.Health{}, nil}}},
	{method: "GET", path: api.PathReady, id: "ready", access: api.AccessOpen, where: api.RunsOnAny, tag: "health", summary: "Readiness: can this node select?",
		desc:  "200 when at least one worker is schedulable in this node's catalog, else 503, with the same body. Selection needs no quorum, so a node without a leader can be ready.",
		resps: []resp{{"200", "Ready.", api.Ready{}, nil}, {"503", "Not ready (no schedulable worker).", api.Ready{}, nil}}},
	{method: "GET", path: api.PathReadyz, id: "readyz", access: api.AccessOpen, where: api.RunsOnAny, tag: "health", summary: "Readiness for orchestrators: a caught-up member (writes), or able to select (?for=selection)",
		desc: "Without `for`, leader-aware write readiness for operators and scripts: 200 when this node is a voter of the Raft configuration, a leader is known (or it leads), and it has applied every entry up to the commit index it had learned from the leader when the request came (it waits up to 0.5 s for that); else 503 not_ready, whose reason says which of these fails. " +
			"A restarted node is not ready until the leader's first append has told it a commit index and it has applied up to it. " +
			"With `for=selection`, the pod readiness probe (the Kubernetes manifests'): 200 once the node has, since it started, caught up at least once with a leader's commit index (caught_up) and finished recovering its KV index (recovering false); from then on it stays 200 without a leader or a quorum, since selection needs neither; 503 not_ready with a reason otherwise, and on a node that shut down or was removed. " +
			"Open like /health: a probe carries no token. Unlike /ready it says nothing about workers.",
		params: []param{qFor},
		resps: []resp{{"200", "Ready in the sense asked.", api.Readyz{}, nil}, {"400", "An unknown value of for.", api.Error{}, nil},
			{"503", "Not ready: reason says why.", api.Readyz{}, nil}}},
	{method: "GET", path: api.PathMetrics, id: "metrics", access: api.AccessSelection, where: api.RunsOnAny, tag: "health", summary: "Prometheus metrics",
		resps: []resp{{"200", "Prometheus text exposition format.", textBody{}, nil}}},
	{method: "GET", path: api.PathOpenAPI, id: "openapi", access: api.AccessOpen, where: api.RunsOnAny, tag: "health", summary: "This document",
		resps: []resp{{"200", "The OpenAPI 3.1 document of the API.", anyObject{}, nil}}},

	{method: "GET", path: api.PathWorkers, id: "listWorkers", access: api.AccessSelection, where: api.RunsOnLeaderIfLinearizable, tag: "catalog", summary: "List workers",
		desc:   "Catalog records sorted by (model_name, tenant_id, worker_id), each with its lifecycle and this node's KV event listener per rank.",
		params: []param{qModel, qTenant, qGroup, qConsistency, hIndex},
		resps:  with(catalogReadErrors, resp{"200", "The workers.", arrayOf{api.Worker{}}, readHeaders})},
	{method: "POST", path: api.PathWorkers, id: "registerWorker", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "catalog", summary: "Register or replace a worker",
		desc:   "Upsert through the Raft log: followers forward to the leader and answer once they have applied the write themselves. Fields left out take their defaults. An incomplete worker is stored (201) but never selected; not_schedulable_reasons says why.",
		params: []param{qRedirect}, body: api.WorkerFields{}, required: []string{"worker_id"},
		resps: with(catalogErrors, resp{"201", "The stored record.", api.WorkerWritten{}, writeHeaders})},
	{method: "POST", path: api.PathKeepAlive, id: "keepAliveMany", access: api.AccessWorker, where: api.RunsOnLeader, tag: "catalog", summary: "Renew many workers' leases",
		desc:   "Renews the lease (lease_ttl_s) of every worker named on the leader; followers forward. Nothing is written to the Raft log: only the leader keeps deadlines, and a new leader gives every lease a full TTL from its election. Each id succeeds or fails on its own: failed lists the ids the one-worker route would have refused, with its code (not_found: unknown, or its lease already lapsed, so register it again; conflict: registered without lease_ttl_s).",
		params: []param{qRedirect}, body: api.KeepAliveRequest{}, required: []string{"worker_ids"},
		resps: with(catalogErrors, resp{"200", "The leases renewed and the ids that were not.", api.KeepAliveAnswer{}, []string{api.HeaderServedBy}})},
	{method: "POST", path: api.PathWorkerKeepAlive, id: "keepAlive", access: api.AccessWorker, where: api.RunsOnLeader, tag: "catalog", summary: "Renew a worker's lease",
		desc:   "A worker registered with lease_ttl_s must call this (or the batch route) within each TTL, or the leader removes it through the Raft log (reason lease_expired) and every node drops it at the same index, with its reservations.",
		params: []param{pathWorkerID, qRedirect},
		resps: with(catalogErrors, resp{"200", "The renewed lease.", api.Lease{}, []string{api.HeaderServedBy}},
			resp{"404", "No such worker, or its lease already lapsed: register it again.", api.Error{}, []string{api.HeaderServedBy}},
			resp{"409", "`conflict`: the worker was registered without lease_ttl_s.", api.Error{}, []string{api.HeaderServedBy}})},
	{method: "GET", path: api.PathWorker, id: "getWorker", access: api.AccessSelection, where: api.RunsOnLeaderIfLinearizable, tag: "catalog", summary: "One worker",
		params: []param{pathWorkerID, qConsistency, hIndex},
		resps: with(catalogReadErrors, resp{"200", "The worker.", api.Worker{}, readHeaders},
			resp{"404", "No such worker.", api.Error{}, nil})},
	{method: "PATCH", path: api.PathWorker, id: "patchWorker", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "catalog", summary: "Change some fields of a worker",
		desc:   "Only the fields given change; for the optional ones an empty string or 0 clears them.",
		params: []param{pathWorkerID, qRedirect}, body: api.WorkerFields{},
		resps: with(catalogErrors, resp{"200", "The record after the patch.", api.WorkerWritten{}, writeHeaders},
			resp{"404", "No such worker.", api.Error{}, []string{api.HeaderServedBy}})},
	{method: "DELETE", path: api.PathWorker, id: "deleteWorker", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "catalog", summary: "Remove a worker",
		desc:   "Every node drops the worker's listeners, blocks and active load.",
		params: []param{pathWorkerID, qRedirect},
		resps: with(catalogErrors, resp{"200", "The removed record.", api.WorkerWritten{}, writeHeaders},
			resp{"404", "No such worker.", api.Error{}, []string{api.HeaderServedBy}})},

	{method: "POST", path: api.PathSelect, id: "select", access: api.AccessSelection, where: api.RunsOnAny, tag: "selection", summary: "Choose a worker and rank for a prompt",
		desc:   "Books nothing. With selection_id the node remembers the choice for 60 s, so that POST /reservations can book exactly it. Give the prompt as token_ids, or as block_hashes with sequence_hashes (same length) and isl_tokens.",
		params: []param{hIndex}, body: api.SelectRequest{},
		resps: []resp{{"200", "The choice.", api.Selection{}, []string{api.HeaderCatalogBehind}}, promptErrors[0],
			{"503", "`not_ready`, `unknown_partition` (the catalog never held a worker for this model_name and tenant_id: most likely a typo, which no retry mends; the message lists the partitions it holds; no Retry-After), `catalog_behind`, or every schedulable worker busy (load shedding, the Busy body).", selectError{}, []string{"Retry-After"}}}},
	{method: "POST", path: api.PathSelectAndReserve, id: "selectAndReserve", access: api.AccessSelection, where: api.RunsOnAny, tag: "selection", summary: "Choose and book atomically on this node",
		desc:   "reservation_id is optional (a UUID is generated). An id already booked on this node → 409, except that a repeat of the same id with the same prompt while the booking lives (a retry after a lost answer) gets the booking's answer again, with X-Kvselect-Replayed: true, and books nothing.",
		params: []param{hIndex}, body: api.SelectRequest{},
		resps: []resp{{"200", "The choice, booked (or, replayed, the earlier booking of this id and prompt).", api.Selection{}, []string{api.HeaderCatalogBehind, api.HeaderReplayed}}, promptErrors[0],
			{"409", "The reservation id is already booked, with another prompt.", api.Error{}, nil},
			{"429", "`capacity`: the booking would pass the node's bounds (--max-reservations, --max-reserved-blocks); nothing was booked.", api.Error{}, []string{"Retry-After"}},
			{"503", "`not_ready`, `unknown_partition` (the catalog never held a worker for this model_name and tenant_id: most likely a typo, which no retry mends; the message lists the partitions it holds; no Retry-After), `catalog_behind`, or every schedulable worker busy (load shedding, the Busy body).", selectError{}, []string{"Retry-After"}}}},
	{method: "POST", path: api.PathReservations, id: "reserve", access: api.AccessSelection, where: api.RunsOnAny, tag: "reservations", summary: "Book a request on a worker rank",
		desc:   "Either selection_id alone (books the choice a /select with that id remembered; single use) or the worker, rank and prompt. effective_prefill_tokens, when given, is booked as it is (at most isl_tokens); otherwise the node computes it from its index.",
		params: []param{hIndex}, body: api.ReserveRequest{}, required: []string{"reservation_id"},
		resps: with(promptErrors, resp{"201", "Booked.", api.Reservation{}, []string{api.HeaderCatalogBehind}},
			resp{"404", "The worker or rank is not schedulable, or no pending selection has that id.", api.Error{}, nil},
			resp{"409", "The reservation id is already booked.", api.Error{}, nil},
			resp{"429", "`capacity`: the booking would pass the node's bounds (--max-reservations, --max-reserved-blocks); nothing was booked.", api.Error{}, []string{"Retry-After"}})},
	{method: "GET", path: api.PathReservations, id: "listReservations", access: api.AccessSelection, where: api.RunsOnAny, tag: "reservations", summary: "List bookings",
		desc:   "This node's bookings (local and mirrored), sorted by id, one page at a time.",
		params: []param{qModel, qTenant, qGroup, qWorker, qLimit, qCursor},
		resps:  []resp{{"200", "A page.", api.ReservationPage{}, nil}, promptErrors[0]}},
	{method: "GET", path: api.PathReservation, id: "getReservation", access: api.AccessSelection, where: api.RunsOnAny, tag: "reservations", summary: "One booking",
		params: []param{pathReservationID},
		resps: []resp{{"200", "The booking.", api.ReservationInfo{}, nil}, promptErrors[0],
			{"404", "No such reservation on this node.", api.Error{}, nil}}},
	{method: "DELETE", path: api.PathReservation, id: "free", access: api.AccessSelection, where: api.RunsOnAny, tag: "reservations", summary: "Free a booking (the request finished)",
		params: []param{pathReservationID},
		resps: []resp{{"200", "Freed.", api.ReservationAck{}, nil}, promptErrors[0],
			{"404", "No such reservation on this node.", api.Error{}, nil}}},
	{method: "POST", path: api.PathPrefillComplete, id: "prefillComplete", access: api.AccessSelection, where: api.RunsOnAny, tag: "reservations", summary: "The request's prefill finished",
		desc:   "Its prefill tokens stop counting. A repeat is a no-op.",
		params: []param{pathReservationID},
		resps: []resp{{"200", "Done.", api.ReservationAck{}, nil}, promptErrors[0],
			{"404", "No such reservation on this node.", api.Error{}, nil}}},
	{method: "POST", path: api.PathOutputBlock, id: "outputBlock", access: api.AccessSelection, where: api.RunsOnAny, tag: "reservations", summary: "The request produced one output block",
		desc:   "Adds one block to the request's decode load on this node only.",
		params: []param{pathReservationID}, body: api.OutputBlockRequest{}, optionalBody: true,
		resps: []resp{{"200", "Counted.", api.ReservationAck{}, nil}, promptErrors[0],
			{"404", "No such reservation on this node.", api.Error{}, nil}}},

	{method: "GET", path: api.PathLoads, id: "loads", access: api.AccessSelection, where: api.RunsOnAny, tag: "inspection", summary: "Active load per worker rank",
		params: []param{qModel, qTenant, qGroup},
		resps:  []resp{{"200", "Per partition, sorted.", arrayOf{api.PartitionLoads{}}, nil}}},
	{method: "POST", path: api.PathPotentialLoads, id: "potentialLoads", access: api.AccessSelection, where: api.RunsOnAny, tag: "inspection", summary: "Every schedulable rank's load if the prompt were booked on it",
		params: []param{hIndex}, body: api.Prompt{},
		resps: with(promptErrors, resp{"200", "One row per schedulable rank, sorted.", arrayOf{api.PotentialLoad{}}, []string{api.HeaderCatalogBehind}})},
	{method: "POST", path: api.PathOverlapScores, id: "overlapScores", access: api.AccessSelection, where: api.RunsOnAny, tag: "inspection", summary: "Every schedulable rank's cached prefix of the prompt, by tier",
		desc:   "As in Dynamo, host_pinned_blocks and disk_blocks are cumulative (device ≤ host_pinned ≤ disk); the *_extension_blocks fields give the further blocks alone.",
		params: []param{hIndex}, body: api.Prompt{},
		resps: with(promptErrors, resp{"200", "One row per schedulable rank, sorted.", api.OverlapScores{}, []string{api.HeaderCatalogBehind}})},
	{method: "GET", path: api.PathDump, id: "dump", access: api.AccessAdmin, where: api.RunsOnAny, tag: "inspection", summary: "The KV index snapshot",
		desc: "The Dynamo standalone indexer's recovery format, per partition, with per-rank sequence watermarks. Streamed one partition at a time, each an atomic snapshot; gzip-compressed when the request's Accept-Encoding allows it. Each entry names its model_name and tenant_id, which loaders trust over the key (keys that names with ':' make collide get \"#2\", \"#3\", ... appended).",
		resps: []resp{{"200", "The snapshot; X-Kvselect-Index is the catalog index when it began.", api.Dump{}, []string{api.HeaderIndex, api.HeaderContentEncoding}},
			{"401", "The route needs the bearer token (--auth-token-file).", api.Error{}, []string{"WWW-Authenticate"}},
			{"503", "`not_ready`: this node is still recovering its own index from a peer (recovering in /ready); ask another node.", api.Error{}, []string{"Retry-After"}}}},

	{method: "GET", path: api.PathBusyThreshold, id: "listBusyThresholds", access: api.AccessSelection, where: api.RunsOnLeaderIfLinearizable, tag: "load-shedding", summary: "Every model's busy thresholds",
		desc:   "Models with at least one threshold set, sorted, in the shape of Dynamo's load-shedding API. A worker is busy when all its ranks are over a threshold of its model; when every schedulable worker of a partition is busy, /select and /select_and_reserve answer 503 with the Busy body.",
		params: []param{qConsistency, hIndex},
		resps:  with(catalogReadErrors, resp{"200", "The thresholds.", api.BusyThresholds{}, readHeaders})},
	{method: "POST", path: api.PathBusyThreshold, id: "setBusyThreshold", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "load-shedding", summary: "Set a model's busy thresholds",
		desc:   "Through the Raft log, like worker writes. A threshold given is set, one left out keeps its value; with neither, the model's thresholds are only read (as in Dynamo). active_decode_blocks_threshold is a fraction in [0, 1] of a rank's total_kv_blocks (not checked for a worker without it); active_prefill_tokens_threshold a token count.",
		params: []param{qRedirect}, body: api.BusyThresholdRequest{}, required: []string{"model"},
		resps: with(catalogErrors, resp{"200", "The model's thresholds after the write.", api.BusyThreshold{}, writeHeaders})},
	{method: "DELETE", path: api.PathBusyThreshold, id: "clearBusyThreshold", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "load-shedding", summary: "Clear a model's busy thresholds",
		desc:   "Its workers are never shed. The initial thresholds of the command line are not applied to the model again.",
		params: []param{qThresholdModel, qRedirect},
		resps:  with(catalogErrors, resp{"200", "The model's thresholds, now null.", api.BusyThreshold{}, writeHeaders})},

	{method: "GET", path: api.PathPolicies, id: "listPolicies", access: api.AccessSelection, where: api.RunsOnLeaderIfLinearizable, tag: "policies", summary: "Every partition's selection policy, and the cluster default",
		desc:   "The catalog's policy entries, sorted by (model_name, tenant_id); model_name \"*\" (tenant_id empty) is the cluster default. A partition runs its own entry, else the cluster default, else the answering node's node_default (its --policy); a request's router_config_override.policy picks another for that request only.",
		params: []param{qConsistency, hIndex},
		resps:  with(catalogReadErrors, resp{"200", "The entries and this node's default.", api.Policies{}, readHeaders})},
	{method: "PUT", path: api.PathPolicies, id: "setPolicy", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "policies", summary: "Set a partition's selection policy, or the cluster default",
		desc: "Through the Raft log, like worker writes, so every node ranks alike; replaces the partition's entry. model_name is required: \"*\" sets the cluster default (tenant_id must then be left out); for a model, tenant_id (or routing_group) defaults to \"default\". " +
			fmt.Sprintf("parameters are the policy's (GET /openapi.json cannot list them; an unknown one is refused, naming those the policy takes), each a JSON number or, for a boolean parameter, true or false. At most %d entries (a new one past that is 409 conflict) and %d parameters per entry.", api.MaxPolicies, api.MaxPolicyParameters),
		params: []param{qRedirect}, body: api.PolicyRequest{}, required: []string{"model_name", "policy"},
		resps: with(catalogErrors, resp{"200", "The stored entry.", api.PolicyWritten{}, writeHeaders},
			resp{"409", fmt.Sprintf("`conflict`: the catalog holds %d entries already; delete one first.", api.MaxPolicies), api.Error{}, []string{api.HeaderServedBy}})},
	{method: "DELETE", path: api.PathPolicies, id: "deletePolicy", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "policies", summary: "Remove a partition's selection policy, or the cluster default",
		desc:   "The partition falls back to the cluster default, the cluster default to each node's --policy. The partition is named by query parameters, never by path segments: model names contain '/'.",
		params: []param{qPolicyModel, qPolicyTenant, qGroup, qRedirect},
		resps: with(catalogErrors, resp{"200", "The removed entry.", api.PolicyWritten{}, writeHeaders},
			resp{"404", "No such entry.", api.Error{}, []string{api.HeaderServedBy}})},

	{method: "GET", path: api.PathClusterStatus, id: "clusterStatus", access: api.AccessSelection, where: api.RunsOnAny, tag: "cluster", summary: "This node's view of the cluster",
		resps: []resp{{"200", "The status.", api.ClusterStatus{}, nil}}},
	{method: "POST", path: api.PathClusterJoin, id: "clusterJoin", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "cluster", summary: "Add a node",
		desc:   "The node enters as a non-voter and becomes a voter once it holds the configuration that lists it (it says so with caught_up).",
		params: []param{qRedirect}, body: api.JoinRequest{}, required: []string{"id", "raft_addr"},
		resps: with(catalogErrors, resp{"200", "The cluster after the change.", api.ClusterStatus{}, writeHeaders},
			resp{"409", "The change is not possible.", api.Error{}, []string{api.HeaderServedBy}})},
	{method: "POST", path: api.PathClusterRemove, id: "clusterRemove", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "cluster", summary: "Remove a node",
		desc:   "Idempotent: removing a node that is not a member changes nothing and answers 200.",
		params: []param{qRedirect}, body: api.RemoveRequest{}, required: []string{"id"},
		resps: with(catalogErrors, resp{"200", "The cluster after the change.", api.ClusterStatus{}, writeHeaders},
			resp{"409", "The change is not possible.", api.Error{}, []string{api.HeaderServedBy}})},
	{method: "POST", path: api.PathClusterStepDown, id: "clusterStepDown", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "cluster", summary: "Hand the leadership to another voter",
		params: []param{qRedirect}, body: anyObject{}, optionalBody: true,
		resps: with(catalogErrors, resp{"200", "The cluster after the change (node_id is the former leader).", api.ClusterStatus{}, writeHeaders},
			resp{"409", "No other voter can take over.", api.Error{}, []string{api.HeaderServedBy}})},
	{method: "POST", path: api.PathClusterMetadata, id: "clusterMetadata", access: api.AccessAdmin, where: api.RunsOnLeader, tag: "cluster", summary: "Publish a member's addresses",
		desc:   "Members send their own HTTP and replica-sync addresses; they are node metadata in the catalog.",
		params: []param{qRedirect}, body: api.NodeMeta{}, required: []string{"id", "http_addr"},
		resps: with(catalogErrors, resp{"200", "The stored metadata.", api.NodeMeta{}, writeHeaders})},

	{method: "POST", path: api.PathReplicaSyncRegister, id: "registerReplicaSyncPeer", access: api.AccessAdmin, where: api.RunsOnAny, tag: "replica-sync", summary: "Subscribe to another node's replica sync",
		desc: "This node only, in memory (after a restart only --replica-sync-peers and the cluster members are followed). Cluster members are followed without it.",
		body: api.ReplicaSyncPeerRequest{}, required: []string{"endpoint"},
		resps: replicaSyncResps(resp{"201", "Subscribed.", api.ReplicaSyncPeerAck{}, nil}, resp{"200", "Already subscribed.", api.ReplicaSyncPeerAck{}, nil})},
	{method: "POST", path: api.PathReplicaSyncDeregister, id: "deregisterReplicaSyncPeer", access: api.AccessAdmin, where: api.RunsOnAny, tag: "replica-sync", summary: "Stop following a registered peer",
		body: api.ReplicaSyncPeerRequest{}, required: []string{"endpoint"},
		resps: replicaSyncResps(resp{"200", "Unsubscribed.", api.ReplicaSyncPeerAck{}, nil}, resp{"404", "Not a registered peer.", api.Error{}, nil})},
	{method: "GET", path: api.PathReplicaSyncPeers, id: "replicaSyncPeers", access: api.AccessInspect, where: api.RunsOnAny, tag: "replica-sync", summary: "The endpoints this node follows",
		desc:  "A bare sorted array of endpoints, as Dynamo answers it; [] when replica sync is off. GET /replica_sync/status has each peer's details.",
		resps: []resp{{"200", "Sorted.", arrayOf{""}, nil}}},
	{method: "GET", path: api.PathReplicaSyncStatus, id: "replicaSyncStatus", access: api.AccessInspect, where: api.RunsOnAny, tag: "replica-sync", summary: "This node's replica sync and each peer's state",
		resps: []resp{{"200", "enabled false, and no peers, when replica sync is off.", api.ReplicaSyncStatus{}, nil}}},
}

// Answers every operation a token guards may give, by access class.
var (
	respUnauthorized = resp{"401", "`unauthorized`: the route needs a bearer token the node holds (x-kvselect-access; --auth-token-file).", api.Error{}, []string{"WWW-Authenticate"}}
	respForbidden    = resp{"403", "`forbidden`: the selection token does not open this route; it needs the admin token.", api.Error{}, []string{"WWW-Authenticate"}}
)

// accessResps are o's answers, with 401 for every class but open, and 403
// for the classes the selection token does not open, unless listed.
func accessResps(o op) []resp {
	out := o.resps
	listed := map[string]bool{}
	for _, r := range out {
		listed[r.status] = true
	}
	if o.access != api.AccessOpen && !listed["401"] {
		out = append(out, respUnauthorized)
	}
	if (o.access == api.AccessAdmin || o.access == api.AccessInspect) && !listed["403"] {
		out = append(out, respForbidden)
	}
	return out
}

// replicaSyncResps are the answers of a replica-sync peer write.
func replicaSyncResps(ok ...resp) []resp {
	return append(ok,
		resp{"400", "The body or the endpoint (tcp://host:port) is malformed.", api.Error{}, nil},
		resp{"401", "The route needs the bearer token (--auth-token-file).", api.Error{}, []string{"WWW-Authenticate"}},
		resp{"409", "Replica sync is off (the node is alone in its cluster and has no --replica-sync-port, or runs with --replica-sync=false), the endpoint is a cluster member's (it goes with the member), or 64 endpoints are registered already.", api.Error{}, nil})
}

// requestTypes refuse unknown fields.
var requestTypes = map[reflect.Type]bool{
	reflect.TypeFor[api.WorkerFields](): true, reflect.TypeFor[api.SelectRequest](): true,
	reflect.TypeFor[api.ReserveRequest](): true, reflect.TypeFor[api.Prompt](): true,
	reflect.TypeFor[api.RouterConfigOverride](): true, reflect.TypeFor[api.OutputBlockRequest](): true,
	reflect.TypeFor[api.JoinRequest](): true, reflect.TypeFor[api.RemoveRequest](): true,
	reflect.TypeFor[api.ReplicaSyncPeerRequest](): true, reflect.TypeFor[api.PolicyRequest](): true,
}

// typeDocs describe the schemas.
var typeDocs = map[string]string{
	"Error":                  "Every error answer but load shedding's: a message that starts with the field at fault, and a stable machine-readable code.",
	"Busy":                   "Load shedding's 503 (Dynamo's shape), with Retry-After.",
	"WorkerFields":           "A worker registration (POST: worker_id required, the rest defaults) or patch (PATCH: only the fields given change).",
	"Worker":                 "A catalog record, with this node's listener per rank.",
	"WorkerWritten":          "A catalog record after a write, with the index the write was applied at.",
	"ListenerStatus":         "This node's KV event listener of one rank.",
	"Prompt":                 "A prompt: token_ids, or block_hashes with sequence_hashes (same length) and isl_tokens; and its partition.",
	"SelectRequest":          "A prompt to select for, and the selection's options.",
	"Selection":              "The chosen worker rank, in the shape of Dynamo's selection service. cached_tokens and effective_overlap_blocks never appear.",
	"Overlap":                "The chosen worker's match in tokens: gpu the best device prefix over its ranks, cpu and disk cumulative (gpu ≤ cpu ≤ disk), dp every rank's device prefix, longest_matched = disk.",
	"ReserveRequest":         "A booking: a reservation id and either a selection_id, or the worker rank and the prompt.",
	"Reservation":            "A booking made.",
	"ReservationInfo":        "A booking as this node holds it.",
	"ReservationAck":         "A lifecycle step done.",
	"Hashes":                 fmt.Sprintf("64-bit hashes, unsigned or signed (reinterpreted bit for bit); at most %d.", api.MaxHashes),
	"TokenIDs":               fmt.Sprintf("Token ids (unsigned 32-bit); at most %d.", api.MaxHashes),
	"ReservationID":          "A reservation or selection id: 1 to 256 bytes of printable ASCII without '/', '?', '#', '%' or space, and not \".\" or \"..\".",
	"Dump":                   "The index snapshot, per partition \"<model>:<tenant>\" (made unique with \"#2\", \"#3\", ... when names with ':' collide).",
	"ClusterStatus":          "A node's view of the Raft cluster.",
	"Readyz":                 "Whether this node is ready (a caught-up member of the Raft cluster; with for=selection, able to select), with the status it was judged on; on a 503 also error, code (not_ready) and reason.",
	"NodeMeta":               "A member's published addresses.",
	"ReplicaSyncPeerRequest": "A replica-sync peer's endpoint.",
	"ReplicaSyncPeerAck":     "A replica-sync peer change, done.",
	"ReplicaSyncStatus":      "A node's replica sync: its endpoint and the peers it follows, sorted by endpoint.",
	"ReplicaSyncPeer":        "One replica-sync subscription.",
	"PolicyRequest":          "A partition's selection policy, or with model_name \"*\" the cluster default.",
	"Policy":                 "One policy entry of the catalog; tenant_id is empty for the cluster default.",
	"PolicyWritten":          "A policy entry after a write (the removed one for DELETE), with the index the write was applied at.",
	"PolicySpec":             "A policy and its parameters.",
	"Policies":               "The catalog's policy entries, sorted, and the answering node's default.",
	"PolicyParameters":       fmt.Sprintf("A policy's parameters by name: a number, or true or false for a boolean parameter; at most %d.", api.MaxPolicyParameters),
}

// fieldDocs add descriptions and bounds to properties, by "Type.json_name".
var fieldDocs = map[string]schema{
	"Error.code":                                {"description": "Stable: clients decide from it whether to retry."},
	"Busy.message":                              {"const": api.BusyMessage},
	"Busy.type":                                 {"const": api.BusyType},
	"Busy.code":                                 {"const": 503},
	"Health.status":                             {"const": api.StatusOK},
	"ReservationAck.status":                     {"const": api.StatusOK},
	"WorkerFields.worker_id":                    {"description": "Required by POST; a PATCH may give only the path's id."},
	"WorkerFields.model_name":                   {"maxLength": api.MaxNameLen, "description": "Default \"default\"."},
	"WorkerFields.tenant_id":                    {"maxLength": api.MaxNameLen, "description": "Default \"default\"."},
	"WorkerFields.routing_group":                {"maxLength": api.MaxNameLen, "description": "Dynamo's newer name for tenant_id; give one or the other (or both, equal)."},
	"WorkerFields.block_size":                   {"description": "Tokens per KV block. The partition keeps its block size while any of its workers has it (a worker with another size is stored incomplete, however long it outlives the others); only when none is left does the longest-registered worker set it."},
	"WorkerFields.endpoint":                     {"description": "Where the worker serves requests, handed to the caller of /select: an absolute URL with a host, scheme://host[:port][/path] (e.g. http://worker:8000); the host a DNS name or an IP literal ([...] for IPv6), the port 1-65535, no spaces or control characters (else 400). Empty: stored incomplete."},
	"WorkerFields.data_parallel_size":           {"description": "Default 1."},
	"WorkerFields.kv_events_endpoints":          {"description": "The ZMQ endpoint of each global dp rank: tcp://host:port, ipc://path or inproc://name, without spaces or control characters (else 400)."},
	"WorkerFields.kv_events_endpoint":           {"description": "The one-rank form of kv_events_endpoints (not both)."},
	"WorkerFields.replay_endpoint":              {"description": "vLLM's replay endpoint of the first rank; rank r replays at its port + r. A ZMQ endpoint as in kv_events_endpoints; empty clears it."},
	"WorkerFields.lease_ttl_s":                  {"maximum": api.MaxLeaseTTLSeconds, "description": "Seconds (1-3600) within which the worker must renew its lease, or the leader removes it; 0 or absent: no lease (a PATCH with 0 removes it). A registration, or a PATCH that sets it, renews the lease; a PATCH of anything else leaves the deadline alone."},
	"KeepAliveRequest.worker_ids":               {"maxItems": api.MaxKeepAliveBatch},
	"WorkerFields.total_kv_blocks":              {"description": "The KV cache size in blocks (load shedding)."},
	"Worker.lifecycle":                          {"enum": []string{api.LifecycleSchedulable, api.LifecycleIncomplete}},
	"Worker.not_schedulable_reasons":            {"description": "Why an incomplete worker is not selected."},
	"Worker.listeners":                          {"description": "This node's listener per dp rank (local state)."},
	"Worker.schedulable_here":                   {"description": "Whether the node that answers would select the worker: schedulable, and not every rank's KV event listener stale there (down longer than --stale-listener-after). Local state like listeners: reads carry it, write answers do not."},
	"Worker.create_index":                       {"description": "The Raft index that first inserted this worker id."},
	"Worker.modify_index":                       {"description": "The Raft index that last changed it."},
	"Worker.block_size_index":                   {"description": "The Raft index at which its current block size was set."},
	"ListenerStatus.state":                      {"enum": []string{api.ListenerConnecting, api.ListenerActive, api.ListenerFailed, api.ListenerStale}, "description": "stale: down (failed or retrying) longer than --stale-listener-after; this node does not select the rank until the listener is back."},
	"Prompt.routing_group":                      {"maxLength": api.MaxNameLen, "description": "Dynamo's newer name for tenant_id; give one or the other (or both, equal)."},
	"Prompt.model_name":                         {"maxLength": api.MaxNameLen, "description": "Default \"default\"."},
	"Prompt.tenant_id":                          {"maxLength": api.MaxNameLen, "description": "Default \"default\"."},
	"Prompt.block_hashes":                       {"description": "Local block hashes (XXH3-64, seed 1337): drive the index lookup."},
	"Prompt.sequence_hashes":                    {"description": "Sequence hashes: drive active-load accounting."},
	"Prompt.isl_tokens":                         {"minimum": 1, "maximum": api.MaxISLTokens, "description": "Input length in tokens (hash form)."},
	"Prompt.lora_name":                          {"description": "With token_ids: the LoRA adapter, which changes the block hashes."},
	"Prompt.min_catalog_index":                  {"description": "Wait (up to 2 s) until the node has applied this catalog index, else 503 catalog_behind."},
	"SelectRequest.selection_id":                {"description": "Echoed; on /select the node also remembers the choice for 60 s."},
	"SelectRequest.reservation_id":              {"description": "/select_and_reserve only: the booking's id (a UUID when absent)."},
	"RouterConfigOverride.overlap_score_weight": {"minimum": 0},
	"RouterConfigOverride.router_temperature":   {"minimum": 0},
	"ReserveRequest.selection_id":               {"description": "Book the choice a /select with this id made on this node; give nothing else with it."},
	"ReserveRequest.effective_prefill_tokens":   {"minimum": 0, "description": "Prefill load to book (at most isl_tokens); computed from the index when absent."},
	"OutputBlockRequest.decay_fraction": {"minimum": 0, "maximum": 1,
		"description": "From now on the request's unshared blocks and all its output blocks weigh this fraction."},
	"ReservationInfo.blocks":        {"description": "Distinct prompt blocks the booking holds."},
	"ReservationInfo.origin":        {"enum": []string{api.OriginLocal, api.OriginPeer}, "description": "local: booked here; peer: mirrored by replica sync from origin_node."},
	"ReservationPage.next_cursor":   {"description": "Fetches the next page; absent on the last."},
	"OverlapRow.host_pinned_blocks": {"description": "Cumulative: device blocks plus the further blocks on host."},
	"OverlapRow.disk_blocks":        {"description": "Cumulative: host_pinned_blocks plus the further blocks on disk."},
	"OverlapRow.credit_blocks":      {"description": "device + 0.75·host extension + 0.25·disk extension (the weights are configurable)."},
	"RouterEvent.storage_tier":      {"enum": []string{api.TierDevice, api.TierHostPinned, api.TierDisk}},
	"ClusterStatus.state":           {"enum": []string{api.StateLeader, api.StateFollower, api.StateCandidate, api.StateShutdown}},
	"ClusterStatus.catalog_index":   {"description": "The last catalog write this node has applied, side effects included: what min_catalog_index compares against."},
	"ClusterStatus.last_contact_ms": {"description": "A follower's time since it last heard from the leader (-1: never; 0 on the leader)."},
	"ClusterStatus.cluster_id":      {"description": "The cluster's random 128-bit identity (32 hex digits), written by the first leader and kept in the catalog; replica sync binds its messages to it. Empty until written."},
	"Member.epoch":                  {"description": "The member's epoch: the Raft index at which its current process recorded itself; it grows at every start of the node (0 until a node of this release published one). Replica sync accepts a node's messages only from its current epoch."},
	"NodeMeta.incarnation":          {"description": "The random number the member's process drew at start; a new one gives the member a new epoch. Omitted: the record's stays."},
	"ReadyCluster.state":            {"enum": []string{api.StateLeader, api.StateFollower, api.StateCandidate, api.StateShutdown}},
	"Readyz.state":                  {"enum": []string{api.StateLeader, api.StateFollower, api.StateCandidate, api.StateShutdown}},
	"Readyz.code":                   {"enum": []string{string(api.CodeNotReady)}},
	"Readyz.reason":                 {"enum": []string{api.ReadyzShutDown, api.ReadyzNotMember, api.ReadyzNotVoter, api.ReadyzNoLeader, api.ReadyzNoCommitIndex, api.ReadyzApplying, api.ReadyzRecovering}, "description": "Why the node is not ready (the first that holds, in this order): shut_down, not_member (not in the Raft configuration, or removed), not_voter (a non-voter still being caught up; not for=selection), no_leader, no_commit_index (no commit index learned from the leader since it started), applying (still behind the commit index of the request's arrival after 0.5 s); with for=selection the last three only until the node has caught up once, then recovering (its KV index is still being recovered from a peer)."},
	"Readyz.caught_up":              {"description": "Since it started, this node has once applied every entry up to a commit index learned from a leader; it stays true."},
	"Readyz.recovering":             {"description": "The node is still recovering its KV index from a peer's dump (as /ready says)."},
	"Readyz.suffrage":               {"enum": []string{api.SuffrageVoter, api.SuffrageNonvoter, api.SuffrageStaging}},
	"Readyz.commit_index":           {"description": "The commit index this node has learned from the leader (the leader's own on the leader)."},
	"Readyz.applied_index":          {"description": "The last Raft index this node has applied."},
	"Ready.recovering":              {"description": "True while the node loads its KV index from a peer's dump at startup; its KV event listeners start once it is false."},
	"PartitionDump.model_name":      {"description": "The partition's model; loaders trust it over the key (absent in Dynamo's dumps)."},
	"PartitionDump.tenant_id":       {"description": "The partition's tenant; loaders trust it over the key (absent in Dynamo's dumps)."},
	"Member.suffrage":               {"enum": []string{"Voter", "Nonvoter", "Staging"}},
	"JoinRequest.caught_up":         {"description": "Sent by the joining node once it holds the configuration that lists it; only then is it made a voter."},
	"PolicyRequest.model_name":      {"minLength": 1, "maxLength": api.MaxNameLen, "description": "Required: a model, or \"*\" for the cluster default."},
	"PolicyRequest.tenant_id":       {"maxLength": api.MaxNameLen, "description": "Default \"default\"; left out for the cluster default."},
	"PolicyRequest.routing_group":   {"maxLength": api.MaxNameLen, "description": "Dynamo's newer name for tenant_id; give one or the other (or both, equal)."},
	"PolicyRequest.policy":          {"description": "A policy by name: " + strings.Join(scheduler.PolicyNames(), ", ") + "."},
	"Policy.modify_index":           {"description": "The Raft index that last wrote the entry."},
	"Policies.node_default":         {"description": "The answering node's --policy: what a partition runs on it when neither the partition nor the cluster has an entry."},
}

// builder turns Go wire types into schemas under components/schemas.
type builder struct {
	schemas map[string]schema
}

var (
	hashesType = reflect.TypeFor[api.Hashes]()
	tokensType = reflect.TypeFor[api.TokenIDs]()
	idType     = reflect.TypeFor[api.ID]()
	codeType   = reflect.TypeFor[api.Code]()
	timeType   = reflect.TypeFor[time.Time]()
	// policyParamsType's values are numbers or booleans (any in Go).
	policyParamsType = reflect.TypeFor[api.PolicyParameters]()
)

func ref(name string) schema { return schema{"$ref": "#/components/schemas/" + name} }

// of returns the schema of a Go type, registering named types.
func (b *builder) of(t reflect.Type) schema {
	switch t {
	case hashesType:
		return b.named("Hashes", func() schema {
			return schema{"type": "array", "maxItems": api.MaxHashes,
				"items": schema{"type": "integer", "minimum": json.Number(i64Min), "maximum": json.Number(u64Max)}}
		})
	case tokensType:
		return b.named("TokenIDs", func() schema {
			return schema{"type": "array", "maxItems": api.MaxHashes,
				"items": schema{"type": "integer", "minimum": 0, "maximum": uint64(math.MaxUint32)}}
		})
	case idType:
		return b.named("ReservationID", func() schema {
			// Printable ASCII but space, '#', '%', '/' and '?'.
			return schema{"type": "string", "minLength": 1, "maxLength": api.MaxIDLen, "pattern": `^[!-"$&-.0->@-~]+$`}
		})
	case codeType:
		codes := api.Codes()
		names := make([]string, len(codes))
		for i, c := range codes {
			names[i] = string(c)
		}
		sort.Strings(names)
		return schema{"type": "string", "enum": names}
	case timeType:
		return schema{"type": "string", "format": "date-time"}
	case policyParamsType:
		return b.named("PolicyParameters", func() schema {
			return schema{"type": "object",
				"additionalProperties": schema{"anyOf": []any{schema{"type": "number"}, schema{"type": "boolean"}}}}
		})
	}
	switch t.Kind() {
	case reflect.Pointer:
		return b.of(t.Elem())
	case reflect.Struct:
		return b.named(t.Name(), func() schema { return b.object(t) })
	case reflect.Map:
		s := schema{"type": "object", "additionalProperties": b.of(t.Elem())}
		if t.Key().Kind() != reflect.String {
			s["propertyNames"] = schema{"pattern": "^[0-9]+$"}
		}
		if t.Name() != "" {
			return b.named(t.Name(), func() schema { return s })
		}
		return s
	case reflect.Slice:
		return schema{"type": "array", "items": b.of(t.Elem())}
	case reflect.String:
		return schema{"type": "string"}
	case reflect.Bool:
		return schema{"type": "boolean"}
	case reflect.Float32, reflect.Float64:
		return schema{"type": "number"}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return schema{"type": "integer", "minimum": 0, "maximum": uint64(1)<<(8*t.Size()) - 1}
	case reflect.Uint64, reflect.Uint:
		return schema{"type": "integer", "minimum": 0, "maximum": json.Number(u64Max)}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return schema{"type": "integer"}
	}
	panic(fmt.Sprintf("no schema for %v", t))
}

// named registers a component schema once and returns its reference.
func (b *builder) named(name string, build func() schema) schema {
	if _, ok := b.schemas[name]; !ok {
		b.schemas[name] = nil // a recursive type refers to itself
		s := build()
		if d, ok := typeDocs[name]; ok {
			s["description"] = d
		}
		b.schemas[name] = s
	}
	return ref(name)
}

// object is a struct's schema: its JSON fields (embedded structs
// flattened), required when they are never omitted (answers) or as the
// request type says.
func (b *builder) object(t reflect.Type) schema {
	props := schema{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			if f.Anonymous && tag == "" {
				walk(f.Type)
				continue
			}
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			omit := strings.Contains(opts, "omitempty")
			p := b.of(f.Type)
			if f.Type.Kind() == reflect.Pointer && !omit {
				p = schema{"anyOf": []any{p, schema{"type": "null"}}}
			}
			if extra, ok := fieldDocs[t.Name()+"."+name]; ok {
				p = merge(p, extra)
			}
			props[name] = p
			if !omit && !requestTypes[t] {
				required = append(required, name)
			}
		}
	}
	walk(t)
	s := schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	if requestTypes[t] {
		s["additionalProperties"] = false
	}
	return s
}

// merge adds extra keywords to a property schema (a copy).
func merge(p, extra schema) schema {
	out := schema{}
	for k, v := range p {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// bodySchema is the schema of a request or answer body.
func (b *builder) bodySchema(body any) (mediaType string, s schema) {
	switch v := body.(type) {
	case textBody:
		return "text/plain", schema{"type": "string"}
	case anyObject:
		return "application/json", schema{"type": "object", "additionalProperties": true}
	case selectError:
		return "application/json", schema{"oneOf": []any{b.of(reflect.TypeFor[api.Error]()), b.of(reflect.TypeFor[api.Busy]())}}
	case arrayOf:
		return "application/json", schema{"type": "array", "items": b.of(reflect.TypeOf(v.of))}
	}
	return "application/json", b.of(reflect.TypeOf(body))
}

func (b *builder) param(p param) schema {
	return schema{"name": p.name, "in": p.in, "description": p.desc, "required": p.required, "schema": p.schema}
}

// buildOpenAPI is the whole document.
func buildOpenAPI() schema {
	b := &builder{schemas: map[string]schema{}}
	b.of(reflect.TypeFor[api.Error]())
	paths := schema{}
	for _, o := range operations {
		item, _ := paths[o.path].(schema)
		if item == nil {
			item = schema{}
			paths[o.path] = item
		}
		spec := schema{"operationId": o.id, "tags": []string{o.tag}, "summary": o.summary,
			"x-kvselect-access": o.access, "x-kvselect-runs-on": o.where}
		switch o.access {
		case api.AccessAdmin, api.AccessWorker:
			spec["security"] = []any{schema{"bearer": []string{}}}
		case api.AccessSelection, api.AccessInspect:
			spec["security"] = []any{schema{}, schema{"bearer": []string{}}} // --auth-scope admin leaves it open
		}
		if o.desc != "" {
			spec["description"] = o.desc
		}
		if len(o.params) > 0 {
			ps := make([]any, len(o.params))
			for i, p := range o.params {
				ps[i] = b.param(p)
			}
			spec["parameters"] = ps
		}
		if o.body != nil {
			mt, s := b.bodySchema(o.body)
			if len(o.required) > 0 {
				s = schema{"allOf": []any{s, schema{"required": o.required}}}
			}
			spec["requestBody"] = schema{"required": !o.optionalBody, "content": schema{mt: schema{"schema": s}}}
		}
		resps := schema{"default": schema{"$ref": "#/components/responses/Error"}}
		for _, r := range accessResps(o) {
			out := schema{"description": r.desc}
			if r.body != nil {
				mt, s := b.bodySchema(r.body)
				out["content"] = schema{mt: schema{"schema": s}}
			}
			if len(r.headers) > 0 {
				hs := schema{}
				for _, h := range r.headers {
					hs[h] = schema{"description": respHeaders[h], "schema": schema{"type": "string"}}
				}
				out["headers"] = hs
			}
			resps[r.status] = out
		}
		spec["responses"] = resps
		item[strings.ToLower(o.method)] = spec
	}
	return schema{
		"openapi": "3.1.0",
		"info": schema{"title": "kvselect", "version": "1",
			"description": "KV-cache-aware worker selection for LLM inference fleets. Every error is {\"error\", \"code\"}; bodies are at most " +
				strconv.Itoa(api.MaxBodyBytes) + " bytes; unknown fields are refused (400 naming the field); HEAD works wherever GET does; every 405 carries Allow. model_name and tenant_id default to \"default\" and scope selection, index and load (a partition)."},
		"paths": paths,
		"components": schema{
			"schemas": b.schemas,
			"responses": schema{"Error": schema{
				"description": "An error (400 bad_request, 401 unauthorized, 403 forbidden, 404 not_found, 405 method_not_allowed with Allow, 409 conflict, 413 payload_too_large, 429 capacity with Retry-After, 500 internal, 503 with Retry-After).",
				"headers": schema{
					api.HeaderServedBy: schema{"description": respHeaders[api.HeaderServedBy], "schema": schema{"type": "string"}},
					"Allow":            schema{"description": respHeaders["Allow"], "schema": schema{"type": "string"}},
					"Retry-After":      schema{"description": respHeaders["Retry-After"], "schema": schema{"type": "string"}},
				},
				"content": schema{"application/json": schema{"schema": ref("Error")}},
			}},
			"securitySchemes": schema{"bearer": schema{"type": "http", "scheme": "bearer",
				"description": "Without --auth-token-file every route is open. With it, each operation's x-kvselect-access class says whose token it takes: " +
					"open: none; selection: the selection or admin token with --auth-scope all (the default), none with --auth-scope admin; " +
					"worker: the selection or admin token in either scope; inspect: the admin token with --auth-scope all, none with --auth-scope admin; " +
					"admin: the admin token in either scope. The selection token (--selection-token-file) where only the admin token opens the route is 403 forbidden; " +
					"no token, or one the node does not hold, 401 unauthorized."}},
		},
	}
}
