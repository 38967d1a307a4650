"""WARCParserBolt: an archived HTTP response → what a fetch of it would have given: its status
(FETCHED, REDIRECTION, FETCH_ERROR, or ERROR for a damaged record) and, for a page, its outlinks as
ONE tuple, exactly as the explorative crawl's parser emits them
(:class:`owler.warc.warc2warc.record_as_page.RecordParser`, then
:class:`owler.parse.page.PageHandler`). The record itself was archived by the WARC spout before it
was emitted (:mod:`owler.warc.warc2warc.copying_feed`).

The outlinks (a page's links, a redirection's target) pass the URL filters and the blacklist here,
in this process (:class:`owler.parse.gate.OutlinkGate`), and go straight to the status updater.
An outlink this task sent on recently is not sent again (``warc2warc.outlinks.cache.size``, default
100000 URLs; 0 = off; see :class:`owler.outlinks.RecentlySent`), except in a record the spout
replays.

Input: the WARC spout's ``url, content, metadata, key`` (``FETCHED_FIELDS``), grouped on ``key`` by
default (``parser.grouping``); a host's near-duplicate memory is seeded from the frontier
(:class:`owler.parse.simhash.FrontierSeeds`, counters ``simhash/*``)."""

from __future__ import annotations

from collections import Counter

from streamparse import Bolt, Stream

from owler import conf as C
from owler import outlinks as outlink
from owler import wire
from owler.constants import (FETCH_STATUS_CODE, OUTLINKS_FIELDS, OUTLINKS_STREAM, STATUS_FIELDS,
                             STATUS_STREAM)
from owler.parse.gate import OutlinkGate
from owler.parse.filters import FAILED_KEY as FILTERS_FAILED
from owler.parse.page import PageHandler
from owler.parse.simhash import FrontierSeeds
from owler.task.component import StatusEmitter
from owler.warc.warc2warc.record_as_page import RecordParser


class WARCParserBolt(StatusEmitter, Bolt):
    outputs = [Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.records = RecordParser(storm_conf)
        self.seeds = FrontierSeeds.from_conf(storm_conf)
        self.pages = PageHandler(storm_conf, self.seeds)
        self.gate = OutlinkGate.from_conf(storm_conf)
        self.sent = outlink.RecentlySent(
            C.get_int(storm_conf, "warc2warc.outlinks.cache.size", 100000))

    def process(self, tup):
        values = tup.values
        url, content, md = values[0], values[1], values[2] or {}
        try:
            rec = self.records.outcome(url, wire.decode_content(content), md)
            if rec.kind == "archive":
                self.count("not_parsed")
                return
            if rec.kind == "status":
                self.count(f"http/{(rec.metadata.get(FETCH_STATUS_CODE) or ['-'])[0]}")
                status, out_md, found = rec.status, wire.strip_transient(rec.metadata), rec.outlinks
            else:
                page = self.pages.handle_page(url, rec.content, rec.metadata,
                                              values[3] if len(values) > 3 else None)
                status, out_md, found = page.status, page.metadata, page.outlinks
                self.count("outlinks", len(found))
                if FILTERS_FAILED in page.metadata:  # named in the page's metadata too
                    self.count("parse_filter_failed")
            outlinks = []
            if found:
                counts: Counter = Counter()
                outlinks = self.gate.keep_new(url, out_md, map(outlink.split, found), self.sent,
                                              wire.RAW_REPLAYED in md, counts)
                self.count_all(counts)
        except Exception as exc:  # noqa: BLE001 - never let a record kill the bolt
            self.emit_error(url, md, exc)
            return
        self.count(status.value)
        self.emit_status(url, out_md, status, outlinks)
        self.write_stats()

    def collect(self, counters, gauges):
        if self.seeds is not None:
            counters.update(self.seeds.counters)
        if self.pages.documents is not None:
            counters.update(self.pages.documents.counters)

    def shutdown(self):
        self.pages.close()  # the document worker
        if self.seeds is not None:
            self.seeds.close()
