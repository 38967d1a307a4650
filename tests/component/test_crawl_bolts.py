"""Spout, fetcher (with its WARC archiver), parser and status updater as real multilang
subprocesses."""

from __future__ import annotations

import json
import time

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler import outlinks as outlink
from owler import wire
from owler.conf import load_conf
from owler.constants import Status
from owler.frontier import StatusUpdate, open_frontier
from tests.component.multilang import ShellComponent
from tests.farm.harness import FarmProcess, min_interval


@pytest.fixture
def conf(tmp_path):
    c = load_conf()
    c.update({"frontier.sqlite.path": str(tmp_path / "f.sqlite"), "warc.dir": str(tmp_path / "warc"),
              "http.allow.private.addresses": True, "fetcher.server.delay": 0.2,
              "http.timeout": 2000, "spout.min.delay.queries": 0, "owler.run.dir": str(tmp_path / "run")})
    return c


def emits(msgs, stream="default"):
    return [m for m in msgs if m.get("command") == "emit" and m.get("stream", "default") == stream]


PAGE = (b'<html><head><title>T</title></head><body><a href="/a">a</a>'
        b'<a href="http://other.example/b" rel="nofollow">b</a><a href="c?x=1#f">c</a></body></html>')


def page_md():
    return {wire.RAW_HEADERS: ["Content-Type: text/html; charset=utf-8"],
            wire.RAW_STATUS_LINE: ["HTTP/1.1 200 OK"], wire.RAW_FETCH_TIME: [repr(time.time())],
            wire.RAW_REQUEST: ["GET /p HTTP/1.1\r\nHost: example.com\r\n\r\n"], "depth": ["0"]}


def test_parser_emits_status_and_one_outlinks_batch(conf, tmp_path):
    # anchors are stored (metadata.persist): the parser sends them with their links
    bolt = ShellComponent("bolts.parser.ParserBolt",
                          {**conf, "metadata.persist": conf["metadata.persist"] + ["anchors"]},
                          tmp_path, "parser")
    try:
        bolt.process(["http://example.com/p", bolt.content(PAGE), page_md()], tid="p1")
        msgs = bolt.until_acked("p1")
        status = emits(msgs, "status")
        assert len(status) == 1 and status[0]["tuple"][2] == "FETCHED"
        md = status[0]["tuple"][1]
        assert md["parse.title"] == ["T"] and "signature" in md
        assert not [k for k in md if k.startswith("_raw.")]  # transient keys never reach the frontier
        out = emits(msgs, "outlinks")
        assert len(out) == 1
        # anchor texts travel with their links (track.anchors); the nofollow link is dropped
        assert outlink.decode(out[0]["tuple"][2]) == [("http://example.com/a", "a"),
                                                     ("http://example.com/c?x=1", "c")]
        # garbage content: an ERROR status with error.* keys, the bolt lives on
        bolt.process(["http://example.com/q", "Z???", page_md()], tid="p2")
        msgs = bolt.until_acked("p2")
        st = emits(msgs, "status")[0]["tuple"]
        assert st[2] == "ERROR" and "error.message" in st[1]
        bolt.process(["http://example.com/img", bolt.content(b"\x89PNG\r\n\x1a\n" + bytes(300)),
                      {**page_md(), wire.RAW_HEADERS: ["Content-Type: image/png"]}], tid="p3")
        st = emits(bolt.until_acked("p3"), "status")[0]["tuple"]
        assert st[2] == "FETCHED" and st[1]["parse.mimetype"] == ["image/png"]
    finally:
        bolt.close()


def test_parser_passes_its_outlinks_through_the_url_filters_and_the_blacklist(conf, tmp_path):
    """As StormCrawler's parser: normalised, filtered (urlfilters.json) and blacklisted in the
    parser's process; what is left goes straight to the status updater, rejections counted."""
    bl = tmp_path / "blacklists"
    bl.mkdir()
    (bl / "spam.txt").write_text("spam.example\n")
    page = (b'<html><body><a href="HTTP://Example.COM:80/a/../b?utm_source=x">b</a>'
            b'<a href="http://www.spam.example/x">spam</a><a href="mailto:x@y.z">mail</a>'
            b'<a href="/' + b"/".join([b"a"] * 6) + b'">deep</a><a href="/b">again</a></body></html>')
    bolt = ShellComponent("bolts.parser.ParserBolt", {**conf, "blacklist.dir": str(bl)}, tmp_path,
                          "parser")
    try:
        bolt.process(["http://example.com/p", bolt.content(page), page_md()], tid="p1")
        out = emits(bolt.until_acked("p1"), "outlinks")
        assert len(out) == 1
        assert outlink.decode(out[0]["tuple"][2]) == [("http://example.com/b", "")]  # no anchors kept
    finally:
        bolt.close()  # writes its stats file
    counters = json.loads((tmp_path / "run" / "parser-1.json").read_text())["counters"]
    assert counters["blacklisted/spam"] == 1 and counters["accepted"] == 1
    assert sum(n for k, n in counters.items() if k.startswith("rejected/")) >= 1


