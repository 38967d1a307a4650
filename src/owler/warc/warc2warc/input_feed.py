"""What the WARCSpout emits: the records of the input WARC files, each until it is acked.

:class:`WARCFeed` lists the input files (:mod:`owler.warc.warc2warc.inputs`) every
``warc2warc.list.interval`` seconds and registers them in the progress file
(:func:`owler.warc.warc2warc.progress.open_progress`: SQLite, or OpenSearch beside that
frontier); a spout task takes the files of its share (:class:`~owler.task.shard.Shard` of the file
name, as the frontier spout splits queues), one at a time, and streams each once from its resume
point.

Emissions: an HTTP response record is for the default stream ``(url, content, metadata)`` (to
the parser), every other record is marked ``archive`` (it is only copied, never sent:
:mod:`owler.warc.warc2warc.copying_feed`); ``content`` is the record's exact input bytes
(:mod:`owler.wire`), ``raw`` the same bytes for the copy, ``metadata`` its position
(:mod:`owler.warc.warc2warc.record_as_page` keys plus ``warc.file.id``) and, when the digests were
checked, ``_raw.digests`` (the mismatch, or empty: the parser does not check them again). The
message id is ``<file id>:<record key>``.

Acks: an acked record is recorded (batched: every ``warc2warc.ack.flush`` seconds) with the file's
new resume point, the smallest resume offset of its records still in flight or not read yet. A
failed record is emitted again (its bytes are kept while it is in flight), marked
``_raw.replayed``. A file is ``done`` once
it was read to its end and every record of it was acked; damage is recorded as a problem of the
file (``owler status``) and reading goes on where it can. A file that cannot be opened or read at
all (missing, denied, S3 failing after its retries) is ``failed``.

After a crash nothing is lost: the records of a file that were not acked are read again from the
resume point (acked ones skipped by key), and the spout's copy does not archive a record twice
(:mod:`owler.warc.warc2warc.copying_feed`).

Config keys: ``warc2warc.input``, ``warc2warc.list.interval`` (60), ``warc2warc.ack.flush``
(0.5), ``warc2warc.max.record.size`` (268435456), ``warc2warc.verify.digests`` (true),
``warc2warc.max.in.flight`` (2000: records emitted and not acked yet; the topology lifts Storm's
``topology.max.spout.pending`` for this spout, which is tuned for the frontier spouts).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from owler import conf as C
from owler import wire
from owler.constants import VERIFY_DIGESTS_KEY
from owler.task.shard import Shard
from owler.warc.format.reader import InputProblem, InputRecord, WARCReadError, iter_records
from owler.warc.storage import s3 as S3
from owler.warc.warc2warc.inputs import InputSource
from owler.warc.warc2warc.record_as_page import FILE_ID, record_metadata

log = logging.getLogger("owler.warc.feed")

ARCHIVE_STREAM = "archive"


@dataclass(slots=True)
class Emission:
    msg_id: str
    stream: str  # "default" or "archive"
    values: list  # [url, content, metadata]
    file_id: int
    key: str
    resume: int
    raw: bytes  # the record's input bytes (what is copied)
    archived: bool = False  # its copy is recorded (owler.warc.warc2warc.copying_feed)


class _OpenFile:
    def __init__(self, row: dict, records: Iterator, stream, acked: set[str]) -> None:
        self.row = row
        self.id = row["id"]
        self.records = records
        self.stream = stream
        self.acked = acked
        self.read_to_end = False
        self.next_resume = row["resume_offset"]


class WARCFeed:
    def __init__(self, conf: Mapping[str, Any], progress, source: InputSource,
                 shard: Shard = Shard(), binary: bool = False) -> None:
        self.conf = conf
        self.binary = binary  # records as bytes (owler.wire.encode_content)
        self.progress = progress
        self.source = source
        self.shard = shard
        self.list_interval = C.get_float(conf, "warc2warc.list.interval", 60.0)
        self.ack_flush = C.get_float(conf, "warc2warc.ack.flush", 0.5)
        self.max_record = C.get_int(conf, "warc2warc.max.record.size", 256 << 20)
        self.verify = C.get_bool(conf, VERIFY_DIGESTS_KEY, True)
        self.max_in_flight = C.get_int(conf, "warc2warc.max.in.flight", 2000)
        self.in_flight: dict[str, Emission] = {}
        self._file_flight: dict[int, dict[str, int]] = {}  # file id -> {msg id: resume offset}
        self.retry: deque[str] = deque()
        self.current: _OpenFile | None = None
        self.files: dict[int, dict] = {}  # id -> row of files read (for names)
        self.reading_done: set[int] = set()  # files read to their end, waiting for acks
        self._acks: dict[int, list[str]] = {}
        self._last_flush = 0.0
        self._last_list = -1e18
        self._next_look = -1e18
        self.list_error = ""
        self.counters: dict[str, int] = {}

    # -- files ------------------------------------------------------------------------------------
    def refresh(self, now: float) -> None:
        """List the input again (every ``warc2warc.list.interval`` s) and register new files."""
        if now - self._last_list < self.list_interval:
            return
        self._last_list = now
        self._next_look = -1e18
        try:
            found = self.source.list()
        except (S3.S3Error, OSError) as exc:
            self.list_error = str(exc)
            log.error("cannot list the input WARC files: %s", exc)
            self._count("list_failed")
            return
        self.list_error = ""
        new = self.progress.register(found)
        if new:
            log.info("%d new input WARC file(s) at %s", new, self.source.location)

    def _open_next(self) -> bool:
        for row in self.progress.open_files():
            if not self.shard.owns(row["name"]) or row["id"] in self.reading_done:
                continue
            try:
                stream = self.source.open(row["name"], row["resume_offset"])
            except (S3.S3Error, OSError) as exc:
                self._fail_file(row, f"cannot open: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - botocore's ClientError and the like
                self._fail_file(row, f"cannot open: {type(exc).__name__}: {exc}")
                continue
            acked = self.progress.acked_keys(row["id"])
            records = iter_records(stream, row["resume_offset"], max_record=self.max_record,
                                   verify=self.verify)
            self.current = _OpenFile(row, records, stream, acked)
            self.files[row["id"]] = row
            if row["state"] != "reading":
                self.progress.set_state(row["id"], "reading")
            log.info("reading %s from byte %d", row["name"], row["resume_offset"])
            return True
        return False

    def _fail_file(self, row: dict, error: str) -> None:
        log.error("input WARC file %s failed: %s", row["name"], error)
        self.progress.set_state(row["id"], "failed", error[:1000])
        self._count("files_failed")

    def _finish_reading(self, f: _OpenFile) -> None:
        try:
            f.stream.close()
        except Exception:  # noqa: BLE001
            pass
        self.reading_done.add(f.id)
        self.current = None
        self._maybe_done(f.id)

    def _maybe_done(self, file_id: int) -> None:
        if file_id not in self.reading_done:
            return
        if self._file_flight.get(file_id):
            return
        self.flush(force=True)
        self.progress.set_state(file_id, "done")
        self.reading_done.discard(file_id)
        self._count("files_done")
        log.info("input WARC file %s done", self.files.get(file_id, {}).get("name", file_id))

    # -- emitting ---------------------------------------------------------------------------------
    def next(self, now: float) -> Emission | None:
        """The next record to emit, or ``None`` when there is nothing to emit now."""
        if len(self.in_flight) >= self.max_in_flight and not self.retry:
            return None
        if self.retry:
            msg_id = self.retry.popleft()
            em = self.in_flight.get(msg_id)
            if em is not None:
                self._count("re-emitted")
                return em
        self.refresh(now)
        for _ in range(10000):  # bounded: skipped records and problems do not loop forever
            if self.current is None:
                if now < self._next_look or not self._open_next():
                    # nothing of this task's share to read: look again in a second (other
                    # tasks register the files they list)
                    self._next_look = max(self._next_look, now + 1.0)
                    return None
            f = self.current
            try:
                item = next(f.records)
            except StopIteration:
                self._finish_reading(f)
                continue
            except WARCReadError as exc:
                self.progress.add_problem(f.id, exc.offset, str(exc))
                self._count("read_errors")
                self._finish_reading(f)
                continue
            except Exception as exc:  # noqa: BLE001 - S3 gave up mid-file, a disk error...
                self._fail_file(f.row, f"read failed at byte {getattr(f.stream, 'pos', '?')}: "
                                f"{type(exc).__name__}: {exc}")
                try:
                    f.stream.close()
                except Exception:  # noqa: BLE001
                    pass
                self.current = None
                continue
            if isinstance(item, InputProblem):
                self.progress.add_problem(f.id, item.offset, item.message)
                self._count("problems")
                continue
            f.next_resume = item.next_resume
            if item.key in f.acked:
                self._count("skipped_acked")
                continue
            em = self._emission(f, item)
            self.in_flight[em.msg_id] = em
            self._file_flight.setdefault(f.id, {})[em.msg_id] = em.resume
            self._count("emitted")
            return em
        return None

    def _emission(self, f: _OpenFile, rec: InputRecord) -> Emission:
        md = record_metadata(rec, f.row["name"])
        md[FILE_ID] = [str(f.id)]
        if rec.problem:
            self.progress.add_problem(f.id, rec.offset, f"{rec.key}: {rec.problem}")
        self._count(f"records/{rec.type or 'unknown'}")
        if rec.is_http_response and rec.target_uri:
            if self.verify:  # checked here: the parser need not hash the record again
                md[wire.RAW_DIGESTS] = [rec.problem or ""]
            return Emission(f"{f.id}:{rec.key}", "default",
                            [rec.target_uri, wire.encode_content(rec.raw, self.binary), md],
                            f.id, rec.key, rec.resume_offset, rec.raw)
        # never sent: only copied (owler.warc.warc2warc.copying_feed)
        return Emission(f"{f.id}:{rec.key}", ARCHIVE_STREAM, [rec.target_uri, None, md],
                        f.id, rec.key, rec.resume_offset, rec.raw)

    # -- acks -------------------------------------------------------------------------------------
    def ack(self, msg_id: str) -> None:
        em = self.in_flight.pop(msg_id, None)
        if em is None:
            return
        self._file_flight.get(em.file_id, {}).pop(msg_id, None)
        self._acks.setdefault(em.file_id, []).append(em.key)
        self._count("acked")
        self._maybe_done(em.file_id)

    def fail(self, msg_id: str) -> None:
        em = self.in_flight.get(msg_id)
        if em is not None:
            em.values[2][wire.RAW_REPLAYED] = ["true"]
            self.retry.append(msg_id)
            self._count("failed")

    def requeue(self, msg_id: str) -> None:
        """Give out again a record that was never emitted (its copy was lost)."""
        if msg_id in self.in_flight:
            self.retry.append(msg_id)

    def flush(self, now: float | None = None, force: bool = False) -> None:
        """Record the acks so far and each file's resume point (every ``warc2warc.ack.flush`` s)."""
        now = time.time() if now is None else now
        if not force and now - self._last_flush < self.ack_flush:
            return
        self._last_flush = now
        if not self._acks:
            return
        resume = {}
        for file_id in self._acks:
            waiting = list(self._file_flight.get(file_id, {}).values())
            ahead = (self.current.next_resume if self.current is not None
                     and self.current.id == file_id else None)
            if file_id in self.reading_done and ahead is None:
                ahead = 1 << 62
            candidates = waiting + ([ahead] if ahead is not None else [])
            if candidates:
                resume[file_id] = min(candidates)
        acks, self._acks = self._acks, {}
        try:
            self.progress.record_acks(acks, resume)
        except Exception:
            # kept for the next flush (until then a crash only means these records come again)
            for file_id, keys in acks.items():
                self._acks.setdefault(file_id, [])[:0] = keys
            self._count("ack_flush_failed")
            raise
        if self.current is not None:
            for key in acks.get(self.current.id, ()):
                self.current.acked.add(key)

    def retry_done(self) -> None:
        """Mark done the files whose last ack came while the progress could not be written."""
        for file_id in list(self.reading_done):
            if self.current is None or self.current.id != file_id:
                self._maybe_done(file_id)

    # -- state --------------------------------------------------------------------------------------
    def idle(self) -> bool:
        """Nothing to read now and nothing in flight."""
        if self.in_flight or self.retry or self.current is not None:
            return False
        return not any(self.shard.owns(r["name"]) for r in self.progress.open_files())

    def _count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def close(self) -> None:
        self.flush(force=True)
        if self.current is not None:
            try:
                self.current.stream.close()
            except Exception:  # noqa: BLE001
                pass
