"""The outlinks of a page as they travel between bolts (``OUTLINKS_FIELDS``' ``outlinks``).

On the wire a batch is ONE string: one line per outlink, ``url`` or ``url<TAB>anchor`` when the
parser kept its anchor text (``track.anchors``). A JSON list of ``[url, anchor]`` lists costs
Storm's Java side (json-simple parses and re-serializes every tuple of a shell component) an object
per URL and per anchor on every hop, three hops per page; one string is one token (measured:
``bench/bench_warc2warc.py``). URLs hold no TAB or line break (a URL parser removes them; the
crawler's URLs are normalized), anchors have theirs turned into spaces.

:func:`decode` also takes the former list form (a URL string, or ``[url, anchor]`` per item).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Sequence

_CLEAN = str.maketrans({"\t": " ", "\n": " ", "\r": " "})


def split(item: Any) -> tuple[str, str]:
    """``(url, anchor)`` of one item of the list form; the anchor is ``""`` when there is none.
    Raises ``TypeError`` for an item that is neither form."""
    if isinstance(item, str):
        return item, ""
    if isinstance(item, (list, tuple)) and item and isinstance(item[0], str):
        anchor = item[1] if len(item) > 1 and isinstance(item[1], str) else ""
        return item[0], anchor
    raise TypeError(f"not an outlink: {item!r}")


def join(url: str, anchor: str) -> Any:
    """The list-form item for ``url`` with ``anchor`` (a plain string when there is no anchor)."""
    return [url, anchor] if anchor else url


def encode(items: Iterable[Any]) -> str:
    """A batch (list-form items, or ``(url, anchor)`` pairs) as its wire string."""
    lines = []
    for item in items:
        url, anchor = split(item)
        if anchor:
            lines.append(f"{url}\t{anchor.translate(_CLEAN)}")
        else:
            lines.append(url)
    return "\n".join(lines)


def decode(value: Any) -> list[tuple[str, str]]:
    """``(url, anchor)`` pairs of a batch in wire form (or the list form). Raises ``TypeError``
    for anything else."""
    if isinstance(value, str):
        out = []
        for line in value.split("\n"):
            if not line:
                continue
            url, _, anchor = line.partition("\t")
            out.append((url, anchor))
        return out
    if isinstance(value, (list, tuple)):
        return [split(item) for item in value]
    if value is None:
        return []
    raise TypeError(f"not an outlinks batch: {type(value).__name__}")


class RecentlySent:
    """The URLs of the last ``size`` outlinks a parser task sent on, to send each only once while
    it is remembered.

    A page's navigation links repeat on every page of its site; each repeat would travel through
    the URL filter, the blacklist and the status updater only to be dropped there (a DISCOVERED
    URL never overwrites, and its first entry wins). A batch that is a replay (its first emission
    failed somewhere downstream, so its URLs may not have been stored) is sent whole.
    ``size`` 0 sends everything.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        # insertion order = age: the oldest is evicted first. An OrderedDict, not a dict: a dict
        # keeps the slots of the keys deleted at its front until it resizes, and finding its
        # first key walks over them, so each eviction of a full cache cost a scan of up to
        # ~75,000 slots: the warc2warc parser spent 8.8 ms per record on pages of new links, 3.3
        # with this (bench/bench_warc2warc.py --links unique; BENCHMARKS.md)
        self._urls: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, url: str) -> bool:
        """Whether ``url`` was sent on recently (asking does not make it newer)."""
        return url in self._urls

    def new(self, items: Sequence[Any], replay: bool = False) -> list[Any]:
        """The items (list form) to send of ``items``; all of them when ``replay``."""
        if self.size <= 0:
            return list(items)
        urls = self._urls
        out = []
        for item in items:
            url = item if isinstance(item, str) else item[0]
            if url in urls:
                if not replay:
                    continue
            else:
                urls[url] = None
                if len(urls) > self.size:
                    urls.popitem(last=False)
            out.append(item)
        return out
