"""ParserBolt: a fetched page → its FETCHED (or ERROR) status and ONE tuple with all its outlinks."""

from __future__ import annotations

from streamparse import Bolt, Stream

from bolts.base import OwlerComponent
from owler import outlinks as outlink
from owler import wire
from owler.constants import (ERROR_MESSAGE, ERROR_SOURCE, OUTLINKS_FIELDS, OUTLINKS_STREAM,
                             STATUS_FIELDS, STATUS_STREAM, Status)
from owler.metadata import set_value
from owler.parsing import PageHandler


class ParserBolt(OwlerComponent, Bolt):
    outputs = [Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.handler = PageHandler(storm_conf)

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            out = self.handler.handle_page(url, wire.decode_content(content), md)
        except Exception as exc:  # noqa: BLE001 - never let a page kill the bolt
            clean = wire.strip_transient(md)
            set_value(clean, ERROR_SOURCE, "parser")
            set_value(clean, ERROR_MESSAGE, f"{type(exc).__name__}: {exc}")
            self.count("error")
            self.report_error(f"parser failed on {url}: {type(exc).__name__}: {exc}")
            self.emit([url, clean, Status.ERROR.value], stream=STATUS_STREAM)
            return
        self.count(out.status.value)
        self.count("outlinks", len(out.outlinks))
        if out.outlinks:
            self.emit([url, out.metadata, outlink.encode(out.outlinks)], stream=OUTLINKS_STREAM)
        self.emit([url, out.metadata, out.status.value], stream=STATUS_STREAM)
        self.write_stats()
