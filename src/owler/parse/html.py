"""HTML parsing for the parser bolt (StormCrawler's JSoupParserBolt + JSoupTextExtractor + robots
meta tags + the archetype's XPath filters for title / description / keywords / canonical).

:func:`parse_html` decodes a page (:mod:`owler.parse.charset`), parses it with selectolax's lexbor
backend (an HTML5-conformant C parser) and returns a :class:`ParseResult`. :func:`is_html` says
whether a response should be parsed as HTML at all.

Config keys read by :func:`parse_html` (``conf`` may be None: defaults apply):

``detect.charset.maxlength`` (10000)
    bytes scanned for ``<meta charset>`` and used for a statistical guess.
``parser.emitOutlinks`` (true)
    false: no outlinks are extracted at all.
``parser.emitOutlinks.max.per.page`` (-1)
    cap on outlinks kept (after dedup), used when the ``max_outlinks`` argument is negative.
``parser.outlinks.tags`` ([a])
    elements links come from: ``a`` (StormCrawler's JSoupParserBolt uses ``a[href]`` only),
    optionally ``area`` and ``link`` (``link`` only with rel alternate / next / prev).
``robots.noFollow.strict`` (true)
    strict: a ``nofollow`` page has no outlinks and ``rel=nofollow`` links are dropped;
    otherwise links are kept, marked ``nofollow``, without anchor text.
``http.robots.meta.skip`` / ``http.robots.headers.skip`` (false)
    ignore ``<meta name=robots>`` / the ``X-Robots-Tag`` header.
``http.robots.agents`` ([]), ``http.agent.name`` ("")
    agent names whose own ``<meta name=NAME>`` and ``X-Robots-Tag: NAME: ...`` count like
    ``robots`` (when ``agent_names`` is not given).
``track.anchors`` (true)
    false: anchor texts are not extracted (saves time).
``textextractor.include.pattern`` ([]), ``textextractor.exclude.tags`` ([])
    CSS selectors whose first match is the text root (else the body); extra elements removed
    before text extraction (script, style, noscript and template always are).
``textextractor.no.text`` (false), ``textextractor.skip.after`` (-1)
    no text at all; truncate the text to that many characters (-1: no limit).
``signature.useText`` (false)
    the page signature (metadata ``signature``) is the MD5 of the text instead of the raw
    content (StormCrawler's MD5SignatureParseFilter ``useText``); an empty text falls back to the
    content.
``simhash.enabled`` (false here; the parser bolt's default configuration turns it on)
    the 64-bit SimHash of the text (:mod:`owler.parse.simhash`), of a rough text from lexbor
    when the text is not extracted.

Pages whose container elements nest deeper than :data:`MAX_NESTING` (2048) are cut there: the
HTML tree builder is quadratic in that depth (50,000 nested ``<div>`` take seconds).

Errors: anything that goes wrong while parsing is raised as :class:`ParseError` (the bolt turns
it into an ERROR status with ``error.source``); malformed, truncated, binary or huge input does
not raise.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from owler import conf as C
from owler.constants import AGENT_NAME_KEY, EMIT_OUTLINKS_KEY, MAX_OUTLINKS_KEY, ROBOTS_AGENTS_KEY
from owler.parse import charset as _charset
from owler.parse.simhash import simhash64
from owler.urls import normalize as _normalize
from owler.urls import resolve as _resolve

log = logging.getLogger(__name__)

__all__ = ["Outlink", "ParseError", "ParseResult", "is_html", "parse_html", "ANCHOR_MAX_CHARS"]

#: anchor texts are cut to this many characters
ANCHOR_MAX_CHARS = 200

OUTLINK_TAGS_KEY = "parser.outlinks.tags"
NOFOLLOW_STRICT_KEY = "robots.noFollow.strict"
SKIP_META_KEY = "http.robots.meta.skip"
SKIP_HEADERS_KEY = "http.robots.headers.skip"
TRACK_ANCHORS_KEY = "track.anchors"
TEXT_INCLUDE_KEY = "textextractor.include.pattern"
TEXT_EXCLUDE_KEY = "textextractor.exclude.tags"
TEXT_NONE_KEY = "textextractor.no.text"
TEXT_SKIP_AFTER_KEY = "textextractor.skip.after"
SIGNATURE_TEXT_KEY = "signature.useText"
SIMHASH_KEY = "simhash.enabled"


class ParseError(Exception):
    """The page could not be parsed (the parser bolt records it as ERROR, error.source=parser)."""


# not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, 750
# against 200 ns per link (a page has 100-200 of them)
@dataclass(slots=True)
class Outlink:
    url: str  # absolute, normalised (owler.urls.resolve), no fragment
    anchor: str  # anchor text, whitespace-collapsed, at most ANCHOR_MAX_CHARS characters
    nofollow: bool  # rel=nofollow on every occurrence, or the page is nofollow (non-strict)
    tag: str  # "a", "area" or "link"


@dataclass(slots=True)
class ParseResult:
    url: str
    title: str = ""
    text: str = ""
    outlinks: list[Outlink] = field(default_factory=list)
    base_url: str = ""
    canonical: str | None = None
    noindex: bool = False
    nofollow: bool = False
    noarchive: bool = False
    meta_refresh: str | None = None
    description: str | None = None
    keywords: str | None = None
    lang: str | None = None
    charset: str = "utf-8"
    signature: str = ""
    simhash: int | None = None  # of the text (simhash.enabled), None when too short
    # lexbor's text of the body when ``text`` was not extracted but the SimHash needed one (the
    # parse filters reuse it, :mod:`owler.parse.filters`)
    rough_text: str | None = None
    # the parsed document, for the parse filters; scripts, styles, noscript and template
    # elements have been removed by the text extraction
    tree: Any = None


# --- content type ---------------------------------------------------------------------------
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/vnd.wap.xhtml+xml"})
_GENERIC_TYPES = frozenset(
    {
        "", "application/octet-stream", "binary/octet-stream", "application/unknown",
        "unknown/unknown", "application/x-unknown-content-type", "*/*", "text/plain",
        "application/x-download", "application/force-download",
    }
)
# WHATWG MIME sniffing "HTML" patterns (tag name followed by a space or ">").
_SNIFF_TAGS = (
    b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div", b"<font",
    b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--",
)
_SNIFF_TEXT_PLAIN = (b"<!doctype html", b"<html")
_WS = b"\t\n\x0c\r "


def is_html(content_type: str | None, content: bytes) -> bool:
    """True for text/html and XHTML; for a missing or generic type (octet-stream, text/plain...)
    the first bytes are sniffed: HTML tags at the start (after a BOM and whitespace) count, for
    text/plain only ``<!doctype html`` and ``<html``. Everything else (images, PDF, JSON...) is
    False."""
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if ctype in _HTML_TYPES:
        return True
    if ctype not in _GENERIC_TYPES:
        return False
    head = content[:1024]
    bom = _charset.read_bom(head)
    if bom is not None:
        if bom[0] != "utf-8":
            try:
                head = _charset.decode(head, bom[0]).encode("utf-8", "replace")
            except Exception:  # noqa: BLE001 - sniffing must not fail
                return False
        else:
            head = head[bom[1]:]
    head = head.lstrip(_WS)[:16].lower()
    patterns = _SNIFF_TEXT_PLAIN if ctype == "text/plain" else _SNIFF_TAGS
    for p in patterns:
        if head.startswith(p):
            end = head[len(p) : len(p) + 1]
            if end == b">" or (end and end in _WS):
                return True
    return False


# --- robots directives ----------------------------------------------------------------------
_VALUE_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


def _apply_directives(value: str, flags: list[bool]) -> None:
    for token in value.lower().replace(";", ",").split(","):
        token = token.strip()
        if token == "noindex":
            flags[0] = True
        elif token == "nofollow":
            flags[1] = True
        elif token in ("noarchive", "nocache"):
            flags[2] = True
        elif token == "none":
            flags[0] = flags[1] = flags[2] = True


def _apply_header(value: str, agents: frozenset[str], flags: list[bool]) -> None:
    """X-Robots-Tag: comma-separated directives, optionally scoped "agent: d1, d2"."""
    applies = True
    for token in value.split(","):
        name, colon, rest = token.partition(":")
        key = name.strip().lower()
        if colon and key and key not in _VALUE_DIRECTIVES and " " not in key:
            applies = key in agents
            token = rest
        if applies:
            _apply_directives(token, flags)


# --- meta refresh ---------------------------------------------------------------------------
def _refresh_target(content: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh content="N; url=...">`` following the HTML
    standard's "shared declarative refresh steps"; None for a plain reload or a malformed value.
    """
    ws = "\t\n\x0c\r "
    s = content.lstrip(ws)
    i = 0
    n = len(s)
    while i < n and "0" <= s[i] <= "9":
        i += 1
    if i == 0 and s[:1] != ".":
        return None
    while i < n and ("0" <= s[i] <= "9" or s[i] == "."):
        i += 1
    if i >= n:
        return None  # no URL: reload
    if s[i] not in ws + ";,":
        return None
    s = s[i:].lstrip(ws)
    if s[:1] in (";", ","):
        s = s[1:]
    s = s.lstrip(ws)
    if not s:
        return None
    if s[:1] in ("U", "u"):
        s = s[1:]
        if s[:1] in ("R", "r"):
            s = s[1:]
            if s[:1] in ("L", "l"):
                s = s[1:].lstrip(ws)
                if s[:1] == "=":
                    s = s[1:].lstrip(ws)
    if s[:1] in ("'", '"'):
        q = s[0]
        s = s[1:]
        k = s.find(q)
        if k >= 0:
            s = s[:k]
    return s if s.strip(ws) else None


