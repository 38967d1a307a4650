"""owler.sitemap.parser: formats, leniency, limits and hostile inputs."""

from __future__ import annotations

import gzip
import socket
import threading
import tracemalloc
from pathlib import Path

import pytest

from owler.sitemap.parser import INDEX, Limits, SitemapError, normalize_lastmod, parse_sitemap

DATA = Path(__file__).resolve().parents[1] / "data" / "sitemaps" / "feedparser"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(body: str, ns: str = NS, extra: str = "") -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}{extra}>{body}</urlset>'.encode()


def locs(result):
    return [e.loc for e in result.entries]


def test_urlset_fields_and_extensions():
    r = parse_sitemap(urlset(
        "<url><loc>http://a.com/1</loc><lastmod>2024-05-06T07:08:09+02:00</lastmod>"
        "<changefreq> Daily </changefreq><priority>0.8</priority>"
        "<image:image><image:loc>http://a.com/i.jpg</image:loc><image:caption>c</image:caption>"
        "</image:image><news:news><news:publication><news:name>N</news:name></news:publication>"
        "<news:title>T</news:title></news:news>"
        '<xhtml:link rel="alternate" hreflang="de" href="http://a.com/de"/>'
        "<video:video><video:title>V</video:title><video:tag>x</video:tag><video:tag>y</video:tag>"
        "</video:video><mobile:mobile/></url>"
        "<url><loc>http://a.com/2</loc><priority>7</priority><changefreq>sometimes</changefreq></url>",
        extra=' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
              ' xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"'
              ' xmlns:xhtml="http://www.w3.org/1999/xhtml"'
              ' xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"'
              ' xmlns:mobile="http://www.google.com/schemas/sitemap-mobile/1.0"'))
    assert r.kind == "urlset" and not r.truncated
    e, e2 = r.entries
    assert (e.loc, e.lastmod, e.changefreq, e.priority) == (
        "http://a.com/1", "2024-05-06T05:08:09Z", "daily", 0.8)
    assert e.extensions == {
        "IMAGE.loc": ["http://a.com/i.jpg"], "IMAGE.caption": ["c"], "NEWS.name": ["N"],
        "NEWS.title": ["T"], "LINKS.href": ["http://a.com/de"], "LINKS.params.rel": ["alternate"],
        "LINKS.params.hreflang": ["de"], "VIDEO.title": ["V"], "VIDEO.tag": ["x", "y"],
        "MOBILE.mobile": ["true"]}
    assert (e2.priority, e2.changefreq) == (None, None)  # out of range, unknown: ignored


def test_index_missing_loc_and_whitespace():
    r = parse_sitemap(f"""<sitemapindex {NS}>
      <sitemap><loc>
          http://a.com/s1.xml
      </loc><lastmod>2024-01-02</lastmod></sitemap>
      <sitemap>http://a.com/s2.xml?a=1&amp;b=2</sitemap>
      <sitemap><lastmod>2024-01-02</lastmod></sitemap>
      <sitemap><loc></loc></sitemap>
    </sitemapindex>""".encode())
    assert r.kind == INDEX and r.is_index
    assert locs(r) == ["http://a.com/s1.xml", "http://a.com/s2.xml?a=1&b=2"]
    assert r.entries[0].lastmod == "2024-01-02T00:00:00Z"
    assert r.dropped == 2


@pytest.mark.parametrize("ns", ['xmlns="http://www.google.com/schemas/sitemap/0.84"', "",
                                'xmlns="urn:wrong"'])
def test_wrong_or_missing_namespace(ns):
    assert locs(parse_sitemap(urlset("<url><loc>http://a.com/1</loc></url>", ns=ns))) == \
        ["http://a.com/1"]


