#!/usr/bin/env python3
"""A Ray Serve ingress that routes OpenAI completions to vLLM engines with
kvselect.

For each request the ingress:

1. books a worker rank for the prompt on kvselect (select_and_reserve,
   with the request's id as reservation_id);
2. streams the request to that engine's OpenAI-compatible endpoint
   (/v1/completions or /v1/chat/completions at the worker's endpoint,
   with the X-data-parallel-rank header vLLM routes a data-parallel
   engine's request by) and relays the server-sent events as they come;
3. reports the first token (prefill_complete: the prompt's prefill load
   leaves the rank);
4. frees the booking when the stream ends, fails, or is cancelled (the
   caller went away and Serve cancelled the request).

All of it uses kvselect.AsyncClient, so one replica serves many requests
at once on its event loop. Run it (Ray Serve installed, kvselect importable
on every node: `pip install clients/python`):

    cd clients/python/examples
    serve run ray_serve_ingress:app kvselect=http://127.0.0.1:8092 model=llama select_timeout=0.5

    curl -N localhost:8000/ -d '{"model": "llama", "prompt": [1, 2, 3], "max_tokens": 16, "stream": true}'

The prompt must be token ids (vLLM accepts them as "prompt") unless the
deployment is given a tokenizer (CompletionRouter's tokenize, e.g. a
transformers tokenizer's encode): kvselect matches KV blocks by tokens.

Who registers the workers: best, the process that runs each engine
(its launcher or Ray actor) registers it with a lease (lease_ttl_s) and
keeps it alive; when the engine dies its lease lapses and kvselect stops
routing to it. For a fixed fleet the ingress can do it instead: give it
workers=<JSON list of register_worker arguments> and it registers them
with a lease and renews it (LeaseKeeper); the lease then proves the
ingress alive, not the engine.

It fails open: kvselect costs cache affinity when it is down, never
service. When no kvselect node answers a selection within select_timeout
seconds (default 0.5; a transport error or a timeout), or the answer is
503 not_ready (the node sees no schedulable worker), the ingress picks an
engine itself, round-robin over the engines (worker endpoint and dp rank)
it knows, sends the request there and skips prefill_complete and free for
it: nothing was booked. The engines it knows are those of the workers it
registers itself (workers=) and those of the last successful listing of
the model's workers on kvselect, refreshed every 10 s in the background;
each listing replaces the previous one. It logs a WARNING when it starts
failing open (once per outage, not per request) and an INFO when kvselect
answers again. kvselect's refusals are passed on, not failed open: a
load-shedding 503 (overloaded: every worker is busy; sending the request
anyway would defeat the threshold) with its Retry-After, unknown_partition
(a misspelt model no engine serves) and any 4xx with their status and
code. An ingress with no engine known answers 503 while kvselect is down.
A selection whose answer was lost may have booked a load that no free
releases: the node's request expiry does. And an ingress that registers
its workers starts even while kvselect is down: its first renewal
kvselect answers registers them.

Ray is not needed to import this module: the request handling is in
CompletionRouter and LeaseKeeper, plain asyncio classes the tests drive
against a real kvselect node and a fake engine. KvselectIngress and app
exist only where ray.serve can be imported.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import sys
import uuid
from typing import (Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Dict, List, NamedTuple, Optional,
                    Sequence, Tuple, TypeVar)
from urllib.parse import urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kvselect import AsyncClient, KvselectError, TransportError, wire  # noqa: E402

try:
    from ray import serve
except ImportError:  # Ray is optional: the handling logic below runs without it
    serve = None

log = logging.getLogger("kvselect.ray_serve_ingress")

T = TypeVar("T")

# vLLM's OpenAI server pins a request to a data-parallel rank by this header.
DP_RANK_HEADER = "X-data-parallel-rank"


class EngineError(Exception):
    """The engine refused the request or broke off its stream."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"engine answered {status}: {message}")
        self.status = status


