"""What the parser bolt does with one fetched page (StormCrawler's JSoupParserBolt), without Storm.

``handle_page(url, content, metadata)`` returns the page's status metadata and its outlinks:

- HTML (by Content-Type, else sniffed): title, charset, signature, meta robots and X-Robots-Tag;
  outlinks as :func:`owler.parse.html.parse_html` keeps them (nofollow rules, ``parser.emitOutlinks``),
  ``rel=nofollow`` links dropped, at most ``parser.emitOutlinks.max.per.page``, each with its anchor
  text when ``track.anchors`` keeps one (:mod:`owler.outlinks`);
  a canonical URL and a meta refresh target are recorded in the metadata (``canonical``,
  ``parse.metarefresh``) and the refresh target is followed like a link;
- a PDF (by Content-Type, else by its signature; ``parser.documents.enabled``) is read in the
  sandboxed worker of :mod:`owler.parse.documents`: title, signature, SimHash, its declared
  language as the parse filters see it, and the URI actions of its link annotations as outlinks
  (no anchor text, the same rules as an HTML page's otherwise: ``parser.emitOutlinks``, at most
  ``parser.emitOutlinks.max.per.page``); ``parse.document.pages``, and ``parse.document.cut``
  when ``parser.documents.max.pages`` or ``.max.text`` cut its text. A document that cannot be read
  (broken, hostile, past its time or memory limit) is ERROR with the worker's ``error.cause``
  (``document.*``) and ``error.message``; the parser itself goes on;
- anything else is recorded (FETCHED, ``parse.mimetype``) and not parsed as HTML, unless
  ``jsoup.treat.non.html.as.error`` turns it into ERROR;
- a parse failure gives ERROR with ``error.source=parser`` and ``error.message``.

Parse filters (``parsefilters.config.file``, :mod:`owler.parse.filters`) run last on every HTML
page: page metadata, language, risk classes, XPath/CSS extractions; on a document, those that
read no markup (:attr:`owler.parse.filters.ParseFilter.documents`).

Re-visits: the previous ``signature`` is kept as ``signatureOld`` before the new one is set (the
adaptive scheduler compares them); a ``304`` (a conditional fetch whose content did not change,
:mod:`owler.fetch.revisit`) is FETCHED with the metadata of the last fetch (signature, SimHash)
and is not parsed again. So is a page whose content the fetcher withheld (``signals.withheld``:
its webmasters' signals refuse a purpose of the crawl, ``signals.refused.action`` strip or skip):
it comes without content, and no text, outlinks or SimHash are taken from it.

Feeds: a non-HTML page served as RSS or Atom gets ``isFeed=true`` (the ``Feed`` tag of
``frontier.tags``).

Near-duplicates (``simhash.enabled``, true): the page's SimHash goes in ``simhash`` (16 hex
digits); when an earlier page of the same host had one within ``simhash.max.distance`` bits
(:class:`owler.parse.simhash.NearDuplicates`), ``near.duplicate.of`` names it (a page whose
SimHash did not change keeps the mark it had, when the memory no longer knows), and with
``simhash.skip.outlinks`` (false) the page's outlinks are not followed (BUbiNG's rule). The
memory of a host the handler has not met yet is seeded by ``near_seeds`` (the parser bolts give
:class:`owler.parse.simhash.FrontierSeeds`: what the frontier holds of the host), by the page's
partition key, which comes with the page (``key``).

The ``_raw.*`` transient keys are removed from the returned metadata.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from owler import conf as C
from owler import wire
from owler.constants import (ANCHORS, EMIT_OUTLINKS_KEY, ERROR_CAUSE, ERROR_MESSAGE, ERROR_SOURCE,
                             FETCH_STATUS_CODE, IS_FEED, MAX_OUTLINKS_KEY, NEAR_DUPLICATE_OF,
                             SIGNATURE, SIGNATURE_OLD, SIMHASH, Status)
from owler.metadata import first, set_value
from owler.parse import documents
from owler.parse.documents import DocumentError, DocumentResult, is_pdf
from owler.parse.filters import ParsedPage, ParseFilters
from owler.parse.html import (SIGNATURE_TEXT_KEY, SIMHASH_KEY, TEXT_NONE_KEY, TRACK_ANCHORS_KEY,
                              Outlink, ParseResult, is_html, parse_html)
from owler.parse.simhash import NearDuplicates, Seeds, simhash64, to_hex
from owler.signals import MD_WITHHELD
from owler.status import MetadataTransfer
from owler.urls import host_of, resolve

#: Content-Types of RSS and Atom feeds
FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml", "application/rdf+xml",
                        "application/feed+json"})


@dataclass(slots=True)
class PageOutcome:
    status: Status
    metadata: dict
    outlinks: list = field(default_factory=list)
    text: str = ""


class PageHandler:
    def __init__(self, conf: dict, near_seeds: Seeds | None = None):
        # Anchor texts ride with the outlinks only to be stored (metadata.persist) or handed on
        # (metadata.transfer) as ``anchors``; when neither lists them, nobody downstream reads
        # them, and extracting and sending them costs ~10 % of a page's parse and ~20 % of its
        # outlinks' bytes (bench/bench_warc2warc.py): then they are not extracted.
        if C.get_bool(conf, TRACK_ANCHORS_KEY, True) and not _anchors_used(conf):
            conf = {**conf, TRACK_ANCHORS_KEY: False}
        self.filters = ParseFilters.from_conf(conf)
        # The page's text is read by nothing in these topologies (no indexer) unless the signature
        # is computed over it or a parse filter asks for it: otherwise it is not extracted (about
        # a quarter of a page's parse); the filters then read lexbor's text of the body.
        if not C.get_bool(conf, SIGNATURE_TEXT_KEY, False) and not self.filters.needs_text:
            conf = {**conf, TEXT_NONE_KEY: True}
        self.conf = conf
        # parser.emitOutlinks, robots.noFollow.strict and http.robots.{meta,headers}.skip are
        # applied by parse_html itself
        self.max_outlinks = C.get_int(conf, MAX_OUTLINKS_KEY, -1)
        self.non_html_error = C.get_bool(conf, "jsoup.treat.non.html.as.error", False)
        conf = self.conf = {**self.conf, SIMHASH_KEY: C.get_bool(conf, SIMHASH_KEY, True)}
        self.near = NearDuplicates(conf, near_seeds) if conf[SIMHASH_KEY] else None
        self.skip_near_outlinks = C.get_bool(conf, "simhash.skip.outlinks", False)
        self.emit_outlinks = C.get_bool(conf, EMIT_OUTLINKS_KEY, True)
        self.use_text_signature = C.get_bool(conf, SIGNATURE_TEXT_KEY, False)
        #: the sandboxed document worker (None: parser.documents.enabled false); started on the
        #: first document
        self.documents = documents.from_conf(conf)

    def close(self) -> None:
        """Stop the document worker, if one runs."""
        if self.documents is not None:
            self.documents.close()

    def handle_page(self, url: str, content: bytes, metadata: dict,
                    key: str | None = None) -> PageOutcome:
        """The page's status, metadata, outlinks and text: a 304 keeps the last fetch's, a page
        that is not HTML is recorded (:meth:`_not_html`), an HTML page is parsed, its findings
        noted (:meth:`_note_parse`), its outlinks chosen (:meth:`_outlinks`) and the parse
        filters run over it. ``key``: the page's partition key (a new host's near-duplicate
        memory is seeded by it)."""
        headers = wire.decode_headers(metadata.get(wire.RAW_HEADERS))
        md = wire.strip_transient(metadata)
        old_signature = md.pop(SIGNATURE, None)
        if old_signature:
            md[SIGNATURE_OLD] = old_signature
        if first(md, FETCH_STATUS_CODE) == "304" or first(md, MD_WITHHELD):
            # not modified, or its content withheld: what the last fetch found
            if old_signature:
                md[SIGNATURE] = old_signature
            return PageOutcome(Status.FETCHED, md)
        old_simhash = md.pop(SIMHASH, None)  # what a new parse gives replaces them
        old_near = md.pop(NEAR_DUPLICATE_OF, None)
        header_map, robots_tags = _split_headers(headers)
        ctype = header_map.get("content-type")
        if not is_html(ctype, content):
            if self.documents is not None and is_pdf(ctype, content):
                truncated = bool(first(metadata, wire.RAW_TRUNCATED))
                return self._document(url, content, md, header_map, old_simhash, old_near, key,
                                      truncated)
            return self._not_html(md, ctype)
        try:
            parse_headers = dict(header_map)
            if robots_tags:
                parse_headers["x-robots-tag"] = ", ".join(robots_tags)
            else:
                parse_headers.pop("x-robots-tag", None)
            res = parse_html(url, content, parse_headers, max_outlinks=self.max_outlinks,
                             conf=self.conf)
        except Exception as exc:  # noqa: BLE001 - errors are data: the page gets an ERROR status
            set_value(md, ERROR_SOURCE, "parser")
            set_value(md, ERROR_MESSAGE, f"{type(exc).__name__}: {exc}")
            set_value(md, ERROR_CAUSE, "parse")
            return PageOutcome(Status.ERROR, md)
        near = self._note_parse(url, res, md, old_simhash, old_near, key)
        outlinks = self._outlinks(url, res, md, near)
        if self.filters.filters:
            page = ParsedPage(url, content, header_map, res, md, outlinks)
            self.filters.run(page)
            outlinks = page.outlinks
        res.tree = None  # the document is not needed any more
        return PageOutcome(Status.FETCHED, md, outlinks, res.text)

    def _not_html(self, md: dict, ctype: str | None) -> PageOutcome:
        """A page that is not HTML: its MIME type (and ``isFeed`` for RSS or Atom) recorded,
        FETCHED, or ERROR with ``jsoup.treat.non.html.as.error``."""
        self.filters.clear(md)  # what an earlier parse of an HTML page found
        mimetype = (ctype or "unknown").split(";")[0].strip()
        set_value(md, "parse.mimetype", mimetype)
        if mimetype.lower() in FEED_TYPES:
            set_value(md, IS_FEED, "true")
        if self.non_html_error:
            set_value(md, ERROR_SOURCE, "parser")
            set_value(md, ERROR_MESSAGE, f"not HTML: {ctype}")
            return PageOutcome(Status.ERROR, md)
        return PageOutcome(Status.FETCHED, md)

    def _document(self, url: str, content: bytes, md: dict, header_map: dict,
                  old_simhash: list | None, old_near: list | None, key: str | None,
                  truncated: bool = False) -> PageOutcome:
        """A PDF read by the document worker (module docstring): FETCHED with what it holds, or
        ERROR with the worker's cause. Its outlinks are its link annotations' URIs, resolved
        against the page's URL and normalised like an HTML page's links."""
        self.filters.clear(md)
        set_value(md, "parse.mimetype", "application/pdf")
        try:
            doc = self.documents.extract(content)
        except DocumentError as exc:
            set_value(md, ERROR_SOURCE, "parser")
            set_value(md, ERROR_CAUSE, exc.cause)
            cut = " (its content was cut at http.content.limit)" if truncated else ""
            set_value(md, ERROR_MESSAGE, f"document not read: {exc}{cut}")
            return PageOutcome(Status.ERROR, md)
        res = self._document_result(url, content, doc)
        near = self._note_parse(url, res, md, old_simhash, old_near, key,
                                mimetype="application/pdf")
        set_value(md, "parse.document.pages", doc.pages)
        if doc.cut:
            set_value(md, "parse.document.cut", "true")
        outlinks = self._outlinks(url, res, md, near)
        if self.filters.filters:
            page = ParsedPage(url, content, header_map, res, md, outlinks)
            self.filters.run(page, document=True)
            outlinks = page.outlinks
        return PageOutcome(Status.FETCHED, md, outlinks, res.text)

    def _document_result(self, url: str, content: bytes, doc: DocumentResult) -> ParseResult:
        """A document as a parse result: what :meth:`_note_parse`, :meth:`_outlinks` and the
        parse filters read of an HTML page (no tree, no charset, no robots directives)."""
        text = doc.text
        data = text.encode("utf-8") if self.use_text_signature and text else content
        res = ParseResult(url, title=" ".join(doc.title.split()), text=text, charset="",
                          lang=doc.lang or None,
                          signature=hashlib.md5(data).hexdigest())  # noqa: S324 - not security
        if self.near is not None:
            res.simhash = simhash64(text)
        if self.emit_outlinks:
            seen = {url}
            for href in doc.links:
                target = resolve(url, href)
                if target and target not in seen:
                    seen.add(target)
                    res.outlinks.append(Outlink(target, "", False, "a"))
        return res

    def _note_parse(self, url: str, res: ParseResult, md: dict, old_simhash: list | None,
                    old_near: list | None, key: str | None = None,
                    mimetype: str = "text/html") -> str | None:
        """What the parse found, in the page's metadata: MIME type, title, charset, signature,
        SimHash and near-duplicate mark, canonical URL, noindex. Returns the URL of the page this
        one nearly duplicates, if any."""
        set_value(md, "parse.mimetype", mimetype)
        if res.title:
            set_value(md, "parse.title", res.title[:1000])
        if res.charset:
            set_value(md, "parse.charset", res.charset)
        if res.signature:
            set_value(md, SIGNATURE, res.signature)
        near = None
        if res.simhash is not None:
            set_value(md, SIMHASH, to_hex(res.simhash))
            near = self.near.check(host_of(url) or "", url, res.simhash, key)
            if near:
                set_value(md, NEAR_DUPLICATE_OF, near)
            elif old_near and old_simhash == md[SIMHASH]:  # unchanged: still a duplicate
                md[NEAR_DUPLICATE_OF] = old_near
                near = old_near[0]
        if res.canonical:
            set_value(md, "canonical", res.canonical)
        if res.noindex:
            set_value(md, "robots.noIndex", "true")
        return near

    def _outlinks(self, url: str, res: ParseResult, md: dict, near: str | None) -> list:
        """The outlinks to follow: the parse's followed links, the meta refresh target (noted as
        ``parse.metarefresh``), at most ``parser.emitOutlinks.max.per.page``; none for a near
        duplicate with ``simhash.skip.outlinks``."""
        # parse_html has deduplicated the links, dropped the page itself, and applied nofollow
        # (items are URL strings or [url, anchor] pairs: owler.outlinks)
        outlinks = [[link.url, link.anchor] if link.anchor else link.url
                    for link in res.outlinks if not link.nofollow]
        if res.meta_refresh and res.meta_refresh != url and not any(
                link.url == res.meta_refresh for link in res.outlinks if not link.nofollow):
            set_value(md, "parse.metarefresh", res.meta_refresh)
            outlinks.append(res.meta_refresh)
        if 0 <= self.max_outlinks < len(outlinks):
            outlinks = outlinks[: self.max_outlinks]
        if near and self.skip_near_outlinks:
            outlinks = []
        return outlinks


def _split_headers(headers) -> tuple[dict[str, str], list[str]]:
    """The response headers as a map of lower-cased names to their first value, and the values
    of every ``X-Robots-Tag`` header in order."""
    header_map: dict[str, str] = {}
    robots_tags = []
    for name, value in headers:
        lname = name.lower()
        if lname == "x-robots-tag":
            robots_tags.append(value)
        header_map.setdefault(lname, value)
    return header_map, robots_tags


def _anchors_used(conf: dict) -> bool:
    return ANCHORS in MetadataTransfer(conf).persisted
