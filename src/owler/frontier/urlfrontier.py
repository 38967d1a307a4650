"""``frontier.backend: urlfrontier``: the project's frontier protocol
(:class:`owler.frontier.Frontier`) over one or more URLFrontier services, so that every topology,
``owler inject`` and ``owler status`` use any URLFrontier service as their frontier.

Config keys (StormCrawler's names): ``urlfrontier.address`` (``host:port``, or a list of them for
a cluster of services; else ``urlfrontier.host`` / ``urlfrontier.port``, default
``localhost:7071``), ``urlfrontier.crawlid`` (the crawl; unset: the spout takes any crawl's URLs,
each URL of a crawl other than ``DEFAULT`` carries its crawl in metadata
:data:`~owler.constants.CRAWL_ID`, which its outlinks inherit, and every update, block and delay
goes to the crawl its metadata names), ``urlfrontier.delay.requestable`` (seconds a URL given to the
spout stays held by the service; default ``topology.message.timeout.secs``, so a URL in flight is
never given to another task), ``urlfrontier.timeout`` (seconds a call may take, 60).

- :meth:`URLFrontierClient.due` is GetURLs (max queues, max URLs per queue, delay requestable,
  crawl), asking each service in turn when there are several.
- :meth:`URLFrontierClient.apply_updates` is one PutURLs stream per service: DISCOVERED as a
  ``discovered`` item, any other status as a ``known`` one due at its next fetch date (0: never)
  with the status in metadata :data:`~owler.frontier.urlfrontier_api.STATUS_KEY`; it returns once every
  item is acked, the positions acked FAIL or not acked at all as failed. A URL goes to the
  service its queue hashes to, so a queue lives on one service. A status update's
  ``block_until`` (a server's Retry-After) is a BlockQueueUntil, its ``crawl_delay`` (the
  robots.txt Crawl-delay the fetcher met) a SetDelay of the queue when it changed.

What the API cannot say: a service other than this project's gives no counts per status
(:meth:`counts` then says so), no due count (``due_count`` is then the number of URLs still to fetch)
and no shared counters (:meth:`charge` with a limit raises: the sitemap host budget needs the
SQLite or OpenSearch frontier). Nor can a client ask for an interest (tags): a configuration with
``frontier.interest.*`` is refused here, the interest belongs to the service (``owler frontier
serve --interest "+Sitemap -risk:adult"``), and ``frontier.queue.round.delay`` is the service's
too (its own configuration).
"""

from __future__ import annotations

import logging
import zlib
from typing import Any, Container, Iterable, Iterator, Mapping

import grpc

from owler import conf as C
from owler.constants import (CRAWL_ID, MESSAGE_TIMEOUT_KEY, ROUND_DELAY_KEY, STATUS_NAMES,
                             Status)
from owler.frontier import (DEFAULT_KEY, TAG_PRIORITY_KEY, FrontierError, FrontierRecord,
                            Interest, StatusUpdate, seed_key)
from owler.frontier.crawls import URLFRONTIER_CRAWL_KEY
from owler.frontier.urlfrontier_api import DEFAULT_CRAWL, DUE_COUNT, STATUS_KEY, Stub, pb
from owler.urls import partition_key, partition_mode

log = logging.getLogger("owler.frontier.urlfrontier")

ADDRESS_KEY = "urlfrontier.address"
DEFAULT_PORT = 7071
_OK, _SKIPPED, _FAIL = (pb.AckMessage.Status.Value(n) for n in ("OK", "SKIPPED", "FAIL"))


def addresses(conf: Mapping[str, Any]) -> list[str]:
    """``urlfrontier.address`` as a sorted list of ``host:port`` (StormCrawler sorts them too, so
    every task maps a queue to the same service)."""
    raw = conf.get(ADDRESS_KEY)
    if isinstance(raw, str):
        raw = [a for a in raw.replace(",", " ").split() if a]
    if not raw:
        raw = [f"{C.get_str(conf, 'urlfrontier.host', 'localhost')}:"
               f"{C.get_int(conf, 'urlfrontier.port', DEFAULT_PORT)}"]
    out = []
    for a in raw:
        a = str(a).strip()
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit():
            a = f"{a}:{DEFAULT_PORT}"
        out.append(a)
    return sorted(out)


