"""The parse filter chain (owler.parse.filters) and its page-structure filters (PageMetadata,
CSSFilter, XPathFilter) on real pages: trafilatura's test pages (tests/data/html/trafilatura) and
the HTML responses of the Common Crawl and dolma WARC samples (tests/data/warc)."""

from __future__ import annotations

import json
import logging

import pytest

from owler import wire
from owler.constants import Status
from owler.parse.filters import (ParsedPage, ParseFilter, ParseFilters, ParseFilterSetupError,
                                 non_space_length)
from owler.parse.filters.css import CSSFilter
from owler.parse.filters.pagemeta import PageMetadata
from owler.parse.filters.xpath import XPathFilter, translate
from owler.parse.html import parse_html
from owler.parse.page import PageHandler
from tests.realpages import trafilatura, warc_html

ROOT = "org.apache.stormcrawler.parse.ParseFilters"


def page_of(url, content, headers=None, conf=None, outlinks=()):
    headers = {k.lower(): v for k, v in (headers or {"content-type": "text/html"}).items()}
    res = parse_html(url, content, headers, conf=conf or {"textextractor.no.text": True,
                                                           "simhash.enabled": True})
    return ParsedPage(url, content, headers, res, {}, list(outlinks))


def make(cls, **params):
    f = cls()
    f.name = cls.__name__
    f.configure({}, params)
    return f


def mozilla():
    return trafilatura("mozilla.org.firefox.developer.html")


def fivethirtyeight():
    return trafilatura("webpage.html.gz")


def warc_pages(name):
    """(url, headers, body) of the HTML responses of a WARC in tests/data/warc."""
    return [(url, dict(headers), body) for url, headers, body in warc_html(name)]


# ---- the chain --------------------------------------------------------------------------------


def test_default_chain_from_conf():
    chain = ParseFilters.from_conf({"parsefilters.config.file": "parsefilters.json"})
    names = [f.name for f in chain.filters]
    assert names[0] == "PageMetadata" and "LanguageID" in names
    assert "lang" in chain.keys and "parse.description" in chain.keys


def test_empty_chain_when_unset():
    assert len(ParseFilters.from_conf({})) == 0
    assert len(ParseFilters.from_conf({"parsefilters.config.file": " "})) == 0


def test_chain_setup_errors(tmp_path):
    with pytest.raises(ParseFilterSetupError, match=r"Can't setup x\[org.apache.stormcrawler."
                       r"parse.filter.XPathFilter\]: t: invalid XPath"):
        ParseFilters.from_json({ROOT: [{"class": "org.apache.stormcrawler.parse.filter.XPathFilter",
                                        "name": "x", "params": {"t": "//a[["}}]})
    with pytest.raises(ParseFilterSetupError, match="not ported"):
        ParseFilters.from_json({ROOT: [{"class": "org.apache.stormcrawler.parse.filter."
                                                 "MD5SignatureParseFilter"}]})
    with pytest.raises(ParseFilterSetupError, match=r"c: invalid CSS selector"):
        ParseFilters.from_json({ROOT: [{"class": "owler.parse.filters.css.CSSFilter",
                                        "params": {"c": "h1["}}]})
    with pytest.raises(ParseFilterSetupError, match="no org.apache.stormcrawler.parse.ParseFilters"):
        ParseFilters.from_json({"org.apache.stormcrawler.filtering.URLFilters": []})
    bad = tmp_path / "p.json"
    bad.write_text("[", encoding="utf-8")
    with pytest.raises(ParseFilterSetupError, match="invalid JSON in parse filters file"):
        ParseFilters.from_conf({"parsefilters.config.file": str(bad)})
    with pytest.raises(ParseFilterSetupError, match="cannot read parse filters file"):
        ParseFilters.from_conf({"parsefilters.config.file": str(tmp_path / "none.json")})
    # StormCrawler 2.x's root key and package names
    chain = ParseFilters.from_json({"com.digitalpebble.stormcrawler.parse.ParseFilters": [
        {"class": "com.digitalpebble.stormcrawler.parse.filter.XPathFilter",
         "params": {"t": "//TITLE"}}]})
    assert [type(f) for f in chain.filters] == [XPathFilter]


