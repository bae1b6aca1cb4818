"""What only the asyncio client has to prove: it never blocks the event
loop, serves many calls at once on a bounded pool of kept-alive
connections, gives up a cancelled call's connection, and mirrors Client
name for name. (Everything else runs in the shared tests, through the
Client fixture.)"""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

import kvselect
from kvselect import AsyncClient, Client, TransportError

from conftest import wait_for

GATE_TIMEOUT = 10.0  # how long a gated answer waits before giving up (the failure mode)


def ok(body: object, status: int = 200):
    return (status, {}, body)


def gated(gate: threading.Event, outcome: list, timeout: float = GATE_TIMEOUT):
    """An answer held until the test opens gate from the event loop; when
    it does not open within timeout, it answers 500 and records that."""
    def answer():
        opened = gate.wait(timeout)
        outcome.append(opened)
        return ok({"status": "ok"}) if opened else (500, {}, {"error": "the gate never opened", "code": "internal"})
    return answer


async def until(cond, what: str) -> None:
    """Yields to the loop until cond() holds (bounded)."""
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting until {what}")


async def loop_runs_while_call_waits(kv, fake, gate_timeout: float = GATE_TIMEOUT) -> list:
    """Starts a call the fake node holds, and from another coroutine opens
    the node's gate once the request has arrived: possible only if the
    loop keeps running while the call waits for its answer."""
    gate, outcome = threading.Event(), []
    fake.script("GET /health", gated(gate, outcome, gate_timeout))
    call = asyncio.ensure_future(kv.health())

    async def opener():
        await until(lambda: fake.requests("GET /health"), "the request reached the node")
        gate.set()

    results = await asyncio.gather(call, opener(), return_exceptions=True)
    return outcome + [results[0]]


def test_the_loop_is_never_blocked(fakes):
    fake = fakes()

    async def main():
        async with AsyncClient(fake.url) as kv:
            return await loop_runs_while_call_waits(kv, fake)

    opened, answer = asyncio.run(main())
    assert opened is True and answer == {"status": "ok"}


class BlockingInside(AsyncClient):
    """The design AsyncClient must not have: a blocking round trip inside
    a coroutine. The check above must catch it."""

    async def _round_trip(self, url, call):
        return Client._round_trip(self, url, call)  # type: ignore[arg-type]


def test_the_check_catches_a_blocking_client(fakes):
    fake = fakes()

    async def main():
        kv = BlockingInside(fake.url, timeout=GATE_TIMEOUT)
        return await loop_runs_while_call_waits(kv, fake, gate_timeout=0.5)

    opened, answer = asyncio.run(main())
    assert opened is False and isinstance(answer, kvselect.KvselectError)


@pytest.mark.parametrize("calls,max_connections", [(50, 64), (8, 4)])
def test_concurrent_calls_share_a_bounded_pool(fakes, calls, max_connections):
    """Each wave of answers is held until max_connections (or all the
    calls) are in flight at once: they complete only if the client sends
    that many concurrently, and the node never sees more connections than
    the bound, which the next round reuses."""
    fake = fakes()
    wave = min(calls, max_connections)
    barrier = threading.Barrier(wave, timeout=GATE_TIMEOUT)
    lock, in_flight, peak = threading.Lock(), [0], [0]

    def answer():
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            barrier.wait()
            return ok({"worker_id": 1})
        except threading.BrokenBarrierError:
            return (500, {}, {"error": "calls were not concurrent", "code": "internal"})
        finally:
            with lock:
                in_flight[0] -= 1

    fake.script("POST /select", answer)

    async def main():
        async with AsyncClient(fake.url, max_connections=max_connections, timeout=GATE_TIMEOUT + 5) as kv:
            first = await asyncio.gather(*(kv.select(token_ids=[i]) for i in range(calls)))
            second = await asyncio.gather(*(kv.select(token_ids=[i]) for i in range(calls)))
            return first + second

    got = asyncio.run(main())
    assert got == [{"worker_id": 1}] * (2 * calls)
    assert peak[0] == wave
    assert len({g["peer"] for g in fake.requests("POST /select")}) == wave  # connections kept alive and reused


def test_a_connection_the_node_closed_is_not_reused(fakes):
    """A booking is never sent twice, so a kept-alive connection the node
    has closed meanwhile must not be written to: the client dials
    again."""
    fake = fakes()
    fake.script("POST /select_and_reserve", ok({"reservation_id": "r1"}), ok({"reservation_id": "r2"}))

    async def main():
        async with AsyncClient(fake.url) as kv:
            await kv.select_and_reserve(token_ids=[1], reservation_id="r1")
            fake.drop_connections()
            [pool] = kv._pools.values()
            await until(lambda: pool.idle and pool.idle[0].reader.at_eof(), "the client saw the close")
            return await kv.select_and_reserve(token_ids=[1], reservation_id="r2")

    assert asyncio.run(main()) == {"reservation_id": "r2"}
    first, second = fake.requests("POST /select_and_reserve")
    assert first["peer"] != second["peer"]


