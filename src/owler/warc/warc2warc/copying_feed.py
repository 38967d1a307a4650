"""The warc2warc spout's records, copied before they are emitted: :class:`CopyingFeed`.

The WARC spout reads the input records (:class:`owler.warc.warc2warc.input_feed.WARCFeed`) and
copies each into its own output WARC files (:class:`owler.warc.warc2warc.output.ArchiveCopier`) in
its own process. So a record's bytes cross the worker JVM at most once: an HTTP response's, to the
parser. A request, metadata or warcinfo record never leaves the spout's process.

A record is released once its copy is recorded in the progress store. The copier records in
batches: every ``warc2warc.copy.batch`` records written, every ``warc2warc.copy.interval``
seconds, and with S3 streaming only what is in stored parts (what has waited
``warc.s3.max.age`` seconds is stored then). Released, an HTTP response goes to Storm and is
acked there; every other record is acked at once. A record is thus acked only once its copy is
durable, and its file's resume point moves past it only then (:meth:`WARCFeed.flush`).

- A record Storm fails is emitted again and not copied again: it was copied before it was first
  emitted.
- After a crash the records not acked are read again. Those the progress store holds as
  archived are released without a copy. What the crashed task wrote of the others was cut back
  when its partition's copier started (:meth:`ArchiveCopier.recover`), and they are copied once.
- A write that fails, a part S3 refuses, a progress store that cannot be written: the records
  written and not recorded are cut back (:meth:`ArchiveCopier.abort`) and read again, as
  records never emitted, after ``BACKOFF`` seconds.
  If the cut back fails too, :class:`CopyBroken` stops the task: Storm starts it again, and the
  start cuts the file back.

The file reading and the copy run on the spout's one thread. A copy appends a gzip member as it
came (no compression: :meth:`WARCWriter.write_record_bytes`), which costs less than sending the
record to a bolt.

Counters: ``warc/records``, ``warc/bytes``, ``warc/duplicates`` (found archived: a restart),
``warc/commits``, ``warc/write_failed``; gauges ``warc/waiting`` (written, not recorded),
``warc/uploads_pending`` and ``warc/uploaded`` (local files uploaded once closed).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from typing import Any, Callable, Mapping

from owler import conf as C
from owler.warc.storage.s3_stream import MAX_AGE_KEY
from owler.warc.warc2warc.input_feed import ARCHIVE_STREAM, Emission, WARCFeed
from owler.warc.warc2warc.output import ArchiveCopier

log = logging.getLogger("owler.warc.copy")

BACKOFF = 1.0  # seconds without reading after a copy failed
MAINTAIN_EVERY = 1.0  # seconds between rotation checks and gauges


class CopyBroken(RuntimeError):
    """The output could not be cut back to what is recorded: the task must stop, and its
    partition's next start cuts the file back (:meth:`ArchiveCopier.recover`)."""


