"""Crawl IDs: several crawls in one frontier, each a crawl space of its own.

URLFrontier's notion (``URLInfo.crawlID``): the same URL may be known to two crawls with two
statuses, and a crawl is listed, counted, served and deleted as a whole. Here a crawl is a space of
its own on each backend, so that one crawl's size never weighs on another's queries and the
frontier a user had before crawl IDs existed is the crawl ``DEFAULT``, unchanged:

- SQLite: ``DEFAULT`` is the file ``frontier.sqlite.path``; crawl ``C`` the file beside it named
  ``<stem>--<slug of C><suffix>`` (``frontier--news-1f0c6a2e.sqlite``), which records ``C`` in
  its ``meta`` table;
- OpenSearch: ``DEFAULT`` is the status index ``opensearch.status.index.name``; crawl ``C`` the
  index ``<index>--<slug of C>`` (with its own ``_leases`` and ``_budgets`` indices), which
  records ``C`` in its mapping's ``_meta``.

The slug (:func:`slug`) is the ID's letters and digits in lower case (an index name allows no
capitals) followed by 8 hex digits of its SHA-256, so IDs that differ only in case or punctuation
get spaces of their own. A crawl ID is any text of at most :data:`MAX_CRAWL_ID` characters without
control characters; an empty or blank one means ``DEFAULT`` (the API's rule).

Which crawl a crawler works on: ``frontier.crawl.id`` for the SQLite and OpenSearch frontiers
(``DEFAULT``), ``urlfrontier.crawlid`` for a URLFrontier service (its own key, StormCrawler's).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

__all__ = ["DEFAULT_CRAWL", "CRAWL_ID_KEY", "URLFRONTIER_CRAWL_KEY", "MAX_CRAWL_ID", "SEPARATOR", "CrawlIDError",
           "crawl_id", "slug", "sqlite_path", "index_name"]

#: the crawl of a URL sent without one (URLFrontier's ``CrawlID.DEFAULT``), and the frontier as it
#: was before crawl IDs
DEFAULT_CRAWL = "DEFAULT"
#: the crawl a crawler on the SQLite or OpenSearch frontier works on
CRAWL_ID_KEY = "frontier.crawl.id"
#: the crawl a crawler on a URLFrontier service works on (StormCrawler's key)
URLFRONTIER_CRAWL_KEY = "urlfrontier.crawlid"
MAX_CRAWL_ID = 255
#: between the DEFAULT space's name and a crawl's slug (no slug holds two dashes in a row)
SEPARATOR = "--"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


class CrawlIDError(ValueError):
    """A crawl ID that cannot name a crawl."""


def crawl_id(value: object) -> str:
    """``value`` as a crawl ID: empty or blank is :data:`DEFAULT_CRAWL`; CrawlIDError for an ID
    with control characters or longer than :data:`MAX_CRAWL_ID`."""
    text = "" if value is None else str(value)
    if not text.strip():
        return DEFAULT_CRAWL
    if _CONTROL.search(text):
        raise CrawlIDError(f"crawl ID {text!r} holds a control character")
    if len(text) > MAX_CRAWL_ID:
        raise CrawlIDError(f"crawl ID of {len(text)} characters: at most {MAX_CRAWL_ID}")
    return text


def slug(crawl: str) -> str:
    """The name part of crawl ``crawl``'s space: lower-case letters and digits of the ID (at most
    40), a dash, 8 hex digits of its SHA-256 (``"Crawl 2026/A"`` → ``crawl-2026-a-…``)."""
    readable = _NOT_ALNUM.sub("-", crawl.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(crawl.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}" if readable else digest


def sqlite_path(default_path: str | Path, crawl: str) -> Path:
    """The SQLite file of ``crawl``, beside the DEFAULT crawl's file ``default_path``."""
    path = Path(default_path)
    if crawl == DEFAULT_CRAWL:
        return path
    return path.with_name(f"{path.stem}{SEPARATOR}{slug(crawl)}{path.suffix}")


def index_name(default_index: str, crawl: str) -> str:
    """The OpenSearch status index of ``crawl`` (the DEFAULT crawl's is ``default_index``)."""
    if crawl == DEFAULT_CRAWL:
        return default_index
    return f"{default_index}{SEPARATOR}{slug(crawl)}"
