"""URLPartitionerBolt: adds the partition key (host, pay-level domain or IP,
``partition.url.mode``) the fetcher is grouped by."""

from __future__ import annotations

from streamparse import Bolt

from owler.constants import PARTITIONER_FIELDS
from owler.task.component import OwlerComponent
from owler.urls import partition_key, partition_mode


class PartitionerBolt(OwlerComponent, Bolt):
    outputs = PARTITIONER_FIELDS

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.mode = partition_mode(storm_conf)

    def process(self, tup):
        url, md = tup.values[0], tup.values[1]
        try:
            key = partition_key(url, self.mode)
        except Exception:  # noqa: BLE001 - a bad URL goes to the fetcher, which records the error
            key = "_invalid_"
        self.emit([url, key, md])
