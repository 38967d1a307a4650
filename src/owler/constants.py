"""Stream names, tuple fields, statuses and shared metadata keys (StormCrawler's ``Constants``)."""

from __future__ import annotations

import enum

# Streams
DEFAULT_STREAM = "default"
STATUS_STREAM = "status"
#: All outlinks of one page as ONE tuple: a multilang hop costs tens of µs per tuple, so 200
#: outlinks sent one by one through three bolts would cost more than fetching the page.
OUTLINKS_STREAM = "outlinks"

# Tuple fields per stream
SPOUT_FIELDS = ["url", "metadata"]
PARTITIONER_FIELDS = ["url", "key", "metadata"]
#: a page on its way to a parser: ``key`` is its queue's partition key (the partitioner's, as
#: the frontier stores it), which the parser's input is grouped on (``parser.grouping``) so that
#: one parser task sees every page of a queue (:mod:`owler.parse.simhash`). A component reading
#: these tuples takes the first three values and the key when there is one (a tuple of an older
#: topology has three values).
FETCHED_FIELDS = ["url", "content", "metadata", "key"]
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

# Metadata keys read or written by more than one package (StormCrawler's names where it has
# them). A key used inside one module only is defined in that module.
ERROR_CAUSE = "error.cause"
ERROR_SOURCE = "error.source"
ERROR_MESSAGE = "error.message"
FETCH_EXCEPTION = "fetch.exception"
FETCH_STATUS_CODE = "fetch.statusCode"
FETCH_ERROR_COUNT = "fetch.error.count"
REDIRECT_TO = "_redirTo"
#: how many redirects led to a URL (its redirect target inherits hops + 1; a page's own outlinks
#: start again), bounded by ``http.allow.redirects.max``
REDIRECT_HOPS = "redirect.hops"
#: epoch seconds until which the server asked not to be fetched (429/503, Retry-After): the
#: status updater blocks the URL's queue in the frontier until then. Transient, never stored.
QUEUE_BLOCK_UNTIL = "_queue.block.until"
#: the robots.txt Crawl-delay (seconds) the fetcher keeps for the URL's queue: the status updater
#: tells a URLFrontier service (SetDelay), so crawlers sharing it keep it between them. Transient.
QUEUE_CRAWL_DELAY = "_queue.crawl.delay"
#: the crawl a URL was given from when the spout serves any crawl (a URLFrontier client without
#: ``urlfrontier.crawlid``): it travels with the URL and goes to its outlinks, so that their
#: statuses are written to that crawl; the client sends it as the item's crawl ID, never stored
CRAWL_ID = "crawl.id"
#: When a status's URL was fetched, epoch seconds, when it was not just now (an archived record's
#: WARC-Date): the status updater schedules from it. Never stored unless metadata.persist lists it.
FETCH_TIME = "fetch.time"
DEPTH = "depth"
URL_PATH = "url.path"
SIGNATURE = "signature"
#: the previous ``signature``, copied by the parser before it sets the new one (StormCrawler's
#: MD5SignatureParseFilter ``keyNameCopy``): the adaptive scheduler compares the two
SIGNATURE_OLD = "signatureOld"
#: minutes between fetches that the adaptive scheduler keeps per URL (StormCrawler's name)
FETCH_INTERVAL = "fetchInterval"
#: the date to send as If-Modified-Since when set (StormCrawler's AdaptiveScheduler writes it with
#: ``scheduler.adaptive.setLastModified``); else the server's own ``<prefix>last-modified``
LAST_MODIFIED = "last-modified"
#: the payload digest (``sha1:`` Base32, as WARC-Payload-Digest) and WARC-Date of the last full
#: capture of a URL: a later response with the same digest, or a 304, is archived as a revisit
#: record that refers to that capture (:mod:`owler.fetch.revisit`)
CAPTURE_DIGEST = "capture.digest"
CAPTURE_DATE = "capture.date"
#: 64-bit SimHash of a page's text (16 hex digits), and the earlier page of the same host whose
#: SimHash is within ``simhash.max.distance`` bits of it (:mod:`owler.parse.simhash`)
SIMHASH = "simhash"
NEAR_DUPLICATE_OF = "near.duplicate.of"
IS_FEED = "isFeed"
#: the anchor texts of an outlink (multi-valued; :mod:`owler.outlinks`)
ANCHORS = "anchors"
#: minutes from now until the URL is due, whatever its status (read by :mod:`owler.scheduler`)
DELAY_MINS = "scheduler.delay.mins"
#: which protocol fetches a URL (StormCrawler's routing key: ``fetch.with=browser`` sends it to
#: the browser, :mod:`owler.fetch.browser`; written by :mod:`owler.parse.filters.jsrender`)
FETCH_WITH = "fetch.with"
#: how a page's render in the browser ended (idle, budget, failed): present on a rendered page
BROWSER_END = "browser.end"