def test_bom_whitespace_undeclared_prefix_and_case():
    data = b"\xef\xbb\xbf \r\n " + urlset(
        "<URL><LOC>http://a.com/1</LOC></URL><url><loc>http://a.com/2</loc>"
        "<image:image><image:loc>http://a.com/i.png</image:loc></image:image></url>")
    r = parse_sitemap(data)
    assert locs(r) == ["http://a.com/1", "http://a.com/2"]
    assert r.entries[1].extensions == {"IMAGE.loc": ["http://a.com/i.png"]}


def test_utf16_and_declared_encodings():
    doc = urlset("<url><loc>http://a.com/caf\u00e9</loc></url>").decode()
    assert locs(parse_sitemap(doc.replace("UTF-8", "UTF-16").encode("utf-16"))) == \
        ["http://a.com/caf\u00e9"]
    for enc, word in (("windows-1252", "caf\u00e9\u20ac"), ("big5", "\u5927"), ("euc-kr", "\ub144"),
                      ("shift_jis", "\u65e5\u672c")):
        data = doc.replace("UTF-8", enc).replace("caf\u00e9", word).encode(enc)
        assert locs(parse_sitemap(data)) == [f"http://a.com/{word}"], enc


def test_text_sitemap():
    data = b"\xef\xbb\xbfhttp://a.com/1\r\n\n  http://a.com/2  \n# comment\nnot a url\nhttp://a.com/3"
    r = parse_sitemap(data)
    assert r.kind == "text" and locs(r) == ["http://a.com/1", "http://a.com/2", "http://a.com/3"]
    assert r.dropped == 1


def test_gzip_plain_concatenated_and_broken():
    body = urlset("<url><loc>http://a.com/1</loc></url>")
    assert locs(parse_sitemap(gzip.compress(body))) == ["http://a.com/1"]
    two = gzip.compress(b"http://a.com/1\n") + gzip.compress(b"http://a.com/2\n")
    assert locs(parse_sitemap(two)) == ["http://a.com/1", "http://a.com/2"]
    with pytest.raises(SitemapError) as exc:
        parse_sitemap(b"\x1f\x8b\x08\x00garbage-garbage")
    assert exc.value.cause == "gzip"
    many = urlset("".join(f"<url><loc>http://a.com/{i}</loc></url>" for i in range(3000)))
    cut = gzip.compress(many)[:-2000]  # a truncated download: what arrived is kept
    r = parse_sitemap(cut)
    assert 0 < len(r.entries) < 3000 and r.truncated


def test_feeds_rss_rdf_atom():
    rss = parse_sitemap(b'<?xml version="1.0"?><rss version="2.0"><channel><link>http://a.com/</link>'
                        b"<item><link> http://a.com/x </link><pubDate>Tue, 10 Jun 2025 04:00:00 +0200"
                        b"</pubDate></item><item><title>no link</title></item></channel></rss>")
    assert rss.kind == "rss" and locs(rss) == ["http://a.com/x"]
    assert rss.entries[0].lastmod == "2025-06-10T02:00:00Z" and rss.dropped == 1
    atom = parse_sitemap(b'<feed xmlns="http://www.w3.org/2005/Atom"><link href="http://a.com/"/>'
                         b'<entry><link rel="edit" href="http://a.com/edit"/><link href="http://a.com/e"/>'
                         b"<published>2025-01-01T00:00:00Z</published><updated>2025-02-01T00:00:00Z"
                         b"</updated></entry></feed>")
    assert atom.kind == "atom" and locs(atom) == ["http://a.com/e"]
    assert atom.entries[0].lastmod == "2025-02-01T00:00:00Z"


@pytest.mark.parametrize("name,expected", [
    ("wellformed_rss_item_link.xml", ["http://example.com/"]),
    ("wellformed_rdf_rdf_item_link.xml", ["http://example.com/1"]),
    ("wellformed_atom10_entry_link_href.xml", ["http://www.example.com/"]),
    ("wellformed_atom10_entry_link_multiple.xml", ["http://www.example.com/"]),
    ("wellformed_rss_item_pubDate.xml", []),  # an item without a link: dropped
    ("encoding_big5.xml", []),
    ("encoding_euc-kr-item.xml", []),
    ("encoding_x80_windows-1252.xml", []),
    ("encoding_http_application_atom_xml_gb2312_encoding.xml", []),
])
def test_feedparser_fixtures(name, expected):
    assert locs(parse_sitemap((DATA / name).read_bytes())) == expected


