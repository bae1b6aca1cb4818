"""Client for kvselect, the KV-cache-aware worker selection service.

The client mirrors kvselect's Go client (package client): node affinity for
bookings, writes through the home node with leader following, retries only
where they are safe, and session consistency (read your own writes on any
node). Standard library only; Python 3.9 or later. AsyncClient has the
same methods as coroutines, for asyncio (Ray Serve, FastAPI).

    from kvselect import Client

    kv = Client(["http://127.0.0.1:8092", "http://127.0.0.1:8192"])
    kv.register_worker(1, model_name="llama", endpoint="http://w1:8000",
                       block_size=16, kv_events_endpoint="tcp://w1:5557")
    sel = kv.select_and_reserve(model_name="llama", token_ids=prompt_tokens)
    ...send the request to sel["endpoint"], rank sel["dp_rank"]...
    kv.prefill_complete(sel["reservation_id"])
    kv.free(sel["reservation_id"])

Every call takes timeout=seconds, which bounds that call (attempts,
retries and pauses included). The answers are plain dicts; kvselect.answers
has TypedDicts of the main ones (Selection, Reservation, Worker, ...).
"""

from .answers import (KeepAliveAnswer, Lease, NodeMeta, PartitionLoads, Policies, Policy, PolicyWritten, RankLoad,
                      Reservation, ReservationInfo, ReservationPage, Selection, Worker, WorkerWritten)
from ._version import __version__
from .aio import AsyncClient
from .client import Client, ResponseInfo
from .errors import KvselectError, TransportError
from . import answers, wire

__all__ = ["AsyncClient", "Client", "KeepAliveAnswer", "KvselectError", "Lease", "NodeMeta", "PartitionLoads",
           "Policies", "Policy", "PolicyWritten", "RankLoad", "Reservation", "ReservationInfo", "ReservationPage",
           "ResponseInfo", "Selection", "TransportError", "Worker", "WorkerWritten", "__version__", "answers", "wire"]
