"""URLFilterBolt: normalizes and filters the outlinks of a page with the urlfilters.json chain
(:class:`owler.filters.URLFilters`).

An outlinks batch keeps only accepted (normalized) URLs, each once, and is dropped when none is
left. Rejections are counted per filter name.
"""

from __future__ import annotations

from streamparse import Bolt, Stream

from owler import outlinks as outlink
from owler.constants import OUTLINKS_FIELDS, OUTLINKS_STREAM
from owler.filters import URLFilters
from owler.task.component import OwlerComponent


class URLFilterBolt(OwlerComponent, Bolt):
    outputs = [Stream(OUTLINKS_FIELDS, name=OUTLINKS_STREAM)]

    def initialize(self, storm_conf, context):
        self.owler_setup(storm_conf, context)
        self.filters = URLFilters.from_conf(storm_conf)

    def process(self, tup):
        source, md = tup.values[0], tup.values[1] or {}
        kept = []
        seen = set()
        for url, anchor in outlink.decode(tup.values[2]):
            out, rejected_by = self.filters.filter(source, md, url)
            if out is None:
                self.count(f"rejected/{rejected_by}")
                continue
            if out not in seen:
                seen.add(out)
                kept.append((out, anchor))
        self.count("accepted", len(kept))
        if kept:
            self.emit([source, md, outlink.encode(kept)], stream=OUTLINKS_STREAM)
        self.write_stats()
