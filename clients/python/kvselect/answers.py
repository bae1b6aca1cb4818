"""The shapes of kvselect's main answers, for type checkers.

They are plain dicts at run time (the client returns the decoded JSON);
these TypedDicts only say which keys an answer has. Keys that an answer may
leave out are in the total=False classes. The tests check every class
against the schema of the same name in the OpenAPI document a node serves.
"""

from typing import Dict, List, Optional, TypedDict, Union

__all__ = ["BusyThreshold", "BusyThresholds", "NodeMeta", "Overlap", "PartitionLoads", "Policies", "Policy", "PolicySpec",
           "PolicyWritten", "RankLoad", "Reservation", "ReservationInfo", "ReservationPage", "Selection", "Worker",
           "WorkerWritten"]


class Overlap(TypedDict):
    """The chosen worker's match, in tokens (seed 000)."""

    longest_matched: int
    gpu: int
    dp: Dict[str, int]  # every rank of the worker: its device-tier tokens
    cpu: int
    disk: int


class _Selection(TypedDict):
    model_name: str
    tenant_id: str
    worker_id: int
    dp_rank: int
    endpoint: str
    block_size: int
    overlap: Overlap
    effective_prefill_tokens: int


class Selection(_Selection, total=False):
    """The answer of select() and select_and_reserve()."""

    selection_id: str
    reservation_id: str  # select_and_reserve() only


class _Reservation(TypedDict):
    reservation_id: str
    model_name: str
    tenant_id: str
    worker_id: int
    dp_rank: int
    effective_prefill_tokens: int


class Reservation(_Reservation, total=False):
    """A booking made: the answer of reserve() and reserve_selection()."""

    selection_id: str


class _ReservationInfo(TypedDict):
    reservation_id: str
    model_name: str
    tenant_id: str
    worker_id: int
    dp_rank: int
    blocks: int
    isl_tokens: int
    prefill_tokens: int
    prefill_complete: bool
    output_blocks: int
    admitted_at: str  # RFC 3339
    expires_at: str
    origin: str  # "local", or "peer" (mirrored by replica sync)


class ReservationInfo(_ReservationInfo, total=False):
    """A booking as the home node holds it: reservation()."""

    decay_fraction: float
    origin_node: str


class _ReservationPage(TypedDict):
    reservations: List[ReservationInfo]


class ReservationPage(_ReservationPage, total=False):
    """One page of reservations(); next_cursor is absent on the last."""

    next_cursor: str


class _Worker(TypedDict):
    worker_id: int
    model_name: str
    tenant_id: str
    endpoint: str
    block_size: int
    data_parallel_start_rank: int
    data_parallel_size: int
    kv_events_endpoints: Dict[str, str]  # dp rank (as a string) -> ZMQ endpoint
    create_index: int
    modify_index: int
    block_size_index: int
    lifecycle: str  # "schedulable" or "incomplete"


class Worker(_Worker, total=False):
    """A catalog record: workers() and worker()."""

    replay_endpoint: str
    total_kv_blocks: int
    max_num_batched_tokens: int
    lease_ttl_s: int  # the worker's lease, when it has one
    not_schedulable_reasons: List[str]
    thresholds_not_checked: List[str]  # busy thresholds load shedding cannot check for it, with why
    listeners: Dict[str, Dict[str, object]]  # this node's KV event listener per dp rank
    # whether the answering node would select it: schedulable, and not every
    # rank's listener "stale" there (reads only; write answers omit it)
    schedulable_here: bool


class WorkerWritten(Worker):
    """A catalog record after a write, with the index it was applied at:
    register_worker(), patch_worker() and delete_worker()."""

    catalog_index: int


class Lease(TypedDict):
    """A renewed lease: keep_alive()."""

    worker_id: int
    lease_ttl_s: int
    expires_in_ms: int  # how long it lasts without another renewal


class KeepAliveFailure(TypedDict):
    worker_id: int
    code: str  # not_found: register it again; conflict: registered without a lease
    error: str


class KeepAliveAnswer(TypedDict, total=False):
    """keep_alive_many(): the leases renewed and the ids that were not."""

    leases: List[Lease]
    failed: List[KeepAliveFailure]


class RankLoad(TypedDict):
    worker_id: int
    dp_rank: int
    active_prefill_tokens: int
    active_decode_blocks: float
    active_requests: int
    busy: bool  # over one of its model's busy thresholds


class PartitionLoads(TypedDict):
    """One partition's active load per rank: loads()."""

    model_name: str
    tenant_id: str
    loads: List[RankLoad]


class BusyThreshold(TypedDict):
    """One model's busy thresholds (seed 001); None is a threshold not set:
    set_busy_threshold() and clear_busy_threshold()."""

    model: str
    active_decode_blocks_threshold: Optional[float]
    active_prefill_tokens_threshold: Optional[int]


class BusyThresholds(TypedDict):
    """The models with a busy threshold set, sorted: busy_thresholds()."""

    thresholds: List[BusyThreshold]


# A policy's parameters by name: a bool for a boolean parameter, else a
# number.
PolicyParameters = Dict[str, Union[float, bool]]


class Policy(TypedDict):
    """One policy entry of the catalog; tenant_id is "" for the cluster
    default (model_name "*")."""

    model_name: str
    tenant_id: str
    policy: str
    parameters: PolicyParameters
    modify_index: int


class PolicyWritten(Policy):
    """A policy entry after set_policy() (the removed one after
    delete_policy()), with the index the write was applied at."""

    catalog_index: int


class PolicySpec(TypedDict):
    """A policy and its parameters."""

    policy: str
    parameters: PolicyParameters


class Policies(TypedDict):
    """Every policy entry, sorted, and the answering node's own default
    (its --policy): policies()."""

    policies: List[Policy]
    node_default: PolicySpec


class _NodeMeta(TypedDict):
    id: str
    http_addr: str


class NodeMeta(_NodeMeta, total=False):
    """A member's published addresses: set_metadata()."""

    replica_sync: str
    # The random number the member's process drew at start; the catalog
    # records a new one as the member's epoch (replica sync's freshness).
    incarnation: int
    modify_index: int
    # The catalog rules the member's release knows (1: sticky block sizes
    # and retired partitions); the leader switches them on once every
    # member advertises them.
    catalog_rules: int
