"""Parse filters: StormCrawler's ``ParseFilters`` chain configured by ``parsefilters.json``.

The parser (:class:`owler.parse.page.PageHandler`, in the explorative and the warc2warc
topologies) runs the chain on every HTML page it parsed (and its filters that read no markup,
:attr:`ParseFilter.documents`, on every document it read: :mod:`owler.parse.documents`), after
the outlinks are final and before the page's status is emitted. Each filter reads the page
(:class:`ParsedPage`: URL, raw content, response headers, the parse result with its document
tree, the text, the outlinks) and writes metadata; what it writes is stored with the URL when
``metadata.persist`` lists it.

File format (StormCrawler's)::

    {"org.apache.stormcrawler.parse.ParseFilters": [
        {"class": "org.apache.stormcrawler.parse.filter.LanguageID", "name": "LanguageID",
         "params": {"key": "lang", "minProb": 0.5}},
        ...]}

``class`` is a StormCrawler class name (its port, :data:`SC_CLASSES`) or a Python dotted path
(``owler.parse.filters.css.CSSFilter``); the loading rules are :mod:`owler.chain`'s.

Rules of the chain:

- Before the filters run, every metadata key a filter declares (:attr:`ParseFilter.keys`) is
  removed from the page's metadata: a re-fetched page keeps no value of an earlier parse that this
  parse did not find again (a page that lost its description has none).
- A filter that raises is logged, counted (:attr:`ParseFilters.failures`) and named in the page's
  ``parse.filters.failed`` metadata; the page keeps what the other filters found (StormCrawler turns a failing filter into an ERROR for the page; here a
  language model's hiccup does not make a good page unfetched).
- The text filters read (:attr:`ParsedPage.text`, or a bounded part of it: ``text_head``,
  ``text_middle``) is the extracted text when the parser extracted it, otherwise lexbor's text of
  the body (the one the SimHash is computed over, so it costs only its whitespace collapsing),
  whitespace collapsed. A filter with ``needs_text = True`` makes the parser extract the text (block
  boundaries become spaces) for every page.

Config keys read: ``parsefilters.config.file`` (StormCrawler's key; unset or empty: no filters).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from owler.chain import ChainSpec, build_chain, read_chain_file
from owler.conf import ConfError, get_str, resource_path
from owler.constants import PARSEFILTERS_FILE_KEY
from owler.parse.html import ParseResult, collapse, rough_text

__all__ = ["ParseFilter", "ParseFilters", "ParsedPage", "ParseFilterSetupError", "SC_CLASSES",
           "PARSEFILTERS_FILE_KEY"]

log = logging.getLogger(__name__)

#: names of the filters that failed on a page
FAILED_KEY = "parse.filters.failed"

ROOT_KEYS = (
    "org.apache.stormcrawler.parse.ParseFilters",
    "com.digitalpebble.stormcrawler.parse.ParseFilters",
)

_SC_PREFIXES = ("org.apache.stormcrawler.parse.filter.",
                "com.digitalpebble.stormcrawler.parse.filter.",
                "org.apache.stormcrawler.protocol.playwright.parsefilter.")

#: StormCrawler class names (without the package prefix) → their ports.
SC_CLASSES = {
    "XPathFilter": "owler.parse.filters.xpath.XPathFilter",
    "LanguageID": "owler.parse.filters.langid.LanguageID",
    "JsRenderingDetector": "owler.parse.filters.jsrender.JsRenderingDetector",
}


class ParseFilterSetupError(ConfError):
    """A parse filter chain could not be built; the message names the file or the entry."""


def non_space_length(text: str) -> int:
    """Characters of ``text`` but spaces, tabs, line breaks and no-break spaces, counted as
    numbers in an array (numpy) rather than by one ``str.count`` per character: 5x faster on the
    benchmark farm's ASCII pages, 1.7x on the real pages of bench/bench_parsefilters.py (other text
    as its code points in UTF-32; docs/benchmarks-history.md, issue 20)."""
    if text.isascii():
        units = np.frombuffer(text.encode("ascii"), np.uint8)
        spaces = (32, 10, 9)
    else:
        units = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        spaces = (32, 10, 9, 0xA0)
    return len(units) - sum(int(np.count_nonzero(units == c)) for c in spaces)


CHAIN = ChainSpec(ROOT_KEYS, _SC_PREFIXES, SC_CLASSES, "filter", ParseFilterSetupError,
                  "parse filters")


@dataclass(slots=True)
class ParsedPage:
    """One parsed HTML page as the filters see it. ``metadata`` and ``outlinks`` are the page's
    own and may be changed; ``headers`` maps lower-cased response header names to their first
    value."""

    url: str
    content: bytes
    headers: Mapping[str, str]
    result: ParseResult
    metadata: dict[str, list[str]]
    outlinks: list = field(default_factory=list)
    _raw: str | None = None
    _text: str | None = None
    _length: int | None = None

    @property
    def raw_text(self) -> str:
        """The page's text as the parser has it: the extracted text, else lexbor's text of the
        body, whitespace not collapsed."""
        if self._raw is None:
            res = self.result
            if res.text:
                self._raw = res.text
            elif res.rough_text is not None:
                self._raw = res.rough_text
            else:
                self._raw = rough_text(res.tree) if res.tree is not None else ""
        return self._raw

    @property
    def text(self) -> str:
        """The page's whole text, whitespace collapsed (costs a pass over a long page: filters
        that need only a part use :meth:`text_head` or :meth:`text_middle`)."""
        if self._text is None:
            raw = self.raw_text
            # lexbor's text keeps the markup's indentation: runs of whitespace so many that
            # split/join (collapse) beats the parser's collapse_long here (measured, twice as fast)
            self._text = raw if raw is self.result.text else collapse(raw)
        return self._text

    @property
    def text_length(self) -> int:
        """Characters of the page's text but spaces, tabs, line breaks and no-break spaces (a
        count over the raw text, without building the collapsed one; the HTML parser has turned
        every carriage return into a line break)."""
        if self._length is None:
            self._length = non_space_length(self.raw_text)
        return self._length

    def text_head(self, n: int) -> str:
        """The first ``n`` characters of :attr:`text`, collapsing no more of the page than
        needed."""
        if self._text is not None:
            return self._text[:n]
        raw, k = self.raw_text, 2 * n
        while True:
            head = collapse(raw[:k])
            if len(head) >= n or k >= len(raw):
                return head[:n]
            k *= 4

    def text_windows(self, n: int, k: int) -> str:
        """About ``n`` characters of :attr:`text` in ``k`` windows, each the middle of one of ``k``
        equal parts of it, joined by spaces (all of it when it is not longer; :meth:`text_middle`
        with ``k`` 1): what a page is about is read from all of it, not from one place that may
        hold a configuration example or a list of names, and its very start and end (menus,
        footers) are left out."""
        if k <= 1:
            return self.text_middle(n)
        raw = self._text if self._text is not None else self.raw_text
        if len(raw) <= 4 * n:
            text = self.text
            return windows(text, n, k) if len(text) > n else text
        # a long page: each window collapsed from raw text around its place, not the whole text
        width, part = n // k, len(raw) / k
        out = []
        for i in range(k):
            centre = int((i + 0.5) * part)
            piece = collapse(raw[max(0, centre - 2 * width):centre + 2 * width])
            start = max(0, (len(piece) - width) // 2)
            out.append(piece[start:start + width].strip())
        return " ".join(out)

    def text_middle(self, n: int) -> str:
        """``n`` characters from the middle of :attr:`text` (all of it when shorter), collapsing
        no more of the page than needed."""
        raw = self._text if self._text is not None else self.raw_text
        if len(raw) > 4 * n:
            mid = len(raw) // 2
            part = collapse(raw[mid - 2 * n: mid + 2 * n])
            if len(part) < n:  # whitespace mostly: take the whole text
                part = self.text
        else:
            part = collapse(raw)
        if len(part) > n:
            start = (len(part) - n) // 2
            part = part[start:start + n]
        return part


def windows(text: str, n: int, k: int) -> str:
    """``k`` windows of ``n // k`` characters of ``text``, each centred on one of its ``k`` equal
    parts, joined by spaces (:meth:`ParsedPage.text_windows`)."""
    width, part = n // k, len(text) / k
    out = []
    for i in range(k):
        start = max(0, int((i + 0.5) * part - width / 2))
        out.append(text[start:start + width].strip())
    return " ".join(out)


class ParseFilter:
    """Base class of a parse filter (StormCrawler's ``ParseFilter``).

    ``keys`` are the metadata keys the filter writes (the chain clears them before a parse);
    ``needs_text`` asks the parser to extract the text of every page; ``documents`` says that the
    filter reads only what a document (a PDF, :mod:`owler.parse.documents`) has too: its URL,
    headers, title, text, declared language and outlinks, not the HTML tree or markup. Only such
    filters run on a document."""

    name: str = ""
    needs_text: bool = False
    documents: bool = False
    keys: tuple[str, ...] = ()

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        """Read ``params`` (the entry's JSON object, ``{}`` when absent). Raise on bad values."""

    def filter(self, page: ParsedPage) -> None:
        raise NotImplementedError


class ParseFilters:
    """An ordered chain of parse filters, run on every parsed HTML page."""

    def __init__(self, filters: list[ParseFilter] | None = None) -> None:
        self.filters: list[ParseFilter] = list(filters or [])
        self.keys = tuple(dict.fromkeys([FAILED_KEY, *(k for f in self.filters for k in f.keys)]))
        self.needs_text = any(f.needs_text for f in self.filters)
        self.failures: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.filters)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "ParseFilters":
        """The chain named by ``parsefilters.config.file``; an empty chain when the key is unset."""
        name = get_str(conf, PARSEFILTERS_FILE_KEY, None)
        if not name or not name.strip():
            return cls()
        return cls.from_file(resource_path(name.strip()), conf)

    @classmethod
    def from_file(cls, path: str | Path, conf: Mapping[str, Any] | None = None) -> "ParseFilters":
        data = read_chain_file(path, CHAIN)
        try:
            return cls.from_json(data, conf or {})
        except ParseFilterSetupError as exc:
            raise ParseFilterSetupError(f"{Path(path)}: {exc}") from exc

    @classmethod
    def from_json(cls, data: Any, conf: Mapping[str, Any] | None = None) -> "ParseFilters":
        return cls(build_chain(data, conf or {}, CHAIN))

    def clear(self, md: dict[str, list[str]]) -> None:
        """Remove what the filters write from ``md`` (before a parse; for a page that is no longer
        HTML, what an earlier parse found)."""
        for key in self.keys:
            md.pop(key, None)

    def run(self, page: ParsedPage, document: bool = False) -> None:
        """Run the chain on ``page``; on a ``document`` (a PDF, whose result has no tree and whose
        content is no markup) only the filters that declare :attr:`ParseFilter.documents`."""
        md = page.metadata
        self.clear(md)
        for f in self.filters:
            if document and not f.documents:
                continue
            try:
                f.filter(page)
            except Exception as exc:  # noqa: BLE001 - one filter's failure is not the page's
                self.failures[f.name] = self.failures.get(f.name, 0) + 1
                md.setdefault(FAILED_KEY, []).append(f.name)
                log.warning("parse filter %s failed on %s: %s: %s", f.name, page.url,
                            type(exc).__name__, exc)
