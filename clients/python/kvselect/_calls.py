"""What each call of the API sends: its method, path, query and body, and
its kind (how it may be routed and retried). One function per public
method of Client and AsyncClient, of the same name; both clients only run
what these build, so the two cannot send different things."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Mapping, Optional, Union
from urllib.parse import urlencode

from . import wire
from ._core import BOOKING, DECODE_TEXT, LEADER_READ, READ, WRITE, WRITE_ONCE, Call


def _ready_or_not(status: int) -> bool:
    return status in (200, 503)


# Health and inspection.

def health() -> Call:
    return Call("GET", wire.PATH_HEALTH, None, READ)


def ready() -> Call:
    return Call("GET", wire.PATH_READY, None, READ, accept=_ready_or_not)


def readyz() -> Call:
    return Call("GET", wire.PATH_READYZ, None, READ, accept=_ready_or_not)


def selection_readyz() -> Call:
    path = wire.PATH_READYZ + _query({wire.QUERY_FOR: wire.READYZ_FOR_SELECTION})
    return Call("GET", path, None, READ, accept=_ready_or_not)


def metrics() -> Call:
    return Call("GET", wire.PATH_METRICS, None, READ, decode=DECODE_TEXT)


def openapi() -> Call:
    return Call("GET", wire.PATH_OPENAPI, None, READ)


def cluster_status() -> Call:
    return Call("GET", wire.PATH_CLUSTER_STATUS, None, READ)


def dump() -> Call:
    return Call("GET", wire.PATH_DUMP, None, READ)


def loads(model_name: Optional[str], tenant_id: Optional[str]) -> Call:
    q = _query({wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id})
    return Call("GET", wire.PATH_LOADS + q, None, READ)


# The worker catalog.

def register_worker(worker_id: int, fields: Dict[str, Any]) -> Call:
    if fields.get("kv_events_endpoints") is not None:
        fields["kv_events_endpoints"] = _ranks(fields["kv_events_endpoints"])
    body = _fields(worker_id=worker_id, **fields)
    return Call("POST", wire.PATH_WORKERS, _json(body), WRITE)


def keep_alive(worker_id: int) -> Call:
    return Call("POST", wire.path(wire.PATH_WORKER_KEEPALIVE, worker_id), None, WRITE)


def keep_alive_many(worker_ids: Iterable[int]) -> Call:
    body = {"worker_ids": list(_ints(worker_ids))}
    return Call("POST", wire.PATH_KEEPALIVE, _json(body), WRITE)


def patch_worker(worker_id: int, fields: Dict[str, Any]) -> Call:
    if "kv_events_endpoints" in fields:
        fields["kv_events_endpoints"] = _ranks(fields["kv_events_endpoints"])
    return Call("PATCH", wire.path(wire.PATH_WORKER, worker_id), _json(fields), WRITE)


def delete_worker(worker_id: int) -> Call:
    return Call("DELETE", wire.path(wire.PATH_WORKER, worker_id), None, WRITE)


def workers(model_name: Optional[str], tenant_id: Optional[str], linearizable: bool) -> Call:
    q = {wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id}
    return _catalog_read(wire.PATH_WORKERS, q, linearizable)


def worker(worker_id: int, linearizable: bool) -> Call:
    return _catalog_read(wire.path(wire.PATH_WORKER, worker_id), {}, linearizable)


def _catalog_read(path: str, q: Dict[str, Any], linearizable: bool) -> Call:
    if linearizable:
        q[wire.QUERY_CONSISTENCY] = wire.CONSISTENCY_LINEARIZABLE
        return Call("GET", path + _query(q), None, LEADER_READ)
    return Call("GET", path + _query(q), None, READ, session=True)


# Selection and bookings.

def select(selection_id: Optional[str], router_config_override: Optional[Mapping[str, Any]],
           prompt: Mapping[str, Any]) -> Call:
    body = _prompt(prompt, selection_id=selection_id, router_config_override=router_config_override)
    return Call("POST", wire.PATH_SELECT, _json(body), READ, session=True)


def select_and_reserve(reservation_id: Optional[str], selection_id: Optional[str],
                       router_config_override: Optional[Mapping[str, Any]], prompt: Mapping[str, Any]) -> Call:
    body = _prompt(prompt, reservation_id=reservation_id, selection_id=selection_id,
                   router_config_override=router_config_override)
    return Call("POST", wire.PATH_SELECT_AND_RESERVE, _json(body), BOOKING, session=True)


def reserve(reservation_id: str, worker_id: int, dp_rank: int, effective_prefill_tokens: Optional[int],
            prompt: Mapping[str, Any]) -> Call:
    body = _prompt(prompt, reservation_id=reservation_id, worker_id=worker_id, dp_rank=dp_rank or None,
                   effective_prefill_tokens=effective_prefill_tokens)
    return Call("POST", wire.PATH_RESERVATIONS, _json(body), BOOKING, session=True)


def reserve_selection(reservation_id: str, selection_id: str) -> Call:
    body = _prompt({}, reservation_id=reservation_id, selection_id=selection_id)
    return Call("POST", wire.PATH_RESERVATIONS, _json(body), BOOKING, session=True)


def prefill_complete(reservation_id: str) -> Call:
    wire.validate_id(reservation_id)
    return Call("POST", wire.path(wire.PATH_PREFILL_COMPLETE, reservation_id), None, BOOKING)


def output_block(reservation_id: str, decay_fraction: Optional[float]) -> Call:
    wire.validate_id(reservation_id)
    body = None if decay_fraction is None else _json({"decay_fraction": decay_fraction})
    return Call("POST", wire.path(wire.PATH_OUTPUT_BLOCK, reservation_id), body, BOOKING)


def free(reservation_id: str) -> Call:
    wire.validate_id(reservation_id)
    return Call("DELETE", wire.path(wire.PATH_RESERVATION, reservation_id), None, BOOKING)


def reservations(model_name: Optional[str], tenant_id: Optional[str], worker_id: Optional[int],
                 limit: Optional[int], cursor: Optional[str]) -> Call:
    q = _query({wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id,
                wire.QUERY_WORKER_ID: worker_id, wire.QUERY_LIMIT: limit, wire.QUERY_CURSOR: cursor})
    return Call("GET", wire.PATH_RESERVATIONS + q, None, READ)


def reservation(reservation_id: str) -> Call:
    wire.validate_id(reservation_id)
    return Call("GET", wire.path(wire.PATH_RESERVATION, reservation_id), None, READ)


def potential_loads(prompt: Mapping[str, Any]) -> Call:
    return Call("POST", wire.PATH_POTENTIAL_LOADS, _json(_prompt(prompt)), READ, session=True)


def overlap_scores(prompt: Mapping[str, Any]) -> Call:
    return Call("POST", wire.PATH_OVERLAP_SCORES, _json(_prompt(prompt)), READ, session=True)


# Load shedding (seed 001).

def set_busy_threshold(model: str, active_decode_blocks_threshold: Optional[float],
                       active_prefill_tokens_threshold: Optional[int]) -> Call:
    body = _fields(model=model, active_decode_blocks_threshold=active_decode_blocks_threshold,
                   active_prefill_tokens_threshold=active_prefill_tokens_threshold)
    return Call("POST", wire.PATH_BUSY_THRESHOLD, _json(body), WRITE)


def clear_busy_threshold(model: str) -> Call:
    q = _query({wire.QUERY_MODEL: model})
    return Call("DELETE", wire.PATH_BUSY_THRESHOLD + q, None, WRITE)


def busy_thresholds(linearizable: bool) -> Call:
    return _catalog_read(wire.PATH_BUSY_THRESHOLD, {}, linearizable)


# Selection policies.

def set_policy(model_name: str, policy: str, parameters: Optional[Mapping[str, Union[float, bool]]],
               tenant_id: Optional[str]) -> Call:
    body = _fields(model_name=model_name, tenant_id=tenant_id, policy=policy,
                   parameters=None if parameters is None else dict(parameters))
    return Call("PUT", wire.PATH_POLICIES, _json(body), WRITE)


def delete_policy(model_name: str, tenant_id: Optional[str]) -> Call:
    q = _query({wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id})
    return Call("DELETE", wire.PATH_POLICIES + q, None, WRITE)


def policies(linearizable: bool) -> Call:
    return _catalog_read(wire.PATH_POLICIES, {}, linearizable)


# Membership.

def join(node_id: str, raft_addr: str, http_addr: Optional[str]) -> Call:
    body = _fields(id=node_id, raft_addr=raft_addr, http_addr=http_addr)
    return Call("POST", wire.PATH_CLUSTER_JOIN, _json(body), WRITE)


def remove(node_id: str) -> Call:
    return Call("POST", wire.PATH_CLUSTER_REMOVE, _json({"id": node_id}), WRITE)


def step_down() -> Call:
    return Call("POST", wire.PATH_CLUSTER_STEPDOWN, None, WRITE_ONCE)


def set_metadata(node_id: str, http_addr: str, replica_sync: Optional[str]) -> Call:
    body = _fields(id=node_id, http_addr=http_addr, replica_sync=replica_sync)
    return Call("POST", wire.PATH_CLUSTER_METADATA, _json(body), WRITE)


def register_replica_sync_peer(endpoint: str) -> Call:
    return Call("POST", wire.PATH_REPLICA_SYNC_REGISTER, _json(_fields(endpoint=endpoint)), BOOKING)


def deregister_replica_sync_peer(endpoint: str) -> Call:
    return Call("POST", wire.PATH_REPLICA_SYNC_DEREGISTER, _json(_fields(endpoint=endpoint)), BOOKING)


def replica_sync_peers() -> Call:
    return Call("GET", wire.PATH_REPLICA_SYNC_PEERS, None, READ)


def replica_sync_status() -> Call:
    return Call("GET", wire.PATH_REPLICA_SYNC_STATUS, None, READ)


# Bodies and queries.

def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def _fields(**kv: Any) -> Dict[str, Any]:
    """The given fields, without the absent (None) ones."""
    return {k: v for k, v in kv.items() if v is not None}


def _query(params: Mapping[str, Any]) -> str:
    q = {k: v for k, v in params.items() if v is not None and v != ""}
    return "?" + urlencode(q) if q else ""


def _ranks(endpoints: Optional[Mapping[Union[int, str], str]]) -> Optional[Dict[str, str]]:
    """kv_events_endpoints with its dp ranks as JSON object keys."""
    return None if endpoints is None else {str(k): v for k, v in endpoints.items()}


_PROMPT_FIELDS = frozenset({"model_name", "tenant_id", "routing_group", "block_hashes", "sequence_hashes",
                            "isl_tokens", "token_ids", "lora_name", "min_catalog_index", "require_catalog"})


def _prompt(prompt: Mapping[str, Any], **extra: Any) -> Dict[str, Any]:
    """A request body from prompt fields and the route's own, checking the
    names here so a typo fails before it is sent, and the ids by their
    rule."""
    unknown = set(prompt) - _PROMPT_FIELDS
    if unknown:
        raise TypeError(f"unknown prompt field(s) {sorted(unknown)}; expected some of {sorted(_PROMPT_FIELDS)}")
    body = _fields(**prompt, **extra)
    for key in ("reservation_id", "selection_id"):
        if key in body:
            wire.validate_id(body[key])
    for key in ("block_hashes", "sequence_hashes", "token_ids"):
        if key in body:
            body[key] = list(_ints(body[key]))
    return body


def _ints(values: Iterable[Any]) -> Iterable[int]:
    for v in values:
        yield int(v)