def _in_noscript(node: Any) -> bool:
    """True inside <noscript>: a browser (scripting on) sees that content as text."""
    parent = node.parent
    while parent is not None:
        if parent.tag == "noscript":
            return True
        parent = parent.parent
    return False


# --- text -----------------------------------------------------------------------------------
_ALWAYS_REMOVED = ("script", "style", "noscript", "template")
# elements whose start separates words (jsoup puts a space at block boundaries and <br>)
_BLOCK = frozenset(
    "address article aside blockquote br caption dd details dialog div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr legend li main nav ol "
    "option p pre section summary table tbody td tfoot th thead title tr ul img input select "
    "textarea button iframe".split()
)


def collapse(s: str) -> str:
    return " ".join(s.split())


_WS_TO_SPACE = bytes.maketrans(b"\t\n\r\x0b\x0c", b"     ")


def collapse_long(s: str) -> str:
    """:func:`collapse` for page-sized text: the same result (ASCII whitespace and NBSP) about
    twice as fast, working on UTF-8 bytes instead of creating one string per word."""
    b = s.encode("utf-8", "surrogatepass").translate(_WS_TO_SPACE)
    if b"\xc2\xa0" in b:
        b = b.replace(b"\xc2\xa0", b" ")
    while b"  " in b:
        b = b.replace(b"  ", b" ")
    return b.strip(b" ").decode("utf-8", "replace")


