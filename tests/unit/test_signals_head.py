"""The ``<meta>`` signals read from an HTML response's bytes at fetch time (owler.signals.head,
issue 47): the forms sites write them in, what is not an element, what is not ours, malformed
values; and the scanner against a real HTML parser (lexbor, the parser's) on real pages: an
archived crawl of iana.org shipped in the pywb package, StormCrawler's test pages, and the same
pages with signal metas written into their heads in many spellings."""

from __future__ import annotations

import itertools

from selectolax.lexbor import LexborHTMLParser

from owler.signals import (AI_INPUT, AI_TRAIN, META_ROBOTS, REFUSED, TDM, TDMREP_META,
                           UNKNOWN, resolve)
from owler.signals.head import head_metas, is_html, meta_statements
from tests.material import fetched, shared

AGENTS = ["owler", "owler-py"]
ALL = [b"robots", b"owler", b"owler-py", b"tdm-reservation", b"tdm-policy", b"otherbot"]


def metas(doc: bytes, names=ALL, limit: int = 65536):
    return head_metas(doc, names, limit)


def test_attribute_order_quotes_case_and_references():
    doc = (b"<!DOCTYPE html><HTML><Head>\n<meta charset=utf-8>"
           b"<META CONTENT='noindex, NoAI' NAME=\"Robots\">"
           b"<meta\n  name=OWLER\tcontent=noimageai />"
           b"<meta content=\"1\" name=\"tdm-reservation\" content=\"0\">"
           b"<meta name=tdm-policy content=\"https://p.example/x?a=1&amp;b=2&#44;c\">"
           b"<meta name=\" robots \" content=\"noai\"></head>")
    assert metas(doc) == [("robots", "noindex, NoAI"), ("owler", "noimageai"),
                          ("tdm-reservation", "1"),
                          ("tdm-policy", "https://p.example/x?a=1&b=2,c"), ("robots", "noai")]
    st = meta_statements(doc, AGENTS)
    assert {s.source for s in st} == {META_ROBOTS, TDMREP_META}
    assert resolve(st)[AI_TRAIN]["state"] == REFUSED and resolve(st)[AI_INPUT]["state"] == REFUSED
    (tdm,) = [s for s in st if s.purpose == TDM]
    assert tdm.state == REFUSED and tdm.raw == ("tdm-reservation: 1; tdm-policy: "
                                                "https://p.example/x?a=1&b=2,c")
    assert [s.images for s in st if s.raw == "owler: noimageai"] == [True, True]


def test_what_is_text_and_not_an_element():
    doc = (b"<html><head><!-- <meta name=robots content=c1> -->"
           b"<script>var s = '<meta name=robots content=s1></head><body>';</SCRIPT >"
           b"<style>/* <meta name=robots content=s2> */</style>"
           b"<title><meta name=robots content=t1></title>"
           b"<template><meta name=robots content=t2></template>"
           b"<textarea><meta name=robots content=t3></textarea>"
           b"<noscript><meta name=robots content=inside-noscript></noscript>"
           b"<metadata name=robots content=m1><meta-x name=robots content=m2>"
           b"<meta name=robots content=kept></head>"
           b"<meta name=robots content=after-head><body><meta name=robots content=body>")
    assert metas(doc) == [("robots", "inside-noscript"), ("robots", "kept")]
    # no </head>: the head ends at <body (case as written)
    assert metas(b"<meta name=robots content=a><BODY class=x><meta name=robots content=b>") \
        == [("robots", "a")]


def test_the_scan_limit_and_what_is_not_html():
    doc = b"<head><meta name=x content=y>" + b" " * 100 + b"<meta name=robots content=noai>"
    assert metas(doc) == [("robots", "noai")]
    assert metas(doc, limit=64) == []  # past the limit: not read
    assert meta_statements(doc, AGENTS, limit=64) == []
    assert is_html("text/html; charset=utf-8", b"") and is_html("application/xhtml+xml", b"")
    assert not is_html("application/json", b"<meta name=robots content=noai>")
    assert is_html(None, b"  \n<!doctype html>") and not is_html(None, b"%PDF-1.7")


