"""The OpenSearch client's address parsing and error messages (a tiny loopback HTTP server plays
a node that answers 401 or 503), and the frontier's pure helpers."""

from __future__ import annotations

import http.server
import threading

import pytest

from owler.conf import ConfError
from owler.frontier.opensearch import _duration, _read_md
from owler.osclient import OpenSearchError, OSClient, conn_key, parse_addresses


def test_parse_addresses():
    assert parse_addresses("localhost") == ["http://localhost:9200"]
    assert parse_addresses("a:9201; https://b ,http://c:1/") == [
        "http://a:9201", "https://b:9200", "http://c:1"]
    assert parse_addresses(["[::1]:9300", "[::1]"]) == ["http://[::1]:9300", "http://[::1]:9200"]
    with pytest.raises(ConfError):
        parse_addresses("ftp://x")
    with pytest.raises(ConfError):
        parse_addresses(" ; ")


def test_conn_key_prefers_the_typed_key():
    conf = {"opensearch.user": "u", "opensearch.status.user": "s", "opensearch.password": "p"}
    assert conn_key(conf, "status", "user") == "s"
    assert conn_key(conf, "metrics", "user") == "u"
    assert conn_key(conf, "status", "password") == "p"
    assert conn_key(conf, "status", "addresses", "d") == "d"


def test_helpers():
    assert _duration("1s", 9) == 1.0 and _duration("500ms", 9) == 0.5
    assert _duration("2m", 9) == 120.0 and _duration("-1", 9) == -1.0
    assert _duration(None, 9) == 9 and _duration("bad", 9) == 9
    assert _read_md({"fetch%2EstatusCode": ["200"], "one": "x", "none": None}) == {
        "fetch.statusCode": ["200"], "one": ["x"]}
    assert _read_md("garbage") == {}


class _Node(http.server.BaseHTTPRequestHandler):
    status = 401
    calls = 0

    def do_GET(self):  # noqa: N802
        type(self).calls += 1
        body = b'{"error":{"root_cause":[{"type":"x","reason":"nope"}]}}'
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def node():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Node)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


def test_wrong_credentials_name_the_user(node):
    _Node.status, _Node.calls = 401, 0
    client = OSClient({"opensearch.addresses": f"127.0.0.1:{node.server_port}",
                       "opensearch.user": "crawler", "opensearch.password": "bad"})
    with pytest.raises(OpenSearchError, match="refused GET /status with 401 .user 'crawler'.") as exc:
        client.request("GET", "/status")
    assert exc.value.status == 401 and _Node.calls == 1  # not retried


def test_unavailable_node_is_retried_then_fails(node):
    _Node.status, _Node.calls = 503, 0
    client = OSClient({"opensearch.addresses": f"127.0.0.1:{node.server_port}",
                       "opensearch.max.retries": 2})
    with pytest.raises(OpenSearchError, match="answered 503"):
        client.request("GET", "/status")
    assert _Node.calls == 3


def test_other_errors_carry_the_root_cause(node):
    _Node.status, _Node.calls = 400, 0
    client = OSClient({"opensearch.addresses": f"127.0.0.1:{node.server_port}"})
    with pytest.raises(OpenSearchError, match="failed with 400: x: nope"):
        client.request("GET", "/status")
