"""MaxDepthFilter: limits the crawl depth (StormCrawler's ``filtering.depth.MaxDepthFilter``).

An outlink's depth is its source page's ``depth`` metadata + 1 (seeds have depth 0, and filtering
a URL by itself uses depth -1). Params: ``maxDepth`` (-1 = no limit; 0 = no outlinks at all).
A source page may carry its own limit in the metadata key ``max.depth``.

Config keys read: none.
"""

from __future__ import annotations

from typing import Any, Mapping

from owler.constants import DEPTH, MAX_DEPTH
from owler.filters import URLFilter
from owler.filters.basic import _int

#: Per-page override of maxDepth in the source metadata.


def _md_int(md: Mapping[str, list[str]], key: str) -> int | None:
    values = md.get(key)
    if not values:
        return None
    raw = values[0]
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"metadata {key}={raw!r} is not an integer") from None


class MaxDepthFilter(URLFilter):
    def __init__(self) -> None:
        self.max_depth = -1

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.max_depth = _int(params, "maxDepth", self.max_depth)

    def uses_source(self) -> bool:
        return self.max_depth >= 0  # off (-1): the depth of the source does not matter

    def filter(self, source_url, source_md, url):
        md = source_md or {}
        limit = self.max_depth
        custom = _md_int(md, MAX_DEPTH) if MAX_DEPTH in md else None
        if custom is not None:
            limit = custom
        if limit < 0:
            return url
        depth = _md_int(md, DEPTH)
        if depth is None:
            depth = 0
        # the outlink's depth is depth + 1: reject when it would exceed the limit
        if depth >= limit:
            return None
        return url
