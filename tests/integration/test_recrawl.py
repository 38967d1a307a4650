"""Re-crawls on real Storm (local mode), on both frontiers: two passes of the explorative crawl
over the re-visit farm (tests/farm/revisit.py) with the adaptive scheduler. The second pass asks
conditionally and gets 304s, archives revisit records that warcio check accepts and that name a
capture of the first pass, keeps unchanged pages longer and changing ones shorter, and marks
near-duplicates: with two parser tasks for one fetcher task, every near-duplicate of the first
pass (the parsers take pages by queue key), and in the second pass, after the restart, a new one
whose originals only the frontier knows (a parser seeds a host's memory from it). On both
frontiers, a host added to the opt-out list mid-crawl gets at most one
request after the list changed besides the one in progress (its delay is the reload interval),
none at all in the second pass, every URL of it the frontier holds ends ERROR blacklist:optout
(those never fetched, and those fetched before it was listed, due again in the second pass), and
its per-site delay from the politeness file holds."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.frontier import open_frontier
from owler.conf import load_conf
from tests.farm import revisit as R
from tests.farm.harness import HOST_FILES, farm_module
from tests.integration.cli import owler

OPTOUT_DELAY = 1.0  # the politeness file's delay for the opt-out host
RELOAD = 1.0
# The adaptive scheduler's intervals, in minutes. A first fetch counts as a change, so every page
# is due again FIRST = (DEFAULT + MIN) / 2 after pass 1 (the wait between the passes); a page that
# changed again in pass 2 gets (FIRST + MIN) / 2. That must outlast the rest of pass 2 by far, or
# the page is fetched a third time: on OpenSearch a URL found in pass 2 (/dup/NEW_DUP, linked from
# the changed home page) waits for its queue's next query, and pass 2 went on ~24 s after the
# changing pages on a loaded machine (a MIN of 0.2 gave them 24 s, and one was fetched again).
DEFAULT, MIN = 1.0, 0.8
FIRST = (DEFAULT + MIN) / 2

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    log = tmp_path_factory.mktemp("revisit-farm") / "access.log"
    with farm_module("tests.farm.revisit", log) as ready:
        yield {"port": int(ready[0]), "log": log}


def log_entries(farm, since: float = 0.0) -> list[dict]:
    return [e for e in (json.loads(line) for line in farm["log"].read_text().splitlines()
                        if line.strip()) if e["t"] >= since]


def start_pass(farm, n: int) -> None:
    req = urllib.request.Request(f"http://{R.SITE}:{farm['port']}/__pass/{n}", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def crawl_twice(farm, work: Path, backend: str, optout: bool) -> dict:
    (work / "blacklists").mkdir(parents=True)
    (work / "blacklists" / "optout.txt").write_text("# webmaster opt-outs\n")
    (work / "politeness.txt").write_text(f"{R.OPTOUT} {OPTOUT_DELAY}\n")
    conf = work / "conf.yaml"
    conf.write_text(backend + f"warc.dir: {work / 'warc'}\n"
                    f"owler.work.dir: {work}\n"
                    f"http.allowed.networks: [{R.NETWORK}]\n"
                    "scheduler.class: AdaptiveScheduler\n"
                    f"fetchInterval.default: {DEFAULT}\n"
                    f"scheduler.adaptive.fetchInterval.min: {MIN}\n"
                    "scheduler.adaptive.fetchInterval.max: 10\n"
                    "fetcher.server.delay: 0.2\n"
                    "parallelism.parser: 2\n"
                    f"blacklist.dir: {work / 'blacklists'}\n"
                    f"blacklist.reload.interval: {RELOAD}\n"
                    f"fetcher.politeness.file: {work / 'politeness.txt'}\n"
                    "fetcher.politeness.reload.interval: 1\n")
    port = farm["port"]
    seeds = f"http://{R.SITE}:{port}/\n" + (f"http://{R.OPTOUT}:{port}/\n" if optout else "")
    (work / "seeds.txt").write_text(seeds)
    owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
    start_pass(farm, 1)
    out: dict = {"work": work, "conf": conf, "port": port}
    t1 = time.time()
    listed: dict = {}
    stop = threading.Event()

    def opt_out_mid_crawl():  # after a few of its pages, the webmaster opts out
        while not stop.is_set():
            pages = [e for e in log_entries(farm, t1)
                     if e["host"] == R.OPTOUT and e["path"].startswith("/o/")]
            if len(pages) >= 4:
                (work / "blacklists" / "optout.txt").write_text(f"{R.OPTOUT}\n")
                listed["t"] = time.time()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=opt_out_mid_crawl, daemon=True)
    if optout:
        watcher.start()
    out["run1"] = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "6",
                        "--time", "300", check=False)
    stop.set()
    out["listed"] = listed.get("t")
    out["pass1"] = (t1, time.time())
    with open_frontier(load_conf(str(conf))) as f:
        out["records1"] = records(f, port)
    due = [r.next_fetch_date for r in out["records1"].values()
           if r.status.value == "FETCHED" and r.next_fetch_date]
    start_pass(farm, 2)
    # time passes on purpose: every page FETCHED in pass 1 (the opt-out host's too) is due again
    # when pass 2 starts, whatever the speed of the machine (the dates are the frontier's own)
    time.sleep(max(0.0, max(due) - time.time()) + 1)
    t2 = time.time()
    out["run2"] = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "6",
                        "--time", "300", check=False)
    out["pass2"] = (t2, time.time())
    with open_frontier(load_conf(str(conf))) as f:
        out["records"] = records(f, port)
    return out


def records(frontier, port: int) -> dict:
    urls = [f"http://{R.SITE}:{port}/"] + [
        f"http://{R.SITE}:{port}/{kind}/{n}" for kind, count in R.PAGES.items()
        for n in range(1, count + 1)] + [f"http://{R.SITE}:{port}/dup/{R.NEW_DUP}"] + [
        f"http://{R.OPTOUT}:{port}/"] + [
        f"http://{R.OPTOUT}:{port}/o/{n}" for n in range(1, R.OPTOUT_PAGES + 1)]
    return {u: r for u in urls if (r := frontier.get(u)) is not None}


@pytest.fixture(scope="module")
def sqlite_crawl(farm, tmp_path_factory):
    work = tmp_path_factory.mktemp("recrawl-sqlite")
    return crawl_twice(farm, work, f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n",
                       optout=True)


@pytest.fixture(scope="module")
def opensearch_crawl(farm, opensearch, sqlite_crawl, tmp_path_factory):  # one crawl at a time
    index = f"recrawl-{uuid.uuid4().hex[:8]}"
    return crawl_twice(farm, tmp_path_factory.mktemp("recrawl-os"),
                       opensearch.conf_lines(index) + "spout.ttl.purgatory: 5\n"
                       "frontier.lease.ttl: 30\n", optout=True)


def warc_records(work: Path) -> list[tuple[str, dict, bytes]]:
    out = []
    for path in sorted((work / "warc").glob("*.warc.gz")):
        check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", str(path)],
                               capture_output=True, text=True)
        assert check.returncode == 0, (path, check.stdout, check.stderr)
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    out.append((rec.rec_type, dict(rec.rec_headers.headers),
                                rec.content_stream().read()))
    return out


def judge_two_passes(crawl, farm) -> None:
    for run in ("run1", "run2"):
        assert crawl[run].returncode == 0, crawl[run].stdout[-3000:] + crawl[run].stderr[-3000:]
        # ended because nothing was left, not at its time limit (a tuple replayed without end)
        assert "stopped (idle for 6 s)" in crawl[run].stdout, crawl[run].stdout[-3000:]
    port = crawl["port"]
    site = f"http://{R.SITE}:{port}"
    first = {e["path"]: e for e in log_entries(farm, crawl["pass1"][0])
             if e["host"] == R.SITE and e["t"] < crawl["pass1"][1]}
    second = {e["path"]: e for e in log_entries(farm, crawl["pass2"][0])
              if e["host"] == R.SITE and e["t"] < crawl["pass2"][1]}
    pages = [f"/{kind}/{n}" for kind, count in R.PAGES.items() for n in range(1, count + 1)]
    assert all(first[p]["status"] == 200 and not first[p]["inm"] for p in pages)
    # pass 2: every page again, conditionally where validators were given; 304s
    assert set(pages) <= set(second), sorted(set(pages) - set(second))
    for n in range(1, 5):
        assert second[f"/etag/{n}"]["inm"] == f'W/"e{n}"' and second[f"/etag/{n}"]["status"] == 304
        assert second[f"/lm/{n}"]["ims"] and second[f"/lm/{n}"]["status"] == 304
        assert not second[f"/plain/{n}"]["inm"] and second[f"/plain/{n}"]["status"] == 200
    for n in range(1, R.PAGES["dup"] + 1):
        assert second[f"/dup/{n}"]["inm"] == f'W/"d{n}"' and second[f"/dup/{n}"]["status"] == 304

    # the archive: pass 1 full captures, pass 2 revisits of them (changing pages: new captures)
    by_uri: dict[str, list] = defaultdict(list)
    for kind, headers, body in warc_records(crawl["work"]):
        by_uri[headers["WARC-Target-URI"]].append((kind, headers, body))
    for path in pages:
        recs = by_uri[site + path]
        assert len(recs) == 2, (path, [r[0] for r in recs])
        (k1, h1, b1), (k2, h2, b2) = recs
        assert k1 == "response" and b1
        kind = path.split("/")[1]
        if kind == "changing":
            assert k2 == "response" and b2 != b1
            continue
        profile = ("server-not-modified" if kind in ("etag", "lm", "dup")
                   else "identical-payload-digest")
        assert k2 == "revisit" and h2["WARC-Profile"].endswith("/" + profile) and b2 == b"", path
        # resolvable: the revisit names the capture's URI, date and payload digest
        assert h2["WARC-Refers-To-Target-URI"] == h1["WARC-Target-URI"]
        assert h2["WARC-Refers-To-Date"] == h1["WARC-Date"]
        assert h2["WARC-Payload-Digest"] == h1["WARC-Payload-Digest"]

    # the frontier: intervals follow the change rate (MIN, DEFAULT, incr/decr 0.5)
    recs = crawl["records"]
    for path in pages:
        r = recs[site + path]
        md = r.metadata
        assert r.status.value == "FETCHED", path
        assert md["capture.digest"] and md["simhash"] and md["signature"], path
        interval = float(md["fetchInterval"][0])
        if path.startswith("/changing/"):
            assert interval == pytest.approx(0.5 * FIRST + 0.5 * MIN, abs=0.01), path  # shorter
        else:
            assert interval == pytest.approx(FIRST * 1.5, abs=0.01), path  # longer
        # the next fetch date is that interval after the second fetch, scheduled when its
        # status was written: after the farm served it, before the second pass ended
        fetched, ended = second[path]["t"], crawl["pass2"][1]
        assert fetched + interval * 60 <= r.next_fetch_date + 1 <= ended + interval * 60 + 1, path
        if path.startswith("/etag/"):
            assert md["protocol.etag"][0].startswith('W/"e')
        if path.startswith("/lm/"):
            assert md["protocol.last-modified"]
    # near-duplicates (the article pages are all within 1 bit of each other). Pass 1: two parser
    # tasks, one queue: every page but the first parsed (the first fetched: one fetcher task
    # hands them on in order) is marked against one parsed before it; none is parsed again in
    # pass 2 (304s), so these are pass 1's marks
    dups = sorted((p for p in pages if p.startswith("/dup/")), key=lambda p: first[p]["t"])
    marked = {p: recs[site + p].metadata.get("near.duplicate.of", [None])[0] for p in dups}
    assert marked[dups[0]] is None, marked
    assert all(marked[p] in [site + q for q in dups[:i]] for i, p in enumerate(dups) if i), marked
    # pass 2: the new page's memory came from the frontier (seeded by the restarted parser)
    new = f"/dup/{R.NEW_DUP}"
    assert new not in first and second[new]["status"] == 200
    assert recs[site + new].metadata.get("near.duplicate.of", [None])[0] in [site + p
                                                                             for p in dups]
    others = [site + p for p in pages if not p.startswith("/dup/")]
    assert not [u for u in others if "near.duplicate.of" in recs[u].metadata]


def test_a_second_pass_revisits_cheaply_on_sqlite(sqlite_crawl, farm):
    judge_two_passes(sqlite_crawl, farm)


def test_a_second_pass_revisits_cheaply_on_opensearch(opensearch_crawl, farm):
    judge_two_passes(opensearch_crawl, farm)


@pytest.mark.parametrize("backend", ["sqlite", "opensearch"])
def test_an_opt_out_added_mid_crawl_stops_the_crawl_of_the_host(backend, request, farm):
    crawl = request.getfixturevalue(f"{backend}_crawl")
    listed = crawl["listed"]
    assert listed, "the opt-out host was not crawled (4 of its pages) in pass 1"
    asked = [e for e in log_entries(farm, crawl["pass1"][0])
             if e["host"] == R.OPTOUT and e["t"] < crawl["pass2"][1]]
    pages = [e for e in asked if e["path"] not in HOST_FILES]
    # The fetcher reads the list again at most RELOAD s after it changed, just before a fetch:
    # besides the fetch in progress when it changed, at most one more was let through, since
    # the host's fetches start more than OPTOUT_DELAY (= RELOAD) s apart (checked below). A
    # count, not a time: a slow machine only spaces the fetches further.
    assert OPTOUT_DELAY >= RELOAD
    after = [e for e in pages if listed < e["t"] < crawl["pass1"][1]]
    assert len(after) <= 2, (listed, after)
    # pass 2: the pages fetched in pass 1 were due again, and refused before any request
    again = [e for e in asked if e["t"] >= crawl["pass2"][0]]
    assert again == [], again
    fetched = {e["path"] for e in pages if e["path"].startswith("/o/")}
    assert len(fetched) < R.OPTOUT_PAGES, "listed too late: every page of the host was fetched"
    # every URL of the host in the frontier. After pass 1: FETCHED where it was asked for (its
    # home page and the pages before the opt-out), ERROR for the others, refused in pass 1
    base = f"http://{R.OPTOUT}:{crawl['port']}"
    held = [base + "/"] + [f"{base}/o/{n}" for n in range(1, R.OPTOUT_PAGES + 1)]
    for recs in (crawl["records1"], crawl["records"]):
        assert sorted(u for u in recs if u.startswith(base + "/")) == sorted(held)
    refused = ("ERROR", ["blacklist:optout"])
    asked_in_1 = {e["path"] for e in pages}

    def outcome(recs):
        return {u[len(base):]: (recs[u].status.value, recs[u].metadata.get("error.cause"))
                for u in held}

    assert outcome(crawl["records1"]) == {
        u[len(base):]: ("FETCHED", None) if u[len(base):] in asked_in_1 else refused
        for u in held}, outcome(crawl["records1"])
    # after pass 2, every one of them refused: the FETCHED ones were due again, and refused
    assert outcome(crawl["records"]) == {u[len(base):]: refused for u in held}, \
        outcome(crawl["records"])
    # the per-site delay of the politeness file held while the host was crawled
    times = sorted(e["t"] for e in pages)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps and min(gaps) >= OPTOUT_DELAY - 0.05, gaps
