"""ParserBolt: a fetched page → its FETCHED (or ERROR) status and ONE tuple with all its outlinks
(:class:`owler.parse.page.PageHandler`), those the URL filters and the blacklist let through
(:class:`owler.parse.gate.OutlinkGate`, as StormCrawler's parser filters its own outlinks).

Input ``url, content, metadata, key`` (``FETCHED_FIELDS``; a tuple without the key is read as
well), grouped on ``key`` by default (``parser.grouping``): the near-duplicate memory of a host
it meets first is seeded from the frontier by that key
(:class:`owler.parse.simhash.FrontierSeeds`, counters ``simhash/*``)."""

from __future__ import annotations

from collections import Counter

from streamparse import Bolt, Stream

from owler import outlinks as outlink
from owler import wire
from owler.constants import OUTLINKS_FIELDS, OUTLINKS_STREAM, STATUS_FIELDS, STATUS_STREAM
from owler.parse.gate import OutlinkGate
from owler.parse.filters import FAILED_KEY as FILTERS_FAILED
from owler.parse.page import PageHandler
from owler.parse.simhash import FrontierSeeds
from owler.task.component import StatusEmitter


class ParserBolt(StatusEmitter, Bolt):
    outputs = [Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.seeds = FrontierSeeds.from_conf(storm_conf)
        self.handler = PageHandler(storm_conf, self.seeds)
        self.gate = OutlinkGate.from_conf(storm_conf)

    def process(self, tup):
        values = tup.values
        url, content, md = values[0], values[1], values[2] or {}
        try:
            out = self.handler.handle_page(url, wire.decode_content(content), md,
                                           values[3] if len(values) > 3 else None)
        except Exception as exc:  # noqa: BLE001 - never let a page kill the bolt
            self.emit_error(url, md, exc)
            return
        self.count(out.status.value)
        self.count("outlinks", len(out.outlinks))
        if FILTERS_FAILED in out.metadata:  # named in the page's metadata too
            self.count("parse_filter_failed")
        links = out.outlinks
        if links:
            counts: Counter = Counter()
            links = self.gate.keep(url, out.metadata, map(outlink.split, links), counts)
            self.count_all(counts)
        self.emit_status(url, out.metadata, out.status, links)
        self.write_stats()

    def collect(self, counters, gauges):
        if self.seeds is not None:
            counters.update(self.seeds.counters)
        if self.handler.documents is not None:
            counters.update(self.handler.documents.counters)

    def shutdown(self):
        self.handler.close()  # the document worker
        if self.seeds is not None:
            self.seeds.close()
