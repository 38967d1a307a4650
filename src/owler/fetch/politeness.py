"""Per-queue politeness for the fetcher (StormCrawler FetcherBolt's ``FetchItemQueues``).

Pure logic, no threads, no sleeping: every method takes the current time (``now``, seconds, same
clock as the injected ``clock``, ``time.time`` by default). The caller (the fetch loop) asks
:meth:`FetchQueues.next_ready` for work, reports :meth:`FetchQueues.finish` when a fetch ends and
sleeps until :meth:`FetchQueues.next_wakeup`. Not thread-safe: callers on several threads lock.

Semantics (StormCrawler's):

- One FIFO queue per key (the partition key: host, pay-level domain or IP).
- A queue gives out an item only when fewer than ``fetcher.threads.per.queue`` of its fetches are
  in progress and ``now >= next_allowed``. Ready queues are served round-robin: a queue that just
  gave out an item goes behind every queue that was already ready.
- Intervals are measured from the END of the previous fetch: ``finish(key, now)`` sets
  ``next_allowed = now + delay`` where delay is the queue's crawl delay (robots.txt Crawl-delay via
  :meth:`set_crawl_delay`) when set, else ``fetcher.server.delay``; with
  ``fetcher.threads.per.queue > 1`` it is ``fetcher.server.min.delay``. An explicit
  ``finish(..., delay=d)`` wins (``0.0`` = "asap", used after a robots denial).
- An empty queue with nothing in flight is removed, but its next allowed time (and crawl delay)
  is remembered until it passes, so a URL arriving right after cannot jump the delay (StormCrawler
  forgets it; that is a politeness hole).
- ``fetcher.max.urls.in.queues``: :meth:`add` returns False once queued + in-flight URLs reach it
  (StormCrawler blocks ``execute()``; the bolt fails the tuple instead, for back-pressure).
  ``fetcher.max.queue.size`` does the same per queue.
- :meth:`expire` returns items that waited longer than ``fetcher.timeout.queue`` seconds;
  :meth:`drain` takes every item out of one queue (a queue held by the server for long).

:class:`Backoff` decides how long a server that throttles (429, 503) holds its queue.

:class:`DelayOverrides`: per-site delays set by the operator (a site that asked to be crawled more
slowly, up to 30 s in OWLer's practice; or one that agreed to faster), from the file
``fetcher.politeness.file`` (``politeness.txt`` under ``resources/``), one ``host-or-domain
seconds`` per line, ``#`` comments. An entry names a host and all its subdomains, the most specific
entry wins, and it replaces the queue's delay (robots.txt Crawl-delay and ``fetcher.server.delay``
alike). The file is read again when it changed, checked every
``fetcher.politeness.reload.interval`` seconds (30); a bad line is logged and skipped.

Config keys: ``fetcher.server.delay`` (1.0 s), ``fetcher.server.min.delay`` (0.0 s),
``fetcher.threads.per.queue`` (1), ``fetcher.max.urls.in.queues`` (-1 = unbounded),
``fetcher.max.queue.size`` (-1 = unbounded), ``fetcher.server.delay.force`` (false: a robots
crawl delay shorter than ``fetcher.server.delay`` is raised to it when true).

Cost: add / next_ready / finish are O(log number-of-queues); expire is O(expired items).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import heapq
import itertools
import logging
import os
import time
from collections import OrderedDict, deque
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from owler import conf as C
from owler.constants import (POLITENESS_FILE_KEY, QUEUE_TIMEOUT_KEY, SERVER_DELAY_KEY,
                             THREADS_PER_QUEUE_KEY)

T = TypeVar("T")

log = logging.getLogger(__name__)


class _Entry(Generic[T]):
    __slots__ = ("added", "item", "key", "alive")

    def __init__(self, added: float, item: T, key: str) -> None:
        self.added = added
        self.item = item
        self.key = key
        self.alive = True


class _Queue:
    __slots__ = ("items", "in_progress", "next_time", "crawl_delay", "seq")

    def __init__(self, next_time: float = 0.0, crawl_delay: float | None = None) -> None:
        self.items: deque[_Entry] = deque()
        self.in_progress = 0
        self.next_time = next_time
        self.crawl_delay = crawl_delay
        self.seq: int | None = None  # sequence number of this queue's live heap entry


class FetchQueues(Generic[T]):
    """The fetcher's politeness queues. See the module docstring for the semantics."""

    def __init__(self, conf: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.time,
                 overrides: "DelayOverrides | None" = None) -> None:
        conf = conf or {}
        self.clock = clock
        self.overrides = overrides
        self.server_delay = C.get_float(conf, SERVER_DELAY_KEY, 1.0)
        self.min_delay = C.get_float(conf, "fetcher.server.min.delay", 0.0)
        self.max_threads = max(1, C.get_int(conf, THREADS_PER_QUEUE_KEY, 1))
        self.max_urls = C.get_int(conf, "fetcher.max.urls.in.queues", -1)
        self.max_queue_size = C.get_int(conf, "fetcher.max.queue.size", -1)
        self.force_server_delay = C.get_bool(conf, "fetcher.server.delay.force", False)
        # Age order is kept only when queue timeouts are on: taken entries stay in it until the
        # oldest waiting one leaves, which the timeout bounds.
        self._track_age = C.get_float(conf, QUEUE_TIMEOUT_KEY, -1) > 0
        self._queues: OrderedDict[str, _Queue] = OrderedDict()
        self._heap: list[tuple[float, int, str]] = []  # (ready time, seq, key), lazily cleaned
        self._seq = itertools.count()
        self._by_age: deque[_Entry] = deque()  # every queued entry, oldest first
        self._cooldown: dict[str, tuple[float, float | None]] = {}
        self._cooldown_heap: list[tuple[float, str]] = []
        self._size = 0
        self._in_flight = 0

    # -- counters ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """URLs waiting in the queues (not counting those in flight)."""
        return self._size

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def num_queues(self) -> int:
        return len(self._queues)

    def __len__(self) -> int:
        return self._size

    def queue_length(self, key: str) -> int:
        q = self._queues.get(key)
        return len(q.items) if q else 0

    def queue_in_progress(self, key: str) -> int:
        q = self._queues.get(key)
        return q.in_progress if q else 0

    def next_allowed(self, key: str) -> float:
        """When ``key`` may next be fetched from (0.0 when unknown)."""
        q = self._queues.get(key)
        if q is not None:
            return q.next_time
        return self._cooldown.get(key, (0.0, None))[0]

    def keys(self) -> Iterator[str]:
        return iter(self._queues)

    # -- operations ----------------------------------------------------------------------------
    def add(self, queue_key: str, item: T, now: float | None = None) -> bool:
        """Queue ``item`` under ``queue_key``. False (nothing queued) when
        ``fetcher.max.urls.in.queues`` or ``fetcher.max.queue.size`` is reached."""
        if 0 <= self.max_urls <= self._size + self._in_flight:
            return False
        q = self._queues.get(queue_key)
        if q is not None and 0 <= self.max_queue_size <= len(q.items):
            return False
        now = self.clock() if now is None else now
        self._prune_cooldown(now)
        if q is None:
            if self.max_queue_size == 0:
                return False
            q = _Queue(*self._cooldown.pop(queue_key, (0.0, None)))
            self._queues[queue_key] = q
        entry = _Entry(now, item, queue_key)
        q.items.append(entry)
        if self._track_age:
            self._by_age.append(entry)
        self._size += 1
        if q.seq is None and q.in_progress < self.max_threads:
            self._schedule(queue_key, q, max(q.next_time, now))
        return True

    def next_ready(self, now: float) -> tuple[str, T] | None:
        """The next (queue key, item) that may be fetched at ``now``, round-robin over the ready
        queues; the queue's slot is taken until :meth:`finish`. None when nothing is ready."""
        heap = self._heap
        while heap:
            t, seq, key = heap[0]
            q = self._queues.get(key)
            if q is None or q.seq != seq:
                heapq.heappop(heap)  # stale
                continue
            if t > now:
                return None
            heapq.heappop(heap)
            q.seq = None
            entry = q.items.popleft()
            entry.alive = False
            self._size -= 1
            q.in_progress += 1
            self._in_flight += 1
            if q.items and q.in_progress < self.max_threads:
                # more slots: still ready, but behind every queue that is already waiting
                self._schedule(key, q, max(q.next_time, now))
            self._trim_age()
            return key, entry.item
        return None

    def finish(self, queue_key: str, now: float, delay: float | None = None) -> None:
        """A fetch from ``queue_key`` ended at ``now``: free its slot; the queue's next fetch is
        allowed at ``now + delay`` (default: crawl delay, server delay or min delay as described
        in the module docstring). Unknown keys are ignored."""
        q = self._queues.get(queue_key)
        if q is None or q.in_progress <= 0:
            return
        q.in_progress -= 1
        self._in_flight -= 1
        if delay is None:
            delay = self.default_delay(queue_key)
        q.next_time = now + max(0.0, delay)
        if q.items:
            if q.in_progress < self.max_threads:
                self._schedule(queue_key, q, q.next_time)  # replaces any older entry
        elif q.in_progress == 0:
            self._remove(queue_key, q, now)

    def default_delay(self, queue_key: str) -> float:
        """The delay :meth:`finish` applies to ``queue_key`` when given none."""
        if self.overrides is not None:
            override = self.overrides.delay(queue_key)
            if override is not None:
                return override
        if self.max_threads > 1:
            return self.min_delay
        q = self._queues.get(queue_key)
        if q is not None and q.crawl_delay is not None:
            return q.crawl_delay
        return self.server_delay

    def set_crawl_delay(self, queue_key: str, seconds: float | None) -> None:
        """Use ``seconds`` (robots.txt Crawl-delay, already capped by the caller) between this
        queue's fetches instead of ``fetcher.server.delay``; None goes back to the default.
        With ``fetcher.server.delay.force`` a shorter delay is raised to the server delay."""
        q = self._queues.get(queue_key)
        if q is None:
            return
        if seconds is not None:
            seconds = max(0.0, float(seconds))
            if self.force_server_delay and seconds < self.server_delay:
                seconds = self.server_delay
        q.crawl_delay = seconds

    def next_wakeup(self, now: float) -> float | None:
        """The earliest time a queue can give out an item (<= ``now``: one is ready now); None
        when no queued item can become ready without a :meth:`finish`."""
        heap = self._heap
        while heap:
            t, seq, key = heap[0]
            q = self._queues.get(key)
            if q is None or q.seq != seq:
                heapq.heappop(heap)
                continue
            return t
        return None

    def expire(self, now: float, timeout: float) -> list[T]:
        """Remove and return the items queued for longer than ``timeout`` seconds (oldest first);
        nothing when ``timeout`` < 0 (``fetcher.timeout.queue: -1``). In-flight items are never
        expired. Assumes ``now`` never goes backwards between calls (the age index is FIFO)."""
        if timeout < 0:
            return []
        if not self._track_age:
            return self._expire_scan(now, now - timeout)
        out: list[T] = []
        by_age = self._by_age
        limit = now - timeout
        while by_age and (not by_age[0].alive or by_age[0].added < limit):
            entry = by_age.popleft()
            if not entry.alive:
                continue
            entry.alive = False
            q = self._queues[entry.key]
            if q.items and q.items[0] is entry:
                q.items.popleft()
            else:  # only when callers passed times out of order
                q.items.remove(entry)
            self._size -= 1
            out.append(entry.item)
            if not q.items:
                q.seq = None  # its heap entry is now stale
                if q.in_progress == 0:
                    self._remove(entry.key, q, now)
        return out

    def drain(self, queue_key: str, now: float) -> list[T]:
        """Remove and return the items waiting in ``queue_key`` (in-flight ones stay): for a queue
        held too long for its URLs to wait in memory. The queue's next allowed time is kept."""
        q = self._queues.get(queue_key)
        if q is None or not q.items:
            return []
        out: list[T] = []
        while q.items:
            entry = q.items.popleft()
            entry.alive = False
            out.append(entry.item)
        self._size -= len(out)
        q.seq = None
        if q.in_progress == 0:
            self._remove(queue_key, q, now)
        self._trim_age()
        return out

    def _expire_scan(self, now: float, limit: float) -> list[T]:
        """expire() without the age index (fetcher.timeout.queue off in the conf): O(queues)."""
        out: list[T] = []
        for key, q in list(self._queues.items()):
            while q.items and q.items[0].added < limit:
                entry = q.items.popleft()
                entry.alive = False
                self._size -= 1
                out.append(entry.item)
            if not q.items:
                q.seq = None
                if q.in_progress == 0:
                    self._remove(key, q, now)
        return out

    # -- internals -----------------------------------------------------------------------------
    def _schedule(self, key: str, q: _Queue, ready_at: float) -> None:
        seq = next(self._seq)
        q.seq = seq
        heapq.heappush(self._heap, (ready_at, seq, key))

    def _remove(self, key: str, q: _Queue, now: float) -> None:
        del self._queues[key]
        if q.next_time > now:
            self._cooldown[key] = (q.next_time, q.crawl_delay)
            heapq.heappush(self._cooldown_heap, (q.next_time, key))

    def _prune_cooldown(self, now: float) -> None:
        ch = self._cooldown_heap
        while ch and ch[0][0] <= now:
            t, key = heapq.heappop(ch)
            kept = self._cooldown.get(key)
            if kept is not None and kept[0] <= now:
                del self._cooldown[key]

    def _trim_age(self) -> None:
        by_age = self._by_age
        while by_age and not by_age[0].alive:
            by_age.popleft()


