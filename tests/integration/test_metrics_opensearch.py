"""Crawl metrics on a real OpenSearch node (the session's `opensearch` fixture): StormCrawler's
metrics documents and template, a conflicting template or mapping, a node that goes away (through a
TCP proxy this test can cut), a component writing its counters as a real multilang subprocess, and
`owler status --json` showing the latest values."""

from __future__ import annotations

import json
import logging
import time
import uuid

from owler.conf import load_conf
from owler.frontier import open_frontier
from owler.task import metrics as M
from tests.component.multilang import ShellComponent
from tests.integration.waiting import returns, wait_for
from tests.netproxy import Proxy


def _index(prefix: str) -> str:
    return f"owlertest-{prefix}-{uuid.uuid4().hex[:8]}"


def _conf(port: int, index: str, **more) -> dict:
    return {"opensearch.metrics.addresses": f"127.0.0.1:{port}", "opensearch.connect.timeout": 1,
            "opensearch.socket.timeout": 10, "opensearch.metrics.index.name": index, **more}


def _search(node, index: str, query: dict | None = None, size: int = 1000) -> list[dict]:
    node.request("POST", f"/{index}/_refresh")
    status, data = node.request("POST", f"/{index}/_search",
                                {"size": size, "query": query or {"match_all": {}},
                                 "sort": [{"timestamp": "asc"}]})
    assert status == 200, data
    return [h["_source"] for h in data["hits"]["hits"]]


def _wait_docs(node, index: str, pred, timeout: float = 120.0) -> list[dict]:
    def matching():
        status, _ = node.request("HEAD", f"/{index}")
        docs = _search(node, index) if status == 200 else []
        return docs if pred(docs) else None

    return wait_for(f"the documents awaited in {index}", matching, timeout, every=0.3)


SRC = M.Source("fetcher", 3, "worker1", 6701, "itest-1-1700000000")


def test_documents_and_template(opensearch):
    index = _index("metrics")
    sink = M.MetricsSink(_conf(opensearch.port, index))
    ts = time.time()
    try:
        sink.offer(M.documents(SRC, {"fetched": 12, "http/200": 11, "queued": 2.5}, ts))
        assert sink.flush(30)
    finally:
        sink.close()
    status, tpl = opensearch.request("GET", f"/_index_template/owler-{index}")
    assert status == 200
    assert tpl["index_templates"][0]["index_template"]["index_patterns"] == [f"{index}*"]
    _, mapping = opensearch.request("GET", f"/{index}/_mapping")
    props = mapping[index]["mappings"]["properties"]
    assert {k: v["type"] for k, v in props.items()} == {
        "name": "keyword", "value": "double", "srcComponent": "keyword", "srcTaskId": "long",
        "srcWorkerHost": "keyword", "srcWorkerPort": "long", "srcStormId": "keyword",
        "timestamp": "date"}
    docs = {d["name"]: d for d in _search(opensearch, index)}
    assert set(docs) == {"fetched", "http/200", "queued"}
    d = docs["fetched"]
    assert d["value"] == 12.0 and isinstance(d["srcTaskId"], int) and d["srcWorkerPort"] == 6701
    assert (d["srcComponent"], d["srcWorkerHost"], d["srcStormId"]) == ("fetcher", "worker1",
                                                                        "itest-1-1700000000")
    assert d["timestamp"] == M.iso_millis(ts) and d["timestamp"].endswith("Z")
    # numbers aggregate as numbers
    _, agg = opensearch.request("POST", f"/{index}/_search", {
        "size": 0, "aggs": {"v": {"sum": {"field": "value"}}}})
    assert agg["aggregations"]["v"]["value"] == 25.5
    # installing again is harmless (every component task does it once)
    sink = M.MetricsSink(_conf(opensearch.port, index))
    try:
        sink.offer(M.documents(SRC, {"fetched": 13}, time.time()))
        assert sink.flush(30) and sink.template_error is None and sink.mapping_error is None
    finally:
        sink.close()


