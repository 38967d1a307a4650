"""The sitemap pipeline without Storm: what the sitemap parser bolt does with a fetched sitemap
(StormCrawler's ``SiteMapParserBolt``), and how the sitemaps the fetcher finds for a host are
checked and described before they reach the frontier (:class:`EntryGate`, :func:`sitemap_metadata`;
the finding itself is :mod:`owler.fetch.discovery`).

Metadata keys (StormCrawler's where it has them):

- ``isSitemap`` (``true`` on sitemaps, ``false`` on the pages a sitemap lists), ``isFeed``
  (``true`` on a sitemap that turned out to be an RSS or Atom feed: the ``Feed`` tag), ``foundSitemap``
  (``true|false`` on the URL whose fetch first read its host's robots.txt with
  ``sitemap.discovery`` on), ``sitemap.lastModified`` (the entry's ``lastmod``, as
  ``YYYY-MM-DDTHH:MM:SSZ``), ``scheduler.delay.mins`` (``sitemap.schedule.delay`` staggering of
  the children of an index), extension attributes ``IMAGE.* VIDEO.* NEWS.* LINKS.* MOBILE.*``
  (``<EXT>.<attr>``, :mod:`owler.sitemap.parser`);
- OWLer's ``isDiscoveredOnSitemap=true`` on everything a sitemap lists (pages and sitemaps);
- the project's own: ``sitemap.changefreq``, ``sitemap.priority`` (read by the scheduler),
  ``sitemap.depth`` (0 for a sitemap named by robots.txt or guessed, +1 per index level),
  ``sitemap.hosts`` (the hosts whose robots.txt named this sitemap: cross-submission),
  ``sitemap.seed`` (transient: a seed tuple of the seed spout) and ``sitemap.seeded`` (when a
  seed host's sitemaps were looked up; see :mod:`owler.frontier.sqlite`, "Sitemap refresh").

Scope (cross-submission, sitemaps.org "Sitemaps & Cross Submits"): an entry is kept only when
its host — or its pay-level domain with ``sitemap.scope: domain``, the default — is the
sitemap's own, or one of the hosts whose robots.txt named the sitemap (``sitemap.hosts``, carried
down an index to its children). ``sitemap.strict: true`` also requires the sitemap's own-host
entries to be under the sitemap's folder (the protocol's rule, StormCrawler's ``sitemap.strict``).

Bounds: a file is parsed up to ``sitemap.max.size`` decompressed bytes and
``sitemap.emitOutlinks.max`` entries (the protocol's 50 MB and 50,000); indexes nest at most
``sitemap.max.depth`` levels (the children of a deeper index are dropped); per host, at most
``sitemap.max.sitemaps.per.host`` sitemaps are parsed and ``sitemap.max.urls.per.host`` entries
emitted per ``sitemap.host.budget.period`` seconds. The budgets are counted in the frontier
(:meth:`owler.frontier.Frontier.charge`: a row of the SQLite file, a document of the OpenSearch
status index's ``_budgets`` index), so every parser task of every node shares them exactly; a
sitemap's entries are charged at once after filtering. A sitemap over its host's budget is recorded
FETCHED with ``sitemap.truncated=host_budget``.

Filtering: every entry is resolved against the sitemap URL and normalised, then goes through the
URL filter chain of ``sitemap.urlfilters.config.file`` (default ``sitemap-urlfilters.json``: the
default chain, with gzipped sitemaps accepted) and the blacklists, here in the bolt:
the per-entry metadata (lastmod, isSitemap, extensions) cannot ride the one-tuple-per-page
outlinks batch (URL strings), so sitemap entries go to the status updater as DISCOVERED status
tuples, filtered where they are made, as StormCrawler's ``StatusEmitterBolt`` does.

A sitemap fetched again that answers ``304 Not Modified`` (a conditional re-fetch,
:mod:`owler.fetch.revisit`) is FETCHED as it was, without entries: they are in the frontier. So
is one whose content the fetcher withheld (``signals.withheld``: its webmasters' signals refuse
a purpose of the crawl under ``signals.refused.action`` strip or skip): it comes without content,
and no entry is taken from it.

Errors: a document that is not a usable sitemap gets FETCH_ERROR (StormCrawler: schedulable
again, not a terminal ERROR a site could use to remove URLs) with ``error.source=sitemap
parsing``, ``error.cause`` (``xml_entities``, ``not_a_sitemap``, ``malformed``, ``gzip``,
``empty``) and ``error.message``; it keeps ``isSitemap=true`` (StormCrawler drops it so that the
page goes to the HTML parser next time; in this pipeline a URL named as a sitemap stays one).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from owler import conf as C
from owler import wire
from owler.blacklist import Blacklist
from owler.constants import (DELAY_MINS, ERROR_CAUSE, ERROR_MESSAGE, ERROR_SOURCE,
                             FETCH_STATUS_CODE, IS_FEED, IS_SITEMAP, ON_SITEMAP,
                             SITEMAP_CHANGEFREQ, SITEMAP_EXTENSIONS,
                             SITEMAP_LAST_MODIFIED, SITEMAP_PRIORITY, SITEMAP_SEED, SITEMAP_SEEDED,
                             URLFILTERS_FILE_KEY, Status)
from owler.filters import URLFilters
from owler.parse.gate import OutlinkGate
from owler.metadata import set_value
from owler.signals import MD_WITHHELD
from owler.sitemap.parser import ATOM, RSS, Limits, SitemapError, SitemapResult, parse_sitemap
from owler.status import transfer_metadata
from owler.urls import host_of, pay_level_domain, resolve

# keys of this pipeline only (the shared ones are in owler.constants)
DEPTH = "sitemap.depth"
HOSTS = "sitemap.hosts"
TRUNCATED = "sitemap.truncated"
ERROR_SOURCE_VALUE = "sitemap parsing"
_RESET = (SITEMAP_LAST_MODIFIED, SITEMAP_CHANGEFREQ, SITEMAP_PRIORITY, TRUNCATED, SITEMAP_SEEDED,
          DELAY_MINS, "sitemap.kind")


def sitemap_metadata(source_url: str, source_md: Mapping[str, list[str]], target: str,
                     conf: Mapping[str, Any], depth: int = 0) -> dict[str, list[str]]:
    """Metadata of a sitemap found for ``source_url`` (robots.txt or a guess): the outlink
    metadata (depth, url.path) plus ``isSitemap=true``, ``sitemap.depth`` and, when the sitemap
    is on another host, that host in ``sitemap.hosts`` (cross-submission)."""
    md = transfer_metadata(source_url, source_md, conf)
    for k in [k for k in md if k.startswith(_RESET) or k in (SITEMAP_SEED, HOSTS, ON_SITEMAP)]:
        del md[k]
    md[IS_SITEMAP] = ["true"]
    md[DEPTH] = [str(depth)]
    src_host = host_of(source_url)
    if src_host and host_of(target) != src_host:
        md[HOSTS] = [src_host]
    return md


class EntryGate:
    """Normalise → scope → URL filters → blacklist, for one URL found in a sitemap or robots.txt.
    ``check`` returns ``(url, None)`` or ``(None, reason)``; reasons are counter names."""

    def __init__(self, conf: Mapping[str, Any]):
        self.conf = conf
        name = C.get_str(conf, "sitemap.urlfilters.config.file", "sitemap-urlfilters.json")
        fconf = dict(conf)
        if name:
            fconf[URLFILTERS_FILE_KEY] = name
        self.gate = OutlinkGate(URLFilters.from_conf(fconf), Blacklist.from_conf(conf))
        self.filters, self.blacklist = self.gate.filters, self.gate.blacklist

    def check(self, source_url: str, source_md: Mapping[str, list[str]], url: str
              ) -> tuple[str | None, str | None]:
        return self.gate.check(source_url, source_md, url)

    def found(self, source_url: str, source_md: Mapping[str, list[str]], sitemaps: list[str]
              ) -> tuple[list[tuple[str, dict]], Counter]:
        """The sitemaps found for ``source_url``'s host (:mod:`owler.fetch.discovery`) that pass,
        each with its metadata (:func:`sitemap_metadata`), and counts: ``sitemaps/found``,
        ``sitemaps/<rejected|blacklisted>/<name>``. The blacklists are reloaded first when their
        files changed."""
        self.blacklist.maybe_reload()
        kept, counts = [], Counter()
        for target in sitemaps:
            url, reason = self.check(source_url, source_md, target)
            if url is None:
                counts[f"sitemaps/{reason}"] += 1
            else:
                counts["sitemaps/found"] += 1
                kept.append((url, sitemap_metadata(source_url, source_md, url, self.conf)))
        return kept, counts


@dataclass(slots=True)
class SitemapOutcome:
    """What to emit for one fetched sitemap: ``entries`` (url, metadata; emit them before the
    sitemap's own status), then ``status`` with ``metadata``."""
    status: Status
    metadata: dict
    entries: Iterator[tuple[str, dict]] = field(default_factory=lambda: iter(()))
    result: SitemapResult | None = None


class MemoryBudgets:
    """Windowed counters in memory (one process): :meth:`owler.frontier.Frontier.charge`'s
    semantics, for a processor without a frontier (tests, the topology's conf check)."""

    def __init__(self) -> None:
        self.windows: dict[str, list[float]] = {}  # counter -> [window start, used]

    def charge(self, counter: str, n: int, limit: int, now: float, period: float) -> int:
        w = self.windows.get(counter)
        if w is None or now - w[0] >= period:
            w = self.windows[counter] = [now, 0]
        granted = max(0, min(n, n if limit < 0 else int(limit - w[1])))
        w[1] += granted
        return granted


class SitemapProcessor:
    """One per parser task: configuration, filters, the per-host budgets (``budgets``: the
    frontier, or counters in memory; module docstring)."""

    def __init__(self, conf: Mapping[str, Any], budgets: Any = None):
        self.conf = conf
        self.budgets = budgets if budgets is not None else MemoryBudgets()
        self.gate = EntryGate(conf)
        self.limits = Limits(max_urls=C.get_int(conf, "sitemap.emitOutlinks.max", 50_000),
                             max_bytes=C.get_int(conf, "sitemap.max.size", 50 * 1024 * 1024))
        if self.limits.max_urls < 0:
            self.limits.max_urls = 1 << 62
        self.sniff = C.get_bool(conf, "sitemap.sniffContent", False)
        self.offset_guess = C.get_int(conf, "sitemap.offset.guess", 300)
        self.strict = C.get_bool(conf, "sitemap.strict", False)
        scope = (C.get_str(conf, "sitemap.scope", "domain") or "domain").strip().lower()
        if scope not in ("host", "domain"):
            raise C.ConfError(f"sitemap.scope: expected host or domain, got {scope!r}")
        self.by_domain = scope == "domain"
        self.max_depth = C.get_int(conf, "sitemap.max.depth", 5)
        self.filter_hours = C.get_int(conf, "sitemap.filter.hours.since.modified", -1)
        self.schedule_delay = C.get_int(conf, "sitemap.schedule.delay", -1)
        exts = [e.strip().upper()
                for e in C.get_list(conf, "sitemap.extensions", list(SITEMAP_EXTENSIONS))]
        unknown = [e for e in exts if e not in SITEMAP_EXTENSIONS]
        if unknown:
            raise C.ConfError(f"sitemap.extensions: unknown {unknown} "
                              f"(known: {list(SITEMAP_EXTENSIONS)})")
        self.extensions = tuple(f"{e}." for e in exts)
        self.max_sitemaps_host = C.get_int(conf, "sitemap.max.sitemaps.per.host", 1000)
        self.max_urls_host = C.get_int(conf, "sitemap.max.urls.per.host", 1_000_000)
        self.budget_period = C.get_float(conf, "sitemap.host.budget.period", 86400)
        self.counters: Counter = Counter()

    # -- detection ---------------------------------------------------------------------------
    def is_sitemap(self, md: Mapping[str, list[str]], content: bytes) -> bool:
        """``isSitemap=true`` decides; ``false`` rules it out; without the key, only with
        ``sitemap.sniffContent`` and the sitemaps.org namespace in the first
        ``sitemap.offset.guess`` bytes (StormCrawler)."""
        values = md.get(IS_SITEMAP)
        if values:
            return str(values[0]).strip().lower() == "true"
        if not self.sniff:
            return False
        head = content[:self.offset_guess] if self.offset_guess > 0 else content
        return b"http://www.sitemaps.org/schemas/sitemap/0.9" in head

    # -- budgets -----------------------------------------------------------------------------
    def _charge(self, kind: str, host: str, n: int, limit: int, now: float) -> int:
        """Take ``n`` sitemaps or URLs from ``host``'s budget; how many it allows."""
        if limit < 0 or n == 0:
            return n
        return self.budgets.charge(f"{kind}:{host}", n, limit, now, self.budget_period)

    # -- one sitemap -------------------------------------------------------------------------
    def process(self, url: str, content: bytes, metadata: Mapping[str, list[str]],
                now: float | None = None) -> SitemapOutcome:
        now = time.time() if now is None else now
        md = wire.strip_transient(metadata)
        md[IS_SITEMAP] = ["true"]
        md.pop(TRUNCATED, None)
        host = host_of(url)
        if (md.get(FETCH_STATUS_CODE) or [""])[0] == "304":  # not modified: its entries are known
            self.counters["not_modified"] += 1
            return SitemapOutcome(Status.FETCHED, md)
        if md.get(MD_WITHHELD):  # its content withheld by the fetcher: nothing to read
            self.counters["withheld"] += 1
            return SitemapOutcome(Status.FETCHED, md)
        if not self._charge("sitemaps", host, 1, self.max_sitemaps_host, now):
            self.counters["host_budget"] += 1
            md[TRUNCATED] = ["host_budget"]
            return SitemapOutcome(Status.FETCHED, md)
        started = time.perf_counter()
        try:
            result = parse_sitemap(content, self.limits)
        except SitemapError as exc:
            self.counters[f"error/{exc.cause}"] += 1
            set_value(md, ERROR_SOURCE, ERROR_SOURCE_VALUE)
            set_value(md, ERROR_CAUSE, exc.cause)
            set_value(md, ERROR_MESSAGE, f"{url}: {exc}"[:1000])
            return SitemapOutcome(Status.FETCH_ERROR, md)
        self.counters["parse_ms"] += int((time.perf_counter() - started) * 1000)
        self.counters[f"kind/{result.kind}"] += 1
        if result.kind in (RSS, ATOM):  # the Feed tag (frontier.tags)
            md[IS_FEED] = ["true"]
        self.counters["dropped/no_location"] += result.dropped
        if result.truncated:
            self.counters[f"truncated/{result.truncated.split(':')[0]}"] += 1
            md[TRUNCATED] = [result.truncated[:200]]
        for k in (ERROR_SOURCE, ERROR_CAUSE, ERROR_MESSAGE):
            md.pop(k, None)
        entries = list(self._entries(url, md, result, now))
        granted = self._charge("urls", host, len(entries), self.max_urls_host, now)
        if granted < len(entries):
            self.counters["dropped/host_budget"] += len(entries) - granted
            del entries[granted:]
        for _, emd in entries:
            self.counters["sitemaps" if emd.get(IS_SITEMAP) == ["true"] else "urls"] += 1
        return SitemapOutcome(Status.FETCHED, md, iter(entries), result)

    def _in_scope(self, url: str, own_host: str, own_folder: str, hosts: set[str]) -> bool:
        host = host_of(url)
        if not host:
            return False
        if host == own_host:
            return not self.strict or url.startswith(own_folder)
        if host in hosts:
            return True
        if self.by_domain:
            pld = pay_level_domain(host)
            if pld == pay_level_domain(own_host) and not self.strict:
                return True
            return any(pld == pay_level_domain(h) for h in hosts)
        return False

    def _entries(self, url: str, md: dict, result: SitemapResult, now: float
                 ) -> Iterator[tuple[str, dict]]:
        own_host = host_of(url)
        own_folder = url[: url.rfind("/") + 1]
        hosts = set(md.get(HOSTS) or ())
        try:
            depth = int((md.get(DEPTH) or ["0"])[0])
        except ValueError:
            depth = 0
        index = result.is_index
        c = self.counters
        if index and depth >= self.max_depth >= 0:
            c["dropped/max_depth"] += len(result.entries)
            return
        base = transfer_metadata(url, md, self.conf)
        for k in [k for k in base if k.startswith(_RESET) or k.startswith(self.extensions)
                  or k in (SITEMAP_SEED, IS_SITEMAP, ON_SITEMAP, HOSTS, DEPTH)]:
            del base[k]
        min_lastmod = None
        if self.filter_hours >= 0:
            min_lastmod = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                        time.gmtime(now - self.filter_hours * 3600))
        delay = 0
        seen: set[str] = set()
        for entry in result.entries:
            target = resolve(url, entry.loc)
            if target is None:
                c["dropped/invalid"] += 1
                continue
            if target in seen:
                continue
            seen.add(target)
            if not self._in_scope(target, own_host, own_folder, hosts):
                c["dropped/out_of_scope"] += 1
                continue
            if min_lastmod and entry.lastmod and entry.lastmod < min_lastmod:
                c["dropped/too_old"] += 1
                continue
            out, reason = self.gate.check(url, md, target)
            if out is None:
                c[reason] += 1
                continue
            emd = {k: list(v) for k, v in base.items()}
            emd[ON_SITEMAP] = ["true"]
            if entry.lastmod:
                emd[SITEMAP_LAST_MODIFIED] = [entry.lastmod]
            if index:
                emd[IS_SITEMAP] = ["true"]
                emd[DEPTH] = [str(depth + 1)]
                if hosts:
                    emd[HOSTS] = sorted(hosts)
                if self.schedule_delay > 0:
                    if delay > 0:
                        emd[DELAY_MINS] = [str(delay)]
                    delay += self.schedule_delay
            else:
                emd[IS_SITEMAP] = ["false"]
                if entry.changefreq:
                    emd[SITEMAP_CHANGEFREQ] = [entry.changefreq]
                if entry.priority is not None:
                    emd[SITEMAP_PRIORITY] = [f"{entry.priority:g}"]
                for k, v in entry.extensions.items():
                    if k.startswith(self.extensions):
                        emd[k] = list(v)
            yield out, emd
