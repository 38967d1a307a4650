"""owler.task.metrics: the metrics-index documents, the Storm UI error throttle, the bounded background
sink (against a stub OpenSearch on a loopback port), the latest-values summary of `owler status`,
and the component mixin's snapshot and report_error."""

from __future__ import annotations

import http.server
import json
import logging
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from owler.run import report as R
from owler.task import metrics as M

# ---- documents ------------------------------------------------------------------------------------

SRC = M.Source("fetcher", 3, "worker1.example", 6701, "explorative-1-1700000000")
#: seconds after which something awaited counts as never happening (a hang), not a speed bound
HANG = 60.0


def wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not cond():
        assert time.monotonic() < deadline, f"{what} did not happen within {HANG:g} s (hang?)"
        time.sleep(0.02)


def test_documents_have_stormcrawlers_fields_and_types():
    docs = M.documents(SRC, {"fetched": 12, "http/200": 11, "queued": 2.5, "flag": True}, 1700000000.5)
    assert [d["name"] for d in docs] == ["fetched", "http/200", "queued"]  # booleans are no values
    d = docs[0]
    assert set(d) == {"name", "value", "srcComponent", "srcTaskId", "srcWorkerHost", "srcWorkerPort",
                      "srcStormId", "timestamp"}
    assert d["value"] == 12.0 and isinstance(d["value"], float)
    assert (d["srcComponent"], d["srcTaskId"], d["srcWorkerHost"], d["srcWorkerPort"],
            d["srcStormId"]) == ("fetcher", 3, "worker1.example", 6701, "explorative-1-1700000000")
    assert d["timestamp"] == "2023-11-14T22:13:20.500Z"
    assert M.iso_millis(0.9996) == "1970-01-01T00:00:01.000Z"
    # the same document always gets the same id (a retried bulk writes no duplicate)
    assert M.doc_id(docs[0]) == M.doc_id(dict(docs[0])) != M.doc_id(docs[1])


def test_source_from_the_handshake():
    conf = {"storm.id": "crawl-2-17", "storm.local.hostname": "10.0.0.5"}
    src = M.source_from(conf, {"taskid": 7, "componentid": "spout"})
    assert (src.component, src.task_id, src.host, src.storm_id) == ("spout", 7, "10.0.0.5", "crawl-2-17")
    src = M.source_from({"topology.name": "t"}, {"taskid": "x", "componentid": "p"})
    assert src.task_id == -1 and src.storm_id == "t" and src.host == socket.gethostname()


def test_worker_port_from_the_worker_command_line():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                             "-Dstorm.id=x", "-Dworker.port=6701"])
    try:
        deadline = time.monotonic() + HANG
        while M.worker_port(proc.pid) != 6701 and time.monotonic() < deadline:
            time.sleep(0.02)  # the command line shows once the exec is done
        assert M.worker_port(proc.pid) == 6701
    finally:
        proc.kill()
        proc.wait()
    assert M.worker_port(0) == -1  # no such process: unknown


def test_mapping_conflicts():
    ok = {"properties": {"name": {"type": "keyword"}, "value": {"type": "double"},
                         "timestamp": {"type": "date"}}}
    assert M.mapping_conflicts(ok) == []
    bad = {"properties": {"value": {"type": "keyword"}, "srcComponent": {"type": "text"}}}
    assert M.mapping_conflicts(bad) == ["value is keyword (expected double)",
                                        "srcComponent is text (expected keyword)"]


# ---- Storm UI errors ------------------------------------------------------------------------------

def test_error_throttle_admits_one_per_interval_and_counts_the_rest():
    now = [100.0]
    t = M.ErrorThrottle(5.0, clock=lambda: now[0])
    assert t.admit() == 0
    now[0] += 1
    assert t.admit() is None and t.admit() is None
    now[0] += 4.5
    assert t.admit() == 2  # the next one says how many were not shown
    assert (t.reported, t.suppressed) == (2, 2)
    assert M.error_message("x" * 50, 2, limit=10) == "x" * 9 + "… (2 more error(s) not shown since the last one)"
    assert M.error_message("boom", 0) == "boom"


# ---- the sink against a stub OpenSearch ---------------------------------------------------------

