"""WARCSpout: the records of the input WARC files (``warc2warc.input``), each until it is acked.

The logic is :class:`owler.warc.feed.WARCFeed`: HTTP responses on the default stream, every other
record on ``archive``. Gauges for ``owler run``: ``in_flight`` and ``idle`` (1 when nothing is left
to read or in flight). Up to ``warc2warc.emit.per.call`` (10) records go per ``next_tuple`` call:
each call is a round trip with Storm's ShellSpout.
"""

from __future__ import annotations

import logging
import time

from streamparse import Spout, Stream

from owler import conf as C
from owler.constants import FETCHED_FIELDS
from owler.task.component import OwlerComponent
from owler.task.shard import Shard
from owler.warc.feed import ARCHIVE_STREAM, WARCFeed
from owler.warc.progress import open_progress
from owler.warc.source import InputSource

log = logging.getLogger("owler.warc.spout")


class WARCSpout(OwlerComponent, Spout):
    outputs = [Stream(FETCHED_FIELDS), Stream(FETCHED_FIELDS, name=ARCHIVE_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.feed = WARCFeed(storm_conf, open_progress(storm_conf),
                             InputSource.from_conf(storm_conf),
                             Shard.of_task(context, self.component_name, self.task_id),
                             binary=self.binary)
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
        try:
            self.feed.flush(now)
        except Exception as exc:  # noqa: BLE001 - the progress store is away: kept, tried again
            log.exception("cannot record acks")
            self.report_error(f"cannot record acks: {type(exc).__name__}: {exc}")
        self._gauges(now)
        if not emitted:  # at the in-flight bound acks come soon; with nothing to read, rest
            time.sleep(0.002 if len(self.feed.in_flight) >= self.feed.max_in_flight else 0.05)

    def _gauges(self, now):
        if now - self._gauged < 1.0:
            return
        self._gauged = now
        feed = self.feed
        try:
            feed.retry_done()
        except Exception as exc:  # noqa: BLE001
            log.warning("cannot mark input files done yet: %s", exc)
        self.gauges["in_flight"] = len(feed.in_flight)
        self.gauges["idle"] = 1 if feed.idle() else 0
        if feed.list_error:
            self.report_error(f"cannot list the input WARC files: {feed.list_error}")
        self.write_stats()

    def collect(self, counters, gauges):
        counters.update(self.feed.counters)

    def ack(self, tup_id):
        try:
            self.feed.ack(tup_id)
        except Exception as exc:  # noqa: BLE001 - recorded at a later flush (retry_done)
            log.warning("cannot record the end of an input file yet: %s", exc)

    def fail(self, tup_id):
        self.feed.fail(tup_id)

    def shutdown(self):
        self.feed.close()
        self.feed.progress.close()