# -- throttling ----------------------------------------------------------------------------------

def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: delta-seconds or an HTTP date (RFC 9110
    §10.2.3); ``None`` when absent or unreadable, ``0`` for a date in the past."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, when.timestamp() - now)


class Backoff:
    """How long a queue is held after the server throttled (StormCrawler's Retry-After hold and
    adaptive back-off, for the fetcher).

    A response whose status is in ``fetcher.backoff.status.codes`` ([429, 503]) holds its queue:
    for its ``Retry-After`` (seconds or HTTP date, at most ``fetcher.max.retry.after``, 86400 s),
    else for ``fetcher.backoff.base.secs`` (60) × ``fetcher.backoff.factor`` (2.0) ^ (n - 1) after
    the n-th throttled response in a row, at most ``fetcher.backoff.max.secs`` (86400). Any other
    response of the queue starts the count again.
    """

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.codes = frozenset(int(c) for c in C.get_list(conf, "fetcher.backoff.status.codes",
                                                          [429, 503]))
        self.base = C.get_float(conf, "fetcher.backoff.base.secs", 60.0)
        self.factor = C.get_float(conf, "fetcher.backoff.factor", 2.0)
        self.max_secs = C.get_float(conf, "fetcher.backoff.max.secs", 86400.0)
        self.max_retry_after = C.get_float(conf, "fetcher.max.retry.after", 86400.0)
        self._streak: dict[str, int] = {}

    def hold(self, key: str, status: int | None, retry_after: str | None,
             now: float) -> float | None:
        """Seconds to hold ``key`` after a response with ``status`` (None: not throttled)."""
        if status is None:
            return None
        if status not in self.codes:
            self._streak.pop(key, None)
            return None
        n = self._streak[key] = self._streak.get(key, 0) + 1
        asked = retry_after_seconds(retry_after, now)
        if asked is not None:
            return asked if self.max_retry_after < 0 else min(asked, self.max_retry_after)
        return min(self.max_secs, self.base * self.factor ** (n - 1))


