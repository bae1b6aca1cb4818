"""kvselect's HTTP API as it appears on the wire: paths, headers, query
parameters, error codes and the id rule.

These mirror the Go package github.com/kvselect/kvselect/api. The tests
check them against the OpenAPI document a running node serves, so a rename
on either side fails the build.
"""

from __future__ import annotations

import re
from urllib.parse import quote

# Headers of leader routing and session consistency.
HEADER_INDEX = "X-Kvselect-Index"
HEADER_SERVED_BY = "X-Kvselect-Served-By"
HEADER_APPLIED = "X-Kvselect-Applied"
# A selection answered from a catalog behind min_catalog_index (the node
# was cut off from the leader); its value is the index the node had.
HEADER_CATALOG_BEHIND = "X-Kvselect-Catalog-Behind"
# "true" on a select_and_reserve that repeated an earlier booking of the
# same reservation_id and prompt: nothing new was booked.
HEADER_REPLAYED = "X-Kvselect-Replayed"

# Query parameters.
QUERY_CONSISTENCY = "consistency"
# "true" asks a follower to answer a leader-only request with 307 to the
# leader instead of forwarding it; the client never sets it (it follows
# the leader itself).
QUERY_REDIRECT = "redirect"
QUERY_MODEL_NAME = "model_name"
QUERY_TENANT_ID = "tenant_id"
# Dynamo's newer name for the tenant_id filter.
QUERY_ROUTING_GROUP = "routing_group"
QUERY_WORKER_ID = "worker_id"
QUERY_LIMIT = "limit"
QUERY_CURSOR = "cursor"
# The model of DELETE /busy_threshold.
QUERY_MODEL = "model"
# What GET /readyz judges readiness for: READYZ_FOR_SELECTION, or left out
# (leader-aware write readiness).
QUERY_FOR = "for"
READYZ_FOR_SELECTION = "selection"

# Consistency levels of catalog reads (QUERY_CONSISTENCY).
CONSISTENCY_LOCAL = "local"
CONSISTENCY_LINEARIZABLE = "linearizable"

# Paths of every route.
PATH_HEALTH = "/health"
PATH_READY = "/ready"
PATH_READYZ = "/readyz"
PATH_METRICS = "/metrics"
PATH_OPENAPI = "/openapi.json"
PATH_WORKERS = "/workers"
PATH_WORKER = "/workers/{id}"
PATH_WORKER_KEEPALIVE = "/workers/{id}/keepalive"
PATH_KEEPALIVE = "/workers/keepalive"
PATH_SELECT = "/select"
PATH_SELECT_AND_RESERVE = "/select_and_reserve"
PATH_RESERVATIONS = "/reservations"
PATH_RESERVATION = "/reservations/{id}"
PATH_PREFILL_COMPLETE = "/reservations/{id}/prefill_complete"
PATH_OUTPUT_BLOCK = "/reservations/{id}/output_block"
PATH_LOADS = "/loads"
PATH_POTENTIAL_LOADS = "/potential_loads"
PATH_OVERLAP_SCORES = "/overlap_scores"
PATH_DUMP = "/dump"
PATH_BUSY_THRESHOLD = "/busy_threshold"
PATH_POLICIES = "/policies"
PATH_CLUSTER_STATUS = "/cluster/status"
PATH_CLUSTER_JOIN = "/cluster/join"
PATH_CLUSTER_REMOVE = "/cluster/remove"
PATH_CLUSTER_STEPDOWN = "/cluster/stepdown"
PATH_CLUSTER_METADATA = "/cluster/metadata"
PATH_REPLICA_SYNC_REGISTER = "/replica_sync/register_peer"
PATH_REPLICA_SYNC_DEREGISTER = "/replica_sync/deregister_peer"
PATH_REPLICA_SYNC_PEERS = "/replica_sync/peers"
PATH_REPLICA_SYNC_STATUS = "/replica_sync/status"


def path(template: str, ident: object) -> str:
    """Fills the {id} of a path template (ids are path-safe by rule)."""
    return template.replace("{id}", quote(str(ident), safe=""))


# A policy's model_name for the cluster default (its tenant_id is empty).
ANY_MODEL = "*"


# Error codes (the "code" of an error answer).
CODE_BAD_REQUEST = "bad_request"
CODE_PAYLOAD_TOO_LARGE = "payload_too_large"
CODE_UNAUTHORIZED = "unauthorized"
CODE_FORBIDDEN = "forbidden"
CODE_NOT_FOUND = "not_found"
CODE_METHOD_NOT_ALLOWED = "method_not_allowed"
CODE_CONFLICT = "conflict"
CODE_CAPACITY = "capacity"
CODE_NOT_READY = "not_ready"
# The catalog never held a worker for the model_name/tenant_id: most likely
# a misspelt name, which no retry mends (503 like not_ready, for Dynamo's
# clients; the message lists the partitions the catalog holds).
CODE_UNKNOWN_PARTITION = "unknown_partition"
CODE_OVERLOADED = "overloaded"
CODE_NOT_LEADER = "not_leader"
CODE_NO_LEADER = "no_leader"
CODE_UNKNOWN_OUTCOME = "unknown_outcome"
CODE_CATALOG_BEHIND = "catalog_behind"
CODE_SHUTTING_DOWN = "shutting_down"
CODE_INTERNAL = "internal"

CODES = frozenset(v for k, v in dict(globals()).items() if k.startswith("CODE_"))

# Codes proving a request changed nothing anywhere: safe to send again.
NOTHING_WRITTEN = frozenset({CODE_NOT_LEADER, CODE_NO_LEADER, CODE_SHUTTING_DOWN})

# The load-shedding body's type (seed 001): {"message", "type", "code": 503}.
BUSY_TYPE = "service_unavailable"

STATE_LEADER = "leader"

MAX_ID_LEN = 256
_ID = re.compile(r"^[!-~]+$")
_ID_FORBIDDEN = set("/?#%")


def validate_id(ident: str) -> None:
    """Raises ValueError unless ident is a valid reservation or selection
    id: 1 to 256 bytes of printable ASCII without '/', '?', '#', '%' or
    space, and not "." or ".." (dot segments cannot name a resource in a
    path)."""
    if not isinstance(ident, str) or not ident:
        raise ValueError("an id must be a non-empty string")
    if len(ident) > MAX_ID_LEN:
        raise ValueError(f"id of {len(ident)} characters; at most {MAX_ID_LEN}")
    if not _ID.match(ident) or _ID_FORBIDDEN & set(ident):
        raise ValueError(f"id {ident!r}: printable ASCII without spaces, '/', '?', '#' or '%'")
    if ident in (".", ".."):
        raise ValueError(f"id {ident!r} is a dot segment, which cannot name a resource in a path")
