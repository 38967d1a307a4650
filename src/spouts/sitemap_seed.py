"""SitemapSeedSpout: the seeds of the sitemap pipeline — untagged URLs (the home pages ``owler
inject`` wrote) — sent to the fetcher to look up their hosts' sitemaps.

Why a spout over the frontier (and not an injection mode): the sitemaps of a host come from its
robots.txt, which only the fetcher reads (politely, cached per host, in the host's queue), and the
seeds are already in the frontier, where ``owler inject`` put them for every pipeline. So this
spout is a :class:`~spouts.frontier.FrontierSpout` serving what the sitemap spout never serves:
URLs without any ``frontier.tags`` tag (``frontier.interest.exclude.tags`` = every tag of the
rules, no interest tags). Each tuple carries ``sitemap.seed=true``: the fetcher then fetches no
page, reads the host's robots.txt (or its cache), emits the host's sitemaps
(:mod:`owler.fetch.discovery`) as DISCOVERED ``isSitemap=true`` and writes the seed back as
DISCOVERED with ``sitemap.seeded``: the frontier's sitemap refresh moves it to the next look-up
(``sitemap.seed.interval`` minutes) while no sitemap lists it, and makes it due (tagged
``OnSitemap``) once one does. The home page itself is therefore fetched only if a sitemap lists it.

Component name: start it with ``spout`` (``spout_seeds``) so that ``owler run`` counts its tuples
in flight.
"""

from __future__ import annotations

from owler.constants import (EXCLUDE_TAGS_KEY, FRONTIER_TAGS_KEY, INTEREST_TAGS_KEY,
                             REQUIRED_TAGS_KEY, SITEMAP_SEED)
from owler.frontier import tag_rules
from spouts.frontier import FrontierSpout


class SitemapSeedSpout(FrontierSpout):
    mark = {SITEMAP_SEED: ["true"]}

    def feed_conf(self, storm_conf):
        conf = dict(storm_conf)
        conf[INTEREST_TAGS_KEY] = conf[REQUIRED_TAGS_KEY] = []
        conf[EXCLUDE_TAGS_KEY] = sorted(
            {tag for _, _, tag in tag_rules(storm_conf.get(FRONTIER_TAGS_KEY))} or {"Sitemap"})
        return conf
