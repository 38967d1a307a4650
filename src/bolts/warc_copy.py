"""WARCCopyBolt: every input record copied unchanged into rotated output WARC files, exactly once
(:class:`owler.warc.copy.ArchiveCopier`). Records are written as they come and recorded in the
progress file in batches (:class:`owler.task.batch.CommitBatch`: ``warc2warc.copy.batch`` records
or ``warc2warc.copy.interval`` seconds); a tuple is acked after its batch is recorded, and failed
(replayed by Storm) when the write or the recording fails."""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from owler import conf as C
from owler import wire
from owler.task.batch import CommitBatch
from owler.task.component import OwlerComponent
from owler.warc.copy import ArchiveCopier
from owler.warc.writer import partition_name

log = logging.getLogger("owler.warc.copy")


class WARCCopyBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.copier = ArchiveCopier.open(storm_conf, partition_name(self.task_id))
        self.batch = CommitBatch(C.get_int(storm_conf, "warc2warc.copy.batch", 200),
                                 C.get_float(storm_conf, "warc2warc.copy.interval", 0.5),
                                 self.ack, self.fail)

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            file_id, key, written = self.copier.add_record(md, wire.decode_content(content))
        except Exception as exc:  # noqa: BLE001 - disk full, a broken tuple: replayed later
            self._failed(f"cannot copy a WARC record ({url})", exc, "write_failed")
            self.fail(tup)
            return
        self.count("records" if written else "duplicates")
        now = time.time()
        self.batch.add(tup, [(file_id, key)], now)
        if self.batch.due(now):
            self._commit()

    def process_tick(self, tup):
        if self.batch.due(time.time()):
            self._commit()
        else:
            self.copier.maybe_rotate()
        if self.copier.uploader is not None:
            self.gauges["uploads_pending"] = self.copier.uploader.pending
            self.gauges["uploaded"] = self.copier.uploader.uploaded
        self.write_stats()

    def _commit(self):
        done = self.batch.commit(lambda records: self.copier.commit())
        if done.ok:
            self.count("commits")
        else:  # the progress file is unavailable: the tuples were failed, replayed
            self._failed("cannot record copied WARC records", done.error)

    def _failed(self, what, exc, counter=None):
        """Records written but not recorded are cut off; their tuples are failed and come again."""
        log.error("%s", what, exc_info=exc)
        if counter:
            self.count(counter)
        self.report_error(f"{what}: {type(exc).__name__}: {exc}")
        try:
            self.copier.abort()
        except Exception:  # noqa: BLE001
            log.exception("cannot cut back the output WARC file")
        self.batch.fail_all()

    def shutdown(self):
        if len(self.batch):
            self._commit()
        self.copier.close()
