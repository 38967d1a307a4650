"""FetcherBolt: polite, multi-queue fetching (the engine is :class:`owler.fetcher.FetchEngine`).

Input: ``url, key, metadata`` grouped by ``key``, so one queue lives in one task and politeness
holds across tasks. Output: fetched pages on ``default`` (``url, content, metadata``, to the parser
and the WARC writer), statuses on ``status`` and redirect targets on ``outlinks``. Emits and acks
happen on the engine's thread, anchored to the input tuple; a full queue fails the tuple
(back-pressure, Storm replays it later).

Sitemaps found for a host (``sitemap.discovery``, and the seeds of the sitemap pipeline, see
:mod:`owler.fetcher`) go through the sitemap URL filters and the blacklists here
(:class:`owler.sitemaps.EntryGate`) and on ``status`` as DISCOVERED with ``isSitemap=true``,
anchored to the input tuple (per-URL metadata cannot ride the outlinks batch).

Counters: ``fetched`` (pages), ``bytes``, ``http/<code>`` (every HTTP answer), the status names
emitted, ``error.cause/<cause>`` (fetch errors without an HTTP answer), ``robots/fetched``,
``robots/allowed``, ``robots/denied``, ``robots/errors``, ``sitemaps/found``,
``sitemaps/<rejected|blacklisted>/<name>``, ``seeds``; gauges ``queued``, ``fetching`` (in
progress) and ``queues``.
"""

from __future__ import annotations

import logging

from streamparse import Bolt, Stream

from bolts.base import OwlerComponent
from owler import outlinks as outlink
from owler import wire
from owler.constants import (ERROR_CAUSE, FETCH_EXCEPTION, FETCH_STATUS_CODE, FETCHED_FIELDS,
                             OUTLINKS_FIELDS, OUTLINKS_STREAM, STATUS_FIELDS, STATUS_STREAM,
                             Status)
from owler.fetcher import FetchEngine, FetchItem, Outcome
from owler.sitemaps import EntryGate, sitemap_metadata

log = logging.getLogger("owler.fetcher")


class FetcherBolt(OwlerComponent, Bolt):
    outputs = [Stream(FETCHED_FIELDS), Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]
    auto_ack = False
    auto_anchor = False
    auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.engine = FetchEngine(storm_conf, self._emit_outcome)
        self.gate = None  # EntryGate, built on the first sitemap found
        self.engine.start()

    def process(self, tup):
        try:
            url, key, md = tup.values[0], tup.values[1], tup.values[2]
            item = FetchItem(str(url), str(key), dict(md or {}), tup)
        except (IndexError, TypeError, ValueError):  # not a partitioner tuple: drop it, loudly
            log.error("malformed tuple dropped: %r", tup.values)
            self.count("malformed")
            self.report_error(f"malformed tuple dropped: {tup.values!r:.300}")
            self.ack(tup)
            return
        if not self.engine.submit(item):
            self.count("queue_full")
            self.fail(tup)
        self.gauges["queued"] = self.engine.queued()
        self.write_stats()

    def process_tick(self, tup):
        self.gauges["queued"] = self.engine.queued()
        self.write_stats()

    def collect(self, counters, gauges):  # on the metrics thread too: engine reads are safe
        stats = dict(self.engine.stats)
        for name in ("fetched", "allowed", "denied", "error"):
            n = stats.get(f"robots_{name}")
            if n:
                counters["robots/errors" if name == "error" else f"robots/{name}"] = n
        gauges["queued"] = self.engine.queued()
        gauges["fetching"] = self.engine.queues.in_flight
        gauges["queues"] = self.engine.queues.num_queues

    def _emit_outcome(self, out: Outcome) -> None:
        tup = out.item.token
        try:
            if out.kind == "expired":
                self.count("expired")
                self.fail(tup)
                return
            code = out.metadata.get(FETCH_STATUS_CODE)
            if code:  # set by this fetch (never persisted); a stale error.cause may be there
                self.count(f"http/{code[0]}")
            elif out.kind == "status" and out.status is not Status.DISCOVERED:
                cause = (out.metadata.get(ERROR_CAUSE) or ["unknown"])[0]
                self.count(f"error.cause/{cause}")
                if cause == "exception":  # a bug in the fetch code, not the site: tell the operator
                    self.report_error(f"fetch of {out.item.url} failed: "
                                      f"{(out.metadata.get(FETCH_EXCEPTION) or ['?'])[0]}")
            if out.item.sitemaps is not None:
                self._emit_sitemaps(out, tup)
            if out.kind == "page":
                self.count("fetched")
                self.count("bytes", len(out.content))
                self.emit([out.item.url, wire.encode_content(out.content), out.metadata],
                          anchors=[tup])
            else:
                self.count(out.status.value)
                self.emit([out.item.url, out.metadata, out.status.value], anchors=[tup],
                          stream=STATUS_STREAM)
                if out.outlinks:
                    self.emit([out.item.url, out.metadata, outlink.encode(out.outlinks)],
                              anchors=[tup], stream=OUTLINKS_STREAM)
            self.ack(tup)
        except Exception as exc:  # noqa: BLE001 - a broken emit must not kill the loop: replayed
            log.exception("cannot emit the outcome for %s", out.item.url)
            self.report_error(f"cannot emit the outcome for {out.item.url}: "
                              f"{type(exc).__name__}: {exc}")
            try:
                self.fail(tup)
            except Exception:  # noqa: BLE001
                pass

    def _emit_sitemaps(self, out: Outcome, tup) -> None:
        if out.status is Status.DISCOVERED:
            self.count("seeds")
        if not out.item.sitemaps:
            return
        if self.gate is None:
            self.gate = EntryGate(self.conf)
        self.gate.blacklist.maybe_reload()
        source, source_md = out.item.url, out.item.metadata
        for target in out.item.sitemaps:
            kept, reason = self.gate.check(source, source_md, target)
            if kept is None:
                self.count(f"sitemaps/{reason}")
                continue
            self.count("sitemaps/found")
            self.emit([kept, sitemap_metadata(source, source_md, kept, self.conf),
                       Status.DISCOVERED.value], anchors=[tup], stream=STATUS_STREAM)

    def shutdown(self):
        self.engine.stop(timeout=2.0)
