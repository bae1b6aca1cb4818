"""The one core of the blocking Client and the asyncio AsyncClient.

Everything that decides what is sent where lives here, once: node
affinity, leader following, the retry rules, redirects, session
consistency and the reading of answers. It does no I/O itself: a call runs
as a generator (_Core._steps) that yields what it needs done (a
_RoundTrip to make, a _Pause to wait) and is sent the answer back, or has
the TransportError thrown in. Client drives it with http.client and
time.sleep, AsyncClient with asyncio streams and asyncio.sleep; neither
holds a second copy of a rule.

The rules, as in kvselect's Go client (package client):

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

import json
import os
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union
from urllib.parse import urljoin, urlsplit

from . import wire
from ._version import __version__
from .errors import KvselectError, TransportError, decode_error

# What a call is, for routing and retries.
READ = "read"  # no effect: sent again anywhere, even after a lost answer
BOOKING = "booking"  # changes this node's load: never sent again once sent
WRITE = "write"  # leader-only, idempotent: sent again after an unknown outcome
WRITE_ONCE = "write_once"  # leader-only, not idempotent
LEADER_READ = "leader_read"  # linearizable read on the leader

# How a call's answer is returned.
DECODE_JSON = "json"  # the decoded JSON (None for an empty body)
DECODE_TEXT = "text"  # the body as UTF-8 text

USER_AGENT = "kvselect-python/" + __version__

_MAX_REDIRECTS = 5
_FIRST_BACKOFF = 0.05
_MAX_BACKOFF = 1.0


@dataclass
class ResponseInfo:
    """What the last answer of a thread (Client) or task (AsyncClient) said
    besides its body."""

    node: str  # base URL the answer came from
    status: int
    served_by: str  # X-Kvselect-Served-By
    catalog_index: int  # X-Kvselect-Index, 0 when absent
    not_applied: bool  # X-Kvselect-Applied: false
    body: bytes


@dataclass
class Call:
    """One call of the API: what is sent, and how it may be routed and
    retried (kind)."""

    method: str
    path: str  # with the query
    body: Optional[bytes]
    kind: str
    session: bool = False  # carries the session's catalog index
    accept: Optional[Callable[[int], bool]] = None  # statuses that are not errors (default 2xx)
    decode: str = DECODE_JSON
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
class Answer:
    """What one round trip brought back."""

    node: str
    url: str
    status: int
    headers: Mapping[str, str]  # case-insensitive get() (an http.client.HTTPMessage)
    body: bytes


@dataclass(frozen=True)
class RoundTrip:
    """A step of a call: send call to url, once, and send back the Answer
    (any status), or throw in a TransportError (sent=False when nothing
    can have reached the node)."""

    url: str
    call: Call


@dataclass(frozen=True)
class Pause:
    """A step of a call: wait seconds before the next attempt."""

    seconds: float


T = TypeVar("T")
C = TypeVar("C", bound="Core")
Steps = Generator[Union[RoundTrip, Pause], Optional[Answer], T]


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
    check_token(token, path)
    return token


def check_token(token: str, what: str) -> None:
    for i, c in enumerate(token):
        if not 0x21 <= ord(c) <= 0x7E:
            raise ValueError(f"{what}: byte {i} of the token cannot go in an HTTP header (use visible ASCII)")


def ssl_context(ca_file: Optional[str]) -> Optional[ssl.SSLContext]:
    """The TLS context of https calls: the system's roots (None), or
    ca_file's CA certificates instead."""
    return ssl.create_default_context(cafile=ca_file) if ca_file else None


