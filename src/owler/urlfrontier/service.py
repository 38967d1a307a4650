"""``owler frontier serve``: the project's own frontier (the SQLite file, the OpenSearch status
index) as a URLFrontier service, so that several crawlers (this one, StormCrawler, any URLFrontier
client) share one frontier.

What a call does, over the :class:`owler.frontier.Frontier` that ``frontier.backend`` opens:

GetURLs
    due URLs, at most ``max_urls_per_queue`` per queue (0: 100) of at most ``max_queues`` queues
    (0: 10,000), or of queue ``key`` only. Every URL given out is *held* for
    ``delay_requestable`` seconds (0: 30): not given out again until its hold ends or a PutURLs
    updates it.

    A queue is served in *rounds* (``urlfrontier.service.rounds``, true): not again while a URL of
    its last round is held, and not before its delay has passed since that round ended (SetDelay;
    else ``urlfrontier.default.delay``, else ``fetcher.server.delay``, 1 s). So crawlers sharing
    the service keep a host's politeness between them. With rounds off the service behaves as
    crawler-commons' reference one: a queue is skipped while ``max_urls_per_queue`` of its URLs
    are held, and its delay counts from when it last gave URLs. Either way, with
    ``frontier.queue.round.delay`` (OWLer's rounds, ``resources/owler-rounds.yaml``) a queue is
    not served again before that many seconds since its last round began (the SQLite and
    OpenSearch frontiers under the service keep that rule too). A blocked queue
    (BlockQueueUntil) is skipped. While several clients ask for URLs, a queue whose round ended
    goes to another client (another connection: ``context.peer()``) first, for
    ``urlfrontier.service.handover`` seconds (1.5) after its delay: else the client that happens
    to ask first after every round would keep the queues.

    Over OpenSearch the service also leases each queue it serves (:mod:`owler.frontier.opensearch`)
    until its round ends, so several services on one index never give out one queue at once. An
    updated URL stays held until the write is searchable (the index's refresh), and a GetURLs
    after updates refreshes the index first: no URL is given out twice because the index lagged.
PutURLs
    ``discovered`` = DISCOVERED (never overwrites a known URL), due now; ``known`` = the status in
    metadata :data:`~owler.frontier.urlfrontier_api.STATUS_KEY` (else FETCHED), due
    ``refetchable_from_date`` (0: never). Items are written in batches of what has arrived (up to
    ``urlfrontier.service.batch``, 500); an item is acked OK once its batch is durable, FAIL when
    the write failed (the client may resend), SKIPPED when it cannot be stored (no key and a URL
    without a host, a key over 255 characters) or need not be (a ``discovered`` item of a URL the
    crawl holds already, or sent earlier in the batch: the reference service's answer; several
    services on one OpenSearch index may both answer OK for a URL both were sent at once).
GetStats, ListQueues, ListURLs, CountURLs, GetURLStatus, DeleteQueue, ListCrawls, DeleteCrawl,
BlockQueueUntil, SetDelay, SetActive, GetActive, ListNodes, SetLogLevel
    as the API describes them. ``size`` counts the URLs to be fetched again some day,
    ``counts`` holds the URLs per status, ``completed`` (never to be fetched again) and, for the
    whole crawl, ``due`` (:data:`~owler.frontier.urlfrontier_api.DUE_COUNT`: due now, held or not).

Crawls: every call honours its crawl ID (empty: ``DEFAULT``). Each crawl is a space of its own
(:mod:`owler.frontier.crawls`: a SQLite file beside ``frontier.sqlite.path``, an OpenSearch index
beside the status index), made by the first PutURLs (or BlockQueueUntil, SetDelay) that names it;
the ``DEFAULT`` crawl is the frontier as it was before crawl IDs. GetURLs with ``anyCrawlID``
serves every crawl in turn. A read of a crawl that has no space answers as an empty crawl
(GetStats, CountURLs, ListQueues, DeleteQueue, DeleteCrawl: 0), except the calls that return its
URLs (ListURLs, GetURLStatus), which answer NOT_FOUND naming the crawls there are; a crawl ID that
names none (a control character, over 255 characters) is INVALID_ARGUMENT, and in PutURLs makes
the item SKIPPED. DeleteCrawl removes the crawl's file or index (``DEFAULT``'s is emptied) and
answers how many URLs it held. A URL sent without a key goes to the queue of its host, whatever
``partition.url.mode`` the crawlers use (the API: "a sensible default like hostname").
SetCrawlLimit (as the reference service): a queue with a limit is not served once as many of its
URLs are completed (never to be fetched again) as the limit; 0 lifts it; an unknown queue is
NOT_FOUND.

Metrics: ``serve(..., metrics_port=N)`` (``owler frontier serve --metrics-port N``) serves
``/metrics`` in Prometheus' text format with the reference service's names
(``frontier_getURLs_total``, ``frontier_putURLs_total``, ``..._discovered_total{discovered}``,
``..._ignored_total``, ``..._completed_total``, ``frontier_getURLs_latency_seconds``:
:class:`owler.prometheus.ServiceMetrics`).

Every frontier call runs on one thread of its own (a SQLite connection belongs to one thread; it
also keeps the holds consistent); a frontier that fails answers UNAVAILABLE.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Mapping

import grpc

from owler import conf as C
from owler.conf import ConfError
from owler.constants import ROUND_DELAY_KEY, SERVER_DELAY_KEY, STATUS_NAMES, Status
from owler.frontier import (FrontierError, FrontierRecord, StatusUpdate, backend_of,
                            crawl_spaces, delete_crawl, list_crawls, open_frontier, space_exists)
from owler.frontier.crawls import DEFAULT_CRAWL, CrawlIDError, crawl_id
from owler.frontier.feed import lease_owner
from owler.frontier.refresh import is_refresh
from owler.frontier.urlfrontier_api import DUE_COUNT, STATUS_KEY, add_service, pb
from owler.prometheus import ServiceMetrics
from owler.urls import partition_key

log = logging.getLogger("owler.urlfrontier.service")

DEFAULT_PER_QUEUE = 100  # GetParams.max_urls_per_queue = 0
DEFAULT_QUEUES = 10_000  # GetParams.max_queues = 0
DEFAULT_HOLD = 30  # GetParams.delay_requestable = 0, seconds
PEER_TTL = 10.0  # seconds a client that asked for URLs counts as sharing the service
LIST_PAGE = 1000  # records read from the frontier at a time for ListURLs
MAX_KEY = 255
_END = object()
OK, SKIPPED, FAIL = (pb.AckMessage.Status.Value(n) for n in ("OK", "SKIPPED", "FAIL"))


def metadata_in(info: Any) -> dict[str, list[str]]:
    return {k: list(v.values) for k, v in info.metadata.items()}


def fill_metadata(info: Any, md: Mapping[str, list[str]]) -> None:
    for k, values in md.items():
        info.metadata[k].values.extend(str(v) for v in values)


def known_item(rec: FrontierRecord, crawl: str) -> Any:
    """A stored record of ``crawl`` as the API's ``known`` item: its status in
    :data:`STATUS_KEY`."""
    item = pb.URLItem(known=pb.KnownURLItem(refetchable_from_date=int(rec.next_fetch_date or 0)))
    info = item.known.info
    info.url, info.key, info.crawlID = rec.url, rec.key, crawl
    fill_metadata(info, {**rec.metadata, STATUS_KEY: [rec.status.value]})
    return item


class _Crawl:
    """One crawl as the service keeps it: its frontier (a space of its own:
    :mod:`owler.frontier.crawls`) and the holds, rounds and delays of its queues."""

    def __init__(self, crawl: str, frontier: Any) -> None:
        self.crawl = crawl
        self.frontier = frontier
        self.delays: dict[str, float] = {}  # SetDelay per queue
        self.limits: dict[str, int] = {}  # SetCrawlLimit per queue
        self.last_served: dict[str, float] = {}
        self.holds: dict[str, tuple[float, str]] = {}  # url -> (until, key)
        self.held: dict[str, set[str]] = {}  # key -> held urls
        self.round_owner: dict[str, str] = {}  # key -> the client (peer) its round went to
        self.handover: dict[str, tuple[str, float]] = {}  # key -> (last owner, its turn after)
        self.round_began: dict[str, float] = {}  # key -> when its last round began (round.delay)
        self.dirty = False  # written since the frontier's last refresh

    def forget(self) -> None:
        """Every queue's state (the crawl was deleted)."""
        for d in (self.delays, self.limits, self.last_served, self.holds, self.held,
                  self.round_owner, self.handover, self.round_began):
            d.clear()


