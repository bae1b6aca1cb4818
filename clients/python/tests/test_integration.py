"""The client against real kvselect processes: one node, and a cluster of
three."""

from __future__ import annotations

import pytest

from kvselect import Client, KvselectError, wire


def register_two(kv: Client, model: str = "llama") -> None:
    for wid, ranks in ((1, 2), (2, 1)):
        kv.register_worker(wid, model_name=model, endpoint=f"http://w{wid}:8000", block_size=16,
                           data_parallel_size=ranks,
                           kv_events_endpoints={r: f"tcp://127.0.0.1:{7 + r}" for r in range(ranks)})


def load(kv: Client, worker: int, rank: int, model: str = "llama") -> tuple:
    [part] = kv.loads(model_name=model)
    [row] = [r for r in part["loads"] if (r["worker_id"], r["dp_rank"]) == (worker, rank)]
    return row["active_prefill_tokens"], row["active_decode_blocks"], row["active_requests"]


def test_ray_flow(node):
    kv = Client(node)
    register_two(kv)
    assert [w["lifecycle"] for w in kv.workers(model_name="llama")] == ["schedulable", "schedulable"]
    prompt = dict(model_name="llama", block_hashes=[11, 12, 13, 14], sequence_hashes=[21, 22, 23, 24],
                  isl_tokens=64)

    sel = kv.select(selection_id="s-1", **prompt)
    assert sel["selection_id"] == "s-1" and sel["effective_prefill_tokens"] == 64
    assert "reservation_id" not in sel and "cached_tokens" not in sel
    booked = kv.reserve_selection("r-1", "s-1")
    assert (booked["worker_id"], booked["dp_rank"]) == (sel["worker_id"], sel["dp_rank"])
    assert load(kv, sel["worker_id"], sel["dp_rank"]) == (64, 4, 1)

    # Select-then-reserve by worker, and the atomic form.
    kv.reserve("r-2", worker_id=2, sequence_hashes=[21, 22, 31], isl_tokens=48, effective_prefill_tokens=48,
               model_name="llama")
    atomic = kv.select_and_reserve(**prompt)
    assert wire.validate_id(atomic["reservation_id"]) is None

    kv.prefill_complete("r-1")
    kv.prefill_complete("r-1")  # a repeat is a no-op
    kv.output_block("r-1")
    kv.output_block("r-1", decay_fraction=0.5)
    info = kv.reservation("r-1")
    assert info["prefill_complete"] and info["output_blocks"] == 2 and info["decay_fraction"] == 0.5
    assert info["origin"] == "local"
    page = kv.reservations(model_name="llama", limit=2)
    assert [r["reservation_id"] for r in page["reservations"]] == sorted([atomic["reservation_id"], "r-1", "r-2"])[:2]
    assert kv.reservations(cursor=page["next_cursor"])["reservations"]

    for rid in ("r-1", "r-2", atomic["reservation_id"]):
        kv.free(rid)
    assert all(r["active_requests"] == 0 and r["active_decode_blocks"] == 0 for r in kv.loads()[0]["loads"])
    with pytest.raises(KvselectError) as e:
        kv.free("r-1")
    assert e.value.code == wire.CODE_NOT_FOUND and e.value.status == 404

    rows = kv.overlap_scores(**prompt)["workers"]
    assert [(r["worker_id"], r["dp_rank"]) for r in rows] == [(1, 0), (1, 1), (2, 0)]
    assert len(kv.potential_loads(**prompt)) == 3

    removed = kv.delete_worker(2)
    assert removed["worker_id"] == 2 and kv.catalog_index == removed["catalog_index"] > 0


def test_errors_from_a_real_node(node):
    kv = Client(node)
    register_two(kv)
    with pytest.raises(KvselectError) as e:
        kv.select(model_name="nope", token_ids=[1, 2, 3])
    assert e.value.code == wire.CODE_NOT_READY and e.value.status == 503
    kv.select_and_reserve(model_name="llama", token_ids=[1, 2, 3], reservation_id="dup")
    with pytest.raises(KvselectError) as e:
        kv.select_and_reserve(model_name="llama", token_ids=[1, 2, 3], reservation_id="dup")
    assert e.value.code == wire.CODE_CONFLICT
    with pytest.raises(KvselectError) as e:
        kv.patch_worker(1, blocksize=32)  # the node names the misspelt field
    assert e.value.code == wire.CODE_BAD_REQUEST and e.value.message.startswith("blocksize")
    with pytest.raises(KvselectError) as e:
        kv.select(model_name="llama", token_ids=[1], min_catalog_index=10**9)
    assert e.value.code == wire.CODE_CATALOG_BEHIND
    assert kv.ready()["ready"] is True and kv.health() == {"status": "ok"}
    assert "kvselect_build_info" in kv.metrics()


def test_wire_facts_match_the_served_document(node):
    """The Python client's paths and codes are the ones the node documents."""
    doc = Client(node).openapi()
    paths = {v for k, v in vars(wire).items() if k.startswith("PATH_")}
    assert paths == set(doc["paths"]), paths ^ set(doc["paths"])
    documented_codes = set(doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    assert wire.CODES == documented_codes, wire.CODES ^ documented_codes


def test_cluster(cluster):
    (leader_id, leader), (f1_id, f1), (_, f2) = cluster
    # A client whose home is a follower: the follower forwards the write
    # and answers once it has applied it.
    writer = Client([f1, f2])
    register_two(writer)
    assert writer.last_response.served_by == leader_id and not writer.last_response.not_applied
    # Read-your-writes on the node written through, with no index at all.
    assert Client(f1).select(model_name="llama", token_ids=list(range(40)))["worker_id"] in (1, 2)
    # Another client on the other follower, given the writer's index,
    # reads the writes too, wherever it asks.
    reader = Client(f2)
    reader.observe_catalog_index(writer.catalog_index)
    assert {w["worker_id"] for w in reader.workers(model_name="llama")} == {1, 2}
    assert len(reader.workers(linearizable=True)) == 2
    assert reader.last_response.served_by == leader_id
    # A step-down through a follower moves the leadership; the next write
    # finds the new leader.
    assert writer.step_down()["node_id"] == leader_id
    writer.delete_worker(2)
    new_leader = Client(f2).cluster_status()["leader"]["id"]
    assert writer.last_response.served_by == new_leader != leader_id
    assert {w["worker_id"] for w in Client(f2).workers(linearizable=True)} == {1}
