"""The explorative crawl of the hostile farm (tests/farm/hostile.py) on real Storm (local mode),
with the default configuration but for the farm's network (``http.allowed.networks``, the SSRF
guard on), a depth limit on the trap seed (``max.depth``, MaxDepthFilter) and a short back-off base:
the crawl ends by itself, every farm URL reaches a final status, the traps are bounded, the slow
and broken servers cost a bounded time each and are asked at most twice, throttling servers are
left alone as long as they ask (Retry-After) or for a growing time, the calm hosts are crawled in
full, the WARC files are valid, and the canary on another loopback address is never reached.

The throttling servers are crawled on the OpenSearch frontier too (a crawl of those hosts alone,
on a farm of its own: each throttles once): on both frontiers, a 429 with Retry-After goes from
the farm through the fetcher to a queue the frontier holds (SQLite's ``blocks`` table, the lease
OpenSearch keeps under ``_blocked_``) until the time the server asked for."""

from __future__ import annotations

import io
import json
import sqlite3
import threading
import time
import uuid
from collections import Counter
from contextlib import closing
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.conf import load_conf
from owler.frontier import open_frontier
from owler.frontier.opensearch import BLOCK_OWNER
from owler.frontier.sqlite import SQLiteFrontier
from owler.urls import partition_key, partition_mode
from tests.farm import hostile as H
from tests.farm.harness import HOST_FILES, farm_module
from tests.integration.cli import owler

TRAP_DEPTH = 12
MAX_OUTLINKS = 500

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    log = tmp_path_factory.mktemp("hostile-farm") / "access.log"
    with farm_module("tests.farm.hostile", log) as ready:
        yield {"port": int(ready[0]), "canary": int(ready[1]), "log": log}


def farm_log(farm, since: float) -> list[dict]:
    return [e for e in (json.loads(line) for line in farm["log"].read_text().splitlines()
                        if line.strip()) if e["t"] >= since]


def sqlite_block(path: Path):
    """The time SQLite's ``blocks`` table holds a queue until, or None."""
    def read(key: str) -> float | None:
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as db:
                row = db.execute("SELECT until FROM blocks WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:  # not there yet, or busy
            return None
        return row[0] if row else None
    return read


def opensearch_block(node, index: str):
    """The time the OpenSearch frontier holds a queue until (its lease under BLOCK_OWNER), or
    None. Read from the leases index directly: a frontier opened here would announce a task."""
    def read(key: str) -> float | None:
        status, doc = node.request("GET", f"/{index}_leases/_doc/{quote(key, safe='')}")
        source = (doc or {}).get("_source") or {}
        if status == 200 and source.get("owner") == BLOCK_OWNER:
            return source["until"] / 1000
        return None
    return read


def watch_block(farm, port: int, conf: dict, t0: float, read_block, stop, found: dict) -> None:
    """Once the farm logged the throttled request (ratelimit's first /r/1: 429, Retry-After),
    poll the frontier until it holds the queue; note when the farm answered, the time the queue
    is held until, and when that was seen."""
    url = f"http://{H.HOSTS['ratelimit']}:{port}/r/1"
    key = partition_key(url, partition_mode(conf))
    throttled = None
    while not stop.is_set():
        try:
            if throttled is None:
                throttled = next((e["t"] for e in farm_log(farm, t0) if e.get("host") ==
                                  H.HOSTS["ratelimit"] and e["path"] == "/r/1"), None)
            if throttled is not None:
                until = read_block(key)
                if until is not None:
                    found.update(key=key, throttled=throttled, until=until, seen=time.time())
                    return
        except Exception as exc:  # noqa: BLE001 - a line half written, a busy node: again
            found["last error"] = repr(exc)
        time.sleep(0.2)


def run_crawl(farm, work: Path, topology: str, seeds: str, frontier_conf: str | None = None,
              read_block=None) -> dict:
    """A crawl on the SQLite frontier unless ``frontier_conf`` says otherwise (then
    ``read_block`` reads its blocks); when ratelimit is a seed, the frontier's hold of its queue
    is watched meanwhile (``block``)."""
    conf = work / "conf.yaml"
    sqlite = work / "frontier.sqlite"
    conf.write_text((frontier_conf or f"frontier.sqlite.path: {sqlite}\n") +
                    f"warc.dir: {work / 'warc'}\n"
                    f"owler.work.dir: {work}\n"
                    f"http.allowed.networks: [{H.NETWORK}]\n"
                    "fetcher.backoff.base.secs: 2\n"  # the default, 60 s, is long for a test
                    f"parser.emitOutlinks.max.per.page: {MAX_OUTLINKS}\n")
    (work / "seeds.txt").write_text(seeds)
    owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
    t0 = time.time()
    block: dict = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_block, daemon=True, args=(
        farm, farm["port"], load_conf(str(conf)), t0, read_block or sqlite_block(sqlite), stop,
        block))
    if H.HOSTS["ratelimit"] in seeds:
        watcher.start()
    run = owler("run", topology, "--conf", str(conf), "--idle-exit", "10", "--time", "500",
                check=False)
    took = time.time() - t0
    stop.set()
    if watcher.is_alive():
        watcher.join()
    return {"work": work, "conf": conf, "port": farm["port"], "canary": farm["canary"],
            "run": run, "took": took, "log": farm_log(farm, t0), "block": block}