def _extract_text(tree: LexborHTMLParser, conf: Mapping[str, Any] | None) -> str:
    if conf is not None and C.get_bool(conf, TEXT_NONE_KEY, False):
        return ""
    exclude = list(_ALWAYS_REMOVED)
    root = None
    if conf is not None:
        exclude += [t.lower() for t in C.get_list(conf, TEXT_EXCLUDE_KEY, [])]
        for selector in C.get_list(conf, TEXT_INCLUDE_KEY, []):
            root = tree.css_first(selector)
            if root is not None:
                break
    tree.strip_tags(exclude)
    if root is None:
        root = tree.body or tree.root
    if root is None:
        return ""
    parts: list[str] = []
    add = parts.append
    block = _BLOCK
    for node in root.traverse(include_text=True):
        tag = node.tag
        if tag == "-text":
            add(node.text_content or "")
        elif tag in block:
            add(" ")
    text = collapse_long("".join(parts))
    if conf is not None:
        limit = C.get_int(conf, TEXT_SKIP_AFTER_KEY, -1)
        if 0 <= limit < len(text):
            text = text[:limit]
    return text


def rough_text(tree: LexborHTMLParser) -> str:
    """The body's text joined by lexbor in one call, without :func:`_extract_text`'s word
    boundaries at block elements (a word may run into the next across a tag): enough for a
    SimHash at an eighth of the cost. Scripts and styles are removed first."""
    tree.strip_tags(list(_ALWAYS_REMOVED))
    root = tree.body or tree.root
    return root.text(separator=" ") if root is not None else ""


