"""The explorative crawl on real Storm with ``frontier.backend: urlfrontier``: through
``owler frontier serve`` over OpenSearch with two crawlers sharing the service (no page fetched
twice, per-host delays and robots.txt Crawl-delays kept across both, every seed and link reaching
a final status in the index), and through the service over SQLite with ``owler inject`` and
``owler status`` on the service."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.farm.harness import HOST_FILES, FarmProcess, min_interval, requests_by_host
from tests.farm.server import host_addr
from tests.integration import cli
from tests.integration.test_opensearch_crawl import (archived, fetched_urls_in_index,
                                                     index_counts, page_urls)

ROOT = Path(__file__).resolve().parents[2]
DELAY = 0.5

pytestmark = pytest.mark.integration


def owler(*args):
    return cli.owler(*args, check=False)


class FrontierService:
    """``owler frontier serve --port 0`` in a process of its own; its output kept."""

    def __init__(self, conf: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "owler", "frontier", "serve", "--port", "0", "--conf",
             str(conf), *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={**os.environ, "OWLER_HOME": str(ROOT)})
        self.lines: list[str] = []
        first = self.proc.stdout.readline()
        self.lines.append(first)
        match = re.match(r"URLFrontier service on (127\.0\.0\.1:\d+) over ", first)
        if not match:
            self.proc.kill()
            raise AssertionError(f"owler frontier serve did not start: {first}"
                                 f"{self.proc.stdout.read()}")
        self.address = match.group(1)
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()

    def stop(self) -> str:
        self.proc.terminate()
        assert self.proc.wait(30) == 0, "".join(self.lines)
        return "".join(self.lines)


def crawler_conf(work: Path, address: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "conf.yaml"
    conf.write_text(
        "frontier.backend: urlfrontier\n"
        f"urlfrontier.address: {address}\n"
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {work}\n"
        "http.allow.private.addresses: true\n"
        f"fetcher.server.delay: {DELAY}\n"
        "http.timeout: 2000\n"
        "fetcher.max.crawl.delay: 30\n"
        "spout.min.delay.queries: 500\n"
        "spout.ttl.purgatory: 10\n"
        "topology.message.timeout.secs: 60\n")
    return conf


def run_crawl(conf: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "owler", "run", "explorative", "--conf", str(conf),
         "--idle-exit", "10", "--time", "400"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "OWLER_HOME": str(ROOT)})


def test_two_crawlers_share_one_service_over_opensearch(opensearch, tmp_path):
    index = f"uf-crawl-{uuid.uuid4().hex[:8]}"
    service_conf = tmp_path / "service.yaml"
    service_conf.write_text(opensearch.conf_lines(index) + f"fetcher.server.delay: {DELAY}\n"
                            "frontier.lease.ttl: 30\n")
    service = FrontierService(service_conf)
    try:
        confs = [crawler_conf(tmp_path / f"c{i}", service.address) for i in (1, 2)]
        with FarmProcess(8, tmp_path / "access.log") as farm:
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("\n".join(farm.seeds()) + "\n")
            inject = owler("inject", str(seeds), "--conf", str(confs[0]))
            assert inject.returncode == 0, inject.stderr
            runs = [run_crawl(c) for c in confs]  # together: Storm takes a while to start
            outs = [r.communicate(timeout=600)[0] for r in runs]
            assert [r.returncode for r in runs] == [0, 0], outs
            # both ended because nothing was left, not at their time limit
            assert all("stopped (idle for 10 s)" in o for o in outs), [o[-3000:] for o in outs]
            log = farm.access_log()
            status = owler("status", "--json", "--conf", str(confs[1]))
    finally:
        service_out = service.stop()
    pages = [(e["host"], e["path"]) for e in log if e["path"] not in (*HOST_FILES, "/slow")]
    twice = [p for p, n in Counter(pages).items() if n > 1]
    assert not twice, f"fetched more than once: {twice[:10]}"
    # per-host delays hold across both crawlers, robots.txt Crawl-delay included (SetDelay)
    for host, entries in requests_by_host(log).items():
        gap = min_interval(entries)
        if gap is not None:
            wanted = 2.0 if host in farm.hosts_of("crawldelay") else DELAY
            assert gap >= wanted - 0.05, (host, gap)
    for c in ("c1", "c2"):
        assert list((tmp_path / c / "warc").glob("*.warc.gz")), \
            f"crawler {c} archived nothing:\n" + "\n\n".join(o[-2000:] for o in outs)
    # the index is a StormCrawler status index: what the farm served is FETCHED there and
    # archived once, by one crawler; nothing left DISCOVERED, and owler status through the
    # service says the same
    served = page_urls(log, farm.port)
    assert fetched_urls_in_index(opensearch, index) == set(served), service_out[-3000:]
    assert archived(tmp_path / "c1" / "warc", tmp_path / "c2" / "warc") == served
    counts = index_counts(opensearch, index)
    assert counts.get("FETCHED") == len(served) and not counts.get("DISCOVERED"), \
        (counts, service_out[-3000:])
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert {k: doc[k] for k in counts} == counts and doc["due_now"] == 0
    assert doc["frontier"] == f"URLFrontier service {service.address}"


def test_two_services_with_interests_split_one_index_between_two_crawlers(opensearch, tmp_path):
    """OWLer's dynamic partitioning: two services over one status index, each with an interest (a
    signature of tags), each serving one crawler. The seeds carry their group in metadata, their
    outlinks inherit it (metadata.transfer) and the index tags every URL with it."""
    index = f"uf-int-{uuid.uuid4().hex[:8]}"
    shared = (opensearch.conf_lines(index) + f"fetcher.server.delay: {DELAY}\n"
              "frontier.lease.ttl: 30\n"
              'frontier.tags: {"group=*": "group:*", "isSitemap=true": "Sitemap"}\n')
    service_conf = tmp_path / "service.yaml"
    service_conf.write_text(shared)
    services = {"a": FrontierService(service_conf, "--interest", "+group:a"),
                "b": FrontierService(service_conf, "--interest=-group:a")}
    try:
        assert "; interest +group:a" in services["a"].lines[0], services["a"].lines
        confs = {}
        for name, svc in services.items():
            confs[name] = crawler_conf(tmp_path / name, svc.address)
            with confs[name].open("a") as fh:
                fh.write(f"http.agent.name: crawler-{name}\nmetadata.transfer: [group]\n")
        with FarmProcess(8, tmp_path / "access.log") as farm:
            group = {host_addr(i): "a" if i < 4 else "b" for i in range(8)}
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("".join(f"{farm.url(i)}\tgroup={'a' if i < 4 else 'b'}\n"
                                     for i in range(8)))
            direct = tmp_path / "direct.yaml"  # the seeds straight into the index, tagged
            direct.write_text(shared)
            inject = owler("inject", str(seeds), "--conf", str(direct))
            assert inject.returncode == 0 and "8 new URL(s)" in inject.stdout, inject.stderr
            runs = {name: run_crawl(c) for name, c in confs.items()}
            outs = {name: r.communicate(timeout=600)[0] for name, r in runs.items()}
            assert {n: r.returncode for n, r in runs.items()} == {"a": 0, "b": 0}, outs
            assert all("stopped (idle for 10 s)" in o for o in outs.values()), \
                {n: o[-3000:] for n, o in outs.items()}
            log = farm.access_log()
    finally:
        service_out = {n: s.stop() for n, s in services.items()}
    pages = [(e["host"], e["path"]) for e in log if e["path"] not in (*HOST_FILES, "/slow")]
    twice = [p for p, n in Counter(pages).items() if n > 1]
    assert not twice, f"fetched more than once: {twice[:10]}"
    # each service served its interest only: a host's every request came from one crawler,
    # the one whose service holds the host's group
    agents = {(group[e["host"]], e["ua"].split(" ")[0].split("/")[0]) for e in log}
    assert agents == {("a", "crawler-a"), ("b", "crawler-b")}, agents
    for host, entries in requests_by_host(log).items():
        gap = min_interval(entries)
        if gap is not None:
            wanted = 2.0 if host in farm.hosts_of("crawldelay") else DELAY
            assert gap >= wanted - 0.05, (host, gap)
    # every page served is FETCHED in the one index and archived once, by the crawler of its
    # group; nothing left for either service
    served = page_urls(log, farm.port)
    assert fetched_urls_in_index(opensearch, index) == set(served), service_out
    warcs = {name: archived(tmp_path / name / "warc") for name in ("a", "b")}
    assert warcs["a"] + warcs["b"] == served
    assert {group[u.split("/")[2].rsplit(":", 1)[0]] for u in warcs["a"]} == {"a"}
    assert {group[u.split("/")[2].rsplit(":", 1)[0]] for u in warcs["b"]} == {"b"}
    counts = index_counts(opensearch, index)
    assert counts.get("FETCHED") == len(served) and not counts.get("DISCOVERED"), \
        (counts, service_out)


def test_crawl_through_the_service_over_sqlite(tmp_path):
    service_conf = tmp_path / "service.yaml"
    service_conf.write_text(f"frontier.sqlite.path: {tmp_path / 'frontier.sqlite'}\n"
                            f"fetcher.server.delay: {DELAY}\n")
    service = FrontierService(service_conf)
    try:
        conf = crawler_conf(tmp_path / "c", service.address)
        with FarmProcess(4, tmp_path / "access.log") as farm:
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("\n".join(farm.seeds()) + "\nnot a url\n")
            inject = owler("inject", str(seeds), "--conf", str(conf))
            assert inject.returncode == 0, inject.stderr
            assert (f"{len(farm.seeds())} new URL(s) injected, 0 already known, 1 invalid line(s);"
                    f" frontier: URLFrontier service {service.address}") in inject.stdout
            run = run_crawl(conf)
            out = run.communicate(timeout=600)[0]
            assert run.returncode == 0, out
            assert "stopped (idle for 10 s)" in out, out[-3000:]
            log = farm.access_log()
        status = owler("status", "--json", "--conf", str(conf))
    finally:
        service.stop()
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    served = page_urls(log, farm.port)
    assert doc["FETCHED"] == len(served) > len(farm.seeds())
    assert doc["DISCOVERED"] == 0 and doc["due_now"] == 0
    # the farm's pages are the FETCHED URLs of the service's file, each archived once
    with contextlib.closing(sqlite3.connect(tmp_path / "frontier.sqlite")) as db:
        fetched = {u for (u,) in db.execute("SELECT url FROM urls WHERE status = 'FETCHED'")}
    assert fetched == set(served)
    assert archived(tmp_path / "c" / "warc") == served
    # the same file, opened directly: the service wrote a frontier like any other
    direct = owler("status", "--json", "-o", f"frontier.sqlite.path={tmp_path / 'frontier.sqlite'}")
    assert {k: v for k, v in json.loads(direct.stdout).items() if k.isupper()} == \
        {k: v for k, v in doc.items() if k.isupper()}
