"""owler.fetch.discovery and owler.sitemap.processor: discovery candidates, scope and cross-submission, filters, metadata, bounds."""

from __future__ import annotations

import gzip

import pytest

from owler.conf import ConfError, load_conf
from owler.constants import Status
from owler.fetch.discovery import discovery_candidates, discovery_on
from owler.fetch.robots import RobotRules, parse_robots
from owler.sitemap.processor import EntryGate, SitemapProcessor, sitemap_metadata

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
NOW = 1_750_000_000.0


def urlset(*entries: str) -> bytes:
    return f"<urlset {NS}>{''.join(entries)}</urlset>".encode()


def url(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def index(*locs: str) -> bytes:
    return f"<sitemapindex {NS}>{''.join(f'<sitemap><loc>{x}</loc></sitemap>' for x in locs)}" \
           f"</sitemapindex>".encode()


@pytest.fixture
def conf(tmp_path):
    c = load_conf()
    c["blacklist.dir"] = str(tmp_path / "bl")
    return c


def run(proc, sm_url, content, md=None):
    out = proc.process(sm_url, content, md if md is not None else {"isSitemap": ["true"]}, NOW)
    entries = list(out.entries)
    return out, dict(entries)


def test_discovery_candidates_robots_lines_then_guesses():
    rules = parse_robots(b"User-agent: *\nDisallow: /private/\nSitemap: /a.xml\n"
                         b"Sitemap: http://a.com/private/b.xml\nSitemap: http://other.org/c.xml\n",
                         ["owler"], "http://a.com/robots.txt")
    assert discovery_candidates("http://a.com/x", rules, ["/sitemap.xml"]) == [
        "http://a.com/a.xml", "http://other.org/c.xml"]  # disallowed own-host line dropped
    none = parse_robots(b"User-agent: *\nDisallow: /sitemap_index.xml\n", ["owler"])
    assert discovery_candidates("https://a.com:8443/x?y", none, ["/sitemap.xml", "sitemap_index.xml"]) \
        == ["https://a.com:8443/sitemap.xml"]
    assert discovery_candidates("http://a.com/", RobotRules.disallow_all(), ["/sitemap.xml"]) == []
    assert discovery_candidates("http://a.com/", RobotRules.allow_all(), ["/sitemap.xml"]) == \
        ["http://a.com/sitemap.xml"]


def test_discovery_switch_per_url(conf):
    assert not discovery_on(conf, {})
    assert discovery_on(conf, {"sitemap.discovery": ["true"]})
    assert not discovery_on({**conf, "sitemap.discovery": True}, {"sitemap.discovery": ["false"]})


def test_sitemap_metadata_cross_host(conf):
    md = sitemap_metadata("http://a.com/", {"depth": ["0"], "sitemap.seed": ["true"]},
                          "http://b.org/s.xml", conf)
    assert md["isSitemap"] == ["true"] and md["sitemap.depth"] == ["0"]
    assert md["sitemap.hosts"] == ["a.com"] and md["depth"] == ["1"]
    assert "sitemap.seed" not in md
    assert "sitemap.hosts" not in sitemap_metadata("http://a.com/", {}, "http://a.com/s.xml", conf)


def test_urlset_entries_metadata(conf):
    proc = SitemapProcessor({**conf, "sitemap.extensions": ["IMAGE"]})
    out, entries = run(proc, "http://www.a.com/dir/s.xml", urlset(
        url("http://www.a.com/1", "<lastmod>2024-01-01</lastmod><changefreq>weekly</changefreq>"
                                  "<priority>0.25</priority><image:image><image:loc>http://i/1.png"
                                  "</image:loc></image:image><video:video><video:title>v"
                                  "</video:title></video:video>"),
        url("/rel"), url("http://www.a.com/1"), url("http://www.a.com/pic.png"),
        url("javascript:alert(1)")))
    assert out.status is Status.FETCHED and out.metadata["isSitemap"] == ["true"]
    assert list(entries) == ["http://www.a.com/1", "http://www.a.com/rel"]  # dedup, filters
    md = entries["http://www.a.com/1"]
    assert md["isDiscoveredOnSitemap"] == ["true"] and md["isSitemap"] == ["false"]
    assert md["sitemap.lastModified"] == ["2024-01-01T00:00:00Z"]
    assert md["sitemap.changefreq"] == ["weekly"] and md["sitemap.priority"] == ["0.25"]
    assert md["IMAGE.loc"] == ["http://i/1.png"] and "VIDEO.title" not in md
    assert md["depth"] == ["1"] and md["url.path"] == ["http://www.a.com/dir/s.xml"]
    assert proc.counters["rejected/RegexURLFilter"] == 1 and proc.counters["dropped/invalid"] == 1


def test_scope_host_domain_strict_and_cross_submission(conf):
    body = urlset(url("http://www.a.com/x/1"), url("http://www.a.com/y"), url("http://shop.a.com/2"),
                  url("http://b.org/3"), url("http://c.net/4"))
    _, e = run(SitemapProcessor(conf), "http://www.a.com/x/s.xml", body)
    assert set(e) == {"http://www.a.com/x/1", "http://www.a.com/y", "http://shop.a.com/2"}
    _, e = run(SitemapProcessor({**conf, "sitemap.scope": "host"}), "http://www.a.com/x/s.xml", body)
    assert set(e) == {"http://www.a.com/x/1", "http://www.a.com/y"}
    _, e = run(SitemapProcessor({**conf, "sitemap.strict": True}), "http://www.a.com/x/s.xml", body)
    assert set(e) == {"http://www.a.com/x/1"}
    # the sitemap lives on www.a.com but b.org's robots.txt named it: b.org's URLs are in scope
    _, e = run(SitemapProcessor(conf), "http://www.a.com/x/s.xml", body,
               {"isSitemap": ["true"], "sitemap.hosts": ["b.org"]})
    assert "http://b.org/3" in e and "http://c.net/4" not in e
    with pytest.raises(ConfError):
        SitemapProcessor({**conf, "sitemap.scope": "world"})


def test_index_children_depth_hosts_and_staggering(conf):
    proc = SitemapProcessor({**conf, "sitemap.schedule.delay": 10, "sitemap.max.depth": 2})
    _, e = run(proc, "http://a.com/i.xml", index("http://a.com/1.xml", "/2.xml.gz", "http://a.com/3.xml"),
               {"isSitemap": ["true"], "sitemap.depth": ["1"], "sitemap.hosts": ["b.org"],
                "sitemap.lastModified": ["2020-01-01T00:00:00Z"]})
    assert list(e) == ["http://a.com/1.xml", "http://a.com/2.xml.gz", "http://a.com/3.xml"]
    md = e["http://a.com/2.xml.gz"]  # gzipped sitemaps pass the sitemap URL filters
    assert md["isSitemap"] == ["true"] and md["isDiscoveredOnSitemap"] == ["true"]
    assert md["sitemap.depth"] == ["2"] and md["sitemap.hosts"] == ["b.org"]
    assert "sitemap.lastModified" not in md  # not the parent's
    assert [e[u].get("scheduler.delay.mins") for u in e] == [None, ["10"], ["20"]]
    _, e = run(proc, "http://a.com/i.xml", index("http://a.com/1.xml"),
               {"isSitemap": ["true"], "sitemap.depth": ["2"]})
    assert e == {} and proc.counters["dropped/max_depth"] == 1


def test_filters_blacklist_and_old_entries(conf, tmp_path):
    (tmp_path / "bl").mkdir()
    (tmp_path / "bl" / "spam.txt").write_text("bad.a.com\n")
    proc = SitemapProcessor({**conf, "sitemap.filter.hours.since.modified": 24})
    fresh = "2025-06-15T00:00:00Z"  # NOW is 2025-06-15T15:06:40Z
    _, e = run(proc, "http://a.com/s.xml", urlset(
        url("http://a.com/new", f"<lastmod>{fresh}</lastmod>"),
        url("http://a.com/old", "<lastmod>2020-01-01</lastmod>"), url("http://bad.a.com/x")))
    assert list(e) == ["http://a.com/new"]
    assert proc.counters["dropped/too_old"] == 1 and proc.counters["blacklisted/spam"] == 1


def test_host_budgets(conf):
    proc = SitemapProcessor({**conf, "sitemap.max.urls.per.host": 3,
                             "sitemap.max.sitemaps.per.host": 2})
    body = urlset(*(url(f"http://a.com/{i}") for i in range(5)))
    _, e = run(proc, "http://a.com/s1.xml", body)
    assert len(e) == 3 and proc.counters["dropped/host_budget"] == 2
    _, e = run(proc, "http://a.com/s2.xml", body)
    assert e == {}
    out, e = run(proc, "http://a.com/s3.xml", body)
    assert out.status is Status.FETCHED and out.metadata["sitemap.truncated"] == ["host_budget"]
    _, e = run(proc, "http://b.com/s.xml", urlset(url("http://b.com/1")))
    assert len(e) == 1  # another host has its own budget
    proc.budget_period = 0  # the period is over: a new budget
    _, e = run(proc, "http://a.com/s4.xml", body)
    assert len(e) == 3


def test_errors_and_truncation_recorded(conf):
    proc = SitemapProcessor({**conf, "sitemap.emitOutlinks.max": 2})
    out, e = run(proc, "http://a.com/s.xml", b"<html><body>soft 404</body></html>",
                 {"isSitemap": ["true"], "_raw.headers": ["x: y"]})
    assert out.status is Status.FETCH_ERROR and e == {}
    md = out.metadata
    assert md["error.cause"] == ["not_a_sitemap"] and md["error.source"] == ["sitemap parsing"]
    assert md["isSitemap"] == ["true"] and "_raw.headers" not in md
    out, e = run(proc, "http://a.com/s.xml", gzip.compress(urlset(*(url(f"http://a.com/{i}")
                                                                    for i in range(5)))))
    assert out.status is Status.FETCHED and len(e) == 2
    assert out.metadata["sitemap.truncated"] == ["max_urls"] and "error.cause" not in out.metadata


def test_is_sitemap_detection(conf):
    proc = SitemapProcessor(conf)
    body = urlset(url("http://a.com/1"))
    assert proc.is_sitemap({"isSitemap": ["true"]}, b"anything")
    assert not proc.is_sitemap({"isSitemap": ["false"]}, body)
    assert not proc.is_sitemap({}, body)  # sniffing is opt-in (StormCrawler)
    sniff = SitemapProcessor({**conf, "sitemap.sniffContent": True})
    assert sniff.is_sitemap({}, body) and not sniff.is_sitemap({}, b"<html></html>")


def test_the_sitemaps_a_fetcher_found_are_checked_and_described(conf, tmp_path):
    (tmp_path / "bl").mkdir()
    (tmp_path / "bl" / "spam.txt").write_text("bad.example.org\n")
    gate = EntryGate(conf)
    kept, counts = gate.found("http://a.example.org/", {"depth": ["2"]}, [
        "http://a.example.org/sitemap.xml", "http://bad.example.org/sitemap.xml",
        "mailto:x@a.example.org", "http://other.example.net/sm.xml"])
    assert [u for u, _ in kept] == ["http://a.example.org/sitemap.xml",
                                    "http://other.example.net/sm.xml"]
    own, other = kept[0][1], kept[1][1]
    assert own["isSitemap"] == ["true"] and own["sitemap.depth"] == ["0"]
    assert other["sitemap.hosts"] == ["a.example.org"]  # cross-submission: who named it
    assert counts["sitemaps/found"] == 2 and counts["sitemaps/blacklisted/spam"] == 1
    assert sum(n for k, n in counts.items() if k.startswith("sitemaps/rejected/")) == 1


def test_a_sitemap_that_is_a_feed_gets_the_feed_tag(conf):
    rss = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>news</title>'
           b"<item><link>http://a.com/n/1</link></item></channel></rss>")
    out, entries = run(SitemapProcessor(conf), "http://a.com/feed.xml", rss)
    assert out.metadata["isFeed"] == ["true"] and "http://a.com/n/1" in entries
    out, _ = run(SitemapProcessor(conf), "http://a.com/s.xml", urlset("http://a.com/p"))
    assert "isFeed" not in out.metadata
    from owler.frontier import tag_rules
    assert ("isFeed", "true", "Feed") in tag_rules(conf["frontier.tags"])  # the Feed tag