# --- nesting guard --------------------------------------------------------------------------
#: deepest nesting of container elements parsed; the rest of the page is cut (see _guard_depth)
MAX_NESTING = 2048
# Start tags that make the HTML tree builder look for a <p> in button scope: a scan of the whole
# stack of open elements when they are nested, so N nested <div>s cost O(N^2) (50,000 take ~4 s
# in lexbor, as in any conformant parser; Chrome caps the DOM depth at 512 for the same reason).
# 2048 levels cost ~6 ms. Matched on the lower-cased UTF-8 bytes.
_NEST_TAG = re.compile(
    rb"<(/?)(?:d(?:iv|l|ialog|etails|ir)|s(?:ection|earch|ummary)|a(?:rticle|side|ddress)|nav|"
    rb"h(?:eader|group)|f(?:ooter|ieldset|igure|igcaption)|m(?:ain|enu)|blockquote|ul|ol|center)"
    rb"[\t\n\x0c\r />]"
)


def _guard_depth(html: str) -> str:
    """Cut the document where container nesting first exceeds MAX_NESTING. A page with fewer
    start tags than that cannot nest deeper: most pages have fewer ``<`` than that at all, which
    one count of a character tells (the count of ``</``, a two-character needle, costs three times
    as much: 26 against 83 µs on a 65 KB page); a bigger page pays one regex scan (~5% of its parse
    time)."""
    lt = html.count("<")
    if lt <= MAX_NESTING or lt - html.count("</") <= MAX_NESTING:
        return html
    data = html.encode("utf-8", "surrogatepass")
    depth = 0
    for m in _NEST_TAG.finditer(data.lower()):
        if m.group(1):
            if depth:
                depth -= 1
        else:
            depth += 1
            if depth > MAX_NESTING:
                log.warning("nesting deeper than %d: page cut at byte %d", MAX_NESTING, m.start())
                return data[: m.start()].decode("utf-8", "replace")
    return html


# --- the parser -----------------------------------------------------------------------------
_LINK_RELS = frozenset({"alternate", "next", "prev"})
_SELECTORS = {"a": "a[href]", "area": "area[href]", "link": "link[href]"}


def _headers_lower(headers: Mapping[str, Any] | None) -> tuple[str | None, list[str]]:
    """(content-type, X-Robots-Tag values) from headers matched case-insensitively; a
    ``protocol.`` prefix (StormCrawler metadata) is accepted; values may be lists."""
    ctype: str | None = None
    robots: list[str] = []
    if not headers:
        return ctype, robots
    for key, value in headers.items():
        k = key.lower()
        if k.startswith("protocol."):
            k = k[9:]
        if k not in ("content-type", "x-robots-tag"):
            continue
        values = [value] if isinstance(value, str) else [str(v) for v in (value or [])]
        if k == "content-type":
            if ctype is None and values:
                ctype = values[0]
        else:
            robots.extend(values)
    return ctype, robots


def _agents(conf: Mapping[str, Any] | None, agent_names: Iterable[str] | None) -> frozenset[str]:
    if agent_names is None:
        if conf is None:
            return frozenset()
        names = list(C.get_list(conf, ROBOTS_AGENTS_KEY, []))
        name = C.get_str(conf, AGENT_NAME_KEY, "")
        if name:
            names.append(name)
        agent_names = names
    return frozenset(n.strip().lower() for n in agent_names if n and n.strip())


def parse_html(
    url: str,
    content: bytes,
    headers: Mapping[str, Any] | None = None,
    max_outlinks: int = -1,
    conf: Mapping[str, Any] | None = None,
    agent_names: Iterable[str] | None = None,
) -> ParseResult:
    """Parse one fetched HTML page.

    ``url`` is the page URL (links resolve against it, or against the first ``<base href>``);
    ``headers`` are the response headers (Content-Type for the charset, X-Robots-Tag);
    ``max_outlinks`` caps the outlinks kept (-1: ``parser.emitOutlinks.max.per.page``);
    ``agent_names`` are robots agent names besides ``robots`` (default: from ``conf``).

    Outlinks are resolved and normalised (``owler.urls.resolve``), deduplicated keeping the first
    anchor, and never include the page itself, empty or ``#frag``-only hrefs (in-page anchors,
    dropped even when a ``<base>`` would make them point elsewhere), nor
    javascript:/mailto:/unparsable targets. Links inside ``<noscript>`` count (like jsoup, which
    runs no scripts); those in ``<template>`` and ``<script>`` do not. Raises
    :class:`ParseError` only."""
    try:
        return _parse(url, content, headers, max_outlinks, conf, agent_names)
    except ParseError:
        raise
    except Exception as exc:  # noqa: BLE001 - one error type for the bolt to record
        raise ParseError(f"{type(exc).__name__}: {exc}") from exc


