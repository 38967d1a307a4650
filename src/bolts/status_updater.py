"""StatusUpdaterBolt: writes statuses and discovered outlinks to the frontier, acking after commit.

Tuple → frontier writes: :meth:`owler.status.StatusUpdater.for_tuple`; the writes of many tuples
are committed in one batch (:class:`owler.task.batch.CommitBatch` over
:class:`owler.status.FrontierWriter`). A tuple is acked only after the commit, and failed (Storm
replays it) when the commit failed or, with the OpenSearch frontier, one of its own items did.
With OpenSearch one batch is on its way while the bolt reads the next batch's tuples
(``opensearch.status.concurrentRequests``, :class:`owler.frontier.pipeline.OneInFlight`); its
tuples are acked or failed when its answer has come, seen at the next tuple, tick or commit.
A status of a URL that a take-down names by now is written as ERROR (:mod:`owler.blacklist.takedown`).
"""

from __future__ import annotations

import logging
import time

from streamparse import Bolt

from owler.blacklist import RELOAD_INTERVAL_KEY
from owler.conf import get_float
from owler.frontier import RETRY_SECS
from owler.scheduler import load_scheduler
from owler.status import FrontierUnavailable, FrontierWriter, StatusUpdater, commit_settings
from owler.blacklist.takedown import TakedownList
from owler.task.batch import CommitBatch
from owler.task.component import OwlerComponent

log = logging.getLogger("owler.status")


class StatusUpdaterBolt(OwlerComponent, Bolt):
    outputs = []
    auto_ack = auto_fail = False

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.updater = StatusUpdater(storm_conf, load_scheduler(storm_conf),
                                     takedowns=TakedownList.from_conf(
                                         storm_conf, get_float(storm_conf, RELOAD_INTERVAL_KEY,
                                                               30.0)))
        self.batch = CommitBatch(*commit_settings(storm_conf), self.ack, self.fail)
        self.writer = FrontierWriter(storm_conf, self.updater, on_unavailable=self._unavailable)

    def process(self, tup):
        now = time.time()
        try:
            updates, counts = self.updater.for_tuple(tup.stream, tup.values, now)
        except Exception as exc:  # noqa: BLE001 - a bad tuple is logged and acked, no crash loop
            log.exception("cannot turn tuple %r into a status update", tup.values)
            self.count("bad_tuple")
            self.report_error(f"bad tuple dropped ({type(exc).__name__}: {exc}): "
                              f"{tup.values!r:.300}")
            self.ack(tup)
            return
        self.count_all(counts)
        self.batch.add(tup, updates, now)
        self._landed(self.writer.poll())
        if self.batch.due(now):
            self.commit()

    def process_tick(self, tup):
        self._landed(self.writer.poll())
        if self.batch.due(time.time()):
            self.commit()
        self.writer.idle()
        self.gauges["pending"] = self.batch.pending
        self.write_stats()

    def commit(self):
        if not self.writer.pipelined:
            started = time.time()
            done = self.batch.commit(self.writer.write)
            self._report(done, time.time() - started)
            return
        taken = self.batch.take()
        if not taken.items:  # tuples with nothing to write (URLs known): nothing to wait for
            self._report(self.batch.settle(taken), 0.0)
            return
        try:
            before = self.writer.send(taken.items, taken)
        except Exception as exc:  # noqa: BLE001 - this batch was not sent: its tuples fail
            self._report(self.batch.settle(taken, error=exc), 0.0)
            return
        self._landed(before)

    def _landed(self, outcome):
        """Ack or fail the tuples of a batch whose write ended (pipelined commits)."""
        if outcome is not None:
            done = self.batch.settle(outcome.tag, outcome.failed, outcome.error)
            self._report(done, outcome.seconds)

    def _report(self, done, seconds):
        if not done.ok:
            self.count("commit_failed")
            if not isinstance(done.error, FrontierUnavailable):  # that one was reported already
                log.error("frontier commit of %d updates failed", len(done.items),
                          exc_info=done.error)
                self.report_error(f"frontier commit of {len(done.items)} updates failed (tuples "
                                  f"failed, replayed): {type(done.error).__name__}: {done.error}")
            return
        if done.failed:
            self.count("update_failed", len(done.failed))
        self.count("committed", len(done.items) - len(done.failed))
        self.count("commits")
        self.gauges["commit_ms"] = round(seconds * 1000.0, 1)
        self.write_stats()

    def _unavailable(self, exc):
        log.error("frontier unavailable (retrying): %s", exc)
        self.count("frontier_unavailable")
        self.report_error(f"frontier unavailable (retrying every {RETRY_SECS:.0f} s): {exc}")

    def shutdown(self):
        self.writer.close()  # tuples not acked yet are replayed by Storm