def test_other_agents_missing_content_and_malformed_values():
    doc = (b"<head><meta name=otherbot content=noai><meta name=robots>"
           b"<meta name=tdm-reservation content=yes><meta name=tdm-policy content=p></head>")
    st = meta_statements(doc, AGENTS)
    (tdm,) = st  # otherbot's noai is not ours; a robots meta without content says nothing
    assert tdm.source == TDMREP_META and tdm.state == UNKNOWN and "neither 1 nor 0" in tdm.reason
    assert meta_statements(b"<meta name=tdm-reservation><meta name=x>", AGENTS)[0].state == UNKNOWN
    assert meta_statements(b"<meta name=tdm-policy content=https://p.example/>", AGENTS) == []
    # a reservation of 0 allows; the first of two metas is the one read
    (zero,) = meta_statements(b"<meta name=tdm-reservation content=0>"
                              b"<meta name=tdm-reservation content=1>", AGENTS)
    assert zero.state == "allowed"


def test_what_a_hostile_site_sends_ends_the_scan_without_an_error():
    for doc in (b"<meta name=robots content=noai" + b" x" * 50_000,  # a tag never closed
                b"<head>" + b"<meta " * 10_000,
                b"<head><!--" + b"<meta name=robots content=noai>" * 2_000,
                b"<head><script>" + b"<meta name=robots content=noai>" * 2_000,
                b"<meta name='robots content=noai>" * 3_000,
                bytes(range(256)) * 300, b"", b"<", b"<meta", b"<meta name=robots content="):
        metas(doc)
        meta_statements(doc, AGENTS)
    assert metas(b"<meta name=robots content=noai") == [("robots", "noai")]
    assert metas(b"<meta name=\"robots\" content=\"noai") == [("robots", "noai")]


# -- against lexbor on real pages ------------------------------------------------------------

def real_pages() -> list[bytes]:
    """The HTML responses of pywb's archived crawl of iana.org (a registry package's file,
    fetched by make setup) and StormCrawler's test pages (read in place)."""
    from warcio.archiveiterator import ArchiveIterator

    pages = []
    with open(fetched("pywb-2.10.0", "warcs", pattern="iana.warc.gz") / "iana.warc.gz",
              "rb") as f:
        for rec in ArchiveIterator(f):
            if rec.rec_type == "response" and "html" in (
                    rec.http_headers.get_header("content-type") or ""):
                body = rec.content_stream().read()
                if body:
                    pages.append(body)
    folder = shared("html", "stormcrawler", pattern="*.html")
    pages.extend(p.read_bytes() for p in sorted(folder.glob("*.html")))
    assert len(pages) >= 20
    return pages


def lexbor_head_metas(doc: bytes, names) -> list[tuple[str, str]]:
    tree = LexborHTMLParser(doc.decode("utf-8", "replace"))
    out = []
    for node in tree.css("head > meta, head noscript > meta"):
        attrs = node.attributes
        name = (attrs.get("name") or "").strip().lower()
        if name.encode() in names:
            out.append((name, attrs.get("content") or ""))
    return out


#: signal metas in the spellings sites use (attribute order, quotes, case, spaces, references,
#: an XHTML end)
SPELLINGS = [
    b'<meta name="robots" content="noai, noimageai">',
    b"<META CONTENT='NoAI' NAME='ROBOTS'>",
    b"<meta name=owler content=noai />",
    b'<meta\n\tname="tdm-reservation"\n\tcontent="1"\n>',
    b'<meta content="https://p.example/policy?a=1&amp;b=&quot;2&quot;" name="tdm-policy">',
    b'<meta name="otherbot" content="noai">',
    b'<meta name="robots" content="index, follow">',
]


def test_the_scanner_reads_what_lexbor_reads_in_the_head_of_real_pages():
    pages = real_pages()
    checked = 0
    for doc in pages:
        names = {(n.attributes.get("name") or "").strip().lower().encode()
                 for n in LexborHTMLParser(doc.decode("utf-8", "replace")).css("head meta")}
        names = (names - {b""}) | set(ALL)
        assert metas(doc, names) == lexbor_head_metas(doc, names)
        checked += 1
        # the same page with signal metas written after <head>, two by two in every order, and
        # the same again inside a comment and a script (text, not elements)
        at = doc.lower().find(b"<head>")
        if at < 0:
            continue
        at += len(b"<head>")
        for pair in itertools.permutations(SPELLINGS, 2):
            block = b"".join(pair)
            variant = (doc[:at] + b"<!--" + block + b"--><script>'" + block + b"'</script>"
                       + block + doc[at:])
            assert metas(variant, names) == lexbor_head_metas(variant, names), block
            checked += 1
    assert checked > 500
