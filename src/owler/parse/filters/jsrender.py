"""JsRenderingDetector: marks the pages that need a browser to say anything (issue 48), as
StormCrawler's filter of that name does, so that the fetcher renders them
(:mod:`owler.fetch.browser`, routed by ``protocol.delegator.config``).

A page built by scripts arrives as a shell: an empty root element, a ``<noscript>`` notice, a
script bundle, almost no text and no links. Parsed as it is, it is FETCHED with no outlinks, and
its site ends there. The filter looks for that shell, cheapest test first:

1. the page's text (:attr:`owler.parse.filters.ParsedPage.text_length`: non-space characters,
   which ``PageMetadata`` has counted already) is at least ``minTextLength`` (200): the page
   says something without scripts and is never marked — the one test nearly every page stops
   at, so that a crawl of ordinary pages pays a comparison per page (``bench/bench_jsrender.py``);
2. otherwise, in the raw HTML (the first ``scanBytes``, 256 KiB), any of: an element whose id is
   one of ``emptyRootIds`` (``root``, ``app``, ``__next``, ``__nuxt``) and that is empty
   (``empty-root:<id>``); a ``<noscript>`` that asks for JavaScript (``noscript-js-required``);
   a framework's fingerprint (``fingerprint:<it>``); one of ``requiredMessages``
   (``message:<it>``); a ``<script>`` and fewer than ``minOutlinks`` (2) outlinks
   (``thin-content:text=<n>,outlinks=<m>``).

On a hit it writes ``metadataKey`` = ``metadataValue`` (``fetch.with=browser``) and, with
``recordReason`` (true), ``fetch.with.reason``; both are stored with the URL (``metadata.persist``
lists ``fetch.with*``), so every later fetch of the URL goes to the browser. And, unlike
StormCrawler's filter, which leaves the URL to its next scheduled fetch (a day later), it sets
``scheduler.delay.mins`` to ``refetchDelay`` (0: the page is due again at once; a negative value
leaves the schedule alone): the shell's FETCHED status sends the URL back to the frontier due
now with ``fetch.with=browser``, and its next fetch is rendered. The shell's own capture stays
in the archive (it is what the server sent), and its outlinks, if any, go on as any page's.

Loop guards: a page that already carries ``metadataKey`` (routed already, by this filter or by
an operator) is not looked at, nor one with ``skipIfMetadataPresent`` (``browser.end``: it was
rendered by this fetch, whatever the render found).

Params (StormCrawler's names): ``metadataKey``, ``metadataValue``, ``minTextLength``,
``minOutlinks``, ``fingerprints`` (replace the defaults), ``emptyRootIds``, ``requiredMessages``,
``skipIfMetadataPresent``, ``recordReason``; and ``refetchDelay`` (minutes), ``scanBytes``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from owler import conf as C
from owler.constants import BROWSER_END, DELAY_MINS, FETCH_WITH
from owler.parse.filters import ParsedPage, ParseFilter

DEFAULT_FINGERPRINTS = ("data-reactroot", "ng-version=", "__NEXT_DATA__", "window.__NUXT__",
                        "data-svelte-h=", "data-vue-app", "data-astro-cid", "<router-outlet")
DEFAULT_ROOT_IDS = ("root", "app", "__next", "__nuxt")
_NOSCRIPT = re.compile(rb"<noscript[^>]*>(?:(?!</noscript).){0,400}?javascript",
                       re.IGNORECASE | re.DOTALL)
_SCRIPT = re.compile(rb"<script\b", re.IGNORECASE)


class JsRenderingDetector(ParseFilter):
    documents = False  # HTML only
    keys = ()  # what it writes must outlive the next parse (the loop guard reads it)

    def __init__(self) -> None:
        self.key = FETCH_WITH
        self.value = "browser"
        self.min_text = 200
        self.min_outlinks = 2
        self.fingerprints: tuple[bytes, ...] = tuple(f.encode() for f in DEFAULT_FINGERPRINTS)
        self.messages: tuple[bytes, ...] = ()
        self.skip_key = BROWSER_END
        self.record_reason = True
        self.refetch_delay = 0.0
        self.scan = 256 * 1024
        self._root = self._root_pattern(DEFAULT_ROOT_IDS)

    @staticmethod
    def _root_pattern(ids) -> re.Pattern:
        alt = "|".join(re.escape(i) for i in ids)
        # an element with that id, nothing but white space before its end tag
        return re.compile(rb"<([a-z][a-z0-9-]*)\b[^>]*?\bid\s*=\s*[\"']?(" + alt.encode()
                          + rb")[\"'\s>/][^>]*>\s*</\1\s*>", re.IGNORECASE)

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.key = str(params.get("metadataKey", self.key))
        self.value = str(params.get("metadataValue", self.value))
        self.min_text = C.get_int(params, "minTextLength", self.min_text)
        self.min_outlinks = C.get_int(params, "minOutlinks", self.min_outlinks)
        for name, attr in (("fingerprints", "fingerprints"), ("requiredMessages", "messages")):
            if name in params:
                values = params[name]
                if not isinstance(values, list):
                    raise ValueError(f"{name}: expected a list of strings, got {values!r}")
                setattr(self, attr, tuple(str(v).encode() for v in values if str(v)))
        if "emptyRootIds" in params:
            ids = params["emptyRootIds"]
            if not isinstance(ids, list) or not ids:
                raise ValueError(f"emptyRootIds: expected a non-empty list, got {ids!r}")
            self._root = self._root_pattern([str(i) for i in ids])
        self.skip_key = str(params.get("skipIfMetadataPresent", self.skip_key))
        self.record_reason = C.get_bool(params, "recordReason", True)
        self.refetch_delay = C.get_float(params, "refetchDelay", self.refetch_delay)
        self.scan = C.get_int(params, "scanBytes", self.scan)

    def reason(self, page: ParsedPage) -> str | None:
        """Why the page needs a browser, or None (module docstring)."""
        text = page.text_length
        if text >= self.min_text:
            return None
        head = page.content[:self.scan]
        found = self._root.search(head)
        if found:
            return f"empty-root:{found.group(2).decode('ascii', 'replace')}"
        if _NOSCRIPT.search(head):
            return "noscript-js-required"
        for mark in self.fingerprints:
            if mark in head:
                return f"fingerprint:{mark.decode('utf-8', 'replace')}"
        for mark in self.messages:
            if mark in head:
                return f"message:{mark.decode('utf-8', 'replace')}"
        if len(page.outlinks) < self.min_outlinks and _SCRIPT.search(head):
            return f"thin-content:text={text},outlinks={len(page.outlinks)}"
        return None

    def filter(self, page: ParsedPage) -> None:
        md = page.metadata
        if self.key in md or (self.skip_key and self.skip_key in md):
            return
        why = self.reason(page)
        if why is None:
            return
        md[self.key] = [self.value]
        if self.record_reason:
            md[self.key + ".reason"] = [why]
        if self.refetch_delay >= 0:
            md[DELAY_MINS] = [f"{self.refetch_delay:g}"]