class Core:
    """The state and rules both clients share: the nodes, the token, the
    home node and the session's catalog index (under a lock: a Client is
    shared between threads, and an AsyncClient's state may be read from
    other threads too). A subclass supplies the I/O that runs _steps, and
    where the last answer is recorded (_record, last_response)."""

    # Attributes rebuilt, not pickled, when a client travels to a Ray task.
    _TRANSIENT: Tuple[str, ...] = ("_lock", "_ssl")

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
            check_token(token, "token")
        self._token = token
        self._ca_file = ca_file
        self._timeout = timeout
        self._retry_timeout = retry_timeout
        self._max_answer = max_answer_bytes
        self._pinned = pinned
        self._home = 0
        self._index = 0
        self._init_transient()

    def _init_transient(self) -> None:
        self._lock = threading.Lock()
        self._ssl = ssl_context(self._ca_file)

    @classmethod
    def from_env(cls: Type[C], addrs: Union[str, Sequence[str], None] = None, **kwargs: Any) -> C:
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
        return {k: v for k, v in self.__dict__.items() if k not in self._TRANSIENT}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_transient()

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

    def _record(self, info: ResponseInfo) -> None:
        raise NotImplementedError

    # What every round trip carries.

    def _headers(self, call: Call) -> Dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if call.body is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        if call.session:
            index = self.catalog_index
            if index:
                headers[wire.HEADER_INDEX] = str(index)
        return headers

    # The rules, as steps for a driver.

    def _steps(self, call: Call, timeout: Optional[float]) -> Steps[Any]:
        """Runs a call. timeout (seconds), when given, bounds all of it:
        each attempt waits at most what is left, and no attempt or pause
        starts after it."""
        if timeout is not None:
            if not timeout > 0:
                raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
            call.deadline = time.monotonic() + timeout
        if self._pinned:
            ans = yield from self._exchange(self._addrs[0], call)
            self._verdict(call, ans, False)
        elif call.kind in (WRITE, WRITE_ONCE, LEADER_READ):
            ans = yield from self._via_leader(call)
        else:
            ans = yield from self._on_home(call)
        if call.decode == DECODE_TEXT:
            return ans.body.decode("utf-8")
        if not ans.body.strip():
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

    def _on_home(self, call: Call) -> Steps[Answer]:
        """Sends the call to the home node and judges its answer."""
        ans = yield from self._home_attempt(call, lost_too=call.kind == READ)
        self._verdict(call, ans, False)
        return ans

    def _home_attempt(self, call: Call, lost_too: bool) -> Steps[Answer]:
        """Sends the call to the home node, moving on to the next address
        while a node cannot be reached (nothing was sent) and, with
        lost_too, when its answer was lost (reads only: they may be sent
        again). The node that answers becomes home."""
        start, order = self._order()
        errors = []
        for idx in order:
            try:
                ans = yield from self._exchange(self._addrs[idx], call)
            except TransportError as e:
                if (e.sent and not lost_too) or call.expired():
                    raise
                errors.append(str(e))
                continue
            if idx != start:
                self._move_home(start, idx)
            return ans
        raise TransportError("no kvselect node reachable: " + "; ".join(errors), sent=False)

    def _via_leader(self, call: Call) -> Steps[Answer]:
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
                if target:
                    ans = yield from self._exchange(target, call)
                else:
                    ans = yield from self._home_attempt(call, lost_too=False)
            except TransportError as e:
                if not e.sent:
                    # Never reached; the leader's own address may be one
                    # this client cannot dial: go back through home.
                    target = "" if target else (yield from self._find_leader(call, ""))
                elif call.kind == WRITE:
                    after_unknown = True
                elif call.kind != LEADER_READ:
                    raise TransportError(f"{e} (the request reached a node; it may or may not have taken effect)",
                                         sent=True) from e
                last = e
            else:
                try:
                    self._verdict(call, ans, after_unknown)
                    return ans
                except KvselectError as e:
                    if e.code in wire.NOTHING_WRITTEN:
                        target = yield from self._find_leader(call, target)
                    elif e.code == wire.CODE_UNKNOWN_OUTCOME and call.kind == WRITE:
                        after_unknown = True
                    else:
                        raise
                    last = e
            if time.monotonic() + pause > deadline:
                raise last
            yield Pause(pause)
            pause = min(2 * pause, _MAX_BACKOFF)

    def _find_leader(self, call: Call, avoid: str) -> Steps[str]:
        """The leader's base URL as the nodes know it, or "" (go through the
        home node) when none knows it. avoid is not returned. The lookup
        counts against the call's timeout."""
        status = Call("GET", wire.PATH_CLUSTER_STATUS, None, READ, deadline=call.deadline)
        for base in self._addrs:
            try:
                ans = yield from self._exchange(base, status)
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

    def _verdict(self, call: Call, ans: Answer, after_unknown: bool) -> None:
        """Records what the answer says and raises for one the call does not
        accept."""
        ok = call.accept(ans.status) if call.accept else 200 <= ans.status < 300
        try:
            index = int(ans.headers.get(wire.HEADER_INDEX) or 0)
        except ValueError:
            index = 0
        if ok and index:
            self.observe_catalog_index(index)
        self._record(ResponseInfo(node=ans.node, status=ans.status,
                                  served_by=ans.headers.get(wire.HEADER_SERVED_BY) or "",
                                  catalog_index=index,
                                  not_applied=(ans.headers.get(wire.HEADER_APPLIED) == "false"),
                                  body=ans.body))
        if not ok:
            err = decode_error(call.method, ans.url, ans.status, ans.body)
            err.after_unknown_outcome = after_unknown
            err.retry_after = ans.headers.get("Retry-After")
            raise err

    def _exchange(self, base: str, call: Call) -> Steps[Answer]:
        """One round trip to base, following up to 5 redirects (307/308)
        with the same method, body and token."""
        url = base + call.path
        sent = False
        for _ in range(_MAX_REDIRECTS + 1):
            try:
                ans = yield RoundTrip(url, call)
            except TransportError as e:
                raise TransportError(str(e), sent=sent or e.sent) from e
            assert ans is not None
            sent = True
            ans.node = base
            if ans.status not in (307, 308):
                return ans
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
