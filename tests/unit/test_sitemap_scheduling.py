"""What sitemaps say, used by the scheduler (changefreq, priority) and the status updater's cache
(a DISCOVERED from a sitemap reaches the frontier when it may change something)."""

from __future__ import annotations

from owler.conf import load_conf
from owler.constants import Status
from owler.scheduler import AdaptiveScheduler, DefaultScheduler
from owler.status import StatusUpdater

NOW = 1_750_000_000.0


def minutes(sched, status, md):
    nfd = sched.schedule(status, md, NOW)
    return None if nfd is None else round((nfd - NOW) / 60.0, 3)


def test_changefreq_sets_the_interval_of_fetched_urls():
    s = DefaultScheduler({})
    assert minutes(s, Status.FETCHED, {"sitemap.changefreq": ["daily"]}) == 1440
    assert minutes(s, Status.FETCHED, {"sitemap.changefreq": ["weekly"]}) == 10080
    assert minutes(s, Status.FETCHED, {"sitemap.changefreq": ["always"]}) == 60
    assert minutes(s, Status.FETCHED, {"sitemap.changefreq": ["never"]}) == 525600
    assert minutes(s, Status.FETCHED, {"sitemap.changefreq": ["bogus"]}) == 1440  # default
    assert minutes(s, Status.FETCH_ERROR, {"sitemap.changefreq": ["hourly"]}) == 120
    # per-URL fetchInterval and custom rules come first
    assert minutes(s, Status.FETCHED, {"sitemap.changefreq": ["daily"], "fetchInterval": ["30"]}) == 30
    clamped = DefaultScheduler({"scheduler.sitemap.min.interval": 240,
                                "scheduler.sitemap.max.interval": 20000})
    assert minutes(clamped, Status.FETCHED, {"sitemap.changefreq": ["hourly"]}) == 240
    assert minutes(clamped, Status.FETCHED, {"sitemap.changefreq": ["yearly"]}) == 20000
    off = DefaultScheduler({"scheduler.sitemap.changefreq": False})
    assert minutes(off, Status.FETCHED, {"sitemap.changefreq": ["hourly"]}) == 1440
    adaptive = AdaptiveScheduler({})
    md = {"sitemap.changefreq": ["weekly"]}
    assert minutes(adaptive, Status.FETCHED, md) == 10080 and md["fetchInterval"] == ["10080"]


def test_priority_orders_discovered_urls_of_a_queue():
    s = DefaultScheduler({})
    assert minutes(s, Status.DISCOVERED, {}) == 0
    assert minutes(s, Status.DISCOVERED, {"sitemap.priority": ["1.0"]}) == -1.0  # 60 s earlier
    assert minutes(s, Status.DISCOVERED, {"sitemap.priority": ["0.5"]}) == -0.5
    assert minutes(s, Status.DISCOVERED, {"sitemap.priority": ["x"]}) == 0
    assert minutes(s, Status.DISCOVERED, {"sitemap.priority": ["1"],
                                          "scheduler.delay.mins": ["10"]}) == 10


def test_status_cache_lets_sitemap_news_through():
    up = StatusUpdater(load_conf(), DefaultScheduler({}))  # metadata.persist keeps sitemap.*
    listed = {"isDiscoveredOnSitemap": ["true"], "sitemap.lastModified": ["2024-01-01T00:00:00Z"]}
    first = up.to_update("http://a.com/p", listed, Status.DISCOVERED, NOW)
    assert first is not None
    up.committed([first])
    assert up.to_update("http://a.com/p", listed, Status.DISCOVERED, NOW) is None  # nothing new
    assert up.to_update("http://a.com/p", {}, Status.DISCOVERED, NOW) is None  # a plain outlink
    newer = {**listed, "sitemap.lastModified": ["2024-02-01T00:00:00Z"]}
    assert up.to_update("http://a.com/p", newer, Status.DISCOVERED, NOW) is not None
    seed = up.to_update("http://a.com/", {}, Status.DISCOVERED, NOW)
    up.committed([seed])
    # a seed in the cache that a sitemap now lists, and a seed looked up again, go through
    assert up.to_update("http://a.com/", {"isDiscoveredOnSitemap": ["true"]},
                        Status.DISCOVERED, NOW) is not None
    assert up.to_update("http://a.com/", {"sitemap.seeded": ["x"]}, Status.DISCOVERED, NOW) \
        is not None