def test_a_cancelled_call_gives_up_its_connection(fakes):
    """A call cancelled while it waits (Ray Serve cancels a request whose
    caller went away) closes its connection: a late answer can never be
    read as the next call's."""
    fake = fakes()
    gate, outcome = threading.Event(), []
    fake.script("POST /reservations/r1/prefill_complete", gated(gate, outcome))
    fake.script("DELETE /reservations/r1", ok({"reservation_id": "r1"}))

    async def main():
        async with AsyncClient(fake.url) as kv:
            call = asyncio.ensure_future(kv.prefill_complete("r1"))
            await until(lambda: fake.requests("POST /reservations/r1/prefill_complete"), "the request arrived")
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            gate.set()
            freed = await kv.free("r1")
            [pool] = kv._pools.values()
            return freed, len(pool.idle)

    assert asyncio.run(main()) == ({"reservation_id": "r1"}, 1)
    wait_for("the held answer was written", lambda: outcome == [True])
    late, free = fake.got
    assert late["peer"] != free["peer"]


def test_call_timeout_while_waiting_for_a_connection(fakes):
    """With every connection busy, a call waits for one within its own
    timeout, and fails having sent nothing."""
    fake = fakes()
    gate, outcome = threading.Event(), []
    fake.script("GET /health", gated(gate, outcome))
    fake.script("POST /reservations/r1/prefill_complete", ok({}))

    async def main():
        async with AsyncClient(fake.url, max_connections=1) as kv:
            busy = asyncio.ensure_future(kv.health())
            await until(lambda: fake.requests("GET /health"), "the first call holds the connection")
            with pytest.raises(TransportError) as e:
                await kv.prefill_complete("r1", timeout=0.05)
            gate.set()
            await busy
            return e.value

    err = asyncio.run(main())
    assert err.sent is False and not fake.requests("POST /reservations/r1/prefill_complete")


def test_last_response_is_per_task(fakes):
    a, b = fakes(), fakes()
    a.script("GET /health", (200, {"X-Kvselect-Served-By": "a"}, {}))
    b.script("GET /health", (200, {"X-Kvselect-Served-By": "b"}, {}))

    async def main():
        async with AsyncClient(a.url) as ka, AsyncClient(b.url) as kb:
            kv = ka

            async def one(node: str):
                client = ka if node == "a" else kb
                await client.health()
                return client.last_response.served_by

            got = await asyncio.gather(one("a"), one("b"))
            assert kv.last_response is None  # the calls ran in their own tasks
            await kv.health()
            return got, kv.last_response.served_by

    assert asyncio.run(main()) == (["a", "b"], "a")


def test_mirrors_the_blocking_client():
    """AsyncClient has Client's public methods, name for name, with the
    same parameters and return types, as coroutines, documented alike."""
    def public(cls):
        return {n: v for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}

    sync, aio = public(Client), public(AsyncClient)
    assert set(aio) - {"aclose"} == set(sync), set(aio) ^ set(sync)
    for name, fn in sync.items():
        assert inspect.iscoroutinefunction(aio[name]), name
        assert inspect.signature(aio[name]) == inspect.signature(fn), name
        assert aio[name].__doc__ == fn.__doc__, name
    for prop in ("catalog_index", "home", "last_response"):
        assert isinstance(inspect.getattr_static(AsyncClient, prop), property), prop


@pytest.mark.parametrize("make", [Client, AsyncClient])
def test_user_agent_names_the_release(fakes, make):
    fake = fakes()
    fake.script("GET /health", ok({"status": "ok"}))

    async def call_async():
        async with AsyncClient(fake.url) as kv:
            await kv.health()

    if make is Client:
        Client(fake.url).health()
    else:
        asyncio.run(call_async())
    assert fake.requests("GET /health")[0]["ua"] == "kvselect-python/" + kvselect.__version__


def test_cancelling_a_call_whose_answer_just_came_still_cancels_it(fakes):
    """asyncio.wait_for before Python 3.12 returns the result, swallowing
    the cancellation, when the awaited work finished in the same loop
    iteration the caller was cancelled in: a LeaseKeeper or request
    handler cancelled at that moment would run on. The client's time
    limit must not do that."""
    from kvselect._core import Answer

    async def main():
        kv = AsyncClient(fakes().url)
        answered = asyncio.Event()

        async def attempt(url, call, progress):
            await answered.wait()
            return Answer(node="", url=url, status=200, headers={}, body=b"{}")

        kv._attempt = attempt
        call = asyncio.ensure_future(kv.health())
        for _ in range(5):  # the call and its attempt reach their awaits
            await asyncio.sleep(0)
        answered.set()  # the attempt finishes in the next iteration...
        call.cancel()  # ...in which the caller learns it is cancelled
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(main())