# The kvselect answers a router fails open on: the node sees no schedulable
# worker for the model (its engines' registrations or KV events are down,
# not the engines). A load-shedding answer (overloaded: every worker busy)
# is not one: sending the request anyway would defeat the threshold. Nor
# is unknown_partition (a misspelt model, which no engine serves) or a
# 4xx (the request's fault).
FAIL_OPEN_CODES = frozenset({wire.CODE_NOT_READY})

# How long a refresh of the known engines may take: it runs in the
# background, off the request path.
REFRESH_TIMEOUT = 5.0

# The model_name and tenant_id of a worker registered without them, and
# the tenant_id a selection without one selects in.
DEFAULT_SCOPE = "default"

Engine = Tuple[str, int]  # a worker's endpoint and one of its global dp ranks


def engines_of(workers: Sequence[Dict[str, Any]]) -> List[Engine]:
    """The engines of worker records (register_worker arguments or a
    workers() answer): one per global dp rank of each worker that has an
    endpoint, in the order given, without repeats."""
    out: Dict[Engine, None] = {}  # ordered, without repeats
    for w in workers:
        endpoint = (w.get("endpoint") or "").rstrip("/")
        if endpoint:
            start = int(w.get("data_parallel_start_rank") or 0)
            out.update(((endpoint, rank), None) for rank in range(start, start + int(w.get("data_parallel_size") or 1)))
    return list(out)


class KnownEngines:
    """The engines a router fails open to, taken round-robin: the fixed
    ones (the workers the ingress registers itself) and the listed ones
    (the last successful workers(model_name=...) answer). Bounded: each
    listing replaces the previous one, nothing accumulates."""

    def __init__(self, fixed: Sequence[Engine] = ()) -> None:
        self._fixed = list(fixed)
        self._all = list(self._fixed)
        self._next = 0

    def set_listed(self, listed: Sequence[Engine]) -> None:
        # Sorted: a listing's order may change from one to the next, and
        # the turn must not (it would send two requests to one engine).
        self._all = self._fixed + sorted(set(listed) - set(self._fixed))

    @property
    def all(self) -> List[Engine]:
        return list(self._all)

    def pick(self) -> Optional[Engine]:
        """The next engine in turn, or None when none is known."""
        if not self._all:
            return None
        engine = self._all[self._next % len(self._all)]
        self._next += 1
        return engine


class Route(NamedTuple):
    """Where a request goes: kvselect's choice (booked: its load is
    booked under the request's id, to be reported), or an engine the
    router picked itself while kvselect did not answer (not booked)."""

    endpoint: str
    dp_rank: int
    booked: bool


def kvselect_down(e: BaseException) -> bool:
    """Whether e means kvselect is out of service for the request: no
    answer within the selection's time (TransportError, a timeout), or
    503 not_ready."""
    if isinstance(e, KvselectError):
        return e.code in FAIL_OPEN_CODES
    return isinstance(e, (TransportError, asyncio.TimeoutError))


