"""URLFilterBolt, BlacklistBolt and PartitionerBolt as real multilang subprocesses."""

from __future__ import annotations

import pytest

from owler import outlinks as outlink
from owler.conf import load_conf
from tests.component.multilang import ShellComponent


@pytest.fixture
def conf(tmp_path):
    bl = tmp_path / "blacklists"
    bl.mkdir()
    (bl / "spam.txt").write_text("# spam\nspam.example\n0.0.0.0 ads.example.org\n")
    (bl / "optout.txt").write_text("https://optout.example.net/private/\n")
    c = load_conf()
    c["blacklist.dir"] = str(bl)
    return c


def emits(msgs, stream):
    return [m for m in msgs if m.get("command") == "emit" and m.get("stream", "default") == stream]


def test_urlfilter_bolt_filters_and_normalizes_one_batch(conf, tmp_path):
    bolt = ShellComponent("bolts.urlfilter.URLFilterBolt", conf, tmp_path, "urlfilter")
    try:
        outlinks = [["HTTP://Example.COM:80/a/../b?utm_source=x#frag", "first B"], "mailto:x@y.z",
                    "http://example.com/" + "/".join(["a"] * 6), ["http://example.com/b", "again"]]
        bolt.process(["http://example.com/", {"depth": ["0"]}, outlinks], tid="o1",
                     stream="outlinks")
        msgs = bolt.until_acked("o1")
        out = emits(msgs, "outlinks")
        assert len(out) == 1, msgs
        # normalized, deduplicated, the first anchor kept with the normalized URL
        assert outlink.decode(out[0]["tuple"][2]) == [("http://example.com/b", "first B")]
        assert out[0]["anchors"] == ["o1"]
        assert msgs[-1] == {"command": "ack", "id": "o1"}
        # nothing accepted: nothing emitted, still acked
        bolt.process(["http://example.com/", {}, ["javascript:void(0)"]], tid="o2", stream="outlinks")
        msgs = bolt.until_acked("o2")
        assert emits(msgs, "outlinks") == [] and msgs[-1]["command"] == "ack"
    finally:
        bolt.close()


def test_blacklist_bolt_drops_listed_hosts_subdomains_and_prefixes(conf, tmp_path):
    bolt = ShellComponent("bolts.blacklist.BlacklistBolt", conf, tmp_path, "blacklist")
    try:
        links = ["http://spam.example/", "http://www.spam.example/x", "http://ads.example.org/",
                 "https://optout.example.net/private/page", "https://optout.example.net/public",
                 ["http://fine.example/", "fine"], ["http://spam.example/y", "spam"]]
        bolt.process(["http://src.example/", {}, links], tid="b1", stream="outlinks")
        msgs = bolt.until_acked("b1")
        out = emits(msgs, "outlinks")
        assert outlink.decode(out[0]["tuple"][2]) == [("https://optout.example.net/public", ""),
                                                     ("http://fine.example/", "fine")]
    finally:
        bolt.close()


def test_partitioner_bolt_adds_pay_level_domain_key(conf, tmp_path):
    bolt = ShellComponent("bolts.partitioner.PartitionerBolt", conf, tmp_path, "partitioner")
    try:
        bolt.process(["http://www.bbc.co.uk/news", {"a": ["1"]}], tid="p1")
        msgs = bolt.until_acked("p1")
        assert emits(msgs, "default")[0]["tuple"] == ["http://www.bbc.co.uk/news", "bbc.co.uk", {"a": ["1"]}]
    finally:
        bolt.close()