@pytest.fixture(scope="module")
def crawl(farm, tmp_path_factory):
    port = farm["port"]
    seeds = (f"http://{H.HOSTS['traps']}:{port}/\tmax.depth={TRAP_DEPTH}\n"
             + "".join(f"http://{H.HOSTS[h]}:{port}/\n" for h in (
                 "slow", "calm1", "calm2", "ratelimit", "backoff", "ratedate", "robots429",
                 "robotsmoved", "robotsbig", "robotsenc", "markup")))
    return run_crawl(farm, tmp_path_factory.mktemp("hostile"), "explorative", seeds)


@pytest.fixture(scope="module")
def sitemap_crawl(farm, crawl, tmp_path_factory):  # after the explorative crawl: one at a time
    seeds = "".join(f"http://{H.HOSTS[h]}:{farm['port']}/\n" for h in ("smtrap", "smslow"))
    return run_crawl(farm, tmp_path_factory.mktemp("hostile-sitemap"), "sitemap", seeds)


THROTTLING = ("ratelimit", "backoff", "ratedate")


@pytest.fixture(scope="module")
def opensearch_throttle_crawl(opensearch, sitemap_crawl, tmp_path_factory):
    """The throttling hosts alone on the OpenSearch frontier, after the other crawls, on a farm
    of their own (the farm throttles each host once)."""
    log = tmp_path_factory.mktemp("hostile-farm-os") / "access.log"
    with farm_module("tests.farm.hostile", log) as ready:
        farm = {"port": int(ready[0]), "canary": int(ready[1]), "log": log}
        index = f"hostile-{uuid.uuid4().hex[:8]}"
        seeds = "".join(f"http://{H.HOSTS[h]}:{farm['port']}/\n" for h in THROTTLING)
        return run_crawl(farm, tmp_path_factory.mktemp("hostile-os"), "explorative", seeds,
                         opensearch.conf_lines(index), opensearch_block(opensearch, index))


def throttle_crawl(request, backend: str) -> dict:
    """The crawl that went through the throttling hosts on ``backend``."""
    crawl = request.getfixturevalue("crawl" if backend == "sqlite"
                                    else "opensearch_throttle_crawl")
    if backend != "sqlite":  # the full crawl's end is checked by test_the_crawl_ends_by_itself
        run = crawl["run"]
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "idle for 10 s" in run.stdout, run.stdout[-3000:]
    return crawl


def records(crawl, urls: list[str]) -> dict:
    """The frontier's records of ``urls`` (either frontier), after the crawl."""
    with open_frontier(load_conf(str(crawl["conf"]))) as f:
        return {u: f.get(u) for u in urls}


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
        # an address is refused before any request; localhost when it resolves, for robots.txt
        assert s.status.value == "ERROR" and s.metadata["error.cause"] == ["private_address"], url


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


def page_requests(crawl, host: str) -> list[dict]:
    return sorted((e for e in crawl["log"] if e.get("host") == H.HOSTS[host]
                   and e["path"] not in HOST_FILES), key=lambda e: e["t"])


def throttle_pages(crawl, host: str) -> list[str]:
    base = f"http://{H.HOSTS[host]}:{crawl['port']}"
    return [base + "/"] + [f"{base}/r/{k}" for k in range(1, H.THROTTLE_PAGES + 1)]


@pytest.mark.parametrize("backend", ["sqlite", "opensearch"])
def test_retry_after_holds_the_whole_queue_then_everything_is_fetched(request, backend):
    crawl = throttle_crawl(request, backend)
    for host, wait in (("ratelimit", H.RETRY_AFTER), ("ratedate", H.RETRY_DATE)):
        asked = page_requests(crawl, host)
        t = next(e["t"] for e in asked if e["path"] == "/r/1")  # the throttled answer
        later = [e["t"] for e in asked if e["t"] > t]
        # (ratedate's Retry-After is an HTTP date: whole seconds, up to 1 s less than asked)
        assert later and min(later) >= t + wait - 1.2, (host, min(later) - t)
        assert Counter(e["path"] for e in asked)["/r/1"] == 2
        urls = records(crawl, throttle_pages(crawl, host))
        assert {u: r.status.value for u, r in urls.items()} == {u: "FETCHED" for u in urls}, host
    # the frontier held ratelimit's queue until the time the server asked for: Retry-After
    # seconds after the fetcher had the answer (after the farm logged the request, before the
    # block was seen), longer than fetcher.max.throttle.sleep, so its URLs went back there
    block = crawl["block"]
    assert "until" in block, (f"the {backend} frontier never held ratelimit's queue after its "
                              f"429 (while the crawl ran)", block)
    assert (block["throttled"] + H.RETRY_AFTER - 0.01 <= block["until"]
            <= block["seen"] + H.RETRY_AFTER), block


