"""The browser protocol's logic without a browser (issue 48): routing as StormCrawler's
DelegatorProtocol (owler.fetch.browser.Router), what a render leaves in the metadata and what
the parser gets (note, forget, for_parser), the rendered DOM's WARC record, and the detector
parse filter (owler.parse.filters.jsrender) on the scripted farm's shell and on real pages.
The browser itself: tests/integration/test_browser_fetch.py."""

from __future__ import annotations

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler import wire
from owler.conf import ConfError
from owler.constants import DELAY_MINS
from owler.fetch.browser import Rendered, Router, for_parser, forget, note, wants_render
from owler.fetch.http import FetchResult
from owler.parse.filters import ParsedPage
from owler.parse.filters.jsrender import JsRenderingDetector
from owler.parse.html import parse_html
from owler.warc import WARCWriter
from tests.farm import scripted
from tests.realpages import CRAWL_WARCS, TRAF, trafilatura, warc_html

PLAYWRIGHT = "org.apache.stormcrawler.protocol.playwright.HttpProtocol"
OKHTTP = "org.apache.stormcrawler.protocol.okhttp.HttpProtocol"


# ---- routing -----------------------------------------------------------------------------------

def router(*entries):
    return Router.from_conf({"protocol.delegator.config": list(entries)})


def test_no_delegator_config_fetches_everything_over_http():
    r = Router.from_conf({})
    assert not r.uses_browser
    assert r.protocol("http://a.example/", {"fetch.with": ["browser"]}) == "http"


def test_routes_by_metadata_value_or_presence_first_match_wins():
    r = router({"className": PLAYWRIGHT, "filters": {"fetch.with": "browser"}},
               {"className": "browser", "filters": {"js": ""}},
               {"className": OKHTTP})
    assert r.uses_browser
    assert r.protocol("http://a.example/", {"fetch.with": ["browser"]}) == "browser"
    assert r.protocol("http://a.example/", {"fetch.with": ["http"]}) == "http"
    assert r.protocol("http://a.example/", {"js": ["anything"]}) == "browser"
    assert r.protocol("http://a.example/", {}) == "http"


def test_routes_by_url_patterns_and_with_or_and_operators():
    both = router({"className": "browser", "filters": {"depth": "1"},
                   "regex": [r"^https?://spa\.example/"]}, {"className": "http"})
    assert both.protocol("http://spa.example/x", {"depth": ["1"]}) == "browser"
    assert both.protocol("http://spa.example/x", {"depth": ["2"]}) == "http"
    assert both.protocol("http://other.example/", {"depth": ["1"]}) == "http"
    either = router({"className": "browser", "filters": {"depth": "1"}, "operator": "OR",
                     "regex": r"^https?://spa\.example/"}, {"className": "http"})
    assert either.protocol("http://spa.example/x", {}) == "browser"
    assert either.protocol("http://other.example/", {"depth": ["1"]}) == "browser"
    assert either.protocol("http://other.example/", {}) == "http"


@pytest.mark.parametrize("entries, says", [
    ([{"className": "browser", "filters": {"fetch.with": "browser"}}], "the last entry"),
    ([{"className": "selenium.Thing"}], "neither a browser protocol"),
    ([{"className": "browser", "regex": ["("]}, {"className": "http"}], ".regex"),
    ([{"className": "browser", "operator": "XOR", "regex": ["a"]}, {"className": "http"}],
     "operator"),
    ([{"className": "browser", "filters": ["fetch.with"]}, {"className": "http"}], ".filters"),
    ("browser", "expected a list"),
])
def test_bad_delegator_config_is_refused_naming_the_entry(entries, says):
    with pytest.raises(ConfError, match="protocol.delegator.config") as err:
        Router.from_conf({"protocol.delegator.config": entries})
    assert says in str(err.value)


def test_only_html_answers_are_rendered():
    def res(status, ctype, body=b"<html></html>"):
        return FetchResult(url="http://a.example/", status=status,
                           headers=[("Content-Type", ctype)], content=body)
    assert wants_render({}, res(200, "text/html"))
    assert not wants_render({}, res(200, "application/pdf", b"%PDF-1.7"))
    assert not wants_render({}, res(304, "text/html"))
    assert not wants_render({}, res(200, "text/html", b""))
    assert not wants_render({"signals.withheld": ["ai-train"]}, res(200, "text/html"))


# ---- what a render leaves ----------------------------------------------------------------------