class StubNode:
    """A loopback HTTP server answering like OpenSearch; ``answer(method, path, body)`` decides."""

    def __init__(self, answer=None, port: int = 0):
        self.requests: list[tuple[str, str, bytes]] = []
        self.indices: set[str] = set()
        self.answer = answer or self.default
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                stub.requests.append((self.command, self.path, body))
                status, data = stub.answer(self.command, self.path, body)
                out = json.dumps(data).encode() if data is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(out)

            do_GET = do_PUT = do_POST = do_HEAD = _any  # noqa: N815

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.srv.server_port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def default(self, method, path, body):
        if path.startswith("/_bulk"):
            return 200, {"errors": False}
        name = path.strip("/").split("/")[0]
        if method == "PUT" and not path.startswith("/_"):
            self.indices.add(name)
        elif method in ("HEAD", "GET") and name not in self.indices:
            return 404, {"error": "index_not_found_exception"}
        elif path.endswith("/_mapping"):
            return 200, {name: {"mappings": {"properties": {"value": {"type": "double"}}}}}
        return 200, {"acknowledged": True}

    def bulk_docs(self) -> list[dict]:
        out = []
        for method, path, body in self.requests:
            if path.startswith("/_bulk"):
                lines = body.decode().splitlines()
                out += [json.loads(line) for line in lines[1::2]]
        return out

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def stub():
    node = StubNode()
    yield node
    node.close()


def _conf(port: int, **more) -> dict:
    return {"opensearch.metrics.addresses": f"127.0.0.1:{port}", "opensearch.connect.timeout": 1,
            "opensearch.socket.timeout": 5, "opensearch.metrics.index.name": "crawlmetrics", **more}


def test_sink_installs_the_template_then_writes_in_bulk(stub):
    sink = M.MetricsSink(_conf(stub.port), min_backoff=0.05)
    try:
        sink.offer(M.documents(SRC, {"fetched": 1, "bytes": 100}, 1700000000.0))
        assert sink.flush(HANG)
    finally:
        sink.close()
    put = [r for r in stub.requests if r[0] == "PUT"]
    assert put[0][1] == "/_index_template/owler-crawlmetrics"
    template = json.loads(put[0][2])
    assert template["index_patterns"] == ["crawlmetrics*"] and "_comment" not in template
    assert template["template"]["mappings"]["properties"]["srcStormId"] == {"type": "keyword"}
    bulk = [r for r in stub.requests if r[1].startswith("/_bulk")]
    action = json.loads(bulk[0][2].decode().splitlines()[0])
    assert action["index"]["_index"] == "crawlmetrics" and len(action["index"]["_id"]) == 32
    assert [d["name"] for d in stub.bulk_docs()] == ["fetched", "bytes"]
    assert sink.stats() == {"metrics/sent": 2, "metrics/dropped": 0, "metrics/rejected": 0}
    # the index is created (auto_create_index may be off), after the template, once per sink
    assert [r[1] for r in put] == ["/_index_template/owler-crawlmetrics", "/crawlmetrics"]
    assert sink.mapping_error is None and sink.template_error is None


def test_sink_logs_a_conflicting_template_or_mapping_and_goes_on(caplog):
    def answer(method, path, body):
        if method == "PUT":
            return 400, {"error": {"root_cause": [{"type": "illegal_argument_exception",
                                                   "reason": "same priority"}]}}
        if path.endswith("/_mapping"):
            return 200, {"crawlmetrics": {"mappings": {"properties": {"value": {"type": "keyword"}}}}}
        if path.startswith("/_bulk"):
            return 200, {"errors": True, "items": [
                {"index": {"status": 201}},
                {"index": {"status": 400, "error": {"type": "mapper_parsing_exception",
                                                    "reason": "failed to parse field [value]"}}},
                {"index": {"status": 429, "error": {"type": "es_rejected_execution_exception",
                                                    "reason": "busy"}}}]}
        return 200, {}

    node = StubNode(answer)
    caplog.set_level(logging.WARNING, "owler.task.metrics")
    sink = M.MetricsSink(_conf(node.port), min_backoff=0.05, start=False)
    try:
        docs = M.documents(SRC, {"a": 1, "b": 2, "c": 3}, 1700000000.0)
        retry = sink._send(docs)
    finally:
        node.close()
    assert [d["name"] for d in retry] == ["c"]  # 429: tried again later; 400: refused for good
    assert (sink.sent, sink.rejected) == (1, 1)
    text = caplog.text
    assert "cannot install the index template 'owler-crawlmetrics'" in text and "same priority" in text
    assert "conflicting mapping (value is keyword (expected double))" in text
    assert "refused 1 documents (mapper_parsing_exception" in text