# What sitemaps say of a URL (:mod:`owler.sitemap`, :mod:`owler.fetch.discovery`, the scheduler
# and the frontiers' sitemap refresh, :mod:`owler.frontier.refresh`)
IS_SITEMAP = "isSitemap"
ON_SITEMAP = "isDiscoveredOnSitemap"
#: ``true|false`` on the URL whose fetch first read its host's robots.txt (sitemap discovery)
FOUND_SITEMAP = "foundSitemap"
SITEMAP_LAST_MODIFIED = "sitemap.lastModified"
SITEMAP_CHANGEFREQ = "sitemap.changefreq"
SITEMAP_PRIORITY = "sitemap.priority"
#: transient: a seed of the sitemap pipeline (the fetcher looks up its host's sitemaps)
SITEMAP_SEED = "sitemap.seed"
#: when a seed host's sitemaps were last looked up
SITEMAP_SEEDED = "sitemap.seeded"
#: a configuration key, and the metadata key that overrides it for one URL
SITEMAP_DISCOVERY = "sitemap.discovery"
#: the sitemap extensions whose attributes are kept as ``<EXT>.<attr>`` metadata
SITEMAP_EXTENSIONS = ("IMAGE", "LINKS", "MOBILE", "NEWS", "VIDEO")

#: an outlink's own depth limit (MaxDepthFilter), handed down to its outlinks
MAX_DEPTH = "max.depth"

