"""The fetch engine's steps without a network: robots.txt rules per host (RobotsSource), sitemap
discovery (SitemapDiscovery.look), the queue of a URL (fetcher.queue.mode), the duration keys, a
host's /.well-known/tdmrep.json (TdmRepSource: fetched and cached by robots.txt's rules) and what
each signals.refused.action (mark, strip, skip) requests and hands on."""

from __future__ import annotations

import asyncio
import time

import pytest

from owler.conf import ConfError, get_duration, parse_duration
from owler.constants import DELAY_MINS, FOUND_SITEMAP, SITEMAP_SEED, SITEMAP_SEEDED, Status
from owler.fetch.discovery import SitemapDiscovery
from owler.fetch.engine import FetchEngine, FetchItem, Outcome, queue_mode
from owler.fetch.http import FetchResult
from owler.fetch.robots import RobotRules, RobotsSource, parse_robots
from owler.signals import UNKNOWN

AGENT = {"http.agent.name": "OWLer-py"}
ROBOTS = b"User-agent: *\nDisallow: /private\nSitemap: http://a.example.org/sm.xml\n"


class FakeHttp:
    """Answers robots.txt requests from a dict of URL -> (status, body, location)."""

    def __init__(self, answers):
        self.answers = answers
        self.requests = []

    async def fetch(self, url, content_limit=None, extra_headers=None):
        self.requests.append(url)
        # let concurrent callers pile up: the loop runs every task that is ready (the other
        # asks, started by the same gather) before this timer's callback, whatever the speed
        await asyncio.sleep(0.01)
        status, body, location = self.answers.get(url, (404, b"", None))
        headers = [("Location", location)] if location else []
        return FetchResult(url=url, status=status, headers=headers, content=body)


def run(coro):
    return asyncio.run(coro)


def test_one_fetch_per_host_shared_by_concurrent_asks_then_the_cache():
    http = FakeHttp({"http://a.example.org/robots.txt": (200, ROBOTS, None)})
    counted, fresh = [], []
    src = RobotsSource(AGENT, http, count=counted.append, on_new_rules=fresh.append)

    async def asks():
        rules = await asyncio.gather(*(src.rules_for(f"http://a.example.org/p{i}")
                                       for i in range(5)))
        again = await src.rules_for("http://a.example.org/q")
        return rules, again

    rules, again = run(asks())
    assert http.requests == ["http://a.example.org/robots.txt"]
    assert all(r is rules[0] for r in rules) and again is rules[0]
    assert not again.allowed("http://a.example.org/private/x") and again.allowed("http://a.example.org/x")
    assert counted == ["robots_fetched"] and fresh == ["http://a.example.org/robots.txt"]


def test_redirects_are_followed_and_errors_hold_the_host_back():
    http = FakeHttp({
        "http://a.example.org/robots.txt": (301, b"", "http://www.a.example.org/robots.txt"),
        "http://www.a.example.org/robots.txt": (200, ROBOTS, None),
        "http://b.example.org/robots.txt": (503, b"", None)})
    counted = []
    src = RobotsSource(AGENT, http, count=counted.append)
    a = run(src.rules_for("http://a.example.org/private"))
    assert not a.allowed("http://a.example.org/private") and a.sitemaps
    b = run(src.rules_for("http://b.example.org/"))
    assert not b.allowed("http://b.example.org/") and counted.count("robots_error") == 1


def test_robots_file_skip_fetches_nothing_and_allows_everything():
    http = FakeHttp({"http://a.example.org/robots.txt": (200, ROBOTS, None)})
    fresh = []
    src = RobotsSource({**AGENT, "http.robots.file.skip": True}, http, on_new_rules=fresh.append)
    rules = run(src.rules_for("http://a.example.org/private"))
    assert rules.allowed("http://a.example.org/private") and http.requests == []
    run(src.rules_for("http://a.example.org/other"))
    assert fresh == ["http://a.example.org/robots.txt"]  # once per host and cache period


