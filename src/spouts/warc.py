"""WARCSpout: the records of the input WARC files (``warc2warc.input``), each copied into the
output WARC files in this process, and each HTTP response then emitted until it is acked.

The logic is :class:`owler.warc.warc2warc.copying_feed.CopyingFeed` (reading:
:class:`owler.warc.warc2warc.input_feed.WARCFeed`; the copy:
:class:`owler.warc.warc2warc.output.ArchiveCopier`, partition of this task). Only HTTP responses
go to Storm, once their copy is recorded; every other record is copied and acked here. Gauges for
``owler run``: ``in_flight`` and ``idle`` (1 when nothing is left to read or in flight), and the
copy's (``warc/*``). Up to ``warc2warc.emit.per.call`` (10) records go per ``next_tuple`` call:
each call is a round trip with Storm's ShellSpout.

A response goes out as ``url, content, metadata, key`` (``FETCHED_FIELDS``): ``key`` is its URL's
partition key by ``partition.url.mode`` (the queue the frontier files it under), which the parser's
input is grouped on (``parser.grouping``), so that one parser task sees every page of a host and
its near-duplicates (:mod:`owler.parse.simhash`).
"""

from __future__ import annotations

import logging
import time

from streamparse import Spout, Stream

from owler import conf as C
from owler.constants import FETCHED_FIELDS
from owler.frontier import DEFAULT_KEY
from owler.task.component import OwlerComponent
from owler.task.shard import Shard
from owler.urls import partition_key, partition_mode
from owler.warc.storage.files import partition_name
from owler.warc.warc2warc.copying_feed import CopyBroken, CopyingFeed
from owler.warc.warc2warc.input_feed import WARCFeed
from owler.warc.warc2warc.inputs import InputSource
from owler.warc.warc2warc.output import ArchiveCopier
from owler.warc.warc2warc.progress import open_progress

log = logging.getLogger("owler.warc.spout")


class WARCSpout(OwlerComponent, Spout):
    outputs = [Stream(FETCHED_FIELDS)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        progress = open_progress(storm_conf)
        self.feed = WARCFeed(storm_conf, progress, InputSource.from_conf(storm_conf),
                             Shard.of_task(context, self.component_name, self.task_id),
                             binary=self.binary)
        copier = ArchiveCopier.open(storm_conf, partition_name(self.task_id), progress)
        self.copying = CopyingFeed(self.feed, copier, storm_conf, report=self.report_error)
        self._gauged = 0.0
        self.per_call = max(1, C.get_int(storm_conf, "warc2warc.emit.per.call", 10))
        self.mode = partition_mode(storm_conf)

    def next_tuple(self):
        # several records per call: each call is a round trip with the JVM (next … sync)
        now = time.time()
        emitted = 0
        for _ in range(self.per_call):
            try:
                em = self.copying.next(now)
            except CopyBroken:  # the process ends: the next start cuts the file back
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the progress file is locked for long
                log.exception("the WARC feed failed")
                self.report_error(f"the WARC feed failed: {type(exc).__name__}: {exc}")
                em = None
            if em is None:
                break
            self.emit([*em.values, self._key(em.values[0])], tup_id=em.msg_id)
            emitted += 1
        try:
            self.copying.maintain(now)
        except CopyBroken:
            raise
        except Exception as exc:  # noqa: BLE001
            log.exception("the WARC copy failed")
            self.report_error(f"the WARC copy failed: {type(exc).__name__}: {exc}")
        try:
            self.feed.flush(now)
        except Exception as exc:  # noqa: BLE001 - the progress store is away: kept, tried again
            log.exception("cannot record acks")
            self.report_error(f"cannot record acks: {type(exc).__name__}: {exc}")
        self._gauges(now)
        if not emitted:  # at the in-flight bound acks come soon; with nothing to read, rest
            time.sleep(0.002 if len(self.feed.in_flight) >= self.feed.max_in_flight else 0.05)

    def _key(self, url: str) -> str:
        try:
            return partition_key(url, self.mode) or DEFAULT_KEY
        except ValueError:  # no host (the parser records the error), an unknown mode
            return DEFAULT_KEY

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
        self.gauges.update(self.copying.gauges)
        if feed.list_error:
            self.report_error(f"cannot list the input WARC files: {feed.list_error}")
        self.write_stats()

    def collect(self, counters, gauges):
        counters.update(self.feed.counters)
        counters.update(self.copying.counters)

    def ack(self, tup_id):
        try:
            self.feed.ack(tup_id)
        except Exception as exc:  # noqa: BLE001 - recorded at a later flush (retry_done)
            log.warning("cannot record the end of an input file yet: %s", exc)

    def fail(self, tup_id):
        self.feed.fail(tup_id)

    def shutdown(self):
        try:
            self.copying.close()  # records what is written: its acks are flushed below
        finally:
            try:
                self.feed.close()
            finally:
                self.feed.progress.close()
