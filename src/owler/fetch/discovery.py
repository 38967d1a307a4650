"""Sitemap discovery in the fetcher: which sitemaps a host has, found while its robots.txt is read.

Two uses, both decided by :meth:`SitemapDiscovery.look` once per URL, after the host's robots.txt
rules are known:

- ``sitemap.discovery: true`` (or metadata ``sitemap.discovery=true`` on one URL): the first URL
  of a host fetched after its robots.txt was read anew carries the host's sitemaps and
  ``foundSitemap=true|false``; the fetcher bolt announces them (filtered) as DISCOVERED
  ``isSitemap=true``. The page itself is fetched as usual.
- a seed of the sitemap pipeline (metadata ``sitemap.seed``): the page is not fetched; the seed
  carries its host's sitemaps and comes back as DISCOVERED with ``sitemap.seeded`` (now) and
  ``scheduler.delay.mins`` = ``sitemap.seed.interval``, or the robots error TTL when robots.txt
  could not be read: when to look again.

Where sitemaps come from (:func:`discovery_candidates`): the ``Sitemap:`` lines of the host's
robots.txt that robots.txt allows (lines naming another host are kept: that host's rules are
checked when it is fetched), or, when there are none, ``sitemap.discovery.guess.paths``
(``/sitemap.xml``, ``/sitemap_index.xml``) if robots.txt allows them. A host whose robots.txt could
not be read gets no candidates now (it is looked up again later).

What happens to the sitemaps found (filters, scope, metadata) is the sitemap pipeline's business
(:mod:`owler.sitemap`); this module only finds them.

Config keys: ``sitemap.discovery`` (false), ``sitemap.discovery.guess.paths``,
``sitemap.seed.interval`` (minutes, 1440), ``robots.error.cache.ttl``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from owler import conf as C
from owler.constants import (DELAY_MINS, FOUND_SITEMAP, SITEMAP_DISCOVERY, SITEMAP_SEED,
                             SITEMAP_SEEDED)
from owler.fetch.robots import (DEFAULT_ERROR_CACHE_TTL, DISALLOW_ALL, ERROR_CACHE_TTL_KEY,
                                robots_url)
from owler.urls import host_of, normalize

DEFAULT_GUESS_PATHS = ["/sitemap.xml", "/sitemap_index.xml"]
#: hosts whose robots.txt was read anew and whose sitemaps are not announced yet, at most
_FRESH_MAX = 10_000


def discovery_on(conf: Mapping[str, Any], md: Mapping[str, list[str]]) -> bool:
    """``sitemap.discovery``, overridden per URL by metadata ``sitemap.discovery``."""
    values = md.get(SITEMAP_DISCOVERY)
    if values:
        return str(values[0]).strip().lower() == "true"
    return C.get_bool(conf, SITEMAP_DISCOVERY, False)


def _origin(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"


def discovery_candidates(url: str, rules, guess_paths: list[str]) -> list[str]:
    """Sitemap URLs for the host of ``url`` from its robots.txt ``rules`` (module docstring)."""
    if rules is None or rules.kind == DISALLOW_ALL:
        return []
    host = host_of(url)
    out = []
    for sm in rules.sitemaps:
        if host_of(sm) != host or rules.allowed(sm):
            norm = normalize(sm)
            if norm and norm not in out:
                out.append(norm)
    if out:
        return out
    origin = _origin(url)
    if origin is None:
        return []
    for path in guess_paths:
        cand = normalize(origin + (path if path.startswith("/") else "/" + path))
        if cand and rules.allowed(cand) and cand not in out:
            out.append(cand)
    return out


@dataclass(slots=True)
class Found:
    """What :meth:`SitemapDiscovery.look` found for one URL."""

    sitemaps: list[str]
    #: a seed of the sitemap pipeline: not fetched, written back as DISCOVERED
    seed: bool = False
    #: for a seed, the queue's delay before its next URL: 0 when robots.txt came from the cache
    #: (the host was not contacted), ``None`` (the usual delay) when it was just fetched
    delay: float | None = None


class SitemapDiscovery:
    """One per fetcher: which hosts had their robots.txt read anew, and what to announce."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.conf = conf
        self.enabled = C.get_bool(conf, SITEMAP_DISCOVERY, False)
        self.guess_paths = C.get_list(conf, "sitemap.discovery.guess.paths", DEFAULT_GUESS_PATHS)
        self.seed_interval = C.get_float(conf, "sitemap.seed.interval", 1440)
        self.robots_error_ttl = C.get_float(conf, ERROR_CACHE_TTL_KEY, DEFAULT_ERROR_CACHE_TTL)
        self._fresh: OrderedDict[str, None] = OrderedDict()

    def robots_read(self, rurl: str) -> None:
        """The robots.txt at ``rurl`` was read anew: its host's sitemaps are to be announced."""
        self._fresh[rurl] = None
        if len(self._fresh) > _FRESH_MAX:
            self._fresh.popitem(last=False)

    def look(self, url: str, md: dict, rules) -> Found | None:
        """What to do about sitemaps for ``url`` (metadata ``md``, robots.txt ``rules``): ``None``
        for nothing. Updates ``md``: a seed loses ``sitemap.seed`` and gets ``sitemap.seeded`` and
        ``scheduler.delay.mins``; a URL announcing its host's sitemaps gets ``foundSitemap``."""
        if not (md.get(SITEMAP_SEED) or self.enabled or SITEMAP_DISCOVERY in md):
            return None
        rurl = robots_url(url)
        fresh = rurl in self._fresh
        if md.pop(SITEMAP_SEED, None) is not None:
            self._fresh.pop(rurl, None)
            minutes = (self.robots_error_ttl / 60.0 if rules.kind == DISALLOW_ALL
                       else self.seed_interval)
            md[SITEMAP_SEEDED] = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())]
            md[DELAY_MINS] = [f"{minutes:g}"]
            return Found(discovery_candidates(url, rules, self.guess_paths), seed=True,
                         delay=None if fresh else 0.0)
        if fresh and discovery_on(self.conf, md):
            self._fresh.pop(rurl, None)
            sitemaps = discovery_candidates(url, rules, self.guess_paths)
            md[FOUND_SITEMAP] = ["true" if sitemaps else "false"]
            return Found(sitemaps)
        return None