def rules_of(text=ROBOTS):
    return parse_robots(text, ["owler-py"], "http://a.example.org/robots.txt")


def test_discovery_announces_a_hosts_sitemaps_once_after_its_robots_txt_was_read():
    d = SitemapDiscovery({"sitemap.discovery": True})
    md = {}
    assert d.look("http://a.example.org/x", md, rules_of()) is None  # robots.txt not read anew
    d.robots_read("http://a.example.org/robots.txt")
    found = d.look("http://a.example.org/x", md, rules_of())
    assert found.sitemaps == ["http://a.example.org/sm.xml"] and not found.seed
    assert md[FOUND_SITEMAP] == ["true"]
    assert d.look("http://a.example.org/y", {}, rules_of()) is None  # once


def test_discovery_is_off_unless_configured_or_asked_for_by_the_url():
    d = SitemapDiscovery({})
    d.robots_read("http://a.example.org/robots.txt")
    assert d.look("http://a.example.org/x", {}, rules_of()) is None
    md = {"sitemap.discovery": ["true"]}
    assert d.look("http://a.example.org/x", md, rules_of()).sitemaps
    d.robots_read("http://a.example.org/robots.txt")
    assert d.look("http://a.example.org/x", {"sitemap.discovery": ["false"]}, rules_of()) is None


def test_a_seed_is_not_fetched_and_says_when_to_look_again():
    d = SitemapDiscovery({"sitemap.seed.interval": 60, "robots.error.cache.ttl": 600})
    md = {SITEMAP_SEED: ["true"]}
    found = d.look("http://a.example.org/", md, RobotRules.allow_all())
    assert found.seed and found.delay == 0.0  # robots.txt from the cache: the host was not asked
    assert found.sitemaps == ["http://a.example.org/sitemap.xml",
                              "http://a.example.org/sitemap_index.xml"]
    assert SITEMAP_SEED not in md and md[DELAY_MINS] == ["60"] and md[SITEMAP_SEEDED]
    d.robots_read("http://b.example.org/robots.txt")
    md = {SITEMAP_SEED: ["true"]}
    found = d.look("http://b.example.org/", md, RobotRules.disallow_all())
    assert found.seed and found.delay is None and found.sitemaps == []
    assert md[DELAY_MINS] == ["10"]  # robots.txt unreadable: again after the error TTL


def test_fetcher_queue_mode_regroups_the_queues_only_when_it_differs_from_the_partition():
    assert queue_mode({}) is None and queue_mode({"fetcher.queue.mode": "byDomain"}) is None
    assert queue_mode({"fetcher.queue.mode": "byHost"}) == "byHost"
    assert queue_mode({"fetcher.queue.mode": "byHost", "partition.url.mode": "byHost"}) is None
    with pytest.raises(ConfError, match="fetcher.queue.mode"):
        queue_mode({"fetcher.queue.mode": "byPlanet"})
    engine = FetchEngine({**AGENT, "fetcher.queue.mode": "byHost"}, lambda out: None)
    item = FetchItem("http://www.a.example.org/x", "a.example.org", {})
    assert engine.submit(item) and item.key == "www.a.example.org"
    assert engine.queues.num_queues == 1 and engine.queued() == 1


def test_durations():
    assert parse_duration("500ms") == 0.5 and parse_duration("2s") == 2.0
    assert parse_duration("1m") == 60 and parse_duration("1h") == 3600 and parse_duration("1d") == 86400
    assert parse_duration(3) == 3.0 and parse_duration("250", bare_unit=0.001) == 0.25
    with pytest.raises(ValueError):
        parse_duration("soon")
    assert get_duration({"k": "2s"}, "k", 9) == 2.0 and get_duration({}, "k", 9) == 9
    assert get_duration({"k": ""}, "k", 9) == 9 and get_duration({"k": 0.5}, "k", 9) == 0.5
    with pytest.raises(ConfError, match="k: expected a duration"):
        get_duration({"k": "fast"}, "k", 9)


