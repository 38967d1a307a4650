"""FrontierSpout: emits due URLs from the frontier, never one that is already in flight.

Buffer refilled from ``Frontier.due()`` (per-queue round-robin, ``spout.max.buckets`` queues,
``spout.max.urls.per.bucket`` URLs each; with the OpenSearch frontier StormCrawler's
``opensearch.status.max.buckets`` / ``opensearch.status.max.urls.per.bucket`` take precedence) at
most every ``spout.min.delay.queries`` ms (± 20 %, so that the polls of tasks sharing a frontier do not
stay in step). A URL stays in flight until Storm acks or fails its tuple
(the status updater acks only after its write is durable); ``spout.ttl.purgatory`` seconds past the
message timeout an entry is dropped anyway in case an ack was lost.

Splitting the queues between spout tasks:

- embedded (SQLite) frontier: by a hash (blake2b) of the partition key;
- shared (OpenSearch) frontier: by queue leases (:mod:`owler.frontier.opensearch`). A task serves a
  queue in rounds: it leases the queue, emits its URLs, and releases the lease when all of them are
  acked or failed. Acked URLs stay excluded from queries for ``spout.ttl.purgatory`` seconds (the
  index shows their new status only after a refresh).

A frontier that cannot be reached is retried every few seconds; the spout keeps running.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import socket
import time
from collections import deque

from streamparse import Spout

from bolts.base import OwlerComponent
from owler import conf as C
from owler.constants import SPOUT_FIELDS
from owler.frontier import FrontierError, open_frontier

log = logging.getLogger("owler.spout")

RETRY_SECS = 5.0


class FrontierSpout(OwlerComponent, Spout):
    outputs = SPOUT_FIELDS

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.storm_conf = storm_conf
        os_backend = C.get_str(storm_conf, "frontier.backend", "sqlite") == "opensearch"
        self.max_buckets = C.get_int(storm_conf, "spout.max.buckets", 1000)
        self.per_bucket = C.get_int(storm_conf, "spout.max.urls.per.bucket", 10)
        if os_backend:
            self.max_buckets = C.get_int(storm_conf, "opensearch.status.max.buckets", self.max_buckets)
            self.per_bucket = C.get_int(storm_conf, "opensearch.status.max.urls.per.bucket",
                                        self.per_bucket)
        self.buffer_size = C.get_int(storm_conf, "spout.buffer.size", 2000)
        self.min_delay = C.get_int(storm_conf, "spout.min.delay.queries", 2000) / 1000.0
        self.ttl_purgatory = C.get_int(storm_conf, "spout.ttl.purgatory", 30)
        self.purgatory = self.ttl_purgatory + C.get_int(
            storm_conf, "topology.message.timeout.secs", 120)
        tasks = sorted(int(t) for t, c in context.get("task->component", {}).items()
                       if c == self.component_name)
        self.shard = (tasks.index(self.task_id), len(tasks)) if self.task_id in tasks else (0, 1)
        # the lease owner: unique among all crawlers on the frontier, and stable across restarts
        # of a worker so that a restarted task takes its own unreleased leases back at once:
        # frontier.crawler.id when set; on a cluster the topology's id (storm.id: nimbus makes it
        # unique per submission); else host:pid (local mode has no worker restarts, and two local
        # runs started in the same second get the same storm.id).
        crawler = C.get_str(storm_conf, "frontier.crawler.id", "") or (
            storm_conf.get("storm.id") if storm_conf.get("storm.cluster.mode") == "distributed"
            else None) or f"{socket.gethostname()}:{os.getpid()}"
        self.owner = f"{crawler}/{self.component_name}/{self.task_id}"
        self.buffer: deque = deque()
        self.in_flight: dict[str, tuple[float, str]] = {}  # url -> (emitted at, key)
        self.recent: dict[str, float] = {}  # acked url -> when (leased frontier only)
        self.round_left: dict[str, int] = {}  # key -> URLs of its round buffered or in flight
        self.next_query = 0.0
        self.frontier = None
        self.leases = False
        self._open(time.time())

    def _open(self, now: float) -> bool:
        try:
            self.frontier = open_frontier(self.storm_conf, owner=self.owner)
        except FrontierError as exc:
            log.error("frontier unavailable (retrying in %.0f s): %s", RETRY_SECS, exc)
            self.count("frontier_unavailable")
            self.report_error(f"frontier unavailable (retrying every {RETRY_SECS:.0f} s): {exc}")
            self.next_query = now + RETRY_SECS
            return False
        self.leases = bool(getattr(self.frontier, "leases_queues", False))
        return True

    def _mine(self, key: str) -> bool:
        index, total = self.shard
        if total == 1 or self.leases:
            return True
        # not crc32: it is linear, so keys differing in one character often share its parity
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % total == index

    def _refill(self, now: float) -> None:
        self.next_query = now + self.min_delay * random.uniform(0.8, 1.2)
        if self.frontier is None and not self._open(now):
            return
        # drop in-flight entries whose ack or fail never came back
        for url in [u for u, (t, _) in self.in_flight.items() if now - t > self.purgatory]:
            self._done(url, now, self.in_flight.pop(url)[1])
            self.count("purgatory_expired")
        if self.recent:
            for url in [u for u, t in self.recent.items() if now - t > self.ttl_purgatory]:
                del self.recent[url]
        queued = {u for u, _, _ in self.buffer}
        try:
            rows = self.frontier.due(now, self.max_buckets, self.per_bucket,
                                     exclude=self.in_flight.keys() | queued | self.recent.keys())
        except FrontierError as exc:
            log.error("frontier query failed (retrying in %.0f s): %s", RETRY_SECS, exc)
            self.count("query_failed")
            self.report_error(f"frontier query failed (retrying in {RETRY_SECS:.0f} s): {exc}")
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
        self.count("queries")
        self.gauges["due_last_query"] = len(rows)
        self.gauges["queues_last_query"] = len({key for _, _, key in rows})

    def _done(self, url: str, now: float, key: str | None) -> None:
        """One URL of a round is finished (acked, failed or expired)."""
        if not self.leases or key is None:
            return
        left = self.round_left.get(key, 0) - 1
        if left > 0:
            self.round_left[key] = left
            return
        self.round_left.pop(key, None)
        self.frontier.release(key, now)

    def next_tuple(self):
        now = time.time()
        if not self.buffer and now >= self.next_query:
            self._refill(now)
        self.gauges["in_flight"] = len(self.in_flight)
        self.gauges["buffered"] = len(self.buffer)
        if self.leases:
            self.gauges["queues_leased"] = len(self.frontier.leases)
        self.write_stats()
        if not self.buffer:
            time.sleep(0.05)  # nothing due: do not spin the multilang loop
            return
        url, md, key = self.buffer.popleft()
        self.in_flight[url] = (now, key)
        self.count("emitted")
        self.emit([url, md], tup_id=url)

    def ack(self, tup_id):
        entry = self.in_flight.pop(tup_id, None)
        self.count("acked")
        if entry is not None:
            now = time.time()
            if self.leases:
                self.recent[tup_id] = now
            self._done(tup_id, now, entry[1])

    def fail(self, tup_id):
        # released: still due in the frontier, so a later query gives it out again
        entry = self.in_flight.pop(tup_id, None)
        self.count("failed")
        if entry is not None:
            self._done(tup_id, time.time(), entry[1])

    def shutdown(self):
        if self.frontier is not None:
            if self.leases:
                self.frontier.release_all(time.time())
            self.frontier.close()