class DelayOverrides:
    """Per-site delays from a file, reloaded when it changes (module docstring)."""

    def __init__(self, path: str | os.PathLike | None, reload_interval: float = 30.0) -> None:
        self.path = path
        self.reload_interval = reload_interval
        self._delays: dict[str, float] = {}
        self._stamp: tuple[int, int] | None = None
        self._last_check = float("-inf")
        self.maybe_reload(0.0)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "DelayOverrides":
        name = (C.get_str(conf, POLITENESS_FILE_KEY, "politeness.txt") or "").strip()
        return cls(C.resource_path(name) if name else None,
                   C.get_float(conf, "fetcher.politeness.reload.interval", 30.0))

    def __len__(self) -> int:
        return len(self._delays)

    def maybe_reload(self, now: float) -> bool:
        """Read the file again when it changed (checked at most every ``reload_interval``
        seconds of ``now``, a monotonic clock); whether it did. A file that vanished leaves no
        override; one that cannot be read keeps the last ones."""
        if now - self._last_check < self.reload_interval or self.path is None:
            return False
        self._last_check = now
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            changed = self._stamp is not None
            self._delays, self._stamp = {}, None
            return changed
        except OSError as exc:
            log.error("cannot read the politeness file %s: %s", self.path, exc)
            return False
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return False
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                self._delays = self._parse(fh)
        except OSError as exc:
            log.error("cannot read the politeness file %s: %s", self.path, exc)
            return False
        self._stamp = stamp
        log.info("politeness file %s: %d site delays", self.path, len(self._delays))
        return True

    def _parse(self, lines) -> dict[str, float]:
        delays: dict[str, float] = {}
        for lineno, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                site, seconds = parts[0].lower().strip(".").removeprefix("*."), float(parts[1])
                if len(parts) != 2 or not site or not 0 <= seconds <= 86400:
                    raise ValueError
            except (IndexError, ValueError):
                log.warning("politeness file %s line %d: expected 'host-or-domain seconds' with "
                            "0 <= seconds <= 86400, got %r", self.path, lineno, raw.rstrip("\n"))
                continue
            delays[site] = seconds
        return delays

    def delay(self, key: str) -> float | None:
        """The delay set for the queue ``key`` (a host, a domain or an IP) or the closest of its
        parent domains, else None."""
        delays = self._delays
        if not delays or not key:
            return None
        name = key.lower()
        if name.replace(".", "").isdigit() or ":" in name:  # an IP: itself only
            return delays.get(name)
        while True:
            value = delays.get(name)
            if value is not None:
                return value
            i = name.find(".")
            if i < 0:
                return None
            name = name[i + 1:]
