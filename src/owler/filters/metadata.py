"""MetadataFilter: rejects outlinks of pages whose metadata has a given value
(StormCrawler's ``filtering.metadata.MetadataFilter``).

Params: ``{key: value, ...}``; a link is rejected when any value of the source page's metadata
``key`` equals ``value`` (case-insensitive).

Config keys read: none.
"""

from __future__ import annotations

from typing import Any, Mapping

from owler.filters import URLFilter


class MetadataFilter(URLFilter):
    def __init__(self) -> None:
        self.rules: list[tuple[str, str]] = []

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.rules = []
        for key, value in params.items():
            if isinstance(value, (dict, list)):
                raise ValueError(f"param {key} must be a plain value, got {value!r}")
            self.rules.append((str(key), str(value).lower()))

    def filter(self, source_url, source_md, url):
        if not source_md:
            return url
        for key, value in self.rules:
            for v in source_md.get(key) or ():
                if str(v).lower() == value:
                    return None
        return url