def test_what_the_fetcher_counts_for_each_outcome():
    item = FetchItem("http://a.example.org/", "a.example.org", {})
    page = Outcome(item, "page", {"fetch.statusCode": ["200"]}, content=b"x" * 10)
    assert page.counters() == {"http/200": 1, "fetched": 1, "bytes": 10}
    gone = Outcome(item, "status", {"fetch.statusCode": ["404"], "error.cause": ["stale"]},
                   Status.FETCH_ERROR)
    assert gone.counters() == {"http/404": 1, "FETCH_ERROR": 1}
    denied = Outcome(item, "status", {"error.cause": ["robots.txt"]}, Status.ERROR)
    assert denied.counters() == {"error.cause/robots.txt": 1, "ERROR": 1}
    seed = Outcome(item, "status", {}, Status.DISCOVERED)
    assert seed.counters() == {"seeds": 1, "DISCOVERED": 1}
    assert Outcome(item, "expired", {}).counters() == {"expired": 1}


def test_the_engine_snapshot_names_robots_counters_and_gauges():
    engine = FetchEngine(AGENT, lambda out: None)
    assert engine.snapshot() == ({}, {"queued": 0, "fetching": 0, "queues": 0})
    for name in ("robots_fetched", "robots_fetched", "robots_error", "robots_denied"):
        engine._count(name)
    engine.submit(FetchItem("http://a.example.org/", "a.example.org", {}))
    counters, gauges = engine.snapshot()
    assert counters == {"robots/fetched": 2, "robots/errors": 1, "robots/denied": 1}
    assert gauges == {"queued": 1, "fetching": 0, "queues": 1}


def test_a_chain_of_redirects_ends_after_http_allow_redirects_max():
    engine = FetchEngine({**AGENT, "http.allow.redirects.max": 2}, lambda outcome: None)
    assert engine._may_redirect({}) and engine._may_redirect({"redirect.hops": ["1"]})
    md = {"redirect.hops": ["2"]}
    assert not engine._may_redirect(md) and "http.allow.redirects.max=2" in md["redirect.refused"][0]
    unbounded = FetchEngine({**AGENT, "http.allow.redirects.max": -1}, lambda outcome: None)
    assert unbounded._may_redirect({"redirect.hops": ["99"]})


class ThrottlingHttp(FakeHttp):
    """robots.txt and tdmrep.json 404; the first page answers 429 with Retry-After, the others
    200."""

    def __init__(self, retry_after):
        super().__init__({})
        self.retry_after = retry_after

    async def start(self):
        pass

    async def close(self):
        pass

    def refuses(self, url, names=False):
        return None

    async def fetch(self, url, content_limit=None, extra_headers=None):
        self.requests.append(url)
        if url.endswith(("/robots.txt", "/tdmrep.json")):
            return FetchResult(url=url, status=404)
        if len(self.requests) == 3:
            return FetchResult(url=url, status=429, headers=[("Retry-After", self.retry_after)])
        return FetchResult(url=url, status=200, headers=[("Content-Type", "text/html")],
                           content=b"<html></html>")


#: seconds after which an outcome counts as never coming (a hang), not a speed bound
HANG = 60.0


def run_engine(urls, retry_after, submit_late=False):
    import threading

    got, done = [], threading.Event()

    def on_outcome(out):
        got.append(out)
        if len(got) >= len(urls):
            done.set()

    engine = FetchEngine({**AGENT, "fetcher.server.delay": 0.0}, on_outcome)
    engine.http = engine.robots.http = engine.tdmrep.http = ThrottlingHttp(retry_after)
    engine.start()
    try:
        for url in urls:
            engine.submit(FetchItem(url, "a.example", {}))
        assert done.wait(HANG), f"{len(got)} of {len(urls)} outcomes within {HANG:g} s"
        late, late_done = [], threading.Event()
        if submit_late:
            engine.on_outcome = lambda out: (late.append(out), late_done.set())
            engine.submit(FetchItem("http://a.example/late", "a.example", {}))
            assert late_done.wait(HANG), f"no outcome of the late URL within {HANG:g} s"
        return got, late, engine
    finally:
        engine.stop()


