"""Operational errors reach Storm (the multilang ``error`` command, shown in the Storm UI), throttled,
and counters still go to the stats file: status updater and spout as real multilang subprocesses
with an OpenSearch frontier that cannot be reached, a WARC writer that cannot write."""

from __future__ import annotations

import json
import socket
import time

import pytest

from owler import wire
from owler.conf import load_conf
from tests.component.multilang import ShellComponent
from tests.component.test_crawl_bolts import PAGE, page_md


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def conf(tmp_path):
    c = load_conf()
    c.update({"frontier.backend": "opensearch", "services.opensearch.port": _free_port(),
              "opensearch.max.retries": 0, "opensearch.connect.timeout": 1,
              "opensearch.status.flushInterval": "200ms", "spout.min.delay.queries": 0,
              "metrics.errors.interval": 60, "owler.run.dir": str(tmp_path / "run"),
              "warc.dir": str(tmp_path / "warc")})
    return c


def errors(msgs):
    return [m["msg"] for m in msgs if m.get("command") == "error"]


def stats(tmp_path, name: str, task: int = 1, wait: float = 10.0, until=lambda d: True) -> dict:
    path = tmp_path / "run" / f"{name}-{task}.json"
    deadline = time.time() + wait
    while True:
        try:
            doc = json.loads(path.read_text())
            if until(doc):
                return doc
        except (OSError, ValueError):
            pass
        if time.time() > deadline:
            raise AssertionError(f"no stats file {path} as expected")
        time.sleep(0.1)


def test_status_updater_reports_an_unavailable_frontier_once_and_counts(conf, tmp_path):
    bolt = ShellComponent("bolts.status_updater.StatusUpdaterBolt", conf, tmp_path, "status")
    try:
        bolt.process(["http://example.com/p", {}, "FETCHED"], tid="s1", stream="status")
        msgs = bolt.read_until(
            lambda m: m.get("command") in ("ack", "fail") and m.get("id") == "s1",
            timeout=20, tick_every=0.5)
        assert msgs[-1]["command"] == "fail"  # nothing written: Storm replays it
        (err,) = errors(msgs)
        assert err.startswith("frontier unavailable (retrying every 5 s): ") and "cannot reach" in err
        # the retry 5 s later fails again: logged and counted, not sent to Storm again (throttled)
        time.sleep(5.2)
        bolt.process(["http://example.com/q", {}, "FETCHED"], tid="s2", stream="status")
        msgs = bolt.read_until(
            lambda m: m.get("command") in ("ack", "fail") and m.get("id") == "s2",
            timeout=20, tick_every=0.5)
        assert msgs[-1]["command"] == "fail" and errors(msgs) == []
        time.sleep(2.1)
        bolt.tick()  # the stats file is written at most every 2 s
        doc = stats(tmp_path, "status", until=lambda d: d["counters"].get("commit_failed") == 2)
        c = doc["counters"]
        assert c["frontier_unavailable"] == 2 and c["FETCHED"] == 2
        assert c["errors/reported"] == 1 and c["errors/suppressed"] == 1
    finally:
        bolt.close()


def test_spout_reports_within_the_protocol(conf, tmp_path):
    spout = ShellComponent("spouts.frontier.FrontierSpout", conf, tmp_path, "spout")
    try:
        first = spout.next()  # what the spout sent before and during the first next, up to sync
        (err,) = errors(first)
        assert err.startswith("frontier unavailable (retrying every 5 s): ")
        for _ in range(3):  # no stray sync: every next still ends with exactly its own sync
            msgs = spout.next()
            assert [m["command"] for m in msgs] == ["sync"]
        doc = stats(tmp_path, "spout", until=lambda d: "frontier_unavailable" in d["counters"])
        assert doc["counters"]["errors/reported"] == 1 and doc["gauges"]["in_flight"] == 0
    finally:
        spout.close()


def test_warc_writer_reports_a_write_failure(conf, tmp_path):
    conf["warc.dir"] = str(tmp_path / "warc")
    bolt = ShellComponent("bolts.warc_writer.WARCWriterBolt", conf, tmp_path, "warc")
    try:
        bolt.process(["http://example.com/p", wire.encode_content(PAGE), page_md()], tid="w1")
        assert bolt.until_acked("w1")[-1]["command"] == "ack"
        # a record the writer cannot take (its fetch time is not a number): failed and reported
        bad = {**page_md(), wire.RAW_FETCH_TIME: ["yesterday"]}
        bolt.process(["http://example.com/q", wire.encode_content(PAGE), bad], tid="w2")
        msgs = bolt.until_acked("w2")
        assert msgs[-1]["command"] == "fail"
        (err,) = errors(msgs)
        assert err.startswith("cannot write WARC records for http://example.com/q: ValueError")
        time.sleep(2.1)
        bolt.tick()  # the stats file is written at most every 2 s
        doc = stats(tmp_path, "warc", until=lambda d: "write_failed" in d["counters"])
        assert doc["counters"]["records"] == 1 and doc["counters"]["errors/reported"] == 1
    finally:
        bolt.close()
