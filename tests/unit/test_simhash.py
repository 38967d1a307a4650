"""SimHash and the per-host near-duplicate memory (owler.parse.simhash), on real pages: the
articles in the WARC samples of tests/data/warc (Common Crawl and wget crawls), not text written
for the test; the parser's near.duplicate.of (owler.parse.page); a host's memory seeded from the
frontier (FrontierSeeds: its rules over a stand-in frontier, and a restart over a real SQLite
frontier; the backends' queries themselves: test_frontier_sqlite.py and
integration/test_frontier_opensearch.py)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler import wire
from owler.constants import Status
from owler.frontier import RETRY_SECS, FrontierError, StatusUpdate
from owler.frontier.sqlite import SQLiteFrontier
from owler.parse.html import rough_text
from owler.parse.page import PageHandler
from owler.parse import simhash
from owler.parse.simhash import (MIN_FEATURES, SEED_SCAN, FrontierSeeds, NearDuplicates,
                                 distance, simhash64, to_hex)
from selectolax.lexbor import LexborHTMLParser

DATA = Path(__file__).resolve().parents[1] / "data" / "warc"


def real_pages() -> list[tuple[str, bytes]]:
    pages = {}
    for name in ("CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
                 "dolma-sample-0000.warc.gz", "dolma-sample-0001.warc.gz"):
        with open(DATA / name, "rb") as fh:
            for rec in ArchiveIterator(fh):
                ctype = rec.http_headers.get_header("Content-Type") if rec.http_headers else ""
                if rec.rec_type == "response" and "html" in (ctype or ""):
                    body = rec.content_stream().read()
                    if len(body) > 5000:
                        pages.setdefault(body, rec.rec_headers.get_header("WARC-Target-URI"))
    return [(url, body) for body, url in pages.items()]


@pytest.fixture(scope="module")
def texts():
    out = []
    for url, body in real_pages():
        text = rough_text(LexborHTMLParser(body))
        if len(text.split()) >= 300:
            out.append(text)
    assert len(out) >= 10
    return out


def test_distinct_pages_are_far_apart_and_small_edits_stay_close(texts):
    hashes = [simhash64(t) for t in texts]
    far = [distance(a, b) for a, b in itertools.combinations(hashes, 2)]
    close = []
    rnd = random.Random(7)
    for text in texts:
        words = text.split()
        for _ in range(max(1, len(words) // 200)):  # 0.5 % of the words changed
            words[rnd.randrange(len(words))] = "changed"
        close.append(distance(simhash64(text), simhash64(" ".join(words))))
    # different pages: rarely within 3 bits (the default threshold); edits: mostly within it
    assert sum(d <= 3 for d in far) <= 0.02 * len(far), sorted(far)[:20]
    assert sorted(close)[len(close) // 2] <= 3, close
    assert sum(far) / len(far) > 20


def test_the_same_text_gives_the_same_hash_and_short_texts_none():
    text = "the quick brown fox jumps over the lazy dog " * 5
    assert simhash64(text) == simhash64(text.upper()) == simhash64(text.replace(" ", "\n  "))
    assert simhash64("") is None and simhash64("a few words only") is None
    assert simhash64(" ".join(f"w{i}" for i in range(MIN_FEATURES))) is not None
    # a script written without spaces still gets features
    assert simhash64("日本語の文章には単語の間に空白がありません。" * 10) is not None
    h = simhash64(text)
    assert int(to_hex(h), 16) == h and len(to_hex(h)) == 16


def test_the_values_are_fixed_whichever_implementation_computes_them():
    # SimHashes are stored in the status index and compared with later fetches: a value may never
    # change with the implementation (or a release)
    cases = [("the quick brown fox jumps over the lazy dog " * 5, "01d0dea33d330471"),
             ("日本語の文章には単語の間に空白がありません。" * 10, "efe137755f97242f"),
             (" ".join(f"word{i % 997} of a long page" for i in range(4000)), "200955ce5715e9b5")]
    for text, expected in cases:
        data = simhash._utf8_start(text)
        assert to_hex(simhash.simhash_numpy(data)) == expected
        assert to_hex(simhash.simhash_compiled(data)) == expected
        assert to_hex(simhash64(text)) == expected


def test_the_compiled_loop_is_built_and_gives_numpys_values(texts):
    # make setup builds it (setup.py); a checkout without it would run at five times the cost
    assert simhash.IMPLEMENTATION == "compiled"
    rnd = random.Random(11)
    alphabet = "ab cdE\t\n\r\x0b\x0c  xyzZ 中文日本語ไทย éß.,"
    words = ["the", "Of", "web", "crawler", "x", "naïve", "日本語", "  ", "\n\n", "Straße"]
    samples = list(texts) + [t[:n] for t in texts[:5] for n in (0, 1, 7, 8, 9, 40, 200, 3000)]
    for _ in range(400):
        n = rnd.choice([0, 1, 5, 16, 17, 40, 120, 1000, 6000, 20000])
        if rnd.random() < 0.5:  # character soup: runs of whitespace, scripts without spaces
            samples.append("".join(rnd.choice(alphabet) for _ in range(n)))
        else:
            samples.append(" ".join(rnd.choice(words) for _ in range(n // 4)))
    nones = 0
    for text in samples:
        data = simhash._utf8_start(text)
        expected = simhash.simhash_numpy(data)
        assert simhash.simhash_compiled(data) == expected, text[:200]
        nones += expected is None
    assert nones > 20 and len(samples) - nones > 100  # both outcomes were compared


def test_the_host_memory_names_an_earlier_page_of_the_same_host_only():
    near = NearDuplicates({"simhash.max.distance": 3, "simhash.host.memory": 2,
                           "simhash.hosts.max": 2})
    assert near.check("a", "http://a/1", 0b1111) is None
    assert near.check("a", "http://a/1", 0b1111) is None  # itself, fetched again
    assert near.check("b", "http://b/1", 0b0111) is None  # another host
    assert near.check("a", "http://a/2", 0b0000_0111) == "http://a/1"  # 1 bit away
    assert near.check("a", "http://a/3", 0b1111_0000_0000) is None  # 6 bits away
    assert near.check("a", "http://a/4", 0b1111) == "http://a/2"  # a/1 forgotten (memory 2)
    near.check("c", "http://c/1", 1)  # a third host: the least recently seen (b) goes
    assert near.check("b", "http://b/2", 0b0111) is None


def test_the_parser_marks_a_near_duplicate_and_may_drop_its_outlinks():
    body = "".join(f"<p>paragraph {i} of a long article about crawling the web</p>"
                   for i in range(40))
    page = f"<html><body>{body}<a href='/next'>next</a></body></html>"
    other = page.replace("paragraph 7 of", "paragraph seven of")
    md = {wire.RAW_HEADERS: ["Content-Type: text/html"]}
    handler = PageHandler({})
    first = handler.handle_page("http://a.example/1", page.encode(), dict(md))
    assert len(first.metadata["simhash"][0]) == 16 and "near.duplicate.of" not in first.metadata
    second = handler.handle_page("http://a.example/2", other.encode(), dict(md))
    assert second.metadata["near.duplicate.of"] == ["http://a.example/1"] and second.outlinks
    strict = PageHandler({"simhash.skip.outlinks": True})
    strict.handle_page("http://a.example/1", page.encode(), dict(md))
    assert strict.handle_page("http://a.example/2", other.encode(), dict(md)).outlinks == []
    off = PageHandler({"simhash.enabled": False}).handle_page("http://a.example/1",
                                                              page.encode(), dict(md))
    assert "simhash" not in off.metadata


class StandIn:
    """A frontier's ``latest_values`` over a list of ``(key, url, simhash hex)``, latest first;
    it records what it was asked and fails on cue."""

    def __init__(self, rows, fail=None):
        self.rows, self.fail, self.asked, self.closed = rows, fail, [], 0

    def latest_values(self, key, name, n):
        self.asked.append((key, name, n))
        if self.fail:
            raise self.fail
        return [(u, v) for k, u, v in self.rows if k == key][:n]

    def close(self):
        self.closed += 1


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def seeded(rows, conf=None, fail=None, clock=None):
    conf = {"simhash.max.distance": 3, "simhash.host.memory": 3, **(conf or {})}
    front = StandIn(rows, fail)
    seeds = FrontierSeeds(conf, opener=lambda c: front, clock=clock or Clock())
    return NearDuplicates(conf, seeds), seeds, front


def test_a_host_met_first_is_seeded_once_with_its_latest_pages_from_the_frontier():
    byte = 0xFF
    rows = [("a.org", "http://a.org/5", to_hex(byte << 40)),  # latest first
            ("a.org", "http://www.a.org/x", to_hex(byte)),  # another host of the queue
            ("a.org", "http://a.org/4", "not hex"),
            ("a.org", "http://a.org/3", to_hex(byte << 20)),
            ("a.org", "http://a.org/2", to_hex(byte << 8)),
            ("a.org", "http://a.org/1", to_hex(byte))]  # beyond the memory (3)
    near, seeds, front = seeded(rows)
    # 1 bit from a/1 and www.a.org/x, neither remembered for a.org; 15 bits from a/2
    assert near.check("a.org", "http://a.org/new", byte ^ 1, key="a.org") is None
    assert front.asked == [("a.org", "simhash", SEED_SCAN * 3)]
    assert seeds.counters["simhash/seeded_hosts"] == 1 and seeds.counters["simhash/seeded"] == 3
    assert seeds.counters["simhash/seed_bad"] == 1  # the value that is no SimHash
    # the latest seeds are remembered; the oldest (a/2) went first, for a/new
    assert near.check("a.org", "http://a.org/7", (byte << 20) ^ 1, key="a.org") == \
        "http://a.org/3"
    assert near.check("a.org", "http://a.org/6", (byte << 8) ^ 1, key="a.org") is None
    assert len(front.asked) == 1  # the host has a memory now: no second query
    # another host of the queue: its own query, its own pages only
    assert near.check("www.a.org", "http://www.a.org/y", byte ^ 2, key="a.org") == \
        "http://www.a.org/x"
    assert len(front.asked) == 2


def test_a_forgotten_host_is_seeded_again_and_a_page_without_a_key_gets_its_own():
    rows = [("a.org", "http://a.org/1", "000000000000000f"),
            ("b.org", "http://b.org/1", "000000000000000f")]
    near, seeds, front = seeded(rows, {"simhash.hosts.max": 1, "partition.url.mode": "byDomain"})
    assert near.check("a.org", "http://a.org/2", 0b0111) == "http://a.org/1"  # key from the URL
    assert near.check("b.org", "http://b.org/2", 0b0111, key="b.org") == "http://b.org/1"
    # a.org was forgotten for b.org (simhash.hosts.max 1): asked again, its seeds are back
    assert near.check("a.org", "http://a.org/3", 0b0011, key="a.org") == "http://a.org/1"
    assert [k for k, _, _ in front.asked] == ["a.org", "b.org", "a.org"]


def test_the_same_page_fetched_again_is_not_its_own_near_duplicate():
    near, _, _ = seeded([("a.org", "http://a.org/1", "000000000000000f")])
    assert near.check("a.org", "http://a.org/1", 0b1111, key="a.org") is None
    assert near.check("a.org", "http://a.org/2", 0b1111, key="a.org") == "http://a.org/1"


def test_a_frontier_that_cannot_be_read_fails_no_parse_and_is_tried_again_later():
    clock = Clock()
    rows = [("a.org", "http://a.org/1", "000000000000000f"),
            ("b.org", "http://b.org/1", "000000000000000f"),
            ("c.org", "http://c.org/1", "000000000000000f")]
    near, seeds, front = seeded(rows, fail=FrontierError("database is locked"), clock=clock)
    assert near.check("a.org", "http://a.org/2", 0b0111, key="a.org") is None  # no seeds
    assert seeds.counters["simhash/seed_failed"] == 1 and front.closed == 1
    # until RETRY_SECS have passed the frontier is left alone: the host starts empty
    clock.now += RETRY_SECS - 0.1
    assert near.check("b.org", "http://b.org/2", 0b0111, key="b.org") is None
    assert seeds.counters["simhash/seed_skipped"] == 1 and len(front.asked) == 1
    clock.now += 0.2
    front.fail = None
    assert near.check("c.org", "http://c.org/2", 0b0111, key="c.org") == "http://c.org/1"
    assert near.check("a.org", "http://a.org/3", 0b0011, key="a.org") == "http://a.org/2"
    assert seeds.counters["simhash/seeded_hosts"] == 1 and len(front.asked) == 2


def test_a_frontier_that_cannot_be_opened_fails_no_parse_and_is_opened_later():
    clock = Clock()
    opened = []

    def opener(conf):
        opened.append(clock.now)
        if len(opened) == 1:
            raise FrontierError("cannot open the frontier /x: unable to open database file")
        return StandIn([("a.org", "http://a.org/1", "000000000000000f")])

    seeds = FrontierSeeds({}, opener=opener, clock=clock)
    assert seeds("a.org", "a.org", "http://a.org/2") == []
    assert seeds("a.org", "a.org", "http://a.org/2") == []  # not opened again so soon
    assert len(opened) == 1 and seeds.counters["simhash/seed_failed"] == 1
    assert seeds.counters["simhash/seed_skipped"] == 1
    clock.now += RETRY_SECS
    assert seeds("a.org", "a.org", "http://a.org/2") == [("http://a.org/1", 0xf)]
    assert len(opened) == 2


def test_seeding_is_off_by_its_key_and_on_a_urlfrontier_service(tmp_path):
    assert FrontierSeeds.from_conf({"simhash.seed.from.frontier": False}) is None
    assert FrontierSeeds.from_conf({"frontier.backend": "urlfrontier"}) is None
    seeds = FrontierSeeds.from_conf({"frontier.sqlite.path": str(tmp_path / "f.sqlite")})
    assert isinstance(seeds, FrontierSeeds) and seeds.frontier is None  # opened when needed
    assert not (tmp_path / "f.sqlite").exists()


def test_a_restarted_parser_marks_a_page_against_one_fetched_before_it(tmp_path):
    """A real SQLite frontier: the first parser's pages are written as the status updater writes
    them; a second parser (a restart, or another task) knows the host only from the frontier."""
    conf = {"frontier.sqlite.path": str(tmp_path / "f.sqlite"), "partition.url.mode": "byHost"}
    body = "".join(f"<p>paragraph {i} of a long article about crawling the web</p>"
                   for i in range(40))
    page = f"<html><body>{body}</body></html>"
    md = {wire.RAW_HEADERS: ["Content-Type: text/html"]}
    first = PageHandler(conf, FrontierSeeds.from_conf(conf))
    out = first.handle_page("http://a.example/1", page.encode(), dict(md), "a.example")
    other = first.handle_page("http://a.example/2", b"<html><body>" + b" ".join(
        f"w{i}".encode() for i in range(200)) + b"</body></html>", dict(md), "a.example")
    with SQLiteFrontier(tmp_path / "f.sqlite") as f:
        f.apply_updates([StatusUpdate("http://a.example/1", Status.FETCHED, out.metadata,
                                      2e9, "a.example"),
                         StatusUpdate("http://a.example/2", Status.FETCHED, other.metadata,
                                      2e9 + 1, "a.example")])
    seeds = FrontierSeeds.from_conf(conf)
    restarted = PageHandler(conf, seeds)
    again = restarted.handle_page("http://a.example/3", page.replace(
        "paragraph 7 of", "paragraph seven of").encode(), dict(md), "a.example")
    assert again.metadata["near.duplicate.of"] == ["http://a.example/1"]
    assert seeds.counters["simhash/seeded"] == 2
    # without seeding the restarted parser knows nothing of the host
    alone = PageHandler({**conf, "simhash.seed.from.frontier": False},
                        FrontierSeeds.from_conf({**conf, "simhash.seed.from.frontier": False}))
    assert "near.duplicate.of" not in alone.handle_page("http://a.example/3", page.replace(
        "paragraph 7 of", "paragraph seven of").encode(), dict(md), "a.example").metadata
    seeds.close()
