"""URL filters: StormCrawler's ``URLFilters`` chain configured by ``urlfilters.json``.

File format (verbatim StormCrawler)::

    {"org.apache.stormcrawler.filtering.URLFilters": [
        {"class": "org.apache.stormcrawler.filtering.basic.BasicURLNormalizer",
         "name": "BasicURLNormalizer", "params": {"removeAnchorPart": true}},
        ...]}

``class`` is a StormCrawler class name (mapped to its port, see :data:`SC_CLASSES`) or a Python
dotted path (``owler.filters.basic.BasicURLFilter``). Each filter has
``configure(conf, params)`` and ``filter(source_url, source_md, url) -> str | None`` where ``None``
rejects the URL and a string (possibly changed, e.g. by a normaliser) passes it on.

Config keys read:

- ``urlfilters.config.file`` (no default): the JSON chain, resolved with
  :func:`owler.conf.resource_path`; unset or empty gives an empty chain (accepts everything).
- ``partition.url.mode`` (``byDomain``): only by :func:`check_url`, for the key it reports.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from owler.chain import ChainSpec, build_chain, load_class, read_chain_file
from owler.conf import ConfError, get_int, get_str, resource_path
from owler.constants import DEPTH, URLFILTERS_FILE_KEY

__all__ = ["URLFilter", "URLFilters", "URLFilterSetupError", "SC_CLASSES", "load_filter_class", "check_url"]

log = logging.getLogger(__name__)


MEMO_KEY = "urlfilters.memo.size"

#: Root keys accepted in the JSON file (StormCrawler 3.x and 2.x).
ROOT_KEYS = (
    "org.apache.stormcrawler.filtering.URLFilters",
    "com.digitalpebble.stormcrawler.filtering.URLFilters",
)

_SC_PREFIXES = ("org.apache.stormcrawler.filtering.", "com.digitalpebble.stormcrawler.filtering.")

#: StormCrawler class names (without the package prefix) → our classes.
SC_CLASSES = {
    "basic.BasicURLNormalizer": "owler.filters.basic.BasicURLNormalizer",
    "basic.BasicURLFilter": "owler.filters.basic.BasicURLFilter",
    "basic.SelfURLFilter": "owler.filters.basic.SelfURLFilter",
    "depth.MaxDepthFilter": "owler.filters.depth.MaxDepthFilter",
    "host.HostURLFilter": "owler.filters.host.HostURLFilter",
    "regex.RegexURLFilter": "owler.filters.regex.RegexURLFilter",
    "metadata.MetadataFilter": "owler.filters.metadata.MetadataFilter",
}


class URLFilterSetupError(ConfError):
    """A filter chain could not be built; the message names the file or the entry."""


CHAIN = ChainSpec(ROOT_KEYS, _SC_PREFIXES, SC_CLASSES, "filter", URLFilterSetupError, "URL filters")


class URLFilter:
    """Base class of a URL filter (StormCrawler's ``URLFilter``).

    Subclasses keep their defaults in attributes and override them in :meth:`configure` only when
    a param is present. ``normalizes = True`` marks filters that rewrite URLs (used by
    :func:`check_url`).
    """

    name: str = ""
    normalizes: bool = False

    def uses_source(self) -> bool:
        """Whether the result may depend on the source page (its URL or metadata), as configured.
        A chain whose filters all answer ``False`` remembers its answers per URL."""
        return True

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        """Read ``params`` (the entry's JSON object, ``{}`` when absent). Raise on bad values."""

    def filter(self, source_url: str | None, source_md: Mapping[str, list[str]] | None, url: str) -> str | None:
        """The URL to keep (possibly rewritten) or ``None`` to reject it. ``source_url`` and
        ``source_md`` are the page the link was found on (``None``/``{}`` for seeds)."""
        raise NotImplementedError


def load_filter_class(name: str) -> type:
    """The class for a StormCrawler class name or a Python dotted path. Raises ``ValueError``."""
    return load_class(name, CHAIN)


class URLFilters:
    """An ordered chain of URL filters; a URL must pass all of them (StormCrawler's ``URLFilters``)."""

    def __init__(self, filters: list[URLFilter] | None = None, memo_size: int = 50000) -> None:
        self.filters: list[URLFilter] = list(filters or [])
        # the answers of a chain that looks only at the URL, per URL: a site's navigation links
        # come again on every page (``urlfilters.memo.size``; emptied when full; 0 = off)
        self.memo: dict[str, tuple[str | None, str | None]] | None = None
        self.memo_size = memo_size
        if memo_size > 0 and self.filters and not any(f.uses_source() for f in self.filters):
            self.memo = {}

    def __len__(self) -> int:
        return len(self.filters)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "URLFilters":
        """The chain named by ``urlfilters.config.file``; an empty chain when the key is unset."""
        name = get_str(conf, URLFILTERS_FILE_KEY, None)
        if not name or not name.strip():
            return cls()
        return cls.from_file(resource_path(name.strip()), conf)

    @classmethod
    def from_file(cls, path: str | Path, conf: Mapping[str, Any] | None = None) -> "URLFilters":
        data = read_chain_file(path, CHAIN)
        try:
            return cls.from_json(data, conf or {})
        except URLFilterSetupError as exc:
            raise URLFilterSetupError(f"{Path(path)}: {exc}") from exc

    @classmethod
    def from_json(cls, data: Any, conf: Mapping[str, Any] | None = None) -> "URLFilters":
        """Build from the parsed JSON document (a map with one of :data:`ROOT_KEYS`)."""
        conf = conf or {}
        return cls(build_chain(data, conf, CHAIN), get_int(conf, MEMO_KEY, 50000))

    def filter(
        self, source_url: str | None, source_md: Mapping[str, list[str]] | None, url: str
    ) -> tuple[str | None, str | None]:
        """``(url, None)`` when every filter passes it (the URL as rewritten by them), else
        ``(None, name_of_the_rejecting_filter)``. A filter that raises is logged and counts as
        rejecting the URL."""
        memo = self.memo
        if memo is not None:
            known = memo.get(url)
            if known is not None:
                return known
        result, rejected_by, _ = self._run(source_url, source_md, url)
        if memo is not None:
            if len(memo) >= self.memo_size:
                memo.clear()
            memo[url] = (result, rejected_by)
        return result, rejected_by

    def _run(self, source_url, source_md, url):
        """(result, rejected_by, normalized) where normalized is the URL after the last
        normaliser that ran, or "" when none did."""
        md = source_md if source_md is not None else {}
        normalized = ""
        current: str | None = url
        for f in self.filters:
            try:
                out = f.filter(source_url, md, current)
            except Exception as exc:
                log.warning("URL filter %s failed on %r: %s: %s", f.name, current, type(exc).__name__, exc)
                return None, f.name, normalized
            if out is None:
                return None, f.name, normalized
            current = out
            if getattr(f, "normalizes", False):
                normalized = current
        return current, None, normalized


def check_url(
    conf: Mapping[str, Any],
    url: str,
    filters: URLFilters | None = None,
    source_url: str | None = None,
    source_md: Mapping[str, list[str]] | None = None,
) -> tuple[str, str, str, str]:
    """Nutch-style URL checker (backs ``owler check-url``).

    Returns ``(url, verdict, normalized, key)``: verdict ``"ACCEPT"`` or ``"REJECT:<filter name>"``;
    normalized = the URL the chain produced (accepted), or the URL after the last normaliser that
    ran before the rejection ("" if none ran); key = partition key under ``partition.url.mode``
    (default ``byDomain``) of the normalized URL, "" when it has none.

    Without ``source_md`` the URL is checked as a seed: depth ``-1`` (StormCrawler's URLFilterBolt
    does the same) so MaxDepthFilter lets it pass.
    """
    from owler import urls

    if filters is None:
        filters = URLFilters.from_conf(conf)
    md = source_md if source_md is not None else {DEPTH: ["-1"]}
    result, rejected_by, normalized = filters._run(source_url, md, url)
    if rejected_by is None:
        verdict = "ACCEPT"
        normalized = result or ""
    else:
        verdict = f"REJECT:{rejected_by}"
    mode = urls.partition_mode(conf)
    key = ""
    target = normalized or urls.normalize(url)
    if target:
        try:
            key = urls.partition_key(target, mode)
        except ValueError as exc:
            if mode not in urls.PARTITION_MODES:
                raise ConfError(str(exc)) from exc
    return url, verdict, normalized, key