def test_a_long_retry_after_sends_the_queues_urls_back_to_the_frontier():
    urls = [f"http://a.example/{i}" for i in range(3)]
    before = time.time()
    got, late, engine = run_engine(urls, "100", submit_late=True)
    after = time.time()
    first = next(o for o in got if o.item.url == urls[0])
    assert first.status == Status.FETCH_ERROR and first.metadata["fetch.statusCode"] == ["429"]
    until = float(first.metadata["_queue.block.until"][0])
    # the frontier blocks the queue 100 s from the answer (which came between before and after)
    assert before + 100 - 0.001 <= until <= after + 100 + 0.001
    assert float(first.metadata["scheduler.delay.mins"][0]) == pytest.approx(100 / 60, abs=0.01)
    assert sorted(o.item.url for o in got if o.kind == "held") == urls[1:]
    assert [o.kind for o in late] == ["held"]  # arriving during the hold: sent back at once
    assert engine.http.requests == ["http://a.example/robots.txt",
                                    "http://a.example/.well-known/tdmrep.json", urls[0]]


def test_a_short_retry_after_keeps_the_urls_waiting_in_the_fetcher():
    urls = [f"http://a.example/{i}" for i in range(2)]
    t0 = time.time()
    got, _, engine = run_engine(urls, "1")
    assert [o.kind for o in got] == ["status", "page"]  # no URL sent back
    assert time.time() - t0 >= 1.0  # the second waited for the hold


class SignallingHttp(ThrottlingHttp):
    """A host whose robots.txt refuses search under /no-search/ (Content-Usage) and AI training
    everywhere (Content-Signal); its pages answer with AI preferences of their own."""

    ROBOTS = (b"User-agent: *\nAllow: /\nContent-Signal: ai-train=no, use=reference\n"
              b"Content-Usage: /no-search/ search=n\n")

    async def fetch(self, url, content_limit=None, extra_headers=None):
        self.requests.append(url)
        if url.endswith("/robots.txt"):
            return FetchResult(url=url, status=200, content=self.ROBOTS)
        if url.endswith("/tdmrep.json"):
            return FetchResult(url=url, status=404)
        return FetchResult(url=url, status=200, content=b"<html></html>", headers=[
            ("Content-Type", "text/html"), ("Content-Usage", "search=y, ai-use=n"),
            ("X-Robots-Tag", "otherbot: noai")])


def test_robots_signals_refusing_the_crawls_purpose_stop_the_fetch_and_pages_record_theirs():
    import json
    import threading

    from owler import wire

    urls = ["http://a.example/no-search/x", "http://a.example/page"]
    got, done = [], threading.Event()

    def on_outcome(out):
        got.append(out)
        if len(got) == len(urls):
            done.set()

    engine = FetchEngine({**AGENT, "fetcher.server.delay": 0.0}, on_outcome)
    engine.http = engine.robots.http = engine.tdmrep.http = http = SignallingHttp("0")
    engine.start()
    try:
        for url in urls:  # (what the last fetch recorded is forgotten: tdm is said no more)
            engine.submit(FetchItem(url, "a.example", {"signals.tdm": ["refused"]}))
        assert done.wait(HANG)
    finally:
        engine.stop()
    by_url = {o.item.url: o for o in got}
    skipped = by_url[urls[0]]
    assert skipped.status is Status.ERROR and skipped.metadata["error.cause"] == ["signals"]
    assert skipped.metadata["signals.search"] == ["refused"] and urls[0] not in http.requests
    page = by_url[urls[1]]
    assert page.kind == "page" and urls[1] in http.requests
    md = page.metadata
    assert md["signals.search"] == ["allowed"] and md["signals.ai-train"] == ["refused"]
    assert md["signals.ai-input"] == ["refused"] and "signals.tdm" not in md
    assert md["signals.unreadable"] == [
        "robots.content-signal: use=reference: use= says how far content may be used, "
        "kept as written"]
    rec = json.loads(md[wire.RAW_SIGNALS][0])
    assert rec["purposes"]["ai-train"]["sources"] == ["robots.content-signal"]
    assert rec["purposes"]["search"]["sources"] == ["header.content-usage"]
    # with signals.refused.action: mark, the first URL is fetched too, and marked
    engine = FetchEngine({**AGENT, "fetcher.server.delay": 0.0, "signals.refused.action": "mark"},
                         lambda out: None)
    assert engine.signal_policy.refused({"search": {"state": "refused"}}) is None


