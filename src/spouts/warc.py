"""WarcSpout: the records of the input WARC files (``warc2warc.input``), each until it is acked.

The logic is :class:`owler.warc.feed.WarcFeed`: HTTP responses on the default stream (to the parser
and the WARC copy bolt), every other record on the ``archive`` stream (to the copy bolt only);
progress in ``warc2warc.progress.path``. Gauges for ``owler run``: ``in_flight`` and ``idle`` (1
when nothing is left to read or in flight).
Up to ``warc2warc.emit.per.call`` (10) records are emitted per call of ``next_tuple``: each call is
a round trip with Storm's ShellSpout.
"""

from __future__ import annotations

import logging
import time

from streamparse import Spout, Stream

from bolts.base import OwlerComponent
from owler import conf as C
from owler.constants import FETCHED_FIELDS
from owler.warc.feed import ARCHIVE_STREAM, WarcFeed
from owler.warc.progress import Progress, progress_path
from owler.warc.source import InputSource

log = logging.getLogger("owler.warc.spout")


class WarcSpout(OwlerComponent, Spout):
    outputs = [Stream(FETCHED_FIELDS), Stream(FETCHED_FIELDS, name=ARCHIVE_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        tasks = sorted(int(t) for t, c in context.get("task->component", {}).items()
                       if c == self.component_name)
        shard = (tasks.index(self.task_id), len(tasks)) if self.task_id in tasks else (0, 1)
        self.feed = WarcFeed(storm_conf, Progress(progress_path(storm_conf)),
                             InputSource.from_conf(storm_conf), shard)
        self._gauged = 0.0
        self.per_call = max(1, C.get_int(storm_conf, "warc2warc.emit.per.call", 10))

    def next_tuple(self):
        # several records per call: each call is a round trip with the JVM (next … sync)
        now = time.time()
        emitted = 0
        for _ in range(self.per_call):
            try:
                em = self.feed.next(now)
            except Exception as exc:  # noqa: BLE001 - e.g. the progress file is locked for long
                log.exception("the WARC feed failed")
                self.report_error(f"the WARC feed failed: {type(exc).__name__}: {exc}")
                em = None
            if em is None:
                break
            self.emit(em.values, tup_id=em.msg_id, stream=em.stream)
            emitted += 1
        self.feed.flush(now)
        self._gauges(now)
        if not emitted:  # at the in-flight bound acks come soon; with nothing to read, rest
            time.sleep(0.002 if len(self.feed.in_flight) >= self.feed.max_in_flight else 0.05)

    def _gauges(self, now):
        if now - self._gauged < 1.0:
            return
        self._gauged = now
        feed = self.feed
        self.gauges["in_flight"] = len(feed.in_flight)
        self.gauges["idle"] = 1 if feed.idle() else 0
        if feed.list_error:
            self.report_error(f"cannot list the input WARC files: {feed.list_error}")
        with self._stats_lock:
            self.counters.clear()
            self.counters.update(feed.counters)
        self.write_stats()

    def ack(self, tup_id):
        self.feed.ack(tup_id)

    def fail(self, tup_id):
        self.feed.fail(tup_id)

    def shutdown(self):
        self.feed.close()
        self.feed.progress.close()
