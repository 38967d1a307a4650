"""A host's ``/.well-known/tdmrep.json`` (TDMRep, the W3C community group's TDM Reservation
Protocol; issue 47): read, and fetched and cached per host for the fetcher.

The file (:class:`TdmRepFile`) is a JSON array of rules (``location``, ``tdm-reservation``,
``tdm-policy``) of which the first whose ``location`` matches the URL's path applies (the
protocol's "first in sequence", not the longest match), patterns with ``*`` and ``$`` matched as
robots.txt's (:class:`owler.fetch.robots.PathPattern`). A rule without a location or a reservation
is left out and counted; a file that is not such an array is one statement of ``unknown`` with the
reason.

Fetched (:class:`TdmRepSource`) as robots.txt is (:class:`owler.fetch.robots.RobotsSource`): once
per host (scheme, host and port) and cache period, by the fetcher's HTTP client (so through its
private-address guard), inside the queue's turn of the URL that needed it: the request counts
against the host as the robots.txt request does (the queue waits its delay after the page that
follows, StormCrawler's rule for robots.txt), and is not archived, as robots.txt is not. It is
asked only for a URL robots.txt lets the crawler fetch, and not when robots.txt disallows the
file's own path. Its answer, by robots.txt's rules (RFC 9309 §2.3.1), with what "no file" and
"unreadable" mean for a file that says what may be done with content rather than what may be
fetched:

- 2xx → the file; a body cut at ``tdmrep.content.limit`` is unreadable (``unknown``, "larger
  than ..."); a 2xx whose body is markup (its first byte that is not white space is ``<``) is a
  site answering every path with a page, read as no file;
- redirects followed up to five times (RFC 9309: at least five; TDMRep allows "a sequence of
  redirects"); a 3xx left after them and every 4xx → no file (the protocol: failing to provide
  the file means the server does not implement it), cached ``tdmrep.cache.ttl``;
- 429, 5xx, no answer, any other code → unreadable for ``tdmrep.error.cache.ttl``: every page of
  the host records one ``unknown`` statement with the reason and is fetched. robots.txt's rule
  for these codes (disallow everything) exists because what may be fetched is at stake; here
  only a use is, and unknown is what the protocol makes of a reservation it cannot read. A 429 or
  503 (``fetcher.backoff.status.codes``) still holds the host's queue as the page's own answer
  would (:class:`owler.fetch.politeness.Backoff`): the engine sees the answer.

``tdmrep.enabled`` (true): the file costs one request per host and cache period, as robots.txt
does, and it is the place TDMRep asks an agent to look first ("before it starts scraping"); a
crawl that records signals for whoever uses its archive records this one too. ``false`` asks for
nothing and records no file statement.

Config keys: ``tdmrep.enabled``, ``tdmrep.cache.ttl`` (21600 s, as ``robots.cache.ttl``),
``tdmrep.error.cache.ttl`` (3600 s, as ``robots.error.cache.ttl``), ``tdmrep.content.limit``
(524288 bytes, as ``http.robots.content.limit``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from typing import Any, Callable, Mapping

from owler.conf import get_bool, get_float, get_int
from owler.fetch.http import FetchResult, redirect_target
from owler.fetch.robots import MAX_REDIRECTS, PathPattern, RobotRules, RobotsCache, robots_url
from owler.signals import TDMREP_FILE, UNKNOWN, Statement
from owler.signals.sources import tdm_reservation

#: the most rules read from one file
MAX_TDM_RULES = 10_000
WELL_KNOWN_PATH = "/.well-known/tdmrep.json"

ENABLED_KEY = "tdmrep.enabled"
CACHE_TTL_KEY = "tdmrep.cache.ttl"
ERROR_CACHE_TTL_KEY = "tdmrep.error.cache.ttl"
CONTENT_LIMIT_KEY = "tdmrep.content.limit"
DEFAULT_CACHE_TTL = 21600.0
DEFAULT_ERROR_CACHE_TTL = 3600.0
DEFAULT_CONTENT_LIMIT = 524288


class TdmRepFile:
    """A host's ``/.well-known/tdmrep.json``: its rules, or the reason it could not be read."""

    __slots__ = ("rules", "problem", "expires_at")

    def __init__(self, rules: list[tuple[PathPattern, Any, Any]], problem: str = "",
                 expires_at: float = math.inf) -> None:
        self.rules = rules
        self.problem = problem
        self.expires_at = expires_at

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at <= (time.time() if now is None else now)

    @classmethod
    def parse(cls, content: bytes) -> "TdmRepFile":
        try:
            data = json.loads(content)
        except (ValueError, UnicodeDecodeError) as exc:
            return cls([], f"not JSON: {exc}")
        if not isinstance(data, list):
            return cls([], "not a JSON array of rules")
        rules = []
        skipped = 0
        for item in data[:MAX_TDM_RULES]:
            if not isinstance(item, dict) or not isinstance(item.get("location"), str) \
                    or "tdm-reservation" not in item:
                skipped += 1
                continue
            rules.append((PathPattern(item["location"]), item["tdm-reservation"],
                          item.get("tdm-policy")))
        problem = f"{skipped} rule(s) without a location or a tdm-reservation" if skipped else ""
        return cls(rules, problem)

    def statements(self, url: str) -> list[Statement]:
        """What the file says of ``url``: its first matching rule; a file that could not be read
        is one statement of ``unknown`` with the reason."""
        if not self.rules:
            return [Statement(TDMREP_FILE, None, UNKNOWN, WELL_KNOWN_PATH,
                              self.problem)] if self.problem else []
        for pattern, reservation, policy in self.rules:
            if pattern.matches(url):
                return [dataclasses.replace(st, raw=f"{pattern.raw}: {st.raw}")
                        for st in tdm_reservation(reservation, policy, TDMREP_FILE)]
        return []


