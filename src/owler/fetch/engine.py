"""The fetch engine behind the fetcher bolt (StormCrawler's FetcherBolt), without Storm.

URLs are queued per partition key (:class:`owler.fetch.politeness.FetchQueues`), or by
``fetcher.queue.mode`` (``byHost``, ``byDomain``, ``byIP``) when it is set and differs from
``partition.url.mode``; an asyncio loop in a background thread takes the next URL whose queue is
ready and, for each, asks :class:`owler.fetch.robots.RobotsSource` for its host's robots.txt rules
(Crawl-delay applied to the queue), lets :class:`owler.fetch.discovery.SitemapDiscovery` note the
host's sitemaps, fetches it with :class:`owler.fetch.http.HttpFetcher` and hands an
:class:`Outcome` to a callback (the bolt emits and acks from there).

Outcomes, with StormCrawler's semantics:

- HTTP 2xx → ``kind="page"``: the content is archived (the fetcher's archiver), then goes on to
  the parser; a URL fetched before is asked conditionally and a ``304`` is a page too, archived
  as a revisit record, as is a ``200`` whose payload is the last capture's
  (:mod:`owler.fetch.revisit`); a ``304`` to a request that was not conditional is
  ``FETCH_ERROR`` ``unsolicited_304``;
- 3xx → ``REDIRECTION`` with ``_redirTo`` and the target as an outlink (``redirections.allowed``),
  unless ``http.allow.redirects.max`` (5) redirects led to the URL already (``redirect.hops``):
  a chain of redirects to ever new URLs ends there;
- 429/503 (``fetcher.backoff.status.codes``) → ``FETCH_ERROR``, the whole queue held for the
  server's Retry-After or a growing back-off (:class:`owler.fetch.politeness.Backoff`): the URL is
  retried when the hold ends (``scheduler.delay.mins``), the frontier blocks the queue until then
  (``_queue.block.until``), and for a hold over ``fetcher.max.throttle.sleep`` the queue's URLs
  waiting here go back to the frontier (outcome ``held``: the bolt fails their tuples);
- 4xx/5xx → ``FETCH_ERROR`` with ``fetch.statusCode``; network failures → ``FETCH_ERROR`` with
  ``fetch.exception`` and ``error.cause`` (timeout, dns, connection_refused, …);
- a URL the caller's ``refuse`` names a cause for (the bolt: a blacklist or a take-down that
  lists it by now, :meth:`owler.blacklist.Blacklist.refusal`) → ``ERROR`` with that cause,
  checked just before the fetch, so an opt-out or a take-down stops the URLs already queued here
  too;
- robots.txt denial → ``ERROR`` with ``error.cause=robots.txt``; a Crawl-delay above
  ``fetcher.max.crawl.delay`` → ``ERROR`` with ``error.cause=crawl_delay`` (or capped when
  ``fetcher.max.crawl.delay.force``); a refused private address → ``ERROR`` with
  ``error.cause=private_address``; an unparsable URL → ``ERROR`` with ``error.cause=malformed URL``;
- the webmasters' signals on the uses of content (:mod:`owler.signals`): those of the host,
  known before the request (robots.txt's Content-Usage and Content-Signal, the host's
  ``/.well-known/tdmrep.json``: :class:`owler.fetch.tdmrep.TdmRepSource`, asked once per host
  and cache period as robots.txt is), refusing a purpose of the crawl (``signals.purposes``)
  with ``signals.refused.action: skip`` → ``ERROR`` with ``error.cause=signals`` and the
  refusal in ``signals.<purpose>``, no request; a 429/503 to the tdmrep.json request →
  ``FETCH_ERROR`` ``throttled``, the queue held as for the page's own. A page carries what those
  and its response's say (headers: Content-Usage, X-Robots-Tag noai, tdm-reservation; the
  ``<meta>`` of an HTML head, read from the bytes here: :mod:`owler.signals.head`) in
  ``signals.*``, and the whole record for the WARC metadata record beside its response
  (``_raw.signals``). When they refuse a purpose of the crawl under ``strip`` (or ``skip``,
  told by the response itself) the page's content is withheld (:meth:`FetchEngine._withhold`):
  its WARC response record keeps the HTTP head only, the parser gets no content,
  ``signals.withheld`` names the purpose.

Sitemaps (:mod:`owler.fetch.discovery`): with ``sitemap.discovery`` (or metadata
``sitemap.discovery=true``), the first URL processed after its host's robots.txt was fetched
carries the host's sitemap URLs in ``FetchItem.sitemaps`` and ``foundSitemap=true|false`` (the
bolt emits them, filtered, as DISCOVERED ``isSitemap=true``). A seed of the sitemap pipeline
(metadata ``sitemap.seed=true``) is not fetched: its host's sitemaps are looked up the same way
(robots.txt from the cache or fetched) and the seed comes back as a DISCOVERED status with
``sitemap.seeded`` and ``scheduler.delay.mins`` = ``sitemap.seed.interval`` (or the robots error
TTL when robots.txt could not be read): when to look again.

Pages built by scripts (:mod:`owler.fetch.browser`, issue 48): a page that
``protocol.delegator.config`` routes to the browser (by metadata such as ``fetch.with=browser``,
by URL patterns) is fetched as any other, then rendered from that response in headless Chromium;
the rendered DOM rides with the page as ``_raw.rendered`` (archived as a ``conversion`` record,
parsed instead of the raw HTML), how the render ended in ``browser.*``.

Config keys: ``fetcher.threads.number``, ``fetcher.max.crawl.delay``,
``fetcher.max.crawl.delay.force``, ``fetcher.timeout.queue``, ``fetcher.queue.mode``,
``fetcher.politeness.file`` (per-site delays, :class:`owler.fetch.politeness.DelayOverrides`),
``redirections.allowed``, ``http.allow.redirects.max``, ``fetcher.max.throttle.sleep``,
``http.store.headers``, ``protocol.md.prefix``, ``signals.purposes``,
``signals.refused.action``, ``signals.meta.scan.bytes``, and those of
:mod:`owler.fetch.http`, :mod:`owler.fetch.politeness`, :mod:`owler.fetch.robots`,
:mod:`owler.fetch.tdmrep`, :mod:`owler.fetch.discovery` and :mod:`owler.fetch.browser`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from owler import conf as C
from owler import signals, wire
from owler.constants import (DELAY_MINS, ERROR_CAUSE, FETCH_EXCEPTION, FETCH_STATUS_CODE,
                             FETCHER_THREADS_KEY, MD_PREFIX_KEY, QUEUE_BLOCK_UNTIL,
                             QUEUE_CRAWL_DELAY,
                             QUEUE_TIMEOUT_KEY, REDIRECT_HOPS, REDIRECT_TO, REDIRECTIONS_KEY,
                             STORE_HEADERS_KEY, Status)
from owler.fetch.browser import BrowserFetcher, Router, render_page
from owler.fetch.browser import check_conf as check_browser_conf
from owler.fetch.discovery import SitemapDiscovery
from owler.fetch.http import FetchResult, HttpFetcher, redirect_target
from owler.fetch.http import check_conf as check_http_conf
from owler.fetch.politeness import Backoff, DelayOverrides, FetchQueues
from owler.fetch.revisit import Revisits
from owler.fetch.robots import RobotsSource, agents_from_conf
from owler.fetch.tdmrep import TdmRepSource
from owler.metadata import copy as md_copy
from owler.metadata import set_value
from owler.signals.head import HEAD_LIMIT, SCAN_BYTES_KEY, is_html, meta_statements
from owler.signals.sources import from_headers, from_robots
from owler.urls import PARTITION_MODES, partition_key, partition_mode

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FetchItem:
    url: str
    key: str
    metadata: dict
    token: Any = None  # the caller's handle (the Storm tuple)
    queued_at: float = 0.0
    sitemaps: list | None = None  # sitemap URLs found for the host (discovery, seeds)


@dataclass(slots=True)
class Outcome:
    item: FetchItem
    kind: str  # "page" | "status" | "expired" | "held"
    metadata: dict
    status: Status | None = None
    content: bytes = b""
    outlinks: list = field(default_factory=list)  # URL strings

    def counters(self) -> dict[str, int]:
        """What the fetcher counts for this outcome: ``http/<code>`` when the server answered,
        ``error.cause/<cause>`` when the fetch got no answer (robots.txt denial, timeout, …);
        for a page ``fetched`` and ``bytes``, else the status name (and ``seeds`` for a seed of
        the sitemap pipeline, which comes back DISCOVERED); ``expired`` for an item that waited
        past ``fetcher.timeout.queue``, ``held`` for one sent back because its queue is held
        by the server."""
        if self.kind in ("expired", "held"):
            return {self.kind: 1}
        out = {}
        code = self.metadata.get(FETCH_STATUS_CODE)
        if code:  # set by this fetch (never persisted); a stale error.cause may be there
            out[f"http/{code[0]}"] = 1
        elif self.status is Status.DISCOVERED:
            out["seeds"] = 1
        elif self.kind == "status":
            out[f"error.cause/{(self.metadata.get(ERROR_CAUSE) or ['unknown'])[0]}"] = 1
        if self.kind == "page":
            out.update(fetched=1, bytes=len(self.content))
        else:
            out[self.status.value] = 1
        return out


def queue_mode(conf: dict) -> str | None:
    """``fetcher.queue.mode`` when it is set and differs from ``partition.url.mode`` (the queues
    are then not the tuples' partition keys), else ``None``. :class:`ConfError` for an unknown
    mode."""
    mode = C.get_str(conf, "fetcher.queue.mode", "") or ""
    if not mode or mode == partition_mode(conf):
        return None
    if mode not in PARTITION_MODES:
        raise C.ConfError(f"fetcher.queue.mode: expected one of {', '.join(PARTITION_MODES)} "
                          f"(or empty: the partition key), got {mode!r}")
    return mode


def check_conf(conf: dict) -> None:
    """Raise :class:`ConfError` for fetch keys that would stop a fetcher at start
    (``fetcher.queue.mode``, ``http.allowed.networks``, the proxy, the custom headers), before
    Storm starts (``owler run``)."""
    queue_mode(conf)
    check_http_conf(conf)
    check_browser_conf(conf)


class FetchEngine:
    def __init__(self, conf: dict, on_outcome: Callable[[Outcome], None],
                 refuse: Callable[[str], str | dict | None] | None = None):
        """``refuse(url)``, called on the loop's thread just before a URL is fetched, names why
        it must not be (an ``error.cause``: a blacklist that lists it by now; or the metadata of
        a take-down, ``error.cause`` among it) or gives None."""
        self.conf = conf
        self.on_outcome = on_outcome
        self.refuse = refuse
        self.threads = max(1, C.get_int(conf, FETCHER_THREADS_KEY, 50))
        self.max_crawl_delay = C.get_float(conf, "fetcher.max.crawl.delay", 30)
        self.force_crawl_delay = C.get_bool(conf, "fetcher.max.crawl.delay.force", False)
        self.queue_timeout = C.get_float(conf, QUEUE_TIMEOUT_KEY, -1)
        self.allow_redirs = C.get_bool(conf, REDIRECTIONS_KEY, True)
        self.max_redirects = C.get_int(conf, "http.allow.redirects.max", 5)
        self.store_headers = C.get_bool(conf, STORE_HEADERS_KEY, False)
        self.md_prefix = C.get_str(conf, MD_PREFIX_KEY, "protocol.") or ""
        self.queue_mode = queue_mode(conf)
        self.overrides = DelayOverrides.from_conf(conf)
        self.queues = FetchQueues(conf, overrides=self.overrides)
        self.backoff = Backoff(conf)
        self.max_throttle_sleep = C.get_float(conf, "fetcher.max.throttle.sleep", 30.0)
        self._held: dict[str, float] = {}  # queue -> until, for holds too long to wait in memory
        self.http = HttpFetcher(conf)
        self.revisits = Revisits(conf)
        self.discovery = SitemapDiscovery(conf)
        self.robots = RobotsSource(conf, self.http, count=self._count,
                                   on_new_rules=self.discovery.robots_read)
        self.tdmrep = TdmRepSource(conf, self.http, count=self._count)
        # the browser protocol (issue 48): a page routed to it is rendered after its fetch; the
        # browser starts on the first such page (owler.fetch.browser)
        self.router = Router.from_conf(conf)
        self.browser = (BrowserFetcher(conf, self.http, self.robots)
                        if self.router.uses_browser else None)
        self.signal_policy = signals.SignalPolicy.from_conf(conf)
        self.agents = agents_from_conf(conf)  # (the agent scopes of X-Robots-Tag and <meta>)
        self.meta_limit = C.get_int(conf, SCAN_BYTES_KEY, HEAD_LIMIT)
        self.stats: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._started = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- called from the caller's thread -----------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="owler-fetch-loop", daemon=True)
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("fetch loop did not start")

    def submit(self, item: FetchItem) -> bool:
        """Queue a URL; False when the queues are full (the caller fails the tuple)."""
        item.queued_at = now = time.time()
        if self.queue_mode:
            try:
                item.key = partition_key(item.url, self.queue_mode)
            except ValueError:  # no host: the fetch records the error, in the tuple's queue
                pass
        with self._lock:
            held = self._held.get(item.key)
            if held is not None and held <= now:
                del self._held[item.key]
                held = None
            accepted = held is None and self.queues.add(item.key, item)
        if held is not None:  # sent back: the frontier serves it once the hold is over
            self._count("held")
            self.on_outcome(Outcome(item, "held", item.metadata))
            return True
        if accepted and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        return accepted

    def queued(self) -> int:
        with self._lock:
            return self.queues.size

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _count(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        """(counters, gauges) for the bolt's stats: ``robots/fetched|allowed|denied|errors``,
        ``tdmrep/fetched|errors``, ``signals/refused|withheld`` (URLs not requested, pages whose
        content was withheld); ``queued``, ``fetching`` (in progress), ``queues``. Safe from any
        thread."""
        stats = dict(self.stats)
        counters = {f"{group}/{'errors' if name == 'error' else name}": stats[f"{group}_{name}"]
                    for group, names in (("robots", ("fetched", "allowed", "denied", "error")),
                                         ("tdmrep", ("fetched", "error")),
                                         ("signals", ("refused", "withheld")),
                                         ("browser", ("rendered", "budget", "failed")))
                    for name in names if stats.get(f"{group}_{name}")}
        return counters, {"queued": self.queued(), "fetching": self.queues.in_flight,
                          "queues": self.queues.num_queues}

    # -- the loop ----------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await self.http.start()
        sem = asyncio.Semaphore(self.threads)
        tasks: set[asyncio.Task] = set()
        self._started.set()
        try:
            while not self._stopping:
                now = time.time()
                self.overrides.maybe_reload(time.monotonic())
                if self.queue_timeout > 0:
                    with self._lock:
                        expired = self.queues.expire(now, self.queue_timeout)
                    for item in expired:
                        self._count("expired")
                        self.on_outcome(Outcome(item, "expired", item.metadata))
                while not sem.locked():
                    with self._lock:
                        nxt = self.queues.next_ready(now)
                    if nxt is None:
                        break
                    key, item = nxt
                    await sem.acquire()
                    task = asyncio.create_task(self._fetch_one(key, item, sem))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                with self._lock:
                    wakeup = self.queues.next_wakeup(now)
                timeout = 1.0 if wakeup is None else min(1.0, max(0.0, wakeup - now))
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout if timeout > 0 else 0.001)
                except asyncio.TimeoutError:
                    pass
        finally:
            for t in tasks:
                t.cancel()
            if self.browser is not None:
                await self.browser.close()
            await self.http.close()

    async def _fetch_one(self, key: str, item: FetchItem, sem: asyncio.Semaphore) -> None:
        delay = None
        outcome: Outcome | None = None
        try:
            outcome, delay = await self._process(key, item)
        except Exception as exc:  # noqa: BLE001 - never lose a URL to a bug: record it
            log.exception("fetch of %s failed", item.url)
            md = md_copy(item.metadata)
            set_value(md, ERROR_CAUSE, "exception")
            set_value(md, FETCH_EXCEPTION, f"{type(exc).__name__}: {exc}")
            outcome = Outcome(item, "status", md, Status.FETCH_ERROR)
        finally:
            now = time.time()
            drained: list[FetchItem] = []
            with self._lock:
                self.queues.finish(key, now, delay)
                if (outcome is not None and QUEUE_BLOCK_UNTIL in outcome.metadata
                        and delay is not None and delay > self.max_throttle_sleep):
                    # too long for the queue's URLs to wait here: back to the frontier, which
                    # holds the queue as well (the status update carries the block)
                    if len(self._held) >= 10_000:  # hosts never seen again: drop ended holds
                        self._held = {k: t for k, t in self._held.items() if t > now}
                    self._held[key] = now + delay
                    drained = self.queues.drain(key, now)
            sem.release()
            if self._wake is not None:
                self._wake.set()
        for waiting in drained:
            self._count("held")
            self.on_outcome(Outcome(waiting, "held", waiting.metadata))
        self._count(outcome.status.value if outcome.status else "page")
        self.on_outcome(outcome)

    def _throttled(self, key: str, res: FetchResult, md: dict) -> float | None:
        """When the server throttles (:class:`Backoff`): the seconds its queue is held, noted in
        the URL's metadata (retried when the hold ends, and the frontier blocks the queue)."""
        now = time.time()
        hold = self.backoff.hold(key, res.status, res.header("Retry-After"), now)
        if hold is None:
            return None
        self._count("throttled")
        set_value(md, DELAY_MINS, f"{hold / 60:.4f}")
        set_value(md, QUEUE_BLOCK_UNTIL, f"{now + hold:.3f}")
        return hold

    @staticmethod
    def _refused(item: FetchItem, md: dict, why: str) -> Outcome:
        """ERROR ``private_address``: the SSRF guard refuses the URL's host."""
        set_value(md, ERROR_CAUSE, "private_address")
        set_value(md, FETCH_EXCEPTION, why)
        return Outcome(item, "status", md, Status.ERROR)

    def _may_redirect(self, md: dict) -> bool:
        """Whether a redirect's target may still be followed: fewer than
        ``http.allow.redirects.max`` redirects led here (``redirect.hops``); else the chain ends
        at this URL, noted as ``redirect.refused``."""
        try:
            hops = int(md.get(REDIRECT_HOPS, ["0"])[0] or 0)
        except ValueError:
            hops = 0
        if 0 <= self.max_redirects <= hops:
            set_value(md, "redirect.refused", f"{hops} redirects led here "
                      f"(http.allow.redirects.max={self.max_redirects})")
            return False
        return True

    async def _process(self, key: str, item: FetchItem) -> tuple[Outcome, float | None]:
        """One URL from its queue to its outcome and the delay its queue waits after it: refused
        by the caller, stopped by robots.txt (:meth:`_robots_gate`), or fetched and answered
        (:meth:`_answered`)."""
        md = md_copy(item.metadata)
        signals.forget(md)  # this fetch's signals, not those of the last one
        url = item.url
        refused = self.refuse(url) if self.refuse is not None else None
        if refused:  # listed since it entered the frontier: a final status, no request
            if isinstance(refused, str):
                set_value(md, ERROR_CAUSE, refused)
            else:  # a take-down: its cause and what it says (owler.blacklist.takedown)
                md.update(refused)
            return Outcome(item, "status", md, Status.ERROR), 0.0
        rules = await self.robots.rules_for(url)
        stopped = self._robots_gate(key, item, md, rules)
        if stopped is not None:
            return stopped
        said, stopped = await self._host_signals(key, item, md, rules)
        if stopped is not None:
            return stopped
        conditional = self.revisits.conditional_headers(md)
        res = await self.http.fetch(url, extra_headers=conditional)
        outcome = self._answered(key, item, md, res, conditional, said)
        if outcome[0].kind == "page":  # rendered too when routed to the browser
            await render_page(self.browser, self.router, url, outcome[0].metadata, res,
                              self._count)
        return outcome

    async def _host_signals(self, key: str, item: FetchItem, md: dict,
                            rules) -> tuple[list, tuple[Outcome, float | None] | None]:
        """What the URL's host says of its uses before the request (:mod:`owler.signals`): its
        robots.txt's Content-Usage and Content-Signal, its ``/.well-known/tdmrep.json``
        (:class:`TdmRepSource`: asked once per host and cache period, inside this queue's turn,
        as robots.txt; not when robots.txt's signals refuse the URL already). Returns the
        statements and, when the URL is not to be requested, its outcome: ERROR ``signals`` when
        they refuse a purpose of the crawl under ``signals.refused.action: skip``; FETCH_ERROR
        ``throttled`` when the tdmrep.json request was answered with a code that holds the
        host's queue (429, 503: the URL waits as if it had been answered so itself)."""
        url = item.url
        said: list = []
        if rules.usage or rules.content_signals:
            said = from_robots(rules.usage_for(url), rules.content_signals)
            stopped = self._refused_before(item, md, said)
            if stopped is not None:  # robots.txt says enough: tdmrep.json is not asked for it
                return said, stopped
        found, answer = await self.tdmrep.file_for(url, rules)
        if answer is not None:
            hold = self._throttled(key, answer, md)
            if hold is not None:
                set_value(md, ERROR_CAUSE, "throttled")
                set_value(md, FETCH_EXCEPTION, f"{answer.url} answered {answer.status}")
                with self._lock:
                    delay = max(hold, self.queues.default_delay(key))
                return said, (Outcome(item, "status", md, Status.FETCH_ERROR), delay)
        if found.rules or found.problem:
            file_said = found.statements(url)
            if file_said:
                said = said + file_said
                return said, self._refused_before(item, md, said)
        return said, None

    def _refused_before(self, item: FetchItem, md: dict,
                        said: list) -> tuple[Outcome, float | None] | None:
        """With ``signals.refused.action: skip``, the outcome of a URL whose host's signals
        (``said``) refuse a purpose of the crawl: ERROR ``signals``, what they say noted."""
        if self.signal_policy.refused(signals.resolve(said)) is None:
            return None
        signals.note(md, said)
        self._count("signals_refused")
        set_value(md, ERROR_CAUSE, "signals")
        return Outcome(item, "status", md, Status.ERROR), 0.0

    def _robots_gate(self, key: str, item: FetchItem, md: dict,
                     rules) -> tuple[Outcome, float | None] | None:
        """What the host's robots.txt ``rules`` decide before the fetch: the sitemaps it names
        (:class:`SitemapDiscovery`; a seed of the sitemap pipeline ends there), a denial, a
        Crawl-delay too long, else None with the queue's Crawl-delay set (noted in ``md``)."""
        url = item.url
        found = self.discovery.look(url, md, rules)
        if found is not None:
            item.sitemaps = found.sitemaps
            if found.seed:  # a seed of the sitemap pipeline: its sitemaps only, no fetch
                return Outcome(item, "status", md, Status.DISCOVERED), found.delay
        if not rules.allowed(url):
            # a refused address (or a name resolving to one) already failed its robots.txt
            # lookup, before any connection: say so rather than blame robots.txt
            refused = self.http.refuses(url, names=True)
            if refused:
                return self._refused(item, md, refused), 0.0
            self._count("robots_denied")
            set_value(md, ERROR_CAUSE, "robots.txt")
            return Outcome(item, "status", md, Status.ERROR), 0.0
        self._count("robots_allowed")
        if rules.crawl_delay is not None:
            if rules.crawl_delay > self.max_crawl_delay:
                if not self.force_crawl_delay:
                    set_value(md, ERROR_CAUSE, "crawl_delay")
                    return Outcome(item, "status", md, Status.ERROR), 0.0
                delay = self.max_crawl_delay
            else:
                delay = rules.crawl_delay
            # stored on the queue: finish() applies it with the queue's own rules
            with self._lock:
                self.queues.set_crawl_delay(key, delay)
            set_value(md, QUEUE_CRAWL_DELAY, f"{delay:g}")
        return None

    def _answered(self, key: str, item: FetchItem, md: dict, res: FetchResult,
                  conditional: dict | None, said: list) -> tuple[Outcome, float | None]:
        """The outcome of a fetch by what came back: no answer, a throttling server, a status
        code, or a page (:meth:`_page`); the delay is None (the queue's own) except when the
        server throttles."""
        delay = None
        if res.status is None:
            cause = res.error_cause or "exception"
            set_value(md, ERROR_CAUSE, cause)
            if res.error_message:
                set_value(md, FETCH_EXCEPTION, res.error_message)
            status = Status.ERROR if cause in ("private_address", "malformed URL",
                                               "unsupported_scheme") else Status.FETCH_ERROR
            return Outcome(item, "status", md, status), delay
        set_value(md, FETCH_STATUS_CODE, res.status)
        if self.store_headers:
            for name, value in res.headers:
                md.setdefault(self.md_prefix + name, []).append(value)
        hold = self._throttled(key, res, md)
        if hold is not None:  # 429/503: retried once the server's hold is over
            with self._lock:
                delay = max(hold, self.queues.default_delay(key))
            return Outcome(item, "status", md, Status.FETCH_ERROR), delay
        status = Status.from_http_code(res.status)
        if res.status == 304 and not conditional:  # no content to go by: not a fetch
            set_value(md, ERROR_CAUSE, "unsolicited_304")
            return Outcome(item, "status", md, Status.FETCH_ERROR), delay
        if status is Status.REDIRECTION:
            outlinks = []
            target = redirect_target(res)
            if target:
                set_value(md, REDIRECT_TO, target)
                if self.allow_redirs and target != item.url and self._may_redirect(md):
                    outlinks.append(target)
            return Outcome(item, "status", md, status, outlinks=outlinks), delay
        if status is Status.FETCH_ERROR:
            return Outcome(item, "status", md, status), delay
        return self._page(item, md, res, said), delay

    def _page(self, item: FetchItem, md: dict, res: FetchResult, said: list) -> Outcome:
        """A page: what the webmasters' signals of its host (``said``), its headers and its
        ``<meta>`` say (:func:`owler.signals.note`), its content withheld when they refuse a
        purpose of the crawl under ``strip`` or ``skip`` (:meth:`_withhold`), else the
        revisit's validators or capture noted, and what the WARC writer needs kept in ``md``
        (transient ``_raw.*`` keys, never persisted)."""
        said = said + from_headers(res.headers, self.agents)
        ctype = res.header("content-type")
        if res.content and is_html(ctype, res.content):
            said += meta_statements(res.content, self.agents, self.meta_limit)
        withheld = None
        if said:
            image = (ctype or "").lower().startswith("image/")
            withheld = self.signal_policy.withheld(signals.note(md, said, image))
            md[wire.RAW_SIGNALS] = [signals.record_json(said, image, withheld)]
        content = res.content
        if withheld is not None:
            content = self._withhold(md, res, withheld)
        elif res.status == 304:  # the last capture's content: archived as a revisit
            self.revisits.note_not_modified(md, res.header)
        else:
            self.revisits.note_validators(md, res.header)
            self.revisits.note_capture(md, res.content, res.fetch_time)
        md[wire.RAW_REQUEST] = [res.request_bytes().decode("latin-1")]
        md[wire.RAW_STATUS_LINE] = [f"HTTP/{res.http_version or '1.1'} {res.status} {res.reason or ''}".rstrip()]
        md[wire.RAW_HEADERS] = wire.encode_headers(res.headers)
        md[wire.RAW_FETCH_TIME] = [repr(res.fetch_time)]
        if res.ip:
            md[wire.RAW_IP] = [res.ip]
        if res.truncated and withheld is None:
            md[wire.RAW_TRUNCATED] = ["length"]
        return Outcome(item, "page", md, None, content=content)

    def _withhold(self, md: dict, res: FetchResult, purpose: str) -> bytes:
        """A page whose signals refuse ``purpose`` (:class:`owler.signals.SignalPolicy`: strip,
        or skip told too late): ``signals.withheld``, and the content neither archived nor
        parsed (returns the empty payload the archiver and the parser get).

        The WARC response record then holds the HTTP head as it came and no payload, with
        ``WARC-Truncated: unspecified``: WARC/1.1 makes a response record whose block is less
        than the response say so with that field, and of its reasons ``length``, ``time`` and
        ``disconnect`` name other causes; a reason of our own (the grammar's ``future-reason``)
        is refused by readers that know only the four (jwarc's enum of them). Why it was cut is
        in the metadata record beside it (``withheld``: the purpose refused). A ``response``
        record rather than a ``metadata`` one alone: the exchange did happen (status, headers,
        date, address), and a reader of responses sees it, empty and marked truncated. The
        head's Content-Length is kept as ``X-Crawler-Content-Length`` beside the block's own
        (:mod:`owler.warc.format.serialize`). Its payload digest is that of what is stored (the
        empty payload): the withheld content's digest would let its text be confirmed.

        Nothing of this fetch is noted for a later revisit: the last full capture stays the
        one a revisit refers to, and the validators of this response are dropped, so the next
        request is not answered by a 304 about content the archive does not hold. A 304 is
        archived as the exchange it was (a response record, not a revisit of an earlier
        capture), its validators kept (unchanged content: still the capture's)."""
        md[signals.MD_WITHHELD] = [purpose]
        self._count("signals_withheld")
        if res.status == 304:
            self.revisits.note_validators(md, res.header, keep_missing=True)
            return b""
        self.revisits.forget_validators(md)
        md[wire.RAW_TRUNCATED] = ["unspecified"]
        return b""
