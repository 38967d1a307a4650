"""WARCWriterBolt: archives every fetched page (request + response records) in rotated WARC files.

A tuple is acked after its records are written and flushed; files being written end in ``.open``
and are renamed when closed (rotation by size/time, and at shutdown). Files left ``.open`` by a
crash are repaired and finalized when the bolt starts. With ``warc.s3.bucket`` every finished file
is uploaded to S3 (owler.warc.upload), those an earlier run left behind included.
"""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from bolts.base import OwlerComponent
from owler import conf as C
from owler import wire
from owler.warc.upload import Uploader
from owler.warc.writer import WarcWriter, recover_open_files

log = logging.getLogger("owler.warc")


class WARCWriterBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = False
    auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        directory = C.get_str(storm_conf, "warc.dir", ".work/warc")
        prefix = C.get_str(storm_conf, "warc.prefix", "OWLER")
        partition = f"{self.task_id:02d}" if isinstance(self.task_id, int) else str(self.task_id)
        recovered = recover_open_files(directory, prefix=prefix, partition=partition)
        if recovered:
            log.warning("finalized %d WARC files left open by an earlier run", len(recovered))
        # finished files go to S3 when warc.s3.bucket is set (those of an earlier run too)
        self.uploader = Uploader.from_conf(storm_conf)
        if self.uploader is not None:
            self.uploader.submit_leftovers(directory, prefix, partition)
        self.writer = WarcWriter.from_conf(
            storm_conf, partition,
            extra_info={"http-header-user-agent": C.get_str(storm_conf, "http.agent.name", "")},
            on_close=self.uploader.submit if self.uploader is not None else None)

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            n = self._write(url, content, md)
        except Exception as exc:  # noqa: BLE001 - e.g. disk full: fail, Storm replays the page
            log.exception("cannot archive %s", url)
            self.count("write_failed")
            self.report_error(f"cannot write WARC records for {url}: {type(exc).__name__}: {exc}")
            self.fail(tup)
            return
        self.ack(tup)
        self.count("records")
        self.count("bytes", n)
        self.write_stats()

    def _write(self, url, content, md) -> int:
        payload = wire.decode_content(content)
        fetch_time = float((md.get(wire.RAW_FETCH_TIME) or ["0"])[0]) or None
        request = (md.get(wire.RAW_REQUEST) or [None])[0]
        return self.writer.write_exchange(
            url,
            fetch_time=fetch_time,
            request_line_and_headers=request.encode("latin-1") if request else None,
            status_line=(md.get(wire.RAW_STATUS_LINE) or ["HTTP/1.1 200 OK"])[0],
            response_headers=wire.decode_headers(md.get(wire.RAW_HEADERS)),
            payload=payload,
            ip=(md.get(wire.RAW_IP) or [None])[0],
            truncated=(md.get(wire.RAW_TRUNCATED) or [None])[0],
        )

    def process_tick(self, tup):
        self.writer.maybe_rotate(time.time())
        self.write_stats()

    def shutdown(self):
        self.writer.close()
        if self.uploader is not None:
            self.uploader.close()
