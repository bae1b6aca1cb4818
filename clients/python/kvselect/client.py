"""The blocking kvselect client: a method per route of the HTTP API.

It behaves as kvselect's Go client (package client); the rules (node
affinity, leader following, retries only where safe, session consistency,
time limits) are in kvselect._core, shared with the asyncio client
(kvselect.aio.AsyncClient), and what each call sends is in kvselect._calls.
This module only carries a call's round trips over http.client.
"""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union
from urllib.parse import urlsplit

from . import _calls
from ._core import Answer, Call, Core, Pause, ResponseInfo, Steps, T, base_url, read_token_file
from .answers import (BusyThreshold, BusyThresholds, KeepAliveAnswer, Lease, NodeMeta, PartitionLoads, Policies,
                      PolicyWritten, Reservation, ReservationInfo, ReservationPage, Selection, Worker, WorkerWritten)
from .errors import TransportError

__all__ = ["Client", "ResponseInfo", "base_url", "read_token_file"]


class Client(Core):
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

    _TRANSIENT = Core._TRANSIENT + ("_local",)

    def _init_transient(self) -> None:
        super()._init_transient()
        self._local = threading.local()

    @property
    def last_response(self) -> Optional[ResponseInfo]:
        """The answer of this thread's last call, headers included."""
        return getattr(self._local, "info", None)

    def _record(self, info: ResponseInfo) -> None:
        self._local.info = info

    # Health and inspection.

    def health(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_calls.health(), timeout)

    def ready(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /ready. A node that is not ready answers 503 with the same
        body: that is not an error; the result's "ready" is False."""
        return self._do(_calls.ready(), timeout)

    def readyz(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /readyz: is this node a cluster member caught up with the
        leader's commit? A 503 is not an error: "ready" is False and
        "reason" says why."""
        return self._do(_calls.readyz(), timeout)

    def selection_readyz(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /readyz?for=selection: can this node select (what the
        Kubernetes readiness probe asks)? Ready once it has, since it
        started, caught up with a leader's commit and recovered its KV
        index; it stays ready without a leader or a quorum. A 503 is not
        an error: "ready" is False and "reason" says why."""
        return self._do(_calls.selection_readyz(), timeout)

    def metrics(self, *, timeout: Optional[float] = None) -> str:
        """The Prometheus text of GET /metrics."""
        return self._do(_calls.metrics(), timeout)

    def openapi(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The OpenAPI document of the API (GET /openapi.json)."""
        return self._do(_calls.openapi(), timeout)

    def cluster_status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_calls.cluster_status(), timeout)

    def dump(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The home node's index snapshot (GET /dump)."""
        return self._do(_calls.dump(), timeout)

    def loads(self, model_name: Optional[str] = None, tenant_id: Optional[str] = None, *,
              timeout: Optional[float] = None) -> List[PartitionLoads]:
        """The home node's active load per rank (GET /loads)."""
        return self._do(_calls.loads(model_name, tenant_id), timeout)

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
        return self._do(_calls.register_worker(worker_id, dict(
            model_name=model_name, tenant_id=tenant_id, endpoint=endpoint, block_size=block_size,
            data_parallel_start_rank=data_parallel_start_rank, data_parallel_size=data_parallel_size,
            kv_events_endpoints=kv_events_endpoints, kv_events_endpoint=kv_events_endpoint,
            replay_endpoint=replay_endpoint, total_kv_blocks=total_kv_blocks,
            max_num_batched_tokens=max_num_batched_tokens, lease_ttl_s=lease_ttl_s)), timeout)

    def keep_alive(self, worker_id: int, *, timeout: Optional[float] = None) -> Lease:
        """Renews a worker's lease (POST /workers/{id}/keepalive). A
        KvselectError with code not_found means the worker is gone (its
        lease lapsed): register it again."""
        return self._do(_calls.keep_alive(worker_id), timeout)

    def keep_alive_many(self, worker_ids: Iterable[int], *, timeout: Optional[float] = None) -> KeepAliveAnswer:
        """Renews many workers' leases in one request (POST
        /workers/keepalive); "failed" lists the ids that were not, with the
        code the one-worker call would have raised."""
        return self._do(_calls.keep_alive_many(worker_ids), timeout)

    def patch_worker(self, worker_id: int, *, timeout: Optional[float] = None, **fields: Any) -> WorkerWritten:
        """Changes the given fields of a worker (PATCH /workers/{id}); "" or
        0 clears an optional one."""
        return self._do(_calls.patch_worker(worker_id, fields), timeout)

    def delete_worker(self, worker_id: int, *, timeout: Optional[float] = None) -> WorkerWritten:
        """Removes a worker and returns its last record (DELETE
        /workers/{id})."""
        return self._do(_calls.delete_worker(worker_id), timeout)

    def workers(self, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                linearizable: bool = False, *, timeout: Optional[float] = None) -> List[Worker]:
        """The catalog (GET /workers), sorted by model, tenant and id."""
        return self._do(_calls.workers(model_name, tenant_id, linearizable), timeout)

    def worker(self, worker_id: int, linearizable: bool = False, *, timeout: Optional[float] = None) -> Worker:
        return self._do(_calls.worker(worker_id, linearizable), timeout)

    # Selection and bookings.

    def select(self, *, selection_id: Optional[str] = None,
               router_config_override: Optional[Mapping[str, Any]] = None,
               timeout: Optional[float] = None, **prompt: Any) -> Selection:
        """Chooses a worker rank for a prompt and books nothing (POST
        /select). The prompt is token_ids (and lora_name), or block_hashes,
        sequence_hashes and isl_tokens; model_name and tenant_id scope it.
        With a selection_id the node remembers the choice for 60 s, for
        reserve_selection."""
        return self._do(_calls.select(selection_id, router_config_override, prompt), timeout)

    def select_and_reserve(self, *, reservation_id: Optional[str] = None, selection_id: Optional[str] = None,
                           router_config_override: Optional[Mapping[str, Any]] = None,
                           timeout: Optional[float] = None, **prompt: Any) -> Selection:
        """Chooses and books atomically on the home node (POST
        /select_and_reserve); without a reservation_id the node makes one."""
        call = _calls.select_and_reserve(reservation_id, selection_id, router_config_override, prompt)
        return self._do(call, timeout)

    def reserve(self, reservation_id: str, *, worker_id: int, dp_rank: int = 0,
                effective_prefill_tokens: Optional[int] = None, timeout: Optional[float] = None,
                **prompt: Any) -> Reservation:
        """Books a request on a worker rank chosen elsewhere (POST
        /reservations): step 3 of Ray's select-then-reserve. The prompt is
        the one the selection had: sequence_hashes and isl_tokens (with
        model_name and tenant_id), or token_ids. Pass the selection's
        effective_prefill_tokens, or none to let the node compute it."""
        return self._do(_calls.reserve(reservation_id, worker_id, dp_rank, effective_prefill_tokens, prompt), timeout)

    def reserve_selection(self, reservation_id: str, selection_id: str, *,
                          timeout: Optional[float] = None) -> Reservation:
        """Books exactly the choice a select(selection_id=...) made on the
        home node (POST /reservations with the selection_id alone)."""
        return self._do(_calls.reserve_selection(reservation_id, selection_id), timeout)

    def prefill_complete(self, reservation_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Clears a booking's prefill load; repeating it is a no-op."""
        return self._do(_calls.prefill_complete(reservation_id), timeout)

    def output_block(self, reservation_id: str, decay_fraction: Optional[float] = None, *,
                     timeout: Optional[float] = None) -> Dict[str, Any]:
        """Adds one output block to a booking's decode load; decay_fraction,
        in [0, 1], makes its unshared and output blocks weigh that much."""
        return self._do(_calls.output_block(reservation_id, decay_fraction), timeout)

    def free(self, reservation_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Ends a booking (DELETE /reservations/{id})."""
        return self._do(_calls.free(reservation_id), timeout)

    def reservations(self, *, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                     worker_id: Optional[int] = None, limit: Optional[int] = None,
                     cursor: Optional[str] = None, timeout: Optional[float] = None) -> ReservationPage:
        """One page of the home node's bookings, sorted by id (GET
        /reservations); pass the page's next_cursor as cursor for the next."""
        return self._do(_calls.reservations(model_name, tenant_id, worker_id, limit, cursor), timeout)

    def reservation(self, reservation_id: str, *, timeout: Optional[float] = None) -> ReservationInfo:
        return self._do(_calls.reservation(reservation_id), timeout)

    def potential_loads(self, *, timeout: Optional[float] = None, **prompt: Any) -> List[Dict[str, Any]]:
        """Every schedulable rank's load if the prompt were booked on it."""
        return self._do(_calls.potential_loads(prompt), timeout)

    def overlap_scores(self, *, timeout: Optional[float] = None, **prompt: Any) -> Dict[str, Any]:
        """Every schedulable rank's tiered match for the prompt."""
        return self._do(_calls.overlap_scores(prompt), timeout)

    # Load shedding (seed 001).

    def set_busy_threshold(self, model: str, *, active_decode_blocks_threshold: Optional[float] = None,
                           active_prefill_tokens_threshold: Optional[int] = None,
                           timeout: Optional[float] = None) -> BusyThreshold:
        """Sets the thresholds given for the model and keeps its others (POST
        /busy_threshold): active_decode_blocks_threshold is a fraction 0-1
        of a rank's total_kv_blocks, active_prefill_tokens_threshold a token
        count. With neither it only reads the model's."""
        call = _calls.set_busy_threshold(model, active_decode_blocks_threshold, active_prefill_tokens_threshold)
        return self._do(call, timeout)

    def clear_busy_threshold(self, model: str, *, timeout: Optional[float] = None) -> BusyThreshold:
        """Unsets both of the model's thresholds (DELETE /busy_threshold):
        its workers are never shed."""
        return self._do(_calls.clear_busy_threshold(model), timeout)

    def busy_thresholds(self, linearizable: bool = False, *, timeout: Optional[float] = None) -> BusyThresholds:
        """The models with a busy threshold set (GET /busy_threshold)."""
        return self._do(_calls.busy_thresholds(linearizable), timeout)

    # Selection policies (catalog state: every node ranks alike).

    def set_policy(self, model_name: str, policy: str, parameters: Optional[Mapping[str, Union[float, bool]]] = None, *,
                   tenant_id: Optional[str] = None, timeout: Optional[float] = None) -> PolicyWritten:
        """Stores a partition's selection policy, replacing its entry, or
        with model_name wire.ANY_MODEL ("*", no tenant) the cluster default
        (PUT /policies). tenant_id defaults to "default" for a model.
        parameters are the policy's: a bool for a boolean parameter, a
        number otherwise (a bool where a number goes, or the reverse, is
        bad_request naming it)."""
        return self._do(_calls.set_policy(model_name, policy, parameters, tenant_id), timeout)

    def delete_policy(self, model_name: str, tenant_id: Optional[str] = None, *,
                      timeout: Optional[float] = None) -> PolicyWritten:
        """Removes a partition's selection policy, or with model_name
        wire.ANY_MODEL the cluster default (DELETE /policies); the partition
        then runs the cluster default, the cluster default each node's
        --policy. An absent entry is not_found."""
        return self._do(_calls.delete_policy(model_name, tenant_id), timeout)

    def policies(self, linearizable: bool = False, *, timeout: Optional[float] = None) -> Policies:
        """Every policy entry, sorted, and the answering node's own default
        (GET /policies)."""
        return self._do(_calls.policies(linearizable), timeout)

    # Membership.

    def join(self, node_id: str, raft_addr: str, http_addr: Optional[str] = None, *,
             timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_calls.join(node_id, raft_addr, http_addr), timeout)

    def remove(self, node_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._do(_calls.remove(node_id), timeout)

    def step_down(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Hands leadership to another voter; never sent twice."""
        return self._do(_calls.step_down(), timeout)

    def set_metadata(self, node_id: str, http_addr: str, replica_sync: Optional[str] = None, *,
                     timeout: Optional[float] = None) -> NodeMeta:
        """Publishes a member's addresses (POST /cluster/metadata): its
        HTTP address ("host:port") and, optionally, its replica-sync
        endpoint ("tcp://host:port"). An idempotent catalog write: sent
        again after an unknown outcome."""
        return self._do(_calls.set_metadata(node_id, http_addr, replica_sync), timeout)

    def register_replica_sync_peer(self, endpoint: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Makes the home node follow another node's replica sync (POST
        /replica_sync/register_peer, "tcp://host:port"); in memory only.
        Cluster members are followed without it."""
        return self._do(_calls.register_replica_sync_peer(endpoint), timeout)

    def deregister_replica_sync_peer(self, endpoint: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Makes the home node stop following a registered peer (POST
        /replica_sync/deregister_peer)."""
        return self._do(_calls.deregister_replica_sync_peer(endpoint), timeout)

    def replica_sync_peers(self, *, timeout: Optional[float] = None) -> List[str]:
        """The endpoints the home node follows, sorted, as Dynamo answers
        them (GET /replica_sync/peers; [] when replica sync is off)."""
        return self._do(_calls.replica_sync_peers(), timeout)

    def replica_sync_status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The home node's replica sync: enabled, its endpoint and each
        peer's source, state and counters (GET /replica_sync/status)."""
        return self._do(_calls.replica_sync_status(), timeout)

    # The I/O: blocking round trips and pauses.

    def _do(self, call: Call, timeout: Optional[float]) -> Any:
        return self._drive(self._steps(call, timeout))

    def _drive(self, steps: Steps[T]) -> T:
        """Runs a call's steps: makes each round trip and sends its answer
        back (or throws its TransportError in), sleeps each pause."""
        reply: Optional[Answer] = None
        error: Optional[TransportError] = None
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(reply)
            except StopIteration as done:
                return done.value
            reply, error = None, None
            if isinstance(step, Pause):
                time.sleep(step.seconds)
                continue
            try:
                reply = self._round_trip(step.url, step.call)
            except TransportError as e:
                error = e

    def _round_trip(self, url: str, call: Call) -> Answer:
        u = urlsplit(url)
        timeout = call.time_left(self._timeout)
        conn: http.client.HTTPConnection
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        target = (u.path or "/") + ("?" + u.query if u.query else "")
        headers = self._headers(call)
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
            return Answer(node="", url=url, status=resp.status, headers=resp.headers, body=body)
        finally:
            conn.close()