def _parse(
    url: str,
    content: bytes,
    headers: Mapping[str, Any] | None,
    max_outlinks: int,
    conf: Mapping[str, Any] | None,
    agent_names: Iterable[str] | None,
) -> ParseResult:
    """:func:`parse_html` without its error wrapping: decode, parse, read the head and the robots
    directives, then the outlinks, the text and the signature."""
    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise ParseError(f"content must be bytes, not {type(content).__name__}")
    content = bytes(content)
    cf: Mapping[str, Any] = conf or {}
    ctype, robots_headers = _headers_lower(headers)
    encoding, html = _decode_page(content, ctype, cf)
    tree = LexborHTMLParser(_guard_depth(html))

    page_url = _normalize(url) or url
    res = ParseResult(url=url, base_url=page_url, charset=encoding)
    agents = _agents(conf, agent_names)
    flags = [False, False, False]  # noindex, nofollow, noarchive
    _read_head(tree, res, page_url, agents | {"robots"}, C.get_bool(cf, SKIP_META_KEY, False),
               flags)
    if not C.get_bool(cf, SKIP_HEADERS_KEY, False):
        for value in robots_headers:
            _apply_header(value, agents, flags)
    res.noindex, res.nofollow, res.noarchive = flags

    # outlinks
    strict = C.get_bool(cf, NOFOLLOW_STRICT_KEY, True)
    if max_outlinks is None or max_outlinks < 0:
        max_outlinks = C.get_int(cf, MAX_OUTLINKS_KEY, -1)
    emit = C.get_bool(cf, EMIT_OUTLINKS_KEY, True) and not (res.nofollow and strict)
    if emit and max_outlinks != 0:
        res.outlinks = _outlinks(tree, res, page_url, cf, strict, max_outlinks)

    _text_and_signature(tree, res, content, conf, cf)
    res.tree = tree
    return res


def _decode_page(content: bytes, ctype: str | None, cf: Mapping[str, Any]) -> tuple[str, str]:
    """(encoding, text) of the page's bytes (:mod:`owler.parse.charset`), NULs replaced."""
    encoding = _charset.detect(
        content, ctype, C.get_int(cf, _charset.MAX_LENGTH_KEY, _charset.DEFAULT_MAX_LENGTH)
    )
    html = _charset.decode(content, encoding)
    if "\x00" in html:  # the HTML tokenizer drops/replaces NULs anyway; keep C strings clean
        html = html.replace("\x00", "\ufffd")
    return encoding, html


def _read_head(
    tree: LexborHTMLParser,
    res: ParseResult,
    page_url: str,
    robot_names: frozenset[str],
    skip_meta: bool,
    flags: list[bool],
) -> None:
    """The head-ish elements in one pass, in document order: title, ``<base>``, the meta tags
    (robots directives into ``flags``, description, keywords, refresh, content-language) and the
    canonical link; then the canonical and refresh targets resolved against the base, and the
    ``<html lang>``. Sets them on ``res``."""
    base_seen = False
    canonical_href: str | None = None
    refresh: str | None = None
    for node in tree.css("title, base[href], meta, link[rel][href]"):
        tag = node.tag
        attrs = node.attributes
        if tag == "meta":
            name = attrs.get("name")
            if name:
                lname = name.strip().lower()
                mcontent = attrs.get("content") or ""
                if lname in robot_names:
                    if not skip_meta:
                        _apply_directives(mcontent, flags)
                elif lname == "description":
                    if res.description is None and mcontent.strip():
                        res.description = collapse(mcontent)
                elif lname == "keywords":
                    if res.keywords is None and mcontent.strip():
                        res.keywords = collapse(mcontent)
            equiv = attrs.get("http-equiv")
            if equiv:
                lequiv = equiv.strip().lower()
                if lequiv == "refresh" and refresh is None and not _in_noscript(node):
                    refresh = _refresh_target(attrs.get("content") or "")
                elif lequiv == "content-language" and res.lang is None:
                    lang = (attrs.get("content") or "").split(",")[0].strip()
                    res.lang = lang or None
        elif tag == "title":
            if not res.title:
                res.title = collapse(node.text(deep=True))
        elif tag == "base":
            if not base_seen and not _in_noscript(node):
                base_seen = True
                base = _resolve(page_url, attrs.get("href") or "")
                if base is not None:
                    res.base_url = base
        elif tag == "link" and canonical_href is None:
            rels = (attrs.get("rel") or "").lower().split()
            if "canonical" in rels:
                canonical_href = attrs.get("href") or ""

    if canonical_href is not None and canonical_href.strip():
        res.canonical = _resolve(res.base_url, canonical_href)
    if refresh is not None:
        res.meta_refresh = _resolve(res.base_url, refresh)
    root = tree.root
    if root is not None and root.tag == "html":
        lang = (root.attributes.get("lang") or "").strip()
        if lang:
            res.lang = lang


