"""Webmasters' signals in a crawl (issue 47): the explorative topology on real Storm (local
mode) crawls the signals farm (tests/farm/signals.py) for search, the default policy
(``signals.refused.action: skip``). What robots.txt refuses is never requested; every page records
what its robots.txt and its headers said, in the frontier and in a WARC metadata record beside its
response; malformed signals are recorded as unknown with their reasons and stop nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import signals as S
from tests.farm.harness import farm_module
from tests.integration.cli import owler

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("signals")
    log = work / "access.log"
    with farm_module("tests.farm.signals", log) as ready:
        port = int(ready[0])
        conf = work / "conf.yaml"
        conf.write_text(f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
                        f"warc.dir: {work / 'warc'}\n"
                        f"owler.work.dir: {work}\n"
                        f"http.allowed.networks: [{S.NETWORK}]\n"
                        "http.robots.agents: [owler]\n"
                        "fetcher.server.delay: 0.2\n")
        (work / "seeds.txt").write_text("".join(f"http://{a}:{port}/\n" for a in S.HOSTS.values()))
        owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
        t0 = time.time()
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "10",
                    "--time", "300", check=False)
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    with SQLiteFrontier(work / "frontier.sqlite") as f:
        urls = [row[0] for row in f.conn.execute("SELECT url FROM urls")]
        records = {u: f.get(u) for u in urls}
    return {"port": port, "run": run, "t0": t0, "requests": requests, "records": records,
            "work": work}


def url(crawl, site: str, path: str) -> str:
    return f"http://{S.HOSTS[site]}:{crawl['port']}{path}"


def signals_of(crawl, site: str, path: str) -> dict:
    rec = crawl["records"][url(crawl, site, path)]
    return {k: v for k, v in rec.metadata.items() if k.startswith("signals.")}


def test_the_crawl_ends_by_itself(crawl):
    run = crawl["run"]
    assert run.returncode == 0 and "idle for 10 s" in run.stdout, run.stdout[-3000:] + run.stderr


def test_what_robots_txt_refuses_for_search_is_never_requested(crawl):
    asked = {(e["host"], e["path"]) for e in crawl["requests"]}
    assert (S.HOSTS["usage"], "/no-search/a") not in asked
    assert {p for h, p in asked if h == S.HOSTS["cfnosearch"]} == {"/robots.txt"}
    for site, path in (("usage", "/no-search/a"), ("cfnosearch", "/")):
        rec = crawl["records"][url(crawl, site, path)]
        assert rec.status.name == "ERROR" and rec.metadata["error.cause"] == ["signals"]
        assert rec.metadata["signals.search"] == ["refused"]
    # the rest of each site is crawled (another crawler's group refuses search: not ours)
    for site in S.HOSTS:
        if site == "cfnosearch":
            continue
        for path in ["/", *S.PAGES[site]]:
            if (site, path) != ("usage", "/no-search/a"):
                assert crawl["records"][url(crawl, site, path)].status.name == "FETCHED", \
                    (site, path)


def test_every_page_records_what_its_host_said(crawl):
    assert signals_of(crawl, "usage", "/plain/c") == {"signals.ai-train": ["refused"]}
    assert signals_of(crawl, "usage", "/ai-ok/b") == {"signals.ai-train": ["allowed"]}
    cf = signals_of(crawl, "cfsignal", "/p")
    assert cf["signals.search"] == ["allowed"] and cf["signals.ai-train"] == ["refused"]
    assert cf["signals.unreadable"] == [
        "robots.content-signal: use=reference: use= says how far content may be used, "
        "kept as written"]
    assert signals_of(crawl, "headers", "/") == {
        "signals.search": ["allowed"], "signals.ai-train": ["refused"],
        "signals.ai-input": ["refused"], "signals.tdm": ["refused"]}
    assert signals_of(crawl, "headers", "/other") == {}  # another crawler's noai
    bad = signals_of(crawl, "malformed", "/")
    assert set(bad) == {"signals.unreadable"} and len(bad["signals.unreadable"]) == 3
    assert any("not a structured field dictionary" in r for r in bad["signals.unreadable"])


def test_the_warc_files_carry_the_signals_beside_each_response(crawl):
    responses, metadata = {}, {}
    for path in sorted(Path(crawl["work"], "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                target = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type == "response":
                    responses[rec.rec_headers.get_header("WARC-Record-ID")] = target
                elif rec.rec_type == "metadata":
                    metadata[target] = (rec.rec_headers.get_header("WARC-Concurrent-To"),
                                        json.loads(rec.content_stream().read()))
    # every page with a signal has its record, linked to its response; the others none
    with_signals = {u for u, r in crawl["records"].items() if r.status.name == "FETCHED"
                    and any(k.startswith("signals.") for k in r.metadata)}
    assert set(metadata) == with_signals and url(crawl, "headers", "/other") not in metadata
    for target, (concurrent, record) in metadata.items():
        assert responses[concurrent] == target
        assert record["vocab"] == "draft-ietf-aipref-vocab-08"
    _, headers = metadata[url(crawl, "headers", "/")]
    assert headers["purposes"]["tdm"] == {"state": "refused", "sources": ["tdmrep.header"]}
    assert {s["source"] for s in headers["statements"]} == {
        "header.content-usage", "header.x-robots-tag", "tdmrep.header"}
    assert any(s["raw"].endswith("tdm-policy: https://policy.example/p.json")
               for s in headers["statements"])