def test_feedparser_entity_declaration_is_refused():
    # a real-world pattern (XHTML entity sets in a DOCTYPE): refused, never fetched or expanded
    with pytest.raises(SitemapError) as exc:
        parse_sitemap((DATA / "wellformed_rdf_doctype_contains_entity_decl.xml").read_bytes())
    assert exc.value.cause == "xml_entities"


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                     for i in range(1, 10))
          + b"]><urlset><url><loc>http://a.com/&lol9;</loc></url></urlset>")
QUADRATIC = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "' + b"x" * 50000 + b'">]><urlset>'
             + b"<url><loc>&a;&a;&a;&a;&a;&a;&a;&a;</loc></url>" * 1000 + b"</urlset>")


@pytest.mark.parametrize("doc", [LAUGHS, QUADRATIC,
                                 b'<!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                                 b"<urlset><url><loc>&x;</loc></url></urlset>",
                                 b'<!DOCTYPE u [<!ENTITY x SYSTEM "x" NDATA png>]><urlset/>'])
def test_entities_are_refused_at_once(doc, monkeypatch):
    """Refused at the entity's declaration: no element or text (where an entity would be
    expanded) reaches the handler."""
    from owler.sitemap import parser

    seen = []

    class Watched(parser._XmlHandler):
        def start(self, name, attrs):
            seen.append(name)
            super().start(name, attrs)

        def chars(self, data):
            seen.append(data)
            super().chars(data)

    monkeypatch.setattr(parser, "_XmlHandler", Watched)
    with pytest.raises(SitemapError) as exc:
        parse_sitemap(doc)
    assert exc.value.cause == "xml_entities"
    assert seen == []


def test_nothing_external_is_ever_fetched():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    hits = []

    def accept():
        try:
            hits.append(srv.accept())
        except OSError:
            pass

    th = threading.Thread(target=accept)
    th.start()
    try:
        url = f"http://127.0.0.1:{port}/x.dtd"
        # an external DTD (no entity in it is ever read) parses; external and parameter
        # entities are refused
        r = parse_sitemap(f'<!DOCTYPE urlset SYSTEM "{url}"><urlset><url><loc>http://a.com/1'
                          f"</loc></url></urlset>".encode())
        assert locs(r) == ["http://a.com/1"]
        for doc in (f'<!DOCTYPE u [<!ENTITY % p SYSTEM "{url}"> %p;]><urlset/>',
                    f'<!DOCTYPE u [<!ENTITY e SYSTEM "{url}">]><urlset><url><loc>&e;</loc></url>'
                    "</urlset>"):
            with pytest.raises(SitemapError):
                parse_sitemap(doc.encode())
        th.join()
    finally:
        srv.close()
    assert hits == []


def test_gzip_bomb_bounded_work_and_memory():
    z = gzip.compress(b"<urlset>" + b" " * (256 << 20), 9)  # 256 MiB of blanks, ~260 KB
    tracemalloc.start()
    r = parse_sitemap(z, Limits(max_bytes=50 << 20))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the work: 50 MiB decompressed and parsed, not the 256 (the time: bench/bench_sitemap.py)
    assert r.truncated == "max_bytes" and r.bytes_parsed == 50 << 20 and r.entries == []
    assert peak < 8 << 20, peak  # streamed: never the whole document in memory


