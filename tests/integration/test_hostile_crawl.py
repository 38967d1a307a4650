"""The explorative crawl of the hostile farm (tests/farm/hostile.py) on real Storm (local mode),
with the default configuration but for the farm's network (``http.allowed.networks``, the SSRF
guard on) and a depth limit on the trap seed (``max.depth``, MaxDepthFilter): the crawl ends by
itself, every farm URL reaches a final status, the traps are bounded, the slow and broken servers
cost a bounded time each and are asked at most twice, the calm hosts are crawled in full, the WARC
files are valid, and the canary on another loopback address is never reached."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import hostile as H
from tests.integration.cli import owler

ROOT = Path(__file__).resolve().parents[2]
TRAP_DEPTH = 12

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    log = work / "access.log"
    farm = subprocess.Popen([sys.executable, "-m", "tests.farm.hostile", "--log", str(log)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        ready = farm.stdout.readline().split()
        assert ready and ready[0] == "READY", "the hostile farm did not start"
        port, canary = int(ready[1]), int(ready[2])
        conf = work / "conf.yaml"
        conf.write_text(f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
                        f"warc.dir: {work / 'warc'}\n"
                        f"owler.work.dir: {work}\n"
                        f"http.allowed.networks: [{H.NETWORK}]\n")
        seeds = work / "seeds.txt"
        seeds.write_text(
            f"http://{H.HOSTS['traps']}:{port}/\tmax.depth={TRAP_DEPTH}\n"
            f"http://{H.HOSTS['slow']}:{port}/\n"
            f"http://{H.HOSTS['calm1']}:{port}/\n"
            f"http://{H.HOSTS['calm2']}:{port}/\n")
        owler("inject", str(seeds), "--conf", str(conf))
        t0 = time.time()
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "10",
                    "--time", "500", check=False)
        took = time.time() - t0
        entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        yield {"work": work, "port": port, "canary": canary, "run": run, "took": took,
               "log": entries}
    finally:
        farm.terminate()
        farm.wait(10)


def requests(crawl, host: str, prefix: str = "/") -> Counter:
    return Counter(e["path"] for e in crawl["log"]
                   if e.get("host") == H.HOSTS[host] and e["path"].startswith(prefix))


def frontier(crawl) -> dict:
    with SQLiteFrontier(crawl["work"] / "frontier.sqlite") as f:
        urls = [row[0] for row in f.conn.execute("SELECT url FROM urls")]
        return {u: f.get(u) for u in urls}


def test_the_crawl_ends_by_itself(crawl):
    run = crawl["run"]
    assert run.returncode == 0, run.stdout + run.stderr
    assert "idle for 10 s" in run.stdout
    print(f"\nhostile crawl: {crawl['took']:.0f} s, {len(crawl['log'])} requests")


def test_the_canary_is_never_reached(crawl):
    assert not [e for e in crawl["log"] if e.get("canary")]
    urls = frontier(crawl)
    refused = [u for u, s in urls.items() if f":{crawl['canary']}/" in u]
    assert refused  # the links and the redirect to it were seen, and refused at the fetcher
    for url in refused:
        s = urls[url]
        # an address is refused as such; localhost is refused when its robots.txt is looked up
        cause = ["robots.txt"] if "//localhost:" in url else ["private_address"]
        assert s.status.value == "ERROR" and s.metadata["error.cause"] == cause, url


def test_every_farm_url_reaches_a_final_status(crawl):
    farm_hosts = tuple(f"http://{a}:{crawl['port']}/" for a in H.HOSTS.values())
    left = [u for u, s in frontier(crawl).items()
            if u.startswith(farm_hosts) and s.status.value == "DISCOVERED"]
    assert not left, left


def test_traps_are_bounded(crawl):
    calendar = requests(crawl, "traps", "/cal/")
    assert TRAP_DEPTH - 2 <= len(calendar) <= TRAP_DEPTH  # the depth limit, and nothing more
    assert len(requests(crawl, "traps", "/rep/")) <= 8  # BasicURLFilter: path repetition
    assert len(requests(crawl, "traps", "/sess/")) <= 4  # session ids normalised away
    assert len(requests(crawl, "traps", "/long/")) == 1  # BasicURLFilter: maxLength 1024
    redirects = requests(crawl, "traps", "/redir/")
    assert sorted(redirects) == [f"/redir/{n}" for n in range(1, 7)]  # http.allow.redirects.max
    assert max(redirects.values()) == 1


def test_slow_and_broken_servers_get_a_final_status_and_spare_the_host(crawl):
    urls = frontier(crawl)
    asked = requests(crawl, "slow")
    base = f"http://{H.HOSTS['slow']}:{crawl['port']}"
    causes = {}
    for path in H.SLOW_PATHS:
        assert 1 <= asked[path] <= 2, (path, asked[path])
        s = urls[base + path]
        causes[path] = (s.status.value, (s.metadata.get("error.cause") or [""])[0])
    assert causes["/drip"] == ("FETCH_ERROR", "timeout")  # fetcher.thread.timeout
    assert causes["/silent"] == ("FETCH_ERROR", "timeout")  # http.timeout
    assert causes["/bomb"][1] == "too_large_decompressed"
    for path in ("/endless-headers", "/short-body", "/huge-header"):
        assert causes[path] == ("FETCH_ERROR", "malformed_response"), (path, causes[path])
    assert causes["/endless-chunked"][0] == "FETCHED"  # cut at http.content.limit, trimmed
    for n in (1, 2):
        assert urls[f"{base}/ok/{n}"].status.value == "FETCHED"


def test_the_calm_hosts_are_crawled_in_full(crawl):
    urls = frontier(crawl)
    for host in ("calm1", "calm2"):
        base = f"http://{H.HOSTS[host]}:{crawl['port']}"
        pages = [base + "/"] + [f"{base}/p/{k}" for k in range(1, H.CALM_PAGES + 1)]
        assert all(urls[p].status.value == "FETCHED" for p in pages), host


def test_the_warc_files_are_valid_and_the_flood_is_trimmed(crawl):
    files = sorted((crawl["work"] / "warc").glob("*.warc.gz"))
    assert files and not list((crawl["work"] / "warc").glob("*.open"))
    truncated = {}
    n = 0
    for path in files:
        for rec in ArchiveIterator(io.BytesIO(path.read_bytes())):
            n += 1
            if rec.rec_type == "response":
                rec.content_stream().read()
                truncated[rec.rec_headers.get_header("WARC-Target-URI")] = \
                    rec.rec_headers.get_header("WARC-Truncated")
    assert n > 40
    flood = f"http://{H.HOSTS['slow']}:{crawl['port']}/endless-chunked"
    assert truncated[flood] == "length"
