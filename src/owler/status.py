"""Status updates: StormCrawler's ``AbstractStatusUpdaterBolt`` and ``MetadataTransfer`` as plain
logic. The status updater bolt turns each (url, metadata, status) into a :class:`StatusUpdate`
with :meth:`StatusUpdater.to_update`, writes a batch with ``Frontier.apply_updates`` and, after the
commit, calls :meth:`StatusUpdater.committed` and acks.

What :meth:`StatusUpdater.to_update` does (StormCrawler's order):

1. DISCOVERED of a URL in the cache of recently committed URLs → ``None`` (nothing to write: a
   DISCOVERED never overwrites a known URL anyway; ack the tuple). Except a DISCOVERED from a
   sitemap (``isDiscoveredOnSitemap`` / ``isSitemap`` = true, or ``sitemap.seeded``), which the
   frontier applies to known URLs as a *sitemap refresh* (:mod:`owler.frontier.sqlite`): it is
   skipped only when the cache says the URL is already on a sitemap with the same
   ``sitemap.lastModified`` (and it is not a seed's ``sitemap.seeded``).
2. ``discoveryDate`` (DISCOVERED) or ``lastProcessedDate`` (other statuses), ISO instants, set only
   when ``metadata.persist``/``metadata.transfer`` would keep them.
3. FETCH_ERROR increments ``fetch.error.count``; reaching ``max.fetch.errors`` turns the status
   into ERROR with ``error.cause=maxFetchErrors``. Any other status drops the count.
4. FETCHED and REDIRECTION drop ``error.cause``, ``error.message``, ``error.source``.
5. next fetch date from the scheduler (it may add keys such as ``fetchInterval``), rounded to
   ``status.updater.unit.round.date`` (SECOND | MINUTE | HOUR).
6. metadata reduced to the persisted keys: ``metadata.transfer`` ∪ ``metadata.persist`` ∪
   ``fetch.error.count`` (+ ``depth``, ``max.depth`` with ``metadata.track.depth``, ``url.path``
   with ``metadata.track.path``); ``prefix*`` wildcards allowed; keys match case-sensitively.
7. partition key by ``partition.url.mode`` (``_DEFAULT_`` when the URL has no host).

The status updater bolt's tuples map to :meth:`StatusUpdater.for_status` (a status tuple, scheduled
from its ``fetch.time`` when it has one) and :meth:`StatusUpdater.for_outlinks` (one page's
outlinks batch); :class:`FrontierWriter` writes the batches (:mod:`owler.task.batch` decides when)
and keeps the cache of committed URLs.

Config keys read: ``max.fetch.errors`` (3), ``status.updater.use.cache`` (true),
``status.updater.cache.size`` (100000), ``status.updater.unit.round.date`` (SECOND),
``metadata.transfer``, ``metadata.persist``, ``metadata.track.path``, ``metadata.track.depth``,
``partition.url.mode``; for the batches (:func:`commit_settings`) ``status.updater.batch.size``
(5000) and ``status.updater.commit.interval`` (0.5 s), or with ``frontier.backend: opensearch``
StormCrawler's ``opensearch.status.bulkActions`` and ``opensearch.status.flushInterval`` when set.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping

from owler import conf as C
from owler import outlinks as outlink
from owler import urls
from owler.conf import ConfError
from owler.constants import (ANCHORS, CRAWL_ID, DEPTH, ERROR_CAUSE, ERROR_MESSAGE, ERROR_SOURCE,
                             FETCH_ERROR_COUNT, FETCH_TIME, FRONTIER_BACKEND_KEY, IS_SITEMAP,
                             MAX_DEPTH, METADATA_TRANSFER_KEY, ON_SITEMAP, QUEUE_BLOCK_UNTIL,
                             QUEUE_CRAWL_DELAY,
                             REDIRECT_HOPS,
                             REDIRECT_TO, SITEMAP_LAST_MODIFIED, SITEMAP_SEEDED, STATUS_STREAM,
                             URL_PATH, Status)
from owler.frontier import DEFAULT_KEY, RETRY_SECS, FrontierError, StatusUpdate, open_frontier
from owler.frontier.pipeline import OneInFlight, Outcome
from owler.frontier.refresh import listed
from owler.metadata import Metadata, first
from owler.metadata import normalize as normalize_md
from owler.osclient import conn_key

DISCOVERY_DATE = "discoveryDate"
LAST_PROCESSED_DATE = "lastProcessedDate"
MAX_FETCH_ERRORS_CAUSE = "maxFetchErrors"

#: seconds a frontier's debt of one batch (FrontierWriter.idle) waits for the next batch to carry
#: it before it is sent alone: within a crawl's flow of batches it never is
CARRY_SECS = 0.5

log = logging.getLogger("owler.status")

_ROUND_UNITS = {"SECOND": 1.0, "MINUTE": 60.0, "HOUR": 3600.0}


class _KeySet:
    """Exact keys plus ``prefix*`` wildcards."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.exact: set[str] = set()
        prefixes = []
        for k in keys:
            k = str(k).strip()
            if not k:
                continue
            if k.endswith("*"):
                prefixes.append(k[:-1])
            else:
                self.exact.add(k)
        self.prefixes = tuple(prefixes)

    def __contains__(self, key: str) -> bool:
        return key in self.exact or (bool(self.prefixes) and key.startswith(self.prefixes))

    def select(self, md: Mapping[str, list[str]]) -> Metadata:
        if not self.prefixes:
            return {k: list(md[k]) for k in self.exact if md.get(k)}
        return {k: list(v) for k, v in md.items() if v and k in self}


