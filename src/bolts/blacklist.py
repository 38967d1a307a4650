"""BlacklistBolt: drops outlinks on spam lists or webmaster opt-out lists (reloaded on change)."""

from __future__ import annotations

import time

from streamparse import Bolt, Stream

from bolts.base import OwlerComponent
from owler.blacklist import Blacklist
from owler import outlinks as outlink
from owler.constants import OUTLINKS_FIELDS, OUTLINKS_STREAM, STATUS_FIELDS, STATUS_STREAM


class BlacklistBolt(OwlerComponent, Bolt):
    outputs = [Stream(STATUS_FIELDS, name=STATUS_STREAM),
               Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.blacklist = Blacklist.from_conf(storm_conf)

    def process(self, tup):
        if tup.stream == STATUS_STREAM:
            self.emit(list(tup.values), stream=STATUS_STREAM)
            return
        self.blacklist.maybe_reload(time.time())
        source, md = tup.values[0], tup.values[1] or {}
        kept = []
        for url, anchor in outlink.decode(tup.values[2]):
            listed = self.blacklist.match(url)
            if listed:
                self.count(f"blacklisted/{listed}")
            else:
                kept.append((url, anchor))
        if kept:
            self.emit([source, md, outlink.encode(kept)], stream=OUTLINKS_STREAM)
        self.write_stats()