class CopyingFeed:
    def __init__(self, feed: WARCFeed, copier: ArchiveCopier, conf: Mapping[str, Any],
                 report: Callable[[str], None] | None = None) -> None:
        self.feed = feed
        self.copier = copier
        self.batch = max(1, C.get_int(conf, "warc2warc.copy.batch", 200))
        self.interval = C.get_float(conf, "warc2warc.copy.interval", 0.5)
        self.max_age = C.get_float(conf, MAX_AGE_KEY, 10.0)
        self.report = report or (lambda text: None)
        self.waiting: dict[tuple[int, str], Emission] = {}  # written, not recorded yet
        self.arrivals: deque[tuple[float, tuple[int, str]]] = deque()  # in the order written
        self.ready: deque[Emission] = deque()  # recorded HTTP responses, for Storm
        self.written = 0  # since the last commit
        self.last_commit = 0.0
        self.resume_at = 0.0
        self._maintained = 0.0
        self.counters: Counter = Counter()
        self.gauges: dict[str, float] = {}

    # -- records ----------------------------------------------------------------------------------
    def next(self, now: float) -> Emission | None:
        """The next HTTP response to emit (its copy recorded), or ``None``: reads and copies
        records (``warc2warc.copy.batch`` at most) until one is released or the feed has
        nothing now."""
        for _ in range(self.batch):  # a bounded call (S3: records may wait for their part)
            if self.ready or now < self.resume_at:
                break
            em = self.feed.next(now)
            if em is None:
                break
            self._copy(em, now)
            if self.written >= self.batch:
                self._commit(now)
        return self.ready.popleft() if self.ready else None

    def _copy(self, em: Emission, now: float) -> None:
        if em.archived:  # a record Storm failed: copied before it was emitted
            self._release(em)
            return
        try:
            written = self.copier.add(em.file_id, em.key, em.raw)
        except Exception as exc:  # noqa: BLE001 - disk full, S3 away: read again later
            self.counters["warc/write_failed"] += 1
            self._failed(f"cannot copy a WARC record ({em.msg_id})", exc, now, also=em)
            return
        if not written:  # recorded as archived by a run before this one
            self.counters["warc/duplicates"] += 1
            self._release(em)
            return
        self.counters["warc/records"] += 1
        self.counters["warc/bytes"] += self.copier.writer.last_record.length
        record = (em.file_id, em.key)
        self.waiting[record] = em
        self.arrivals.append((now, record))
        self.written += 1

    def _release(self, em: Emission) -> None:
        em.archived = True
        if em.stream == ARCHIVE_STREAM:  # nothing but its copy to wait for
            try:
                self.feed.ack(em.msg_id)
            except Exception as exc:  # noqa: BLE001 - the file's end is recorded later
                log.warning("cannot record the end of an input file yet: %s", exc)
        else:
            self.ready.append(em)

    def _commit(self, now: float, store: bool = False) -> None:
        self.last_commit = now
        self.written = 0
        try:
            done, lost = self.copier.make_durable() if store else self.copier.commit(now)
        except Exception as exc:  # noqa: BLE001 - the progress store is away
            self._failed("cannot record copied WARC records", exc, now)
            return
        for record in done:
            em = self.waiting.pop(record, None)
            if em is not None:
                self._release(em)
        if done:
            self.counters["warc/commits"] += 1
        if lost:  # their S3 part was refused: written again
            self.counters["warc/write_failed"] += len(lost)
            self.report(f"{len(lost)} copied WARC record(s) lost with an S3 part; copying again")
            for record in lost:
                em = self.waiting.pop(record, None)
                if em is not None:
                    self.feed.requeue(em.msg_id)
            self.resume_at = now + BACKOFF
        self._expire()

    def _failed(self, what: str, exc: Exception, now: float, also: Emission | None = None):
        """Cut back what is written and not recorded; those records are read again."""
        log.error("%s", what, exc_info=exc)
        self.report(f"{what}: {type(exc).__name__}: {exc}")
        try:
            gone = self.copier.abort()
        except Exception as cut:  # noqa: BLE001 - writing on would archive records twice
            raise CopyBroken(f"cannot cut back the output WARC file: {cut}") from cut
        for record in gone:
            em = self.waiting.pop(record, None)
            if em is not None:
                self.feed.requeue(em.msg_id)
        if also is not None:
            self.feed.requeue(also.msg_id)
        self.written = 0
        self.resume_at = now + BACKOFF
        self._expire()

    def _expire(self) -> None:
        while self.arrivals and self.arrivals[0][1] not in self.waiting:
            self.arrivals.popleft()

    # -- time -------------------------------------------------------------------------------------
    def maintain(self, now: float) -> None:
        """Call often (each ``next_tuple``): records what is due (``warc2warc.copy.interval``;
        with S3 what is in parts stored since), stores what has waited ``warc.s3.max.age``; once
        a second rotates a file old or big enough (or, streaming, one idle that long), and
        updates the gauges."""
        self._expire()
        if self.arrivals and now - self.arrivals[0][0] >= self.max_age:
            self._commit(now, store=True)  # (S3) the part being filled, or the file
        elif self.waiting and now - self.last_commit >= self.interval:
            self._commit(now)
        if now - self._maintained < MAINTAIN_EVERY:
            return
        self._maintained = now
        if not self.waiting:
            self._commit(now)  # rotates a local file by warc.rotation.time
        if self.copier.streaming:  # input that ends: its last upload completed
            try:
                self.copier.maybe_rotate(now, idle=self.max_age)
            except Exception as exc:  # noqa: BLE001 - left open: the next start completes it
                log.error("cannot complete the output WARC upload: %s", exc)
                self.report(f"cannot complete the output WARC upload: {exc}")
        if self.copier.uploader is not None:
            self.gauges["warc/uploads_pending"] = self.copier.uploader.pending
            self.gauges["warc/uploaded"] = self.copier.uploader.uploaded
        self.gauges["warc/waiting"] = len(self.waiting)

    def close(self) -> None:
        """Record what is written (its acks flushed by the feed's close), close the output."""
        try:
            if self.waiting:
                self._commit(time.time())
        finally:
            self.copier.close()
