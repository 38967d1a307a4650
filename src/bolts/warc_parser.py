"""WarcParserBolt: an archived HTTP response → what a fetch of it would have given: its status
(FETCHED, REDIRECTION, FETCH_ERROR, or ERROR for a damaged record) and, for a page, its outlinks as
ONE tuple, exactly as the explorative crawl's parser emits them (owler.warc2warc.RecordParser, then
owler.parsing.PageHandler). The record itself is archived by the WARC copy bolt.

An outlink this task sent on recently is not sent again (``warc2warc.outlinks.cache.size``, default
100000 URLs; 0 = off; see owler.outlinks.RecentlySent), except in a record the spout replays."""

from __future__ import annotations

from streamparse import Bolt, Stream

from bolts.base import OwlerComponent
from owler import conf as C
from owler import outlinks as outlink
from owler import wire
from owler.constants import (ERROR_MESSAGE, ERROR_SOURCE, OUTLINKS_FIELDS, OUTLINKS_STREAM,
                             STATUS_FIELDS, STATUS_STREAM, Status)
from owler.metadata import set_value
from owler.parsing import PageHandler
from owler.warc2warc import RecordParser


class WarcParserBolt(OwlerComponent, Bolt):
    outputs = [Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.records = RecordParser(storm_conf)
        self.pages = PageHandler(storm_conf)
        self.sent = outlink.RecentlySent(
            C.get_int(storm_conf, "warc2warc.outlinks.cache.size", 100000))

    def process(self, tup):
        url, content, md = tup.values[0], tup.values[1], tup.values[2] or {}
        try:
            rec = self.records.outcome(url, wire.decode_content(content), md)
            if rec.kind == "archive":
                self.count("not_parsed")
                return
            if rec.kind == "status":
                self.count(f"http/{(rec.metadata.get('fetch.statusCode') or ['-'])[0]}")
                status, out_md, outlinks = rec.status, wire.strip_transient(rec.metadata), \
                    rec.outlinks
            else:
                page = self.pages.handle_page(url, rec.content, rec.metadata)
                status, out_md = page.status, page.metadata
                self.count("outlinks", len(page.outlinks))
                outlinks = self.sent.new(page.outlinks, wire.RAW_REPLAYED in md)
                self.count("outlinks_repeated", len(page.outlinks) - len(outlinks))
        except Exception as exc:  # noqa: BLE001 - never let a record kill the bolt
            out_md = wire.strip_transient(md)
            set_value(out_md, ERROR_SOURCE, "parser")
            set_value(out_md, ERROR_MESSAGE, f"{type(exc).__name__}: {exc}")
            self.count("error")
            self.report_error(f"parser failed on {url}: {type(exc).__name__}: {exc}")
            self.emit([url, out_md, Status.ERROR.value], stream=STATUS_STREAM)
            return
        self.count(status.value)
        if outlinks:
            self.emit([url, out_md, outlink.encode(outlinks)], stream=OUTLINKS_STREAM)
        self.emit([url, out_md, status.value], stream=STATUS_STREAM)
        self.write_stats()
