"""The client's routing and retry rules, against scripted fake nodes."""

from __future__ import annotations

import json
import pickle
import time

import pytest

from kvselect import KvselectError, TransportError, wire

STORED = {"worker_id": 7, "model_name": "llama", "tenant_id": "default", "lifecycle": "schedulable", "catalog_index": 12}


def err(code: str, msg: str = "x", status: int = 503):
    return (status, {}, {"error": msg, "code": code})


def ok(body: object, status: int = 200, **headers: str):
    return (status, {k.replace("_", "-"): v for k, v in headers.items()}, body)


def status_of(node_id: str, state: str, leader_id: str, leader_http: str):
    return ok({"node_id": node_id, "state": state, "leader": {"id": leader_id, "http_addr": leader_http},
               "members": []})


def test_write_through_home(Client, fakes):
    a = fakes()
    a.script("POST /workers", ok(STORED, 201, X_Kvselect_Index="12", X_Kvselect_Served_By="n3"))
    kv = Client([a.url], token="s3cret")
    w = kv.register_worker(7, endpoint="http://w7:8000", block_size=16)
    assert w["catalog_index"] == 12 and kv.catalog_index == 12
    assert kv.last_response.served_by == "n3"
    [got] = a.requests("POST /workers")
    assert json.loads(got["body"]) == {"worker_id": 7, "endpoint": "http://w7:8000", "block_size": 16}
    assert got["auth"] == "Bearer s3cret"
    assert not a.requests("GET /cluster/status")


def test_leader_following(Client, fakes):
    a, b = fakes(), fakes()
    a.script("POST /workers", err(wire.CODE_NO_LEADER))
    a.script("GET /cluster/status", status_of("a", "follower", "b", b.url.removeprefix("http://")))
    b.script("POST /workers", ok(STORED, 201, X_Kvselect_Served_By="b"))
    kv = Client([a.url])
    kv.register_worker(7)
    assert len(a.requests("POST /workers")) == 1 and len(b.requests("POST /workers")) == 1
    assert kv.last_response.served_by == "b"


def test_unreachable_leader_address_goes_back_through_home(Client, fakes, dead_addr):
    a = fakes()
    a.script("POST /workers", err(wire.CODE_NOT_LEADER), ok(STORED, 201, X_Kvselect_Served_By="c"))
    a.script("GET /cluster/status", status_of("a", "follower", "c", dead_addr.removeprefix("http://")))
    kv = Client(a.url)
    kv.register_worker(7)
    assert len(a.requests("POST /workers")) == 2


def test_home_moves_past_dead_nodes(Client, fakes, dead_addr):
    a, b = fakes(), fakes()
    for n in (a, b):
        n.script("GET /loads", ok([]))
        n.script("POST /select", ok({"worker_id": 1}))
    kv = Client([dead_addr, a.url, b.url])
    kv.loads()
    kv.select(token_ids=[1, 2, 3])
    assert kv.home == a.url
    assert len(a.requests("POST /select")) == 1 and not b.got
    assert not a.requests("GET /cluster/status")


@pytest.mark.parametrize("answers,tries,code,after_unknown", [
    ([err(wire.CODE_NOT_LEADER), ok(STORED)], 2, None, False),
    ([err(wire.CODE_NO_LEADER), err(wire.CODE_NO_LEADER), ok(STORED)], 3, None, False),
    ([err(wire.CODE_UNKNOWN_OUTCOME), ok(STORED)], 2, None, False),
    ([err(wire.CODE_UNKNOWN_OUTCOME), err(wire.CODE_NOT_FOUND, "worker not found: 7", 404)], 2, "not_found", True),
    (["hangup", ok(STORED)], 2, None, False),
    ([err(wire.CODE_CONFLICT, "no", 409)], 1, "conflict", False),
])
def test_delete_retries(Client, fakes, answers, tries, code, after_unknown):
    n = fakes()
    n.script("GET /cluster/status", status_of("a", "leader", "a", n.url.removeprefix("http://")))
    n.script("DELETE /workers/7", *answers)
    kv = Client([n.url, n.url])
    if code is None:
        assert kv.delete_worker(7)["worker_id"] == 7
    else:
        with pytest.raises(KvselectError) as e:
            kv.delete_worker(7)
        assert e.value.code == code and e.value.after_unknown_outcome == after_unknown
    assert len(n.requests("DELETE /workers/7")) == tries


def test_gives_up_after_retry_timeout(Client, fakes):
    n = fakes()
    n.script("GET /cluster/status", status_of("a", "leader", "a", n.url.removeprefix("http://")))
    n.script("DELETE /workers/7", err(wire.CODE_NOT_LEADER))
    with pytest.raises(KvselectError) as e:
        Client(n.url, retry_timeout=0.2).delete_worker(7)
    assert e.value.code == wire.CODE_NOT_LEADER and len(n.requests("DELETE /workers/7")) >= 2


