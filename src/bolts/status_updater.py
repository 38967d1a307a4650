"""StatusUpdaterBolt: writes statuses and discovered outlinks to the frontier, acking after commit.

Tuples are collected and written in one transaction when ``status.updater.batch.size`` updates are
pending or ``status.updater.commit.interval`` seconds have passed (tick tuples every second); they
are acked only after the commit, and failed (Storm replays them) when it fails: at-least-once,
nothing lost.
"""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from bolts.base import OwlerComponent
from owler import conf as C
from owler import outlinks as outlink
from owler.constants import STATUS_STREAM, Status
from owler.frontier import open_frontier
from owler.scheduler import load_scheduler
from owler.status import StatusUpdater, transfer_metadata

log = logging.getLogger("owler.status")


class StatusUpdaterBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = False
    auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.frontier = open_frontier(storm_conf)
        self.updater = StatusUpdater(storm_conf, load_scheduler(storm_conf),
                                     C.get_str(storm_conf, "partition.url.mode", "byDomain"))
        self.batch_size = C.get_int(storm_conf, "status.updater.batch.size", 2000)
        self.interval = C.get_float(storm_conf, "status.updater.commit.interval", 0.5)
        self.pending_tuples = []
        self.pending_updates = []
        self.oldest = 0.0

    def process(self, tup):
        now = time.time()
        try:
            if tup.stream == STATUS_STREAM:
                url, md, status = tup.values
                self._add(self.updater.to_update(url, md or {}, Status(status), now))
                self.count(status)
            else:
                source, md, outlinks = tup.values
                child_md = transfer_metadata(source, md or {}, self.conf)
                for item in outlinks:
                    url, anchor = outlink.split(item)
                    omd = dict(child_md)
                    if anchor:  # stored only if metadata.persist lists it, as in StormCrawler
                        omd[outlink.ANCHORS] = [anchor]
                    self._add(self.updater.to_update(url, omd, Status.DISCOVERED, now))
                self.count("discovered", len(outlinks))
        except Exception:  # noqa: BLE001 - a bad tuple is logged and acked, never a crash loop
            log.exception("cannot turn tuple %r into a status update", tup.values)
            self.count("bad_tuple")
            self.ack(tup)
            return
        if not self.pending_tuples:
            self.oldest = now
        self.pending_tuples.append(tup)
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
        self.write_stats()

    def commit(self):
        tuples, updates = self.pending_tuples, self.pending_updates
        self.pending_tuples, self.pending_updates = [], []
        try:
            self.frontier.apply_updates(updates)
        except Exception:  # noqa: BLE001 - the frontier is unavailable: replay later
            log.exception("frontier commit of %d updates failed; failing %d tuples",
                          len(updates), len(tuples))
            self.count("commit_failed")
            for t in tuples:
                self.fail(t)
            return
        self.updater.committed(updates)
        self.count("committed", len(updates))
        for t in tuples:
            self.ack(t)
        self.write_stats()

    def shutdown(self):
        # un-acked tuples will be replayed by Storm; close the database cleanly
        self.frontier.close()