class MetricsPortError(OSError):
    """The service's ``/metrics`` cannot listen where it was asked to."""


class FrontierService:
    """The URLFrontier service's methods (:func:`owler.frontier.urlfrontier_api.add_service`)."""

    def __init__(self, conf: Mapping[str, Any], *, address: str = "",
                 clock: Callable[[], float] = time.time) -> None:
        if backend_of(conf) == "urlfrontier":
            raise ConfError("frontier.backend: the service serves a SQLite or OpenSearch "
                            "frontier, not another URLFrontier service")
        self.conf = conf
        self.address = address
        self.clock = clock
        self.default_delay = C.get_float(conf, "urlfrontier.default.delay",
                                         C.get_float(conf, SERVER_DELAY_KEY, 1.0))
        self.rounds = C.get_bool(conf, "urlfrontier.service.rounds", True)
        self.round_delay = max(0.0, C.get_float(conf, ROUND_DELAY_KEY, 0.0))
        self.batch = max(1, C.get_int(conf, "urlfrontier.service.batch", 500))
        self.peers: dict[str, float] = {}  # clients asking for URLs -> when they last asked
        self.handover_secs = C.get_float(conf, "urlfrontier.service.handover", 1.5)
        self.active = True
        self.crawls: dict[str, _Crawl] = {}
        self.metrics = ServiceMetrics()  # /metrics with --metrics-port (owler.prometheus)
        self._metrics_http: Any = None
        self.metrics_port: int | None = None
        self._next_crawl = 0  # the crawl GetURLs with any crawl ID starts from
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="frontier")
        # the lease owner over OpenSearch: one per service (frontier.crawler.id, else host:pid)
        self.owner = lease_owner(conf, "urlfrontier", address or "local")
        # the DEFAULT crawl's frontier opens now: a frontier that cannot be used fails the start
        self._run(lambda: self._state(DEFAULT_CRAWL, create=True))

    @property
    def frontier(self) -> Any:
        """The DEFAULT crawl's frontier."""
        return self.crawls[DEFAULT_CRAWL].frontier

    def state(self, crawl: str = DEFAULT_CRAWL) -> _Crawl | None:
        """What the service keeps of ``crawl`` (None: not opened); for tests and tools."""
        return self.crawls.get(crawl)

    # -- plumbing ---------------------------------------------------------------------------------
    def _run(self, fn: Callable[[], Any]) -> Any:
        """``fn`` on the frontier's thread (every access to the frontiers and the holds)."""
        return self._thread.submit(fn).result()

    def _call(self, context: Any, fn: Callable[[], Any]) -> Any:
        try:
            return self._run(fn)
        except FrontierError as exc:
            log.error("frontier: %s", exc)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"frontier: {exc}")

    def _crawl_of(self, value: str, context: Any) -> str:
        """A request's crawl ID (empty: DEFAULT); INVALID_ARGUMENT for one that names none."""
        try:
            return crawl_id(value)
        except CrawlIDError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    def _state(self, crawl: str, create: bool = False) -> _Crawl | None:
        """``crawl``'s state with its frontier open (frontier thread); None when the crawl has no
        space and ``create`` is false (a read of a crawl nobody wrote creates nothing)."""
        st = self.crawls.get(crawl)
        if st is not None:
            return st
        if not create and not space_exists(self.conf, crawl):
            return None
        st = self.crawls[crawl] = _Crawl(crawl, open_frontier(self.conf, owner=self.owner,
                                                              crawl=crawl))
        return st

    def _known_crawls(self) -> list[str]:
        """The crawls with a space (frontier thread), DEFAULT first."""
        return list(dict.fromkeys([*crawl_spaces(self.conf), *self.crawls]))

    def _fresh(self, fn: Callable[..., Any], st: _Crawl, *args: Any) -> Any:
        """``fn(*args)`` once every write so far is visible to it (OpenSearch: a refresh)."""
        st.frontier.refresh()
        return fn(*args)

    def serve_metrics(self, host: str, port: int) -> int:
        """The service's metrics on ``http://host:port/metrics`` (0: any free port), until
        :meth:`close`; returns the port bound. MetricsPortError when it cannot be bound."""
        from prometheus_client import start_http_server

        try:
            self._metrics_http, _ = start_http_server(port, addr=host,
                                                      registry=self.metrics.registry)
        except OSError as exc:
            raise MetricsPortError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
        self.metrics_port = self._metrics_http.server_port
        return self.metrics_port

    def close(self) -> None:
        def close() -> None:
            for st in self.crawls.values():
                if getattr(st.frontier, "leases_queues", False):
                    st.frontier.release_all(self.clock())
                st.frontier.close()
        if self._metrics_http is not None:
            self._metrics_http.shutdown()
            self._metrics_http.server_close()
            self._metrics_http = None
        self._run(close)
        self._thread.shutdown()

    # -- holds (frontier thread) ----------------------------------------------------------------
    def _release(self, st: _Crawl, urls: Iterable[str], now: float) -> None:
        for url in urls:
            entry = st.holds.pop(url, None)
            if entry is None:
                continue
            key = entry[1]
            left = st.held.get(key)
            if left is not None:
                left.discard(url)
                if not left:
                    del st.held[key]
                    if self.rounds:  # the queue's delay counts from the end of its round
                        st.last_served[key] = now
                        owner = st.round_owner.pop(key, None)
                        if owner is not None:  # the others' turn first (_take)
                            st.handover[key] = (owner,
                                                now + self._delay(st, key) + self.handover_secs)
                    if st.frontier.leases_queues:
                        st.frontier.release(key, now)

    def _expire(self, st: _Crawl, now: float) -> None:
        if st.holds:
            self._release(st, [u for u, (until, _) in st.holds.items() if until <= now], now)

    def _delay(self, st: _Crawl, key: str) -> float:
        return st.delays.get(key, self.default_delay)

    def _limited(self, st: _Crawl) -> set[str]:
        """Queues whose crawl limit (SetCrawlLimit) is reached: as many URLs completed (never to
        be fetched again) as the limit."""
        return {k for k, limit in st.limits.items()
                if st.frontier.count_urls(k, active=False) >= limit}

    def _take(self, st: _Crawl, key: str | None, max_queues: int, per_queue: int, hold: float,
              peer: str = "") -> list[tuple[str, dict, str]]:
        now = self.clock()
        self._expire(st, now)
        st.last_served = {k: t for k, t in st.last_served.items() if t + self._delay(st, k) > now}
        skip = set(st.last_served) | self._round_pause(st, now)
        # handover: while other clients are asking too, a queue whose round just ended goes to
        # one of them first (else the client that polls most often keeps every queue)
        self.peers[peer] = now
        if len(self.peers) > 1:
            self.peers = {p: t for p, t in self.peers.items() if now - t < PEER_TTL}
        st.handover = {k: h for k, h in st.handover.items() if h[1] > now}
        if len(self.peers) > 1:
            skip.update(k for k, (owner, _) in st.handover.items() if owner == peer)
        skip.update(k for k, urls in st.held.items() if self.rounds or len(urls) >= per_queue)
        if st.dirty:  # OpenSearch: the updates so far searchable, or they would look due (and
            st.frontier.refresh()  # the crawl limits would miss the last completed URLs)
            st.dirty = False
        if st.limits:
            skip.update(self._limited(st))
        if key is not None and key in skip:
            return []
        # without rounds a queue may give more while some of its URLs are held: ask for as many
        # more as are held, the held ones are skipped (exclude)
        extra = 0 if self.rounds else max((len(v) for v in st.held.values()), default=0)
        per_bucket = min(per_queue + extra, getattr(st.frontier, "max_per_bucket", 1 << 30))
        rows = st.frontier.due(now, max_queues, per_bucket, exclude=st.holds.keys(), key=key,
                               skip_keys=skip)
        out = []
        served: set[str] = set()
        for url, md, k in rows:
            if k in skip or url in st.holds or (k not in served and len(served) >= max_queues):
                continue
            urls = st.held.setdefault(k, set())
            if len(urls) >= per_queue:
                continue
            urls.add(url)
            st.holds[url] = (now + hold, k)
            served.add(k)
            st.round_owner[k] = peer
            out.append((url, md, k))
        if not self.rounds:
            for k in served:
                st.last_served[k] = now
        self._rounds_begin(st, served, now)
        if st.frontier.leases_queues:  # leased by due() and nothing given out: back at once
            for k in [k for k in st.frontier.leases if k not in st.held]:
                st.frontier.release(k, now, served=False)
        return out

    # -- rounds (frontier.queue.round.delay; the frontier keeps them too) ---------------------------
    def _round_pause(self, st: _Crawl, now: float) -> set[str]:
        """The queues whose last round began less than ``frontier.queue.round.delay`` ago."""
        if not self.round_delay:
            return set()
        st.round_began = {k: t for k, t in st.round_began.items() if t + self.round_delay > now}
        return set(st.round_began)

    def _rounds_begin(self, st: _Crawl, keys: Iterable[str], now: float) -> None:
        """Rounds of ``keys`` begin ``now`` (they were given URLs)."""
        if self.round_delay:
            st.round_began.update((k, now) for k in keys)

    def _take_any(self, key: str | None, max_queues: int, per_queue: int, hold: float,
                  peer: str) -> list[tuple[str, dict, str, str]]:
        """GetURLs with any crawl ID: from each crawl in turn (starting one further each call,
        so that no crawl always comes first) until ``max_queues`` queues gave URLs."""
        crawls = self._known_crawls()
        if not crawls:
            return []
        start = self._next_crawl % len(crawls)
        self._next_crawl += 1
        out: list[tuple[str, dict, str, str]] = []
        queues = 0
        for crawl in crawls[start:] + crawls[:start]:
            if queues >= max_queues:
                break
            st = self._state(crawl)
            if st is None:
                continue
            rows = self._take(st, key, max_queues - queues, per_queue, hold, peer)
            queues += len({k for _, _, k in rows})
            out.extend((url, md, k, crawl) for url, md, k in rows)
        return out

    def _put(self, items: list[Any]) -> list[tuple[str, int]]:
        now = self.clock()
        acks: list[tuple[str, int]] = []
        by_crawl: dict[str, tuple[list[StatusUpdate], list[int]]] = {}
        discovered = completed = 0  # counted once a batch: a counter's inc() costs ~1-3 µs
        for item in items:
            kind = item.WhichOneof("item")
            info = item.discovered.info if kind == "discovered" else item.known.info
            acks.append((item.ID or info.url, OK))
            discovered += kind == "discovered"
            try:
                crawl = crawl_id(info.crawlID)
            except CrawlIDError:
                crawl = None
            key = info.key
            if not key:  # the API: "a sensible default like hostname", whatever crawlers use
                try:
                    key = partition_key(info.url, "byHost")
                except ValueError:
                    key = ""
            if kind is None or not info.url or not key or len(key) > MAX_KEY or crawl is None:
                acks[-1] = (acks[-1][0], SKIPPED)  # must not be resent: it would fail again
                continue
            md = metadata_in(info)
            if kind == "discovered":
                md.pop(STATUS_KEY, None)
                update = StatusUpdate(info.url, Status.DISCOVERED, md, now, key)
            else:
                names = md.pop(STATUS_KEY, None) or ()
                status = next((Status(n) for n in names if n in Status._value2member_map_),
                              Status.FETCHED)
                if status is Status.DISCOVERED:
                    status = Status.FETCHED  # a known URL is not undiscovered again
                due = item.known.refetchable_from_date
                completed += not due
                update = StatusUpdate(info.url, status, md, float(due) if due else None, key)
            updates, positions = by_crawl.setdefault(crawl, ([], []))
            updates.append(update)
            positions.append(len(acks) - 1)
        m = self.metrics
        m.put_urls.inc(len(items))
        m.put_discovered.labels("true").inc(discovered)
        m.put_discovered.labels("false").inc(len(items) - discovered)
        m.put_completed.inc(completed)
        for crawl, (updates, positions) in by_crawl.items():
            updates, positions = self._leave_known(crawl, updates, positions, acks)
            for pos in self._write(crawl, updates, positions, now):
                acks[pos] = (acks[pos][0], FAIL)
        return acks

    def _leave_known(self, crawl: str, updates: list[StatusUpdate], positions: list[int],
                     acks: list[tuple[str, int]]) -> tuple[list[StatusUpdate], list[int]]:
        """The updates of one crawl's share of a batch without its ``discovered`` items of URLs
        already stored or sent earlier in the batch: those are acked SKIPPED (known, not to be
        sent again; the reference service's answer) and not written (they would change
        nothing). A sitemap's refresh of a known URL (:mod:`owler.frontier.refresh`) is a
        change, written as any update."""
        plain = [u.status is Status.DISCOVERED and not is_refresh(u.status.value, u.metadata)
                 for u in updates]
        wanted = [(u.url, u.key) for u, p in zip(updates, plain) if p]
        if not wanted:
            return updates, positions
        try:
            st = self._state(crawl)
            stored = st.frontier.known(wanted) if st is not None else set()
        except FrontierError as exc:  # written as they are: the frontier decides
            log.warning("PutURLs: could not look up %d discovered URLs: %s", len(wanted), exc)
            return updates, positions
        seen: set[str] = set()
        kept: tuple[list[StatusUpdate], list[int]] = ([], [])
        for u, pos, p in zip(updates, positions, plain):
            if p and (u.url in stored or u.url in seen):
                acks[pos] = (acks[pos][0], SKIPPED)
                continue
            seen.add(u.url)
            kept[0].append(u)
            kept[1].append(pos)
        self.metrics.put_ignored.inc(len(updates) - len(kept[0]))
        return kept

    def _write(self, crawl: str, updates: list[StatusUpdate], positions: list[int],
               now: float) -> list[int]:
        """Write one crawl's share of a PutURLs batch; the positions (in the batch) that failed
        and may be sent again."""
        try:
            st = self._state(crawl, create=True)
        except FrontierError as exc:
            log.error("PutURLs: crawl %r cannot be opened: %s", crawl, exc)
            return positions
        st.dirty = True
        try:
            failed = set(st.frontier.apply_updates(updates))
        except FrontierError as exc:
            log.error("PutURLs: a batch of %d could not be written: %s", len(updates), exc)
            failed = set(range(len(updates)))
        # a URL's status written ends its hold; a DISCOVERED (an outlink to a URL being
        # fetched) changes nothing of a known URL and ends nothing
        written = [u.url for i, u in enumerate(updates)
                   if i not in failed and u.status is not Status.DISCOVERED]
        # OpenSearch: a write is searchable only after the index's refresh; till then the URL
        # would look due still, so its hold lasts until then (the frontier's min_hold)
        visible_in = float(getattr(st.frontier, "min_hold", 0.0))
        if visible_in:
            for url in written:
                if url in st.holds:
                    st.holds[url] = (now + visible_in, st.holds[url][1])
        else:
            self._release(st, written, now)
        return [positions[i] for i in sorted(failed)]

    # -- the API ----------------------------------------------------------------------------------
    def GetURLs(self, request: Any, context: Any) -> Iterator[Any]:
        if not self.active:
            return
        self.metrics.get_calls.inc()
        started = time.perf_counter()
        peer = context.peer() or ""
        args = (request.key or None, request.max_queues or DEFAULT_QUEUES,
                request.max_urls_per_queue or DEFAULT_PER_QUEUE,
                request.delay_requestable or DEFAULT_HOLD, peer)
        if request.WhichOneof("item") == "anyCrawlID":
            rows = self._call(context, lambda: self._take_any(*args))
        else:
            crawl = self._crawl_of(request.crawlID, context)

            def take() -> list:
                st = self._state(crawl)
                return [] if st is None else [(*row, crawl) for row in self._take(st, *args)]
            rows = self._call(context, take)
        self.metrics.get_latency.observe(time.perf_counter() - started)
        self.metrics.get_urls.inc(len(rows))
        for url, md, key, crawl in rows:
            info = pb.URLInfo(url=url, key=key, crawlID=crawl)
            fill_metadata(info, md)
            yield info

    def PutURLs(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        self.metrics.put_calls.inc()
        for items in self._batches(request_iterator, context):
            for ack_id, status in self._call(context, lambda: self._put(items)):
                yield pb.AckMessage(ID=ack_id, status=status)

    def _batches(self, items: Iterator[Any], context: Any) -> Iterator[list[Any]]:
        """What has arrived of the stream, in batches of at most ``self.batch``: a reader thread
        takes the items, so a batch is written as soon as the client pauses."""
        inbox: queue.Queue = queue.Queue(maxsize=4 * self.batch)

        def put(item: Any) -> bool:  # False once the call is over (the consumer is gone)
            while context.is_active():
                try:
                    inbox.put(item, timeout=1.0)
                    return True
                except queue.Full:
                    continue
            return False

        def read() -> None:
            try:
                for item in items:
                    if not put(item):
                        return
            except Exception as exc:  # the client went away: end the stream
                log.debug("PutURLs stream ended: %s", exc)
            put(_END)

        threading.Thread(target=read, name="PutURLs-reader", daemon=True).start()
        done = False
        while not done:
            first = inbox.get()
            if first is _END:
                return
            batch = [first]
            while len(batch) < self.batch:
                try:
                    item = inbox.get_nowait()
                except queue.Empty:
                    break
                if item is _END:
                    done = True
                    break
                batch.append(item)
            yield batch

    def GetStats(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)
        key = request.key or None

        def stats() -> Any:
            out = pb.Stats(crawlID=crawl)
            st = self._state(crawl)
            if st is None:  # a crawl nobody wrote (or deleted): nothing in it
                for name in STATUS_NAMES:
                    out.counts[name] = 0
                out.counts["completed"] = 0
                return out
            f = st.frontier
            f.refresh()  # OpenSearch: every write so far counted
            self._expire(st, self.clock())
            out.size = f.count_urls(key, active=True)
            completed = f.count_urls(key, active=False)
            if key is None:
                out.inProcess = len(st.holds)
                out.numberOfQueues = f.queue_count()
                out.counts.update(f.counts())
                out.counts[DUE_COUNT] = f.due_count(self.clock())
            else:
                out.inProcess = len(st.held.get(key, ()))
                out.numberOfQueues = 1 if out.size or completed else 0
            out.counts["completed"] = completed
            return out

        return self._call(context, stats)

    def ListQueues(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)
        size = request.size or 100

        def listing() -> Any:
            st = self._state(crawl)
            if st is None:
                return pb.QueueList(start=request.start, crawlID=crawl)
            st.frontier.refresh()
            keys = st.frontier.list_queues(request.start, size, self.clock(),
                                           request.include_inactive)
            return pb.QueueList(values=keys, start=request.start, size=len(keys),
                                total=st.frontier.queue_count(), crawlID=crawl)

        return self._call(context, listing)

    def _known(self, crawl: str, context: Any) -> _Crawl:
        """``crawl``'s state, or NOT_FOUND naming the crawls there are (a call that reads a
        crawl's URLs: ListURLs, GetURLStatus)."""
        st = self._call(context, lambda: self._state(crawl))
        if st is None:
            known = self._call(context, lambda: list_crawls(self.conf))
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"unknown crawl {crawl!r}; crawls: {', '.join(known) or 'none'}")
        return st

    def ListURLs(self, request: Any, context: Any) -> Iterator[Any]:
        crawl = self._crawl_of(request.crawlID, context)
        st = self._known(crawl, context)
        text = request.filter if request.HasField("filter") else None
        ignore = request.ignoreCase if request.HasField("ignoreCase") else False
        left = request.size or 100
        # streamed a page at a time, each read on the frontier thread (a listing of a whole
        # crawl, DumpURLs' size 2^31 - 1, never sits in memory)
        pages = self._call(context, lambda: self._fresh(
            st.frontier.iter_urls, st, request.key or None, request.start, text, ignore,
            min(left, LIST_PAGE)))
        while left > 0:
            page = self._call(context, lambda: next(pages, None))
            if not page:
                return
            for rec in page[:left]:
                yield known_item(rec, crawl)
            left -= len(page)

    def CountURLs(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)
        text = request.filter if request.HasField("filter") else None
        ignore = request.ignoreCase if request.HasField("ignoreCase") else False

        def count() -> int:
            st = self._state(crawl)
            return 0 if st is None else self._fresh(st.frontier.count_urls, st,
                                                    request.key or None, text, ignore)

        return pb.Long(value=self._call(context, count))

    def GetURLStatus(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)
        st = self._known(crawl, context)
        rec = self._call(context, lambda: st.frontier.get(request.url))
        if rec is None or (request.key and request.key != rec.key):
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"unknown URL {request.url!r} in crawl {crawl!r}")
        return known_item(rec, crawl)

    def DeleteQueue(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)

        def delete() -> int:
            st = self._state(crawl)
            if st is None:
                return 0
            n = st.frontier.delete(request.key)
            self._release(st, list(st.held.get(request.key, ())), self.clock())
            st.last_served.pop(request.key, None)
            st.limits.pop(request.key, None)
            return n

        return pb.Long(value=self._call(context, delete))

    def ListCrawls(self, request: Any, context: Any) -> Any:
        def crawls() -> list[str]:
            for st in self.crawls.values():
                st.frontier.refresh()
            return list_crawls(self.conf)

        return pb.StringList(values=self._call(context, crawls))

    def DeleteCrawl(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.value, context)

        def delete() -> int:
            st = self.crawls.pop(crawl, None)
            if st is not None:
                st.forget()
                if crawl == DEFAULT_CRAWL:  # its file or index stays (emptied): still open
                    n = st.frontier.delete(None)
                    self.crawls[crawl] = _Crawl(crawl, st.frontier)
                    return n
                st.frontier.close()
            return delete_crawl(self.conf, crawl)

        return pb.Long(value=self._call(context, delete))

    def BlockQueueUntil(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)
        self._call(context, lambda: self._state(crawl, create=True).frontier.block_queue(
            request.key, float(request.time), self.clock()))
        return pb.Empty()

    def SetDelay(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)
        delay = request.delay_requestable

        def set_delay() -> None:
            if not request.key:
                self.default_delay = float(delay)
                return
            st = self._state(crawl, create=True)
            if delay >= 2**31:  # -1 sent as uint32: back to the default
                st.delays.pop(request.key, None)
            else:
                st.delays[request.key] = float(delay)

        self._call(context, set_delay)
        return pb.Empty()

    def SetCrawlLimit(self, request: Any, context: Any) -> Any:
        crawl = self._crawl_of(request.crawlID, context)

        def set_limit() -> bool:
            st = self._state(crawl)
            if st is not None:
                st.frontier.refresh()  # OpenSearch: a queue put a moment ago is searchable
            if st is None or not st.frontier.count_urls(request.key):
                return False
            if request.limit == 0:  # as the reference service: 0 lifts the limit
                st.limits.pop(request.key, None)
            else:
                st.limits[request.key] = int(request.limit)
            return True

        if not self._call(context, set_limit):
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"no queue {request.key!r} in crawl {crawl!r}")
        return pb.Empty()

    def SetActive(self, request: Any, context: Any) -> Any:
        self.active = request.state
        return pb.Empty()

    def GetActive(self, request: Any, context: Any) -> Any:
        return pb.Boolean(state=self.active)

    def ListNodes(self, request: Any, context: Any) -> Any:
        return pb.StringList(values=[self.address] if self.address else [])

    def SetLogLevel(self, request: Any, context: Any) -> Any:
        name = pb.LogLevelParams.Level.Name(request.level)
        logging.getLogger(request.package or "owler").setLevel(name.replace("TRACE", "DEBUG"))
        return pb.Empty()


def serve(conf: Mapping[str, Any], host: str = "127.0.0.1", port: int = 7071,
          workers: int = 64, metrics_port: int | None = None
          ) -> tuple[grpc.Server, FrontierService, int]:
    """Start the service on ``host:port`` (0: any free port), and with ``metrics_port`` its
    Prometheus ``/metrics`` on ``host:metrics_port`` (0: any free port; the port bound is
    ``service.metrics_port``); returns the started server, the service (close it after stopping
    the server) and the port bound."""
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="urlfrontier"),
                         maximum_concurrent_rpcs=None)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot listen on {host}:{port}")
    service = FrontierService(conf, address=f"{host}:{bound}")
    if metrics_port is not None:
        try:
            service.serve_metrics(host, metrics_port)
        except OSError:
            service.close()
            raise
    missing = add_service(server, service)
    server.start()
    log.info("URLFrontier service on %s:%d over %s (UNIMPLEMENTED: %s)", host, bound,
             service.frontier.location, ", ".join(missing) or "none")
    return server, service, bound
