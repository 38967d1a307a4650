"""The browser fetcher (owler.fetch.browser) against the scripted farm (tests/farm/scripted.py):
Debian's headless Chromium over its DevTools pipe, every request of a page answered by the
crawler's own HttpFetcher (robots.txt, the SSRF guard) or refused, images blocked, a page whose
network never goes quiet and one whose script never ends stopped at their budget, each with its
cause. Judged against the farm's access log: what the browser asked for is exactly what the
crawler fetched for it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from owler import wire
from owler.fetch.browser import BrowserFetcher, for_parser, note
from owler.fetch.http import HttpFetcher
from owler.fetch.robots import RobotsSource
from owler.parse.html import parse_html
from tests.farm import scripted as S
from tests.farm.harness import farm_module

pytestmark = pytest.mark.integration

BUDGET = 6.0
RENDERED = ["/", "/a", "/b", "/dcl", "/fetched", "/private", "/forever", "/busy"]


def _requests(log: Path) -> list[tuple[str, str]]:
    return [(r["host"], r["path"]) for r in map(json.loads, log.read_text().splitlines())]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Each page of RENDERED fetched over HTTP, then rendered; the farm's log of it all."""
    log = tmp_path_factory.mktemp("scripted") / "farm.log"
    conf = {"http.agent.name": "owler-test", "http.allowed.networks": [S.NETWORK],
            "browser.page.budget": BUDGET, "browser.pages": 2}

    async def run(port: str):
        http = HttpFetcher(conf)
        await http.start()
        robots = RobotsSource(conf, http)
        browser = BrowserFetcher(conf, http, robots)
        out = {}
        try:
            for path in RENDERED:
                url = f"http://{S.HOST}:{port}{path}"
                res = await http.fetch(url)
                assert res.status == 200, (url, res.error_message)
                out[path] = (url, res, await browser.render(url, res))
            starts = browser.stats.get("browser_starts")
        finally:
            await browser.close()
            await http.close()
        return out, starts

    with farm_module("tests.farm.scripted", log) as (port,):
        out, starts = asyncio.run(run(port))
    return out, starts, _requests(log)


def _links(url: str, dom: str) -> set[str]:
    res = parse_html(url, dom.encode(), {"content-type": "text/html; charset=utf-8"})
    return {o.url.split("/", 3)[3] for o in res.outlinks}


def test_links_and_text_exist_only_after_the_scripts(rendered):
    out, starts, _ = rendered
    assert starts == 1  # started on the first page, reused for the others
    for path in RENDERED:
        url, res, r = out[path]
        raw_links = _links(url, res.content.decode())
        assert raw_links == {"about"}, path  # the shell: the footer's link only
        expected = S.FETCHED_LINKS if path == "/fetched" else S.LINKS[path]
        assert _links(url, r.dom) == {"about", *(p.lstrip("/") for p in expected)}, path
        parsed = parse_html(url, r.dom.encode(), {"content-type": "text/html; charset=utf-8"})
        assert parsed.title == f"Rendered {path}", path
        assert f"This text of {path} exists only after the script ran" in r.dom


def test_pages_that_settle_end_idle(rendered):
    out, _, _ = rendered
    for path in ("/", "/a", "/b", "/dcl", "/fetched", "/private"):  # /b: its alert() dismissed
        r = out[path][2]
        assert (r.end, r.detail) == ("idle", ""), path
        assert r.elapsed < BUDGET, path


def test_requests_go_through_the_crawler_and_its_guards(rendered):
    out, _, served = rendered
    port = out["/"][0].split(":")[2].split("/")[0]
    assert out["/a"][2].refused == [f"robots.txt http://{S.HOST}:{port}/api/hidden"]
    assert out["/private"][2].refused == [f"private_address http://{S.PRIVATE}:{port}/secret"]
    assert out["/private"][2].blocked == 2  # <img src=/pic.png> and new Image() /pic2.png
    assert out["/"][2].blocked == 1
    # nothing the guards refused or the type blocked reached the farm, and no page was
    # requested twice: the browser's document is the response the crawler fetched
    assert not [r for r in served if r[0] == S.PRIVATE]
    paths = [p for h, p in served]
    for never in ("/api/hidden", "/pic.png", "/pic2.png", "/secret"):
        assert never not in paths
    for path in RENDERED:
        assert paths.count(path) == 1, path
    assert served.count((S.HOST, "/robots.txt")) == 1
    # a frame of another site and a worker: their requests went through the crawler too
    for request in ((S.FRAME_HOST, "/robots.txt"), (S.FRAME_HOST, "/frame"),
                    (S.FRAME_HOST, "/api/from-frame"), (S.HOST, "/api/worker.js"),
                    (S.HOST, "/api/from-worker")):
        assert served.count(request) == 1, request
    assert out["/private"][2].requests == 5  # app.js (cached), frame, its fetch, worker, its
    assert paths.count("/api/links.json") == 1
    # the bundle is asked for once and then served from the cache
    assert paths.count("/app.js") == 1
    assert out["/fetched"][2].requests == 2  # app.js (cached) and links.json


def test_a_page_whose_network_never_rests_ends_at_its_budget(rendered):
    out, _, served = rendered
    r = out["/forever"][2]
    assert r.end == "budget"
    assert "at the end of the budget" in r.detail
    assert r.elapsed >= BUDGET
    assert "/forever/child" in r.dom  # the DOM as it stood then
    ticks = [p for h, p in served if p == "/api/tick"]
    assert len(ticks) == r.requests - 1  # app.js from the cache, every tick through the crawler


def test_a_page_whose_script_never_ends_is_stopped(rendered):
    out, _, _ = rendered
    r = out["/busy"][2]
    assert r.end == "budget"
    assert "its scripts never finished: stopped" in r.detail
    assert "/busy/child" in r.dom