def list_crawls(conf: Mapping[str, Any]) -> list[str]:
    """The crawls the services hold (ListCrawls of each), ``DEFAULT`` first."""
    found: set[str] = set()
    for address in addresses(conf):
        with grpc.insecure_channel(address) as channel:
            try:
                found.update(Stub(channel).ListCrawls(pb.Local(), timeout=C.get_float(
                    conf, "urlfrontier.timeout", 60.0)).values)
            except grpc.RpcError as exc:
                raise FrontierError(f"URLFrontier ListCrawls at {address}: {exc.code().name}: "
                                    f"{exc.details()}") from exc
    return sorted(found, key=lambda c: (c != DEFAULT_CRAWL, c))


def delete_crawl(conf: Mapping[str, Any], crawl: str) -> int:
    """DeleteCrawl on every service; the URLs deleted."""
    n = 0
    for address in addresses(conf):
        with grpc.insecure_channel(address) as channel:
            try:
                n += Stub(channel).DeleteCrawl(pb.DeleteCrawlMessage(value=crawl), timeout=
                                               C.get_float(conf, "urlfrontier.timeout", 60.0)).value
            except grpc.RpcError as exc:
                raise FrontierError(f"URLFrontier DeleteCrawl at {address}: {exc.code().name}: "
                                    f"{exc.details()}") from exc
    return n


def _record(item: Any) -> FrontierRecord:
    kind = item.WhichOneof("item")
    info = getattr(item, kind).info
    md = {k: list(v.values) for k, v in info.metadata.items()}
    names = md.pop(STATUS_KEY, None) or ()
    status = next((Status(n) for n in names if n in STATUS_NAMES), None)
    if kind == "discovered":
        return FrontierRecord(info.url, status or Status.DISCOVERED, None, info.key, md, 0.0)
    due = item.known.refetchable_from_date
    return FrontierRecord(info.url, status or Status.FETCHED, float(due) if due else None,
                          info.key, md, 0.0)