def test_a_restarted_parser_marks_a_near_duplicate_of_a_page_the_frontier_holds(conf, tmp_path):
    """The near-duplicate memory of a host the parser meets first is seeded from the frontier by
    the page's key (owler.parse.simhash.FrontierSeeds): what a task before it parsed counts."""
    body = "".join(f"<p>paragraph {i} of a long article about crawling the web</p>"
                   for i in range(40)).encode()
    first = ShellComponent("bolts.parser.ParserBolt", conf, tmp_path / "1", "parser")
    try:
        first.process(["http://example.com/1", first.content(b"<html><body>" + body), page_md(),
                       "example.com"], tid="p1")
        md = emits(first.until_acked("p1"), "status")[0]["tuple"][1]
    finally:
        first.close()
    with open_frontier(conf) as f:  # as the status updater writes it
        f.apply_updates([StatusUpdate("http://example.com/1", Status.FETCHED, md,
                                      time.time() + 86400, "example.com")])
    bolt = ShellComponent("bolts.parser.ParserBolt", conf, tmp_path / "2", "parser")
    near = b"<html><body>" + body.replace(b"paragraph 7 of", b"paragraph seven of")
    try:
        bolt.process(["http://example.com/2", bolt.content(near), page_md(), "example.com"],
                     tid="p2")
        st = emits(bolt.until_acked("p2"), "status")[0]["tuple"][1]
        assert st["near.duplicate.of"] == ["http://example.com/1"]
        # a tuple without the key (an older topology's): the key from partition.url.mode
        with open_frontier(conf) as f:
            f.apply_updates([StatusUpdate("http://other.example/1", Status.FETCHED, md,
                                          time.time() + 86400, "other.example")])
        bolt.process(["http://other.example/2", bolt.content(near), page_md()], tid="p3")
        st = emits(bolt.until_acked("p3"), "status")[0]["tuple"][1]
        assert st["near.duplicate.of"] == ["http://other.example/1"]
    finally:
        bolt.close()  # writes its stats file
    counters = json.loads((tmp_path / "run" / "parser-1.json").read_text())["counters"]  # the 2nd
    assert counters["simhash/seeded_hosts"] == 2 and counters["simhash/seeded"] == 2
    assert counters["simhash/seed_failed"] == 0


def test_a_parser_whose_frontier_cannot_be_opened_parses_on(conf, tmp_path):
    (tmp_path / "adir").mkdir()  # the frontier's path is a directory: it cannot be opened
    bolt = ShellComponent("bolts.parser.ParserBolt",
                          {**conf, "frontier.sqlite.path": str(tmp_path / "adir")}, tmp_path,
                          "parser")
    body = "".join(f"<p>paragraph {i} of a long article</p>" for i in range(40)).encode()
    try:
        bolt.process(["http://example.com/1", bolt.content(b"<html><body>" + body), page_md(),
                      "example.com"], tid="p1")
        st = emits(bolt.until_acked("p1"), "status")[0]["tuple"]
        assert st[2] == "FETCHED" and len(st[1]["simhash"][0]) == 16
    finally:
        bolt.close()
    counters = json.loads((tmp_path / "run" / "parser-1.json").read_text())["counters"]
    assert counters["simhash/seed_failed"] == 1 and counters["FETCHED"] == 1


def test_status_updater_acks_after_commit_and_never_overwrites(conf, tmp_path):
    bolt = ShellComponent("bolts.status_updater.StatusUpdaterBolt", conf, tmp_path, "status")
    try:
        bolt.process(["http://example.com/p", {"depth": ["0"]}, "FETCHED"], tid="s1", stream="status")
        bolt.process(["http://example.com/p", {}, [["http://example.com/a", "the A"],
                                                    "http://example.com/p"]],
                     tid="o1", stream="outlinks")
        # nothing is acked before the commit, which the interval (ticks) triggers
        msgs = bolt.read_until(lambda m: m.get("id") == "o1", timeout=20, tick_every=0.5)
        assert [m["id"] for m in msgs if m.get("command") == "ack"] == ["s1", "o1"]
        f = open_frontier(conf)
        try:
            counts = f.counts()
            assert counts["FETCHED"] == 1 and counts["DISCOVERED"] == 1  # p stays FETCHED
            md_a = f.get("http://example.com/a").metadata
            assert md_a.get("depth") == ["1"]
            assert "anchors" not in md_a  # stored only when metadata.persist lists it
        finally:
            f.close()
    finally:
        bolt.close()