#: no file at all (none served, not asked, or ``tdmrep.enabled: false``): it says nothing
NO_FILE = TdmRepFile([])


def tdmrep_url(url: str) -> str:
    """``scheme://host[:port]/.well-known/tdmrep.json`` for ``url`` (as :func:`robots_url`).
    Raises ValueError for a URL without http(s) scheme or host."""
    return robots_url(url)[: -len("/robots.txt")] + WELL_KNOWN_PATH


def _markup(res: FetchResult) -> bool:
    """Whether a body is a page (markup), not a JSON document: its first byte that is not
    white space is ``<`` (whatever its Content-Type: a JSON file served as text/html is read)."""
    return (res.content or b"").lstrip()[:1] == b"<"


def file_from_fetch(res: FetchResult, conf: Mapping[str, Any],
                    now: float | None = None) -> TdmRepFile:
    """The file a fetch of ``/.well-known/tdmrep.json`` gave (module docstring: robots.txt's
    rules): read, none, or unreadable with the reason, each with its cache expiry."""
    now = time.time() if now is None else now
    ttl = get_float(conf, CACHE_TTL_KEY, DEFAULT_CACHE_TTL)
    err_ttl = get_float(conf, ERROR_CACHE_TTL_KEY, DEFAULT_ERROR_CACHE_TTL)
    status = res.status
    if status is None:
        detail = f": {res.error_message}" if res.error_message else ""
        why = f"no answer ({res.error_cause}{detail})"
        return TdmRepFile([], f"{why}: unknown until asked again", now + err_ttl)
    if 200 <= status < 300:
        if _markup(res):  # a site that answers every path with a page: no file
            return TdmRepFile([], "", now + ttl)
        if res.truncated:
            limit = get_int(conf, CONTENT_LIMIT_KEY, DEFAULT_CONTENT_LIMIT)
            return TdmRepFile([], f"larger than {CONTENT_LIMIT_KEY}={limit} bytes: not read",
                              now + ttl)
        found = TdmRepFile.parse(res.content or b"")
        found.expires_at = now + ttl
        return found
    if 300 <= status < 500 and status != 429:
        return TdmRepFile([], "", now + ttl)
    return TdmRepFile([], f"HTTP {status}: unknown until asked again", now + err_ttl)


class TdmRepSource:
    """The ``/.well-known/tdmrep.json`` of the hosts a fetcher meets, for its event loop (not
    thread-safe), as :class:`owler.fetch.robots.RobotsSource` keeps their robots.txt (module
    docstring). ``count(name)`` counts ``tdmrep_fetched`` and ``tdmrep_error`` (an answer that
    left the file unreadable: 429, 5xx, none)."""

    def __init__(self, conf: Mapping[str, Any], http, *,
                 count: Callable[[str], None] | None = None) -> None:
        self.conf = conf
        self.http = http
        self.enabled = get_bool(conf, ENABLED_KEY, True)
        self.limit = get_int(conf, CONTENT_LIMIT_KEY, DEFAULT_CONTENT_LIMIT)
        self.cache = RobotsCache()
        self.count = count or (lambda name: None)
        self._inflight: dict[str, asyncio.Future] = {}

    async def file_for(self, url: str, rules: RobotRules) -> tuple[TdmRepFile,
                                                                   FetchResult | None]:
        """The file of ``url``'s host and, when this call fetched it, the last answer (the
        engine holds the host's queue on a throttling one); :data:`NO_FILE` when disabled or
        when ``rules`` (the host's robots.txt) disallow the file. Raises ValueError for a URL
        without http(s) host."""
        if not self.enabled:
            return NO_FILE, None
        turl = tdmrep_url(url)
        now = time.time()
        found = self.cache.get(turl, now)
        if found is not None:
            return found, None
        if not rules.allowed(turl):  # not asked, until robots.txt is read again
            self.cache.put(turl, TdmRepFile([], "", min(rules.expires_at, now + get_float(
                self.conf, CACHE_TTL_KEY, DEFAULT_CACHE_TTL))))
            return NO_FILE, None
        pending = self._inflight.get(turl)
        if pending is not None:  # another task of this host is fetching it already
            return await asyncio.shield(pending), None
        fut = asyncio.get_running_loop().create_future()
        self._inflight[turl] = fut
        try:
            res = await self._fetch(turl)
            found = file_from_fetch(res, self.conf)
            self.cache.put(turl, found)
            fut.set_result(found)
            return found, res
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._inflight.pop(turl, None)

    async def _fetch(self, turl: str) -> FetchResult:
        target = turl
        for _ in range(MAX_REDIRECTS + 1):
            res = await self.http.fetch(target, content_limit=self.limit)
            if res.status is not None and 300 <= res.status < 400:
                nxt = redirect_target(res)
                if nxt:
                    target = nxt
                    continue
            break
        self.count("tdmrep_fetched")
        if res.status is None or res.status == 429 or res.status >= 500 or res.status < 200:
            self.count("tdmrep_error")
        return res
