"""WARCCopyBolt: every input record copied unchanged into rotated output WARC files, exactly once
(owler.warc.copy.ArchiveCopier): records are written as they come and recorded in the progress file
in batches (``status.updater.batch.size``-like ``warc2warc.copy.batch`` records, or every
``warc2warc.copy.interval`` seconds on tick tuples); tuples are acked after their batch is recorded,
and failed (replayed by Storm) when the write or the record fails. Finished files go to S3 when
``warc.s3.bucket`` is set (owler.warc.upload)."""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from bolts.base import OwlerComponent
from owler import conf as C
from owler import wire
from owler.warc.copy import ArchiveCopier
from owler.warc.feed import FILE_ID
from owler.warc.progress import Progress, progress_path
from owler.warc.upload import Uploader
from owler.warc2warc import WARC_KEY, WARC_OFFSET

log = logging.getLogger("owler.warc.copy")


class WARCCopyBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = False
    auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        partition = f"{self.task_id:02d}" if isinstance(self.task_id, int) else str(self.task_id)
        self.progress = Progress(progress_path(storm_conf))
        self.copier = ArchiveCopier(storm_conf, partition, self.progress,
                                    Uploader.from_conf(storm_conf))
        fixed = self.copier.recover()
        if fixed:
            log.warning("finalized %d output WARC file(s) left open by an earlier run", len(fixed))
        self.batch = C.get_int(storm_conf, "warc2warc.copy.batch", 200)
        self.interval = C.get_float(storm_conf, "warc2warc.copy.interval", 0.5)
        self.waiting = []
        self.oldest = 0.0

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            file_id = int(md[FILE_ID][0])
            key = (md.get(WARC_KEY) or md[WARC_OFFSET])[0]
            written = self.copier.add(file_id, key, wire.decode_content(content))
        except Exception as exc:  # noqa: BLE001 - disk full, a broken tuple: replayed later
            log.exception("cannot copy the record of %s", url)
            self.count("write_failed")
            self.report_error(f"cannot copy a WARC record ({url}): {type(exc).__name__}: {exc}")
            self._abort()
            self.fail(tup)
            return
        self.count("records" if written else "duplicates")
        if not self.waiting:
            self.oldest = time.time()
        self.waiting.append(tup)
        if len(self.waiting) >= self.batch or time.time() - self.oldest >= self.interval:
            self._commit()

    def process_tick(self, tup):
        if self.waiting and time.time() - self.oldest >= self.interval:
            self._commit()
        else:
            self.copier.maybe_rotate()
        uploader = self.copier.uploader
        if uploader is not None:
            self.gauges["uploads_pending"] = uploader.pending
            self.gauges["uploaded"] = uploader.uploaded
        self.write_stats()

    def _commit(self):
        tuples, self.waiting = self.waiting, []
        try:
            self.copier.commit()
        except Exception as exc:  # noqa: BLE001 - the progress file is unavailable: replay
            log.exception("cannot record %d copied records", len(tuples))
            self.report_error(f"cannot record copied WARC records: {type(exc).__name__}: {exc}")
            self._abort()
            for t in tuples:
                self.fail(t)
            return
        for t in tuples:
            self.ack(t)
        self.count("commits")

    def _abort(self):
        """Records written but not recorded are cut off; their tuples (and the waiting ones) are
        failed and come again."""
        try:
            self.copier.abort()
        except Exception:  # noqa: BLE001
            log.exception("cannot cut back the output WARC file")
        tuples, self.waiting = self.waiting, []
        for t in tuples:
            self.fail(t)

    def shutdown(self):
        if self.waiting:
            self._commit()
        self.copier.close()
        self.progress.close()
