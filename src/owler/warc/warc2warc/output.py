"""The warc2warc archive: input records copied unchanged into rotated output WARC files, each
record exactly once, even across crashes, Storm's replays and a node lost.

:meth:`ArchiveCopier.add` appends a record's input bytes (a gzip member as it was, or an
uncompressed record compressed as one member of its own; :meth:`WARCWriter.write_record_bytes`)
unless the progress store says it is archived already; :meth:`ArchiveCopier.commit` then records
the records whose bytes are stored, with the output's new committed length, in one commit of the
progress store (:func:`owler.warc.warc2warc.progress.open_progress`); the WARC spout acks them
only after that (:mod:`owler.warc.warc2warc.copying_feed`). A record is stored:

- in a local file (``warc.dir``) once written. Files are rotated by ``warc.rotation.size`` /
  ``warc.rotation.time`` only right after a commit, so a finished file never holds a record that
  is not recorded; finished files are uploaded when ``warc.s3.bucket`` is set and
  ``warc.s3.stream`` is false (:class:`owler.warc.storage.s3_upload.Uploader`);
- in an S3 upload (``warc.s3.bucket``, ``warc.s3.stream``: the default) once the part holding it
  is stored (:mod:`owler.warc.storage.s3_stream`). Nothing is on the node's disk. Before an
  upload is completed its last records are recorded (:meth:`ArchiveCopier._before_complete`); the
  spout stores what it holds when its oldest record has waited ``warc.s3.max.age`` seconds.

Crash recovery (:meth:`ArchiveCopier.recover`, when a spout task of the partition starts, on any
node): an output left open is cut back to its committed length (the records after it were never
recorded, so never acked: they are read again and written again, once) and
finalized; an S3 upload is completed with its stored parts up to that length (a commit always
ends at a part boundary), or aborted. One with nothing committed is deleted. Each output file
starts with a warcinfo record of its own; the input's own warcinfo records are copied like any
other record.

Each output file gets its CDXJ index as the crawl's files do (``warc.cdxj``: the writer indexes
every record it appends, :mod:`owler.warc.storage.index`); a file cut back loses the lines of the
records cut; a recovered output's index is read off the file once it is cut back (an S3 output's
off its completed object, :func:`owler.warc.storage.s3_stream.recover_indices`).

Config keys: those of :class:`owler.warc.storage.files.WARCWriter`,
:mod:`owler.warc.storage.s3_upload` and :mod:`owler.warc.storage.s3_stream`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping

from owler import conf as C
from owler.constants import WARC_ROTATION_SIZE_KEY, WARC_ROTATION_TIME_KEY
from owler.warc.storage import index as X
from owler.warc.storage.files import (OPEN_SUFFIX, WARC_SUFFIX, WARCWriter, finalize_open,
                                      parse_file_name)
from owler.warc.storage.s3_stream import (S3StreamWriter, recover_indices, recover_uploads,
                                          stream_enabled)
from owler.warc.storage.s3_upload import Uploader
from owler.warc.warc2warc.progress import open_progress

log = logging.getLogger("owler.warc.copy")


class ArchiveCopier:
    def __init__(self, conf: Mapping[str, Any], partition: str, progress,
                 uploader: Uploader | None = None, writer: WARCWriter | None = None) -> None:
        self.progress = progress
        self.partition = str(partition)
        self.uploader = uploader
        self.rotation_size = C.get_int(conf, WARC_ROTATION_SIZE_KEY, 1 << 30)
        self.rotation_time = C.get_float(conf, WARC_ROTATION_TIME_KEY, 3600.0)
        if writer is None:
            writer = WARCWriter.from_conf(conf, self.partition, rotation_size=0, rotation_time=0)
        self.writer = writer
        self.writer.on_close = self._closed
        self.streaming = isinstance(writer, S3StreamWriter)
        if self.streaming:
            writer.before_complete = self._before_complete
        #: records written and not recorded yet: (file id, key, output, end offset)
        self.pending: list[tuple[int, str, str, int]] = []
        self._pending_keys: set[tuple[int, str]] = set()
        self.committed: dict[str, int] = {}  # output -> length recorded as committed
        self._done: list[tuple[int, str]] = []  # recorded since the last _drain
        self._lost: list[tuple[int, str]] = []  # stored never (a part S3 refused)
        self._aborting = False
        self.last_write = 0.0
        self.owns_progress = False

    @classmethod
    def open(cls, conf: Mapping[str, Any], partition: str,
             progress=None) -> "ArchiveCopier":
        """A copy task's archive: the client of the progress store it is given, or its own
        (:func:`owler.warc.warc2warc.progress.open_progress`, closed with the copier); its output
        streamed to S3 (``warc.s3.bucket`` with ``warc.s3.stream``), or local files uploaded once
        closed (with a bucket) or kept; what an earlier run of the partition left open
        recovered."""
        owns = progress is None
        if owns:
            progress = open_progress(conf)
        writer = None
        if stream_enabled(conf):
            writer = S3StreamWriter.from_conf(conf, str(partition), rotation_size=0,
                                              rotation_time=0)
            copier = cls(conf, partition, progress, writer=writer)
        else:
            copier = cls(conf, partition, progress, Uploader.from_conf(conf))
        copier.owns_progress = owns
        fixed = copier.recover()
        if fixed:
            log.warning("finalized %d output WARC file(s) left open by an earlier run", len(fixed))
        return copier

    # -- start ------------------------------------------------------------------------------------
    def recover(self) -> list:
        """Cut the outputs of this partition left open back to their committed length and
        finalize them (an S3 upload is completed with its parts up to that length); queue
        finished, not yet uploaded local files for upload. Returns the files finalized."""
        if self.streaming:
            w = self.writer
            done = recover_uploads(w.s3, w.bucket, w.key(w.prefix + "-"), self.partition,
                                   keep=self._committed_of_key)
            for key in done:
                name = key.rsplit("/", 1)[-1]
                self.progress.set_output_state(name, "closed", self._committed_of_key(key))
            if w.cdxj:
                recover_indices(w.s3, w.bucket, w.key(w.prefix + "-"), self.partition, done,
                                time.time() - max(self.rotation_time, 0.0) - 3600)
            return done
        done = recover_outputs(self.writer.directory, self.writer.prefix, self.partition,
                               self.progress, cdxj=self.writer.cdxj)
        if self.uploader is not None:
            self.uploader.submit_leftovers(self.writer.directory, self.writer.prefix,
                                           self.partition)
        return done

    def _committed_of_key(self, key: str) -> int:
        row = self.progress.output(key.rsplit("/", 1)[-1])
        return int(row["committed"]) if row else 0

    # -- records ----------------------------------------------------------------------------------
    def add(self, file_id: int, key: str, raw: bytes) -> bool:
        """Append the record unless it is archived already; ``False`` for a duplicate (a replay
        of a record written before). Call :meth:`commit` before acking."""
        if (file_id, key) in self._pending_keys or self.progress.archived(file_id, key):
            return False
        self.writer.write_record_bytes(raw)
        self.last_write = time.time()
        rec = self.writer.last_record
        self.pending.append((file_id, key, rec.filename, rec.offset + rec.length))
        self._pending_keys.add((file_id, key))
        return True

    def commit(self, now: float | None = None) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """Record the records written since the last commit whose bytes are stored (all of them
        for local files; with S3, those in stored parts), then rotate if the file is big or old
        enough. Returns ``(recorded, lost)`` record positions: the records of the first can be
        acked, those of the second written again (their part could not be stored). Raises when the
        progress cannot be written (then :meth:`abort`)."""
        self._record(self.writer.durable)
        self.maybe_rotate(now)
        return self._drain()

    def make_durable(self) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """Store and record everything written (S3: the buffered part, or the file completed);
        as :meth:`commit`."""
        if self.streaming:
            self.writer.make_durable()
        self._record(self.writer.durable)
        return self._drain()

    def _record(self, stored) -> None:
        """Record the pending records ``stored(output, end)`` says are stored, one commit per
        output file (its committed length: where the last of them ends)."""
        ready, lost, left = [], [], []
        for p in self.pending:
            (lost if self.writer.lost(p[2], p[3]) else ready if stored(p[2], p[3])
             else left).append(p)
        if not ready and not lost:
            return
        by_output: dict[str, list] = {}
        for p in ready:
            by_output.setdefault(p[2], []).append(p)
        for name, recs in by_output.items():
            length = max(p[3] for p in recs)
            self.progress.commit_archived([(f, k, name) for f, k, _, _ in recs], name, length,
                                          self.partition)
            self.committed[name] = max(self.committed.get(name, 0), length)
            self._done += [(f, k) for f, k, _, _ in recs]
        self.pending = left
        for p in ready + lost:
            self._pending_keys.discard((p[0], p[1]))
        self._lost += [(p[0], p[1]) for p in lost]

    def _drain(self) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        done, self._done = self._done, []
        lost, self._lost = self._lost, []
        return done, lost

    def _before_complete(self, name: str, stored: int) -> int:
        """The S3 writer is about to complete ``name`` with ``stored`` bytes: record its records
        first; the bytes to keep (what is recorded, if recording fails)."""
        if not self._aborting:
            try:
                self._record(lambda n, end: n == name and end <= stored)
                return stored
            except Exception:  # noqa: BLE001 - the caller aborts: its records come again
                log.exception("cannot record the records of %s before completing it", name)
        return self.committed.get(name, 0) or self._committed_of_key(name)

    def abort(self) -> list[tuple[int, str]]:
        """Forget records written but not recorded (they are read and written again): a
        local file is cut back to its committed length; an S3 upload is completed with its
        recorded parts only (records already in a stored part cannot be taken back out).
        Returns their positions."""
        gone = [(p[0], p[1]) for p in self.pending]
        if not self.pending:
            return gone
        if self.streaming:
            self._aborting = True
            try:
                self.writer.rotate()
            finally:
                self._aborting = False
        else:
            name = self.writer.current_name
            row = self.progress.output(name)
            self.writer.cut_back(row["committed"] if row else 0)
        self.pending = []
        self._pending_keys.clear()
        return gone

    def maybe_rotate(self, now: float | None = None, idle: float = 0.0) -> None:
        """Close the current file when it is big or old enough, or (``idle`` > 0) when nothing
        was written to it for ``idle`` seconds and all of it is recorded: an S3 upload is only
        an object once completed, and input that ends should not leave its last records out
        of the bucket until ``warc.rotation.time``."""
        # a local file only between commits; an S3 upload records its records as it completes
        if not self.writer.current_name or (self.pending and not self.streaming):
            return
        now = time.time() if now is None else now
        if (0 < self.rotation_size <= self.writer.size) or (
                self.rotation_time > 0 and now - self.writer.opened_at >= self.rotation_time) or (
                idle > 0 and not self.pending and now - self.last_write >= idle):
            self.writer.rotate()

    def _closed(self, final) -> None:
        name = final.name
        self.progress.set_output_state(name, "closed", self.committed.get(name))
        if self.uploader is not None:
            self.uploader.submit(final)

    def close(self) -> None:
        """Record what is written, close the current file (an S3 upload is completed, a local
        file uploaded), wait for the uploads."""
        try:
            if self.pending and not self.streaming:
                self.commit()
        finally:
            try:
                self.writer.close()  # (S3: records its records before completing it)
            finally:
                if self.uploader is not None:
                    self.uploader.close()
                if self.owns_progress:
                    self.progress.close()


def recover_outputs(directory: Path, prefix: str, partition: str | None,
                    progress, cdxj: bool = True) -> list[Path]:
    """Cut the ``.open`` outputs of ``prefix`` (and ``partition``; ``None`` = all, only when no
    writer runs) back to their committed length and finalize them, each with its index read off
    it (``cdxj``; finished outputs whose index is missing get theirs too); delete those with
    nothing committed. Returns the files finalized."""
    done = []

    def ours(name: str) -> bool:
        parts = parse_file_name(name)
        return bool(parts) and parts["prefix"] == prefix and (
            partition is None or parts["partition"] == str(partition))

    for path in sorted(Path(directory).glob("*" + WARC_SUFFIX + OPEN_SUFFIX)):
        if not ours(path.name):
            continue
        name = path.name[: -len(OPEN_SUFFIX)]
        row = progress.output(name)
        committed = row["committed"] if row else 0
        if committed <= 0:
            log.warning("WARC copy: %s has no committed record; deleted", path)
            path.unlink()
            X.drop(path.parent, name)
            continue
        size = path.stat().st_size
        if size > committed:
            log.warning("WARC copy: %s: cutting %d uncommitted bytes (their records come again)",
                        path, size - committed)
            with open(path, "r+b") as f:
                f.truncate(committed)
                f.flush()
                os.fsync(f.fileno())
        elif size < committed:  # bytes recorded as archived are missing: say so loudly
            log.error("WARC copy: %s is shorter (%d) than its committed length %d", path, size,
                      committed)
        if cdxj:
            X.recover_index(path, name, min(size, committed), None)
        else:
            X.drop(path.parent, name)
        done.append(finalize_open(path))
        progress.set_output_state(name, "closed", min(size, committed))
    if cdxj:
        X.finish_leftovers(Path(directory), ours)
    return done