class URLFrontierClient:
    """:class:`owler.frontier.Frontier` over URLFrontier services (module docstring)."""

    leases_queues = False  # the service holds what it gave out (delay_requestable)
    hands_out_once = True  # no two spout tasks get the same URL: no sharding by key

    def __init__(self, conf: Mapping[str, Any] | None = None, owner: str | None = None,
                 crawl: str | None = None) -> None:
        conf = conf or {}
        want = Interest.from_conf(conf)
        if want:  # GetURLs has no field for it: the service is started with its interest
            raise C.ConfError(
                f"frontier.interest ({want.text()}): a URLFrontier service serves no tags to a "
                "client that asks for them, the API cannot pass an interest. The interest belongs "
                f"to the service: owler frontier serve --interest \"{want.text()}\" (or use "
                "frontier.backend sqlite or opensearch)")
        if conf.get(TAG_PRIORITY_KEY):
            raise C.ConfError(f"{TAG_PRIORITY_KEY}: a URLFrontier service keeps no tags; "
                              "use frontier.backend sqlite or opensearch")
        if C.get_float(conf, ROUND_DELAY_KEY, 0.0) > 0:  # e.g. resources/owler-rounds.yaml
            log.warning("%s is the URLFrontier service's to keep, not its client's: start the "
                        "service with it (owler frontier serve --conf ...)", ROUND_DELAY_KEY)
        self.addresses = addresses(conf)
        # "": none named (the spout takes any crawl's URLs, updates go to the crawl each names)
        self.crawl = crawl if crawl is not None else (C.get_str(conf, URLFRONTIER_CRAWL_KEY, "") or "")
        self.hold = (C.get_int(conf, "urlfrontier.delay.requestable", 0)
                     or C.get_int(conf, MESSAGE_TIMEOUT_KEY, 120))
        self.timeout = C.get_float(conf, "urlfrontier.timeout", 60.0)
        self.partition_mode = partition_mode(conf)
        self.channels = [grpc.insecure_channel(a) for a in self.addresses]
        self.stubs = [Stub(c) for c in self.channels]
        self._next = 0  # the service due() asks first
        self._delays: dict[str, float] = {}  # queue -> crawl delay the service was told
        try:  # fail now, with the address, rather than at the first query
            for address, channel in zip(self.addresses, self.channels):
                grpc.channel_ready_future(channel).result(timeout=min(self.timeout, 10.0))
        except grpc.FutureTimeoutError:
            self.close()
            raise FrontierError(f"cannot reach the URLFrontier service at {address}") from None

    @property
    def location(self) -> str:
        return "URLFrontier service " + ", ".join(self.addresses)

    def _fail(self, what: str, i: int, exc: grpc.RpcError) -> FrontierError:
        return FrontierError(f"URLFrontier {what} at {self.addresses[i]}: {exc.code().name}: "
                             f"{exc.details()}")

    def _service(self, key: str) -> int:
        return zlib.crc32(key.encode("utf-8", "surrogatepass")) % len(self.stubs)

    # -- the spout -------------------------------------------------------------------------------
    def due(self, now: float, max_buckets: int, per_bucket: int, exclude: Container[str] = (),
            key: str | None = None) -> list[tuple[str, dict[str, list[str]], str]]:
        """GetURLs from the services in turn until one gives URLs. (``now`` is the service's.)"""
        if max_buckets <= 0 or per_bucket <= 0:
            return []
        params = pb.GetParams(max_urls_per_queue=per_bucket, max_queues=max_buckets,
                              delay_requestable=self.hold, key=key or "")
        if self.crawl:
            params.crawlID = self.crawl
        else:
            params.anyCrawlID.SetInParent()
        n = len(self.stubs)
        for step in range(n):
            i = (self._next + step) % n
            try:
                rows = [(u.url, self._metadata(u), u.key)
                        for u in self.stubs[i].GetURLs(params, timeout=self.timeout)
                        if u.url not in exclude]
            except grpc.RpcError as exc:
                raise self._fail("GetURLs", i, exc) from exc
            if rows:
                self._next = (i + 1) % n
                return rows
        return []

    def _metadata(self, info: Any) -> dict[str, list[str]]:
        """A served URL's metadata; its crawl under :data:`CRAWL_ID` when this client serves any
        crawl and the URL is not of ``DEFAULT`` (module docstring)."""
        md = {k: list(v.values) for k, v in info.metadata.items() if k != STATUS_KEY}
        if not self.crawl:
            md.pop(CRAWL_ID, None)
            if info.crawlID and info.crawlID != DEFAULT_CRAWL:
                md[CRAWL_ID] = [info.crawlID]
        return md

    def _crawl_of(self, md: Mapping[str, list[str]] | None) -> str:
        """The crawl an update is written to: the client's own, else the one its URL came from."""
        if self.crawl:
            return self.crawl
        named = (md or {}).get(CRAWL_ID)
        return str(named[0]) if named else DEFAULT_CRAWL

    # -- writes ----------------------------------------------------------------------------------
    def _item(self, u: StatusUpdate, item_id: str) -> Any:
        info = pb.URLInfo(url=u.url, key=u.key, crawlID=self._crawl_of(u.metadata))
        for k, values in u.metadata.items():
            if k != STATUS_KEY and k != CRAWL_ID:
                info.metadata[k].values.extend(str(v) for v in values)
        if u.status is Status.DISCOVERED:
            return pb.URLItem(ID=item_id, discovered=pb.DiscoveredURLItem(info=info))
        info.metadata[STATUS_KEY].values.append(u.status.value)
        due = 0 if u.next_fetch_date is None else max(1, int(u.next_fetch_date))
        return pb.URLItem(ID=item_id, known=pb.KnownURLItem(info=info, refetchable_from_date=due))

    def _put(self, updates: list[StatusUpdate]) -> list[int | None]:
        """PutURLs of ``updates``, each to the service of its queue: the ack status of each
        position (``None``: not acked); :class:`FrontierError` when a service cannot be reached."""
        per_service: dict[int, list[Any]] = {}
        for pos, u in enumerate(updates):
            per_service.setdefault(self._service(u.key), []).append(self._item(u, str(pos)))
        out: list[int | None] = [None] * len(updates)
        for i, items in per_service.items():
            try:
                for ack in self.stubs[i].PutURLs(iter(items), timeout=self.timeout):
                    if ack.ID.isdigit() and int(ack.ID) < len(out):
                        out[int(ack.ID)] = ack.status
            except grpc.RpcError as exc:
                raise self._fail("PutURLs", i, exc) from exc
        return out

    def apply_updates(self, updates: Iterable[StatusUpdate]) -> list[int]:
        """PutURLs; returns the positions acked FAIL or not acked; raises :class:`FrontierError`
        when a service cannot be reached (nothing of the batch may be assumed written)."""
        updates = list(updates)
        acks = self._put(updates)
        failed = []
        for pos, (u, status) in enumerate(zip(updates, acks)):
            if status is None or status == _FAIL:
                failed.append(pos)
            elif status == _SKIPPED:
                log.warning("URLFrontier skipped %s", u.url)
        blocks: dict[tuple[str, str], float] = {}  # (crawl, queue) -> until
        delays: dict[tuple[str, str], float] = {}
        for u in updates:
            if u.block_until is None and u.crawl_delay is None:
                continue
            queue = (self._crawl_of(u.metadata), u.key)
            if u.block_until is not None:
                blocks[queue] = max(u.block_until, blocks.get(queue, 0.0))
            if u.crawl_delay is not None and self._delays.get(queue) != u.crawl_delay:
                delays[queue] = u.crawl_delay
        for (crawl, key), until in blocks.items():
            self.block_queue(key, until, crawl=crawl)
        for queue, delay in delays.items():
            self.set_delay(queue[1], delay, crawl=queue[0])
            if len(self._delays) >= 100_000:  # hosts seen once: forget them, told again if met
                self._delays.clear()
            self._delays[queue] = delay
        return failed

    def inject(self, seeds: Iterable[tuple[str, Mapping[str, list[str]]]], now: float) -> int:
        """Seeds as ``discovered`` items (normalised, keyed by ``partition.url.mode``); how many
        were acked OK (a service that knows a URL acks it SKIPPED)."""
        updates = []
        for url, md in seeds:
            norm, key = seed_key(url, self.partition_mode)
            updates.append(StatusUpdate(norm, Status.DISCOVERED, dict(md or {}), now, key))
        acks = self._put(updates)
        bad = sum(1 for status in acks if status is None or status == _FAIL)
        if bad:
            raise FrontierError(f"{self.location}: {bad} seed(s) not stored")
        return sum(1 for status in acks if status == _OK)

    def block_queue(self, key: str, until: float, now: float | None = None,
                    crawl: str | None = None) -> None:
        """BlockQueueUntil on the service of ``key`` (in ``crawl``, else the client's)."""
        i = self._service(key)
        try:
            self.stubs[i].BlockQueueUntil(pb.BlockQueueParams(
                key=key, time=max(0, int(until)), crawlID=crawl or self.crawl or DEFAULT_CRAWL),
                timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._fail("BlockQueueUntil", i, exc) from exc

    def set_delay(self, key: str, seconds: float, crawl: str | None = None) -> None:
        """SetDelay: at least ``seconds`` between two servings of queue ``key`` (in ``crawl``,
        else the client's)."""
        i = self._service(key)
        try:
            self.stubs[i].SetDelay(pb.QueueDelayParams(
                key=key, delay_requestable=max(0, int(round(seconds))),
                crawlID=crawl or self.crawl or DEFAULT_CRAWL), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._fail("SetDelay", i, exc) from exc

    def charge(self, counter: str, n: int, limit: int, now: float, period: float) -> int:
        if limit < 0:
            return n
        raise FrontierError(f"{self.location} keeps no shared counters ({counter!r}); a host "
                            "budget needs frontier.backend sqlite or opensearch")

    # -- statistics ------------------------------------------------------------------------------
    def _stats(self, key: str = "") -> list[Any]:
        out = []
        for i, stub in enumerate(self.stubs):
            try:
                out.append(stub.GetStats(pb.QueueWithinCrawlParams(
                    key=key, crawlID=self.crawl or DEFAULT_CRAWL), timeout=self.timeout))
            except grpc.RpcError as exc:
                raise self._fail("GetStats", i, exc) from exc
        return out

    def counts(self) -> dict[str, int]:
        """URLs per status, from the services' ``counts`` (this project's service gives them);
        :class:`FrontierError` for a service that does not."""
        out = {name: 0 for name in STATUS_NAMES}
        for i, stats in enumerate(self._stats()):
            if not any(name in stats.counts for name in STATUS_NAMES):
                raise FrontierError(f"the URLFrontier service at {self.addresses[i]} gives no "
                                    f"counts per status: {stats.size} URLs to fetch, "
                                    f"{stats.counts.get('completed', 0)} done for good")
            for name in STATUS_NAMES:
                out[name] += int(stats.counts.get(name, 0))
        return out

    def due_count(self, now: float) -> int:
        """The URLs due now, as this project's service says in GetStats' ``counts``; from
        another service, the URLs still to fetch some day (the API has no due count)."""
        return sum(int(s.counts[DUE_COUNT]) if DUE_COUNT in s.counts else int(s.size)
                   for s in self._stats())

    def queue_count(self, now: float | None = None) -> int:
        return sum(int(s.numberOfQueues) for s in self._stats())

    def keys(self, page: int = 1000) -> Iterator[str]:
        """Every queue of the crawl on every service (ListQueues with inactive queues, paged by
        ``start``): for a take-down, which looks for the queues of a site's subdomains."""
        for i, stub in enumerate(self.stubs):
            start = 0
            while True:
                try:
                    got = stub.ListQueues(pb.Pagination(start=start, size=page,
                                                        include_inactive=True,
                                                        crawlID=self.crawl or DEFAULT_CRAWL),
                                          timeout=self.timeout).values
                except grpc.RpcError as exc:
                    raise self._fail("ListQueues", i, exc) from exc
                yield from got
                if len(got) < page:
                    break
                start += len(got)

    def top_hosts(self, n: int = 10) -> list[tuple[str, int]]:
        """The largest of the first 1,000 queues (by name) of each service."""
        sizes = []
        for i, stub in enumerate(self.stubs):
            try:
                keys = stub.ListQueues(pb.Pagination(size=1000, include_inactive=True,
                                                     crawlID=self.crawl or DEFAULT_CRAWL),
                                       timeout=self.timeout).values
                for key in keys:
                    c = stub.CountURLs(pb.CountUrlParams(key=key,
                                                         crawlID=self.crawl or DEFAULT_CRAWL),
                                       timeout=self.timeout)
                    sizes.append((key, int(c.value)))
            except grpc.RpcError as exc:
                raise self._fail("ListQueues", i, exc) from exc
        return sorted(sizes, key=lambda kc: (-kc[1], kc[0]))[:n]

    def get(self, url: str) -> FrontierRecord | None:
        try:
            key = partition_key(url, self.partition_mode)
        except ValueError:
            key = DEFAULT_KEY
        i = self._service(key)
        try:
            item = self.stubs[i].GetURLStatus(pb.URLStatusRequest(
                url=url, key=key, crawlID=self.crawl or DEFAULT_CRAWL), timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise self._fail("GetURLStatus", i, exc) from exc
        return _record(item)

    # -- nothing to do here: the service holds, the API has no leases or refresh -------------------
    def release(self, key: str, now: float, served: bool = True, defer: bool = False
                ) -> None:
        pass

    def release_all(self, now: float) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        for channel in self.channels:
            channel.close()
        self.channels = []

    def __enter__(self) -> "URLFrontierClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