def test_offer_returns_while_the_writer_waits_for_opensearch():
    """The caller never waits for the network: offer() returns while the node holds the writer's
    request unanswered, and the queue keeps the newest documents meanwhile."""
    arrived, release = threading.Event(), threading.Event()

    def answer(method, path, body):
        arrived.set()
        release.wait()  # set by the test, once the offers are done (or it failed)
        return node.default(method, path, body)

    node = StubNode(answer)
    sink = M.MetricsSink(_conf(node.port), max_queue=10, min_backoff=0.05)
    try:
        sink.offer(M.documents(SRC, {"n0": 0}, 1700000000.0))
        assert arrived.wait(HANG), "the writer never reached the node"
        # the writer now waits for the node: 25 more offers from another thread must all return
        offers = threading.Thread(target=lambda: [
            sink.offer(M.documents(SRC, {f"n{i}": i}, 1700000000.0 + i)) for i in range(1, 26)])
        offers.start()
        offers.join(HANG)
        assert not offers.is_alive(), "offer() waited for the node's answer"
        assert not release.is_set()
        # n0 in flight and the newest 9: the queue holds max_queue documents in all
        assert (sink.queued, sink.dropped, sink.sent) == (10, 16, 0)
        release.set()
        assert sink.flush(HANG)
        assert [d["name"] for d in node.bulk_docs()] == ["n0"] + [f"n{i}" for i in range(17, 26)]
    finally:
        release.set()
        sink.close()
        node.close()


def test_sink_drops_the_oldest_while_opensearch_is_away(caplog):
    with socket.socket() as s:  # a port nobody listens on (yet)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.WARNING, "owler.task.metrics")
    sink = M.MetricsSink(_conf(port), max_queue=10, min_backoff=0.05, max_backoff=0.2)
    node = None
    try:
        for i in range(25):
            sink.offer(M.documents(SRC, {f"n{i}": i}, 1700000000.0 + i))
        wait_until(lambda: sink.failed_requests >= 2, "a second failed request")  # back-off, retry
        assert sink.dropped == 15 and sink.queued == 10 and sink.sent == 0
        assert "cannot write to OpenSearch index 'crawlmetrics'" in caplog.text
        node = StubNode(port=port)  # the node comes back: the newest 10 are written
        assert sink.flush(HANG)
        assert [d["name"] for d in node.bulk_docs()] == [f"n{i}" for i in range(15, 25)]
        assert sink.stats() == {"metrics/sent": 10, "metrics/dropped": 15, "metrics/rejected": 0}
        assert "writable again" in caplog.text
    finally:
        sink.close()
        if node:
            node.close()


def test_sink_close_ends_the_writers_back_off_and_gives_up_when_opensearch_is_away():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = M.MetricsSink(_conf(port), min_backoff=3600, max_backoff=3600)
    sink.offer(M.documents(SRC, {"a": 1}, 1700000000.0))
    wait_until(lambda: sink.failed_requests == 1, "the first failed request")
    # the writer now waits an hour before it tries again; close() must not wait for that
    sink.close(timeout=HANG)
    assert not sink._thread.is_alive(), "close() left the writer in its back-off"
    assert sink.failed_requests == 2 and sink.queued == 1  # one last attempt, then given up


def test_reporter_sends_snapshots_periodically(stub):
    taken: list[int] = []
    third = threading.Event()

    def snapshot():
        taken.append(len(taken) + 1)
        if len(taken) == 3:
            third.set()
        return {"fetched": taken[-1]}

    rep = M.MetricsReporter(SRC, snapshot, M.MetricsSink(_conf(stub.port)), interval=0.1)
    try:
        assert third.wait(HANG), "the reporter took fewer than 3 snapshots"
        assert rep.sink.flush(HANG)
    finally:
        rep.close(timeout=HANG)  # a last snapshot, sent
    # every snapshot reached the index, in order (cumulative values: the latest is the total)
    assert [d["value"] for d in stub.bulk_docs()] == [float(n) for n in taken]
    assert len(taken) >= 4  # three on the interval, one at close
    assert M.MetricsReporter.from_conf({"metrics.opensearch": False}, {}, dict) is None


# ---- the latest values for `owler status` ---------------------------------------------------------

