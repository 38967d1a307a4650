"""URLPartitionerBolt: adds the partition key (host, pay-level domain or IP) the fetcher is grouped by."""

from __future__ import annotations

from streamparse import Bolt

from bolts.base import OwlerComponent
from owler import conf as C
from owler.constants import PARTITIONER_FIELDS
from owler.urls import partition_key


class PartitionerBolt(OwlerComponent, Bolt):
    outputs = PARTITIONER_FIELDS

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.mode = C.get_str(storm_conf, "partition.url.mode", "byDomain")

    def process(self, tup):
        url, md = tup.values[0], tup.values[1]
        try:
            key = partition_key(url, self.mode)
        except Exception:  # noqa: BLE001 - a bad URL goes to the fetcher, which records the error
            key = "_invalid_"
        self.emit([url, key, md])