@pytest.mark.parametrize("backend", ["sqlite", "opensearch"])
def test_throttling_without_retry_after_backs_off_growing(request, backend):
    crawl = throttle_crawl(request, backend)
    times = [e["t"] for e in page_requests(crawl, "backoff")]
    assert len(times) >= 3
    assert times[1] - times[0] >= 2 - 0.2 and times[2] - times[1] >= 4 - 0.2
    urls = records(crawl, throttle_pages(crawl, "backoff"))
    assert {u: r.status.value for u, r in urls.items()} == {u: "FETCHED" for u in urls}


def test_a_robots_txt_answering_429_keeps_the_site_unfetched(crawl):
    assert page_requests(crawl, "robots429") == []
    home = frontier(crawl)[f"http://{H.HOSTS['robots429']}:{crawl['port']}/"]
    assert home.status.value == "ERROR" and home.metadata["error.cause"] == ["robots.txt"]


def test_robots_txt_behind_redirects_too_big_or_encoded_is_obeyed(crawl):
    moved = requests(crawl, "robotsmoved")
    assert [f"/moved/{n}" for n in range(1, H.ROBOTS_HOPS + 1)] == sorted(
        p for p in moved if p.startswith("/moved/"))
    assert "/public/a" in moved and not [p for p in moved if p.startswith("/private")]
    big = requests(crawl, "robotsbig")
    assert "/late/a" in big and "/early/a" not in big  # only the first 500 KiB count
    asked = {unquote(p) for p in requests(crawl, "robotsenc")}
    for link, allowed in H.ENCODED_LINKS:
        assert (unquote(link) in asked) is allowed, (link, sorted(asked))


def test_broken_markup_kills_nothing_and_readable_links_are_kept(crawl):
    urls = frontier(crawl)
    base = f"http://{H.HOSTS['markup']}:{crawl['port']}"
    for path in H.MARKUP_PAGES:
        assert urls[base + path].status.value == "FETCHED", (path, urls[base + path].metadata)
        assert urls[f"{base}/good{path}"].status.value == "FETCHED", path
    assert len(requests(crawl, "markup", "/refresh-self")) == 1
    sink = [u for u in urls if u.startswith(f"http://{H.HOSTS['sink']}:")]
    # 60,000 links: parser.emitOutlinks.max.per.page kept (the page's first link is /good/…)
    assert len(sink) == MAX_OUTLINKS - 1
    assert not requests(crawl, "sink", "/s/")  # robots.txt: Disallow: /


# -- the sitemap topology ------------------------------------------------------------------------

def test_the_sitemap_crawl_ends_and_bounds_an_endless_index_chain(sitemap_crawl):
    run = sitemap_crawl["run"]
    assert run.returncode == 0, run.stdout + run.stderr
    chain = [int(p[4:-4]) for p in requests(sitemap_crawl, "smtrap", "/sm/")]
    assert chain and max(chain) <= 6  # sitemap.max.depth: 5
    left = [u for u, s in frontier(sitemap_crawl).items() if s.status.value == "DISCOVERED"
            and (s.next_fetch_date or 0) <= time.time() and "127.0.60." in u]
    assert not left, left


def test_slow_bombing_and_throttling_sitemaps_end_and_spare_the_rest(sitemap_crawl):
    asked = requests(sitemap_crawl, "smslow")
    for path in H.SLOW_SITEMAPS:
        assert 1 <= asked[path] <= 2, (path, asked[path])
    assert asked["/throttle.xml"] == 2  # retried after its Retry-After
    urls = frontier(sitemap_crawl)
    base = f"http://{H.HOSTS['smslow']}:{sitemap_crawl['port']}"
    for path in ("/drip.xml", "/silent.xml"):
        s = urls[base + path]
        assert s.status.value == "FETCH_ERROR" and s.metadata["error.cause"] == ["timeout"], path
    bomb = urls[base + "/bomb.xml.gz"]  # 200 MB of zeros, gzipped: no XML in the first 50 MB
    assert bomb.status.value == "FETCH_ERROR"
    assert bomb.metadata["error.source"] == ["sitemap parsing"] and bomb.metadata["error.cause"]
    for page in ("/fine", "/fine-too"):
        assert urls[base + page].status.value == "FETCHED", page
    assert not [e for e in sitemap_crawl["log"] if e.get("canary")]