class MetadataTransfer:
    """What outlinks inherit and what is stored (StormCrawler's ``MetadataTransfer``)."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.track_path = C.get_bool(conf, "metadata.track.path", True)
        self.track_depth = C.get_bool(conf, "metadata.track.depth", True)
        transfer = list(C.get_list(conf, METADATA_TRANSFER_KEY, []))
        if self.track_path:
            transfer.append(URL_PATH)
        if self.track_depth:
            transfer += [DEPTH, MAX_DEPTH]
        transfer.append(CRAWL_ID)  # present only on URLs served from any crawl (constants)
        persist = C.get_list(conf, "metadata.persist", []) + [FETCH_ERROR_COUNT, REDIRECT_HOPS]
        self.transfer = _KeySet(transfer)
        self.persisted = _KeySet(transfer + persist)

    def for_outlink(self, parent_url: str, parent_md: Mapping[str, list[str]]) -> Metadata:
        """Metadata of an outlink of ``parent_url``: the transferred keys, ``url.path`` + the parent
        URL (track.path), ``depth`` = parent depth + 1, a missing or bad depth counting as 0; the
        target of a redirect (the parent has ``_redirTo``) gets ``redirect.hops`` = parent's + 1."""
        md = self.transfer.select(parent_md)
        if self.track_path:
            md.setdefault(URL_PATH, []).append(parent_url)
        if self.track_depth:
            try:
                depth = int(first(md, DEPTH, "0") or 0)
            except ValueError:
                depth = 0
            md[DEPTH] = [str(depth + 1)]
        if parent_md.get(REDIRECT_TO):  # the target of a redirect: one hop more
            try:
                hops = int(first(parent_md, REDIRECT_HOPS, "0") or 0)
            except ValueError:
                hops = 0
            md[REDIRECT_HOPS] = [str(hops + 1)]
        return md

    def filter(self, md: Mapping[str, list[str]]) -> Metadata:
        """The keys that are stored: transfer ∪ persist ∪ fetch.error.count."""
        return self.persisted.select(md)


_transfer_cache: dict[tuple, MetadataTransfer] = {}


