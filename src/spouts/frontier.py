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

    def next_tuple(self):
        now = time.time()
        nxt = self.feed.next(now)
        self.write_stats()
        if nxt is None:
            time.sleep(0.05)  # nothing due: do not spin the multilang loop
            return
        url, md = nxt
        if self.mark:
            md.update(self.mark)
        self.emit([url, md], tup_id=url)

    def ack(self, tup_id):
        self.feed.ack(tup_id)

    def fail(self, tup_id):
        self.feed.fail(tup_id)

    def collect(self, counters, gauges):  # at snapshot time only, not per tuple
        counters.update(self.feed.counters)
        gauges.update(self.feed.gauges())

    def shutdown(self):
        self.feed.close()
