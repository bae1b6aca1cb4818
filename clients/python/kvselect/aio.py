"""The asyncio kvselect client: AsyncClient, Client's methods as coroutines.

    from kvselect.aio import AsyncClient

    async with AsyncClient(["http://127.0.0.1:8092", "http://127.0.0.1:8192"]) as kv:
        sel = await kv.select_and_reserve(model_name="llama", token_ids=prompt_tokens)
        ...
        await kv.prefill_complete(sel["reservation_id"])
        await kv.free(sel["reservation_id"])

It never blocks the event loop: HTTP/1.1 over asyncio streams, TLS by
asyncio.open_connection, time limits by asyncio.wait (not wait_for, which
before Python 3.12 can swallow a cancellation), pauses by asyncio.sleep. It keeps connections open between calls (keep-alive), at
most max_connections per node at once, so many coroutines can select
concurrently on a few sockets.

The rules are Client's, from the same code (kvselect._core): node
affinity, leader following, retries only where safe, session consistency,
time limits; and so is what each call sends (kvselect._calls). Only the
round trip and the pause differ.
"""

from __future__ import annotations

import asyncio
import contextvars
import http.client
import io
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

from . import _calls
from ._core import Answer, Call, Core, Pause, ResponseInfo, Steps, T
from .answers import (BusyThreshold, BusyThresholds, KeepAliveAnswer, Lease, NodeMeta, PartitionLoads, Policies,
                      PolicyWritten, Reservation, ReservationInfo, ReservationPage, Selection, Worker, WorkerWritten)
from .client import Client
from .errors import TransportError

__all__ = ["AsyncClient"]

_MAX_HEADER_BYTES = 64 << 10
# The kvselect server closes a connection idle for 2 minutes; one idle for
# less than idle_timeout is reused, one older is closed first, so a
# request rarely meets a connection the server is closing.
_DEFAULT_IDLE_TIMEOUT = 30.0


def _mirror_docs(cls: type) -> type:
    """Gives each coroutine method of cls the docstring of Client's method
    of the same name: the documentation is written once."""
    for name, fn in vars(cls).items():
        sync = getattr(Client, name, None)
        if callable(fn) and not name.startswith("_") and fn.__doc__ is None and sync is not None:
            fn.__doc__ = sync.__doc__
    return cls


