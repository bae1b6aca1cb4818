"""The client against a real kvselect node that serves HTTPS with its own
CA and requires tokens: the admin token, the selection token, and the CA
file, given directly, from files or from the environment."""

from __future__ import annotations

import pickle

import pytest

from kvselect import KvselectError, TransportError


def test_https_with_the_cluster_ca(Client, tls_node):
    admin = Client(tls_node["url"], token_file=tls_node["admin"], ca_file=tls_node["ca"])
    admin.register_worker(1, model_name="m", endpoint="http://w1:8000", block_size=16,
                          kv_events_endpoint="tcp://127.0.0.1:9")
    sel = Client(tls_node["url"], token="sel-new", ca_file=tls_node["ca"])
    booked = sel.select_and_reserve(model_name="m", token_ids=list(range(17)), reservation_id="r1")
    assert booked["worker_id"] == 1 and booked["reservation_id"] == "r1"
    sel.free("r1")
    # The admin file's second line is accepted too (a rotation).
    assert Client(tls_node["url"], token="adm-old", ca_file=tls_node["ca"]).workers()[0]["worker_id"] == 1
    # A pickled client (a Ray task) carries the CA file and reads it again.
    copy = pickle.loads(pickle.dumps(sel))
    assert copy.select(model_name="m", token_ids=list(range(17)))["worker_id"] == 1


def test_roles(Client, tls_node):
    sel = Client(tls_node["url"], token="sel-new", ca_file=tls_node["ca"])
    with pytest.raises(KvselectError) as e:
        sel.delete_worker(1)
    assert e.value.status == 403 and e.value.code == "forbidden"
    with pytest.raises(KvselectError) as e:
        Client(tls_node["url"], ca_file=tls_node["ca"]).loads()
    assert e.value.status == 401 and e.value.code == "unauthorized"
    assert Client(tls_node["url"], ca_file=tls_node["ca"]).health()["status"] == "ok"


def test_untrusted_without_the_ca(Client, tls_node):
    with pytest.raises(TransportError) as e:
        Client(tls_node["url"], token="sel-new").loads()
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)


def test_from_env(Client, tls_node, monkeypatch):
    monkeypatch.setenv("KVSELECT_ADDR", tls_node["url"])
    monkeypatch.setenv("KVSELECT_TOKEN_FILE", tls_node["selection"])
    monkeypatch.setenv("KVSELECT_CA_FILE", tls_node["ca"])
    assert Client.from_env().loads() == []
    monkeypatch.setenv("KVSELECT_TOKEN", "adm-new")
    with pytest.raises(ValueError, match="not both"):  # as kvselectctl refuses both
        Client.from_env()
    monkeypatch.delenv("KVSELECT_TOKEN_FILE")
    assert Client.from_env().dump() is not None


def test_token_checks(Client, tmp_path):
    with pytest.raises(ValueError, match="not both"):
        Client("h:1", token="a", token_file="f")
    with pytest.raises(ValueError, match="cannot go in an HTTP header"):
        Client("h:1", token="two words")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        Client("h:1", token_file=str(empty))
    two = tmp_path / "two"
    two.write_text("first\nsecond\n")
    assert Client("h:1", token_file=str(two))._token == "first"


def test_no_redirect_from_https_to_http(Client, tls_node, tmp_path):
    """A redirect is followed with the token: one from https into clear
    text is refused, never followed."""
    import http.server
    import ssl
    import threading

    got = []

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            got.append(self.headers.get("Authorization"))
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.1:9/loads")
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(tmp_path / "n1.pem"), str(tmp_path / "n1-key.pem"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        kv = Client(f"https://127.0.0.1:{srv.server_address[1]}", token="sel-new", ca_file=tls_node["ca"])
        with pytest.raises(TransportError, match="refused a redirect from https"):
            kv.loads()
        assert got == ["Bearer sel-new"]  # sent to the https node only
    finally:
        srv.shutdown()
        srv.server_close()
