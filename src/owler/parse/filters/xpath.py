"""XPathFilter: StormCrawler's XPathFilter, metadata from XPath expressions, over lxml's parse of
the page (libxml2's HTML parser: a second parse of the decoded page, paid only when this filter is
configured).

Params: ``{metadata key: expression or [expressions]}``. For each key the expressions are tried
in order and every non-empty result of the first one that gives any is stored (multi-valued),
whitespace-collapsed and cut to 1000 characters: an element gives its text, an attribute or a
string its value, a number or boolean its string form.

StormCrawler's two dialects are accepted as written in its configurations: its DOM variant's
upper-case element names (``//TITLE``, ``//META[@name="title"]/@content``; names are matched as
lower case here) and its jsoup variant's ``allText()`` step (``//TITLE/allText()``: the elements'
text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import lxml.html
from lxml import etree

from owler.parse import charset as _charset
from owler.parse.filters import ParsedPage, ParseFilter
from owler.parse.html import collapse

MAX_VALUE = 1000
# an upper-case element or attribute name outside string literals (HTML names are lower case in
# lxml), not a function (NAME() or an axis (NAME::)
_UPPER_NAME = re.compile(r"(?<![\w.$-])(?:(?<=::)|(?<!:))([A-Z][A-Z0-9]*)(?![\w.-]*\s*(?:\(|::))")
_ALL_TEXT = re.compile(r"/allText\(\)\s*$")


def translate(expression: str) -> str:
    """An expression of StormCrawler's dialects as XPath 1.0 over lower-case HTML names."""
    expression = _ALL_TEXT.sub("", expression.strip())
    parts = re.split(r"(\"[^\"]*\"|'[^']*')", expression)
    return "".join(p if i % 2 else _UPPER_NAME.sub(lambda m: m.group(1).lower(), p)
                   for i, p in enumerate(parts))


def _values(result: Any) -> list[str]:
    if isinstance(result, list):
        items = result
    else:
        items = [result]
    out = []
    for item in items:
        if isinstance(item, etree._Element):
            raw = item.text_content() if hasattr(item, "text_content") else "".join(item.itertext())
        elif isinstance(item, bool):
            raw = "true" if item else "false"
        elif isinstance(item, float):
            raw = "" if item != item else (str(int(item)) if item.is_integer() else str(item))
        else:
            raw = str(item)
        value = collapse(raw)[:MAX_VALUE]
        if value:
            out.append(value)
    return out


class XPathFilter(ParseFilter):
    def __init__(self) -> None:
        self.rules: list[tuple[str, list[etree.XPath]]] = []

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        for key, value in params.items():
            exprs = [value] if isinstance(value, str) else value
            if not isinstance(exprs, list) or not exprs or not all(
                    isinstance(e, str) and e.strip() for e in exprs):
                raise ValueError(f"{key}: expected an XPath expression or a list of them, "
                                 f"got {value!r}")
            compiled = []
            for e in exprs:
                try:
                    compiled.append(etree.XPath(translate(e)))
                except etree.XPathSyntaxError as exc:
                    raise ValueError(f"{key}: invalid XPath {e!r}: {exc}") from exc
            self.rules.append((str(key), compiled))
        self.keys = tuple(k for k, _ in self.rules)

    def filter(self, page: ParsedPage) -> None:
        if not self.rules or not page.content.strip():
            return
        html = _charset.decode(page.content, page.result.charset or "utf-8")
        if "\x00" in html:
            html = html.replace("\x00", "\ufffd")
        try:
            doc = lxml.html.document_fromstring(html)
        except (etree.ParserError, ValueError):
            return  # nothing libxml2 can build a document from (the parser's own parse stands)
        md = page.metadata
        for key, exprs in self.rules:
            for xp in exprs:
                found = _values(xp(doc))
                if found:
                    md[key] = found
                    break