class Boom(ParseFilter):
    keys = ("boom",)

    def filter(self, page):
        raise RuntimeError("no")


def test_a_failing_filter_is_named_and_the_others_still_run(caplog):
    chain = ParseFilters([Boom(), make(PageMetadata)])
    chain.filters[0].name = "Boom"
    page = page_of("https://www.mozilla.org/", mozilla())
    page.metadata["boom"] = ["stale"]
    with caplog.at_level(logging.WARNING):
        chain.run(page)
    assert page.metadata["parse.filters.failed"] == ["Boom"]
    assert "boom" not in page.metadata
    assert page.metadata["parse.text.length"]
    assert chain.failures == {"Boom": 1} and "Boom failed" in caplog.text


def test_keys_of_an_earlier_parse_are_cleared():
    chain = ParseFilters([make(PageMetadata)])
    page = page_of("https://www.mozilla.org/", mozilla())
    page.metadata.update({"parse.keywords": ["old"], "robots.noArchive": ["true"], "x": ["kept"]})
    chain.run(page)
    assert "parse.keywords" not in page.metadata and "robots.noArchive" not in page.metadata
    assert page.metadata["x"] == ["kept"]


# ---- PageMetadata -------------------------------------------------------------------------------


def test_page_metadata_on_a_real_page():
    page = page_of("https://fivethirtyeight.com/features/manchin/", fivethirtyeight(),
                   {"Content-Type": "text/html; charset=UTF-8", "Content-Language": "en-US"},
                   outlinks=["https://a.example/1", "https://a.example/2"])
    make(PageMetadata).filter(page)
    md = page.metadata
    assert md["parse.description"][0].startswith("Sen. Joe Manchin told reporters Wednesday")
    assert md["parse.lang"] == ["en-US"]
    assert md["protocol.content-language"] == ["en-US"]
    assert md["parse.outlinks.count"] == ["2"]
    length = int(md["parse.text.length"][0])
    assert length == len(page.text.replace(" ", "")) and 2000 < length < 23220
    assert "robots.noFollow" not in md


@pytest.mark.parametrize("body", ["<p>one  two</p>\n\t<div>three four</div>",
                                  "<p>un\u00a0deux  trois</p>\n\t<div>quatre \u00e9t\u00e9</div>"])
def test_text_length_counts_all_but_whitespace(body):
    page = page_of("https://a.example/", f"<html><body>{body}</body></html>".encode())
    raw = page.raw_text
    assert page.text_length == sum(ch not in " \n\t\u00a0" for ch in raw) > 10


@pytest.mark.parametrize("text", ["", " \n\t", "plain ascii\ttext\n", "caf\u00e9\u00a0au lait ",
                                  "\u4e2d\u6587 \u00a0\U0001F600\t\ud800x", "\x0b\x0c\r\u2003 a"])
def test_non_space_length_is_the_count_of_other_characters(text):
    assert non_space_length(text) == sum(ch not in " \n\t\u00a0" for ch in text)


def test_page_metadata_robots_and_cut():
    html = (b'<html><head><meta name="robots" content="noindex, nofollow, noarchive">'
            b'<meta name="keywords" content="a, b,  c"><meta name="description" content="'
            + b"x" * 50 + b'"></head><body>text</body></html>')
    page = page_of("http://h.example/", html)
    make(PageMetadata, maxLength=10, textLength=False).filter(page)
    md = page.metadata
    assert md["robots.noFollow"] == ["true"] and md["robots.noArchive"] == ["true"]
    assert md["parse.description"] == ["x" * 10] and md["parse.keywords"] == ["a, b, c"]
    assert "parse.text.length" not in md
    with pytest.raises(ValueError):
        make(PageMetadata, maxLength=0)


def test_page_metadata_through_the_page_handler_on_warc_pages():
    """Every HTML response of the Common Crawl and dolma samples gets the keys its page has."""
    handler = PageHandler({"parsefilters.config.file": "parsefilters.json"})
    pages = warc_pages("CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc")
    pages += warc_pages("dolma-sample-0000.warc.gz") + warc_pages("dolma-sample-0001.warc.gz")
    assert len(pages) > 30
    with_text = 0
    for url, headers, body in pages:
        md = {wire.RAW_HEADERS: wire.encode_headers(list(headers.items()))}
        out = handler.handle_page(url, body, md)
        if out.status != Status.FETCHED:
            continue
        assert out.metadata["parse.outlinks.count"] == [str(len(out.outlinks))]
        n = int(out.metadata["parse.text.length"][0])
        with_text += n > 500
        assert "parse.filters.failed" not in out.metadata
    assert with_text > 20


