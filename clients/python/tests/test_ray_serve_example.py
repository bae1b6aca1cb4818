"""The Ray Serve ingress example without Ray: its request handling
(CompletionRouter) and lease keeping (LeaseKeeper) against a real node and
a fake vLLM engine that streams server-sent events."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator, List, Optional, Set, Tuple
from urllib.parse import urlsplit

import pytest

from kvselect import AsyncClient, KvselectError, TransportError, wire

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


@pytest.fixture
def engine2() -> Iterator[FakeEngine]:
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


async def with_workers(node: str, engine: FakeEngine, body, fail_open: bool = False):
    """Runs body(kv, router) with two workers at the fake engine, registered
    and kept alive by a LeaseKeeper; with fail_open, the router knows them
    as the engines to fail open to."""
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
            router = example.CompletionRouter(kv, "llama", workers=workers) if fail_open else \
                example.CompletionRouter(kv, "llama")
            return await body(kv, router)
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


# Failing open: kvselect down (no answer in time, or not_ready) sends the
# request to a known engine in turn, unbooked; its refusals are passed on.


def worker_args(wid: int, engine: FakeEngine, **more: object) -> dict:
    return dict(worker_id=wid, model_name="llama", endpoint=engine.url, block_size=16,
                kv_events_endpoint=f"tcp://127.0.0.1:{free_port()}", **more)


class Reports:
    """Records every prefill_complete and free the router sends through kv
    (sent), and those kvselect accepted (accepted: the request was booked);
    they still go to kvselect."""

    def __init__(self, kv: AsyncClient) -> None:
        self.sent: List[Tuple[str, str]] = []
        self.accepted: List[Tuple[str, str]] = []
        for name in ("prefill_complete", "free"):
            setattr(kv, name, self._spy(name, getattr(kv, name)))

    def _spy(self, name, real):
        async def report(rid, **kw):
            self.sent.append((name, rid))
            answer = await real(rid, **kw)
            self.accepted.append((name, rid))
            return answer
        return report


def routed(*engines: FakeEngine) -> List[Tuple[str, str, str]]:
    """(request id, engine url, dp rank header) of every request the
    engines got, in request id order."""
    got = [(g["headers"]["X-Request-Id"], e.url, g["headers"][example.DP_RANK_HEADER]) for e in engines for g in e.got]
    return sorted(got)


def outage_logs(caplog) -> List[Tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == example.log.name and "kvselect" in r.getMessage()
            and ("unavailable" in r.getMessage() or "answers again" in r.getMessage())]


class Switch:
    """A TCP proxy on a fixed loopback port to a kvselect node, on the
    test's event loop: off() closes the port (connections are refused) and
    cuts the connections it carries; on() opens it again. kvselect going
    down and coming back, at the address the client knows."""

    def __init__(self, target: str) -> None:
        u = urlsplit(target)
        self.target = (u.hostname, u.port)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: Optional[asyncio.AbstractServer] = None
        self.conns: Set[asyncio.StreamWriter] = set()

    async def on(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def off(self) -> None:
        if self.server is None:
            return
        self.server.close()
        conns, self.conns = self.conns, set()
        for w in conns:
            w.close()
        await self.server.wait_closed()
        self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.conns.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        if writer not in self.conns:  # off() came while connecting to the node: cut
            up_writer.close()
            writer.close()
            return
        self.conns.add(up_writer)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self.conns -= {writer, up_writer}


async def complete(router, rid: str, body: Optional[dict] = None) -> list:
    return await _drain(router.stream(body or {"model": "llama", "prompt": PROMPT, "max_tokens": 3}, rid))


def test_unreachable_kvselect_fails_open_round_robin_without_reports(dead_addr, engine, engine2, caplog):
    caplog.set_level(logging.INFO, logger=example.log.name)
    engine.release.set()
    engine2.release.set()
    # The workers this ingress registers: worker 1 with two dp ranks at
    # one engine, worker 2 at another; and two its selections would not
    # choose (another model, another tenant).
    workers = [worker_args(1, engine, data_parallel_size=2), worker_args(2, engine2),
               dict(worker_args(3, engine2, data_parallel_start_rank=5), model_name="other"),
               worker_args(4, engine2, data_parallel_start_rank=6, tenant_id="other")]

    async def main():
        async with AsyncClient(dead_addr) as kv:
            reports = Reports(kv)
            router = example.CompletionRouter(kv, "llama", workers=workers, select_timeout=0.5)
            outs = [await complete(router, f"req-{i}") for i in range(6)]
            return outs, reports.sent, router.failing_open

    outs, reports, failing_open = asyncio.run(main())
    assert outs == [FakeEngine.EVENTS] * 6
    assert routed(engine, engine2) == [
        ("req-0", engine.url, "0"), ("req-1", engine.url, "1"), ("req-2", engine2.url, "0"),
        ("req-3", engine.url, "0"), ("req-4", engine.url, "1"), ("req-5", engine2.url, "0")]
    assert reports == []  # nothing was booked: nothing to report
    assert failing_open
    [(level, msg)] = outage_logs(caplog)  # once for the outage, not per request
    assert level == logging.WARNING and "failing open" in msg and "3 engines" in msg


def test_a_silent_kvselect_costs_the_selection_timeout(engine):
    engine.release.set()
    # A port that takes connections (the kernel's backlog) and never
    # answers: each selection waits out its timeout.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)

        async def main():
            async with AsyncClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=30) as kv:
                reports = Reports(kv)
                router = example.CompletionRouter(kv, "llama", workers=[worker_args(1, engine)], select_timeout=0.3)
                start = time.monotonic()
                out = await complete(router, "req-silent")
                return out, time.monotonic() - start, reports.sent

        out, took, reports = asyncio.run(main())
    assert out == FakeEngine.EVENTS and reports == []
    assert routed(engine) == [("req-silent", engine.url, "0")]
    # Bounded by select_timeout (0.3 s), not the client's 30 s; the upper
    # bound is loose, for a loaded machine.
    assert 0.3 <= took < 5


def test_not_ready_fails_open(node, engine):
    engine.release.set()
    workers = [worker_args(1, engine), worker_args(2, engine)]

    async def main():
        async with AsyncClient(node) as kv:
            for w in workers:
                await kv.register_worker(**w)
            for w in workers:
                await kv.delete_worker(w["worker_id"])
            # The partition held workers and has none now: not_ready, an
            # outage (not the misspelt model unknown_partition is).
            with pytest.raises(KvselectError) as e:
                await kv.select(model_name="llama", token_ids=PROMPT)
            assert e.value.code == wire.CODE_NOT_READY
            reports = Reports(kv)
            router = example.CompletionRouter(kv, "llama", workers=workers)
            out = await complete(router, "req-nr")
            return out, reports.sent, await gone(kv, "req-nr")

    out, reports, not_booked = asyncio.run(main())
    assert out == FakeEngine.EVENTS and reports == [] and not_booked
    assert routed(engine) == [("req-nr", engine.url, "0")]


def test_overloaded_is_passed_on_not_failed_open(node, engine, caplog):
    caplog.set_level(logging.INFO, logger=example.log.name)

    async def body(kv, router):
        # Load shedding: a worker is busy past one prefill token; book one
        # prompt on each until kvselect sheds.
        await kv.set_busy_threshold("llama", active_prefill_tokens_threshold=1)
        booked = set()
        for i in range(2):
            booked.add((await kv.select_and_reserve(model_name="llama", token_ids=PROMPT,
                                                    reservation_id=f"load-{i}"))["worker_id"])
        assert booked == {1, 2}
        assert router.engines.all == [(engine.url, 0)]  # an engine to fail open to is known
        reports = Reports(kv)
        with pytest.raises(KvselectError) as e:
            await router.stream({"prompt": PROMPT}, "req-busy").__anext__()
        return e.value, reports.sent, router.failing_open

    err, reports, failing_open = asyncio.run(with_workers(node, engine, body, fail_open=True))
    assert err.code == wire.CODE_OVERLOADED and err.status == 503 and err.retry_after == "1"
    assert not engine.got and reports == [] and not failing_open and outage_logs(caplog) == []
    # The ingress answers with kvselect's 503 and its Retry-After.
    status, headers, answer = example.error_answer(err)
    assert (status, headers, answer["code"]) == (503, {"Retry-After": "1"}, wire.CODE_OVERLOADED)


def test_unknown_partition_is_passed_on_not_failed_open(node, engine, caplog):
    caplog.set_level(logging.INFO, logger=example.log.name)

    async def main():
        async with AsyncClient(node) as kv:
            # Engines are known (this ingress's workers), but the model
            # name is misspelt: no engine serves it, a retry mends nothing.
            router = example.CompletionRouter(kv, "lama", workers=[dict(worker_args(1, engine), model_name="lama")])
            assert router.engines.all == [(engine.url, 0)]
            with pytest.raises(KvselectError) as e:
                await router.stream({"prompt": PROMPT}, "req-typo").__anext__()
            return e.value, router.failing_open

    err, failing_open = asyncio.run(main())
    assert err.code == wire.CODE_UNKNOWN_PARTITION and err.status == 503 and err.retry_after is None
    assert not engine.got and not failing_open and outage_logs(caplog) == []
    assert example.error_answer(err)[:2] == (503, {})  # no Retry-After: nothing to retry


def test_a_client_error_is_passed_on_not_failed_open(node, engine):
    async def body(kv, router):
        await kv.select_and_reserve(model_name="llama", token_ids=PROMPT, reservation_id="req-dup")
        # The same id with another prompt: 409 conflict, the request's
        # fault, not an outage.
        with pytest.raises(KvselectError) as e:
            await router.stream({"prompt": PROMPT[:20]}, "req-dup").__anext__()
        return e.value, router.failing_open

    err, failing_open = asyncio.run(with_workers(node, engine, body, fail_open=True))
    assert (err.status, err.code) == (409, wire.CODE_CONFLICT) and not engine.got and not failing_open
    assert example.error_answer(err)[0] == 409


def test_failing_open_ends_when_kvselect_answers_again(node, engine, engine2, caplog):
    caplog.set_level(logging.INFO, logger=example.log.name)
    engine.release.set()
    engine2.release.set()
    workers = [worker_args(1, engine), worker_args(2, engine2)]

    async def main():
        switch = Switch(node)
        await switch.on()
        try:
            async with AsyncClient(node) as admin, AsyncClient(switch.url) as kv:
                for w in workers:  # registered by the engines' own launchers
                    await admin.register_worker(**w)
                reports = Reports(kv)
                # No workers of its own: it knows the engines from
                # kvselect's listing, refreshed in the background.
                router = example.CompletionRouter(kv, "llama", refresh_every=0.02)
                await router.start()
                try:
                    async def listed():
                        return len(router.engines.all) == 2
                    await until(listed, "the router listed the engines")
                    await complete(router, "req-a")  # through kvselect
                    await switch.off()  # kvselect goes down
                    await complete(router, "req-b")
                    await complete(router, "req-c")
                    down = (list(router.engines.all), router.failing_open)
                    await switch.on()  # and comes back
                    await complete(router, "req-d")
                    return reports, down, router.failing_open
                finally:
                    await router.stop()
        finally:
            await switch.off()

    reports, (engines, failing_open_while_down), failing_open = asyncio.run(main())
    assert sorted(engines) == sorted([(engine.url, 0), (engine2.url, 0)])  # the last listing stays
    got = dict((rid, (url, rank)) for rid, url, rank in routed(engine, engine2))
    assert [got["req-b"], got["req-c"]] in ([(engine.url, "0"), (engine2.url, "0")],
                                            [(engine2.url, "0"), (engine.url, "0")])  # in turn
    # Booked and reported while kvselect answered; neither while it did not.
    booked = [("prefill_complete", "req-a"), ("free", "req-a"), ("prefill_complete", "req-d"), ("free", "req-d")]
    assert reports.sent == booked and reports.accepted == booked
    assert failing_open_while_down and not failing_open
    logs = outage_logs(caplog)
    assert [level for level, _ in logs] == [logging.WARNING, logging.INFO]
    assert "failing open" in logs[0][1] and "answers again" in logs[1][1]


def test_the_leases_start_while_kvselect_is_down(node, engine):
    async def main():
        switch = Switch(node)  # off: nothing listens at its port yet
        try:
            async with AsyncClient(node) as admin, AsyncClient(switch.url, retry_timeout=0.2) as kv:
                leases = example.LeaseKeeper(kv, [worker_args(1, engine)], lease_ttl_s=30, renew_every=0.02)
                await leases.start()  # the ingress starts (and fails open) anyway
                try:
                    await switch.on()

                    async def registered():
                        return [w["worker_id"] for w in await admin.workers(model_name="llama")] == [1]
                    await until(registered, "a renewal registered the worker")
                finally:
                    await leases.stop()
        finally:
            await switch.off()

    asyncio.run(main())