# Configuration keys read by more than one module (resources/crawler-conf.yaml has their meaning)
PARTITION_MODE_KEY = "partition.url.mode"
AGENT_NAME_KEY = "http.agent.name"
ROBOTS_AGENTS_KEY = "http.robots.agents"
CONTENT_LIMIT_KEY = "http.content.limit"
STORE_HEADERS_KEY = "http.store.headers"
MD_PREFIX_KEY = "protocol.md.prefix"
REDIRECTIONS_KEY = "redirections.allowed"
FETCHER_THREADS_KEY = "fetcher.threads.number"
THREADS_PER_QUEUE_KEY = "fetcher.threads.per.queue"
SERVER_DELAY_KEY = "fetcher.server.delay"
QUEUE_TIMEOUT_KEY = "fetcher.timeout.queue"
EMIT_OUTLINKS_KEY = "parser.emitOutlinks"
#: how pages reach the parser tasks: ``key`` (grouped on the page's partition key) or ``local``
#: (a parser task of the same worker when there is one); read by the topologies
#: (:func:`owler.conf.parser_grouping`)
PARSER_GROUPING_KEY = "parser.grouping"
MAX_OUTLINKS_KEY = "parser.emitOutlinks.max.per.page"
URLFILTERS_FILE_KEY = "urlfilters.config.file"
#: the parse filter chain (owler.parse.filters), one of conf.RESOURCE_KEYS
PARSEFILTERS_FILE_KEY = "parsefilters.config.file"
#: the blacklists' folder (owler.blacklist), one of conf.RESOURCE_KEYS
BLACKLIST_DIR_KEY = "blacklist.dir"
#: per-site delays (owler.fetch.politeness), one of conf.RESOURCE_KEYS
POLITENESS_FILE_KEY = "fetcher.politeness.file"
METADATA_TRANSFER_KEY = "metadata.transfer"
FRONTIER_BACKEND_KEY = "frontier.backend"
SQLITE_PATH_KEY = "frontier.sqlite.path"
FRONTIER_TAGS_KEY = "frontier.tags"
INTEREST_TAGS_KEY = "frontier.interest.tags"
EXCLUDE_TAGS_KEY = "frontier.interest.exclude.tags"
REQUIRED_TAGS_KEY = "frontier.interest.required.tags"
ROUND_DELAY_KEY = "frontier.queue.round.delay"
MIN_DELAY_QUERIES_KEY = "spout.min.delay.queries"
WARC_DIR_KEY = "warc.dir"
#: the JVM side of the multilang protocol; the Python components speak what it speaks
#: (owler.conf.multilang_serializer)
MULTILANG_SERIALIZER_KEY = "topology.multilang.serializer"
#: false: the crawl topologies archive nothing (a page goes on as soon as it is fetched)
WARC_ENABLED_KEY = "warc.enabled"
WARC_PREFIX_KEY = "warc.prefix"
WARC_ROTATION_SIZE_KEY = "warc.rotation.size"
WARC_ROTATION_TIME_KEY = "warc.rotation.time"
WARC_S3_BUCKET_KEY = "warc.s3.bucket"
WARC_S3_PREFIX_KEY = "warc.s3.prefix"
S3_MAX_ATTEMPTS_KEY = "s3.max.attempts"
WARC2WARC_INPUT_KEY = "warc2warc.input"
WARC2WARC_PROGRESS_KEY = "warc2warc.progress.path"
# the spout's reader checks the digests; the parser only when it did not
# (owler.warc.warc2warc.record_as_page)
VERIFY_DIGESTS_KEY = "warc2warc.verify.digests"
# the states of a warc2warc input file in either progress store (owler.warc.warc2warc:
# progress_sqlite, progress_opensearch)
WARC2WARC_FILE_STATES = ("pending", "reading", "done", "failed")
METRICS_ENABLED_KEY = "metrics.opensearch"
#: where owler run records a run's figures for the dashboard (owler/run/history.py)
METRICS_SQLITE_PATH_KEY = "metrics.sqlite.path"
#: the take-down file (owler.blacklist.takedown), one of conf.PATH_KEYS
TAKEDOWN_FILE_KEY = "takedown.file"
OPENSEARCH_PORT_KEY = "services.opensearch.port"
OPENSEARCH_NODES_KEY = "services.opensearch.nodes"
OPENSEARCH_CPUS_KEY = "services.opensearch.cpus"
# Storm's own keys that the crawler reads or sets
STORM_ID_KEY = "storm.id"
#: Storm: seconds between two reports of an executor's figures to nimbus (the UI's, and the
#: dashboard's); owler run and the cluster set 5 (Storm's default: 60)
EXECUTOR_METRICS_KEY = "executor.metrics.frequency.secs"
#: the port of the cluster's Storm UI (owler cluster; the dashboard reads Storm's figures there)
CLUSTER_UI_PORT_KEY = "cluster.ui.port"
CLUSTER_HOSTS_CPUS_KEY = "cluster.hosts.cpus"
STORM_HOSTNAME_KEY = "storm.local.hostname"
MESSAGE_TIMEOUT_KEY = "topology.message.timeout.secs"
TICK_FREQ_KEY = "topology.tick.tuple.freq.secs"

# partition.url.mode values
PARTITION_MODE_HOST = "byHost"
PARTITION_MODE_DOMAIN = "byDomain"
PARTITION_MODE_IP = "byIP"
#: folder of the risk-class parse filter's lists (owler.parse.filters.risk, services/risk/)
RISK_LISTS_DIR_KEY = "risk.lists.dir"
