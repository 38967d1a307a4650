"""What a frontier spout task emits: due URLs from the frontier, never one that is in flight.

:class:`FrontierFeed` is the frontier spout without Storm (the spout maps ``next``/``ack``/``fail``
to Storm's calls). It keeps a buffer refilled from ``Frontier.due()`` (per-queue round-robin,
``spout.max.buckets`` queues, ``spout.max.urls.per.bucket`` URLs each; with the OpenSearch frontier
StormCrawler's ``opensearch.status.max.buckets`` / ``opensearch.status.max.urls.per.bucket`` take
precedence) at most every ``spout.min.delay.queries`` ms (± 20 %, so that the polls of tasks
sharing a frontier do not stay in step). A URL stays in flight until it is acked or failed (the
status updater acks only after its write is durable); ``spout.ttl.purgatory`` seconds past the
message timeout (``topology.message.timeout.secs``) an entry is dropped anyway in case an ack was
lost.

Splitting the queues between the tasks of one spout:

- embedded (SQLite) frontier: by the task's :class:`~owler.task.shard.Shard` of the partition key
  (the other tasks' queues are left out by the query itself: ``skip_keys``);
- a URLFrontier service: not split; the service never gives one URL to two tasks;
- shared (OpenSearch) frontier: by queue leases (:mod:`owler.frontier.opensearch`). A task serves a
  queue in rounds: it leases the queue, emits its URLs, and releases the lease when all of them are
  acked or failed. Acked URLs stay excluded from queries for ``spout.ttl.purgatory`` seconds (the
  index shows their new status only after a refresh).

A frontier that cannot be reached is retried every :data:`RETRY_SECS` seconds; the feed keeps
going. Problems are logged, counted (``frontier_unavailable``, ``query_failed``) and handed to
``on_problem`` (the spout shows them in the Storm UI).

Counters: ``queries``, ``emitted``, ``acked``, ``failed``, ``purgatory_expired``; gauges
(:meth:`FrontierFeed.gauges`): ``in_flight``, ``buffered``, ``due_last_query``,
``queues_last_query``, ``queues_leased``.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections import deque
from typing import Any, Callable, Mapping

from owler import conf as C
from owler.constants import (FRONTIER_BACKEND_KEY, MESSAGE_TIMEOUT_KEY, MIN_DELAY_QUERIES_KEY,
                             STORM_ID_KEY)
from owler.frontier import RETRY_SECS, FrontierError, open_frontier
from owler.task.shard import Shard

log = logging.getLogger("owler.frontier.feed")

_BACKEND_KEYS = {  # backend -> (max buckets, max URLs per bucket)
    "opensearch": ("opensearch.status.max.buckets", "opensearch.status.max.urls.per.bucket"),
    "urlfrontier": ("urlfrontier.max.buckets", "urlfrontier.max.urls.per.bucket"),
}


def lease_owner(conf: Mapping[str, Any], component: str, task_id: Any) -> str:
    """The lease owner of a spout task: unique among all crawlers on the frontier, and stable
    across restarts of a worker so that a restarted task takes its own unreleased leases back at
    once: ``frontier.crawler.id`` when set; on a cluster the topology's id (``storm.id``: nimbus
    makes it unique per submission); else ``host:pid`` (local mode has no worker restarts, and two
    local runs started in the same second get the same ``storm.id``)."""
    crawler = C.get_str(conf, "frontier.crawler.id", "") or (
        conf.get(STORM_ID_KEY) if conf.get("storm.cluster.mode") == "distributed" else None
    ) or f"{socket.gethostname()}:{os.getpid()}"
    return f"{crawler}/{component}/{task_id}"


class _NotMine:
    """The queues of the other tasks of a split spout, as ``due()``'s ``skip_keys``."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard

    def __contains__(self, key: object) -> bool:
        return not self.shard.owns(str(key))


