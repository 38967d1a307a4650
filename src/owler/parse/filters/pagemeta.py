"""PageMetadata: what a page says of itself, as metadata an operator can query in the status index.

Written (only when the page has it; values cut to ``maxLength`` characters, default 1000):

``parse.description``, ``parse.keywords``
    the first non-empty ``<meta name=description>`` / ``<meta name=keywords>``.
``parse.lang``
    the language the HTML declares: ``<html lang>``, else ``<meta http-equiv=Content-Language>``
    (StormCrawler's LanguageID filter reads the declared language from this key).
``protocol.content-language``
    the ``Content-Language`` response header.
``robots.noFollow``, ``robots.noArchive``
    ``true`` when the robots meta tags or ``X-Robots-Tag`` say so (``robots.noIndex`` is written
    by the parser itself).
``parse.text.length``
    characters of the page's text that are not whitespace
    (:attr:`owler.parse.filters.ParsedPage.text_length`).
``parse.outlinks.count``
    outlinks the parser found on the page (after nofollow rules and
    ``parser.emitOutlinks.max.per.page``, before the URL filters).

Params: ``maxLength`` (1000), ``textLength`` (true: write ``parse.text.length``; false spares the
text when no other filter needs it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from owler import conf as C
from owler.metadata import set_value
from owler.parse.filters import ParsedPage, ParseFilter

DESCRIPTION = "parse.description"
KEYWORDS = "parse.keywords"
DECLARED_LANG = "parse.lang"
CONTENT_LANGUAGE = "protocol.content-language"
NO_FOLLOW = "robots.noFollow"
NO_ARCHIVE = "robots.noArchive"
TEXT_LENGTH = "parse.text.length"
OUTLINK_COUNT = "parse.outlinks.count"


class PageMetadata(ParseFilter):
    documents = True  # reads the parse result's fields, headers and text, no markup
    keys = (DESCRIPTION, KEYWORDS, DECLARED_LANG, CONTENT_LANGUAGE, NO_FOLLOW, NO_ARCHIVE,
            TEXT_LENGTH, OUTLINK_COUNT)

    def __init__(self) -> None:
        self.max_length = 1000
        self.text_length = True

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        if "maxLength" in params:
            self.max_length = C.get_int(params, "maxLength", 1000)
            if self.max_length < 1:
                raise ValueError(f"maxLength must be at least 1, got {self.max_length}")
        self.text_length = C.get_bool(params, "textLength", True)

    def filter(self, page: ParsedPage) -> None:
        md, res, cut = page.metadata, page.result, self.max_length
        if res.description:
            set_value(md, DESCRIPTION, res.description[:cut])
        if res.keywords:
            set_value(md, KEYWORDS, res.keywords[:cut])
        if res.lang:
            set_value(md, DECLARED_LANG, res.lang[:cut])
        header = (page.headers.get("content-language") or "").strip()
        if header:
            set_value(md, CONTENT_LANGUAGE, header[:cut])
        if res.nofollow:
            set_value(md, NO_FOLLOW, "true")
        if res.noarchive:
            set_value(md, NO_ARCHIVE, "true")
        if self.text_length:
            set_value(md, TEXT_LENGTH, page.text_length)
        set_value(md, OUTLINK_COUNT, len(page.outlinks))
