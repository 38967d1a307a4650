"""The sitemap crawl: only what webmasters list in their sitemaps, refreshed when they say it
changed (OWLer's medium-risk pipeline).

Two spouts over the frontier:

- ``spout`` (FrontierSpout) serves only URLs tagged ``Sitemap`` (``isSitemap=true``) or
  ``OnSitemap`` (``isDiscoveredOnSitemap=true``): sitemaps and what they list;
- ``spout_seeds`` (SitemapSeedSpout) serves the untagged URLs, the seeds ``owler inject`` wrote:
  the fetcher looks up each seed host's sitemaps (robots.txt ``Sitemap:`` lines, else
  ``/sitemap.xml`` and ``/sitemap_index.xml``) instead of fetching the page.

partitioner → fetcher (grouped by key: politeness and robots.txt per queue; it archives sitemaps and
pages, and a page goes on once its records are stored, src/owler/warc/crawl/archiver.py) → sitemap
parser (sitemaps: entries DISCOVERED, with lastmod/changefreq/priority/extensions, straight to the
status updater; other pages passed on) → parser (HTML pages: FETCHED with title, signature; their
outlinks are NOT followed: the parser's outlinks stream is not wired). Redirect targets go through
the URL filters and the blacklists as in every pipeline and inherit
``isSitemap``/``isDiscoveredOnSitemap`` (``metadata.transfer`` of the status updater), so a
redirected sitemap or listed page stays in this pipeline.

Component configuration fixed here (it wins over the crawler configuration): the spouts'
interest tags, ``sitemap.discovery: true`` for the fetcher (a host's robots.txt re-read after
``robots.cache.ttl`` re-announces its sitemaps), the sitemap URL filters for the URL filter bolt,
``parser.emitOutlinks: false``. Every other key comes from the crawler configuration
(``resources/crawler-conf.yaml``, ``sitemap.*``).

Run: ``owler inject SEEDS`` then ``owler run sitemap``; or ``sparse run -n sitemap``.
"""

from functools import partial

from streamparse import Grouping, Topology

from bolts.blacklist import BlacklistBolt
from bolts.fetcher import FetcherBolt
from bolts.parser import ParserBolt
from bolts.partitioner import PartitionerBolt
from bolts.sitemap_parser import SitemapParserBolt
from bolts.status_updater import StatusUpdaterBolt
from bolts.urlfilter import URLFilterBolt
from owler.conf import ConfError, parallelism, parser_grouping, topology_conf
from owler.constants import (EMIT_OUTLINKS_KEY, EXCLUDE_TAGS_KEY, FRONTIER_BACKEND_KEY,
                             FRONTIER_TAGS_KEY,
                             INTEREST_TAGS_KEY, IS_SITEMAP, METADATA_TRANSFER_KEY, ON_SITEMAP,
                             OUTLINKS_STREAM, SITEMAP_DISCOVERY, STATUS_STREAM, TICK_FREQ_KEY,
                             URLFILTERS_FILE_KEY)
from owler.sitemap.processor import DEPTH, HOSTS
from spouts.frontier import FrontierSpout
from spouts.sitemap_seed import SitemapSeedSpout

TICK = {TICK_FREQ_KEY: 1}
#: the tags of frontier.tags' default rules for isSitemap=true and isDiscoveredOnSitemap=true
SITEMAP_TAGS = ["Sitemap", "OnSitemap"]
TRANSFER = [IS_SITEMAP, ON_SITEMAP, DEPTH, HOSTS]


#: the crawler conf the topology is built with; par(name): the tasks of a component
#: (parallelism.<name>, 1)
CONFIG = topology_conf()
par = partial(parallelism, CONFIG)
#: pages to the parser (parser.grouping): grouped on their queue's key, so that one parser task
#: sees all of a host's pages and their near-duplicates (owler/parse/simhash.py), or in the worker
PAGES = Grouping.fields("key") if parser_grouping(CONFIG) == "key" else Grouping.LOCAL_OR_SHUFFLE


class Sitemap(Topology):
    config = CONFIG
    single_task = ("spout_seeds",)  # the seed sitemaps are read by one task

    spout = FrontierSpout.spec(name="spout", par=par("spout"),
                               config={INTEREST_TAGS_KEY: SITEMAP_TAGS,
                                       EXCLUDE_TAGS_KEY: []})
    seeds = SitemapSeedSpout.spec(name="spout_seeds", par=1)
    partitioner = PartitionerBolt.spec(name="partitioner", inputs=[spout, seeds],
                                       par=par("partitioner"))
    fetcher = FetcherBolt.spec(name="fetcher", inputs={partitioner: Grouping.fields("key")},
                               par=par("fetcher"), config={**TICK, SITEMAP_DISCOVERY: True})
    sitemaps = SitemapParserBolt.spec(
        name="sitemap", par=par("sitemap"),
        inputs={fetcher: Grouping.LOCAL_OR_SHUFFLE})
    parser = ParserBolt.spec(name="parser", inputs={sitemaps: PAGES},
                             par=par("parser"), config={EMIT_OUTLINKS_KEY: False})
    urlfilter = URLFilterBolt.spec(
        name="urlfilter", par=par("urlfilter"), inputs={fetcher[OUTLINKS_STREAM]: Grouping.SHUFFLE},
        config={URLFILTERS_FILE_KEY: "sitemap-urlfilters.json"})
    blacklist = BlacklistBolt.spec(name="blacklist", par=par("blacklist"),
                                   inputs={urlfilter[OUTLINKS_STREAM]: Grouping.SHUFFLE})

    @staticmethod
    def check_conf(conf: dict) -> None:
        """Raise ConfError for bad sitemap keys before Storm starts (``owler run`` calls it)."""
        from owler.fetch.engine import check_conf as check_fetch_conf
        from owler.frontier import tag_rules
        from owler.scheduler import load_scheduler
        from owler.sitemap.processor import SitemapProcessor
        from owler.warc.crawl.archiver import archiving
        from owler.warc.storage.s3_stream import check_conf as check_warc_conf

        if str(conf.get(FRONTIER_BACKEND_KEY) or "").strip().lower() == "urlfrontier":
            raise ConfError("frontier.backend: the sitemap topology serves its spouts by frontier "
                            "tags and counts host budgets in the frontier; URLFrontier has "
                            "neither: use 'sqlite' or 'opensearch'")
        tags = {tag for _, _, tag in tag_rules(conf.get(FRONTIER_TAGS_KEY))}
        missing = [t for t in SITEMAP_TAGS if t not in tags]
        if missing:
            raise ConfError(f"frontier.tags: the sitemap topology serves the tags {SITEMAP_TAGS} "
                            f"(isSitemap=true, isDiscoveredOnSitemap=true); missing {missing}")
        SitemapProcessor(conf)
        load_scheduler(conf)
        check_fetch_conf(conf)
        if archiving(conf):
            check_warc_conf(conf)

    status = StatusUpdaterBolt.spec(
        name="status", par=par("status"), config={**TICK, METADATA_TRANSFER_KEY: TRANSFER},
        inputs={fetcher[STATUS_STREAM]: Grouping.fields("url"),
                sitemaps[STATUS_STREAM]: Grouping.fields("url"),
                parser[STATUS_STREAM]: Grouping.fields("url"),
                blacklist[OUTLINKS_STREAM]: Grouping.SHUFFLE})
