"""The client against real kvselect processes: one node, and a cluster of
three."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from kvselect import KvselectError, answers, wire

from conftest import wait_for


def register_two(kv, model: str = "llama") -> None:
    for wid, ranks in ((1, 2), (2, 1)):
        kv.register_worker(wid, model_name=model, endpoint=f"http://w{wid}:8000", block_size=16,
                           data_parallel_size=ranks,
                           kv_events_endpoints={r: f"tcp://127.0.0.1:{7 + r}" for r in range(ranks)})


def load(kv, worker: int, rank: int, model: str = "llama") -> tuple:
    [part] = kv.loads(model_name=model)
    [row] = [r for r in part["loads"] if (r["worker_id"], r["dp_rank"]) == (worker, rank)]
    return row["active_prefill_tokens"], row["active_decode_blocks"], row["active_requests"]


def test_ray_flow(Client, node):
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


def test_errors_from_a_real_node(Client, node):
    kv = Client(node)
    register_two(kv)
    with pytest.raises(KvselectError) as e:
        kv.select(model_name="nope", token_ids=[1, 2, 3])
    assert e.value.code == wire.CODE_UNKNOWN_PARTITION and e.value.status == 503 and e.value.unknown_partition
    assert '"llama"/"default"' in e.value.message  # the partitions the catalog holds
    first = kv.select_and_reserve(model_name="llama", token_ids=[1, 2, 3], reservation_id="dup")
    # A retry after a lost answer (same id, same prompt) gets the booking.
    assert kv.select_and_reserve(model_name="llama", token_ids=[1, 2, 3], reservation_id="dup") == first
    with pytest.raises(KvselectError) as e:
        kv.select_and_reserve(model_name="llama", token_ids=[1, 2, 3, 4], reservation_id="dup")
    assert e.value.code == wire.CODE_CONFLICT
    with pytest.raises(KvselectError) as e:
        kv.patch_worker(1, blocksize=32)  # the node names the misspelt field
    assert e.value.code == wire.CODE_BAD_REQUEST and e.value.message.startswith("blocksize")
    with pytest.raises(KvselectError) as e:
        kv.select(model_name="llama", token_ids=[1], min_catalog_index=10**9, require_catalog=True)
    assert e.value.code == wire.CODE_CATALOG_BEHIND
    assert kv.ready()["ready"] is True and kv.health() == {"status": "ok"}
    assert "kvselect_build_info" in kv.metrics()


def test_leases_and_readyz(Client, node):
    kv = Client(node)
    assert kv.readyz()["ready"] is True
    ready = kv.selection_readyz()
    assert ready["ready"] is True and ready["caught_up"] is True and ready["recovering"] is False
    kv.register_worker(31, model_name="leased", endpoint="http://w31:8000", block_size=16,
                       kv_events_endpoint="tcp://127.0.0.1:1", lease_ttl_s=60)
    kv.register_worker(32, model_name="leased", endpoint="http://w32:8000", block_size=16,
                       kv_events_endpoint="tcp://127.0.0.1:1")
    assert kv.worker(31)["lease_ttl_s"] == 60 and "lease_ttl_s" not in kv.worker(32)
    assert kv.keep_alive(31) == {"worker_id": 31, "lease_ttl_s": 60, "expires_in_ms": 60000}
    ans = kv.keep_alive_many([31, 32, 99])
    assert [lease["worker_id"] for lease in ans["leases"]] == [31]
    assert [(f["worker_id"], f["code"]) for f in ans["failed"]] == [(32, wire.CODE_CONFLICT), (99, wire.CODE_NOT_FOUND)]
    with pytest.raises(KvselectError) as e:
        kv.keep_alive(99)
    assert e.value.code == wire.CODE_NOT_FOUND and e.value.status == 404
    for wid in (31, 32):
        kv.delete_worker(wid)


# Every public call of the client, with the (method, path) of the route it
# must use. Ids are 7. The test drives each one against a fake node and
# compares what was sent with the document a real node serves.
ROUTES = [
    ("health", lambda kv: kv.health(), "GET", "/health"),
    ("ready", lambda kv: kv.ready(), "GET", "/ready"),
    ("readyz", lambda kv: kv.readyz(), "GET", "/readyz"),
    ("selection_readyz", lambda kv: kv.selection_readyz(), "GET", "/readyz"),
    ("keep_alive", lambda kv: kv.keep_alive(7), "POST", "/workers/{id}/keepalive"),
    ("keep_alive_many", lambda kv: kv.keep_alive_many([7, 8]), "POST", "/workers/keepalive"),
    ("metrics", lambda kv: kv.metrics(), "GET", "/metrics"),
    ("openapi", lambda kv: kv.openapi(), "GET", "/openapi.json"),
    ("cluster_status", lambda kv: kv.cluster_status(), "GET", "/cluster/status"),
    ("dump", lambda kv: kv.dump(), "GET", "/dump"),
    ("loads", lambda kv: kv.loads(model_name="m", tenant_id="t"), "GET", "/loads"),
    ("register_worker", lambda kv: kv.register_worker(7, block_size=16), "POST", "/workers"),
    ("patch_worker", lambda kv: kv.patch_worker(7, endpoint="http://w7:8000"), "PATCH", "/workers/{id}"),
    ("delete_worker", lambda kv: kv.delete_worker(7), "DELETE", "/workers/{id}"),
    ("workers", lambda kv: kv.workers(model_name="m", tenant_id="t"), "GET", "/workers"),
    ("workers", lambda kv: kv.workers(linearizable=True), "GET", "/workers"),
    ("worker", lambda kv: kv.worker(7), "GET", "/workers/{id}"),
    ("worker", lambda kv: kv.worker(7, linearizable=True), "GET", "/workers/{id}"),
    ("select", lambda kv: kv.select(token_ids=[1, 2], selection_id="s"), "POST", "/select"),
    ("select_and_reserve", lambda kv: kv.select_and_reserve(token_ids=[1, 2]), "POST", "/select_and_reserve"),
    ("reserve", lambda kv: kv.reserve("7", worker_id=1, dp_rank=1, sequence_hashes=[21], isl_tokens=16,
                                      effective_prefill_tokens=8), "POST", "/reservations"),
    ("reserve_selection", lambda kv: kv.reserve_selection("7", "s"), "POST", "/reservations"),
    ("prefill_complete", lambda kv: kv.prefill_complete("7"), "POST", "/reservations/{id}/prefill_complete"),
    ("output_block", lambda kv: kv.output_block("7", 0.5), "POST", "/reservations/{id}/output_block"),
    ("free", lambda kv: kv.free("7"), "DELETE", "/reservations/{id}"),
    ("reservations", lambda kv: kv.reservations(model_name="m", tenant_id="t", worker_id=1, limit=2, cursor="c"),
     "GET", "/reservations"),
    ("reservation", lambda kv: kv.reservation("7"), "GET", "/reservations/{id}"),
    ("potential_loads", lambda kv: kv.potential_loads(token_ids=[1, 2]), "POST", "/potential_loads"),
    ("overlap_scores", lambda kv: kv.overlap_scores(token_ids=[1, 2]), "POST", "/overlap_scores"),
    ("join", lambda kv: kv.join("n4", "127.0.0.1:7004", "127.0.0.1:8004"), "POST", "/cluster/join"),
    ("remove", lambda kv: kv.remove("n4"), "POST", "/cluster/remove"),
    ("step_down", lambda kv: kv.step_down(), "POST", "/cluster/stepdown"),
    ("set_metadata", lambda kv: kv.set_metadata("n4", "127.0.0.1:8004"), "POST", "/cluster/metadata"),
    ("register_replica_sync_peer", lambda kv: kv.register_replica_sync_peer("tcp://h:1"),
     "POST", "/replica_sync/register_peer"),
    ("deregister_replica_sync_peer", lambda kv: kv.deregister_replica_sync_peer("tcp://h:1"),
     "POST", "/replica_sync/deregister_peer"),
    ("replica_sync_peers", lambda kv: kv.replica_sync_peers(), "GET", "/replica_sync/peers"),
    ("replica_sync_status", lambda kv: kv.replica_sync_status(), "GET", "/replica_sync/status"),
    ("set_busy_threshold", lambda kv: kv.set_busy_threshold("m", active_decode_blocks_threshold=0.5),
     "POST", "/busy_threshold"),
    ("clear_busy_threshold", lambda kv: kv.clear_busy_threshold("m"), "DELETE", "/busy_threshold"),
    ("busy_thresholds", lambda kv: kv.busy_thresholds(), "GET", "/busy_threshold"),
    ("set_policy", lambda kv: kv.set_policy("m", "two-tier", {"cache_threshold": 0.6}, tenant_id="t"), "PUT", "/policies"),
    ("delete_policy", lambda kv: kv.delete_policy("m", "t"), "DELETE", "/policies"),
    ("policies", lambda kv: kv.policies(), "GET", "/policies"),
]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def deref(doc: dict, obj: dict) -> dict:
    """obj, or what its "$ref" points at in doc."""
    while "$ref" in obj:
        target = doc
        for part in obj["$ref"].lstrip("#/").split("/"):
            target = target[part]
        obj = target
    return obj


def operations(doc: dict) -> dict:
    """(METHOD, path) -> (parameters, response header names) of every
    operation in the document."""
    ops = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                params = [deref(doc, p) for p in item.get("parameters", []) + op.get("parameters", [])]
                headers = {h for r in op.get("responses", {}).values() for h in deref(doc, r).get("headers", {})}
                ops[(method.upper(), path)] = (params, headers)
    return ops


def names(params: list, where: str) -> set:
    return {p["name"] for p in params if p["in"] == where}


def test_wire_facts_match_the_served_document(Client, node, fakes):
    """The Python client's calls, paths, headers, query parameters, codes
    and answer shapes are the ones the node documents."""
    doc = Client(node).openapi()
    ops = operations(doc)

    # Every public call is in ROUTES, and together they use every
    # operation of the document, and nothing else.
    cls = getattr(Client, "wrapped", Client)  # kvselect.AsyncClient behind the blocking bridge
    calls = {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")} - {"observe_catalog_index",
                                                                                            "aclose"}
    assert calls == {r[0] for r in ROUTES}, calls ^ {r[0] for r in ROUTES}
    used = {(m, p) for _, _, m, p in ROUTES}
    assert used == set(ops), {"not documented": used - set(ops), "no call": set(ops) - used}

    # Each call sends exactly its route, with documented query parameters
    # and headers only.
    fake = fakes()
    fake.default = (200, {}, {})
    sent_index = set()
    for name, invoke, method, path in ROUTES:
        kv = Client(fake.url)
        kv.observe_catalog_index(5)
        before = len(fake.got)
        invoke(kv)
        [got] = fake.got[before:]
        assert got["route"] == f"{method} {path.replace('{id}', '7')}", name
        params = ops[(method, path)][0]
        assert set(parse_qs(got["query"])) <= names(params, "query"), (name, got["query"])
        if got["index"]:
            assert wire.HEADER_INDEX in names(params, "header"), name
            sent_index.add((method, path))
    # Session consistency: every operation that takes the catalog index
    # gets it from some call.
    assert sent_index == {op for op, (params, _) in ops.items() if wire.HEADER_INDEX in names(params, "header")}

    # wire.py's constants are the document's.
    paths = {v for k, v in vars(wire).items() if k.startswith("PATH_")}
    assert paths == set(doc["paths"]), paths ^ set(doc["paths"])
    documented = {h for params, headers in ops.values() for h in names(params, "header") | headers
                  if h.lower().startswith("x-kvselect-")}
    ours = {v for k, v in vars(wire).items() if k.startswith("HEADER_")}
    assert ours == documented, ours ^ documented
    documented = {q for params, _ in ops.values() for q in names(params, "query")}
    ours = {v for k, v in vars(wire).items() if k.startswith("QUERY_")}
    assert ours == documented, ours ^ documented
    levels = {level for params, _ in ops.values() for p in params if p["name"] == wire.QUERY_CONSISTENCY
              for level in p["schema"]["enum"]}
    assert levels == {wire.CONSISTENCY_LOCAL, wire.CONSISTENCY_LINEARIZABLE}, levels
    documented_codes = set(doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    assert wire.CODES == documented_codes, wire.CODES ^ documented_codes

    # The TypedDicts of kvselect.answers have the keys of the schemas of
    # the same names, required and optional alike.
    for name in answers.__all__:
        schema, td = doc["components"]["schemas"][name], getattr(answers, name)
        assert set(schema["properties"]) == td.__required_keys__ | td.__optional_keys__, name
        assert set(schema.get("required", [])) == td.__required_keys__, name


def test_busy_thresholds(Client, node):
    """Thresholds are set, merged, read and cleared on a real node, and a
    bad value is refused naming the field."""
    kv = Client(node)
    got = kv.set_busy_threshold("py-model", active_decode_blocks_threshold=0.85, active_prefill_tokens_threshold=10000)
    assert got == {"model": "py-model", "active_decode_blocks_threshold": 0.85, "active_prefill_tokens_threshold": 10000}
    got = kv.set_busy_threshold("py-model", active_prefill_tokens_threshold=5)
    assert got["active_decode_blocks_threshold"] == 0.85 and got["active_prefill_tokens_threshold"] == 5
    assert kv.set_busy_threshold("py-model") == got  # neither: a read
    assert {"model": "py-model", "active_decode_blocks_threshold": 0.85,
            "active_prefill_tokens_threshold": 5} in kv.busy_thresholds()["thresholds"]
    with pytest.raises(KvselectError) as e:
        kv.set_busy_threshold("py-model", active_decode_blocks_threshold=1.5)
    assert e.value.code == wire.CODE_BAD_REQUEST and "active_decode_blocks_threshold" in str(e.value)
    cleared = kv.clear_busy_threshold("py-model")
    assert cleared["active_decode_blocks_threshold"] is None and cleared["active_prefill_tokens_threshold"] is None
    assert all(t["model"] != "py-model" for t in kv.busy_thresholds()["thresholds"])


def test_policies(Client, node):
    """The bootstrap seeded the cluster default from --policy; an entry is
    set, listed and removed on a real node; a number for a boolean
    parameter, an unknown parameter and an unknown policy are refused,
    naming them."""
    kv = Client(node)
    # The seed is a Raft write the new leader makes once it leads, after
    # the cluster id: the node can be ready a moment before it lands.
    wait_for("the bootstrap seeded the cluster default", lambda: kv.policies()["policies"] != [])
    listed = kv.policies()
    assert listed["node_default"] == {"policy": "dynamo-default", "parameters": {}}
    assert [(p["model_name"], p["tenant_id"], p["policy"]) for p in listed["policies"]] == [("*", "", "dynamo-default")]
    got = kv.set_policy("org/llama", "two-tier", {"cache_threshold": 0.6, "assume_kv_reuse": False})
    assert got["parameters"] == {"cache_threshold": 0.6, "assume_kv_reuse": False}
    assert got["tenant_id"] == "default" and got["catalog_index"] == got["modify_index"] == kv.catalog_index
    assert [p["model_name"] for p in kv.policies()["policies"]] == ["*", "org/llama"]
    for params, field in (({"assume_kv_reuse": 1}, "parameters.assume_kv_reuse"),
                          ({"cache_threshold": True}, "parameters.cache_threshold"),
                          ({"cache_treshold": 0.6}, "parameters.cache_treshold")):
        with pytest.raises(KvselectError) as e:
            kv.set_policy("org/llama", "two-tier", params)
        assert e.value.code == wire.CODE_BAD_REQUEST and e.value.message.startswith(field + ": "), e.value.message
    with pytest.raises(KvselectError) as e:
        kv.set_policy("org/llama", "fastest")
    assert e.value.code == wire.CODE_BAD_REQUEST and 'unknown policy "fastest"' in e.value.message
    assert kv.delete_policy("org/llama")["policy"] == "two-tier"
    with pytest.raises(KvselectError) as e:
        kv.delete_policy("org/llama")
    assert e.value.code == wire.CODE_NOT_FOUND
    assert kv.delete_policy(wire.ANY_MODEL)["policy"] == "dynamo-default"
    assert kv.policies()["policies"] == []


def test_set_metadata(Client, node):
    kv = Client(node)
    [me] = [m for m in kv.cluster_status()["members"] if m["id"] == "n1"]
    meta = kv.set_metadata("n1", me["http_addr"])
    assert meta == {"id": "n1", "http_addr": me["http_addr"]}
    assert kv.catalog_index == kv.last_response.catalog_index > 0
    with pytest.raises(KvselectError) as e:
        kv.set_metadata("n1", "", timeout=5)
    assert e.value.code == wire.CODE_BAD_REQUEST


def test_cluster(Client, cluster):
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
    new_leader = writer.last_response.served_by
    assert new_leader not in ("", leader_id)
    # The other follower may hear of the new leader a moment after the
    # write committed (a majority is the new leader and the old one).
    wait_for("the other follower knows the new leader",
             lambda: Client(f2).cluster_status()["leader"]["id"] == new_leader)
    assert {w["worker_id"] for w in Client(f2).workers(linearizable=True)} == {1}
