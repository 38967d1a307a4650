"""The warc2warc archive: input records copied unchanged into rotated output WARC files, each
record exactly once, even across crashes and Storm's replays.

:meth:`ArchiveCopier.add` appends a record's input bytes (a gzip member as it was, or an
uncompressed record compressed as one member of its own; :meth:`WARCWriter.write_record_bytes`)
unless the progress file says it is archived already; :meth:`ArchiveCopier.commit` then records
the batch's records and the output's new committed length in one transaction (the bolt acks the
tuples after that). Files are rotated by ``warc.rotation.size`` / ``warc.rotation.time`` only
right after a commit, so a finished file never holds a record that is not recorded.

Crash recovery (:meth:`ArchiveCopier.recover`, at start): an output left ``.open`` is cut back to
its committed length (the records after it were never recorded: their tuples were not acked, Storm
replays them and they are written again, once) and finalized; one with nothing committed is
deleted. Each output file starts with a warcinfo record of its own; the input's own warcinfo
records are copied like any other record.

Config keys: those of :class:`owler.warc.writer.WARCWriter` and :mod:`owler.warc.upload`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping

from owler import conf as C
from owler.constants import WARC_ROTATION_SIZE_KEY, WARC_ROTATION_TIME_KEY
from owler.warc.progress import Progress, progress_path
from owler.warc.record import record_position
from owler.warc.upload import Uploader
from owler.warc.writer import OPEN_SUFFIX, WARC_SUFFIX, WARCWriter, _finalize, parse_file_name

log = logging.getLogger("owler.warc.copy")


class ArchiveCopier:
    def __init__(self, conf: Mapping[str, Any], partition: str, progress: Progress,
                 uploader: Uploader | None = None) -> None:
        self.progress = progress
        self.partition = str(partition)
        self.uploader = uploader
        self.rotation_size = C.get_int(conf, WARC_ROTATION_SIZE_KEY, 1 << 30)
        self.rotation_time = C.get_float(conf, WARC_ROTATION_TIME_KEY, 3600.0)
        self.writer = WARCWriter.from_conf(conf, self.partition, rotation_size=0, rotation_time=0,
                                           on_close=self._closed)
        self.pending: list[tuple[int, str, str]] = []
        self._pending_keys: set[tuple[int, str]] = set()
        self.duplicates = 0
        self.owns_progress = False

    @classmethod
    def open(cls, conf: Mapping[str, Any], partition: str) -> "ArchiveCopier":
        """A copy task's archive: its own connection to the progress file
        (``warc2warc.progress.path``, closed with the copier), the S3 uploader when
        ``warc.s3.bucket`` is set, and the outputs an earlier run left open recovered."""
        copier = cls(conf, partition, Progress(progress_path(conf)), Uploader.from_conf(conf))
        copier.owns_progress = True
        fixed = copier.recover()
        if fixed:
            log.warning("finalized %d output WARC file(s) left open by an earlier run", len(fixed))
        return copier

    # -- start ------------------------------------------------------------------------------------
    def recover(self) -> list[Path]:
        """Cut ``.open`` outputs of this partition back to their committed length and finalize
        them; queue finished, not yet uploaded files for upload. Returns the files finalized."""
        done = recover_outputs(self.writer.directory, self.writer.prefix, self.partition,
                               self.progress)
        if self.uploader is not None:
            self.uploader.submit_leftovers(self.writer.directory, self.writer.prefix,
                                           self.partition)
        return done

    # -- records ----------------------------------------------------------------------------------
    def add(self, file_id: int, key: str, raw: bytes) -> bool:
        """Append the record unless it is archived already; ``False`` for a duplicate (a replay
        of a record written before). Call :meth:`commit` before acking."""
        if (file_id, key) in self._pending_keys or self.progress.archived(file_id, key):
            self.duplicates += 1
            return False
        self.writer.write_record_bytes(raw)
        self.pending.append((file_id, key, self.writer.current_name))
        self._pending_keys.add((file_id, key))
        return True

    def add_record(self, md: Mapping[str, list[str]], raw: bytes) -> tuple[int, str, bool]:
        """:meth:`add` for a record the WARC spout emitted (its position is in its metadata):
        ``(file id, record key, written)``."""
        file_id, key = record_position(md)
        return file_id, key, self.add(file_id, key, raw)

    def commit(self, now: float | None = None) -> None:
        """Record the records written since the last commit (durable when it returns), then rotate
        if the file is big or old enough."""
        if self.pending:
            name = self.writer.current_name
            self.progress.commit_archived(self.pending, name, self.writer.size, self.partition)
            self.pending = []
            self._pending_keys.clear()
        self.maybe_rotate(now)

    def abort(self) -> None:
        """Forget records written but not committed (their tuples are failed and come again):
        the file is cut back to its committed length."""
        if not self.pending:
            return
        name = self.writer.current_name
        row = self.progress.output(name)
        self.writer.cut_back(row["committed"] if row else 0)
        self.pending = []
        self._pending_keys.clear()

    def maybe_rotate(self, now: float | None = None) -> None:
        if not self.writer.current_name or self.pending:
            return
        now = time.time() if now is None else now
        if (0 < self.rotation_size <= self.writer.size) or (
                self.rotation_time > 0 and now - self.writer.opened_at >= self.rotation_time):
            self.writer.rotate()

    def _closed(self, final: Path) -> None:
        self.progress.set_output_state(final.name, "closed")
        if self.uploader is not None:
            self.uploader.submit(final)

    def close(self) -> None:
        """Commit, close the current file (it is uploaded), wait for the uploads."""
        try:
            if self.pending:
                self.commit()
        finally:
            self.writer.close()
            if self.uploader is not None:
                self.uploader.close()
            if self.owns_progress:
                self.progress.close()


def recover_outputs(directory: Path, prefix: str, partition: str | None,
                    progress: Progress) -> list[Path]:
    """Cut the ``.open`` outputs of ``prefix`` (and ``partition``; ``None`` = all, only when no
    writer runs) back to their committed length and finalize them; delete those with nothing
    committed. Returns the files finalized."""
    done = []
    for path in sorted(Path(directory).glob("*" + WARC_SUFFIX + OPEN_SUFFIX)):
        parts = parse_file_name(path.name)
        if not parts or parts["prefix"] != prefix or (
                partition is not None and parts["partition"] != str(partition)):
            continue
        name = path.name[: -len(OPEN_SUFFIX)]
        row = progress.output(name)
        committed = row["committed"] if row else 0
        if committed <= 0:
            log.warning("WARC copy: %s has no committed record; deleted", path)
            path.unlink()
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
        done.append(_finalize(path))
        progress.set_output_state(name, "closed")
    return done
