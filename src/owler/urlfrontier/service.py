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
    are held, and its delay counts from when it last gave URLs. A blocked queue
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
    without a host, a key over 255 characters).
GetStats, ListQueues, ListURLs, CountURLs, GetURLStatus, DeleteQueue, ListCrawls, DeleteCrawl,
BlockQueueUntil, SetDelay, SetActive, GetActive, ListNodes, SetLogLevel
    as the API describes them. ``size`` counts the URLs to be fetched again some day,
    ``counts`` holds the URLs per status, ``completed`` (never to be fetched again) and, for the
    whole crawl, ``due`` (:data:`~owler.frontier.urlfrontier_api.DUE_COUNT`: due now, held or not).

One crawl: the frontier is one crawl, ``DEFAULT`` (an empty crawl ID means it). A call naming
another crawl is refused with INVALID_ARGUMENT, except DeleteCrawl (0 deleted) and GetURLs with
that crawl (nothing to give). SetCrawlLimit answers UNIMPLEMENTED.

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
from owler.constants import SERVER_DELAY_KEY, Status
from owler.frontier import FrontierError, FrontierRecord, StatusUpdate, open_frontier
from owler.frontier.feed import lease_owner
from owler.frontier.urlfrontier_api import (DEFAULT_CRAWL, DUE_COUNT, STATUS_KEY, add_service,
                                            pb)
from owler.urls import partition_key, partition_mode

log = logging.getLogger("owler.urlfrontier.service")

DEFAULT_PER_QUEUE = 100  # GetParams.max_urls_per_queue = 0
DEFAULT_QUEUES = 10_000  # GetParams.max_queues = 0
DEFAULT_HOLD = 30  # GetParams.delay_requestable = 0, seconds
PEER_TTL = 10.0  # seconds a client that asked for URLs counts as sharing the service
MAX_KEY = 255
_END = object()
OK, SKIPPED, FAIL = (pb.AckMessage.Status.Value(n) for n in ("OK", "SKIPPED", "FAIL"))


def crawl_of(crawl_id: str) -> str:
    """A crawl ID as the API normalises it: empty or blank = ``DEFAULT``."""
    return crawl_id.strip() or DEFAULT_CRAWL


def metadata_in(info: Any) -> dict[str, list[str]]:
    return {k: list(v.values) for k, v in info.metadata.items()}


def fill_metadata(info: Any, md: Mapping[str, list[str]]) -> None:
    for k, values in md.items():
        info.metadata[k].values.extend(str(v) for v in values)


def known_item(rec: FrontierRecord) -> Any:
    """A stored record as the API's ``known`` item: its status in :data:`STATUS_KEY`."""
    item = pb.URLItem(known=pb.KnownURLItem(refetchable_from_date=int(rec.next_fetch_date or 0)))
    info = item.known.info
    info.url, info.key, info.crawlID = rec.url, rec.key, DEFAULT_CRAWL
    fill_metadata(info, {**rec.metadata, STATUS_KEY: [rec.status.value]})
    return item