# -- /.well-known/tdmrep.json per host (TdmRepSource), as robots.txt ------------------------------

TDMREP = b'[{"location": "/reserved/", "tdm-reservation": 1, "tdm-policy": "https://p.example/"}]'


def test_tdmrep_json_is_fetched_once_per_host_shared_by_concurrent_asks_then_cached():
    from owler.fetch.tdmrep import TdmRepSource

    turl = "http://a.example.org/.well-known/tdmrep.json"
    http = FakeHttp({turl: (200, TDMREP, None)})
    counted = []
    src = TdmRepSource(AGENT, http, count=counted.append)

    async def asks():
        first = await asyncio.gather(*(src.file_for(f"http://a.example.org/p{i}",
                                                    RobotRules.allow_all()) for i in range(5)))
        again = await src.file_for("http://a.example.org/reserved/x", RobotRules.allow_all())
        return first, again

    first, (again, answer) = run(asks())
    assert http.requests == [turl] and counted == ["tdmrep_fetched"]
    assert all(f is first[0][0] for f, _ in first) and again is first[0][0]
    assert sum(a is not None for _, a in first) == 1 and answer is None  # one fetched it
    (st,) = again.statements("http://a.example.org/reserved/x")
    assert st.purpose == "tdm" and st.state == "refused" and "tdm-policy" in st.raw
    assert again.statements("http://a.example.org/other") == []
    # another host (another port, too) is another file
    run(src.file_for("http://a.example.org:8080/x", RobotRules.allow_all()))
    assert http.requests[-1] == "http://a.example.org:8080/.well-known/tdmrep.json"


def test_tdmrep_answers_read_by_robots_txt_rules():
    from owler.fetch.tdmrep import file_from_fetch

    conf = {"tdmrep.cache.ttl": 100, "tdmrep.error.cache.ttl": 10}
    url = "http://a.example.org/.well-known/tdmrep.json"

    def read(status, body=b"", headers=(), truncated=False, error=None):
        res = FetchResult(url=url, status=status, headers=list(headers), content=body,
                          truncated=truncated, error_cause=error)
        f = file_from_fetch(res, conf, now=1000.0)
        return f, f.statements("http://a.example.org/reserved/x"), f.expires_at

    f, st, until = read(200, TDMREP)
    assert [s.state for s in st] == ["refused"] and until == 1100.0
    # served as text/html but JSON: read; a page of markup (a site answering every path): none
    assert read(200, TDMREP, [("Content-Type", "text/html")])[1][0].state == "refused"
    assert read(200, b"\n <!doctype html><p>Not found</p>")[1:] == ([], 1100.0)
    for status in (301, 404, 403, 410):  # no file (a 3xx whose redirects ran out, too)
        assert read(status)[1:] == ([], 1100.0), status
    for status, error, why in ((503, None, "HTTP 503"), (429, None, "HTTP 429"),
                               (500, None, "HTTP 500"), (None, "timeout", "no answer (timeout")):
        _, (st,), until = read(status, error=error)
        assert st.state == UNKNOWN and st.source == "tdmrep.file" and why in st.reason
        assert until == 1010.0
    (bad,) = read(200, b'{"location": "/"}')[1]
    assert bad.state == UNKNOWN and "not a JSON array" in bad.reason
    (cut,) = read(200, TDMREP[:40], truncated=True)[1]
    assert "larger than tdmrep.content.limit" in cut.reason


