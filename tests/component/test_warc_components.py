"""The warc2warc components as real multilang subprocesses: WARCSpout (which copies every
record) and WARCParserBolt."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from owler import outlinks as outlink
from owler import wire
from owler.conf import load_conf
from owler.warc.warc2warc.progress_sqlite import Progress
from tests import warcgen as G
from tests.component.multilang import ShellComponent


@pytest.fixture
def conf(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.warc.gz").write_bytes(G.per_record_gzip(G.site_records("a.example", 2)))
    c = load_conf()
    c.update({"warc2warc.input": str(inp), "warc.dir": str(tmp_path / "warc"),
              "warc.prefix": "CP", "owler.work.dir": str(tmp_path),
              "warc2warc.ack.flush": 0, "owler.run.dir": str(tmp_path / "run"),
              "frontier.sqlite.path": str(tmp_path / "frontier.sqlite")})
    return c


#: seconds after which something awaited counts as never happening (a hang), not a speed bound
HANG = 60.0


def emits(msgs, stream=None):
    return [m for m in msgs if m.get("command") == "emit"
            and (stream is None or m.get("stream", "default") == stream)]


def test_spout_copies_every_record_and_emits_the_responses_until_acked(conf, tmp_path):
    spout = ShellComponent("spouts.warc.WARCSpout", conf, tmp_path, "spout", task=3)
    try:
        got = []
        deadline = time.monotonic() + HANG
        while len(got) < 2:  # released once recorded (warc2warc.copy.interval, 0.5 s)
            assert time.monotonic() < deadline, f"{len(got)} of 2 responses within {HANG:g} s"
            got += emits(spout.next())  # a call that emits nothing rests 50 ms (WARCSpout)
        assert len(got) == 2 and {m.get("stream", "default") for m in got} == {"default"}
        url, content, md, key = got[0]["tuple"]
        assert url == "http://a.example/page0.html"
        assert key == "a.example"  # its queue (partition.url.mode), which the parser is grouped on
        assert gzip.decompress(wire.decode_content(content)).startswith(b"WARC/1.1")
        spout.spout_ack(got[0]["id"])
        spout.spout_fail(got[1]["id"])
        again = []
        for _ in range(5):
            again += emits(spout.next())
        assert [m["id"] for m in again] == [got[1]["id"]]  # only the failed one comes again
        assert again[0]["tuple"][2][wire.RAW_REPLAYED] == ["true"]
        spout.spout_ack(got[1]["id"])  # handled once its sync came back
        assert emits(spout.next()) == []  # records the acks (warc2warc.ack.flush 0); nothing left
    finally:
        assert spout.close() == 0
    s = Progress(tmp_path / "warc2warc.sqlite").summary()
    assert s["files"]["done"] == 1 and s["records"] == 5
    stats = json.loads((tmp_path / "run" / "spout-3.json").read_text())["counters"]
    assert stats["warc/records"] == 5 and stats["warc/commits"] >= 1  # the replay: not copied
    files = list((tmp_path / "warc").glob("CP-*-03-*.warc.gz"))  # this task's partition
    assert len(files) == 1
    records = gzip.decompress(files[0].read_bytes())
    source = gzip.decompress((tmp_path / "in" / "a.warc.gz").read_bytes())
    assert records.endswith(source)  # after the output's own warcinfo, byte for byte
    assert records.count(b"WARC-Type: warcinfo") == 2


def test_parser_filters_and_blacklists_its_outlinks_itself(conf, tmp_path):
    """The links of an archived page and a redirection's target pass the URL filters and the
    blacklist in the parser's process (no URLFilterBolt or BlacklistBolt in warc2warc); what is
    left goes to the status updater, each rejection counted."""
    bl = tmp_path / "blacklists"
    bl.mkdir()
    (bl / "spam.txt").write_text("spam.example\n")
    md = {"warc.file.id": ["1"], "warc.record.offset": ["0"], "warc.file.name": ["x"]}
    page = G.record("response", "http://b.example/p", G.http_response(G.page("p", [
        "HTTP://B.example:80/a/../q?utm_source=x", "http://www.spam.example/x", "/a/a/a/a/a/a",
        "/q"])))
    moved = G.record("response", "http://b.example/old", G.http_response(
        b"", status="301 Moved Permanently", headers=[("Location", "http://spam.example/new")]))
    moved2 = G.record("response", "http://b.example/old2", G.http_response(
        b"", status="302 Found", headers=[("Location", "/New")]))
    parser = ShellComponent("bolts.warc_parser.WARCParserBolt",
                            {**conf, "blacklist.dir": str(bl)}, tmp_path, "parser")
    try:
        parser.process(["http://b.example/p", parser.content(page), md], tid="p1")
        out = emits(parser.until_acked("p1"), "outlinks")
        assert [outlink.decode(m["tuple"][2]) for m in out] == [[("http://b.example/q", "")]]
        parser.process(["http://b.example/old", parser.content(moved), md], tid="p2")
        msgs = parser.until_acked("p2")
        assert not emits(msgs, "outlinks")  # the blacklisted target is not followed
        assert emits(msgs, "status")[0]["tuple"][2] == "REDIRECTION"
        parser.process(["http://b.example/old2", parser.content(moved2), md], tid="p3")
        out = emits(parser.until_acked("p3"), "outlinks")
        assert [outlink.decode(m["tuple"][2]) for m in out] == [[("http://b.example/New", "")]]
    finally:
        parser.close()  # writes its stats file
    counters = json.loads((tmp_path / "run" / "parser-1.json").read_text())["counters"]
    assert counters["blacklisted/spam"] == 2 and counters["accepted"] == 2
    assert sum(n for k, n in counters.items() if k.startswith("rejected/")) >= 1


def test_parser_bolt(conf, tmp_path):
    raw = G.record("response", "http://b.example/p", G.http_response(
        G.page("p", ["/q", "http://c.example/"])))
    md = {"warc.file.id": ["1"], "warc.record.offset": ["0"], "warc.file.name": ["x"],
          "fetch.time": ["1714564800.0"]}
    parser = ShellComponent("bolts.warc_parser.WARCParserBolt", conf, tmp_path, "parser")
    try:
        parser.process(["http://b.example/p", parser.content(gzip.compress(raw)), md],
                       tid="p1")
        msgs = parser.until_acked("p1")
        status = emits(msgs, "status")[0]["tuple"]
        assert status[2] == "FETCHED" and status[1]["fetch.time"] == ["1714564800.0"]
        assert outlink.decode(emits(msgs, "outlinks")[0]["tuple"][2]) == [
            ("http://b.example/q", ""), ("http://c.example/", "")]  # anchors: nobody keeps them
        parser.process(["", parser.content(G.record("warcinfo", None, b"x: y\r\n")),
                        md], tid="p2")
        assert not emits(parser.until_acked("p2"))  # archived only
        # a link this task sent recently is not sent again, unless the record is a replay
        raw2 = G.record("response", "http://b.example/r", G.http_response(
            G.page("r", ["/q", "/s"])))
        parser.process(["http://b.example/r", parser.content(raw2), md], tid="p3")
        assert outlink.decode(emits(parser.until_acked("p3"), "outlinks")[0]["tuple"][2]) == [
            ("http://b.example/s", "")]
        parser.process(["http://b.example/p", parser.content(raw),
                        {**md, wire.RAW_REPLAYED: ["true"]}], tid="p4")
        msgs = parser.until_acked("p4")
        assert outlink.decode(emits(msgs, "outlinks")[0]["tuple"][2]) == [
            ("http://b.example/q", ""), ("http://c.example/", "")]
        assert wire.RAW_REPLAYED not in emits(msgs, "status")[0]["tuple"][1]
    finally:
        parser.close()
