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
    serve run ray_serve_ingress:app kvselect=http://127.0.0.1:8092 model=llama

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
from typing import (Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Sequence,
                    Tuple, TypeVar)
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


class CompletionRouter:
    """Routes one OpenAI completion request at a time (many concurrently)
    through kvselect to an engine, and keeps kvselect's load accounting
    true to the request's life."""

    def __init__(self, kv: AsyncClient, model_name: str, *, tenant_id: Optional[str] = None,
                 tokenize: Optional[Callable[[Any], List[int]]] = None, engine_timeout: float = 600.0,
                 engine_ssl: Optional[ssl.SSLContext] = None) -> None:
        self.kv = kv
        self.model_name = model_name
        self.tenant_id = tenant_id
        self.tokenize = tokenize
        self.engine_timeout = engine_timeout
        self.engine_ssl = engine_ssl

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
        """select_and_reserve with the request's id. Its answer may be lost
        once it was sent; the same id and prompt again is then safe (the
        node answers with the booking it made, it never books twice)."""
        ask = dict(model_name=self.model_name, tenant_id=self.tenant_id, token_ids=tokens, reservation_id=request_id)
        try:
            return await self.kv.select_and_reserve(**ask)
        except TransportError as e:
            if not e.sent:
                raise
            log.warning("select_and_reserve %s: %s; asking again with the same id", request_id, e)
            return await self.kv.select_and_reserve(**ask)

    async def stream(self, body: Dict[str, Any], request_id: Optional[str] = None) -> AsyncIterator[bytes]:
        """The engine's server-sent events for the request, as they come.
        Raises before the first event when kvselect or the engine refuse
        it; the booking is freed however the stream ends."""
        tokens = self.prompt_tokens(body)
        rid = request_id or f"serve-{uuid.uuid4().hex}"
        sel = await self.book(tokens, rid)
        events: Optional[AsyncGenerator[bytes, None]] = None
        try:
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            url = sel["endpoint"].rstrip("/") + path
            headers = {DP_RANK_HEADER: str(sel["dp_rank"]), "X-Request-Id": rid}
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
                    await self._prefill_complete(rid)
        finally:
            if events is not None:
                await events.aclose()
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
    workers, and a lease nobody renews lapses by itself."""

    def __init__(self, kv: AsyncClient, workers: Sequence[Dict[str, Any]], lease_ttl_s: int = 30,
                 renew_every: Optional[float] = None) -> None:
        self.kv = kv
        self.workers = {int(w["worker_id"]): {k: v for k, v in w.items() if k != "worker_id"} for w in workers}
        self.lease_ttl_s = lease_ttl_s
        self.renew_every = renew_every if renew_every is not None else lease_ttl_s / 3
        self.renewals = 0
        self._task: Optional[asyncio.Task] = None

    async def start(self) -> None:
        for wid in self.workers:
            await self._register(wid)
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


if serve is not None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse

    @serve.deployment(max_ongoing_requests=256)
    class KvselectIngress:
        """The Ray Serve ingress: POST an OpenAI completion or chat request
        (token-id prompt); the answer is the engine's event stream."""

        def __init__(self, kvselect: str, model_name: str, token_file: Optional[str] = None,
                     ca_file: Optional[str] = None, workers: Optional[List[Dict[str, Any]]] = None,
                     lease_ttl_s: int = 30) -> None:
            self.kv = AsyncClient(kvselect, token_file=token_file, ca_file=ca_file)
            self.router = CompletionRouter(self.kv, model_name)
            self.leases = LeaseKeeper(self.kv, workers, lease_ttl_s) if workers else None
            self._leases_started: Optional[asyncio.Task] = None

        async def _ensure_leases(self) -> None:
            if self.leases is not None and self._leases_started is None:
                self._leases_started = asyncio.ensure_future(self.leases.start())
            if self._leases_started is not None:
                await asyncio.shield(self._leases_started)

        async def check_health(self) -> None:
            """Serve calls it every few seconds from the start: the workers
            get registered before the first request comes."""
            await self._ensure_leases()

        async def __call__(self, request: Request) -> Response:
            await self._ensure_leases()
            events = self.router.stream(await request.json(), request.headers.get("x-request-id"))
            try:
                first = await events.__anext__()
            except KvselectError as e:  # overloaded (every rank busy), not_ready (no worker), unknown_partition (a misspelt model), ...
                return JSONResponse({"error": e.message, "code": e.code}, status_code=e.status)
            except EngineError as e:
                return JSONResponse({"error": str(e)}, status_code=502)
            except StopAsyncIteration:
                return Response(status_code=204)

            async def relay() -> AsyncIterator[bytes]:
                yield first
                async for event in events:
                    yield event

            return StreamingResponse(relay(), media_type="text/event-stream")

        async def __del__(self) -> None:
            # Serve awaits an async __del__ when it stops a replica.
            if self.leases is not None:
                await self.leases.stop()
            await self.kv.aclose()

    def app(args: Dict[str, str]) -> "serve.Application":
        """The application `serve run ray_serve_ingress:app key=value ...`
        builds: kvselect (node URLs), model, and optionally token_file,
        ca_file, workers (a JSON list of register_worker arguments, each
        with its worker_id) and lease_ttl_s."""
        workers = json.loads(args["workers"]) if args.get("workers") else None
        return KvselectIngress.bind(args.get("kvselect", "http://127.0.0.1:8092"), args.get("model", "llama"),
                                    args.get("token_file"), args.get("ca_file"), workers,
                                    int(args.get("lease_ttl_s", 30)))


if __name__ == "__main__":
    if serve is None:
        sys.exit("Ray Serve is not installed (pip install 'ray[serve]'); then: "
                 "serve run ray_serve_ingress:app kvselect=http://127.0.0.1:8092 model=llama")
    serve.run(app({k: v for k, _, v in (a.partition("=") for a in sys.argv[1:])}), blocking=True)
