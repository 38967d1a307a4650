"""FrontierSpout: emits due URLs from the frontier (:class:`owler.frontier.feed.FrontierFeed`), each
until Storm acks or fails it. The URL is the message id.

Component name: start it with ``spout`` so that ``owler run`` counts its tuples in flight.
"""

from __future__ import annotations

import time

from streamparse import Spout

from owler.constants import SPOUT_FIELDS
from owler.frontier.feed import FrontierFeed, lease_owner
from owler.task.component import OwlerComponent
from owler.task.shard import Shard


class FrontierSpout(OwlerComponent, Spout):
    outputs = SPOUT_FIELDS
    #: metadata added to every URL emitted (a subclass's mark)
    mark: dict = {}

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        conf = self.feed_conf(storm_conf)
        self.feed = FrontierFeed(conf, lease_owner(conf, self.component_name, self.task_id),
                                 Shard.of_task(context, self.component_name, self.task_id),
                                 on_problem=self.report_error)

    def feed_conf(self, storm_conf: dict) -> dict:
        """The configuration of the feed (a subclass may serve other tags)."""
        return storm_conf

    #: URLs emitted per call at most. Each call is a round trip through the worker's pipe (next,
    #: the emits, sync): with one URL per call, every URL paid for one. Storm checks
    #: topology.max.spout.pending before a call, so a task may have up to batch - 1 URLs more in
    #: flight than that.
    batch = 16

    def next_tuple(self):
        now = time.time()
        feed, mark = self.feed, self.mark
        emitted = 0
        while emitted < self.batch:
            nxt = feed.next(now)
            if nxt is None:
                break
            url, md = nxt
            if mark:
                md.update(mark)
            self.emit([url, md], tup_id=url)
            emitted += 1
        self.write_stats()
        if not emitted:
            time.sleep(0.05)  # nothing due: do not spin the multilang loop

    def ack(self, tup_id):
        self.feed.ack(tup_id)

    def fail(self, tup_id):
        self.feed.fail(tup_id)

    def collect(self, counters, gauges):  # at snapshot time only, not per tuple
        counters.update(self.feed.counters)
        gauges.update(self.feed.gauges())

    def shutdown(self):
        self.feed.close()