def test_conflicting_template_or_mapping_is_a_clear_error_and_writing_goes_on(opensearch, caplog):
    caplog.set_level(logging.WARNING, "owler.task.metrics")
    # another template claims the same index names with the same priority
    index = _index("tconf")
    status, data = opensearch.request("PUT", f"/_index_template/other-{index}", {
        "index_patterns": [f"{index}*"], "template": {"mappings": {"properties": {
            "value": {"type": "double"}}}}})
    assert status == 200, data
    sink = M.MetricsSink(_conf(opensearch.port, index))
    try:
        sink.offer(M.documents(SRC, {"fetched": 1}, time.time()))
        assert sink.flush(30)
    finally:
        sink.close()
    assert sink.template_error and sink.sent == 1
    assert f"cannot install the index template 'owler-{index}'" in caplog.text
    # an index whose mapping cannot take the documents
    index = _index("mconf")
    status, data = opensearch.request("PUT", f"/{index}", {"mappings": {"properties": {
        "timestamp": {"type": "long"}, "srcComponent": {"type": "text"}}}})
    assert status == 200, data
    sink = M.MetricsSink(_conf(opensearch.port, index))
    try:
        sink.offer(M.documents(SRC, {"fetched": 1, "bytes": 2}, time.time()))
        assert sink.flush(30)
    finally:
        sink.close()
    assert sink.rejected == 2 and sink.sent == 0
    assert "conflicting mapping (srcComponent is text (expected keyword); timestamp is long" \
        in caplog.text
    assert "refused 2 documents (mapper_parsing_exception" in caplog.text


def test_a_node_going_away_never_blocks_and_dropped_documents_are_reported(opensearch, caplog):
    caplog.set_level(logging.WARNING, "owler.task.metrics")
    index = _index("away")
    proxy = Proxy(opensearch.port)
    sink = M.MetricsSink(_conf(proxy.port, index), max_queue=20, min_backoff=0.1, max_backoff=0.5)
    values = {"fetched": 0}

    def snapshot():  # what a component reports: its counters and the sink's
        return {**values, **sink.stats()}

    rep = M.MetricsReporter(SRC, snapshot, sink, interval=3600)  # reported by hand below
    try:
        rep.report()
        assert sink.flush(30) and sink.sent == 4
        proxy.cut()  # the node goes away

        def twenty_reports():
            for i in range(1, 21):
                values["fetched"] = i
                rep.report(ts=time.time() + i)  # 4 documents each

        # the component is never held up: every report returns while the node is away (it
        # comes back below, after them), none waits for its documents to be written
        returns("a report while the node is away", twenty_reports)
        # the writer tried again (back-off 0.1 s to 0.5 s) and failed again: the node is away
        wait_for("a second failed request", lambda: sink.failed_requests >= 2)
        # 80 documents offered, none written: 20 kept (queued or in the failing request)
        assert sink.sent == 4 and sink.dropped == 60 and sink.queued == 20
        assert "cannot write to OpenSearch" in caplog.text
        proxy = Proxy(opensearch.port, port=proxy.port)  # the node is back
        values["fetched"] = 21
        last = time.time() + 30
        rep.report(ts=last)  # this snapshot carries the drop count
        assert sink.flush(60)
        docs = _search(opensearch, index, {"term": {"name": "metrics/dropped"}})
        assert (docs[-1]["timestamp"], docs[-1]["value"]) == (M.iso_millis(last), 60.0)
        fetched = _search(opensearch, index, {"term": {"name": "fetched"}})
        assert (fetched[-1]["timestamp"], fetched[-1]["value"]) == (M.iso_millis(last), 21.0)
    finally:
        rep.close()
        proxy.cut()

    # a node that accepts connections and never answers: the writer waits, the caller does not.
    # The proxy answers nothing until it is cut, and the socket timeout (an hour) outlasts the
    # test: whatever returns below returns while the writer's request is held
    hung = Proxy(opensearch.port, hang=True)
    sink = M.MetricsSink(_conf(hung.port, index, **{"opensearch.socket.timeout": 3600}),
                         max_queue=10)
    try:
        sink.offer(M.documents(SRC, {"a": 1}, time.time()))
        assert hung.held.wait(120), "the sink sent no request within 120 s"

        def thirty_offers():
            for i in range(30):
                sink.offer(M.documents(SRC, {"a": i}, time.time() + i))

        returns("an offer while the writer's request is held", thirty_offers)
        # the request neither ended nor failed: the document in it and the 9 newest queued
        assert (sink.sent, sink.failed_requests) == (0, 0) and hung.connections == 1
        assert sink.queued == 10 and sink.dropped == 21
        # shutting down does not wait for the stalled request either (it waits 1 s for the
        # writer, which is still in its request, and leaves it)
        returns("closing the sink", lambda: sink.close(timeout=1.0))
        assert (sink.sent, sink.failed_requests) == (0, 0)
    finally:
        hung.cut()