def test_status_updater_persists_anchors_when_asked(conf, tmp_path):
    conf["metadata.persist"] = list(conf["metadata.persist"]) + ["anchors"]
    bolt = ShellComponent("bolts.status_updater.StatusUpdaterBolt", conf, tmp_path, "status")
    try:
        bolt.process(["http://example.com/p", {}, [["http://example.com/a", "the A"],
                                                    "http://example.com/b"]],
                     tid="o1", stream="outlinks")
        bolt.read_until(lambda m: m.get("id") == "o1", timeout=20, tick_every=0.5)
        f = open_frontier(conf)
        try:
            assert f.get("http://example.com/a").metadata["anchors"] == ["the A"]
            assert "anchors" not in f.get("http://example.com/b").metadata
        finally:
            f.close()
    finally:
        bolt.close()


def test_fetcher_archives_a_page_before_passing_it_on_and_closes_on_sigterm(conf, tmp_path):
    with FarmProcess(1, tmp_path / "access.log") as farm:
        bolt = ShellComponent("bolts.fetcher.FetcherBolt", conf, tmp_path, "fetcher")
        try:
            url = farm.url(0, "/")
            msgs = fetch_all(bolt, [(url, url.split("/")[2].split(":")[0], "f1")])
            # the page goes on (and its tuple is acked) once its records are in the file
            assert [m["command"] for m in msgs if m.get("command") in ("emit", "ack")][-2:] == [
                "emit", "ack"]
            (page,) = emits(msgs)
            assert page["anchors"] == ["f1"] and page["tuple"][0] == url
            # with its queue's key, which the parsers are grouped on
            assert page["tuple"][3] == url.split("/")[2].split(":")[0]
            assert list((tmp_path / "warc").glob("*.open"))
        finally:
            assert bolt.close() == 0  # SIGTERM: the fetcher closes its WARC file and exits cleanly
    files = list((tmp_path / "warc").glob("*.warc.gz"))
    assert len(files) == 1 and not list((tmp_path / "warc").glob("*.open"))
    with open(files[0], "rb") as fh:
        recs = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
                for r in ArchiveIterator(fh, check_digests="raise")]
    assert [r[0] for r in recs] == ["warcinfo", "request", "response"]
    assert recs[2][1] == url and recs[2][2] == wire.decode_content(page["tuple"][1])


def test_spout_emits_due_urls_once_until_acked_or_failed(conf, tmp_path):
    f = open_frontier(conf)
    f.inject([("http://a.example/", {}), ("http://b.example/", {})], time.time())
    f.close()
    spout = ShellComponent("spouts.frontier.FrontierSpout", conf, tmp_path, "spout")
    try:
        got = []
        for _ in range(6):
            got += [m["tuple"][0] for m in emits(spout.next())]
        assert sorted(got) == ["http://a.example/", "http://b.example/"]  # never twice in flight
        spout.spout_fail("http://a.example/")
        again = []
        for _ in range(4):
            again += [m["tuple"][0] for m in emits(spout.next())]
        assert again == ["http://a.example/"]
    finally:
        spout.close()


def test_spout_emits_a_batch_per_next(conf, tmp_path):
    # every next is a round trip through the worker's pipe: the spout answers one with several
    # due URLs (FrontierSpout.batch), never more, each once
    f = open_frontier(conf)
    f.inject([(f"http://h{i}.example/", {}) for i in range(40)], time.time())
    f.close()
    spout = ShellComponent("spouts.frontier.FrontierSpout", conf, tmp_path, "spout")
    try:
        sizes, got = [], []
        while len(got) < 40:
            batch = [m["tuple"][0] for m in emits(spout.next())]
            assert batch or sizes, "the first next found nothing due"
            sizes.append(len(batch))
            got += batch
        assert max(sizes) == 16 and sizes[0] == 16
        assert sorted(got) == sorted(f"http://h{i}.example/" for i in range(40))
        assert emits(spout.next()) == []  # all in flight: nothing more
    finally:
        spout.close()


def test_fetcher_fetches_politely_and_reports_statuses(conf, tmp_path):
    with FarmProcess(6, tmp_path / "access.log") as farm:
        bolt = ShellComponent("bolts.fetcher.FetcherBolt", conf, tmp_path, "fetcher")
        try:
            urls = {"ok": farm.url(0, "/"), "robots": farm.url(1, "/"), "redir": farm.url(3, "/redirect"),
                    "missing": farm.url(3, "/missing")}
            for name, url in urls.items():
                key = url.split("/")[2].split(":")[0]
                bolt.process([url, key, {}], tid=name)
            seen = {}
            while len(seen) < 4:
                for m in bolt.read_until(lambda m: m.get("command") in ("ack", "fail"), timeout=20):
                    if m.get("command") == "emit":
                        seen.setdefault(m["anchors"][0], []).append(m)
                    elif m.get("command") in ("ack", "fail"):
                        assert m["command"] == "ack"
                        seen.setdefault(m["id"], [])
            page = emits(seen["ok"])[0]["tuple"]
            assert b"home 0" in wire.decode_content(page[1])
            assert emits(seen["robots"], "status")[0]["tuple"][1]["error.cause"] == ["robots.txt"]
            redir = emits(seen["redir"], "status")[0]["tuple"]
            assert redir[2] == "REDIRECTION" and redir[1]["_redirTo"] == [farm.url(3, "/final")]
            assert outlink.decode(emits(seen["redir"], "outlinks")[0]["tuple"][2]) == [
                (farm.url(3, "/final"), "")]
            missing = emits(seen["missing"], "status")[0]["tuple"]
            assert missing[2] == "FETCH_ERROR" and missing[1]["fetch.statusCode"] == ["404"]
        finally:
            bolt.close()


