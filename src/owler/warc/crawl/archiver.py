"""Archiver: the fetcher's WARC output, written on a thread of its own.

A page the fetcher fetched is handed to :meth:`Archiver.submit`; a thread writes its request and
response records (:meth:`owler.warc.storage.files.WARCWriter.write_page`: the deflate, which
releases the GIL, runs beside the fetch loop) and calls ``stored(page)`` once the file holds them
for good, in the order pages came. Only then does the fetcher pass the page on to the parser and ack
its tuple, so a page's FETCHED status is never written for a capture that was lost: a fetcher killed
with pages in the queue, or written but not yet stored, never acked them, and Storm replays them. A
page whose records cannot be written or stored goes to ``lost(page, reason)``: the fetcher fails its
tuple.

Why in the fetcher and not a bolt of its own: a page then crosses the worker JVM once on its way to
the parser instead of twice (fetcher → writer → parser), and no process decodes 60 KB messages
only to write them (docs/benchmarks-history.md, issue 20, fifth session).

Output (:func:`owler.warc.storage.s3_upload.open_output`):

- ``warc.dir`` (no ``warc.s3.bucket``): records are written and flushed before ``stored`` is
  called; files end in ``.open`` until closed, and ``.open`` files a crash left are finalized
  when the archiver opens (:class:`owler.warc.storage.files.WARCWriter`).
- ``warc.s3.bucket`` with ``warc.s3.stream: true``: files are S3 multipart uploads, nothing on the
  node's disk (:mod:`owler.warc.storage.s3_stream`). A page is stored once the part holding its
  records is; the archiver stores what it holds when its oldest page has waited ``warc.s3.max.age``
  seconds (10), checked on :meth:`Archiver.tick`. Pages of a part S3 refused are lost. A page stored
  in the last ``warc.s3.dedup.window`` seconds (600) by this partition, before a crash or on another
  node, is stored without being archived again when Storm replays it: the fetcher's grouping by
  queue sends the replay to the task of the same partition. A page of a URL written and not yet
  stored (Storm delivered the URL twice: a replay racing the first copy, as after a node's loss) is
  not written again either: it waits for the first copy and shares its fate, stored or lost.
- ``warc.s3.stream: false``: local files as above, each uploaded once closed
  (:class:`owler.warc.storage.s3_upload.Uploader`).

Counters (through ``count``): ``records``, ``revisits``, ``bytes``, ``write_failed``,
``replays_not_archived``; :attr:`Archiver.pending` is the pages written and not yet stored (and
those waiting for an earlier copy of their URL) plus those queued.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from owler import conf as C
from owler import wire
from owler.constants import AGENT_NAME_KEY, WARC_ENABLED_KEY
from owler.warc.storage.s3_stream import MAX_AGE_KEY, S3StreamWriter
from owler.warc.storage.s3_upload import open_output

log = logging.getLogger("owler.warc")

#: the most pages waiting for the thread; :meth:`Archiver.submit` blocks beyond it (the disk or
#: S3 is slower than the fetching). Storm's ``topology.max.spout.pending`` bounds them first.
QUEUE_SIZE = 1000

_TICK = object()
_CLOSE = object()


def archiving(conf: Mapping[str, Any]) -> bool:
    """Whether a crawl archives what it fetches (``warc.enabled``, true by default)."""
    return C.get_bool(conf, WARC_ENABLED_KEY, True)


@dataclass(slots=True)
class Page:
    url: str
    payload: bytes
    metadata: dict
    token: Any  # the fetcher's tuple


class Archiver:
    def __init__(self, conf: Mapping[str, Any], partition: str,
                 stored: Callable[[Page], None], lost: Callable[[Page, str], None],
                 count: Callable[[str, int], None], report: Callable[[str], None]) -> None:
        agent = {"http-header-user-agent": C.get_str(conf, AGENT_NAME_KEY, "")}
        self.writer, self.uploader = open_output(conf, partition, agent)
        self.streaming = isinstance(self.writer, S3StreamWriter)
        self.max_age = C.get_float(conf, MAX_AGE_KEY, 10.0)
        self._stored, self._lost, self._count, self._report = stored, lost, count, report
        self._queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._written: deque = deque()  # (page, file name, end offset, written at)
        #: streaming: URLs written and not yet stored -> the later pages of the same URL, which
        #: wait for that copy instead of being archived again
        self._waiting: dict[str, list[Page]] = {}
        self._n_waiting = 0  # pages in the lists of _waiting
        # pages submitted and taken by the thread (each counter written by one thread only; the
        # queue's size would count the ticks too)
        self._submitted = self._taken = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="owler-warc", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        return len(self._written) + self._n_waiting + self._submitted - self._taken

    def submit(self, page: Page) -> None:
        """Queue a page; ``stored`` or ``lost`` is called with it later, on the archiver's
        thread. RuntimeError once closed."""
        if self._closed:
            raise RuntimeError("the WARC archiver is closed")
        self._submitted += 1
        self._queue.put(page)

    def tick(self) -> None:
        """Rotate a file that is old enough, store what has waited ``warc.s3.max.age``."""
        if not self._closed:
            self._queue.put(_TICK)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, then close the files (the pages not yet handed back stay
        unacked: Storm replays them)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_CLOSE)
        self._thread.join(timeout)
        if self._thread.is_alive():  # still writing: its open file is recovered at the next start
            log.warning("the WARC archiver did not finish within %g s; files left open", timeout)
            return
        self.writer.close()
        if self.uploader is not None:
            self.uploader.close()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _CLOSE:
                return
            now = time.time()
            try:
                if item is _TICK:
                    oldest = self._written[0][3] if self._written else now
                    if self.streaming and now - oldest >= self.max_age:
                        self.writer.make_durable()
                    self.writer.maybe_rotate(now)
                else:
                    self._taken += 1
                    self._write(item, now)
                self._release(now)
            except Exception as exc:  # noqa: BLE001 - the thread must live: its pages time out
                log.exception("WARC archiver step failed")
                self._report(f"WARC archiver: {type(exc).__name__}: {exc}")

    def _write(self, page: Page, now: float) -> None:
        if self.streaming and self.writer.recently_archived(page.url, now):
            self._count("replays_not_archived", 1)  # stored before a crash; Storm replayed it
            self._hand_back(self._stored, page)
            return
        if self.streaming and page.url in self._waiting:  # a copy written, not yet stored
            self._waiting[page.url].append(page)
            self._n_waiting += 1
            return
        try:
            n = self.writer.write_page(page.url, page.payload, page.metadata)
        except Exception as exc:  # noqa: BLE001 - disk full, S3 away: lost, Storm replays the page
            log.exception("cannot archive %s", page.url)
            self._count("write_failed", 1)
            reason = f"cannot write WARC records for {page.url}: {type(exc).__name__}: {exc}"
            self._hand_back(self._lost, page, reason)
            return
        rec = self.writer.last_record
        self._written.append((page, rec.filename, rec.offset + rec.length, now))
        if self.streaming:
            self._waiting[page.url] = []
        self._count("revisits" if page.metadata.get(wire.RAW_REVISIT) else "records", 1)
        self._count("bytes", n)

    def _release(self, now: float) -> None:
        """Hand back, in order, the pages whose records are stored and those that never will be."""
        written = self._written
        while written:
            page, name, end, _ = written[0]
            if self.writer.durable(name, end):
                written.popleft()
                if self.streaming:
                    self.writer.archived(page.url, now)
                self._hand_back(self._stored, page)
                for again in self._waiting.pop(page.url, ()):
                    self._n_waiting -= 1
                    self._count("replays_not_archived", 1)
                    self._hand_back(self._stored, again)
            elif self.writer.lost(name, end):
                written.popleft()
                self._count("write_failed", 1)
                reason = f"WARC records of {page.url} could not be stored in {name}"
                self._hand_back(self._lost, page, reason)
                for again in self._waiting.pop(page.url, ()):
                    self._n_waiting -= 1
                    self._hand_back(self._lost, again, reason)
            else:
                break

    def _hand_back(self, to: Callable, page: Page, *reason: str) -> None:
        try:
            to(page, *reason)
        except Exception:  # noqa: BLE001 - the callback's failure is its own: the tuple times out
            log.exception("cannot hand back %s", page.url)