class FakeClient:
    address = "http://127.0.0.1:1"

    def __init__(self, pages):
        self.pages = list(pages)
        self.bodies = []

    def request(self, method, path, body=None, params=None, ok=(200, 201), retries=None):
        self.bodies.append((method, path, body))
        if path.endswith("/_refresh"):
            return 200, {}
        if "composite" not in json.dumps(body):
            return 200, {"aggregations": {"newest": {"value": 1700000100000.0}}}
        return 200, self.pages.pop(0)

    def close(self):
        pass


def _bucket(storm, comp, task, name, value, ts):
    return {"key": {"s": storm, "c": comp, "t": task, "n": name},
            "last": {"hits": {"hits": [{"_source": {"value": value, "timestamp": ts}}]}}}


def test_latest_metrics_sums_the_latest_value_of_each_task():
    pages = [{"aggregations": {"k": {"after_key": {"x": 1}, "buckets": [
        _bucket("crawl-1", "fetcher", 3, "fetched", 10.0, "2023-11-14T22:14:50.000Z"),
        _bucket("crawl-1", "fetcher", 4, "fetched", 5.0, "2023-11-14T22:15:00.000Z")]}}},
        {"aggregations": {"k": {"after_key": {"x": 2}, "buckets": [
            _bucket("crawl-1", "fetcher", 4, "queued", 2.5, "2023-11-14T22:15:00.000Z"),
            _bucket("crawl-1", "spout", 1, "emitted", 40.0, "2023-11-14T22:14:55.000Z")]}}},
        {"aggregations": {"k": {"buckets": []}}}]
    client = FakeClient(pages)
    out = R.latest_metrics({"opensearch.metrics.index.name": "m", "metrics.interval": 10}, client)
    assert out["newest"] == "2023-11-14T22:15:00.000Z" and out["storm_ids"] == ["crawl-1"]
    assert out["components"]["fetcher"] == {"tasks": 2, "newest": "2023-11-14T22:15:00.000Z",
                                            "counters": {"fetched": 15, "queued": 2.5}}
    assert out["components"]["spout"]["counters"] == {"emitted": 40}
    # only documents of the last 60 s before the newest one (3 intervals, at least 60 s)
    query = [b for _, _, b in client.bodies if b and "composite" in json.dumps(b)][0]["query"]
    assert query["range"]["timestamp"]["gte"] == 1700000100000 - 60000
    lines = R.format_latest(out)
    assert lines[1] == "  fetcher (2 tasks, newest 2023-11-14T22:15:00.000Z):"
    assert lines[2] == "    fetched=15 queued=2.5"


def test_latest_metrics_without_index_or_node():
    class NoIndex(FakeClient):
        def request(self, method, path, body=None, params=None, ok=(200,), retries=None):
            return 404, None
    out = R.latest_metrics({}, NoIndex([]))
    assert out["components"] == {} and out["index"] == "metrics"
    assert R.format_latest(out)[0].startswith("metrics: none yet")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = R.latest_metrics({"opensearch.addresses": f"127.0.0.1:{port}", "opensearch.max.retries": 0})
    assert "cannot reach OpenSearch" in out["error"]
    assert R.format_latest(out)[0].startswith("metrics: unavailable")


# ---- the component mixin ------------------------------------------------------------------------

def test_component_snapshot_and_throttled_report_error():
    from owler.task.component import OwlerComponent

    class Comp(OwlerComponent):
        def __init__(self):
            self.sent = []

        def send_message(self, msg):
            self.sent.append(msg)

        def collect(self, counters, gauges):
            counters["engine/x"] = 7
            gauges["depth"] = 3

    old = signal.getsignal(signal.SIGTERM)
    try:
        c = Comp()
        c.owler_setup({"metrics.errors.interval": 60}, {"taskid": 2, "componentid": "status"})
    finally:
        signal.signal(signal.SIGTERM, old)
    assert c.metrics is None  # metrics.opensearch is off by default
    c.count("committed", 4)
    c.report_error("frontier unavailable: cannot reach OpenSearch")
    c.report_error("frontier unavailable again")
    assert c.sent == [{"command": "error", "msg": "frontier unavailable: cannot reach OpenSearch"}]
    counters, gauges = c.snapshot()
    assert counters == {"committed": 4, "engine/x": 7, "errors/reported": 1, "errors/suppressed": 1}
    assert gauges == {"depth": 3}
    assert c.metrics_snapshot()["depth"] == 3
