"""HostURLFilter: keep only links to the source page's host or pay-level domain
(StormCrawler's ``filtering.host.HostURLFilter``).

Params: ``ignoreOutsideHost`` (false) rejects links to another host (case-insensitive);
``ignoreOutsideDomain`` (false) rejects links outside the source's pay-level domain
(:func:`owler.urls.pay_level_domain`). Without a source URL (seeds, redirects of seeds) nothing is
filtered. Unlike StormCrawler, ``ignoreOutsideDomain`` is honoured even when ``ignoreOutsideHost``
is absent from the params (StormCrawler only reads it then, a quirk not ported).

Config keys read: none.
"""

from __future__ import annotations

from typing import Any, Mapping

from owler import urls
from owler.filters import URLFilter
from owler.filters.basic import _bool


class HostURLFilter(URLFilter):
    def __init__(self) -> None:
        self.ignore_outside_host = False
        self.ignore_outside_domain = False
        # outlinks of one page arrive together: remember the last source's host and domain
        self._last_source: str | None = None
        self._last_host = ""
        self._last_domain = ""

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.ignore_outside_host = _bool(params, "ignoreOutsideHost", self.ignore_outside_host)
        self.ignore_outside_domain = _bool(params, "ignoreOutsideDomain", self.ignore_outside_domain)

    def uses_source(self) -> bool:
        return self.ignore_outside_host or self.ignore_outside_domain

    def filter(self, source_url, source_md, url):
        if source_url is None or not (self.ignore_outside_host or self.ignore_outside_domain):
            return url
        if source_url != self._last_source:
            host = urls.host_of(source_url)
            self._last_host = host
            self._last_domain = urls.pay_level_domain(host) if host else ""
            self._last_source = source_url
        if not self._last_host:
            return url  # an unparsable source cannot restrict anything
        host = urls.host_of(url)
        if not host:
            return None
        if self.ignore_outside_host and host != self._last_host:
            return None
        if self.ignore_outside_domain and urls.pay_level_domain(host) != self._last_domain:
            return None
        return url