class FrontierService:
    """The URLFrontier service's methods (:func:`owler.frontier.urlfrontier_api.add_service`)."""

    def __init__(self, conf: Mapping[str, Any], *, address: str = "",
                 clock: Callable[[], float] = time.time) -> None:
        self.conf = conf
        self.address = address
        self.clock = clock
        self.partition_mode = partition_mode(conf)
        self.default_delay = C.get_float(conf, "urlfrontier.default.delay",
                                         C.get_float(conf, SERVER_DELAY_KEY, 1.0))
        self.rounds = C.get_bool(conf, "urlfrontier.service.rounds", True)
        self.batch = max(1, C.get_int(conf, "urlfrontier.service.batch", 500))
        self.delays: dict[str, float] = {}
        self.last_served: dict[str, float] = {}
        self.holds: dict[str, tuple[float, str]] = {}  # url -> (until, key)
        self.held: dict[str, set[str]] = {}  # key -> held urls
        self.round_owner: dict[str, str] = {}  # key -> the client (peer) its round went to
        self.handover: dict[str, tuple[str, float]] = {}  # key -> (last owner, its turn after)
        self.peers: dict[str, float] = {}  # clients asking for URLs -> when they last asked
        self.handover_secs = C.get_float(conf, "urlfrontier.service.handover", 1.5)
        self.active = True
        self.dirty = False  # written since the frontier's last refresh
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="frontier")
        # the lease owner over OpenSearch: one per service (frontier.crawler.id, else host:pid)
        owner = lease_owner(conf, "urlfrontier", address or "local")
        self.frontier = self._run(lambda: open_frontier(conf, owner=owner))

    # -- plumbing ---------------------------------------------------------------------------------
    def _run(self, fn: Callable[[], Any]) -> Any:
        """``fn`` on the frontier's thread (every access to the frontier and the holds)."""
        return self._thread.submit(fn).result()

    def _call(self, context: Any, fn: Callable[[], Any]) -> Any:
        try:
            return self._run(fn)
        except FrontierError as exc:
            log.error("frontier: %s", exc)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"frontier: {exc}")

    def _one_crawl(self, crawl_id: str, context: Any) -> None:
        crawl = crawl_of(crawl_id)
        if crawl != DEFAULT_CRAWL:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"this frontier holds one crawl, {DEFAULT_CRAWL!r}; not {crawl!r}")

    def _fresh(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` once every write so far is visible to it (OpenSearch: a refresh)."""
        self.frontier.refresh()
        return fn(*args)

    def close(self) -> None:
        def close() -> None:
            if getattr(self.frontier, "leases_queues", False):
                self.frontier.release_all(self.clock())
            self.frontier.close()
        self._run(close)
        self._thread.shutdown()

    # -- holds (frontier thread) ----------------------------------------------------------------
    def _release(self, urls: Iterable[str], now: float) -> None:
        for url in urls:
            entry = self.holds.pop(url, None)
            if entry is None:
                continue
            key = entry[1]
            left = self.held.get(key)
            if left is not None:
                left.discard(url)
                if not left:
                    del self.held[key]
                    if self.rounds:  # the queue's delay counts from the end of its round
                        self.last_served[key] = now
                        owner = self.round_owner.pop(key, None)
                        if owner is not None:  # the others' turn first (_take)
                            self.handover[key] = (owner,
                                                  now + self._delay(key) + self.handover_secs)
                    if self.frontier.leases_queues:
                        self.frontier.release(key, now)

    def _expire(self, now: float) -> None:
        if self.holds:
            self._release([u for u, (until, _) in self.holds.items() if until <= now], now)

    def _delay(self, key: str) -> float:
        return self.delays.get(key, self.default_delay)

    def _take(self, key: str | None, max_queues: int, per_queue: int, hold: float,
              peer: str = "") -> list[tuple[str, dict, str]]:
        now = self.clock()
        self._expire(now)
        self.last_served = {k: t for k, t in self.last_served.items() if t + self._delay(k) > now}
        skip = set(self.last_served)
        # handover: while other clients are asking too, a queue whose round just ended goes to
        # one of them first (else the client that polls most often keeps every queue)
        self.peers[peer] = now
        if len(self.peers) > 1:
            self.peers = {p: t for p, t in self.peers.items() if now - t < PEER_TTL}
        self.handover = {k: h for k, h in self.handover.items() if h[1] > now}
        if len(self.peers) > 1:
            skip.update(k for k, (owner, _) in self.handover.items() if owner == peer)
        skip.update(k for k, urls in self.held.items() if self.rounds or len(urls) >= per_queue)
        if key is not None and key in skip:
            return []
        if self.dirty:  # OpenSearch: the updates so far searchable, or they would look due
            self.frontier.refresh()
            self.dirty = False
        # without rounds a queue may give more while some of its URLs are held: ask for as many
        # more as are held, the held ones are skipped (exclude)
        extra = 0 if self.rounds else max((len(v) for v in self.held.values()), default=0)
        per_bucket = min(per_queue + extra, getattr(self.frontier, "max_per_bucket", 1 << 30))
        rows = self.frontier.due(now, max_queues, per_bucket, exclude=self.holds.keys(), key=key,
                                 skip_keys=skip)
        out = []
        served: set[str] = set()
        for url, md, k in rows:
            if k in skip or url in self.holds or (k not in served and len(served) >= max_queues):
                continue
            urls = self.held.setdefault(k, set())
            if len(urls) >= per_queue:
                continue
            urls.add(url)
            self.holds[url] = (now + hold, k)
            served.add(k)
            self.round_owner[k] = peer
            out.append((url, md, k))
        if not self.rounds:
            for k in served:
                self.last_served[k] = now
        if self.frontier.leases_queues:  # leased by due() and nothing given out: back at once
            for k in [k for k in self.frontier.leases if k not in self.held]:
                self.frontier.release(k, now, served=False)
        return out

    def _put(self, items: list[Any]) -> list[tuple[str, int]]:
        now = self.clock()
        acks: list[tuple[str, int]] = []
        updates: list[StatusUpdate] = []
        positions: list[int] = []
        for item in items:
            kind = item.WhichOneof("item")
            info = item.discovered.info if kind == "discovered" else item.known.info
            acks.append((item.ID or info.url, OK))
            key = info.key
            if not key:
                try:
                    key = partition_key(info.url, self.partition_mode)
                except ValueError:
                    key = ""
            if kind is None or not info.url or not key or len(key) > MAX_KEY:
                acks[-1] = (acks[-1][0], SKIPPED)
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
                update = StatusUpdate(info.url, status, md, float(due) if due else None, key)
            updates.append(update)
            positions.append(len(acks) - 1)
        if updates:
            self.dirty = True
            try:
                failed = set(self.frontier.apply_updates(updates))
            except FrontierError as exc:
                log.error("PutURLs: a batch of %d could not be written: %s", len(updates), exc)
                failed = set(range(len(updates)))
            for i, pos in enumerate(positions):
                if i in failed:
                    acks[pos] = (acks[pos][0], FAIL)
            # a URL's status written ends its hold; a DISCOVERED (an outlink to a URL being
            # fetched) changes nothing of a known URL and ends nothing
            written = [u.url for i, u in enumerate(updates)
                       if i not in failed and u.status is not Status.DISCOVERED]
            # OpenSearch: a write is searchable only after the index's refresh; till then the
            # URL would look due still, so its hold lasts until then (the frontier's min_hold)
            visible_in = float(getattr(self.frontier, "min_hold", 0.0))
            if visible_in:
                for url in written:
                    if url in self.holds:
                        self.holds[url] = (now + visible_in, self.holds[url][1])
            else:
                self._release(written, now)
        return acks

    # -- the API ----------------------------------------------------------------------------------
    def GetURLs(self, request: Any, context: Any) -> Iterator[Any]:
        if request.WhichOneof("item") == "crawlID" and crawl_of(request.crawlID) != DEFAULT_CRAWL:
            return
        if not self.active:
            return
        peer = context.peer() or ""
        rows = self._call(context, lambda: self._take(
            request.key or None, request.max_queues or DEFAULT_QUEUES,
            request.max_urls_per_queue or DEFAULT_PER_QUEUE,
            request.delay_requestable or DEFAULT_HOLD, peer))
        for url, md, key in rows:
            info = pb.URLInfo(url=url, key=key, crawlID=DEFAULT_CRAWL)
            fill_metadata(info, md)
            yield info

    def PutURLs(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        for items in self._batches(request_iterator, context):
            for item in items:
                kind = item.WhichOneof("item")
                if kind is not None:
                    crawl = getattr(item, kind).info.crawlID
                    self._one_crawl(crawl, context)
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
        self._one_crawl(request.crawlID, context)
        key = request.key or None

        def stats() -> Any:
            f = self.frontier
            f.refresh()  # OpenSearch: every write so far counted
            self._expire(self.clock())
            out = pb.Stats(crawlID=DEFAULT_CRAWL)
            out.size = f.count_urls(key, active=True)
            completed = f.count_urls(key, active=False)
            if key is None:
                out.inProcess = len(self.holds)
                out.numberOfQueues = f.queue_count()
                out.counts.update(f.counts())
                out.counts[DUE_COUNT] = f.due_count(self.clock())
            else:
                out.inProcess = len(self.held.get(key, ()))
                out.numberOfQueues = 1 if out.size or completed else 0
            out.counts["completed"] = completed
            return out

        return self._call(context, stats)

    def ListQueues(self, request: Any, context: Any) -> Any:
        self._one_crawl(request.crawlID, context)
        size = request.size or 100

        def listing() -> Any:
            self.frontier.refresh()
            keys = self.frontier.list_queues(request.start, size, self.clock(),
                                             request.include_inactive)
            return pb.QueueList(values=keys, start=request.start, size=len(keys),
                                total=self.frontier.queue_count(), crawlID=DEFAULT_CRAWL)

        return self._call(context, listing)

    def ListURLs(self, request: Any, context: Any) -> Iterator[Any]:
        self._one_crawl(request.crawlID, context)
        text = request.filter if request.HasField("filter") else None
        ignore = request.ignoreCase if request.HasField("ignoreCase") else False
        records = self._call(context, lambda: self._fresh(
            self.frontier.list_urls, request.key or None, request.start, request.size or 100,
            text, ignore))
        for rec in records:
            yield known_item(rec)

    def CountURLs(self, request: Any, context: Any) -> Any:
        self._one_crawl(request.crawlID, context)
        text = request.filter if request.HasField("filter") else None
        ignore = request.ignoreCase if request.HasField("ignoreCase") else False
        return pb.Long(value=self._call(context, lambda: self._fresh(
            self.frontier.count_urls, request.key or None, text, ignore)))

    def GetURLStatus(self, request: Any, context: Any) -> Any:
        self._one_crawl(request.crawlID, context)
        rec = self._call(context, lambda: self.frontier.get(request.url))
        if rec is None or (request.key and request.key != rec.key):
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown URL {request.url!r}")
        return known_item(rec)

    def DeleteQueue(self, request: Any, context: Any) -> Any:
        self._one_crawl(request.crawlID, context)

        def delete() -> int:
            n = self.frontier.delete(request.key)
            self._release(list(self.held.get(request.key, ())), self.clock())
            self.last_served.pop(request.key, None)
            return n

        return pb.Long(value=self._call(context, delete))

    def ListCrawls(self, request: Any, context: Any) -> Any:
        n = self._call(context, lambda: self._fresh(self.frontier.count_urls))
        return pb.StringList(values=[DEFAULT_CRAWL] if n else [])

    def DeleteCrawl(self, request: Any, context: Any) -> Any:
        if crawl_of(request.value) != DEFAULT_CRAWL:
            return pb.Long(value=0)

        def delete() -> int:
            n = self.frontier.delete(None)
            self.holds.clear()
            self.held.clear()
            self.last_served.clear()
            self.delays.clear()
            self.round_owner.clear()
            self.handover.clear()
            return n

        return pb.Long(value=self._call(context, delete))

    def BlockQueueUntil(self, request: Any, context: Any) -> Any:
        self._one_crawl(request.crawlID, context)
        self._call(context, lambda: self.frontier.block_queue(request.key, float(request.time),
                                                               self.clock()))
        return pb.Empty()

    def SetDelay(self, request: Any, context: Any) -> Any:
        delay = request.delay_requestable

        def set_delay() -> None:
            if not request.key:
                self.default_delay = float(delay)
            elif delay >= 2**31:  # -1 sent as uint32: back to the default
                self.delays.pop(request.key, None)
            else:
                self.delays[request.key] = float(delay)

        self._run(set_delay)
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
          workers: int = 64) -> tuple[grpc.Server, FrontierService, int]:
    """Start the service on ``host:port`` (0: any free port); returns the started server, the
    service (close it after stopping the server) and the port bound."""
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="urlfrontier"),
                         maximum_concurrent_rpcs=None)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot listen on {host}:{port}")
    service = FrontierService(conf, address=f"{host}:{bound}")
    missing = add_service(server, service)
    server.start()
    log.info("URLFrontier service on %s:%d over %s (UNIMPLEMENTED: %s)", host, bound,
             service.frontier.location, ", ".join(missing) or "none")
    return server, service, bound