def test_tdmrep_json_is_not_asked_when_disabled_or_disallowed_and_asked_again_once_expired():
    from owler.fetch.tdmrep import NO_FILE, TdmRepSource

    turl = "http://a.example.org/.well-known/tdmrep.json"
    http = FakeHttp({turl: (301, b"", "http://b.example.org/tdm.json"),
                     "http://b.example.org/tdm.json": (200, TDMREP, None)})
    off = TdmRepSource({**AGENT, "tdmrep.enabled": False}, http)
    assert run(off.file_for("http://a.example.org/x", RobotRules.allow_all())) == (NO_FILE, None)
    denied = parse_robots(b"User-agent: *\nDisallow: /.well-known/\n", ["owler-py"])
    src = TdmRepSource({**AGENT, "tdmrep.cache.ttl": 0}, http)
    assert run(src.file_for("http://a.example.org/x", denied))[0].statements("/reserved/") == []
    assert http.requests == []
    found, answer = run(src.file_for("http://a.example.org/x", RobotRules.allow_all()))
    assert found.statements("/reserved/a")[0].state == "refused"  # the redirect followed
    assert answer.url == "http://b.example.org/tdm.json" and len(http.requests) == 2
    run(src.file_for("http://a.example.org/y", RobotRules.allow_all()))  # ttl 0: expired
    assert len(http.requests) == 4


# -- what each signals.refused.action does (mark, strip, skip) -------------------------------------

class PolicyHttp(ThrottlingHttp):
    """A host whose robots.txt refuses search under /no-search/, whose tdmrep.json reserves TDM
    under /tdm/, and whose pages /header (Content-Usage: search=n) and /meta (a tdm-reservation
    meta) refuse a purpose themselves; /ok says nothing. Every page sends an ETag."""

    ROBOTS = b"User-agent: *\nAllow: /\nContent-Usage: /no-search/ search=n\n"
    TDMREP = b'[{"location": "/tdm/", "tdm-reservation": 1}]'
    PAGE = b"<html><head><title>t</title>%s</head><body><a href=/x>x</a></body></html>"

    async def fetch(self, url, content_limit=None, extra_headers=None):
        self.requests.append(url)
        if url.endswith("/robots.txt"):
            return FetchResult(url=url, status=200, content=self.ROBOTS)
        if url.endswith("/tdmrep.json"):
            return FetchResult(url=url, status=200, content=self.TDMREP)
        headers = [("Content-Type", "text/html"), ("ETag", '"e1"')]
        meta = b""
        if url.endswith("/header"):
            headers.append(("Content-Usage", "search=n"))
        if url.endswith("/meta"):
            meta = b'<meta content="1" name="TDM-Reservation">'
        return FetchResult(url=url, status=200, headers=headers, content=self.PAGE % meta)


POLICY_URLS = [f"http://a.example/{p}" for p in ("no-search/a", "tdm/b", "header", "meta", "ok")]


def run_policy(action, http, urls=POLICY_URLS, md=None):
    import threading

    got, done = [], threading.Event()

    def on_outcome(out):
        got.append(out)
        if len(got) == len(urls):
            done.set()

    engine = FetchEngine({**AGENT, "fetcher.server.delay": 0.0, "signals.refused.action": action,
                          "signals.purposes": ["search", "tdm"]}, on_outcome)
    engine.http = engine.robots.http = engine.tdmrep.http = http
    engine.start()
    try:
        for url in urls:
            engine.submit(FetchItem(url, "a.example", dict(md or {})))
        assert done.wait(HANG), f"{len(got)} of {len(urls)} outcomes within {HANG:g} s"
    finally:
        engine.stop()
    return {o.item.url.rsplit("/", 1)[-1]: o for o in got}, engine


