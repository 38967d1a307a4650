"""The sitemap parser bolt, the seed spout and the fetcher's sitemap look-ups as real multilang
subprocesses (the protocol Storm speaks), the fetcher against the farm's sitemap sites."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owler import wire
from owler.conf import load_conf
from owler.constants import Status
from owler.frontier import StatusUpdate, open_frontier
from tests.component.multilang import ShellComponent
from tests.farm.harness import FarmProcess
from tests.farm.server import SITEMAP_SITES, sitemap_addr

ROOT = Path(__file__).resolve().parents[2]
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


@pytest.fixture
def conf(tmp_path):
    c = load_conf()
    c.update({"frontier.sqlite.path": str(tmp_path / "f.sqlite"), "warc.dir": str(tmp_path / "warc"),
              "http.allow.private.addresses": True, "fetcher.server.delay": 0.1,
              "http.timeout": 3000, "spout.min.delay.queries": 0,
              "owler.run.dir": str(tmp_path / "run")})
    return c


def emits(msgs, stream="default"):
    return [m for m in msgs if m.get("command") == "emit" and m.get("stream", "default") == stream]


def test_sitemap_parser_bolt(conf, tmp_path):
    bolt = ShellComponent("bolts.sitemap_parser.SitemapParserBolt", conf, tmp_path, "sitemap")
    try:
        body = gzip.compress(f"<urlset {NS}>{''.join(f'<url><loc>http://a.com/{i}</loc><lastmod>2024-02-0{i}</lastmod></url>' for i in range(1, 4))}<url><loc>http://b.org/x</loc></url></urlset>".encode())
        md = {"isSitemap": ["true"], "depth": ["0"], wire.RAW_HEADERS: ["Content-Type: application/gzip"]}
        bolt.process(["http://a.com/s.xml.gz", bolt.content(body), md], tid="s1")
        msgs = bolt.until_acked("s1")
        assert msgs[-1]["command"] == "ack"
        status = [m["tuple"] for m in emits(msgs, "status")]
        assert [(u, st) for u, _, st in status] == [
            ("http://a.com/1", "DISCOVERED"), ("http://a.com/2", "DISCOVERED"),
            ("http://a.com/3", "DISCOVERED"), ("http://a.com/s.xml.gz", "FETCHED")]
        assert status[1][1]["sitemap.lastModified"] == ["2024-02-02T00:00:00Z"]
        assert status[1][1]["isDiscoveredOnSitemap"] == ["true"]
        assert all(m["anchors"] == ["s1"] for m in emits(msgs, "status"))
        assert not [k for k in status[-1][1] if k.startswith("_raw.")]
        # not a sitemap: passed on to the HTML parser unchanged
        page = bolt.content(b"<html><body>x</body></html>")
        bolt.process(["http://a.com/p", page, {"isSitemap": ["false"]}, "a.com"], tid="p1")
        msgs = bolt.until_acked("p1")
        out = emits(msgs)[0]["tuple"]
        assert out[0] == "http://a.com/p" and out[1] == page and out[2]["isSitemap"] == ["false"]
        assert out[3] == "a.com"  # its key, which the HTML parser is grouped on
        assert not emits(msgs, "status")
        bolt.process(["http://a.com/q", page, {}], tid="q1")  # an older topology's tuple
        assert emits(bolt.until_acked("q1"))[0]["tuple"][3] is None
        # an XML bomb and a broken tuple: recorded, the bolt lives on
        laughs = (b'<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
                  b"<urlset><url><loc>&b;</loc></url></urlset>")
        bolt.process(["http://a.com/bomb.xml", bolt.content(laughs), {"isSitemap": ["true"]}],
                     tid="b1")
        st = emits(bolt.until_acked("b1"), "status")[0]["tuple"]
        assert st[2] == "FETCH_ERROR" and st[1]["error.cause"] == ["xml_entities"]
        bolt.process(["http://a.com/x.xml", "Z???", {"isSitemap": ["true"]}], tid="x1")
        st = emits(bolt.until_acked("x1"), "status")[0]["tuple"]
        assert st[2] == "ERROR" and st[1]["error.source"] == ["sitemap parsing"]
        bolt.process(["http://a.com/ok.xml", bolt.content(b"http://a.com/t\n"),
                      {"isSitemap": ["true"]}], tid="t1")
        assert [m["tuple"][0] for m in emits(bolt.until_acked("t1"), "status")] == [
            "http://a.com/t", "http://a.com/ok.xml"]
    finally:
        bolt.close()


def test_seed_spout_serves_only_untagged_urls_marked_as_seeds(conf, tmp_path):
    f = open_frontier(conf)
    now = time.time()
    f.inject([("http://a.example/", {}), ("http://b.example/", {})], now - 10)
    f.apply_updates([StatusUpdate("http://a.example/sitemap.xml", Status.DISCOVERED,
                                  {"isSitemap": ["true"]}, now - 20, "a.example"),
                     StatusUpdate("http://a.example/p", Status.DISCOVERED,
                                  {"isDiscoveredOnSitemap": ["true"]}, now - 30, "a.example")])
    f.close()
    seeds = ShellComponent("spouts.sitemap_seed.SitemapSeedSpout", conf, tmp_path / "s",
                           "spout_seeds")
    main = ShellComponent("spouts.frontier.FrontierSpout",
                          {**conf, "frontier.interest.tags": ["Sitemap", "OnSitemap"]},
                          tmp_path / "m", "spout")
    try:
        got, other = [], []
        for _ in range(4):
            got += [m["tuple"] for m in emits(seeds.next())]
            other += [m["tuple"][0] for m in emits(main.next())]
        assert sorted(u for u, _ in got) == ["http://a.example/", "http://b.example/"]
        assert all(md["sitemap.seed"] == ["true"] for _, md in got)
        assert sorted(other) == ["http://a.example/p", "http://a.example/sitemap.xml"]
    finally:
        seeds.close()
        main.close()


class SitemapFarm(FarmProcess):
    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.farm.server", "--hosts", "0", "--sitemap-hosts",
             str(len(SITEMAP_SITES)), "--log", str(self.log_path)],
            cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        line = self.proc.stdout.readline()
        assert line.startswith("READY"), line
        self.port = int(line.split()[1])

    def u(self, site, path):
        return f"http://{sitemap_addr(SITEMAP_SITES.index(site))}:{self.port}{path}"


def test_fetcher_looks_up_seed_hosts_and_discovers_sitemaps(conf, tmp_path):
    with SitemapFarm(0, tmp_path / "access.log") as farm:
        bolt = ShellComponent("bolts.fetcher.FetcherBolt", {**conf, "sitemap.discovery": True},
                              tmp_path, "fetcher")
        try:
            jobs = {"seed": (farm.u("sm_robots", "/"), {"sitemap.seed": ["true"]}),
                    "guess": (farm.u("sm_guess", "/"), {"sitemap.seed": ["true"]}),
                    "cross": (farm.u("sm_cross", "/"), {"sitemap.seed": ["true"]}),
                    "page": (farm.u("sm_index", "/gz-page"), {})}
            for name, (url, md) in jobs.items():
                bolt.process([url, url.split("/")[2].split(":")[0], md], tid=name)
            seen = {}
            while len(seen) < len(jobs):
                for m in bolt.read_until(lambda m: m.get("command") in ("ack", "fail"), timeout=20):
                    if m.get("command") == "emit":
                        seen.setdefault(m["anchors"][0], []).append(m)
                    elif m.get("command") in ("ack", "fail"):
                        assert m["command"] == "ack"
                        seen.setdefault(m["id"], [])
            seed = [m["tuple"] for m in emits(seen["seed"], "status")]
            assert [(u, st) for u, _, st in seed] == [
                (farm.u("sm_robots", "/sitemap-a.xml"), "DISCOVERED"),
                (farm.u("sm_robots", "/"), "DISCOVERED")]
            assert seed[0][1]["isSitemap"] == ["true"] and seed[0][1]["sitemap.depth"] == ["0"]
            own = seed[1][1]
            assert "sitemap.seeded" in own and own["scheduler.delay.mins"] == ["1440"]
            assert "sitemap.seed" not in own
            guess = [m["tuple"][0] for m in emits(seen["guess"], "status")]
            assert guess == [farm.u("sm_guess", "/sitemap.xml"),
                             farm.u("sm_guess", "/sitemap_index.xml"), farm.u("sm_guess", "/")]
            cross = [m["tuple"] for m in emits(seen["cross"], "status")]
            assert cross[0][0] == farm.u("sm_plain", "/cross/sitemap.xml")
            assert cross[0][1]["sitemap.hosts"] == [farm.u("sm_cross", "/").split("/")[2].split(":")[0]]
            # a page fetched with sitemap.discovery: its host's sitemaps come along, once
            page = emits(seen["page"])[0]["tuple"]
            assert page[2]["foundSitemap"] == ["true"]
            assert [m["tuple"][0] for m in emits(seen["page"], "status")] == [
                farm.u("sm_index", "/index.xml")]
            paths = [e["path"] for e in farm.access_log()]
            assert "/" not in paths  # seeds are never fetched
        finally:
            bolt.close()