@_mirror_docs
class AsyncClient(Core):
    """A client of a kvselect cluster for asyncio: the methods of Client,
    name for name, as coroutines (await kv.select(...)).

    The arguments are Client's, and:
    max_connections: connections open to one node at once (in use or
    idle); a call waits for one, within its timeout.
    idle_timeout: seconds an idle connection is kept for the next call.

    Use it from one event loop at a time (the connections belong to the
    loop that opened them; a client used from a new loop opens new ones).
    Close it with `await kv.aclose()` or `async with`. Like Client, it
    pickles with its nodes, token, CA file and session (a Ray actor).
    last_response is the answer of this task's last call.
    """

    _TRANSIENT = Core._TRANSIENT + ("_last", "_pools", "_pools_loop")

    def __init__(self, addrs: Union[str, Sequence[str]], *, token: Optional[str] = None,
                 token_file: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry_timeout: float = 10.0,
                 max_answer_bytes: int = 1 << 30, pinned: bool = False,
                 max_connections: int = 64, idle_timeout: float = _DEFAULT_IDLE_TIMEOUT) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self._max_connections = max_connections
        self._idle_timeout = idle_timeout
        super().__init__(addrs, token=token, token_file=token_file, ca_file=ca_file, timeout=timeout,
                         retry_timeout=retry_timeout, max_answer_bytes=max_answer_bytes, pinned=pinned)

    def _init_transient(self) -> None:
        super()._init_transient()
        self._last: contextvars.ContextVar[Optional[ResponseInfo]] = contextvars.ContextVar(
            "kvselect_last_response", default=None)
        self._pools: Dict[Tuple[str, str, int], _Pool] = {}
        self._pools_loop: Optional[asyncio.AbstractEventLoop] = None

    @property
    def last_response(self) -> Optional[ResponseInfo]:
        """The answer of this task's last call, headers included (a call
        awaited directly runs in its caller's task; one under
        asyncio.gather or create_task in its own)."""
        return self._last.get()

    def _record(self, info: ResponseInfo) -> None:
        self._last.set(info)

    async def aclose(self) -> None:
        """Closes the idle connections. The client stays usable: a later
        call opens new ones."""
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Health and inspection (the docstrings are Client's).

    async def health(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.health(), timeout)

    async def ready(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.ready(), timeout)

    async def readyz(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.readyz(), timeout)

    async def selection_readyz(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.selection_readyz(), timeout)

    async def metrics(self, *, timeout: Optional[float] = None) -> str:
        return await self._do(_calls.metrics(), timeout)

    async def openapi(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.openapi(), timeout)

    async def cluster_status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.cluster_status(), timeout)

    async def dump(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.dump(), timeout)

    async def loads(self, model_name: Optional[str] = None, tenant_id: Optional[str] = None, *,
                    timeout: Optional[float] = None) -> List[PartitionLoads]:
        return await self._do(_calls.loads(model_name, tenant_id), timeout)

    # The worker catalog.

    async def register_worker(self, worker_id: int, *, model_name: Optional[str] = None,
                              tenant_id: Optional[str] = None, endpoint: Optional[str] = None,
                              block_size: Optional[int] = None,
                              data_parallel_start_rank: Optional[int] = None, data_parallel_size: Optional[int] = None,
                              kv_events_endpoints: Optional[Mapping[Union[int, str], str]] = None,
                              kv_events_endpoint: Optional[str] = None, replay_endpoint: Optional[str] = None,
                              total_kv_blocks: Optional[int] = None, max_num_batched_tokens: Optional[int] = None,
                              lease_ttl_s: Optional[int] = None, timeout: Optional[float] = None) -> WorkerWritten:
        return await self._do(_calls.register_worker(worker_id, dict(
            model_name=model_name, tenant_id=tenant_id, endpoint=endpoint, block_size=block_size,
            data_parallel_start_rank=data_parallel_start_rank, data_parallel_size=data_parallel_size,
            kv_events_endpoints=kv_events_endpoints, kv_events_endpoint=kv_events_endpoint,
            replay_endpoint=replay_endpoint, total_kv_blocks=total_kv_blocks,
            max_num_batched_tokens=max_num_batched_tokens, lease_ttl_s=lease_ttl_s)), timeout)

    async def keep_alive(self, worker_id: int, *, timeout: Optional[float] = None) -> Lease:
        return await self._do(_calls.keep_alive(worker_id), timeout)

    async def keep_alive_many(self, worker_ids: Iterable[int], *, timeout: Optional[float] = None) -> KeepAliveAnswer:
        return await self._do(_calls.keep_alive_many(worker_ids), timeout)

    async def patch_worker(self, worker_id: int, *, timeout: Optional[float] = None, **fields: Any) -> WorkerWritten:
        return await self._do(_calls.patch_worker(worker_id, fields), timeout)

    async def delete_worker(self, worker_id: int, *, timeout: Optional[float] = None) -> WorkerWritten:
        return await self._do(_calls.delete_worker(worker_id), timeout)

    async def workers(self, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                      linearizable: bool = False, *, timeout: Optional[float] = None) -> List[Worker]:
        return await self._do(_calls.workers(model_name, tenant_id, linearizable), timeout)

    async def worker(self, worker_id: int, linearizable: bool = False, *, timeout: Optional[float] = None) -> Worker:
        return await self._do(_calls.worker(worker_id, linearizable), timeout)

    # Selection and bookings.

    async def select(self, *, selection_id: Optional[str] = None,
                     router_config_override: Optional[Mapping[str, Any]] = None,
                     timeout: Optional[float] = None, **prompt: Any) -> Selection:
        return await self._do(_calls.select(selection_id, router_config_override, prompt), timeout)

    async def select_and_reserve(self, *, reservation_id: Optional[str] = None, selection_id: Optional[str] = None,
                                 router_config_override: Optional[Mapping[str, Any]] = None,
                                 timeout: Optional[float] = None, **prompt: Any) -> Selection:
        call = _calls.select_and_reserve(reservation_id, selection_id, router_config_override, prompt)
        return await self._do(call, timeout)

    async def reserve(self, reservation_id: str, *, worker_id: int, dp_rank: int = 0,
                      effective_prefill_tokens: Optional[int] = None, timeout: Optional[float] = None,
                      **prompt: Any) -> Reservation:
        call = _calls.reserve(reservation_id, worker_id, dp_rank, effective_prefill_tokens, prompt)
        return await self._do(call, timeout)

    async def reserve_selection(self, reservation_id: str, selection_id: str, *,
                                timeout: Optional[float] = None) -> Reservation:
        return await self._do(_calls.reserve_selection(reservation_id, selection_id), timeout)

    async def prefill_complete(self, reservation_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.prefill_complete(reservation_id), timeout)

    async def output_block(self, reservation_id: str, decay_fraction: Optional[float] = None, *,
                           timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.output_block(reservation_id, decay_fraction), timeout)

    async def free(self, reservation_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.free(reservation_id), timeout)

    async def reservations(self, *, model_name: Optional[str] = None, tenant_id: Optional[str] = None,
                           worker_id: Optional[int] = None, limit: Optional[int] = None,
                           cursor: Optional[str] = None, timeout: Optional[float] = None) -> ReservationPage:
        return await self._do(_calls.reservations(model_name, tenant_id, worker_id, limit, cursor), timeout)

    async def reservation(self, reservation_id: str, *, timeout: Optional[float] = None) -> ReservationInfo:
        return await self._do(_calls.reservation(reservation_id), timeout)

    async def potential_loads(self, *, timeout: Optional[float] = None, **prompt: Any) -> List[Dict[str, Any]]:
        return await self._do(_calls.potential_loads(prompt), timeout)

    async def overlap_scores(self, *, timeout: Optional[float] = None, **prompt: Any) -> Dict[str, Any]:
        return await self._do(_calls.overlap_scores(prompt), timeout)

    # Load shedding (seed 001).

    async def set_busy_threshold(self, model: str, *, active_decode_blocks_threshold: Optional[float] = None,
                                 active_prefill_tokens_threshold: Optional[int] = None,
                                 timeout: Optional[float] = None) -> BusyThreshold:
        call = _calls.set_busy_threshold(model, active_decode_blocks_threshold, active_prefill_tokens_threshold)
        return await self._do(call, timeout)

    async def clear_busy_threshold(self, model: str, *, timeout: Optional[float] = None) -> BusyThreshold:
        return await self._do(_calls.clear_busy_threshold(model), timeout)

    async def busy_thresholds(self, linearizable: bool = False, *, timeout: Optional[float] = None) -> BusyThresholds:
        return await self._do(_calls.busy_thresholds(linearizable), timeout)

    # Selection policies (catalog state: every node ranks alike).

    async def set_policy(self, model_name: str, policy: str,
                         parameters: Optional[Mapping[str, Union[float, bool]]] = None, *,
                         tenant_id: Optional[str] = None, timeout: Optional[float] = None) -> PolicyWritten:
        return await self._do(_calls.set_policy(model_name, policy, parameters, tenant_id), timeout)

    async def delete_policy(self, model_name: str, tenant_id: Optional[str] = None, *,
                            timeout: Optional[float] = None) -> PolicyWritten:
        return await self._do(_calls.delete_policy(model_name, tenant_id), timeout)

    async def policies(self, linearizable: bool = False, *, timeout: Optional[float] = None) -> Policies:
        return await self._do(_calls.policies(linearizable), timeout)

    # Membership.

    async def join(self, node_id: str, raft_addr: str, http_addr: Optional[str] = None, *,
                   timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.join(node_id, raft_addr, http_addr), timeout)

    async def remove(self, node_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.remove(node_id), timeout)

    async def step_down(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.step_down(), timeout)

    async def set_metadata(self, node_id: str, http_addr: str, replica_sync: Optional[str] = None, *,
                           timeout: Optional[float] = None) -> NodeMeta:
        return await self._do(_calls.set_metadata(node_id, http_addr, replica_sync), timeout)

    async def register_replica_sync_peer(self, endpoint: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.register_replica_sync_peer(endpoint), timeout)

    async def deregister_replica_sync_peer(self, endpoint: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.deregister_replica_sync_peer(endpoint), timeout)

    async def replica_sync_peers(self, *, timeout: Optional[float] = None) -> List[str]:
        return await self._do(_calls.replica_sync_peers(), timeout)

    async def replica_sync_status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._do(_calls.replica_sync_status(), timeout)

    # The I/O: round trips over asyncio streams, pauses by asyncio.sleep.

    async def _do(self, call: Call, timeout: Optional[float]) -> Any:
        return await self._drive(self._steps(call, timeout))

    async def _drive(self, steps: Steps[T]) -> T:
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
                await asyncio.sleep(step.seconds)
                continue
            try:
                reply = await self._round_trip(step.url, step.call)
            except TransportError as e:
                error = e

    async def _round_trip(self, url: str, call: Call) -> Answer:
        """One request and its answer, within the attempt's time: what is
        left of the call's timeout, or the client's."""
        timeout = call.time_left(self._timeout)
        progress = _Progress()
        try:
            return await _within(self._attempt(url, call, progress), timeout)
        except asyncio.TimeoutError as e:
            raise TransportError(f"{call.method} {url}: no answer within {timeout:.3g}s", sent=progress.sent) from e

    def _pool(self, scheme: str, host: str, port: int) -> "_Pool":
        loop = asyncio.get_running_loop()
        if self._pools_loop is not loop:
            # Connections of another (perhaps closed) loop cannot be used
            # or closed from this one: start afresh.
            self._pools, self._pools_loop = {}, loop
        key = (scheme, host, port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(asyncio.Semaphore(self._max_connections))
        return pool

    async def _attempt(self, url: str, call: Call, progress: "_Progress") -> Answer:
        u = urlsplit(url)
        https = u.scheme == "https"
        host = u.hostname or ""
        port = u.port or (443 if https else 80)
        pool = self._pool(u.scheme, host, port)
        async with pool.slots:
            conn = pool.take(self._idle_timeout)
            if conn is None:
                try:
                    ctx: Union[bool, ssl.SSLContext, None] = (self._ssl or True) if https else None
                    reader, writer = await asyncio.open_connection(
                        host, port, ssl=ctx, server_hostname=host if https else None, limit=_MAX_HEADER_BYTES)
                except OSError as e:  # ssl.SSLError is an OSError
                    raise TransportError(f"{call.method} {url}: {e}", sent=False) from e
                conn = _Conn(reader, writer)
            # From here the request may reach the node.
            progress.sent = True
            reusable = False
            try:
                conn.writer.write(self._request(u, call))
                await conn.writer.drain()
                status, headers, body, reusable = await _read_answer(conn.reader, call, url, self._max_answer)
            except (OSError, EOFError, asyncio.LimitOverrunError, ValueError) as e:
                raise TransportError(f"{call.method} {url}: {e!r}", sent=True) from e
            finally:
                if reusable:
                    pool.give_back(conn)
                else:
                    conn.writer.close()
        return Answer(node="", url=url, status=status, headers=headers, body=body)

    def _request(self, u: Any, call: Call) -> bytes:
        """The request's bytes: HTTP/1.1, keep-alive, the client's headers."""
        target = (u.path or "/") + ("?" + u.query if u.query else "")
        host = u.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if u.port is not None:
            host += f":{u.port}"
        lines = [f"{call.method} {target} HTTP/1.1", f"Host: {host}"]
        lines += [f"{k}: {v}" for k, v in self._headers(call).items()]
        body = call.body or b""
        if call.body is not None or call.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _within(work: Awaitable[T], timeout: float) -> T:
    """work's result, or asyncio.TimeoutError once timeout seconds have
    passed (work is then cancelled and awaited). Unlike asyncio.wait_for
    before Python 3.12, a cancellation of the caller always propagates,
    even when work finished in the same loop iteration: a cancelled
    request handler or lease keeper stops."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task})
        raise asyncio.TimeoutError()
    return task.result()


@dataclass
class _Progress:
    sent: bool = False  # a connection was open: the request may have reached the node


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0


@dataclass
class _Pool:
    """One node's connections: slots bounds those open at once, idle holds
    the ones free for the next request (the most recent last)."""

    slots: asyncio.Semaphore
    idle: List[_Conn] = field(default_factory=list)

    def take(self, idle_timeout: float) -> Optional[_Conn]:
        """An idle connection still worth reusing, or None: those the node
        closed, or idle longer than idle_timeout, are closed and skipped."""
        while self.idle:
            conn = self.idle.pop()
            if (conn.reader.at_eof() or conn.reader.exception() is not None or conn.writer.is_closing()
                    or time.monotonic() - conn.idle_since > idle_timeout):
                conn.writer.close()
                continue
            return conn
        return None

    def give_back(self, conn: _Conn) -> None:
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    async def close(self) -> None:
        conns, self.idle = self.idle, []
        for conn in conns:
            conn.writer.close()
        for conn in conns:
            try:
                await conn.writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass


async def _read_answer(reader: asyncio.StreamReader, call: Call, url: str,
                       limit: int) -> Tuple[int, http.client.HTTPMessage, bytes, bool]:
    """Reads one HTTP/1.x answer: its status, headers, body (at most limit
    bytes) and whether the connection may carry another request."""
    while True:
        status_line = await reader.readuntil(b"\r\n")
        version, status_text = status_line.decode("latin-1").split(" ", 2)[:2]
        status = int(status_text)
        raw = io.BytesIO()
        while True:
            line = await reader.readuntil(b"\r\n")
            raw.write(line)
            if raw.tell() > _MAX_HEADER_BYTES:
                raise ValueError(f"answer headers longer than {_MAX_HEADER_BYTES} bytes")
            if line == b"\r\n":
                break
        if not 100 <= status < 200:
            break  # 1xx answers (100 Continue) precede the real one
    raw.seek(0)
    headers = http.client.parse_headers(raw)
    keep = version == "HTTP/1.1" and "close" not in (headers.get("Connection") or "").lower()

    def too_large() -> TransportError:
        return TransportError(f"{call.method} {url}: answer larger than {limit} bytes", sent=True)

    if call.method == "HEAD" or status in (204, 304):
        return status, headers, b"", keep
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        chunks, size = [], 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            n = int(size_line.split(b";", 1)[0].strip(), 16)
            if n == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return status, headers, b"".join(chunks), keep
            size += n
            if size > limit:
                raise too_large()
            chunks.append(await reader.readexactly(n))
            await reader.readexactly(2)
    length = headers.get("Content-Length")
    if length is not None:
        n = int(length)
        if n > limit:
            raise too_large()
        return status, headers, await reader.readexactly(n), keep
    # Neither: the body runs to the end of the connection.
    body = await reader.read(limit + 1)
    while len(body) <= limit:
        more = await reader.read(limit + 1 - len(body))
        if not more:
            break
        body += more
    if len(body) > limit:
        raise too_large()
    return status, headers, body, False
