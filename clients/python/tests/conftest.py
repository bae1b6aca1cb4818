"""Fixtures: real kvselect processes (one node, or three in a cluster), a
kvsim, and a scripted fake node for the client's retry rules.

The binaries come from the repository's bin/ (make build), or from
$KVSELECT_BIN_DIR.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import kvselect  # noqa: E402
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BIN_DIR = os.environ.get("KVSELECT_BIN_DIR", os.path.join(REPO, "bin"))


def binary(name: str) -> str:
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run `make build` first (or set KVSELECT_BIN_DIR)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 2.0, context: Optional[ssl.SSLContext] = None) -> Optional[dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return json.load(resp)
    except Exception:  # not up yet, or an error answer
        return None


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


class Proc:
    """A process the test started; stopped (SIGTERM, then SIGKILL) at the
    end. Its output goes to a log file shown when a test fails."""

    def __init__(self, args: List[str], log_path: str) -> None:
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def node(tmp_path) -> Iterator[str]:
    """One kvselect node; yields its base URL."""
    port, raft = free_port(), free_port()
    p = Proc([binary("kvselect"), "--node-id", "n1", "--bind", "127.0.0.1", "--port", str(port),
              "--raft-addr", f"127.0.0.1:{raft}", "--data-dir", str(tmp_path / "n1"), "--log-level", "warn"],
             str(tmp_path / "n1.log"))
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready, not just leading: a new leader learns its commit index a
        # moment after it wins the election, and answers not_ready where
        # a test expects unknown_partition until it is selection-ready.
        wait_for("the node leads and is ready", lambda: (get_json(url + "/readyz") or {}).get("state") == "leader")
        wait_for("the node is selection-ready", lambda: (get_json(url + "/readyz?for=selection") or {}).get("ready") is True)
        yield url
    finally:
        p.stop()


@pytest.fixture
def cluster(tmp_path) -> Iterator[List[Tuple[str, str]]]:
    """Three kvselect nodes in one cluster; yields [(id, base URL)], the
    leader first."""
    http = [free_port() for _ in range(3)]
    raft = [free_port() for _ in range(3)]
    initial = ",".join(f"n{i + 1}=127.0.0.1:{raft[i]}" for i in range(3))
    procs = [Proc([binary("kvselect"), "--node-id", f"n{i + 1}", "--bind", "127.0.0.1", "--port", str(http[i]),
                   "--raft-addr", f"127.0.0.1:{raft[i]}", "--data-dir", str(tmp_path / f"n{i + 1}"),
                   "--initial-cluster", initial, "--log-level", "warn"], str(tmp_path / f"n{i + 1}.log"))
             for i in range(3)]
    urls = [f"http://127.0.0.1:{p}" for p in http]

    def converged() -> bool:
        sts = [get_json(u + "/cluster/status") for u in urls]
        if not all(sts):
            return False
        leaders = {st["leader"]["id"] for st in sts}
        return len(leaders) == 1 and "" not in leaders and all(
            len(st["members"]) == 3 and all(m["http_addr"] for m in st["members"]) for st in sts)

    try:
        wait_for("the cluster converges", converged, timeout=30)
        leader = get_json(urls[0] + "/cluster/status")["leader"]["id"]
        nodes = [(f"n{i + 1}", urls[i]) for i in range(3)]
        nodes.sort(key=lambda n: n[0] != leader)
        yield nodes
    finally:
        for p in procs:
            p.stop()


@pytest.fixture
def kvsim(tmp_path, node) -> Iterator[str]:
    """kvsim with two simulated workers (model "qwen") registered with the
    node; yields its control API URL."""
    control = free_port()
    p = Proc([binary("kvsim"), "--workers", "2", "--model", "qwen", "--block-size", "16",
              "--control", f"127.0.0.1:{control}", "--register", node, "--log-level", "warn"],
             str(tmp_path / "kvsim.log"))
    url = f"http://127.0.0.1:{control}"
    try:
        def active() -> bool:
            ready = get_json(node + "/ready") or {}
            states = [l["state"] for w in ready.get("workers", []) for l in (w.get("listeners") or {}).values()]
            return len(states) == 2 and all(s == "active" for s in states)
        wait_for("kvsim's workers are registered and subscribed", active)
        yield url
    finally:
        p.stop()


# A scripted fake node, for the client's retry and routing rules.

Handler = Callable[["FakeNode", BaseHTTPRequestHandler], Tuple[int, Dict[str, str], object]]


class _Server(ThreadingHTTPServer):
    # Room for a burst of concurrent connections (the asyncio client's
    # tests open dozens at once; the default backlog is 5).
    request_queue_size = 128


class FakeNode:
    """An HTTP server whose answers a test scripts per route ("POST
    /workers"): each route has a list of answers, the last one repeating.
    An answer is (status, headers, body), "hangup", ("slow", seconds,
    answer), or a function called in the request's thread that returns
    one. Unscripted routes get default (404 when None). Every request is
    recorded, with the client's port (peer: which connection carried it).
    drop_connections() closes every connection the server holds open."""

    def __init__(self) -> None:
        self.routes: Dict[str, List[object]] = {}
        self.default: Optional[object] = None
        self.got: List[Dict[str, str]] = []
        self.lock = threading.Lock()
        self.conns: List[socket.socket] = []
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                path, _, query = self.path.partition("?")
                route = f"{self.command} {path}"
                with fake.lock:
                    fake.got.append({"route": route, "query": query, "body": body,
                                     "auth": self.headers.get("Authorization") or "",
                                     "index": self.headers.get("X-Kvselect-Index") or "",
                                     "ua": self.headers.get("User-Agent") or "", "peer": self.client_address[1]})
                    if self.connection not in fake.conns:
                        fake.conns.append(self.connection)
                    seq = fake.routes.get(route)
                    n = sum(1 for g in fake.got if g["route"] == route)
                    answer = seq[min(n, len(seq)) - 1] if seq else (
                        fake.default or (404, {}, {"error": "no such route", "code": "not_found"}))
                if callable(answer):
                    answer = answer()
                if isinstance(answer, tuple) and answer[0] == "slow":
                    time.sleep(answer[1])
                    answer = answer[2]
                if answer == "hangup":
                    self.close_connection = True
                    self.connection.close()
                    return
                status, headers, payload = answer
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                try:
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:  # the client gave up (its timeout passed)
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def script(self, route: str, *answers: object) -> None:
        self.routes[route] = list(answers)

    def requests(self, route: str) -> List[Dict[str, str]]:
        with self.lock:
            return [g for g in self.got if g["route"] == route]

    def drop_connections(self) -> None:
        with self.lock:
            conns, self.conns = self.conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.drop_connections()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fakes() -> Iterator[Callable[[], FakeNode]]:
    made: List[FakeNode] = []

    def make() -> FakeNode:
        f = FakeNode()
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


class BlockingAsyncClient:
    """kvselect.AsyncClient driven from synchronous test code, so that the
    tests written for Client run unchanged against the asyncio client:
    each coroutine method runs to completion on this object's own event
    loop; everything else is the AsyncClient's. last_response is read in
    the task that made the call (where the AsyncClient records it)."""

    wrapped = kvselect.AsyncClient
    made: List["BlockingAsyncClient"] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._bind(kvselect.AsyncClient(*args, **kwargs))

    @classmethod
    def from_env(cls, *args: object, **kwargs: object) -> "BlockingAsyncClient":
        obj = cls.__new__(cls)
        obj._bind(kvselect.AsyncClient.from_env(*args, **kwargs))
        return obj

    def _bind(self, inner: "kvselect.AsyncClient") -> None:
        self.__dict__.update(inner=inner, loop=asyncio.new_event_loop(), last_response=None)
        BlockingAsyncClient.made.append(self)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name in ("inner", "loop", "last_response"):
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: object, **kwargs: object) -> object:
            try:
                return await attr(*args, **kwargs)
            finally:
                self.__dict__["last_response"] = self.inner.last_response

        return functools.wraps(attr)(lambda *a, **kw: self.loop.run_until_complete(call(*a, **kw)))

    def __getstate__(self) -> dict:
        return {"inner": self.inner}

    def __setstate__(self, state: dict) -> None:
        self._bind(state["inner"])

    def close(self) -> None:
        self.loop.run_until_complete(self.inner.aclose())
        self.loop.close()


@pytest.fixture(params=["sync", "async"])
def Client(request):  # noqa: N802 (it stands for the class)
    """The client class under test: kvselect.Client, then
    kvselect.AsyncClient (as a BlockingAsyncClient); every client the test
    made is closed after it."""
    if request.param == "sync":
        yield kvselect.Client
        return
    BlockingAsyncClient.made = []
    yield BlockingAsyncClient
    for c in BlockingAsyncClient.made:
        c.close()


@pytest.fixture
def dead_addr() -> str:
    """An address nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def tls_node(tmp_path) -> Iterator[Dict[str, str]]:
    """One kvselect node serving HTTPS with a CA made for the test (by the
    openssl command; skipped without it), an admin token and a selection
    token. Yields its URL and the paths of the CA and token files."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test CA with")
    d = str(tmp_path)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=test-ca", "-keyout", "ca-key.pem", "-out", "ca.pem")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", "/CN=n1", "-keyout", "n1-key.pem", "-out", "n1.csr")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "n1.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-days", "1", "-extfile", "ext.cnf", "-out", "n1.pem")
    files = {"ca": "ca.pem", "admin": "admin-token", "selection": "selection-token"}
    files = {k: os.path.join(d, v) for k, v in files.items()}
    for name, token in (("admin", "adm-new\nadm-old\n"), ("selection", "sel-new\n")):
        with open(files[name], "w") as f:
            f.write(token)
        os.chmod(files[name], 0o600)
    port, raft = free_port(), free_port()
    p = Proc([binary("kvselect"), "--node-id", "n1", "--bind", "127.0.0.1", "--port", str(port),
              "--raft-addr", f"127.0.0.1:{raft}", "--data-dir", os.path.join(d, "n1"), "--log-level", "warn",
              "--tls-cert-file", os.path.join(d, "n1.pem"), "--tls-key-file", os.path.join(d, "n1-key.pem"),
              "--auth-token-file", files["admin"], "--selection-token-file", files["selection"]],
             os.path.join(d, "n1.log"))
    url = f"https://127.0.0.1:{port}"
    ctx = ssl.create_default_context(cafile=files["ca"])
    try:
        # /readyz is open: no token needed to wait for the node.
        wait_for("the node leads and is ready",
                 lambda: (get_json(url + "/readyz", context=ctx) or {}).get("state") == "leader")
        yield {"url": url, **files}
    finally:
        p.stop()
