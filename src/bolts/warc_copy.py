"""WARCCopyBolt: every input record copied unchanged into rotated output WARC files, exactly once
(:class:`owler.warc.copy.ArchiveCopier`).

Records are written as they come and recorded in the progress store in batches
(``warc2warc.copy.batch`` records or ``warc2warc.copy.interval`` seconds). A tuple is acked once
its record is recorded, which needs its bytes stored: at once for a local file, once its part is
stored for a file streamed to S3 (the bolt stores what it holds when its oldest record has waited
``warc.s3.max.age`` seconds, and completes a file nothing was written to for as long). A tuple is
failed (Storm replays it) when its write, its part or its recording fails. A replay of a record
archived before is acked without writing it; one of a record waiting for its part waits with it.

The topology groups this bolt's input by URL, so a record always goes to the same task: no two
tasks can archive one record (``topologies/warc2warc.py``).
"""

from __future__ import annotations

import logging
import time
from collections import deque

from streamparse import Bolt

from owler import conf as C
from owler import wire
from owler.task.component import OwlerComponent
from owler.warc.copy import ArchiveCopier
from owler.warc.stream import MAX_AGE_KEY
from owler.warc.writer import partition_name

log = logging.getLogger("owler.warc.copy")


class WARCCopyBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.copier = ArchiveCopier.open(storm_conf, partition_name(self.task_id))
        self.batch = max(1, C.get_int(storm_conf, "warc2warc.copy.batch", 200))
        self.interval = C.get_float(storm_conf, "warc2warc.copy.interval", 0.5)
        self.max_age = C.get_float(storm_conf, MAX_AGE_KEY, 10.0)
        self.waiting: dict[tuple[int, str], list] = {}  # record -> its tuples (a replay waits too)
        self.arrivals: deque = deque()  # (time, record) in the order written
        self.written = 0  # records written since the last commit
        self.last_commit = time.time()

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            file_id, key, written = self.copier.add_record(md, wire.decode_content(content))
        except Exception as exc:  # noqa: BLE001 - disk full, S3 away, a broken tuple: replayed
            self.fail(tup)
            self._failed(f"cannot copy a WARC record ({url})", exc, "write_failed")
            return
        record = (file_id, key)
        now = time.time()
        if written:
            self.count("records")
            self.written += 1
            self.arrivals.append((now, record))
        else:
            self.count("duplicates")
            if record not in self.waiting:  # archived before: nothing to wait for
                self.ack(tup)
                return
        self.waiting.setdefault(record, []).append(tup)
        if self.written >= self.batch or now - self.last_commit >= self.interval:
            self._commit(now)

    def process_tick(self, tup):
        now = time.time()
        self._expire()
        if self.arrivals and now - self.arrivals[0][0] >= self.max_age:
            self._commit(now, store=True)  # (S3) store the part being filled, or the file
        else:
            self._commit(now)
        if self.copier.streaming:  # input that ends: its last upload completed
            try:
                self.copier.maybe_rotate(now, idle=self.max_age)
            except Exception as exc:  # noqa: BLE001 - left open: the next start completes it
                log.error("cannot complete the output WARC upload: %s", exc)
        if self.copier.uploader is not None:
            self.gauges["uploads_pending"] = self.copier.uploader.pending
            self.gauges["uploaded"] = self.copier.uploader.uploaded
        self.gauges["waiting"] = len(self.waiting)
        self.write_stats()

    def _commit(self, now, store=False):
        self.last_commit = now
        self.written = 0
        try:
            done, lost = self.copier.make_durable() if store else self.copier.commit(now)
        except Exception as exc:  # noqa: BLE001 - the progress store is away: replayed
            self._failed("cannot record copied WARC records", exc)
            return
        for record in done:
            for t in self.waiting.pop(record, ()):
                self.ack(t)
        for record in lost:
            self.count("write_failed")
            for t in self.waiting.pop(record, ()):
                self.fail(t)
        if done:
            self.count("commits")
        self._expire()

    def _expire(self):
        while self.arrivals and self.arrivals[0][1] not in self.waiting:
            self.arrivals.popleft()

    def _failed(self, what, exc, counter=None):
        """Records written but not recorded are cut off; their tuples are failed, come again."""
        log.error("%s", what, exc_info=exc)
        if counter:
            self.count(counter)
        self.report_error(f"{what}: {type(exc).__name__}: {exc}")
        try:
            gone = self.copier.abort()
        except Exception:  # noqa: BLE001
            log.exception("cannot cut back the output WARC file")
            gone = list(self.waiting)
        for record in gone:
            for t in self.waiting.pop(record, ()):
                self.fail(t)
        self._expire()

    def shutdown(self):
        try:
            self._commit(time.time())
        finally:
            self.copier.close()