def transfer_metadata(parent_url: str, parent_md: Mapping[str, list[str]],
                      conf: Mapping[str, Any] | None) -> Metadata:
    """Metadata for the outlinks of a page (see :meth:`MetadataTransfer.for_outlink`).
    The result is a fresh dict; copy it (``dict(md)`` is not enough: values are lists) before
    changing it per outlink."""
    conf = conf or {}
    sig = tuple(repr(conf.get(k)) for k in (
        "metadata.track.path", "metadata.track.depth", METADATA_TRANSFER_KEY, "metadata.persist"))
    mt = _transfer_cache.get(sig)
    if mt is None:
        mt = _transfer_cache[sig] = MetadataTransfer(conf)
    return mt.for_outlink(parent_url, normalize_md(parent_md))


def _seconds(md: Mapping[str, list[str]], key: str) -> float | None:
    """A number of seconds (or epoch seconds) in ``md[key]``: the queue block a throttled fetch
    asks for (``_queue.block.until``), the robots.txt crawl delay (``_queue.crawl.delay``); None
    when absent or not a number."""
    value = first(md, key)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusUpdater:
    """Turns statuses into frontier writes (module docstring). Not thread-safe."""

    def __init__(self, conf: Mapping[str, Any] | None, scheduler, partition_mode: str | None = None,
                 takedowns: Any = None) -> None:
        """``takedowns``: the crawl's :class:`owler.blacklist.takedown.TakedownList` (the
        bolt's), whose URLs are written as ERROR whatever a task reports of them
        (:meth:`for_status`)."""
        conf = conf or {}
        self.scheduler = scheduler
        self.takedowns = takedowns
        self.partition_mode = partition_mode or urls.partition_mode(conf)
        self.max_fetch_errors = C.get_int(conf, "max.fetch.errors", 3)
        self.transfer = MetadataTransfer(conf)
        unit = (C.get_str(conf, "status.updater.unit.round.date", "SECOND") or "SECOND").upper()
        if unit not in _ROUND_UNITS:
            raise ConfError(f"status.updater.unit.round.date: expected SECOND, MINUTE or HOUR, got {unit!r}")
        self.round_to = _ROUND_UNITS[unit]
        self.use_cache = C.get_bool(conf, "status.updater.use.cache", True)
        self.cache_size = C.get_int(conf, "status.updater.cache.size", 100000)
        if self.use_cache and self.cache_size <= 0:
            self.use_cache = False
        self._cache: OrderedDict[str, None] = OrderedDict()
        self.cache_hits = 0
        self.cache_misses = 0

    # -- the LRU of committed URLs ---------------------------------------------------------------
    def known(self, url: str) -> bool:
        """True when ``url`` was committed recently (an LRU of ``status.updater.cache.size``)."""
        if not self.use_cache:
            return False
        if url in self._cache:
            self._cache.move_to_end(url)
            return True
        return False

    def _skip_discovered(self, url: str, md: Mapping[str, list[str]]) -> bool:
        """Whether a DISCOVERED of ``url`` needs no write (see the module docstring, 1.)."""
        if not self.use_cache or url not in self._cache:
            return False
        self._cache.move_to_end(url)
        if not listed(md) and SITEMAP_SEEDED not in md:
            return True
        if SITEMAP_SEEDED in md:
            return False
        return self._cache[url] == (True, first(md, SITEMAP_LAST_MODIFIED))

    def committed(self, updates: Iterable[StatusUpdate | None]) -> None:
        """Call after ``apply_updates`` returned (the batch is durable): remembers its URLs so later
        DISCOVERED of them need no write. Never call it before the commit succeeded."""
        if not self.use_cache:
            return
        cache = self._cache
        for u in updates:
            if u is None:
                continue
            md = u.metadata
            if md and (ON_SITEMAP in md or IS_SITEMAP in md):  # what a sitemap refresh compares
                cache[u.url] = (listed(md), first(md, SITEMAP_LAST_MODIFIED))
            else:
                cache[u.url] = None
            cache.move_to_end(u.url)
        while len(cache) > self.cache_size:
            cache.popitem(last=False)

    @property
    def cache_len(self) -> int:
        return len(self._cache)

    # -- one status ------------------------------------------------------------------------------
    def to_update(self, url: str, metadata: Mapping[str, list[str]] | None, status: Status | str,
                  now: float) -> StatusUpdate | None:
        """The frontier write for ``url`` with ``status``, or ``None`` when nothing needs writing
        (a DISCOVERED URL already committed, see :meth:`known`): ack such a tuple right away.
        ``metadata`` is not modified. Raises ``ValueError`` for an unknown status name."""
        status = Status(status)
        if status == Status.DISCOVERED:
            if self._skip_discovered(url, metadata or {}):
                self.cache_hits += 1
                return None
            self.cache_misses += 1
        md = normalize_md(metadata)  # a copy, coerced to dict[str, list[str]]
        persisted = self.transfer.persisted
        date_key = DISCOVERY_DATE if status == Status.DISCOVERED else LAST_PROCESSED_DATE
        if date_key in persisted:
            md[date_key] = [_iso(now)]

        if status == Status.FETCH_ERROR:
            try:
                count = int(first(md, FETCH_ERROR_COUNT, "0") or 0)
            except ValueError:
                count = 0
            count += 1
            md[FETCH_ERROR_COUNT] = [str(count)]
            if count >= self.max_fetch_errors:
                status = Status.ERROR
                md[ERROR_CAUSE] = [MAX_FETCH_ERRORS_CAUSE]
        else:
            md.pop(FETCH_ERROR_COUNT, None)
        if status in (Status.FETCHED, Status.REDIRECTION):
            for k in (ERROR_CAUSE, ERROR_MESSAGE, ERROR_SOURCE):
                md.pop(k, None)

        next_fetch = self.scheduler.schedule(status, md, now)
        if next_fetch is not None and self.round_to:
            next_fetch = round(next_fetch / self.round_to) * self.round_to
        block = _seconds(md, QUEUE_BLOCK_UNTIL)
        crawl_delay = _seconds(md, QUEUE_CRAWL_DELAY)
        md = self.transfer.filter(md)
        return StatusUpdate(url, status, md, next_fetch, self.key_of(url), block, crawl_delay)

    def for_tuple(self, stream: str, values: list, now: float
                  ) -> tuple[list[StatusUpdate], dict[str, int]]:
        """The writes of one status updater tuple — ``url, metadata, status`` on ``status``, a
        page's outlinks batch otherwise — and what to count: the status name, ``discovered``
        (outlinks), ``cached`` (known from the cache: nothing to write). Raises for a malformed
        tuple (an unknown status, a batch that is not one)."""
        if stream == STATUS_STREAM:
            url, md, status = values
            update = self.for_status(url, md, status, now)
            if update is None:  # a DISCOVERED URL known from the cache
                return [], {status: 1, "cached": 1}
            return [update], {status: 1}
        source, md, batch = values
        updates, n = self.for_outlinks(source, md, batch, now)
        return updates, ({"discovered": n, "cached": n - len(updates)} if len(updates) < n
                         else {"discovered": n})

    def for_status(self, url: str, metadata: Mapping[str, list[str]] | None, status: str,
                   now: float) -> StatusUpdate | None:
        """:meth:`to_update` for a status tuple: scheduled from its ``fetch.time`` when it has one
        (an archived record is scheduled from when it was fetched, not from when it was read)."""
        md = metadata or {}
        takedowns = self.takedowns
        if takedowns is not None:  # a page fetched before its site's take-down reached the fetcher
            takedowns.maybe_reload()
            if takedowns.entries:
                md = dict(md)
                status = takedowns.overrule(url, status, md)
        return self.to_update(url, md, Status(status), fetch_time(md, now))

    def for_outlinks(self, source: str, metadata: Mapping[str, list[str]] | None, batch: Any,
                     now: float) -> tuple[list[StatusUpdate], int]:
        """The writes for one outlinks tuple (:mod:`owler.outlinks` wire form) of the page
        ``source``, and how many outlinks it carried. Anchors are stored only if
        ``metadata.persist`` lists them, as in StormCrawler."""
        items = outlink.decode(batch)
        child_md = self.transfer.for_outlink(source, normalize_md(metadata or {}))
        return self.discovered_batch(items, child_md, now), len(items)

    def discovered_batch(self, items: Iterable[tuple[str, str]], metadata: Mapping[str, list[str]],
                         now: float) -> list[StatusUpdate]:
        """The writes for the outlinks of one page: ``items`` are ``(url, anchor)``, ``metadata``
        what they all inherit (:func:`transfer_metadata`). The same as :meth:`to_update` of each
        (DISCOVERED, the anchor under ``anchors``), but the metadata, the date and the schedule are
        worked out once per batch: per URL only the cache and the partition key. URLs known from
        the cache are left out."""
        anchors_kept = ANCHORS in self.transfer.persisted
        template: StatusUpdate | None = None
        out = []
        for url, anchor in items:
            if anchor and anchors_kept:  # metadata of its own
                update = self.to_update(url, {**metadata, ANCHORS: [anchor]}, Status.DISCOVERED,
                                        now)
            elif template is None:
                update = template = self.to_update(url, metadata, Status.DISCOVERED, now)
            elif self._skip_discovered(url, metadata):
                self.cache_hits += 1
                update = None
            else:
                self.cache_misses += 1
                update = StatusUpdate(url, Status.DISCOVERED, template.metadata,
                                      template.next_fetch_date, self.key_of(url))
            if update is not None:
                out.append(update)
        return out

    def key_of(self, url: str) -> str:
        """Partition key of ``url`` by ``partition.url.mode``; ``_DEFAULT_`` if it has no host."""
        try:
            return urls.partition_key(url, self.partition_mode) or DEFAULT_KEY
        except ValueError as exc:
            if "unknown partition mode" in str(exc):
                raise ConfError(str(exc)) from exc
            return DEFAULT_KEY