def test_limits_urls_bytes_nesting_and_long_loc():
    doc = urlset("".join(f"<url><loc>http://a.com/{i}</loc></url>" for i in range(120)))
    r = parse_sitemap(doc, Limits(max_urls=100))
    assert len(r.entries) == 100 and r.truncated == "max_urls"
    r = parse_sitemap(doc, Limits(max_bytes=2000))
    assert 0 < len(r.entries) < 120 and r.truncated == "max_bytes"
    deep = b"<urlset>" + b"<a>" * 200 + b"</a>" * 200 + b"</urlset>"
    assert parse_sitemap(deep).truncated.startswith("malformed")
    long = urlset(f"<url><loc>http://a.com/{'x' * 10000}</loc></url><url><loc>http://a.com/ok</loc></url>")
    r = parse_sitemap(long)
    assert locs(r) == ["http://a.com/ok"] and r.dropped == 1
    text = "".join(f"http://a.com/{i}\n" for i in range(60)).encode()
    assert len(parse_sitemap(text, Limits(max_urls=50)).entries) == 50


def test_syntax_error_keeps_what_was_read_and_salvages_the_rest():
    doc = urlset("<url><loc>http://a.com/1</loc></url><url><loc>http://a.com/?a=1&b=2</loc></url>"
                 "<url><loc>http://a.com/3</loc></url><url><loc>http://a.com/4&amp;x</loc></url>")
    r = parse_sitemap(doc)
    assert locs(r) == ["http://a.com/1", "http://a.com/?a=1&b=2", "http://a.com/3",
                       "http://a.com/4&x"]
    assert r.truncated.startswith("malformed")
    cut = urlset("".join(f"<url><loc>http://a.com/{i}</loc></url>" for i in range(10)))[:-40]
    r = parse_sitemap(cut)  # cut short: the complete entries are kept
    assert 5 <= len(r.entries) <= 10 and r.truncated.startswith("malformed")


@pytest.mark.parametrize("doc,cause", [
    (b"", "empty"), (b"  \n\t ", "empty"), (b"\x00" * 100, "empty"),
    (b"<!DOCTYPE html><html><body>soft 404</body></html>", "not_a_sitemap"),
    (b"<<<<not xml", "malformed"),
])
def test_not_a_sitemap(doc, cause):
    with pytest.raises(SitemapError) as exc:
        parse_sitemap(doc)
    assert exc.value.cause == cause


@pytest.mark.parametrize("text,expected", [
    ("2024", "2024-01-01T00:00:00Z"), ("2024-05", "2024-05-01T00:00:00Z"),
    ("2024-05-06", "2024-05-06T00:00:00Z"), ("2024-05-06T07:08Z", "2024-05-06T07:08:00Z"),
    ("2024-05-06T07:08:09.123-03:30", "2024-05-06T10:38:09Z"),
    ("2024-05-06T07:08:09+0200", "2024-05-06T05:08:09Z"), (" 2024-05-06 07:08:09 ", "2024-05-06T07:08:09Z"),
    ("Thu, 01 Jan 2004 19:48:21 GMT", "2004-01-01T19:48:21Z"), ("yesterday", None), ("", None),
    ("2024-13-45", None),
])
def test_normalize_lastmod(text, expected):
    assert normalize_lastmod(text) == expected


def test_an_unknown_xml_encoding_is_read_as_utf8_or_refused_clearly():
    """Found by the fuzzer (tests/fuzz): expat's LookupError escaped the parser."""
    from owler.sitemap.parser import SitemapError, parse_sitemap

    doc = ('<?xml version="1.0" encoding="Aig5"?><urlset xmlns="http://www.sitemaps.org/schemas/'
           'sitemap/0.9"><url><loc>http://a.example/é</loc></url></urlset>').encode()
    assert [e.loc for e in parse_sitemap(doc).entries] == ["http://a.example/é"]
    with pytest.raises(SitemapError):  # not even a name: a clear refusal, not a crash
        parse_sitemap(doc.replace(b'"Aig5"', b'"Ai g5"'))