# ---- CSS / XPath ------------------------------------------------------------------------------


def test_css_filter_on_a_real_page():
    f = make(CSSFilter, **{"parse.og.desc": "meta[property='og:description']::attr(content)",
                           "parse.h1": ["h7", "h1::text"], "none": "blink"})
    page = page_of("https://fivethirtyeight.com/x", fivethirtyeight())
    f.filter(page)
    md = page.metadata
    assert md["parse.og.desc"][0].startswith("Sen. Joe Manchin")
    assert md["parse.h1"] == ["Could Manchin Actually Leave The Democratic Party?"]
    assert "none" not in md
    assert f.keys == ("parse.og.desc", "parse.h1", "none")


def test_xpath_filter_stormcrawler_dialects():
    f = make(XPathFilter, **{
        "parse.title": ["//TITLE/allText()", "//META[@name=\"title\"]/@content"],
        "canonical": "//*[@rel=\"canonical\"]/@href",
        "parse.description": ["//*[@name=\"description\"]/@content",
                              "//*[@name=\"Description\"]/@content"],
        "links": "count(//a)",
    })
    page = page_of("https://www.mozilla.org/", mozilla())
    f.filter(page)
    md = page.metadata
    assert md["parse.title"] == ["Welcome to Firefox Developer Edition"]
    assert md["canonical"] == ["https://www.mozilla.org/en-US/firefox/39.0a2/firstrun/"]
    assert "parse.description" not in md  # the page's description is empty
    assert int(md["links"][0]) > 10


def test_xpath_translation():
    assert translate("//TITLE/allText()") == "//title"
    assert translate('//META[@NAME="DESC"]/@CONTENT') == '//meta[@name="DESC"]/@content'
    assert translate("(//H1)[1] | //child::DIV") == "(//h1)[1] | //child::div"
    assert translate("count(//A)") == "count(//a)"


def test_xpath_filter_survives_bad_bytes():
    f = make(XPathFilter, t="//title")
    page = page_of("http://h.example/", b"\x00\xff\xfe<title>ok</title>")
    f.filter(page)
    assert page.metadata.get("t") in (["ok"], None)
    empty = page_of("http://h.example/", b"   ")
    f.filter(empty)
    assert "t" not in empty.metadata


def test_chain_json_round_trip(tmp_path):
    path = tmp_path / "pf.json"
    path.write_text(json.dumps({ROOT: [
        {"class": "owler.parse.filters.pagemeta.PageMetadata", "name": "meta"},
        {"class": "org.apache.stormcrawler.parse.filter.XPathFilter", "name": "xp",
         "params": {"parse.h1": "//H1"}}]}), encoding="utf-8")
    handler = PageHandler({"parsefilters.config.file": str(path)})
    out = handler.handle_page("https://fivethirtyeight.com/x", fivethirtyeight(),
                              {wire.RAW_HEADERS: wire.encode_headers(
                                  [("Content-Type", "text/html")])})
    assert out.metadata["parse.h1"] == ["Could Manchin Actually Leave The Democratic Party?"]
    assert out.metadata["parse.title"]


def test_a_page_that_is_no_longer_html_keeps_no_parse_filter_values():
    handler = PageHandler({"parsefilters.config.file": "parsefilters.json"})
    md = {"lang": ["de"], "lang.source": ["text"], "parse.description": ["old"], "depth": ["1"],
          wire.RAW_HEADERS: wire.encode_headers([("Content-Type", "image/png")])}
    out = handler.handle_page("http://h.example/doc", b"\x89PNG\r\n\x1a\n", md)
    assert out.status == Status.FETCHED and out.metadata["parse.mimetype"] == ["image/png"]
    assert "lang" not in out.metadata and "parse.description" not in out.metadata
    assert out.metadata["depth"] == ["1"]
