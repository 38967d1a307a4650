"""CSSFilter: metadata from CSS selectors over the parsed page (the lexbor tree the parser built;
no second parse).

Params: ``{metadata key: selector or [selectors]}``. A selector may end in ``::text`` (the
elements' text, the default) or ``::attr(NAME)`` (an attribute's value), as in Scrapy's selectors.
For each key the selectors are tried in order and every non-empty value of the first one that
gives any is stored (multi-valued), whitespace-collapsed and cut to 1000 characters, like
StormCrawler's XPathFilter. Scripts, styles, ``<noscript>`` and ``<template>`` are gone from the
tree by the time filters run (the text extraction removed them).

Example: ``{"parse.og.title": "meta[property='og:title']::attr(content)", "parse.h1": "h1"}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from owler.parse.filters import ParsedPage, ParseFilter
from owler.parse.html import collapse

MAX_VALUE = 1000
_ATTR = re.compile(r"::attr\(\s*([^()\s]+)\s*\)\s*$")


def _compile(selector: str) -> tuple[str, str | None]:
    """(CSS selector, attribute name or None for the text)."""
    s = selector.strip()
    m = _ATTR.search(s)
    if m:
        return s[: m.start()].strip(), m.group(1)
    if s.endswith("::text"):
        return s[: -len("::text")].strip(), None
    return s, None


class CSSFilter(ParseFilter):
    def __init__(self) -> None:
        self.rules: list[tuple[str, list[tuple[str, str | None]]]] = []

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        probe = LexborHTMLParser("<p></p>")
        for key, value in params.items():
            selectors = [value] if isinstance(value, str) else value
            if not isinstance(selectors, list) or not selectors or not all(
                    isinstance(s, str) and s.strip() for s in selectors):
                raise ValueError(f"{key}: expected a CSS selector or a list of them, got {value!r}")
            compiled = [_compile(s) for s in selectors]
            for (css, _), raw in zip(compiled, selectors):
                try:
                    probe.css(css)
                except Exception as exc:  # noqa: BLE001 - lexbor's error names no selector
                    raise ValueError(f"{key}: invalid CSS selector {raw!r}") from exc
            self.rules.append((str(key), compiled))
        self.keys = tuple(k for k, _ in self.rules)

    def filter(self, page: ParsedPage) -> None:
        tree = page.result.tree
        if tree is None:
            return
        md = page.metadata
        for key, selectors in self.rules:
            for css, attr in selectors:
                found = []
                for node in tree.css(css):
                    raw = node.attributes.get(attr) if attr else node.text(deep=True)
                    value = collapse(raw or "")[:MAX_VALUE]
                    if value:
                        found.append(value)
                if found:
                    md[key] = found
                    break