def fetch_time(md: Mapping[str, list[str]], now: float) -> float:
    """The ``fetch.time`` of ``md`` (epoch seconds), else ``now``."""
    value = md.get(FETCH_TIME)
    if value:
        try:
            return float(value[0])
        except (TypeError, ValueError, IndexError):
            pass
    return now


def commit_settings(conf: Mapping[str, Any]) -> tuple[int, float]:
    """(updates per commit at most, seconds a tuple waits at most) for the status updater."""
    size = C.get_int(conf, "status.updater.batch.size", 5000)
    interval = C.get_float(conf, "status.updater.commit.interval", 0.5)
    if C.get_str(conf, FRONTIER_BACKEND_KEY, "sqlite") == "opensearch":
        # StormCrawler's bulk keys of its OpenSearch status updater, when given
        size = C.get_int(conf, "opensearch.status.bulkActions", size)
        interval = C.get_duration(conf, "opensearch.status.flushInterval", interval)
    return size, interval


class FrontierUnavailable(FrontierError):
    """The frontier could not be opened; :class:`FrontierWriter` tries again later."""


class FrontierWriter:
    """The status updater's side of the frontier: write a batch, then remember its URLs in the
    updater's cache (only what was written).

    :meth:`write` writes a batch and waits for it. With a frontier that builds a request apart
    from sending it (OpenSearch) and ``opensearch.status.concurrentRequests`` at 1 or more
    (StormCrawler's key and default: 1), :attr:`pipelined` is true and the caller may use
    :meth:`send` instead: one batch is on its way while the next is built
    (:class:`owler.frontier.pipeline.OneInFlight`; more than one request in flight is not done, so
    that two writes of a URL stay in order), and a batch's :class:`~owler.frontier.pipeline.Outcome`
    comes back from a later :meth:`send`, :meth:`poll` or :meth:`drain`. 0 writes and waits.

    The frontier is opened at once; when it cannot be (a database locked, OpenSearch away), it is
    opened again at the next write at most every ``RETRY_SECS`` seconds, and a write meanwhile
    raises :class:`FrontierUnavailable` (the tuples are failed and replayed). ``on_unavailable``
    hears of each failed opening (the bolt counts and reports it).
    """

    def __init__(self, conf: Mapping[str, Any], updater: StatusUpdater, *,
                 on_unavailable: Callable[[FrontierError], None] | None = None,
                 opener: Callable[[Mapping[str, Any]], Any] = open_frontier) -> None:
        self.conf = conf
        self.updater = updater
        self.on_unavailable = on_unavailable or (lambda exc: None)
        self.opener = opener
        self.frontier = None
        self.retry_at = 0.0
        key = "opensearch.status.concurrentRequests"  # or opensearch.concurrentRequests
        self.concurrent = C.get_int({key: conn_key(conf, "status", "concurrentRequests")}, key, 1)
        if self.concurrent < 0:
            raise ConfError(f"{key}: expected 0 or more, got {self.concurrent}")
        self._pipe: OneInFlight | None = None
        self._open()

    @property
    def pipelined(self) -> bool:
        """Batches go through :meth:`send` (one in flight), not :meth:`write`."""
        return self.concurrent > 0 and hasattr(self.frontier, "prepare_updates")

    def _open(self) -> bool:
        try:
            self.frontier = self.opener(self.conf)
        except FrontierError as exc:
            self.retry_at = time.time() + RETRY_SECS
            self.on_unavailable(exc)
            return False
        if hasattr(self.frontier, "round_results"):  # (OpenSearch: module docstring there)
            self.frontier.round_results = True
            # each bulk carries the queues' lowering of the one before (one request a batch, not
            # two); idle() sends it when no batch follows
            self.frontier.carry_queues = True
        self._pipe = OneInFlight(self.frontier) if self.pipelined else None
        return True

    def _available(self) -> None:
        if self.frontier is None and (time.time() < self.retry_at or not self._open()):
            raise FrontierUnavailable("the frontier is unavailable")

    def write(self, updates: list[StatusUpdate]) -> list[int]:
        """Write ``updates``, durably; the positions of those that failed (the others are
        remembered as committed). Raises :class:`FrontierUnavailable` or the frontier's error
        when nothing may be assumed written."""
        self._available()
        failed = self.frontier.apply_updates(updates)
        self._committed(updates, failed)
        return sorted(set(failed))

    def send(self, updates: list[StatusUpdate], tag: Any = None) -> Outcome | None:
        """Build ``updates``' request, wait for the batch on its way, send this one (only when
        :attr:`pipelined`). Returns the outcome of the batch before, if any; an error building the
        request, or :class:`FrontierUnavailable`, is raised (this batch was not sent)."""
        self._available()
        return self._settled(self._pipe.send(updates, tag))

    def poll(self) -> Outcome | None:
        """The outcome of the batch on its way if its answer came (no wait)."""
        return self._settled(self._pipe.poll()) if self._pipe is not None else None

    def drain(self) -> Outcome | None:
        """Wait for the batch on its way; its outcome, if there was one."""
        return self._settled(self._pipe.wait()) if self._pipe is not None else None

    def idle(self) -> None:
        """Between batches (the bolt's tick): what the frontier still owes of the last batch
        it wrote, when no batch came to carry it within ``CARRY_SECS`` (OpenSearch: the queues
        its new URLs lower). A failure is logged; it is tried again at the next batch or tick."""
        flush = getattr(self.frontier, "flush_queues", None)
        if flush is None or (self._pipe is not None and self._pipe.busy):
            return  # (a batch on its way carries it)
        try:
            flush(CARRY_SECS)
        except Exception as exc:  # noqa: BLE001 - owed still: the next batch or tick
            log.warning("cannot lower the queues of the last batch: %s", exc)

    def _settled(self, outcome: Outcome | None) -> Outcome | None:
        if outcome is not None and outcome.ok:
            self._committed(outcome.updates, outcome.failed)
        return outcome

    def _committed(self, updates: list[StatusUpdate], failed: list[int]) -> None:
        if failed:
            failed_at = set(failed)
            self.updater.committed(u for i, u in enumerate(updates) if i not in failed_at)
        else:
            self.updater.committed(updates)

    def close(self) -> None:
        """Stop; a batch still on its way is waited for (its tuples, not acked, are replayed)."""
        if self._pipe is not None:
            self._pipe.close()
        if self.frontier is not None:
            self.frontier.close()