def test_note_and_forget_and_what_the_parser_gets():
    md = {wire.RAW_HEADERS: wire.encode_headers([("Content-Type", "text/html; charset=koi8-r"),
                                                 ("X-A", "1"), ("Content-Length", "12")]),
          "browser.refused": ["stale"]}
    r = Rendered("<html><head><title>é</title></head><body></body></html>", "budget",
                 "no load event", requests=3, blocked=2,
                 refused=[f"robots.txt http://a.example/{i}" for i in range(30)], elapsed=1.5)
    note(md, r)
    assert md["browser.end"] == ["budget"] and md["browser.end.detail"] == ["no load event"]
    assert (md["browser.requests"], md["browser.blocked"]) == (["3"], ["2"])
    assert len(md["browser.refused"]) == 20 and md["browser.refused"][0].endswith("/0")
    assert md["browser.render.ms"] == ["1500"]
    content, parsed_md = for_parser(b"raw", md)
    assert content == "\ufeff".encode() + r.dom.encode()
    assert wire.decode_headers(parsed_md[wire.RAW_HEADERS]) == [
        ("X-A", "1"), ("Content-Type", "text/html; charset=utf-8")]
    assert parse_html("http://a.example/", content, {"content-type": "text/html; charset=utf-8"}
                      ).title == "é"
    forget(md)
    assert not [k for k in md if k.startswith("browser.")] and wire.RAW_RENDERED not in md
    assert for_parser(b"raw", md) == (b"raw", md)  # a page not rendered: unchanged


def test_the_rendered_dom_is_a_conversion_record_referring_to_the_response(tmp_path):
    dom = "<!DOCTYPE html><html><head></head><body><a href=/x>ü</a></body></html>"
    md = {wire.RAW_REQUEST: ["GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"],
          wire.RAW_STATUS_LINE: ["HTTP/1.1 200 OK"],
          wire.RAW_HEADERS: ["Content-Type: text/html"], wire.RAW_FETCH_TIME: ["1714564800.5"],
          wire.RAW_RENDERED: [dom]}
    with WARCWriter(tmp_path) as w:
        w.write_page("http://a.example/", b"<div id=root></div>", md)
        where = w.last_record
    [path] = sorted(tmp_path.glob("*.warc.gz"))
    recs = []
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            recs.append((rec.rec_type, dict(rec.rec_headers.headers),
                         rec.content_stream().read()))
    assert [t for t, _, _ in recs] == ["warcinfo", "request", "response", "conversion"]
    resp, conv = recs[2][1], recs[3][1]
    assert recs[2][2] == b"<div id=root></div>"  # the raw response, as the server sent it
    assert conv["WARC-Refers-To"] == resp["WARC-Record-ID"]
    assert conv["WARC-Target-URI"] == resp["WARC-Target-URI"] == "http://a.example/"
    assert conv["WARC-Date"] == resp["WARC-Date"]
    assert conv["Content-Type"] == "text/html; charset=utf-8"
    assert recs[3][2] == dom.encode()
    assert where.length < path.stat().st_size  # the writer points at the response record


# ---- the detector ------------------------------------------------------------------------------

def page_of(url, content, md=None):
    headers = {"content-type": "text/html; charset=utf-8"}
    res = parse_html(url, content, headers, conf={"textextractor.no.text": True})
    return ParsedPage(url, content, headers, res, dict(md or {}),
                      [o.url for o in res.outlinks])


def detector(**params):
    f = JsRenderingDetector()
    f.configure({}, params)
    return f


SHELL = scripted.SHELL.format(private=scripted.PRIVATE).encode()


def test_the_farms_shell_is_marked_and_sent_back_due_now():
    page = page_of("http://127.0.74.1/", SHELL)
    detector().filter(page)
    assert page.metadata == {"fetch.with": ["browser"], "fetch.with.reason": ["empty-root:root"],
                             DELAY_MINS: ["0"]}


@pytest.mark.parametrize("html, reason", [
    (b"<html><body><main id='app'>  </main><script src=a.js></script></body></html>",
     "empty-root:app"),
    (b"<html><body><noscript><p>Please enable <b>JavaScript</b></p></noscript>"
     b"<div id=main></div></body></html>", "noscript-js-required"),
    (b"<html><body><div id=x data-reactroot>hi</div></body></html>", "fingerprint:data-reactroot"),
    (b"<html><body><p>Loading</p><script src=/bundle.js></script><a href=/a>a</a></body></html>",
     "thin-content:text=8,outlinks=1"),
])
def test_each_sign_of_a_shell(html, reason):
    page = page_of("http://a.example/", html)
    detector().filter(page)
    assert page.metadata["fetch.with.reason"] == [reason]


@pytest.mark.parametrize("html", [
    b"<html><body><p>Short page.</p><a href=/a>a</a></body></html>",  # no script, no sign
    b"<html><body><div id=root><p>Rendered on the server</p></div></body></html>",
    b"<html><body><div id=rooted></div><script src=a.js></script><a href=/a>a</a>"
    b"<a href=/b>b</a></body></html>",
])
def test_thin_pages_without_the_signs_are_left_alone(html):
    page = page_of("http://a.example/", html)
    detector().filter(page)
    assert page.metadata == {}