class FrontierFeed:
    def __init__(self, conf: Mapping[str, Any], owner: str, shard: Shard = Shard(), *,
                 on_problem: Callable[[str], None] | None = None,
                 opener: Callable[..., Any] = open_frontier) -> None:
        """``owner`` names this task for the queue leases of a shared frontier
        (:func:`lease_owner`); ``shard`` is its share of the queues of an embedded one."""
        self.conf = conf
        self.owner = owner
        self.shard = shard
        self.on_problem = on_problem or (lambda text: None)
        self.opener = opener
        self.max_buckets = C.get_int(conf, "spout.max.buckets", 1000)
        self.per_bucket = C.get_int(conf, "spout.max.urls.per.bucket", 10)
        # StormCrawler's keys of the backend's own spout take precedence
        own = _BACKEND_KEYS.get(C.get_str(conf, FRONTIER_BACKEND_KEY, "sqlite") or "")
        if own:
            self.max_buckets = C.get_int(conf, own[0], self.max_buckets)
            self.per_bucket = C.get_int(conf, own[1], self.per_bucket)
        self.buffer_size = C.get_int(conf, "spout.buffer.size", 2000)
        self.min_delay = C.get_int(conf, MIN_DELAY_QUERIES_KEY, 2000) / 1000.0
        self.ttl_purgatory = C.get_int(conf, "spout.ttl.purgatory", 30)
        self.purgatory = self.ttl_purgatory + C.get_int(conf, MESSAGE_TIMEOUT_KEY, 120)
        self.buffer: deque = deque()  # (url, metadata, key)
        self.in_flight: dict[str, tuple[float, str]] = {}  # url -> (emitted at, key)
        self.recent: dict[str, float] = {}  # acked url -> when (leased frontier only)
        self.round_left: dict[str, int] = {}  # key -> URLs of its round buffered or in flight
        self.next_query = 0.0
        self.frontier = None
        self.leases = False
        self.all_mine = False
        self.counters: dict[str, int] = {}
        self._last_rows = (0, 0)  # URLs and queues of the last query
        self._open(time.time())

    # -- the frontier -----------------------------------------------------------------------------
    def _open(self, now: float) -> bool:
        try:
            self.frontier = self.opener(self.conf, owner=self.owner)
        except FrontierError as exc:
            self._problem("frontier_unavailable", f"frontier unavailable (retrying every "
                                                  f"{RETRY_SECS:.0f} s): {exc}")
            self.next_query = now + RETRY_SECS
            return False
        self.leases = bool(getattr(self.frontier, "leases_queues", False))
        # a URLFrontier service never gives one URL to two tasks: each task takes any queue
        self.all_mine = bool(getattr(self.frontier, "hands_out_once", False))
        return True

    def _problem(self, counter: str, text: str) -> None:
        log.error("%s", text)
        self._count(counter)
        self.on_problem(text)

    def _mine(self, key: str) -> bool:
        return self.leases or self.all_mine or self.shard.owns(key)

    def _refill(self, now: float) -> None:
        self.next_query = now + self.min_delay * random.uniform(0.8, 1.2)
        if self.frontier is None and not self._open(now):
            return
        # drop in-flight entries whose ack or fail never came back
        for url in [u for u, (t, _) in self.in_flight.items() if now - t > self.purgatory]:
            self._done(url, now, self.in_flight.pop(url)[1])
            self._count("purgatory_expired")
        if self.recent:
            for url in [u for u, t in self.recent.items() if now - t > self.ttl_purgatory]:
                del self.recent[url]
        queued = {u for u, _, _ in self.buffer}
        # an embedded frontier split between tasks: the others' queues left out by the query,
        # which would otherwise begin rounds (frontier.queue.round.delay) on queues this task
        # drops, and give fewer queues of its own
        split = {"skip_keys": _NotMine(self.shard)} if self.shard.total > 1 and not (
            self.leases or self.all_mine) else {}
        try:
            rows = self.frontier.due(now, self.max_buckets, self.per_bucket,
                                     exclude=self.in_flight.keys() | queued | self.recent.keys(),
                                     **split)
        except FrontierError as exc:
            self._problem("query_failed", f"frontier query failed (retrying in {RETRY_SECS:.0f} "
                                          f"s): {exc}")
            self.next_query = now + RETRY_SECS
            return
        for url, md, key in rows:
            if len(self.buffer) >= self.buffer_size:
                break
            if self._mine(key):
                self.buffer.append((url, md, key))
                if self.leases:
                    self.round_left[key] = self.round_left.get(key, 0) + 1
        if self.leases:  # leased queues none of whose URLs fit in the buffer: give them back
            for key in [k for k in self.frontier.leases if k not in self.round_left]:
                self.frontier.release(key, now, served=False)
        self._count("queries")
        self._last_rows = (len(rows), len({key for _, _, key in rows}))

    def _done(self, url: str, now: float, key: str | None) -> None:
        """One URL of a round is finished (acked, failed or expired)."""
        if not self.leases or key is None:
            return
        left = self.round_left.get(key, 0) - 1
        if left > 0:
            self.round_left[key] = left
            return
        self.round_left.pop(key, None)
        self.frontier.release(key, now, defer=True)

    # -- what the spout calls ---------------------------------------------------------------------
    def next(self, now: float) -> tuple[str, dict] | None:
        """The next URL to emit and its metadata (the URL is the message id), or ``None`` when
        nothing is due now."""
        if not self.buffer and now >= self.next_query:
            self._refill(now)
        if not self.buffer:
            return None
        url, md, key = self.buffer.popleft()
        self.in_flight[url] = (now, key)
        self._count("emitted")
        return url, md

    def ack(self, url: str, now: float | None = None) -> None:
        entry = self.in_flight.pop(url, None)
        self._count("acked")
        if entry is not None:
            now = time.time() if now is None else now
            if self.leases:
                self.recent[url] = now
            self._done(url, now, entry[1])

    def fail(self, url: str, now: float | None = None) -> None:
        """The URL is released: still due in the frontier, a later query gives it out again."""
        entry = self.in_flight.pop(url, None)
        self._count("failed")
        if entry is not None:
            self._done(url, time.time() if now is None else now, entry[1])

    def gauges(self) -> dict[str, float]:
        out = {"in_flight": len(self.in_flight), "buffered": len(self.buffer),
               "due_last_query": self._last_rows[0], "queues_last_query": self._last_rows[1]}
        if self.leases:
            out["queues_leased"] = len(self.frontier.leases)
        return out

    def close(self) -> None:
        if self.frontier is not None:
            if self.leases:
                self.frontier.release_all(time.time())
            self.frontier.close()

    def _count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n
