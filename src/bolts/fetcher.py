"""FetcherBolt: polite, multi-queue fetching (:class:`owler.fetch.engine.FetchEngine`).

Input ``url, key, metadata`` grouped by ``key`` (one queue in one task: politeness holds across
tasks); a page goes on with that ``key`` as its fourth value (``FETCHED_FIELDS``), which the
parsers are grouped on (``parser.grouping``). A URL that a blacklist names by now (an opt-out
added after it entered the frontier) is not fetched: ERROR with ``error.cause=blacklist:<list>``,
checked by the engine just before the fetch (:meth:`owler.blacklist.Blacklist.refusal`). Output:
pages on ``default``, statuses on ``status``, redirect targets on ``outlinks``, and the sitemaps
found for a host (checked by :meth:`owler.sitemap.processor.EntryGate.found`) as DISCOVERED on
``status``. Emits and acks happen on the engine's thread, anchored to the input; a full queue
fails the tuple (back-pressure). Counters: ``Outcome.counters``, ``engine.snapshot``.

Unless ``warc.enabled: false``, a fetched page is archived first
(:class:`owler.warc.crawl.archiver.Archiver`, on a thread of its own, counters ``warc/*``): the
page goes to the parser, and its tuple is acked, only once its WARC records are stored; a page
whose records could not be stored is failed. A page the browser rendered
(:mod:`owler.fetch.browser`) goes to the parser as its rendered DOM
(:func:`owler.fetch.browser.for_parser`), its raw response and the DOM archived first.
"""

from __future__ import annotations

import logging
import time

from streamparse import Bolt, Stream

from owler import wire
from owler.blacklist import Blacklist
from owler.constants import (FETCH_EXCEPTION, FETCHED_FIELDS, OUTLINKS_FIELDS, OUTLINKS_STREAM,
                             STATUS_FIELDS, STATUS_STREAM, Status)
from owler.fetch.browser import for_parser
from owler.fetch.engine import FetchEngine, FetchItem, Outcome
from owler.sitemap.processor import EntryGate
from owler.task.component import StatusEmitter
from owler.warc.crawl.archiver import Archiver, Page, archiving
from owler.warc.storage.files import partition_name

log = logging.getLogger("owler.fetcher")


class FetcherBolt(StatusEmitter, Bolt):
    outputs = [Stream(FETCHED_FIELDS), Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]
    auto_ack = auto_anchor = auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        blacklist = Blacklist.from_conf(storm_conf)  # checked just before each fetch
        self.engine = FetchEngine(storm_conf, self._emit_outcome,
                                  refuse=lambda url: blacklist.refusal(url, time.monotonic()))
        self.gate = None  # EntryGate, built on the first sitemap found
        self.archive = None
        if archiving(storm_conf):
            self.archive = Archiver(storm_conf, partition_name(self.task_id), self._pass_on,
                                    self._not_archived, self._count_warc, self.report_error)
        self.engine.start()

    def process(self, tup):
        try:
            item = FetchItem(str(tup.values[0]), str(tup.values[1]), dict(tup.values[2] or {}), tup)
        except (IndexError, TypeError, ValueError):  # not a partitioner tuple: drop it, loudly
            log.error("malformed tuple dropped: %r", tup.values)
            self.count("malformed")
            self.report_error(f"malformed tuple dropped: {tup.values!r:.300}")
            self.ack(tup)
            return
        if not self.engine.submit(item):
            self.count("queue_full")
            self.fail(tup)
        self.write_stats()

    def process_tick(self, tup):
        if self.archive is not None:
            self.archive.tick()
        self.write_stats()

    def collect(self, counters, gauges):  # on the metrics thread too: the engine's are safe
        more, now = self.engine.snapshot()
        counters.update(more)
        gauges.update(now)
        if self.archive is not None:
            gauges["warc/pending"] = self.archive.pending

    def _emit_outcome(self, out: Outcome) -> None:
        tup, url, md = out.item.token, out.item.url, out.metadata
        try:
            counts = out.counters()
            self.count_all(counts)
            if out.kind in ("expired", "held"):  # back to the frontier: it serves them again
                self.fail(tup)
                return
            if "error.cause/exception" in counts:  # a bug in the fetch code, not the site
                self.report_error(f"fetch of {url} failed: {(md.get(FETCH_EXCEPTION) or ['?'])[0]}")
            if out.item.sitemaps:
                self.gate = self.gate or EntryGate(self.conf)
                kept, sitemap_counts = self.gate.found(url, out.item.metadata, out.item.sitemaps)
                self.count_all(sitemap_counts)
                for sitemap, sitemap_md in kept:
                    self.emit([sitemap, sitemap_md, Status.DISCOVERED.value], anchors=[tup],
                              stream=STATUS_STREAM)
            if out.kind == "page":
                page = Page(url, out.content, md, tup)
                if self.archive is not None:
                    self.archive.submit(page)  # passed on once archived: _pass_on
                else:
                    self._pass_on(page)
                return
            self.emit_status(url, md, out.status, out.outlinks, [tup])
            self.ack(tup)
        except Exception as exc:  # noqa: BLE001 - a broken emit must not kill the loop: replayed
            log.exception("cannot emit the outcome for %s", url)
            self.report_error(f"cannot emit the outcome for {url}: {type(exc).__name__}: {exc}")
            try:
                self.fail(tup)
            except Exception:  # noqa: BLE001
                pass

    def _pass_on(self, page: Page) -> None:
        """To the parser with its queue's partition key (the input's, not a finer
        ``fetcher.queue.mode`` queue: the parsers are grouped on the frontier's key), the page's
        tuple acked (on the archiver's thread once it is stored)."""
        content, md = for_parser(page.payload, page.metadata)  # a rendered page: its DOM
        self.emit([page.url, wire.encode_content(content, self.binary), md,
                   page.token.values[1]], anchors=[page.token])
        self.ack(page.token)

    def _count_warc(self, name: str, n: int) -> None:
        self.count("warc/" + name, n)

    def _not_archived(self, page: Page, reason: str) -> None:
        self.report_error(reason)
        self.fail(page.token)  # Storm replays it

    def shutdown(self):
        self.engine.stop(timeout=2.0)
        if self.archive is not None:
            self.archive.close()