def test_step_down_is_never_sent_twice(Client, fakes):
    n = fakes()
    n.script("POST /cluster/stepdown", err(wire.CODE_UNKNOWN_OUTCOME), ok({}))
    with pytest.raises(KvselectError) as e:
        Client(n.url).step_down()
    assert e.value.code == wire.CODE_UNKNOWN_OUTCOME
    assert len(n.requests("POST /cluster/stepdown")) == 1
    m = fakes()
    m.script("POST /cluster/stepdown", "hangup", ok({}))
    with pytest.raises(TransportError, match="may or may not have taken effect"):
        Client(m.url).step_down()
    assert len(m.requests("POST /cluster/stepdown")) == 1


def test_set_metadata_is_a_retried_catalog_write(Client, fakes):
    n = fakes()
    meta = {"id": "n2", "http_addr": "h2:8092", "replica_sync": "tcp://h2:5600"}
    n.script("POST /cluster/metadata", err(wire.CODE_UNKNOWN_OUTCOME), ok(meta, X_Kvselect_Index="30"))
    n.script("GET /cluster/status", status_of("a", "leader", "a", n.url.removeprefix("http://")))
    kv = Client(n.url)
    assert kv.set_metadata("n2", "h2:8092", "tcp://h2:5600") == meta and kv.catalog_index == 30
    sent = n.requests("POST /cluster/metadata")
    assert len(sent) == 2 and all(json.loads(g["body"]) == meta for g in sent)
    kv.set_metadata("n2", "h2:8092")
    assert json.loads(n.requests("POST /cluster/metadata")[-1]["body"]) == {"id": "n2", "http_addr": "h2:8092"}


def test_policy_calls_on_the_wire(Client, fakes):
    """set_policy sends booleans as JSON booleans and numbers as numbers;
    delete_policy names the entry in the query (a model name has '/');
    both are catalog writes, sent again after an unknown outcome."""
    n = fakes()
    entry = {"model_name": "org/llama", "tenant_id": "default", "policy": "two-tier",
             "parameters": {"assume_kv_reuse": False, "cache_threshold": 0.6}, "modify_index": 40, "catalog_index": 40}
    n.script("PUT /policies", err(wire.CODE_UNKNOWN_OUTCOME), ok(entry, X_Kvselect_Index="40"))
    n.script("DELETE /policies", ok(entry, X_Kvselect_Index="41"))
    n.script("GET /cluster/status", status_of("a", "leader", "a", n.url.removeprefix("http://")))
    kv = Client(n.url)
    got = kv.set_policy("org/llama", "two-tier", {"cache_threshold": 0.6, "assume_kv_reuse": False})
    assert got == entry and kv.catalog_index == 40
    sent = n.requests("PUT /policies")
    assert len(sent) == 2 and all(g["body"] == '{"model_name":"org/llama","policy":"two-tier","parameters":'
                                  '{"cache_threshold":0.6,"assume_kv_reuse":false}}' for g in sent)
    kv.delete_policy("org/llama")
    kv.delete_policy(wire.ANY_MODEL)
    kv.delete_policy("org/llama", "t")
    assert [g["query"] for g in n.requests("DELETE /policies")] == [
        "model_name=org%2Fllama", "model_name=%2A", "model_name=org%2Fllama&tenant_id=t"]


def test_call_timeout(Client, fakes):
    n = fakes()
    n.script("GET /health", ("slow", 0.5, ok({"status": "ok"})))
    # A call's timeout overrides the client's, longer or shorter.
    assert Client(n.url, timeout=0.1).health(timeout=5) == {"status": "ok"}
    kv = Client([n.url, n.url], timeout=5)
    with pytest.raises(TransportError):
        kv.health(timeout=0.1)
    # No other attempt starts once it has passed, even for a read.
    assert len(n.requests("GET /health")) == 2
    # A booking whose answer did not come in time may have been made.
    n.script("POST /select_and_reserve", ("slow", 0.5, ok({"reservation_id": "r1"})))
    with pytest.raises(TransportError) as e:
        kv.select_and_reserve(token_ids=[1], reservation_id="r1", timeout=0.1)
    assert e.value.sent and len(n.requests("POST /select_and_reserve")) == 1
    for bad in (0, -1.0):
        with pytest.raises(ValueError):
            kv.health(timeout=bad)
    assert len(n.requests("GET /health")) == 2


def test_call_timeout_bounds_leader_retries(Client, fakes):
    n = fakes()
    n.script("GET /cluster/status", status_of("a", "leader", "a", n.url.removeprefix("http://")))
    n.script("DELETE /workers/7", err(wire.CODE_NOT_LEADER))
    start = time.monotonic()
    with pytest.raises(KvselectError) as e:
        Client(n.url, retry_timeout=60).delete_worker(7, timeout=0.3)
    assert e.value.code == wire.CODE_NOT_LEADER and len(n.requests("DELETE /workers/7")) >= 2
    assert time.monotonic() - start < 10


