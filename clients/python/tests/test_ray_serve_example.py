"""The Ray Serve ingress example without Ray: its request handling
(CompletionRouter) and lease keeping (LeaseKeeper) against a real node and
a fake vLLM engine that streams server-sent events."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator, List

import pytest

from kvselect import AsyncClient, KvselectError, wire

from conftest import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ray_serve_ingress",
                                              os.path.join(HERE, "..", "examples", "ray_serve_ingress.py"))
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

HOLD = 10.0  # how long the engine holds a stream for the test (the failure mode)
PROMPT = list(range(100, 140))


def event(text: str, finish: str = None) -> bytes:
    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


class FakeEngine:
    """vLLM's OpenAI server as the ingress sees it: POST /v1/completions
    streams events chunk by chunk. mode "ok" sends the first event, waits
    for release, then the rest; "hold" never sends more than the first;
    "fail" answers 500."""

    EVENTS = [event("Hello"), event(" world"), event("!", "length"), b"data: [DONE]\n\n"]

    def __init__(self) -> None:
        self.mode = "ok"
        self.release = threading.Event()
        self.got: List[Dict[str, object]] = []
        engine = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.got.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if engine.mode == "fail":
                    raw = b'{"error": "out of memory"}'
                    self.send_response(500)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    self.chunk(FakeEngine.EVENTS[0])
                    released = engine.release.wait(HOLD) and engine.mode == "ok"
                    for ev in FakeEngine.EVENTS[1:] if released else [b'data: {"error": "held"}\n\n']:
                        self.chunk(ev)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the ingress went away
                    pass
                self.close_connection = True

            def chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    e = FakeEngine()
    yield e
    e.close()


async def until(cond, what: str) -> None:
    """Awaits until the coroutine function cond returns true (bounded)."""
    for _ in range(1000):
        if await cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


async def with_workers(node: str, engine: FakeEngine, body):
    """Runs body(kv, router) with two workers at the fake engine, registered
    and kept alive by a LeaseKeeper."""
    async with AsyncClient(node) as kv:
        workers = [dict(worker_id=w, model_name="llama", endpoint=engine.url, block_size=16,
                        kv_events_endpoint=f"tcp://127.0.0.1:{free_port()}") for w in (1, 2)]
        leases = example.LeaseKeeper(kv, workers, lease_ttl_s=30, renew_every=0.02)
        await leases.start()
        try:
            async def renewed():
                return leases.renewals >= 2
            await until(renewed, "the leases were renewed twice")
            assert {w["worker_id"]: w["lease_ttl_s"] for w in await kv.workers(model_name="llama")} == {1: 30, 2: 30}
            return await body(kv, example.CompletionRouter(kv, "llama"))
        finally:
            await leases.stop()


async def idle(kv: AsyncClient) -> bool:
    return all(r["active_requests"] == 0 for p in await kv.loads(model_name="llama") for r in p["loads"])


async def gone(kv: AsyncClient, rid: str) -> bool:
    try:
        await kv.reservation(rid)
    except KvselectError as e:
        return e.code == wire.CODE_NOT_FOUND
    return False


def test_a_request_is_booked_streamed_reported_and_freed(node, engine):
    async def body(kv, router):
        events = router.stream({"model": "llama", "prompt": PROMPT, "max_tokens": 3}, "req-1")
        first = await events.__anext__()
        booked = await kv.reservation("req-1")
        assert not booked["prefill_complete"]
        # The next event is held by the engine: the first token already
        # went out, so the router reports prefill complete meanwhile.
        rest = asyncio.ensure_future(_drain(events))

        async def prefilled():
            return (await kv.reservation("req-1"))["prefill_complete"]
        await until(prefilled, "the router reported the first token")
        engine.release.set()
        out = [first] + await rest
        assert await gone(kv, "req-1") and await idle(kv)
        return booked, out

    booked, out = asyncio.run(with_workers(node, engine, body))
    assert out == FakeEngine.EVENTS
    [got] = engine.got
    assert got["path"] == "/v1/completions"
    assert got["body"] == {"model": "llama", "prompt": PROMPT, "max_tokens": 3, "stream": True}
    assert got["headers"][example.DP_RANK_HEADER] == str(booked["dp_rank"])
    assert got["headers"]["X-Request-Id"] == "req-1"


async def _drain(events) -> list:
    return [e async for e in events]


def test_an_engine_error_frees_the_booking(node, engine):
    engine.mode = "fail"

    async def body(kv, router):
        with pytest.raises(example.EngineError) as e:
            await router.stream({"prompt": PROMPT}, "req-2").__anext__()
        assert e.value.status == 500 and "out of memory" in str(e.value)
        return await gone(kv, "req-2") and await idle(kv)

    assert asyncio.run(with_workers(node, engine, body)) is True


def test_a_cancelled_request_frees_the_booking(node, engine):
    engine.mode = "hold"

    async def body(kv, router):
        events = router.stream({"prompt": PROMPT}, "req-3")
        first = await events.__anext__()
        rest = asyncio.ensure_future(_drain(events))

        async def prefilled():
            return (await kv.reservation("req-3"))["prefill_complete"]
        await until(prefilled, "the first token was reported")
        rest.cancel()  # the caller went away: Serve cancels the request
        with pytest.raises(asyncio.CancelledError):
            await rest
        return first, await gone(kv, "req-3") and await idle(kv)

    first, freed = asyncio.run(with_workers(node, engine, body))
    assert first == FakeEngine.EVENTS[0] and freed


def test_no_worker_refuses_before_the_engine(node, engine):
    async def main():
        async with AsyncClient(node) as kv:
            with pytest.raises(KvselectError) as e:
                await example.CompletionRouter(kv, "llama").stream({"prompt": PROMPT}).__anext__()
            return e.value.code

    # No worker was ever registered for "llama": a misspelt model, not an outage.
    assert asyncio.run(main()) == wire.CODE_UNKNOWN_PARTITION and not engine.got


@pytest.mark.parametrize("raw,carries", [
    (event("Hi"), True),
    (event("", "stop"), True),
    (event(""), False),
    (b'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n', False),
    (b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\n\n', True),
    (b"data: [DONE]\n\n", True),
    (b": keep-alive\n\n", False),
])
def test_first_output(raw, carries):
    assert example._carries_output(raw) is carries


def test_importable_without_ray():
    if example.serve is not None:
        pytest.skip("Ray Serve is installed here")
    assert not hasattr(example, "KvselectIngress") and not hasattr(example, "app")
