"""The explorative crawl with the OpenSearch frontier on real Storm and a real OpenSearch node:
counts agree with the index, two crawls share one index without fetching a URL twice or breaking
per-host delays, and a node restarted mid-crawl loses no status. Plus the CLI's bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.farm.harness import HOST_FILES, FarmProcess, min_interval, requests_by_host
from tests.integration import cli
from tests.integration.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DELAY = 0.5

pytestmark = pytest.mark.integration


def owler(*args):
    return cli.owler(*args, check=False)


def wait_for_pages(farm, n: int, timeout: float = 300) -> None:
    """Until the farm has served ``n`` pages: the crawl is going on (a failure if it never)."""
    wait_for(f"the crawl's first {n} pages", lambda: len(fetched_pages(farm.access_log())) >= n,
             timeout, 0.5)


def write_conf(node, work: Path, index: str, extra: str = "") -> Path:
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "conf.yaml"
    conf.write_text(node.conf_lines(index) + (
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {work}\n"
        "http.allow.private.addresses: true\n"
        f"fetcher.server.delay: {DELAY}\n"
        "http.timeout: 2000\n"
        "fetcher.max.crawl.delay: 30\n"
        "spout.min.delay.queries: 500\n"
        "spout.ttl.purgatory: 10\n"
        "topology.message.timeout.secs: 60\n"
        "frontier.lease.ttl: 30\n") + extra)
    return conf


def served_200(log) -> list[dict]:
    """The farm's 200 answers to pages (robots.txt aside; /slow answers after the crawler gave
    up), as tests/integration/test_explorative.py judges them."""
    return [e for e in log if e["status"] == 200 and e["path"] not in ("/robots.txt", "/slow")]


def fetched_pages(log):
    return {(e["host"], e["path"]) for e in served_200(log)}


def page_urls(log, port: int) -> Counter:
    """How often the farm served each page with 200, by URL."""
    return Counter(f"http://{e['host']}:{port}{e['path']}" for e in served_200(log))


def archived(*warc_dirs: Path) -> Counter:
    """How many response records each URL has in the WARC files of ``warc_dirs`` (every record
    read whole, its digests checked)."""
    out: Counter = Counter()
    for d in warc_dirs:
        for f in sorted(d.glob("*.warc.gz")):
            with open(f, "rb") as fh:
                for rec in ArchiveIterator(fh, check_digests="raise"):
                    rec.content_stream().read()
                    if rec.rec_type == "response":
                        out[rec.rec_headers.get_header("WARC-Target-URI")] += 1
    return out


def frontier_problems(work: Path) -> int:
    """Failed frontier queries and commits the crawl's components counted (their stats files)."""
    n = 0
    for f in (work / "run" / "explorative").glob("*.json"):
        try:
            counters = orjson.loads(f.read_bytes()).get("counters", {})
        except (OSError, orjson.JSONDecodeError):  # replaced as it was read: the next look
            continue
        n += sum(counters.get(k, 0) for k in ("query_failed", "frontier_unavailable",
                                               "commit_failed"))
    return n


def live_tasks(node, index: str) -> int:
    """Spout tasks announced in the frontier's leases index (owler/frontier/opensearch.py)."""
    node.request("POST", f"/{index}_leases/_refresh")
    _, data = node.request("POST", f"/{index}_leases/_count", {"query": {"bool": {"filter": [
        {"term": {"task": True}}, {"range": {"until": {"gt": int(time.time() * 1000)}}}]}}})
    return data["count"]


def index_counts(node, index: str) -> dict:
    node.request("POST", f"/{index}/_refresh")
    _, data = node.request("POST", f"/{index}/_search", {
        "size": 0, "aggs": {"s": {"terms": {"field": "status"}}}})
    return {b["key"]: b["doc_count"] for b in data["aggregations"]["s"]["buckets"]}


def fetched_urls_in_index(node, index: str) -> set[str]:
    node.request("POST", f"/{index}/_refresh")
    _, data = node.request("POST", f"/{index}/_search", {
        "size": 10000, "query": {"term": {"status": "FETCHED"}}, "_source": ["url"]})
    return {h["_source"]["url"] for h in data["hits"]["hits"]}


