"""FrontierSpout: emits due URLs from the frontier, never one that is already in flight.

Buffer refilled from ``Frontier.due()`` (per-queue round-robin, ``spout.max.buckets`` queues,
``spout.max.urls.per.bucket`` URLs each) at most every ``spout.min.delay.queries`` ms. A URL stays
in flight until Storm acks or fails its tuple (the status updater acks only after its commit, so
by then the frontier has the new nextFetchDate); ``spout.ttl.purgatory`` seconds past the message
timeout an entry is dropped anyway in case an ack was lost. Several spout tasks split the queues by
a hash (blake2b) of the partition key.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque

from streamparse import Spout

from bolts.base import OwlerComponent
from owler import conf as C
from owler.constants import SPOUT_FIELDS
from owler.frontier import open_frontier


class FrontierSpout(OwlerComponent, Spout):
    outputs = SPOUT_FIELDS

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.frontier = open_frontier(storm_conf)
        self.max_buckets = C.get_int(storm_conf, "spout.max.buckets", 1000)
        self.per_bucket = C.get_int(storm_conf, "spout.max.urls.per.bucket", 10)
        self.buffer_size = C.get_int(storm_conf, "spout.buffer.size", 500)
        self.min_delay = C.get_int(storm_conf, "spout.min.delay.queries", 2000) / 1000.0
        self.purgatory = C.get_int(storm_conf, "spout.ttl.purgatory", 30) + C.get_int(
            storm_conf, "topology.message.timeout.secs", 120)
        tasks = sorted(int(t) for t, c in context.get("task->component", {}).items()
                       if c == self.component_name)
        self.shard = (tasks.index(self.task_id), len(tasks)) if self.task_id in tasks else (0, 1)
        self.buffer: deque = deque()
        self.in_flight: dict[str, float] = {}
        self.last_query = 0.0

    def _mine(self, key: str) -> bool:
        index, total = self.shard
        if total == 1:
            return True
        # not crc32: it is linear, so keys differing in one character often share its parity
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % total == index

    def _refill(self, now: float) -> None:
        self.last_query = now
        # drop in-flight entries whose ack or fail never came back
        for url in [u for u, t in self.in_flight.items() if now - t > self.purgatory]:
            del self.in_flight[url]
            self.count("purgatory_expired")
        queued = {u for u, _, _ in self.buffer}
        rows = self.frontier.due(now, self.max_buckets, self.per_bucket,
                                 exclude=self.in_flight.keys() | queued)
        for url, md, key in rows:
            if len(self.buffer) >= self.buffer_size:
                break
            if self._mine(key):
                self.buffer.append((url, md, key))
        self.count("queries")
        self.gauges["due_last_query"] = len(rows)

    def next_tuple(self):
        now = time.time()
        if not self.buffer and now - self.last_query >= self.min_delay:
            self._refill(now)
        self.gauges["in_flight"] = len(self.in_flight)
        self.gauges["buffered"] = len(self.buffer)
        self.write_stats()
        if not self.buffer:
            time.sleep(0.05)  # nothing due: do not spin the multilang loop
            return
        url, md, _key = self.buffer.popleft()
        self.in_flight[url] = now
        self.count("emitted")
        self.emit([url, md], tup_id=url)

    def ack(self, tup_id):
        self.in_flight.pop(tup_id, None)
        self.count("acked")

    def fail(self, tup_id):
        # released: still due in the frontier, so a later query gives it out again
        self.in_flight.pop(tup_id, None)
        self.count("failed")

    def shutdown(self):
        self.frontier.close()
