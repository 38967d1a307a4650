"""SitemapParserBolt: a fetched sitemap → its entries (DISCOVERED) and its own status; any other
page passes on unchanged to the HTML parser (StormCrawler's ``SiteMapParserBolt``).

Input: the fetcher's ``url, content, metadata, key`` (``FETCHED_FIELDS``; a tuple without the key
is read as well). A document is a sitemap when its metadata says
``isSitemap=true`` (or, with ``sitemap.sniffContent``, by the sitemaps.org namespace): it is
parsed by :class:`owler.sitemap.processor.SitemapProcessor`, every kept entry is emitted on
``status`` as ``(url, metadata, DISCOVERED)`` and then the sitemap itself as FETCHED (FETCH_ERROR
with ``error.cause`` when it is not a usable sitemap), all anchored to the input tuple, which is
acked when this returns: the status updater acks each child only after its write is durable, so
the sitemap's tuple tree completes only when every entry is stored (a failed write replays the
whole sitemap; its entries are then known URLs and cost no second write). Other documents go on
the default stream with ``isSitemap=false`` and their key (none when they came without it), which
the HTML parser's input is grouped on (``parser.grouping``).

The per-host budgets are counted in the frontier (shared by every task of every node); when it
cannot be reached the sitemap's tuple is failed, and Storm replays it later.

Counters: ``sitemaps``, ``pages`` (passed on), ``urls``/``sitemaps`` (entries emitted),
``kind/<urlset|sitemapindex|text|rss|atom>``, ``error/<cause>``, ``dropped/<why>``,
``rejected/<filter>``, ``blacklisted/<list>``, ``truncated/<why>``, ``host_budget``,
``parse_ms``.
"""

from __future__ import annotations

import logging

from streamparse import Bolt, Stream

from owler import wire
from owler.constants import FETCHED_FIELDS, IS_SITEMAP, STATUS_FIELDS, STATUS_STREAM, Status
from owler.frontier import FrontierError, open_frontier
from owler.sitemap.processor import ERROR_SOURCE_VALUE, SitemapProcessor
from owler.task.component import StatusEmitter

log = logging.getLogger("owler.sitemap")


class SitemapParserBolt(StatusEmitter, Bolt):
    outputs = [Stream(FETCHED_FIELDS), Stream(STATUS_FIELDS, name=STATUS_STREAM)]
    auto_ack = auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.frontier = open_frontier(storm_conf)  # the host budgets
        self.processor = SitemapProcessor(storm_conf, budgets=self.frontier)

    def process(self, tup):
        try:
            self.handle(tup)
        except FrontierError as exc:  # the budgets cannot be charged: Storm replays the sitemap
            self.count("budget_unavailable")
            self.report_error(f"sitemap host budgets: {exc}")
            self.fail(tup)
            return
        self.ack(tup)

    def handle(self, tup):
        values = tup.values
        url, content, md = values[0], values[1], dict(values[2] or {})
        try:
            payload = wire.decode_content(content)
            if not self.processor.is_sitemap(md, payload):
                md[IS_SITEMAP] = ["false"]
                self.count("pages")
                self.emit([url, content, md, values[3] if len(values) > 3 else None],
                          anchors=[tup])
                return
            self.count("sitemaps")
            self.processor.gate.blacklist.maybe_reload()
            out = self.processor.process(url, payload, md)
            for entry_url, entry_md in out.entries:
                self.emit([entry_url, entry_md, Status.DISCOVERED.value], stream=STATUS_STREAM,
                          anchors=[tup])
            self.count(out.status.value)
            self.emit_status(url, out.metadata, out.status, anchors=[tup])
        except FrontierError:
            raise
        except Exception as exc:  # noqa: BLE001 - never let a document kill the bolt
            log.exception("sitemap parsing failed on %s", url)
            self.emit_error(url, md, exc, source=ERROR_SOURCE_VALUE, cause="exception",
                            counter="error/exception")
        finally:
            self.write_stats()

    def collect(self, counters, gauges):
        counters.update(dict(self.processor.counters))

    def shutdown(self):
        self.frontier.close()