def test_a_sitemap_not_modified_since_its_last_fetch_is_fetched_without_entries(conf):
    md = {"isSitemap": ["true"], "fetch.statusCode": ["304"], "isFeed": ["true"]}
    out, entries = run(SitemapProcessor(conf), "http://a.com/feed.xml", b"", md)
    assert out.status is Status.FETCHED and not entries and out.metadata["isFeed"] == ["true"]
    # so is one whose content the fetcher withheld (signals.refused.action strip): no error
    md = {"isSitemap": ["true"], "fetch.statusCode": ["200"], "signals.withheld": ["search"]}
    out, entries = run(SitemapProcessor(conf), "http://a.com/s.xml", b"", md)
    assert out.status is Status.FETCHED and not entries and "error.cause" not in out.metadata
    assert out.metadata["signals.withheld"] == ["search"]


def test_host_budgets_are_shared_by_every_task_through_the_frontier(conf, tmp_path):
    # two parser tasks (each its own connection to the frontier file, as in two processes)
    from owler.frontier.sqlite import SQLiteFrontier

    limits = {**conf, "sitemap.max.urls.per.host": 5, "sitemap.max.sitemaps.per.host": 3}
    a, b = (SQLiteFrontier(tmp_path / "f.sqlite", {}) for _ in range(2))
    try:
        one, two = SitemapProcessor(limits, budgets=a), SitemapProcessor(limits, budgets=b)
        body = urlset(*(url(f"http://a.com/{i}") for i in range(4)))
        _, e1 = run(one, "http://a.com/s1.xml", body)
        _, e2 = run(two, "http://a.com/s2.xml", body)
        assert len(e1) == 4 and len(e2) == 1  # 5 URLs for the host, not 5 per task
        assert two.counters["dropped/host_budget"] == 3
        out, _ = run(one, "http://a.com/s3.xml", body)  # third sitemap: budget of 3 sitemaps
        assert "sitemap.truncated" not in out.metadata
        out, e = run(two, "http://a.com/s4.xml", body)
        assert out.metadata["sitemap.truncated"] == ["host_budget"] and e == {}
        assert a.charge("urls:a.com", 1, 5, NOW + 86400, 86400) == 1  # a new window
    finally:
        a.close()
        b.close()


def test_frontier_charge_grants_up_to_the_limit_per_window(tmp_path):
    from owler.frontier.sqlite import SQLiteFrontier

    f = SQLiteFrontier(tmp_path / "f.sqlite", {})
    try:
        assert f.charge("c", 3, 5, 100.0, 10.0) == 3
        assert f.charge("c", 3, 5, 101.0, 10.0) == 2
        assert f.charge("c", 1, 5, 109.9, 10.0) == 0
        assert f.charge("c", 7, 5, 110.0, 10.0) == 5  # the window that began at 100 is over
        assert f.charge("other", 9, -1, 110.0, 10.0) == 9  # no limit
    finally:
        f.close()