def test_loop_guards_and_params():
    routed = page_of("http://a.example/", SHELL, {"fetch.with": ["http"]})
    detector().filter(routed)
    assert routed.metadata == {"fetch.with": ["http"]}
    rendered = page_of("http://a.example/", SHELL, {"browser.end": ["idle"]})
    detector().filter(rendered)
    assert rendered.metadata == {"browser.end": ["idle"]}
    page = page_of("http://a.example/", SHELL)
    detector(metadataKey="render", metadataValue="yes", recordReason=False,
             refetchDelay=-1).filter(page)
    assert page.metadata == {"render": ["yes"]}
    page = page_of("http://a.example/", SHELL)
    detector(emptyRootIds=["nothing"], fingerprints=[], minOutlinks=0).filter(page)
    assert page.metadata["fetch.with.reason"] == ["noscript-js-required"]
    with pytest.raises(ValueError, match="emptyRootIds"):
        detector(emptyRootIds="root")


def test_pages_with_text_are_never_marked():
    about = page_of("http://127.0.74.1/about", scripted.ABOUT.encode())
    detector().filter(about)
    assert about.metadata == {}
    pages = [(f"http://t.example/{p.name}", trafilatura(p.name)) for p in TRAF.iterdir()
             if p.name.endswith((".html", ".html.gz"))]
    pages += [(url, body) for name in CRAWL_WARCS for url, _, body in warc_html(name)]
    assert len(pages) == 44  # 3 trafilatura pages, 41 HTML responses of the crawl samples
    marked = []
    for url, content in pages:
        page = page_of(url, content)
        detector().filter(page)
        if page.metadata:
            assert page.text_length < 200, url  # only thin pages can be
            marked.append(url)
    assert marked == []  # real pages that say something, shells none of them


def test_the_resource_cache_is_bounded_by_entries_bytes_and_time(monkeypatch):
    from owler.fetch import browser as B

    f = B.BrowserFetcher({"http.agent.name": "owler-test", "browser.cache.entries": 3,
                          "browser.cache.ttl": 60}, None, None)
    answer = lambda n: (200, "OK", [], b"x" * n)  # noqa: E731
    for i in range(5):
        f._cache_put(f"http://a.example/{i}.js", answer(10))
    assert list(f._cache) == [f"http://a.example/{i}.js" for i in (2, 3, 4)]
    assert f._cache_bytes == 30
    f._cache_get("http://a.example/2.js")  # used: the newest now
    f._cache_put("http://a.example/5.js", answer(10))
    assert "http://a.example/3.js" not in f._cache and "http://a.example/2.js" in f._cache
    f._cache_put("http://a.example/huge.js", answer(B.CACHE_MAX_BYTES // 4 + 1))
    assert "http://a.example/huge.js" not in f._cache  # too big to be worth keeping
    monkeypatch.setattr(B, "CACHE_MAX_BYTES", 40)
    f = B.BrowserFetcher({"http.agent.name": "owler-test", "browser.cache.ttl": 60}, None, None)
    for i in range(5):
        f._cache_put(f"http://a.example/{i}.js", answer(10))
    assert list(f._cache) == [f"http://a.example/{i}.js" for i in (1, 2, 3, 4)]
    assert f._cache_bytes == 40
    now = B.time.monotonic()
    monkeypatch.setattr(B.time, "monotonic", lambda: now + 61)
    assert f._cache_get("http://a.example/4.js") is None and f._cache_bytes == 30


def test_the_fetchers_conf_check_refuses_a_bad_route_before_storm_starts():
    from owler.fetch.engine import check_conf

    check_conf({"protocol.delegator.config": [{"className": "browser", "regex": ["x"]},
                                              {"className": "http"}]})
    with pytest.raises(ConfError, match="the last entry"):
        check_conf({"protocol.delegator.config": [{"className": "browser", "regex": ["x"]}]})
    with pytest.raises(ConfError, match="browser.block.types"):
        check_conf({"browser.block.types": {"Image": True}})


def test_stormcrawlers_class_name_loads_the_detector():
    from owler.parse.filters import ParseFilters

    chain = ParseFilters.from_json({"org.apache.stormcrawler.parse.ParseFilters": [
        {"class": "org.apache.stormcrawler.protocol.playwright.parsefilter.JsRenderingDetector",
         "name": "js-rendering-detector", "params": {"minTextLength": 100,
                                                     "metadataValue": "playwright"}}]})
    [f] = chain.filters
    assert isinstance(f, JsRenderingDetector) and f.min_text == 100 and f.value == "playwright"