def test_the_rendered_page_for_the_archive_and_the_parser(rendered):
    out, _, _ = rendered
    url, res, r = out["/dcl"]
    md = {wire.RAW_HEADERS: wire.encode_headers(
        res.headers + [("Content-Type", "text/html; charset=iso-8859-1")])}
    note(md, r)
    assert md["browser.end"] == ["idle"] and md["browser.requests"] == ["1"]
    assert md["browser.blocked"] == ["1"] and "browser.refused" not in md
    assert md[wire.RAW_RENDERED] == [r.dom]
    content, parser_md = for_parser(res.content, md)
    assert wire.RAW_RENDERED not in parser_md and wire.RAW_RENDERED in md
    ctypes = [v for k, v in wire.decode_headers(parser_md[wire.RAW_HEADERS])
              if k.lower() == "content-type"]
    assert ctypes == ["text/html; charset=utf-8"]
    assert content.startswith(b"\xef\xbb\xbf") and content[3:].decode() == r.dom


def test_the_fetch_engine_renders_what_the_delegator_routes_to_the_browser(tmp_path):
    """FetchEngine with protocol.delegator.config: a URL with fetch.with=browser comes out with
    its rendered DOM and how the render ended; the others as fetched, and a crawl that routes
    nothing to the browser never starts it."""
    import queue

    from owler.fetch.engine import FetchEngine, FetchItem

    log = tmp_path / "farm.log"
    conf = {"http.agent.name": "owler-test", "http.allowed.networks": [S.NETWORK],
            "fetcher.server.delay": 0, "browser.page.budget": BUDGET,
            "protocol.delegator.config": [
                {"className": "browser", "filters": {"fetch.with": "browser"}},
                {"className": "browser", "regex": [r"/fetched$"]},
                {"className": "http"}]}
    outcomes: queue.Queue = queue.Queue()

    def crawl(engine, items):
        for url, md in items:
            assert engine.submit(FetchItem(url, "127.0.74.1", md))
        got = {}
        for _ in items:
            out = outcomes.get(timeout=60)
            got[out.item.url.split("/", 3)[3]] = out
        return got

    with farm_module("tests.farm.scripted", log) as (port,):
        base = f"http://{S.HOST}:{port}/"
        engine = FetchEngine(conf, outcomes.put)
        engine.start()
        try:
            plain = crawl(engine, [(base + "about", {}), (base + "dcl", {})])
            assert engine.browser.stats == {}  # nothing routed to it: never started
            routed = crawl(engine, [(base + "dcl", {"fetch.with": ["browser"]}),
                                    (base + "fetched", {}), (base + "busy",
                                                         {"fetch.with": ["browser"]})])
            counters, _ = engine.snapshot()
        finally:
            engine.stop(timeout=10)
    for out in plain.values():
        assert out.kind == "page" and wire.RAW_RENDERED not in out.metadata
        assert "browser.end" not in out.metadata
    for path, end in (("dcl", "idle"), ("fetched", "idle"), ("busy", "budget")):
        out = routed[path]
        assert out.kind == "page" and out.metadata["browser.end"] == [end], path
        assert out.content.startswith(b"<!DOCTYPE html>")  # the raw response, for the archive
        assert 'id="root"></div>' in out.content.decode()
        assert f"This text of /{path}" in out.metadata[wire.RAW_RENDERED][0]
    assert counters["browser/rendered"] == 3 and counters["browser/budget"] == 1


def test_a_page_the_browser_cannot_render_goes_on_as_fetched_with_the_cause(tmp_path):
    """No browser binary: the page routed to it keeps its raw response (parsed as such), with
    browser.end=failed naming the cause, counted browser/failed."""
    import queue

    from owler.fetch.engine import FetchEngine, FetchItem

    conf = {"http.agent.name": "owler-test", "http.allowed.networks": [S.NETWORK],
            "browser.executable": "no-such-browser-here",
            "protocol.delegator.config": [
                {"className": "browser", "filters": {"fetch.with": "browser"}},
                {"className": "http"}]}
    outcomes: queue.Queue = queue.Queue()
    with farm_module("tests.farm.scripted", tmp_path / "farm.log") as (port,):
        engine = FetchEngine(conf, outcomes.put)
        engine.start()
        try:
            assert engine.submit(FetchItem(f"http://{S.HOST}:{port}/dcl", S.HOST,
                                           {"fetch.with": ["browser"]}))
            out = outcomes.get(timeout=60)
            counters, _ = engine.snapshot()
        finally:
            engine.stop(timeout=10)
    assert out.kind == "page" and out.metadata["browser.end"] == ["failed"]
    assert "no-such-browser-here not found" in out.metadata["browser.end.detail"][0]
    assert wire.RAW_RENDERED not in out.metadata
    assert counters["browser/failed"] == 1 and "browser/rendered" not in counters


def test_a_dom_longer_than_the_limit_is_cut_and_said_so(tmp_path):
    conf = {"http.agent.name": "owler-test", "http.allowed.networks": [S.NETWORK],
            "browser.dom.limit": 300}

    async def run(port: str):
        http = HttpFetcher(conf)
        await http.start()
        browser = BrowserFetcher(conf, http, RobotsSource(conf, http))
        try:
            url = f"http://{S.HOST}:{port}/"
            return await browser.render(url, await http.fetch(url))
        finally:
            await browser.close()
            await http.close()

    with farm_module("tests.farm.scripted", tmp_path / "farm.log") as (port,):
        r = asyncio.run(run(port))
    assert r.end == "idle" and len(r.dom) == 300
    assert r.detail.startswith("the DOM cut at 300 of its ") and r.detail.endswith(" characters")