def test_two_spout_tasks_split_the_queues(conf, tmp_path):
    f = open_frontier(conf)
    urls = [f"http://h{i}.example{i % 7}.org/p{j}" for i in range(20) for j in range(2)]
    f.inject([(u, {}) for u in urls], time.time())
    f.close()
    spouts = [ShellComponent("spouts.frontier.FrontierSpout", conf, tmp_path / f"s{t}", "spout",
                             task=t, tasks=[1, 2]) for t in (1, 2)]
    try:
        got = [[], []]
        for _ in range(60):
            for k, s in enumerate(spouts):
                got[k] += [m["tuple"][0] for m in emits(s.next())]
        assert got[0] and got[1]
        assert not set(got[0]) & set(got[1])  # never the same URL from both tasks
        assert sorted(got[0] + got[1]) == sorted(urls)
        domains = [{u.split(".", 1)[1].split("/")[0] for u in g} for g in got]
        assert not domains[0] & domains[1]  # a queue (pay-level domain) belongs to one task
    finally:
        for s in spouts:
            s.close()


def fetch_all(bolt, items, timeout=20):
    """Submit ``(url, key, tid)`` items to a fetcher bolt; every message, once all are acked."""
    for url, key, tid in items:
        bolt.process([url, key, {}], tid=tid)
    msgs, done = [], set()
    while len(done) < len(items):
        for m in bolt.read_until(lambda m: m.get("command") in ("ack", "fail"), timeout=timeout):
            msgs.append(m)
            if m.get("command") in ("ack", "fail"):
                assert m["command"] == "ack", m
                done.add(m["id"])
    return msgs


def test_robots_file_skip_fetches_no_robots_txt_and_allows_everything(conf, tmp_path):
    with FarmProcess(1, tmp_path / "access.log") as farm:
        bolt = ShellComponent("bolts.fetcher.FetcherBolt", {**conf, "http.robots.file.skip": True},
                              tmp_path, "fetcher")
        try:
            host = farm.url(0).split("/")[2].split(":")[0]
            msgs = fetch_all(bolt, [(farm.url(0, "/private/secret"), host, "p")])  # disallowed
        finally:
            bolt.close()
        page = emits(msgs)[0]["tuple"]
        assert b"private" in wire.decode_content(page[1])
        # no robots.txt; the host's TDMRep file is asked all the same (tdmrep.enabled)
        assert [e["path"] for e in farm.access_log()] == ["/.well-known/tdmrep.json",
                                                          "/private/secret"]


def test_fetcher_queue_mode_makes_one_polite_queue_of_differently_keyed_urls(conf, tmp_path):
    # "": three queues, so no fetch waits for the delay (30 s, far beyond any machine's pace);
    # byHost: one queue, each fetch waits for it (0.6 s, a lower bound)
    delays = {"": 30.0, "byHost": 0.6}
    gaps = {}
    for mode in ("", "byHost"):  # the tuples' keys differ, as if partitioned by something else
        with FarmProcess(1, tmp_path / f"access{mode}.log") as farm:
            bolt = ShellComponent("bolts.fetcher.FetcherBolt",
                                  {**conf, "fetcher.server.delay": delays[mode],
                                   "fetcher.queue.mode": mode},
                                  tmp_path / f"run{mode}", "fetcher")
            try:
                msgs = fetch_all(bolt, [(farm.url(0, f"/page/{n}"), f"key{n}", f"t{n}")
                                        for n in (1, 2, 3)])
            finally:
                bolt.close()
            # the pages go on with the frontier's keys, not the fetcher's own queue
            assert sorted((m["tuple"][0].rsplit("/", 1)[1], m["tuple"][3])
                          for m in emits(msgs)) == [("1", "key1"), ("2", "key2"), ("3", "key3")]
            gaps[mode] = min_interval(farm.access_log())
    assert gaps[""] < delays[""]  # three queues: none waited for another's delay
    assert gaps["byHost"] >= delays["byHost"] * 0.95  # one queue per host: the delay holds