class CompletionRouter:
    """Routes one OpenAI completion request at a time (many concurrently)
    through kvselect to an engine, and keeps kvselect's load accounting
    true to the request's life.

    It fails open: when kvselect does not answer within select_timeout
    seconds, or answers not_ready, the request goes to the next of the
    known engines in turn (workers: the register_worker arguments of the
    workers the ingress registers itself; and, once start() ran, what
    workers(model_name=...) listed last, every refresh_every seconds),
    without a booking and so without reports. Every other refusal, and an
    outage with no engine known, is raised to the caller."""

    def __init__(self, kv: AsyncClient, model_name: str, *, tenant_id: Optional[str] = None,
                 tokenize: Optional[Callable[[Any], List[int]]] = None, engine_timeout: float = 600.0,
                 engine_ssl: Optional[ssl.SSLContext] = None, select_timeout: float = 0.5,
                 workers: Sequence[Dict[str, Any]] = (), refresh_every: float = 10.0) -> None:
        if not select_timeout > 0:
            raise ValueError(f"select_timeout must be a positive number of seconds, not {select_timeout!r}")
        self.kv = kv
        self.model_name = model_name
        self.tenant_id = tenant_id
        self.tokenize = tokenize
        self.engine_timeout = engine_timeout
        self.engine_ssl = engine_ssl
        self.select_timeout = select_timeout
        self.refresh_every = refresh_every
        # Only the workers this router's selections would choose from.
        self.engines = KnownEngines(engines_of(
            [w for w in workers if (w.get("model_name") or DEFAULT_SCOPE) == model_name
             and (w.get("tenant_id") or DEFAULT_SCOPE) == (tenant_id or DEFAULT_SCOPE)]))
        self.failing_open = False  # since the last selection kvselect did not answer
        self._refresher: Optional[asyncio.Task] = None

    async def start(self) -> None:
        """Starts refreshing the known engines from kvselect's catalog,
        every refresh_every seconds (the first right away)."""
        if self._refresher is None:
            self._refresher = asyncio.ensure_future(self._refresh_loop())

    async def stop(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            try:
                await self._refresher
            except asyncio.CancelledError:
                pass
            self._refresher = None

    async def refresh_engines(self) -> bool:
        """Lists the model's workers on kvselect and makes their engines
        the listed known engines; on failure keeps the last listing."""
        try:
            workers = await self.kv.workers(model_name=self.model_name, tenant_id=self.tenant_id or DEFAULT_SCOPE,
                                            timeout=REFRESH_TIMEOUT)
        except TransportError as e:
            log.debug("listing the workers: %s", e)  # an outage: the selections tell it
            return False
        except KvselectError as e:
            log.warning("listing the workers: %s", e)
            return False
        self.engines.set_listed(engines_of(workers))
        return True

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await self.refresh_engines()
            except Exception:  # a listing it cannot read: keep the last one, and the loop
                log.exception("listing the workers")
            await asyncio.sleep(self.refresh_every)

    def prompt_tokens(self, body: Dict[str, Any]) -> List[int]:
        """The request's prompt as token ids: a "prompt" of ints as is, or
        whatever the tokenizer makes of "prompt" or "messages"."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return prompt
        if self.tokenize is None:
            raise ValueError("the prompt must be token ids (a list of ints) unless the router has a tokenizer")
        return list(self.tokenize(prompt if prompt is not None else body.get("messages")))

    async def book(self, tokens: List[int], request_id: str) -> Dict[str, Any]:
        """select_and_reserve with the request's id, within select_timeout
        seconds in all. Its answer may be lost once it was sent; the same
        id and prompt again (while time is left) is then safe (the node
        answers with the booking it made, it never books twice)."""
        ask = dict(model_name=self.model_name, tenant_id=self.tenant_id, token_ids=tokens, reservation_id=request_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.select_timeout
        try:
            return await self.kv.select_and_reserve(**ask, timeout=self.select_timeout)
        except TransportError as e:
            left = deadline - loop.time()
            if not e.sent or left <= 0:
                raise
            # Debug: in an outage every request gets here (failing open
            # is logged once).
            log.debug("select_and_reserve %s: %s; asking again with the same id", request_id, e)
            return await self.kv.select_and_reserve(**ask, timeout=left)

    async def route(self, tokens: List[int], request_id: str) -> Route:
        """kvselect's booked choice, or, when kvselect is down (no answer
        in time, or not_ready), the next known engine, unbooked. Raises
        kvselect's refusal otherwise, or its outage when no engine is
        known."""
        try:
            sel = await self.book(tokens, request_id)
        except (KvselectError, TransportError, asyncio.TimeoutError) as e:
            if not kvselect_down(e):
                self._kvselect_answers()
                raise
            engine = self.engines.pick()
            if not self.failing_open:
                # Once per outage, not per request.
                self.failing_open = True
                if engine is None:
                    log.warning("kvselect is unavailable (%s) and no engine is known: "
                                "refusing requests until it answers", e)
                else:
                    n = len(self.engines.all)
                    log.warning("kvselect is unavailable (%s): failing open, round-robin over %d engine%s, "
                                "without bookings", e, n, "" if n == 1 else "s")
            if engine is None:
                raise
            return Route(engine[0], engine[1], booked=False)
        self._kvselect_answers()
        return Route(sel["endpoint"], int(sel["dp_rank"]), booked=True)

    def _kvselect_answers(self) -> None:
        if self.failing_open:
            self.failing_open = False
            log.info("kvselect answers again: selecting through it")

    async def stream(self, body: Dict[str, Any], request_id: Optional[str] = None) -> AsyncIterator[bytes]:
        """The engine's server-sent events for the request, as they come.
        Raises before the first event when kvselect or the engine refuse
        it; a booking is freed however the stream ends."""
        tokens = self.prompt_tokens(body)
        rid = request_id or f"serve-{uuid.uuid4().hex}"
        route = await self.route(tokens, rid)
        events: Optional[AsyncGenerator[bytes, None]] = None
        try:
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            url = route.endpoint.rstrip("/") + path
            headers = {DP_RANK_HEADER: str(route.dp_rank), "X-Request-Id": rid}
            first_token = False
            events = _sse_events(url, {**body, "stream": True}, headers, self.engine_timeout, self.engine_ssl)
            while True:
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                except (OSError, EOFError, asyncio.TimeoutError, ValueError) as e:
                    raise EngineError(502, f"{url}: {e!r}") from e
                yield event
                if not first_token and _carries_output(event):
                    first_token = True
                    if route.booked:
                        await self._prefill_complete(rid)
        finally:
            if events is not None:
                await events.aclose()
            if route.booked:
                # Shielded: a cancelled request still frees its booking.
                await asyncio.shield(self._free(rid))

    async def _prefill_complete(self, rid: str) -> None:
        try:
            await self.kv.prefill_complete(rid, timeout=10)
        except (KvselectError, TransportError) as e:
            # The request goes on; the booking keeps its prefill load
            # until it is freed.
            log.warning("prefill_complete %s: %s", rid, e)

    async def _free(self, rid: str) -> None:
        try:
            await self.kv.free(rid, timeout=10)
        except KvselectError as e:
            if e.code != wire.CODE_NOT_FOUND:  # not_found: already gone (its worker was removed)
                log.warning("free %s: %s", rid, e)
        except TransportError as e:
            # The node is unreachable; its request expiry
            # (DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS) will free it.
            log.warning("free %s: %s", rid, e)


class LeaseKeeper:
    """Registers workers with a lease and renews it every renew_every
    seconds (a third of the TTL by default) until stopped; a worker whose
    lease lapsed anyway (failed with not_found) is registered again.
    Stopping only stops renewing: other replicas may still serve the
    workers, and a lease nobody renews lapses by itself.

    A kvselect that does not answer at the start (TransportError, after
    the client's retry_timeout) does not stop the start: the ingress fails
    open meanwhile, and the first renewal it answers registers the
    workers (not_found). Any other refusal (a bad worker, a wrong token)
    is raised."""

    def __init__(self, kv: AsyncClient, workers: Sequence[Dict[str, Any]], lease_ttl_s: int = 30,
                 renew_every: Optional[float] = None) -> None:
        self.kv = kv
        self.workers = {int(w["worker_id"]): {k: v for k, v in w.items() if k != "worker_id"} for w in workers}
        self.lease_ttl_s = lease_ttl_s
        self.renew_every = renew_every if renew_every is not None else lease_ttl_s / 3
        self.renewals = 0
        self._task: Optional[asyncio.Task] = None

    async def start(self) -> None:
        # At once: a kvselect that does not answer costs one retry_timeout,
        # not one per worker.
        results = await asyncio.gather(*(self._register(wid) for wid in self.workers), return_exceptions=True)
        for wid, r in zip(self.workers, results):
            if isinstance(r, TransportError):
                log.warning("registering worker %d: %s; the renewals will register it once kvselect answers", wid, r)
            elif isinstance(r, BaseException):
                raise r
        self._task = asyncio.ensure_future(self._renew())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _register(self, wid: int) -> None:
        await self.kv.register_worker(wid, lease_ttl_s=self.lease_ttl_s, **self.workers[wid])

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.renew_every)
            try:
                ans = await self.kv.keep_alive_many(list(self.workers), timeout=self.renew_every)
                for failed in ans.get("failed") or []:
                    if failed.get("code") == wire.CODE_NOT_FOUND:
                        await self._register(int(failed["worker_id"]))
                self.renewals += 1
            except (KvselectError, TransportError) as e:
                log.warning("renewing the leases: %s", e)


def _carries_output(event: bytes) -> bool:
    """Whether a server-sent event carries the first output (a token, or
    the end of a completion that has none): prefill is done."""
    for line in event.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return True
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if choice.get("text") or delta.get("content") or choice.get("finish_reason"):
                return True
    return False


async def _sse_events(url: str, body: Dict[str, Any], headers: Dict[str, str], timeout: float,
                      ctx: Optional[ssl.SSLContext]) -> AsyncGenerator[bytes, None]:
    """POSTs body to url and yields each server-sent event (the bytes up to
    and including its blank line) as it arrives. Standard library only,
    like the client; a deployment may as well use httpx or aiohttp."""
    u = urlsplit(url)
    https = u.scheme == "https"
    port = u.port or (443 if https else 80)
    reader, writer = await _within(asyncio.open_connection(
        u.hostname, port, ssl=(ctx or True) if https else None), timeout)
    try:
        raw = json.dumps(body).encode()
        head = [f"POST {u.path or '/'} HTTP/1.1", f"Host: {u.netloc}", "Content-Type: application/json",
                "Accept: text/event-stream", f"Content-Length: {len(raw)}", "Connection: close"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + raw)
        await writer.drain()
        status, chunked = await _within(_read_head(reader), timeout)
        pending = b""
        async for data in _body(reader, chunked, timeout):
            if status != 200:
                pending += data
                continue
            pending += data.replace(b"\r\n", b"\n")
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                yield event + b"\n\n"
        if status != 200:
            raise EngineError(status, pending.decode("utf-8", "replace")[:500])
    finally:
        writer.close()


async def _within(work: Awaitable[T], timeout: float) -> T:
    """work's result, or asyncio.TimeoutError after timeout seconds.
    asyncio.wait_for would do, but before Python 3.12 it can swallow the
    cancellation of a request whose read just completed, and the request
    would go on after Serve cancelled it."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise asyncio.TimeoutError()
    return task.result()


async def _read_head(reader: asyncio.StreamReader) -> Tuple[int, bool]:
    status = int((await reader.readuntil(b"\r\n")).split(b" ", 2)[1])
    chunked = False
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            return status, chunked
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True


async def _body(reader: asyncio.StreamReader, chunked: bool, timeout: float) -> AsyncIterator[bytes]:
    """The body's bytes as they come: chunk by chunk, or until the engine
    closes the connection (we asked it to)."""
    while True:
        if chunked:
            size = int((await _within(reader.readuntil(b"\r\n"), timeout)).split(b";")[0], 16)
            if size == 0:
                return
            data = await _within(reader.readexactly(size + 2), timeout)
            yield data[:-2]
        else:
            data = await _within(reader.read(65536), timeout)
            if not data:
                return
            yield data


def error_answer(e: Exception) -> Tuple[int, Dict[str, str], Dict[str, Any]]:
    """The ingress's answer (status, headers, JSON body) to a request
    refused before its first event: kvselect's refusal passed on with its
    status, code and Retry-After (overloaded: a 503 to retry later;
    unknown_partition: a 503 no retry mends; a 4xx: the request's fault);
    503 when kvselect did not answer and no engine is known to fail open
    to; 502 when the engine failed."""
    if isinstance(e, KvselectError):
        return e.status, ({"Retry-After": e.retry_after} if e.retry_after else {}), {"error": e.message, "code": e.code}
    if isinstance(e, (TransportError, asyncio.TimeoutError)):
        return 503, {"Retry-After": "1"}, {"error": f"kvselect is unavailable and no engine is known: {e!r}",
                                            "code": "unavailable"}
    if isinstance(e, EngineError):
        return 502, {}, {"error": str(e)}
    raise TypeError(f"no answer for {e!r}") from e


if serve is not None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse

    @serve.deployment(max_ongoing_requests=256)
    class KvselectIngress:
        """The Ray Serve ingress: POST an OpenAI completion or chat request
        (token-id prompt); the answer is the engine's event stream."""

        def __init__(self, kvselect: str, model_name: str, token_file: Optional[str] = None,
                     ca_file: Optional[str] = None, workers: Optional[List[Dict[str, Any]]] = None,
                     lease_ttl_s: int = 30, select_timeout: float = 0.5) -> None:
            self.kv = AsyncClient(kvselect, token_file=token_file, ca_file=ca_file)
            # The workers it registers are engines it can fail open to.
            self.router = CompletionRouter(self.kv, model_name, select_timeout=select_timeout, workers=workers or ())
            self.leases = LeaseKeeper(self.kv, workers, lease_ttl_s) if workers else None
            self._started: Optional[asyncio.Task] = None

        async def _ensure_started(self) -> None:
            if self._started is None:
                self._started = asyncio.ensure_future(self._start())
            await asyncio.shield(self._started)

        async def _start(self) -> None:
            await self.router.start()  # lists the engines to fail open to, and keeps the list fresh
            if self.leases is not None:
                await self.leases.start()

        async def check_health(self) -> None:
            """Serve calls it every few seconds from the start: the workers
            get registered before the first request comes."""
            await self._ensure_started()

        async def __call__(self, request: Request) -> Response:
            await self._ensure_started()
            events = self.router.stream(await request.json(), request.headers.get("x-request-id"))
            try:
                first = await events.__anext__()
            except (KvselectError, TransportError, asyncio.TimeoutError, EngineError) as e:
                # A kvselect outage does not get here while an engine is
                # known: the router failed open.
                status, headers, body = error_answer(e)
                return JSONResponse(body, status_code=status, headers=headers)
            except StopAsyncIteration:
                return Response(status_code=204)

            async def relay() -> AsyncIterator[bytes]:
                yield first
                async for event in events:
                    yield event

            return StreamingResponse(relay(), media_type="text/event-stream")

        async def __del__(self) -> None:
            # Serve awaits an async __del__ when it stops a replica.
            await self.router.stop()
            if self.leases is not None:
                await self.leases.stop()
            await self.kv.aclose()

    def app(args: Dict[str, str]) -> "serve.Application":
        """The application `serve run ray_serve_ingress:app key=value ...`
        builds: kvselect (node URLs), model, and optionally token_file,
        ca_file, workers (a JSON list of register_worker arguments, each
        with its worker_id), lease_ttl_s and select_timeout (seconds a
        selection may take before the request fails open)."""
        workers = json.loads(args["workers"]) if args.get("workers") else None
        return KvselectIngress.bind(args.get("kvselect", "http://127.0.0.1:8092"), args.get("model", "llama"),
                                    args.get("token_file"), args.get("ca_file"), workers,
                                    int(args.get("lease_ttl_s", 30)), float(args.get("select_timeout", 0.5)))


if __name__ == "__main__":
    if serve is None:
        sys.exit("Ray Serve is not installed (pip install 'ray[serve]'); then: "
                 "serve run ray_serve_ingress:app kvselect=http://127.0.0.1:8092 model=llama")
    serve.run(app({k: v for k, _, v in (a.partition("=") for a in sys.argv[1:])}), blocking=True)