def test_bookings_are_not_resent_reads_are(Client, fakes):
    n = fakes()
    n.script("POST /select_and_reserve", "hangup", ok({"reservation_id": "r1"}))
    n.script("GET /loads", "hangup", ok([]))
    kv = Client([n.url, n.url])
    with pytest.raises(TransportError) as e:
        kv.select_and_reserve(token_ids=[1], reservation_id="r1")
    assert e.value.sent and len(n.requests("POST /select_and_reserve")) == 1
    assert kv.loads() == [] and len(n.requests("GET /loads")) == 2


def test_redirects_keep_method_body_and_token(Client, fakes):
    a, b = fakes(), fakes()
    a.script("PATCH /workers/7", ok({}, 307, Location=b.url + "/workers/7"))
    b.script("PATCH /workers/7", ok(STORED))
    Client(a.url, token="tok", pinned=True).patch_worker(7, endpoint="x")
    [got] = b.requests("PATCH /workers/7")
    assert json.loads(got["body"]) == {"endpoint": "x"} and got["auth"] == "Bearer tok"
    a.script("PATCH /workers/7", ok({}, 307, Location="/workers/7"))
    with pytest.raises(TransportError, match="stopped after 5 redirects"):
        Client(a.url, pinned=True).patch_worker(7, endpoint="x")


def test_session_index(Client, fakes):
    n = fakes()
    n.script("POST /workers", ok(STORED, 201, X_Kvselect_Index="12"))
    n.script("POST /select", ok({}))
    n.script("GET /workers", ok([], X_Kvselect_Index="9"))
    n.script("GET /loads", ok([]))
    kv = Client(n.url)
    kv.select(token_ids=[1])
    kv.register_worker(7)
    kv.select(token_ids=[1])
    kv.workers()
    kv.loads()
    kv.observe_catalog_index(5)
    kv.select(token_ids=[1])
    kv.observe_catalog_index(40)
    kv.select(token_ids=[1])
    sent = [(g["route"], g["index"]) for g in n.got]
    assert sent == [("POST /select", ""), ("POST /workers", ""), ("POST /select", "12"), ("GET /workers", "12"),
                    ("GET /loads", ""), ("POST /select", "12"), ("POST /select", "40")]


def test_error_bodies(Client, fakes):
    n = fakes()
    n.script("POST /select", ok({"message": "Service temporarily unavailable: All workers are busy, please retry later",
                                 "type": "service_unavailable", "code": 503}, 503, Retry_After="1"))
    n.script("GET /ready", ok({"ready": False, "workers": []}, 503))
    n.script("POST /potential_loads", ok({"error": 'unknown partition: no worker was ever registered for model_name "lama"',
                                          "code": "unknown_partition"}, 503))
    n.script("POST /overlap_scores", ok({"error": "no schedulable worker", "code": "not_ready"}, 503))
    kv = Client(n.url)
    with pytest.raises(KvselectError) as e:
        kv.select(token_ids=[1])
    assert e.value.code == wire.CODE_OVERLOADED and e.value.status == 503 and "busy" in e.value.message
    assert not e.value.unknown_partition
    assert e.value.retry_after == "1"  # a caller relaying the 503 passes it on
    # A typo and an outage are both 503s; only the code tells them apart.
    with pytest.raises(KvselectError) as e:
        kv.potential_loads(model_name="lama", token_ids=[1])
    assert e.value.unknown_partition and e.value.code == wire.CODE_UNKNOWN_PARTITION and '"lama"' in e.value.message
    assert e.value.retry_after is None
    with pytest.raises(KvselectError) as e:
        kv.overlap_scores(token_ids=[1])
    assert not e.value.unknown_partition and e.value.code == wire.CODE_NOT_READY
    assert kv.ready()["ready"] is False


def test_bad_input_fails_before_sending(Client, fakes):
    n = fakes()
    kv = Client(n.url)
    for bad in ("", "a/b", "a b", "x" * 257, "50%", ".", ".."):
        with pytest.raises(ValueError):
            kv.reserve_selection(bad, "s")
    with pytest.raises(TypeError, match="tokenids"):
        kv.select(tokenids=[1])
    with pytest.raises(ValueError):
        Client([" ", ""])
    with pytest.raises(ValueError):
        Client("ftp://h:1")
    assert not n.got


def test_pickled_client_keeps_its_session(Client, fakes):
    n = fakes()
    kv = Client(n.url, token="t")
    kv.observe_catalog_index(33)
    copy = pickle.loads(pickle.dumps(kv))
    assert copy.catalog_index == 33 and copy.home == n.url
    n.script("POST /select", ok({}))
    copy.select(token_ids=[1])
    assert n.requests("POST /select")[0]["index"] == "33"
