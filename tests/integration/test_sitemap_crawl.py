"""The sitemap pipeline end to end: `owler inject` of home pages, then `owler run sitemap` on real
Apache Storm (local mode) against the loopback farm's sitemap sites (tests/farm/server.py,
SITEMAP_SITES), judged from the farm's access log and the frontier. A second run after the farm
changed one page's lastmod fetches that page again, and only it."""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from owler.conf import load_conf
from owler.constants import Status
from owler.frontier import StatusUpdate
from owler.frontier.sqlite import SQLiteFrontier
from tests.farm.harness import HOST_FILES, FarmProcess
from tests.farm.server import SITEMAP_SITES, sitemap_addr
from tests.integration.cli import owler


pytestmark = pytest.mark.integration


class SitemapFarm(FarmProcess):
    """The farm with only its sitemap sites (one host each)."""

    def __init__(self, log_path: Path):
        super().__init__(0, log_path, sitemap_hosts=len(SITEMAP_SITES))

    def host(self, site: str) -> str:
        return sitemap_addr(SITEMAP_SITES.index(site))

    def u(self, site: str, path: str) -> str:
        return f"http://{self.host(site)}:{self.port}{path}"


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("sitemap")
    conf = work / "conf.yaml"
    conf.write_text(
        f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {work}\n"
        "http.allow.private.addresses: true\n"
        "fetcher.server.delay: 0.3\n"
        "http.timeout: 3000\n"
        "spout.min.delay.queries: 500\n"
        "sitemap.max.depth: 3\n")
    with SitemapFarm(work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("".join(farm.u(s, "/") + "\n" for s in SITEMAP_SITES))
        inject = owler("inject", str(seeds), "--conf", str(conf))
        run = owler("run", "sitemap", "--conf", str(conf), "--idle-exit", "8", "--time", "400")
        log1 = farm.access_log()
        parsed = counters(work / "run" / "sitemap", "sitemap")  # before the second run's
        frontier = SQLiteFrontier(work / "frontier.sqlite", load_conf(conf))
        records = {u: frontier.get(u) for (u,) in frontier.conn.execute("SELECT url FROM urls")}
        tags = {u: frontier.tag(u) for u in records}
        # phase 2: /p/1 changes; its sitemap is due again (as after its fetch interval)
        req = urllib.request.Request(farm.u("sm_robots", "/__bump"), method="POST")
        bumped = urllib.request.urlopen(req, timeout=10).read().decode()
        sm = farm.u("sm_robots", "/sitemap-a.xml")
        rec = frontier.get(sm)
        frontier.apply_updates([StatusUpdate(sm, rec.status, rec.metadata, time.time(), rec.key)])
        frontier.close()
        run2 = owler("run", "sitemap", "--conf", str(conf), "--idle-exit", "8", "--time", "400")
        log2 = farm.access_log()[len(log1):]
        frontier = SQLiteFrontier(work / "frontier.sqlite", load_conf(conf))
        after = {u: frontier.get(u) for (u,) in frontier.conn.execute("SELECT url FROM urls")}
        frontier.close()
        yield {"farm": farm, "inject": inject, "run": run, "parsed": parsed, "log": log1,
               "records": records, "tags": tags, "bumped": bumped, "run2": run2, "log2": log2,
               "after": after, "work": work}


def counters(run_dir: Path, component: str) -> Counter:
    """The counters of a component's tasks, summed from their stats files (written at the end)."""
    total: Counter = Counter()
    files = sorted(run_dir.glob(f"{component}-*.json"))
    assert files, f"no stats file of {component} in {run_dir}"
    for f in files:
        total.update(json.loads(f.read_text())["counters"])
    return total


def requested(log, farm, site):
    return [e["path"] for e in log if e["host"] == farm.host(site)]


SITEMAP_FILES = {
    "sm_robots": {"/sitemap-a.xml"},
    "sm_guess": {"/sitemap.xml", "/sitemap_index.xml"},
    "sm_index": {"/index.xml", "/sub-index.xml", "/gz/sitemap.xml.gz", "/text.txt", "/feed.rss",
                 "/feed.atom", "/deep/0.xml", "/deep/1.xml", "/deep/2.xml", "/deep-set/0.xml",
                 "/deep-set/1.xml"},
    "sm_cross": set(),
    "sm_plain": {"/cross/sitemap.xml", "/sitemap.xml", "/sitemap_index.xml", "/own.xml"},
    "sm_bombs": {"/bomb.xml.gz", "/laughs.xml", "/xxe.xml", "/ok.xml"},
}
PAGES = {
    "sm_robots": {"/p/1", "/p/2", "/p/3", "/p/4", "/p/5", "/p/6"},
    "sm_guess": {"/g/1", "/g/2"},
    "sm_index": {"/gz-page", "/text-page/1", "/text-page/2", "/rss-item", "/atom-entry",
                 "/deep-page/0", "/deep-page/1"},
    "sm_cross": {"/c/1"},
    "sm_plain": {"/plain-listed-by-cross", "/own-page"},
    "sm_bombs": {"/fine"},
}


def test_run_stops_when_idle_and_the_bombs_are_cut_short(crawl):
    assert crawl["inject"].returncode == 0
    assert "6 new URL" in crawl["inject"].stdout
    assert "idle for 8 s" in crawl["run"].stdout  # not at its time limit
    parsed = crawl["parsed"]
    # the gzip bomb (1 GiB inflated) parsed up to sitemap.max.size and no further, once; the
    # billion laughs and the XXE document stopped at their first entity declaration
    assert parsed["truncated/max_bytes"] == 1, parsed
    assert parsed["error/xml_entities"] == 2, parsed


def test_fetches_exactly_the_sitemaps_and_the_listed_in_scope_urls(crawl):
    farm, log = crawl["farm"], crawl["log"]
    for site in SITEMAP_SITES:
        paths = requested(log, farm, site)
        assert len(paths) == len(set(paths)), (site, sorted(paths))  # nothing fetched twice
        assert set(paths) - set(HOST_FILES) == SITEMAP_FILES[site] | PAGES[site], site
        assert "/" not in paths and "/unlisted" not in paths  # no home page, no outlink
    assert "/secret" not in requested(log, farm, "sm_bombs")  # XXE: the entity is never fetched
    assert not [e for e in log if e["host"] not in {farm.host(s) for s in SITEMAP_SITES}]


def test_lastmod_changefreq_priority_and_extensions_recorded(crawl):
    farm, rec, tags = crawl["farm"], crawl["records"], crawl["tags"]
    p1 = rec[farm.u("sm_robots", "/p/1")]
    assert p1.status == Status.FETCHED
    md = p1.metadata
    assert md["sitemap.lastModified"] == ["2024-01-01T09:00:00Z"]
    assert md["sitemap.changefreq"] == ["daily"] and md["sitemap.priority"] == ["0.9"]
    assert md["isDiscoveredOnSitemap"] == ["true"] and md["isSitemap"] == ["false"]
    assert md["IMAGE.loc"] == [farm.u("sm_robots", "/img/1.jpg")]
    assert md["LINKS.href"] == [farm.u("sm_robots", "/p/2")] and md["LINKS.params.hreflang"] == ["de"]
    assert tags[farm.u("sm_robots", "/p/1")] == "OnSitemap"
    # changefreq daily: due again in a day (clamped by scheduler.sitemap.*), counted from when
    # its status was made: after the farm answered, before the frontier wrote it
    answered = max(e["t"] for e in crawl["log"]
                   if e["host"] == farm.host("sm_robots") and e["path"] == "/p/1")
    # (the date is kept to the second: a second either way)
    assert answered + 86400 - 1 <= p1.next_fetch_date <= p1.updated + 86400 + 1
    assert rec[farm.u("sm_index", "/rss-item")].metadata["sitemap.lastModified"] == \
        ["2025-06-10T04:00:00Z"]
    assert rec[farm.u("sm_index", "/atom-entry")].metadata["sitemap.lastModified"] == \
        ["2025-07-01T12:00:00Z"]
    sub = rec[farm.u("sm_index", "/sub-index.xml")]
    assert sub.metadata["isSitemap"] == ["true"] and sub.metadata["sitemap.depth"] == ["1"]
    assert tags[farm.u("sm_index", "/sub-index.xml")] == "OnSitemap"  # first by name
    assert tags[farm.u("sm_index", "/index.xml")] == "Sitemap"  # named by robots.txt
    # robots.txt disallows it: listed, kept, never fetched
    priv = rec[farm.u("sm_robots", "/private/x")]
    assert priv.status == Status.ERROR and priv.metadata["error.cause"] == ["robots.txt"]
    assert not [u for u in rec if "203.0.113.9" in u or u.endswith("/p/unrelated")
                or u.endswith("/foreign.xml")]  # out of scope: never even stored


def test_seeds_are_looked_up_not_fetched(crawl):
    farm, rec = crawl["farm"], crawl["records"]
    for site in SITEMAP_SITES:
        home = rec[farm.u(site, "/")]
        assert home.status == Status.DISCOVERED
        assert "sitemap.seeded" in home.metadata
        assert home.next_fetch_date > time.time() + 3600  # next look-up: sitemap.seed.interval
    cross = rec[farm.u("sm_plain", "/cross/sitemap.xml")]
    assert cross.metadata["sitemap.hosts"] == [farm.host("sm_cross")]  # cross-submission


def test_bombs_are_harmless_and_recorded(crawl):
    farm, rec = crawl["farm"], crawl["records"]
    for path in ("/laughs.xml", "/xxe.xml"):
        r = rec[farm.u("sm_bombs", path)]
        assert r.status == Status.FETCH_ERROR, path
        assert r.metadata["error.cause"] == ["xml_entities"]
        assert r.metadata["error.source"] == ["sitemap parsing"]
    bomb = rec[farm.u("sm_bombs", "/bomb.xml.gz")]
    assert bomb.status == Status.FETCHED and bomb.metadata["sitemap.truncated"] == ["max_bytes"]
    assert rec[farm.u("sm_bombs", "/fine")].status == Status.FETCHED
    deep = rec[farm.u("sm_index", "/deep/2.xml")]
    assert deep.status == Status.FETCHED  # fetched, but its children are beyond sitemap.max.depth
    assert farm.u("sm_index", "/deep/3.xml") not in rec


def test_a_changed_lastmod_makes_only_that_page_due_again(crawl):
    farm, log2 = crawl["farm"], crawl["log2"]
    assert "idle for 8 s" in crawl["run2"].stdout
    fetched = {(e["host"], e["path"]) for e in log2 if e["path"] not in (*HOST_FILES, "/__bump")}
    host = farm.host("sm_robots")
    assert fetched == {(host, "/sitemap-a.xml"), (host, "/p/1")}, sorted(fetched)
    p1 = crawl["after"][farm.u("sm_robots", "/p/1")]
    assert p1.metadata["sitemap.lastModified"] == [crawl["bumped"]]
    assert p1.status == Status.FETCHED


@pytest.fixture(scope="module")
def crawl_os(opensearch, tmp_path_factory):
    """The same crawl with the OpenSearch frontier (the sitemap refresh as an update script)."""
    work = tmp_path_factory.mktemp("sitemap-os")
    conf = work / "conf.yaml"
    conf.write_text(opensearch.conf_lines("sitemap_crawl") + (
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {work}\n"
        "http.allow.private.addresses: true\n"
        "fetcher.server.delay: 0.3\n"
        "http.timeout: 3000\n"
        "spout.min.delay.queries: 500\n"
        "spout.ttl.purgatory: 5\n"
        "opensearch.status.max.buckets: 20\n"
        "sitemap.max.depth: 3\n"))
    with SitemapFarm(work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("".join(farm.u(s, "/") + "\n" for s in SITEMAP_SITES))
        owler("inject", str(seeds), "--conf", str(conf))
        run = owler("run", "sitemap", "--conf", str(conf), "--idle-exit", "10", "--time", "400")
        from owler.frontier import open_frontier

        frontier = open_frontier(load_conf(conf))
        frontier.refresh()
        docs = {u: frontier.get(u) for u in (farm.u("sm_robots", "/p/1"), farm.u("sm_robots", "/"),
                                             farm.u("sm_guess", "/"))}
        frontier.close()
        yield {"farm": farm, "run": run, "log": farm.access_log(), "docs": docs}


def test_the_pipeline_runs_on_the_opensearch_frontier(crawl_os):
    farm, log, docs = crawl_os["farm"], crawl_os["log"], crawl_os["docs"]
    assert "idle for 10 s" in crawl_os["run"].stdout, crawl_os["run"].stdout
    for site in SITEMAP_SITES:
        paths = requested(log, farm, site)
        assert len(paths) == len(set(paths)), (site, sorted(paths))
        assert set(paths) - set(HOST_FILES) == SITEMAP_FILES[site] | PAGES[site], site
    p1 = docs[farm.u("sm_robots", "/p/1")]
    assert p1.status == Status.FETCHED
    assert p1.metadata["sitemap.lastModified"] == ["2024-01-01T09:00:00Z"]
    for home in (farm.u("sm_robots", "/"), farm.u("sm_guess", "/")):
        rec = docs[home]
        assert rec.status == Status.DISCOVERED and "sitemap.seeded" in rec.metadata
        assert rec.next_fetch_date > time.time() + 3600  # looked up, not fetched; next look-up
