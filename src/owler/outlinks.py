"""One outlink in an outlinks batch (``OUTLINKS_FIELDS``): a URL string, or ``[url, anchor]`` when
the parser kept its anchor text (``track.anchors``). Bolts on the outlinks path use these two
helpers so that either form passes through them unchanged in meaning."""

from __future__ import annotations

from typing import Any

#: outlink metadata key holding the anchor text (StormCrawler's ``anchors``, multi-valued)
ANCHORS = "anchors"


def split(item: Any) -> tuple[str, str]:
    """``(url, anchor)`` of one batch item; the anchor is ``""`` when there is none.
    Raises ``TypeError`` for an item that is neither form."""
    if isinstance(item, str):
        return item, ""
    if isinstance(item, (list, tuple)) and item and isinstance(item[0], str):
        anchor = item[1] if len(item) > 1 and isinstance(item[1], str) else ""
        return item[0], anchor
    raise TypeError(f"not an outlink: {item!r}")


def join(url: str, anchor: str) -> Any:
    """The batch item for ``url`` with ``anchor`` (a plain string when there is no anchor)."""
    return [url, anchor] if anchor else url
