"""BlacklistBolt: drops outlinks on spam lists or webmaster opt-out lists (reloaded on change;
:class:`owler.blacklist.Blacklist`)."""

from __future__ import annotations

import time

from streamparse import Bolt, Stream

from owler import outlinks as outlink
from owler.blacklist import Blacklist
from owler.constants import OUTLINKS_FIELDS, OUTLINKS_STREAM
from owler.task.component import OwlerComponent


class BlacklistBolt(OwlerComponent, Bolt):
    outputs = [Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.blacklist = Blacklist.from_conf(storm_conf)

    def process(self, tup):
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