def _text_and_signature(
    tree: LexborHTMLParser,
    res: ParseResult,
    content: bytes,
    conf: Mapping[str, Any] | None,
    cf: Mapping[str, Any],
) -> None:
    """The page's text (:func:`_extract_text`), its SimHash (``simhash.enabled``, of the rough
    text when no text was extracted) and its signature, set on ``res``."""
    res.text = _extract_text(tree, conf)
    if C.get_bool(cf, SIMHASH_KEY, False):
        if not res.text:
            res.rough_text = rough_text(tree)
        res.simhash = simhash64(res.text or res.rough_text)
    use_text = res.text and C.get_bool(cf, SIGNATURE_TEXT_KEY, False)
    data = res.text.encode("utf-8") if use_text else content
    res.signature = hashlib.md5(data).hexdigest()  # noqa: S324 - a change signature, not security


_UNSEEN = object()


def _outlinks(
    tree: LexborHTMLParser,
    res: ParseResult,
    page_url: str,
    cf: Mapping[str, Any],
    strict: bool,
    max_outlinks: int,
) -> list[Outlink]:
    tags = [t.strip().lower() for t in C.get_list(cf, OUTLINK_TAGS_KEY, ["a"])]
    selector = ", ".join(_SELECTORS[t] for t in tags if t in _SELECTORS)
    if not selector:
        return []
    track_anchors = C.get_bool(cf, TRACK_ANCHORS_KEY, True)
    page_nofollow = res.nofollow  # only reached when not strict
    base = res.base_url
    found: dict[str, int] = {}
    links: list[list[Any]] = []  # [url, anchor, nofollow, tag]
    resolve = _resolve
    resolved: dict[str, str | None] = {}  # href -> target: a site's links repeat on a page
    for node in tree.css(selector):
        attrs = node.attributes
        href = attrs.get("href")
        if not href or href.lstrip()[:1] == "#":  # in-page anchor (even against a <base>)
            continue
        tag = node.tag
        rel = attrs.get("rel")
        rels = rel.lower().split() if rel else ()
        if tag == "link" and not _LINK_RELS.intersection(rels):
            continue
        link_nofollow = "nofollow" in rels
        if link_nofollow and strict:
            continue
        target = resolved.get(href, _UNSEEN)
        if target is _UNSEEN:
            target = resolved[href] = resolve(base, href)
        if target is None or target == page_url:
            continue
        i = found.get(target)
        if i is not None:
            if not link_nofollow:
                links[i][2] = page_nofollow
            continue
        nofollow = link_nofollow or page_nofollow
        anchor = ""
        if track_anchors and not nofollow:
            if tag == "a":
                anchor = node.text(deep=True)
            elif tag == "area":
                anchor = attrs.get("alt") or ""
            else:
                anchor = attrs.get("title") or ""
            if anchor:
                anchor = collapse(anchor[: ANCHOR_MAX_CHARS * 4])[:ANCHOR_MAX_CHARS]
        found[target] = len(links)
        links.append([target, anchor, nofollow, tag])
        if 0 <= max_outlinks <= len(links):
            break
    return [Outlink(u, a, nf, t) for u, a, nf, t in links]
