"""WARCWriterBolt: archives every fetched page (request + response records) in rotated WARC files
(:class:`owler.warc.writer.WARCWriter`).

A tuple is acked after its records are written and flushed; files being written end in ``.open``
and are renamed when closed (rotation by size/time, and at shutdown). Files left ``.open`` by a
crash are finalized when the bolt starts, and with ``warc.s3.bucket`` every finished file is
uploaded to S3, those an earlier run left behind included (:func:`owler.warc.upload.open_output`).
"""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from owler import conf as C
from owler import wire
from owler.constants import AGENT_NAME_KEY
from owler.task.component import OwlerComponent
from owler.warc.upload import open_output
from owler.warc.writer import partition_name

log = logging.getLogger("owler.warc")


class WARCWriterBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        agent = {"http-header-user-agent": C.get_str(storm_conf, AGENT_NAME_KEY, "")}
        self.writer, self.uploader = open_output(storm_conf, partition_name(self.task_id), agent)

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            n = self.writer.write_page(url, wire.decode_content(content), md)
        except Exception as exc:  # noqa: BLE001 - e.g. disk full: fail, Storm replays the page
            log.exception("cannot archive %s", url)
            self.count("write_failed")
            self.report_error(f"cannot write WARC records for {url}: {type(exc).__name__}: {exc}")
            self.fail(tup)
            return
        self.ack(tup)
        self.count("revisits" if md.get(wire.RAW_REVISIT) else "records")
        self.count("bytes", n)
        self.write_stats()

    def process_tick(self, tup):
        self.writer.maybe_rotate(time.time())
        self.write_stats()

    def shutdown(self):
        self.writer.close()
        if self.uploader is not None:
            self.uploader.close()
