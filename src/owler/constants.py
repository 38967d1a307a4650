"""Stream names, tuple fields, statuses and shared metadata keys (StormCrawler's ``Constants``)."""

from __future__ import annotations

import enum

# Streams
DEFAULT_STREAM = "default"
STATUS_STREAM = "status"
#: All outlinks of one page as ONE tuple (DESIGN.md §3): a multilang hop costs tens of µs per tuple,
#: so 200 outlinks sent one by one through three bolts would cost more than fetching the page.
OUTLINKS_STREAM = "outlinks"

# Tuple fields per stream
SPOUT_FIELDS = ["url", "metadata"]
PARTITIONER_FIELDS = ["url", "key", "metadata"]
FETCHED_FIELDS = ["url", "content", "metadata"]
PARSED_FIELDS = ["url", "content", "metadata", "text"]
STATUS_FIELDS = ["url", "metadata", "status"]
#: ``url``/``metadata`` of the source page (a redirect's source for a redirect), ``outlinks`` a list of
#: URL strings or ``[url, anchor]`` pairs (:mod:`owler.outlinks`). Each becomes DISCOVERED in the frontier unless a filter drops it; its metadata is
#: derived once per batch from the source (``metadata.transfer``, depth, path), as StormCrawler does, plus the
#: ``anchors`` key when the item has an anchor text.
OUTLINKS_FIELDS = ["url", "metadata", "outlinks"]


class Status(str, enum.Enum):
    """StormCrawler's five statuses. Travels on the wire as its name."""

    DISCOVERED = "DISCOVERED"
    FETCHED = "FETCHED"
    FETCH_ERROR = "FETCH_ERROR"
    REDIRECTION = "REDIRECTION"
    ERROR = "ERROR"

    @classmethod
    def from_http_code(cls, code: int) -> "Status":
        """200 and 304 → FETCHED, 3xx → REDIRECTION, anything else → FETCH_ERROR."""
        if code in (200, 304):
            return cls.FETCHED
        if 300 <= code < 400:
            return cls.REDIRECTION
        return cls.FETCH_ERROR


STATUS_NAMES = [s.value for s in Status]

# Metadata keys (StormCrawler names)
ERROR_CAUSE = "error.cause"
ERROR_SOURCE = "error.source"
ERROR_MESSAGE = "error.message"
FETCH_EXCEPTION = "fetch.exception"
FETCH_STATUS_CODE = "fetch.statusCode"
FETCH_ERROR_COUNT = "fetch.error.count"
REDIRECT_TO = "_redirTo"
#: When a status's URL was fetched, epoch seconds, when it was not just now (an archived record's
#: WARC-Date): the status updater schedules from it. Never stored unless metadata.persist lists it.
FETCH_TIME = "fetch.time"
DEPTH = "depth"
URL_PATH = "url.path"
SIGNATURE = "signature"
IS_SITEMAP = "isSitemap"
# what sitemaps say of a URL (owler.sitemaps)
ON_SITEMAP = "isDiscoveredOnSitemap"
SITEMAP_SEEDED = "sitemap.seeded"
SITEMAP_LAST_MODIFIED = "sitemap.lastModified"
PARTITION_KEY = "key"

# partition.url.mode values
PARTITION_MODE_HOST = "byHost"
PARTITION_MODE_DOMAIN = "byDomain"
PARTITION_MODE_IP = "byIP"
