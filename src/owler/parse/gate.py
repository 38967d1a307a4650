"""What may enter the frontier from a page: the URL filter chain (``urlfilters.json``: normalisers
first), then the blacklist (:class:`owler.blacklist.Blacklist`).

The explorative and warc2warc parsers pass their outlinks through a gate in their own process, as
StormCrawler's parser applies its URL filters itself: a page's links then go to the status updater
in one hop instead of three (parser → URLFilterBolt → BlacklistBolt → status updater). In the
explorative crawl the two bolts keep doing the same for the fetcher's redirect targets, and the
sitemap processor uses a gate of its own chain (``sitemap.urlfilters.config.file``).

Counter names: ``accepted``, ``rejected/<filter>``, ``blacklisted/<list>``; with a memory of the
links sent (:meth:`OutlinkGate.keep_new`) also ``outlinks_repeated``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from owler.blacklist import Blacklist
from owler.filters import URLFilters
from owler.outlinks import RecentlySent


class OutlinkGate:
    def __init__(self, filters: URLFilters, blacklist: Blacklist):
        self.filters = filters
        self.blacklist = blacklist

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "OutlinkGate":
        """``urlfilters.config.file`` and ``blacklist.*`` of ``conf``."""
        return cls(URLFilters.from_conf(conf), Blacklist.from_conf(conf))

    def check(self, source_url: str | None, source_md: Mapping[str, list[str]] | None,
              url: str) -> tuple[str | None, str | None]:
        """``(url as the filters left it, None)``, or ``(None, counter name of the reason)``."""
        out, rejected_by = self.filters.filter(source_url, source_md, url)
        if out is None:
            return None, f"rejected/{rejected_by}"
        listed = self.blacklist.match(out)
        if listed:
            return None, f"blacklisted/{listed}"
        return out, None

    def keep(self, source_url: str | None, source_md: Mapping[str, list[str]] | None,
             links: Iterable[tuple[str, str]], counts: Counter) -> list[tuple[str, str]]:
        """The ``(url, anchor)`` pairs of one page that pass, each URL once (the first anchor),
        after reloading the blacklist if its files changed; reasons added to ``counts``."""
        self.blacklist.maybe_reload()
        kept, seen = [], set()
        for url, anchor in links:
            out, reason = self.check(source_url, source_md, url)
            if out is None:
                counts[reason] += 1
            elif out not in seen:
                seen.add(out)
                kept.append((out, anchor))
        counts["accepted"] += len(kept)
        return kept

    def keep_new(self, source_url: str | None, source_md: Mapping[str, list[str]] | None,
                 links: Iterable[tuple[str, str]], sent: RecentlySent, replay: bool,
                 counts: Counter) -> list[tuple[str, str]]:
        """What :meth:`keep` lets through of ``links`` and ``sent`` does not hold yet (``sent``
        then holds it); all that passes when ``replay``. A link ``sent`` holds as it is skips
        the filters: whatever they would make of it on this page, it went to the frontier
        already (were that write lost, its tuple would be replayed, and a replay sends all).
        Repeats counted as ``outlinks_repeated``."""
        links = list(links)
        fresh = links if replay else [pair for pair in links if pair[0] not in sent]
        passed = self.keep(source_url, source_md, fresh, counts)
        out = sent.new(passed, replay)
        counts["outlinks_repeated"] += len(links) - len(fresh) + len(passed) - len(out)
        return out
