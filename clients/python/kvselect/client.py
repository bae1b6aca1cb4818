"""The kvselect client: a method per route of the HTTP API.

Behaviour, as in kvselect's Go client (package client):

* Node affinity. Selections, bookings and their lifecycle go to one node,
  the first address that answers (the home node): a reservation lives on
  the node that booked it. A node that cannot be reached at all (nothing
  was sent) is skipped for the next address, which becomes home.
* Leader following. Catalog and membership writes go to the home node,
  which forwards them to the leader and answers once it has applied the
  write itself. When it answers that nothing was written (not_leader,
  no_leader, shutting_down) or cannot be reached, the client finds the
  leader through /cluster/status and sends the write there, retrying with
  backoff for up to retry_timeout seconds.
* Retries only where safe. A request is sent again when it provably did
  nothing; a read also when its answer was lost. An idempotent catalog
  write (upsert, patch, delete, join, remove, metadata) whose outcome is
  unknown is sent again; bookings, lifecycle calls and a step-down never
  are once sent.
* Session consistency. The highest catalog index any answer carried
  (X-Kvselect-Index) is sent with every selection and catalog read, so
  the client reads its own writes on any node. catalog_index and
  observe_catalog_index() share it between clients (a Ray driver and its
  tasks).
* Time limits. Every call takes timeout=seconds, which bounds the whole
  call as a Go context's deadline does: its attempts, leader lookups and
  backoff pauses. Without it each attempt may take the client's timeout,
  and a leader-only call keeps retrying for up to retry_timeout.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlencode, urljoin, urlsplit

from . import wire
from ._version import __version__
from .answers import (BusyThreshold, BusyThresholds, KeepAliveAnswer, Lease, NodeMeta, PartitionLoads, Policies,
                      PolicyWritten, Reservation, ReservationInfo, ReservationPage, Selection, Worker, WorkerWritten)
from .errors import KvselectError, TransportError, decode_error

__all__ = ["Client", "ResponseInfo"]

# What a call is, for routing and retries.
_READ = "read"  # no effect: sent again anywhere, even after a lost answer
_BOOKING = "booking"  # changes this node's load: never sent again once sent
_WRITE = "write"  # leader-only, idempotent: sent again after an unknown outcome
_WRITE_ONCE = "write_once"  # leader-only, not idempotent
_LEADER_READ = "leader_read"  # linearizable read on the leader

_MAX_REDIRECTS = 5
_FIRST_BACKOFF = 0.05
_MAX_BACKOFF = 1.0

Json = Any

_USER_AGENT = "kvselect-python/" + __version__


@dataclass
class ResponseInfo:
    """What the last answer of a thread said besides its body."""

    node: str  # base URL the answer came from
    status: int
    served_by: str  # X-Kvselect-Served-By
    catalog_index: int  # X-Kvselect-Index, 0 when absent
    not_applied: bool  # X-Kvselect-Applied: false
    body: bytes


@dataclass
class _Call:
    method: str
    path: str  # with the query
    body: Optional[bytes]
    kind: str
    session: bool = False
    accept: Optional[Callable[[int], bool]] = None
    deadline: Optional[float] = None  # time.monotonic() the call must end by (its timeout)

    def time_left(self, default: float) -> float:
        """The timeout of the call's next network step: default, or what is
        left of the call's own timeout; raises (nothing sent) once it has
        passed."""
        if self.deadline is None:
            return default
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TransportError(f"{self.method} {self.path}: the call's timeout has passed", sent=False)
        return left

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


@dataclass
class _Answer:
    node: str
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes


def base_url(addr: str, scheme: str = "http") -> str:
    """Turns "host:port" into "<scheme>://host:port" (http by default)
    without a trailing slash; an address with a scheme keeps it."""
    addr = addr.strip()
    if "://" not in addr:
        addr = scheme + "://" + addr
    return addr.rstrip("/")


def read_token_file(path: str) -> str:
    """The token of a token file: its first line (a kvselect node's file
    holds two during a rotation, the one to send first), checked as the
    node checks it: visible ASCII, so that it goes into a header as is."""
    with open(path, "rb") as f:
        raw = f.read(4097)
    if len(raw) > 4096:
        raise ValueError(f"{path} is larger than 4096 bytes: not a token file")
    lines = raw.decode("ascii", errors="replace").strip().splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise ValueError(f"{path} is empty")
    _check_token(token, path)
    return token


def _check_token(token: str, what: str) -> None:
    for i, c in enumerate(token):
        if not 0x21 <= ord(c) <= 0x7E:
            raise ValueError(f"{what}: byte {i} of the token cannot go in an HTTP header (use visible ASCII)")


class Client:
    """A client of a kvselect cluster. Safe to share between threads.

    addrs: node base URLs ("http://host:port" or "host:port"), in order of
    preference, as a list or a comma-separated string.
    token: bearer token sent on every request (the selection token is
    enough for selection, bookings, loads, keepalives and catalog reads;
    catalog writes need the admin token).
    token_file: a file to read the token from instead (its first line).
    ca_file: PEM file of the CA that signs the nodes' HTTPS certificates,
    trusted instead of the system's roots (https:// addresses).
    timeout: seconds one request (one attempt) may take, unless the call
    has a timeout of its own.
    retry_timeout: seconds a leader-only request keeps retrying while no
    leader answers.
    pinned: send every call to the first address, once (no failover, no
    leader following, no retries).

    Client.from_env() reads the addresses, token and CA file from the
    variables kvselectctl reads (KVSELECT_ADDR, KVSELECT_TOKEN or
    KVSELECT_TOKEN_FILE, KVSELECT_CA_FILE).
    """

    def __init__(self, addrs: Union[str, Sequence[str]], *, token: Optional[str] = None,
                 token_file: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry_timeout: float = 10.0,
                 max_answer_bytes: int = 1 << 30, pinned: bool = False) -> None:
        if isinstance(addrs, str):
            addrs = addrs.split(",")
        self._addrs: List[str] = []
        for a in addrs:
            if not a.strip():
                continue
            base = base_url(a)
            u = urlsplit(base)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"{a!r} is not a host:port or http(s) URL")
            self._addrs.append(base)
        if not self._addrs:
            raise ValueError("no node address given")
        if token and token_file:
            raise ValueError("give token or token_file, not both")
        if token_file:
            token = read_token_file(token_file)
        elif token:
            _check_token(token, "token")
        self._token = token
        self._ca_file = ca_file
        self._ssl = _ssl_context(ca_file)
        self._timeout = timeout
        self._retry_timeout = retry_timeout
        self._max_answer = max_answer_bytes
        self._pinned = pinned
        self._lock = threading.Lock()
        self._home = 0
        self._index = 0
        self._local = threading.local()

    @classmethod
    def from_env(cls, addrs: Union[str, Sequence[str], None] = None, **kwargs: Any) -> "Client":
        """A client configured as kvselectctl is: the addresses from
        KVSELECT_ADDR (unless given), the token from KVSELECT_TOKEN or
        KVSELECT_TOKEN_FILE (not both) and the CA from KVSELECT_CA_FILE,
        unless kwargs give them."""
        addrs = addrs or os.environ.get("KVSELECT_ADDR") or "http://127.0.0.1:8092"
        if "token" not in kwargs and "token_file" not in kwargs:
            kwargs["token"] = os.environ.get("KVSELECT_TOKEN") or None
            kwargs["token_file"] = os.environ.get("KVSELECT_TOKEN_FILE") or None
        if "ca_file" not in kwargs and os.environ.get("KVSELECT_CA_FILE"):
            kwargs["ca_file"] = os.environ["KVSELECT_CA_FILE"]
        return cls(addrs, **kwargs)

    # A client can be sent to a Ray task or actor (pickled): it keeps its
    # nodes, token, CA file, home node and session index, and gets a fresh
    # lock and TLS context (the CA file is read again where it lands).

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"], state["_local"], state["_ssl"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._ssl = _ssl_context(self._ca_file)

    # Session consistency and introspection.

    @property
    def catalog_index(self) -> int:
        """The highest catalog index this client has seen."""
        with self._lock:
            return self._index

    def observe_catalog_index(self, index: int) -> None:
        """Raises the client's catalog index to index (one another client
        saw), so the next selections and catalog reads see everything up to
        it. A lower index changes nothing."""
        with self._lock:
            self._index = max(self._index, int(index))

    @property
    def home(self) -> str:
        """The node selections go to."""
        with self._lock:
            return self._addrs[self._home]

    @property
    def last_response(self) -> Optional[ResponseInfo]:
        """The answer of this thread's last call, headers included."""
        return getattr(self._local, "info", None)

    # Health and inspection.

    def health(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_Call("GET", wire.PATH_HEALTH, None, _READ), timeout)

    def ready(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /ready. A node that is not ready answers 503 with the same
        body: that is not an error; the result's "ready" is False."""
        return self._do(_Call("GET", wire.PATH_READY, None, _READ, accept=lambda s: s in (200, 503)), timeout)

    def readyz(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /readyz: is this node a cluster member caught up with the
        leader's commit? A 503 is not an error: "ready" is False and
        "reason" says why."""
        return self._do(_Call("GET", wire.PATH_READYZ, None, _READ, accept=lambda s: s in (200, 503)), timeout)

    def metrics(self, *, timeout: Optional[float] = None) -> str:
        """The Prometheus text of GET /metrics."""
        self._do(_Call("GET", wire.PATH_METRICS, None, _READ), timeout, decode=False)
        info = self.last_response
        return info.body.decode("utf-8") if info else ""

    def openapi(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The OpenAPI document of the API (GET /openapi.json)."""
        return self._do(_Call("GET", wire.PATH_OPENAPI, None, _READ), timeout)

    def cluster_status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_Call("GET", wire.PATH_CLUSTER_STATUS, None, _READ), timeout)

    def dump(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The home node's index snapshot (GET /dump)."""
        return self._do(_Call("GET", wire.PATH_DUMP, None, _READ), timeout)

    def loads(self, model_name: Optional[str] = None, tenant_id: Optional[str] = None, *,
              timeout: Optional[float] = None) -> List[PartitionLoads]:
        """The home node's active load per rank (GET /loads)."""
        q = _query({wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id})
        return self._do(_Call("GET", wire.PATH_LOADS + q, None, _READ), timeout)

    # The worker catalog.

    def register_worker(self, worker_id: int, *, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                        endpoint: Optional[str] = None, block_size: Optional[int] = None,
                        data_parallel_start_rank: Optional[int] = None, data_parallel_size: Optional[int] = None,
                        kv_events_endpoints: Optional[Mapping[Union[int, str], str]] = None,
                        kv_events_endpoint: Optional[str] = None, replay_endpoint: Optional[str] = None,
                        total_kv_blocks: Optional[int] = None, max_num_batched_tokens: Optional[int] = None,
                        lease_ttl_s: Optional[int] = None, timeout: Optional[float] = None) -> WorkerWritten:
        """Registers a worker, or replaces the record of its id (POST
        /workers). Returns the stored record with its catalog_index. With
        lease_ttl_s (1-3600) the worker must be kept alive (keep_alive)
        within each TTL, or the cluster removes it."""
        body = _fields(worker_id=worker_id, model_name=model_name, tenant_id=tenant_id, endpoint=endpoint,
                       block_size=block_size, data_parallel_start_rank=data_parallel_start_rank,
                       data_parallel_size=data_parallel_size, kv_events_endpoints=_ranks(kv_events_endpoints),
                       kv_events_endpoint=kv_events_endpoint, replay_endpoint=replay_endpoint,
                       total_kv_blocks=total_kv_blocks, max_num_batched_tokens=max_num_batched_tokens,
                       lease_ttl_s=lease_ttl_s)
        return self._do(_Call("POST", wire.PATH_WORKERS, _json(body), _WRITE), timeout)

    def keep_alive(self, worker_id: int, *, timeout: Optional[float] = None) -> Lease:
        """Renews a worker's lease (POST /workers/{id}/keepalive). A
        KvselectError with code not_found means the worker is gone (its
        lease lapsed): register it again."""
        return self._do(_Call("POST", wire.path(wire.PATH_WORKER_KEEPALIVE, worker_id), None, _WRITE), timeout)

    def keep_alive_many(self, worker_ids: Iterable[int], *, timeout: Optional[float] = None) -> KeepAliveAnswer:
        """Renews many workers' leases in one request (POST
        /workers/keepalive); "failed" lists the ids that were not, with the
        code the one-worker call would have raised."""
        body = {"worker_ids": list(_ints(worker_ids))}
        return self._do(_Call("POST", wire.PATH_KEEPALIVE, _json(body), _WRITE), timeout)

    def patch_worker(self, worker_id: int, *, timeout: Optional[float] = None, **fields: Any) -> WorkerWritten:
        """Changes the given fields of a worker (PATCH /workers/{id}); "" or
        0 clears an optional one."""
        if "kv_events_endpoints" in fields:
            fields["kv_events_endpoints"] = _ranks(fields["kv_events_endpoints"])
        return self._do(_Call("PATCH", wire.path(wire.PATH_WORKER, worker_id), _json(fields), _WRITE), timeout)

    def delete_worker(self, worker_id: int, *, timeout: Optional[float] = None) -> WorkerWritten:
        """Removes a worker and returns its last record (DELETE
        /workers/{id})."""
        return self._do(_Call("DELETE", wire.path(wire.PATH_WORKER, worker_id), None, _WRITE), timeout)

    def workers(self, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                linearizable: bool = False, *, timeout: Optional[float] = None) -> List[Worker]:
        """The catalog (GET /workers), sorted by model, tenant and id."""
        q = {wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id}
        return self._do(self._catalog_read(wire.PATH_WORKERS, q, linearizable), timeout)

    def worker(self, worker_id: int, linearizable: bool = False, *, timeout: Optional[float] = None) -> Worker:
        return self._do(self._catalog_read(wire.path(wire.PATH_WORKER, worker_id), {}, linearizable), timeout)

    def _catalog_read(self, path: str, q: Dict[str, Any], linearizable: bool) -> _Call:
        if linearizable:
            q[wire.QUERY_CONSISTENCY] = wire.CONSISTENCY_LINEARIZABLE
            return _Call("GET", path + _query(q), None, _LEADER_READ)
        return _Call("GET", path + _query(q), None, _READ, session=True)

    # Selection and bookings.

    def select(self, *, selection_id: Optional[str] = None,
               router_config_override: Optional[Mapping[str, Any]] = None,
               timeout: Optional[float] = None, **prompt: Any) -> Selection:
        """Chooses a worker rank for a prompt and books nothing (POST
        /select). The prompt is token_ids (and lora_name), or block_hashes,
        sequence_hashes and isl_tokens; model_name and tenant_id scope it.
        With a selection_id the node remembers the choice for 60 s, for
        reserve_selection."""
        body = _prompt(prompt, selection_id=selection_id, router_config_override=router_config_override)
        return self._do(_Call("POST", wire.PATH_SELECT, _json(body), _READ, session=True), timeout)

    def select_and_reserve(self, *, reservation_id: Optional[str] = None, selection_id: Optional[str] = None,
                           router_config_override: Optional[Mapping[str, Any]] = None,
                           timeout: Optional[float] = None, **prompt: Any) -> Selection:
        """Chooses and books atomically on the home node (POST
        /select_and_reserve); without a reservation_id the node makes one."""
        body = _prompt(prompt, reservation_id=reservation_id, selection_id=selection_id,
                       router_config_override=router_config_override)
        return self._do(_Call("POST", wire.PATH_SELECT_AND_RESERVE, _json(body), _BOOKING, session=True), timeout)

    def reserve(self, reservation_id: str, *, worker_id: int, dp_rank: int = 0,
                effective_prefill_tokens: Optional[int] = None, timeout: Optional[float] = None,
                **prompt: Any) -> Reservation:
        """Books a request on a worker rank chosen elsewhere (POST
        /reservations): step 3 of Ray's select-then-reserve. The prompt is
        the one the selection had: sequence_hashes and isl_tokens (with
        model_name and tenant_id), or token_ids. Pass the selection's
        effective_prefill_tokens, or none to let the node compute it."""
        body = _prompt(prompt, reservation_id=reservation_id, worker_id=worker_id, dp_rank=dp_rank or None,
                       effective_prefill_tokens=effective_prefill_tokens)
        return self._do(_Call("POST", wire.PATH_RESERVATIONS, _json(body), _BOOKING, session=True), timeout)

    def reserve_selection(self, reservation_id: str, selection_id: str, *,
                          timeout: Optional[float] = None) -> Reservation:
        """Books exactly the choice a select(selection_id=...) made on the
        home node (POST /reservations with the selection_id alone)."""
        body = _prompt({}, reservation_id=reservation_id, selection_id=selection_id)
        return self._do(_Call("POST", wire.PATH_RESERVATIONS, _json(body), _BOOKING, session=True), timeout)

    def prefill_complete(self, reservation_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Clears a booking's prefill load; repeating it is a no-op."""
        wire.validate_id(reservation_id)
        return self._do(_Call("POST", wire.path(wire.PATH_PREFILL_COMPLETE, reservation_id), None, _BOOKING),
                        timeout)

    def output_block(self, reservation_id: str, decay_fraction: Optional[float] = None, *,
                     timeout: Optional[float] = None) -> Dict[str, Any]:
        """Adds one output block to a booking's decode load; decay_fraction,
        in [0, 1], makes its unshared and output blocks weigh that much."""
        wire.validate_id(reservation_id)
        body = None if decay_fraction is None else _json({"decay_fraction": decay_fraction})
        return self._do(_Call("POST", wire.path(wire.PATH_OUTPUT_BLOCK, reservation_id), body, _BOOKING), timeout)

    def free(self, reservation_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Ends a booking (DELETE /reservations/{id})."""
        wire.validate_id(reservation_id)
        return self._do(_Call("DELETE", wire.path(wire.PATH_RESERVATION, reservation_id), None, _BOOKING), timeout)

    def reservations(self, *, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                     worker_id: Optional[int] = None, limit: Optional[int] = None,
                     cursor: Optional[str] = None, timeout: Optional[float] = None) -> ReservationPage:
        """One page of the home node's bookings, sorted by id (GET
        /reservations); pass the page's next_cursor as cursor for the next."""
        q = _query({wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id,
                    wire.QUERY_WORKER_ID: worker_id, wire.QUERY_LIMIT: limit, wire.QUERY_CURSOR: cursor})
        return self._do(_Call("GET", wire.PATH_RESERVATIONS + q, None, _READ), timeout)

    def reservation(self, reservation_id: str, *, timeout: Optional[float] = None) -> ReservationInfo:
        wire.validate_id(reservation_id)
        return self._do(_Call("GET", wire.path(wire.PATH_RESERVATION, reservation_id), None, _READ), timeout)

    def potential_loads(self, *, timeout: Optional[float] = None, **prompt: Any) -> List[Dict[str, Any]]:
        """Every schedulable rank's load if the prompt were booked on it."""
        return self._do(_Call("POST", wire.PATH_POTENTIAL_LOADS, _json(_prompt(prompt)), _READ, session=True),
                        timeout)

    def overlap_scores(self, *, timeout: Optional[float] = None, **prompt: Any) -> Dict[str, Any]:
        """Every schedulable rank's tiered match for the prompt."""
        return self._do(_Call("POST", wire.PATH_OVERLAP_SCORES, _json(_prompt(prompt)), _READ, session=True),
                        timeout)

    # Load shedding (seed 001).

    def set_busy_threshold(self, model: str, *, active_decode_blocks_threshold: Optional[float] = None,
                           active_prefill_tokens_threshold: Optional[int] = None,
                           timeout: Optional[float] = None) -> BusyThreshold:
        """Sets the thresholds given for the model and keeps its others (POST
        /busy_threshold): active_decode_blocks_threshold is a fraction 0-1
        of a rank's total_kv_blocks, active_prefill_tokens_threshold a token
        count. With neither it only reads the model's."""
        body = _fields(model=model, active_decode_blocks_threshold=active_decode_blocks_threshold,
                       active_prefill_tokens_threshold=active_prefill_tokens_threshold)
        return self._do(_Call("POST", wire.PATH_BUSY_THRESHOLD, _json(body), _WRITE), timeout)

    def clear_busy_threshold(self, model: str, *, timeout: Optional[float] = None) -> BusyThreshold:
        """Unsets both of the model's thresholds (DELETE /busy_threshold):
        its workers are never shed."""
        q = _query({wire.QUERY_MODEL: model})
        return self._do(_Call("DELETE", wire.PATH_BUSY_THRESHOLD + q, None, _WRITE), timeout)

    def busy_thresholds(self, linearizable: bool = False, *, timeout: Optional[float] = None) -> BusyThresholds:
        """The models with a busy threshold set (GET /busy_threshold)."""
        return self._do(self._catalog_read(wire.PATH_BUSY_THRESHOLD, {}, linearizable), timeout)

    # Selection policies (catalog state: every node ranks alike).

    def set_policy(self, model_name: str, policy: str, parameters: Optional[Mapping[str, Union[float, bool]]] = None, *,
                   tenant_id: Optional[str] = None, timeout: Optional[float] = None) -> PolicyWritten:
        """Stores a partition's selection policy, replacing its entry, or
        with model_name wire.ANY_MODEL ("*", no tenant) the cluster default
        (PUT /policies). tenant_id defaults to "default" for a model.
        parameters are the policy's: a bool for a boolean parameter, a
        number otherwise (a bool where a number goes, or the reverse, is
        bad_request naming it)."""
        body = _fields(model_name=model_name, tenant_id=tenant_id, policy=policy,
                       parameters=None if parameters is None else dict(parameters))
        return self._do(_Call("PUT", wire.PATH_POLICIES, _json(body), _WRITE), timeout)

    def delete_policy(self, model_name: str, tenant_id: Optional[str] = None, *,
                      timeout: Optional[float] = None) -> PolicyWritten:
        """Removes a partition's selection policy, or with model_name
        wire.ANY_MODEL the cluster default (DELETE /policies); the partition
        then runs the cluster default, the cluster default each node's
        --policy. An absent entry is not_found."""
        q = _query({wire.QUERY_MODEL_NAME: model_name, wire.QUERY_TENANT_ID: tenant_id})
        return self._do(_Call("DELETE", wire.PATH_POLICIES + q, None, _WRITE), timeout)

    def policies(self, linearizable: bool = False, *, timeout: Optional[float] = None) -> Policies:
        """Every policy entry, sorted, and the answering node's own default
        (GET /policies)."""
        return self._do(self._catalog_read(wire.PATH_POLICIES, {}, linearizable), timeout)

    # Membership.

    def join(self, node_id: str, raft_addr: str, http_addr: Optional[str] = None, *,
             timeout: Optional[float] = None) -> Dict[str, Any]:
        body = _fields(id=node_id, raft_addr=raft_addr, http_addr=http_addr)
        return self._do(_Call("POST", wire.PATH_CLUSTER_JOIN, _json(body), _WRITE), timeout)

    def remove(self, node_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_Call("POST", wire.PATH_CLUSTER_REMOVE, _json({"id": node_id}), _WRITE), timeout)

    def step_down(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Hands leadership to another voter; never sent twice."""
        return self._do(_Call("POST", wire.PATH_CLUSTER_STEPDOWN, None, _WRITE_ONCE), timeout)

    def set_metadata(self, node_id: str, http_addr: str, replica_sync: Optional[str] = None, *,
                     timeout: Optional[float] = None) -> NodeMeta:
        """Publishes a member's addresses (POST /cluster/metadata): its
        HTTP address ("host:port") and, optionally, its replica-sync
        endpoint ("tcp://host:port"). An idempotent catalog write: sent
        again after an unknown outcome."""
        body = _fields(id=node_id, http_addr=http_addr, replica_sync=replica_sync)
        return self._do(_Call("POST", wire.PATH_CLUSTER_METADATA, _json(body), _WRITE), timeout)

    def register_replica_sync_peer(self, endpoint: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Makes the home node follow another node's replica sync (POST
        /replica_sync/register_peer, "tcp://host:port"); in memory only.
        Cluster members are followed without it."""
        body = _fields(endpoint=endpoint)
        return self._do(_Call("POST", wire.PATH_REPLICA_SYNC_REGISTER, _json(body), _BOOKING), timeout)

    def deregister_replica_sync_peer(self, endpoint: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Makes the home node stop following a registered peer (POST
        /replica_sync/deregister_peer)."""
        body = _fields(endpoint=endpoint)
        return self._do(_Call("POST", wire.PATH_REPLICA_SYNC_DEREGISTER, _json(body), _BOOKING), timeout)

    def replica_sync_peers(self, *, timeout: Optional[float] = None) -> List[str]:
        """The endpoints the home node follows, sorted, as Dynamo answers
        them (GET /replica_sync/peers; [] when replica sync is off)."""
        return self._do(_Call("GET", wire.PATH_REPLICA_SYNC_PEERS, None, _READ), timeout)

    def replica_sync_status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The home node's replica sync: enabled, its endpoint and each
        peer's source, state and counters (GET /replica_sync/status)."""
        return self._do(_Call("GET", wire.PATH_REPLICA_SYNC_STATUS, None, _READ), timeout)

    # The machinery.

    def _do(self, call: _Call, timeout: Optional[float], decode: bool = True) -> Any:
        """Runs a call. timeout (seconds), when given, bounds all of it:
        each attempt waits at most what is left, and no attempt or pause
        starts after it."""
        if timeout is not None:
            if not timeout > 0:
                raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
            call.deadline = time.monotonic() + timeout
        if self._pinned:
            ans, _ = self._exchange(self._addrs[0], call)
            self._verdict(call, ans, False)
        elif call.kind in (_WRITE, _WRITE_ONCE, _LEADER_READ):
            ans = self._via_leader(call)
        else:
            ans = self._on_home(call)
        if not decode or not ans.body.strip():
            return None
        try:
            return json.loads(ans.body)
        except ValueError as e:
            raise TransportError(f"{call.method} {ans.url}: the answer is not JSON: {e}", sent=True) from e

    def _order(self) -> Tuple[int, List[int]]:
        with self._lock:
            start = self._home
        n = len(self._addrs)
        return start, [(start + i) % n for i in range(n)]

    def _move_home(self, start: int, to: int) -> None:
        with self._lock:
            if self._home == start:
                self._home = to

    def _on_home(self, call: _Call) -> _Answer:
        """Sends the call to the home node and judges its answer."""
        ans = self._home_attempt(call, lost_too=call.kind == _READ)
        self._verdict(call, ans, False)
        return ans

    def _home_attempt(self, call: _Call, lost_too: bool) -> _Answer:
        """Sends the call to the home node, moving on to the next address
        while a node cannot be reached (nothing was sent) and, with
        lost_too, when its answer was lost (reads only: they may be sent
        again). The node that answers becomes home."""
        start, order = self._order()
        errors = []
        for idx in order:
            try:
                ans, _ = self._exchange(self._addrs[idx], call)
            except TransportError as e:
                if (e.sent and not lost_too) or call.expired():
                    raise
                errors.append(str(e))
                continue
            if idx != start:
                self._move_home(start, idx)
            return ans
        raise TransportError("no kvselect node reachable: " + "; ".join(errors), sent=False)

    def _via_leader(self, call: _Call) -> _Answer:
        """Sends a leader-only call through the home node (which forwards
        it); when nothing was written, finds the leader and sends it there,
        with backoff, until retry_timeout (or the call's timeout).
        Idempotent writes are sent again after an unknown outcome."""
        deadline = time.monotonic() + self._retry_timeout
        if call.deadline is not None:
            deadline = min(deadline, call.deadline)
        pause, target, after_unknown = _FIRST_BACKOFF, "", False
        while True:
            last: Exception
            try:
                ans = self._home_attempt(call, lost_too=False) if not target else self._exchange(target, call)[0]
            except TransportError as e:
                if not e.sent:
                    # Never reached; the leader's own address may be one
                    # this client cannot dial: go back through home.
                    target = "" if target else self._find_leader(call, "")
                elif call.kind == _WRITE:
                    after_unknown = True
                elif call.kind != _LEADER_READ:
                    raise TransportError(f"{e} (the request reached a node; it may or may not have taken effect)",
                                         sent=True) from e
                last = e
            else:
                try:
                    self._verdict(call, ans, after_unknown)
                    return ans
                except KvselectError as e:
                    if e.code in wire.NOTHING_WRITTEN:
                        target = self._find_leader(call, target)
                    elif e.code == wire.CODE_UNKNOWN_OUTCOME and call.kind == _WRITE:
                        after_unknown = True
                    else:
                        raise
                    last = e
            if time.monotonic() + pause > deadline:
                raise last
            time.sleep(pause)
            pause = min(2 * pause, _MAX_BACKOFF)

    def _find_leader(self, call: _Call, avoid: str) -> str:
        """The leader's base URL as the nodes know it, or "" (go through the
        home node) when none knows it. avoid is not returned. The lookup
        counts against the call's timeout."""
        status = _Call("GET", wire.PATH_CLUSTER_STATUS, None, _READ, deadline=call.deadline)
        for base in self._addrs:
            try:
                ans, _ = self._exchange(base, status)
                st = json.loads(ans.body) if ans.status == 200 else None
            except (TransportError, ValueError):
                continue
            if not isinstance(st, dict) or not st.get("leader", {}).get("id"):
                continue
            leader = base
            if st["leader"]["id"] != st.get("node_id"):
                if not st["leader"].get("http_addr"):
                    continue
                # A cluster serves one scheme: the leader's is base's.
                leader = base_url(st["leader"]["http_addr"], urlsplit(base).scheme)
            if leader != avoid:
                return leader
        return ""

    def _verdict(self, call: _Call, ans: _Answer, after_unknown: bool) -> None:
        """Records what the answer says and raises for one the call does not
        accept."""
        ok = call.accept(ans.status) if call.accept else 200 <= ans.status < 300
        try:
            index = int(ans.headers.get(wire.HEADER_INDEX) or 0)
        except ValueError:
            index = 0
        if ok and index:
            self.observe_catalog_index(index)
        self._local.info = ResponseInfo(node=ans.node, status=ans.status,
                                        served_by=ans.headers.get(wire.HEADER_SERVED_BY) or "",
                                        catalog_index=index,
                                        not_applied=(ans.headers.get(wire.HEADER_APPLIED) == "false"),
                                        body=ans.body)
        if not ok:
            err = decode_error(call.method, ans.url, ans.status, ans.body)
            err.after_unknown_outcome = after_unknown
            raise err

    def _exchange(self, base: str, call: _Call) -> Tuple[_Answer, bool]:
        """One round trip to base, following up to 5 redirects (307/308)
        with the same method, body and token."""
        url = base + call.path
        sent = False
        for _ in range(_MAX_REDIRECTS + 1):
            try:
                ans = self._round_trip(url, call)
            except TransportError as e:
                raise TransportError(str(e), sent=sent or e.sent) from e
            sent = True
            ans.node = base
            if ans.status not in (307, 308):
                return ans, sent
            location = ans.headers.get("Location")
            if not location:
                raise TransportError(f"{call.method} {url}: redirect without a Location", sent=True)
            nxt = urljoin(url, location)
            if urlsplit(url).scheme == "https" and urlsplit(nxt).scheme != "https":
                # The redirect is followed with the token: never into clear text.
                raise TransportError(f"{call.method} {url}: refused a redirect from https to {nxt}: "
                                     "the token would cross the network in clear text", sent=True)
            url = nxt
        raise TransportError(f"{call.method} {base + call.path}: stopped after {_MAX_REDIRECTS} redirects", sent=True)

    def _round_trip(self, url: str, call: _Call) -> _Answer:
        u = urlsplit(url)
        timeout = call.time_left(self._timeout)
        conn: http.client.HTTPConnection
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        target = (u.path or "/") + ("?" + u.query if u.query else "")
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if call.body is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        if call.session:
            index = self.catalog_index
            if index:
                headers[wire.HEADER_INDEX] = str(index)
        try:
            try:
                conn.connect()
            except OSError as e:
                raise TransportError(f"{call.method} {url}: {e}", sent=False) from e
            try:
                conn.request(call.method, target, body=call.body, headers=headers)
                if call.deadline is not None and conn.sock is not None:
                    conn.sock.settimeout(max(call.deadline - time.monotonic(), 0.001))
                resp = conn.getresponse()
                body = resp.read(self._max_answer + 1)
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"{call.method} {url}: {e!r}", sent=True) from e
            if len(body) > self._max_answer:
                raise TransportError(f"{call.method} {url}: answer larger than {self._max_answer} bytes", sent=True)
            return _Answer(node="", url=url, status=resp.status, headers=resp.headers, body=body)
        finally:
            conn.close()


def _ssl_context(ca_file: Optional[str]) -> Optional[ssl.SSLContext]:
    """The TLS context of https calls: the system's roots (None), or
    ca_file's CA certificates instead."""
    return ssl.create_default_context(cafile=ca_file) if ca_file else None


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
