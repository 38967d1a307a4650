"""FetcherBolt: polite, multi-queue fetching (the engine is :class:`owler.fetcher.FetchEngine`).

Input: ``url, key, metadata`` grouped by ``key``, so one queue lives in one task and politeness
holds across tasks. Output: fetched pages on ``default`` (``url, content, metadata``, to the parser
and the WARC writer), statuses on ``status`` and redirect targets on ``outlinks``. Emits and acks
happen on the engine's thread, anchored to the input tuple; a full queue fails the tuple
(back-pressure, Storm replays it later).
"""

from __future__ import annotations

import logging

from streamparse import Bolt, Stream

from bolts.base import OwlerComponent
from owler import wire
from owler.constants import (FETCHED_FIELDS, OUTLINKS_FIELDS, OUTLINKS_STREAM, STATUS_FIELDS,
                             STATUS_STREAM)
from owler.fetcher import FetchEngine, FetchItem, Outcome

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
        self.engine.start()

    def process(self, tup):
        try:
            url, key, md = tup.values[0], tup.values[1], tup.values[2]
            item = FetchItem(str(url), str(key), dict(md or {}), tup)
        except (IndexError, TypeError, ValueError):  # not a partitioner tuple: drop it, loudly
            log.error("malformed tuple dropped: %r", tup.values)
            self.count("malformed")
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

    def _emit_outcome(self, out: Outcome) -> None:
        tup = out.item.token
        try:
            if out.kind == "expired":
                self.count("expired")
                self.fail(tup)
                return
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
                    self.emit([out.item.url, out.metadata, out.outlinks],
                              anchors=[tup], stream=OUTLINKS_STREAM)
            self.ack(tup)
        except Exception:  # noqa: BLE001 - a broken emit must not kill the loop; Storm replays
            log.exception("cannot emit the outcome for %s", out.item.url)
            try:
                self.fail(tup)
            except Exception:  # noqa: BLE001
                pass

    def shutdown(self):
        self.engine.stop(timeout=2.0)
