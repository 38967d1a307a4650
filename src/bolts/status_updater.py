"""StatusUpdaterBolt: writes statuses and discovered outlinks to the frontier, acking after commit.

Tuples are collected and written in one transaction when ``status.updater.batch.size`` updates are
pending or ``status.updater.commit.interval`` seconds have passed (tick tuples every second); they
are acked only after the commit, and failed (Storm replays them) when it fails, or, with the
OpenSearch frontier, when one of the tuple's own bulk items failed: at-least-once, nothing lost.
With ``frontier.backend: opensearch``, StormCrawler's ``opensearch.status.bulkActions`` and
``opensearch.status.flushInterval`` (e.g. "2s") replace the batch size and interval when set.
"""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from bolts.base import OwlerComponent
from owler import conf as C
from owler import outlinks as outlink
from owler.constants import FETCH_TIME, STATUS_STREAM, Status
from owler.frontier import FrontierError, open_frontier
from owler.scheduler import load_scheduler
from owler.status import StatusUpdater, transfer_metadata

log = logging.getLogger("owler.status")


class StatusUpdaterBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = False
    auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.storm_conf = storm_conf
        self.frontier = None
        self.updater = StatusUpdater(storm_conf, load_scheduler(storm_conf),
                                     C.get_str(storm_conf, "partition.url.mode", "byDomain"))
        self.batch_size = C.get_int(storm_conf, "status.updater.batch.size", 5000)
        self.interval = C.get_float(storm_conf, "status.updater.commit.interval", 0.5)
        if C.get_str(storm_conf, "frontier.backend", "sqlite") == "opensearch":
            # StormCrawler's bulk keys of its OpenSearch status updater, when given
            self.batch_size = C.get_int(storm_conf, "opensearch.status.bulkActions", self.batch_size)
            self.interval = _seconds(storm_conf.get("opensearch.status.flushInterval"), self.interval)
        self.pending_tuples = []  # (tuple, first update index, end update index)
        self.pending_updates = []
        self.oldest = 0.0
        self.retry_at = 0.0
        self._open()

    def _open(self) -> bool:
        try:
            self.frontier = open_frontier(self.storm_conf)
            return True
        except FrontierError as exc:
            log.error("frontier unavailable (retrying): %s", exc)
            self.count("frontier_unavailable")
            self.report_error(f"frontier unavailable (retrying every 5 s): {exc}")
            self.retry_at = time.time() + 5.0
            return False

    def process(self, tup):
        now = time.time()
        first = len(self.pending_updates)
        try:
            if tup.stream == STATUS_STREAM:
                url, md, status = tup.values
                md = md or {}
                # an archived record (warc2warc) is scheduled from when it was fetched
                self._add(self.updater.to_update(url, md, Status(status), _fetch_time(md, now)))
                self.count(status)
            else:
                source, md, batch = tup.values
                outlinks = outlink.decode(batch)
                child_md = transfer_metadata(source, md or {}, self.conf)
                # anchors are stored only if metadata.persist lists them, as in StormCrawler
                updates = self.updater.discovered_batch(outlinks, child_md, now)
                self.pending_updates.extend(updates)
                self.count("discovered", len(outlinks))
                if len(updates) < len(outlinks):
                    self.count("cached", len(outlinks) - len(updates))
        except Exception as exc:  # noqa: BLE001 - a bad tuple is logged and acked, no crash loop
            log.exception("cannot turn tuple %r into a status update", tup.values)
            del self.pending_updates[first:]
            self.count("bad_tuple")
            self.report_error(f"bad tuple dropped ({type(exc).__name__}: {exc}): "
                              f"{tup.values!r:.300}")
            self.ack(tup)
            return
        if not self.pending_tuples:
            self.oldest = now
        self.pending_tuples.append((tup, first, len(self.pending_updates)))
        if len(self.pending_updates) >= self.batch_size or now - self.oldest >= self.interval:
            self.commit()

    def _add(self, update) -> None:
        if update is None:  # a DISCOVERED URL known from the cache: nothing to write
            self.count("cached")
        else:
            self.pending_updates.append(update)

    def process_tick(self, tup):
        if self.pending_tuples and time.time() - self.oldest >= self.interval:
            self.commit()
        self.gauges["pending"] = len(self.pending_updates)
        self.write_stats()

    def commit(self):
        tuples, updates = self.pending_tuples, self.pending_updates
        self.pending_tuples, self.pending_updates = [], []
        started = time.time()
        if self.frontier is None and (time.time() < self.retry_at or not self._open()):
            failed_at = None  # everything fails: replayed once the frontier is back
        else:
            try:
                failed_at = set(self.frontier.apply_updates(updates))
            except Exception as exc:  # noqa: BLE001 - the frontier is unavailable: replay later
                log.exception("frontier commit of %d updates failed; failing %d tuples",
                              len(updates), len(tuples))
                self.report_error(f"frontier commit of {len(updates)} updates failed (tuples "
                                  f"failed, Storm replays them): {type(exc).__name__}: {exc}")
                failed_at = None
        if failed_at is None:
            self.count("commit_failed")
            for t, _, _ in tuples:
                self.fail(t)
            return
        if failed_at:
            self.count("update_failed", len(failed_at))
            self.updater.committed(u for i, u in enumerate(updates) if i not in failed_at)
        else:
            self.updater.committed(updates)
        self.count("committed", len(updates) - len(failed_at))
        self.count("commits")
        self.gauges["commit_ms"] = round((time.time() - started) * 1000.0, 1)
        for t, start, end in tuples:
            if failed_at and any(i in failed_at for i in range(start, end)):
                self.fail(t)  # a write of this tuple failed: Storm replays it
            else:
                self.ack(t)
        self.write_stats()

    def shutdown(self):
        # un-acked tuples will be replayed by Storm; close the database cleanly
        if self.frontier is not None:
            self.frontier.close()


def _fetch_time(md, now: float) -> float:
    value = md.get(FETCH_TIME)
    if value:
        try:
            return float(value[0])
        except (TypeError, ValueError, IndexError):
            pass
    return now


def _seconds(value, default: float) -> float:
    """A StormCrawler duration ("5s", "500ms", "1m") or a number of seconds."""
    if value is None or value == "":
        return default
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower()
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)