def test_each_action_requests_archives_and_parses_what_it_allows():
    import json

    from owler import wire

    earlier = {"protocol.etag": ['"e0"'], "capture.digest": ["sha1:EARLIER"],
               "capture.date": ["2026-01-01T00:00:00.000000Z"]}
    withheld = {}
    for action in ("mark", "strip", "skip"):
        http = PolicyHttp("0")
        out, engine = run_policy(action, http, md=earlier)
        asked = {u.rsplit("/", 1)[-1] for u in http.requests if "/robots.txt" not in u
                 and "tdmrep" not in u}
        # skip: what the host refuses before the request is not requested
        assert asked == ({"header", "meta", "ok"} if action == "skip"
                         else {"a", "b", "header", "meta", "ok"}), action
        assert http.requests[:2] == ["http://a.example/robots.txt",
                                     "http://a.example/.well-known/tdmrep.json"]
        if action == "skip":
            for name, purpose in (("a", "search"), ("b", "tdm")):
                assert out[name].status is Status.ERROR, name
                assert out[name].metadata["error.cause"] == ["signals"]
                assert out[name].metadata[f"signals.{purpose}"] == ["refused"]
        refused = {"header", "meta"} | ({"a", "b"} if action != "skip" else set())
        for name in refused:
            o = out[name]
            assert o.kind == "page", (action, name)
            md = o.metadata
            record = json.loads(md[wire.RAW_SIGNALS][0])
            if action == "mark":  # archived and parsed as any other page
                assert o.content.startswith(b"<html>") and "signals.withheld" not in md
                assert wire.RAW_TRUNCATED not in md and "withheld" not in record
                continue
            # strip, and skip told by the response: the head without the content
            assert o.content == b"" and md[wire.RAW_TRUNCATED] == ["unspecified"]
            assert md["signals.withheld"] == [record["withheld"]]
            assert "protocol.etag" not in md  # the next request is not conditional
            assert md["capture.digest"] == ["sha1:EARLIER"]  # the last full capture stays
            assert wire.RAW_REVISIT not in md and wire.RAW_PAYLOAD_DIGEST not in md
            assert md[wire.RAW_HEADERS] and md[wire.RAW_STATUS_LINE] == ["HTTP/1.1 200"]
            withheld[(action, name)] = md["signals.withheld"][0]
        ok = out["ok"]
        assert ok.content.startswith(b"<html>") and "signals.withheld" not in ok.metadata
        assert ok.metadata["protocol.etag"] == ['"e1"']
        counters, _ = engine.snapshot()
        assert counters.get("signals/withheld", 0) == {"mark": 0, "strip": 4, "skip": 2}[action]
        assert counters.get("signals/refused", 0) == (2 if action == "skip" else 0)
        assert counters["tdmrep/fetched"] == 1
    # a URL robots.txt's signals refuse already costs its host no tdmrep.json request
    http = PolicyHttp("0")
    out, _ = run_policy("skip", http, urls=POLICY_URLS[:1])
    assert out["a"].status is Status.ERROR and http.requests == ["http://a.example/robots.txt"]
    assert withheld == {("strip", "a"): "search", ("strip", "b"): "tdm",
                        ("strip", "header"): "search", ("strip", "meta"): "tdm",
                        ("skip", "header"): "search", ("skip", "meta"): "tdm"}


def test_a_throttling_answer_to_tdmrep_json_holds_the_queue_without_the_page_requested():
    class Throttling(PolicyHttp):
        async def fetch(self, url, content_limit=None, extra_headers=None):
            if url.endswith("/tdmrep.json"):
                self.requests.append(url)
                return FetchResult(url=url, status=429, headers=[("Retry-After", "100")])
            return await super().fetch(url, content_limit, extra_headers)

    http = Throttling("0")
    before = time.time()
    out, _ = run_policy("mark", http, urls=POLICY_URLS[-2:])
    first = out["meta"]
    assert first.status is Status.FETCH_ERROR and first.metadata["error.cause"] == ["throttled"]
    assert "tdmrep.json answered 429" in first.metadata["fetch.exception"][0]
    assert float(first.metadata["_queue.block.until"][0]) >= before + 99
    assert out["ok"].kind == "held"  # the queue's other URL goes back to the frontier
    assert http.requests == ["http://a.example/robots.txt",
                             "http://a.example/.well-known/tdmrep.json"]