def start_crawl(conf: Path, limit: int) -> tuple[threading.Thread, dict]:
    """``owler run explorative`` in a thread (idle exit after 8 s, ``limit`` s at most); its
    result lands in the dict under ``run`` (:func:`finish_crawl`)."""
    result: dict = {}

    def run():
        result["run"] = owler("run", "explorative", "--conf", str(conf),
                              "--idle-exit", "8", "--time", str(limit))

    t = threading.Thread(target=run)
    t.start()
    return t, result


def finish_crawl(t: threading.Thread, result: dict) -> subprocess.CompletedProcess:
    """Wait for :func:`start_crawl`'s run: it must end well and because nothing was left."""
    t.join(900)
    assert not t.is_alive(), "owler run did not end within 900 s"
    run = result["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # ended because nothing was left, not at its time limit (a tuple replayed without end)
    assert "stopped (idle for 8 s)" in run.stdout, run.stdout[-3000:]
    return run


def test_crawl_survives_an_opensearch_restart_and_counts_agree(opensearch, tmp_path):
    index = f"crawl-{uuid.uuid4().hex[:8]}"
    conf = write_conf(opensearch, tmp_path, index)
    with FarmProcess(6, tmp_path / "access.log") as farm:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        inject = owler("inject", str(seeds), "--conf", str(conf))
        assert inject.returncode == 0, inject.stderr
        assert "6 new URL" in inject.stdout and f"index '{index}'" in inject.stdout
        t, result = start_crawl(conf, 400)
        wait_for_pages(farm, 10)
        before = frontier_problems(tmp_path)
        down = opensearch.owler("services", "down")
        assert down.returncode == 0, down.stderr
        # the crawl goes on without its frontier until one of its components met the missing
        # node (a failed query or commit, counted in its stats file)
        wait_for("a component meeting the missing frontier",
                 lambda: frontier_problems(tmp_path) > before, 300, 0.5)
        up = opensearch.owler("services", "up")
        assert up.returncode == 0, up.stdout + up.stderr
        back = time.time()
        finish_crawl(t, result)
        log = farm.access_log()
        assert [e for e in served_200(log) if e["t"] > back], "nothing was fetched after the restart"
        status = orjson.loads(owler("status", "--conf", str(conf),
                                    "--json").stdout)
    # every page the farm served is FETCHED in the index: no status update was lost
    served = page_urls(log, farm.port)
    assert fetched_urls_in_index(opensearch, index) == set(served)
    # and archived once for each time it was served: a page whose status could not be written
    # while the node was away is failed, replayed by Storm, fetched and archived again
    assert archived(tmp_path / "warc") == served
    counts = index_counts(opensearch, index)
    for name in ("DISCOVERED", "FETCHED", "FETCH_ERROR", "REDIRECTION", "ERROR"):
        assert status[name] == counts.get(name, 0), (name, status, counts)
    assert status["DISCOVERED"] == 0 and status["due_now"] == 0
    assert index in status["frontier"]


def test_two_crawls_share_one_index(opensearch, tmp_path):
    """Two crawlers on one index: each queue served by one at a time, every page once. Their
    monitoring figures come from the snapshot the status updaters renew (every 2 s, whatever the
    size): each ``owler run`` still stops on idle only once nothing is due."""
    index = f"shared-{uuid.uuid4().hex[:8]}"
    snapshot = "frontier.stats.exact.max: 0\nfrontier.stats.interval: 2\n"
    confs = [write_conf(opensearch, tmp_path / f"c{i}", index, snapshot) for i in (1, 2)]
    with FarmProcess(8, tmp_path / "access.log") as farm:
        first, later = tmp_path / "seeds-1.txt", tmp_path / "seeds-2.txt"
        first.write_text("\n".join(farm.seeds()[:4]) + "\n")
        later.write_text("\n".join(farm.seeds()[4:]) + "\n")
        assert owler("inject", str(first), "--conf", str(confs[0])).returncode == 0
        runs = []
        for c in confs:
            runs.append(subprocess.Popen(
                [sys.executable, "-m", "owler", "run", "explorative", "--conf", str(c),
                 "--idle-exit", "10", "--time", "400"], cwd=ROOT, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, env={**os.environ, "OWLER_HOME": str(ROOT)}))
            if len(runs) == 1:
                wait_for_pages(farm, 10)  # the second crawler joins a crawl holding every queue
                alone = live_tasks(opensearch, index)
        # a busy machine may start the second topology after the first crawled everything: the
        # other half of the hosts comes once the second crawler's spout is there
        wait_for("the second crawler's spout", lambda: live_tasks(opensearch, index) > alone,
                 300, 0.5)
        assert owler("inject", str(later), "--conf", str(confs[0])).returncode == 0
        injected = time.time()
        outs = [r.communicate(timeout=600)[0] for r in runs]
        assert [r.returncode for r in runs] == [0, 0], outs
        assert all("stopped (idle for 10 s)" in o for o in outs), [o[-3000:] for o in outs]
        log = farm.access_log()
    pages = [(e["host"], e["path"]) for e in log
             if e["path"] not in (*HOST_FILES, "/slow")]
    twice = [p for p, n in Counter(pages).items() if n > 1]
    assert not twice, f"fetched more than once: {twice[:10]}"
    # per-host delays hold across both crawlers (the farm sees both)
    by_host = requests_by_host(log)
    for host, entries in by_host.items():
        gap = min_interval(entries)
        if gap is not None:
            wanted = 2.0 if host in farm.hosts_of("crawldelay") else DELAY
            assert gap >= wanted - 0.05, (host, gap)
    # both crawlers did part of the work (each writes its own WARC files)
    for c in ("c1", "c2"):
        assert list((tmp_path / c / "warc").glob("*.warc.gz")), \
            f"crawler {c} archived nothing:\n" + "\n\n".join(o[-2000:] for o in outs)
    # what the farm served is what is FETCHED in the index, and archived once, by one crawler
    served = page_urls(log, farm.port)
    assert fetched_urls_in_index(opensearch, index) == set(served)
    assert archived(tmp_path / "c1" / "warc", tmp_path / "c2" / "warc") == served
    counts = index_counts(opensearch, index)
    assert counts.get("FETCHED") == len(served) and not counts.get("DISCOVERED")
    # the crawlers' status updaters renewed the figures while they wrote (after the last inject)
    _, doc = opensearch.request("GET", f"/{index}_leases/_doc/stats:frontier")
    assert injected < doc["_source"]["stats"]["taken"] and doc["_source"]["until"] == 0
    status = orjson.loads(owler("status", "--conf", str(confs[0]), "--json").stdout)
    bound = status["estimate"]["writes_since"]
    for name in ("DISCOVERED", "FETCHED", "FETCH_ERROR", "REDIRECTION", "ERROR"):
        assert abs(status[name] - counts.get(name, 0)) <= bound, (name, status, counts)


def test_cli_bad_input(opensearch, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.com/\n")
    # nothing listens on this port
    conf = write_conf(opensearch, tmp_path, "x", "opensearch.addresses: 127.0.0.1:9\n"
                                                 "opensearch.max.retries: 0\n")
    inject = owler("inject", str(seeds), "--conf", str(conf))
    assert inject.returncode == 3
    assert "cannot reach OpenSearch at http://127.0.0.1:9" in inject.stderr
    run = owler("run", "explorative", "--conf", str(conf), "--time", "5")
    assert run.returncode == 3 and "cannot use the frontier" in run.stderr
    # an index that is not a status index (a mapping conflict): exit 1, the field named
    opensearch.request("PUT", "/not-status", {"mappings": {"properties": {
        "url": {"type": "keyword"}, "key": {"type": "keyword"}, "status": {"type": "long"}}}})
    conf = write_conf(opensearch, tmp_path, "not-status")
    st = owler("status", "--conf", str(conf))
    assert st.returncode == 1 and "status is long (expected keyword)" in st.stderr
    # a port the runner cannot serve, and a port already taken
    other = ["-o", f"owler.work.dir={tmp_path / 'other'}"]
    bad = owler("services", "up", *other, "-o",
                "services.opensearch.port=30000")
    assert bad.returncode == 2 and "outside 1025..9299" in bad.stderr
    taken = owler("services", "up", *other, "-o",
                  f"services.opensearch.port={opensearch.port}")
    assert taken.returncode == 2 and f"port {opensearch.port} on 127.0.0.1 is already taken" \
        in taken.stderr
    assert not (tmp_path / "other" / "services" / "opensearch" / "node.pid").exists()
