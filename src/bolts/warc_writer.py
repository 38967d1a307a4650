"""WARCWriterBolt: archives every fetched page (request + response records) in rotated WARC files.

Wiring (:func:`writer_spec`, used by the topologies): fetcher → writer → parser. The writer passes
each page on once its records are stored, so a page's status is only written after its capture is
safe: a crawl never holds a FETCHED page whose capture was lost with a node, or with a writer
process that died while the page was on its way to it (test_cluster.py kills one). Streamed to S3
(``warc.s3.bucket`` with ``warc.s3.stream: true``) pages are grouped by URL, so Storm's replay of a
page meets the task that stored it; otherwise local or shuffle grouping keeps a page in its worker.
(The writer once sat beside the parser on local disks, one hop fewer; BENCHMARKS.md, issue 16,
measured the hop within the run-to-run spread, and the kill -9 test lost captures with it.)

Output (:func:`owler.warc.upload.open_output`):

- ``warc.dir`` (no ``warc.s3.bucket``): records are written and flushed before the tuple is
  acked; files end in ``.open`` until closed, and ``.open`` files a crash left are finalized
  when the bolt starts (:class:`owler.warc.writer.WARCWriter`).
- ``warc.s3.bucket`` (``warc.s3.stream: true``): files are S3 multipart uploads, nothing on the
  node's disk (:mod:`owler.warc.stream`). A page goes on, and its tuple is acked, once the part
  holding its records is stored; the bolt stores what it holds when its oldest page has waited
  ``warc.s3.max.age`` seconds (10). Pages whose part S3 refused are failed (Storm replays them).
  A page stored in the last ``warc.s3.dedup.window`` seconds (600) by this task, or by the task
  before it on another node, is passed on unarchived when Storm replays it; the fetcher → writer
  grouping by URL sends a replay to the task that stored it.
- ``warc.s3.stream: false``: local files as above, each uploaded once closed
  (:class:`owler.warc.upload.Uploader`).
"""

from __future__ import annotations

import logging
import time
from collections import deque

from streamparse import Bolt, Grouping

from owler import conf as C
from owler import wire
from owler.constants import AGENT_NAME_KEY, FETCHED_FIELDS, WARC_ENABLED_KEY
from owler.task.component import OwlerComponent
from owler.warc.stream import MAX_AGE_KEY, S3StreamWriter, stream_enabled
from owler.warc.upload import open_output
from owler.warc.writer import partition_name

log = logging.getLogger("owler.warc")

def writer_spec(fetcher, conf: dict, tasks: int, config: dict):
    """The ``warc`` component of a crawl topology, fed by ``fetcher``; the parser reads from it.
    None with ``warc.enabled: false``: nothing is archived and the parser reads from the fetcher
    (:func:`pages_from`)."""
    if not archiving(conf):
        return None
    grouping = Grouping.fields("url") if stream_enabled(conf) else Grouping.LOCAL_OR_SHUFFLE
    return WARCWriterBolt.spec(name="warc", par=tasks, config=config, inputs={fetcher: grouping})


def archiving(conf: dict) -> bool:
    return C.get_bool(conf, WARC_ENABLED_KEY, True)


def pages_from(warc, fetcher):
    """The component the parser takes fetched pages from: the WARC writer, if there is one."""
    return fetcher if warc is None else warc


class WARCWriterBolt(OwlerComponent, Bolt):
    outputs = FETCHED_FIELDS
    auto_ack = auto_fail = auto_anchor = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        agent = {"http-header-user-agent": C.get_str(storm_conf, AGENT_NAME_KEY, "")}
        self.writer, self.uploader = open_output(storm_conf, partition_name(self.task_id), agent)
        self.streaming = isinstance(self.writer, S3StreamWriter)
        self.max_age = C.get_float(storm_conf, MAX_AGE_KEY, 10.0)
        self.pending: deque = deque()  # (tuple, file name, end offset, written at)

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        now = time.time()
        if self.streaming and self.writer.recently_archived(url, now):
            self.count("replays_not_archived")  # stored before a crash; Storm replayed it
            self.pass_on(tup)
            return
        try:
            n = self.writer.write_page(url, wire.decode_content(content), md)
        except Exception as exc:  # noqa: BLE001 - disk full, S3 away: fail, Storm replays the page
            log.exception("cannot archive %s", url)
            self.count("write_failed")
            self.report_error(f"cannot write WARC records for {url}: {type(exc).__name__}: {exc}")
            self.fail(tup)
            return
        rec = self.writer.last_record
        self.pending.append((tup, rec.filename, rec.offset + rec.length, now))
        self.count("revisits" if md.get(wire.RAW_REVISIT) else "records")
        self.count("bytes", n)
        self.release(now)
        self.write_stats()

    def process_tick(self, tup):
        now = time.time()
        if self.streaming and self.pending and now - self.pending[0][3] >= self.max_age:
            self.writer.make_durable()
        self.writer.maybe_rotate(now)
        self.release(now)
        self.write_stats()

    def release(self, now: float) -> None:
        """Pass on the pages whose records are stored; fail those that never will be."""
        while self.pending:
            tup, name, end, _ = self.pending[0]
            if self.writer.durable(name, end):
                self.pending.popleft()
                if self.streaming:
                    self.writer.archived(tup.values[0], now)
                self.pass_on(tup)
            elif self.writer.lost(name, end):
                self.pending.popleft()
                self.count("write_failed")
                self.report_error(f"WARC records of {tup.values[0]} could not be stored in {name}")
                self.fail(tup)
            else:
                break
        self.gauges["pending"] = len(self.pending)

    def pass_on(self, tup):
        self.emit(tup.values, anchors=[tup])
        self.ack(tup)

    def shutdown(self):
        self.writer.close()
        if self.uploader is not None:
            self.uploader.close()