def test_component_writes_its_counters_and_owler_status_shows_them(opensearch, tmp_path):
    index = _index("comp")
    conf = load_conf()
    conf.update({"frontier.sqlite.path": str(tmp_path / "f.sqlite"),
                 "owler.run.dir": str(tmp_path / "run"), "status.updater.commit.interval": 0.2,
                 "metrics.opensearch": True, "metrics.interval": 0.5,
                 "services.opensearch.port": opensearch.port,
                 "opensearch.metrics.index.name": index, "storm.id": "itest-2-1700000000"})
    f = open_frontier(conf)
    f.close()
    bolt = ShellComponent("bolts.status_updater.StatusUpdaterBolt", conf, tmp_path, "status")
    try:
        for i in range(3):
            bolt.process([f"http://example.com/{i}", {}, "FETCHED"], tid=f"s{i}", stream="status")
        # ticks as Storm sends them, until the commit interval (0.2 s) has passed and a tick
        # committed the three
        bolt.read_until(lambda m: m.get("command") in ("ack", "fail") and m.get("id") == "s2",
                        timeout=120, tick_every=0.5)
        # the gauges come with the snapshots after the commit (the tick sets "pending"): wait
        # for them too, not only for the first snapshot that counted the commit
        names = {"FETCHED", "commits", "commit_ms", "pending", "metrics/sent"}
        docs = _wait_docs(opensearch, index, lambda ds: any(
            d["name"] == "committed" and d["value"] == 3.0 for d in ds)
            and names <= {x["name"] for x in ds})
    finally:
        assert bolt.close() == 0
    d = next(d for d in docs if d["name"] == "committed")
    assert (d["srcComponent"], d["srcTaskId"], d["srcStormId"]) == ("status", 1, "itest-2-1700000000")
    assert d["srcWorkerPort"] == -1  # no Storm worker JVM above the test's subprocess
    assert names <= {x["name"] for x in docs}
    # the stats file of `owler run` is written as before
    stats = json.loads((tmp_path / "run" / "status-1.json").read_text())
    assert stats["counters"]["committed"] == 3 and stats["counters"]["FETCHED"] == 3

    out = opensearch.owler("status", "--json", "-o", "metrics.opensearch=true",
                           "-o", f"opensearch.metrics.index.name={index}",
                           "-o", f"frontier.sqlite.path={tmp_path / 'f.sqlite'}")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["FETCHED"] == 3
    m = doc["metrics"]
    assert m["index"] == index and m["storm_ids"] == ["itest-2-1700000000"]
    status = m["components"]["status"]
    assert status["tasks"] == 1 and status["counters"]["committed"] == 3
    assert status["counters"]["FETCHED"] == 3 and status["newest"].endswith("Z")
    text = opensearch.owler("status", "-o", "metrics.opensearch=true",
                            "-o", f"opensearch.metrics.index.name={index}",
                            "-o", f"frontier.sqlite.path={tmp_path / 'f.sqlite'}")
    assert text.returncode == 0, text.stderr
    assert f"metrics (OpenSearch index '{index}'" in text.stdout
    assert "  status (1 task, newest " in text.stdout and "committed=3" in text.stdout
    # without metrics.opensearch, status is what it was
    plain = opensearch.owler("status", "--json", "-o", f"frontier.sqlite.path={tmp_path / 'f.sqlite'}")
    assert "metrics" not in json.loads(plain.stdout)

