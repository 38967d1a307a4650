"""The explorative crawl end to end: `owler inject` + `owler run explorative` on real Apache Storm
(local mode) against the loopback web farm, judged from the farm's own access log, the WARC files
and the frontier."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler import sched
from tests.farm.harness import FarmProcess, min_interval, requests_by_host
from tests.integration.cli import owler

DELAY = 0.5
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def write_conf(work: Path, extra: str = "") -> Path:
    conf = work / "conf.yaml"
    conf.write_text(
        f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {work}\n"
        "http.allow.private.addresses: true\n"
        f"fetcher.server.delay: {DELAY}\n"
        "http.timeout: 2000\n"
        "http.content.limit: 1048576\n"
        "fetcher.max.crawl.delay: 30\n"
        "spout.min.delay.queries: 500\n"
        "warc.rotation.size: 30000\n" + extra)
    return conf


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("crawl")
    conf = write_conf(work)
    with FarmProcess(12, work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("# the farm\n" + "\n".join(farm.seeds()) + "\nnot a url\n")
        inject = owler("inject", str(seeds), "--conf", str(conf))
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "6", "--time", "400")
        status = json.loads(owler("status", "--conf", str(conf), "--json").stdout)
        yield {"farm": farm, "work": work, "conf": conf, "inject": inject, "run": run,
               "status": status, "log": farm.access_log()}


def served_pages(log):
    """Pages the farm answered 200 (robots.txt aside; /slow answers after the crawler gave up)."""
    return [e for e in log if e["status"] == 200 and e["path"] not in ("/robots.txt", "/slow")]


def test_inject_reports_invalid_lines_and_injects_the_rest(crawl):
    assert crawl["inject"].returncode == 0
    assert "line 14" in crawl["inject"].stderr
    assert "12 new URL" in crawl["inject"].stdout


def test_run_stops_when_idle_and_says_where_results_are(crawl):
    out = crawl["run"].stdout
    assert "idle for 6 s" in out
    assert "WARC files:" in out and "frontier:" in out
    assert "fetched=" in out  # progress lines


def test_nothing_disallowed_is_fetched(crawl):
    farm, log = crawl["farm"], crawl["log"]
    by_host = requests_by_host(log)
    for host in farm.hosts_of("normal"):
        assert not [e for e in by_host[host] if e["path"].startswith("/private/")]
        assert any(e["path"].startswith("/page/") for e in by_host[host])
    for host in farm.hosts_of("robots503"):  # robots.txt 5xx: nothing else from that host
        assert {e["path"] for e in by_host[host]} == {"/robots.txt"}
    for host in farm.hosts_of("nofollow"):
        paths = {e["path"] for e in by_host[host]}
        assert {"/", "/meta-nofollow", "/header-nofollow", "/ok"} <= paths
        assert not [p for p in paths if p.startswith("/hidden")]


def test_politeness_intervals(crawl):
    farm, log = crawl["farm"], crawl["log"]
    by_host = requests_by_host(log)
    for host, entries in by_host.items():
        gap = min_interval(entries)
        if gap is None:
            continue
        wanted = 2.0 if host in farm.hosts_of("crawldelay") else DELAY
        assert gap >= wanted - 0.05, (host, gap)
    assert all(len(by_host[h]) >= 5 for h in farm.hosts_of("crawldelay"))


def test_oddities_redirects_errors_trap(crawl):
    farm, log = crawl["farm"], crawl["log"]
    for host in farm.hosts_of("oddities"):
        paths = Counter(e["path"] for e in log if e["host"] == host)
        assert paths["/redirect"] == 1 and paths["/final"] == 1
        assert paths["/loop1"] == 1 and paths["/loop2"] == 1  # a loop ends: known URLs stay known
        assert paths["/missing"] == 1 and paths["/error"] == 1
        trap = [p for p in paths if p.startswith("/trap/")]
        assert 1 <= len(trap) <= 4, trap  # maxPathRepetition stops the trap
    st = crawl["status"]
    assert st["REDIRECTION"] >= 3 * len(farm.hosts_of("oddities"))
    assert st["FETCH_ERROR"] >= 3 * len(farm.hosts_of("oddities"))  # 404, 500, timeout


def test_statuses_are_final_and_consistent(crawl):
    farm, st, log = crawl["farm"], crawl["status"], crawl["log"]
    for name in ("DISCOVERED", "FETCHED", "FETCH_ERROR", "REDIRECTION", "ERROR"):
        assert name in st
    assert st["DISCOVERED"] == 0
    pages_200 = {(e["host"], e["path"]) for e in served_pages(log)}
    assert st["FETCHED"] == len(pages_200)
    # robots.txt denials (503 hosts) are ERROR with error.cause
    assert st["ERROR"] >= len(farm.hosts_of("robots503"))


def warc_responses(warc_dir: Path) -> tuple[set[str], int]:
    """The target URIs of the response records in ``warc_dir`` (digests checked), and how many
    request records there are."""
    responses, requests = set(), 0
    for f in sorted(warc_dir.glob("*.warc.gz")):
        with open(f, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests="raise"):
                rec.content_stream().read()
                if rec.rec_type == "response":
                    responses.add(rec.rec_headers.get_header("WARC-Target-URI"))
                elif rec.rec_type == "request":
                    requests += 1
    return responses, requests


def component_policies(work: Path) -> dict[str, str]:
    """The scheduling policy each component task ran under, from its stats file."""
    docs = (json.loads(f.read_text()) for f in (work / "run" / "explorative").glob("*.json"))
    return {f"{d['component']}-{d['task']}": d["sched"] for d in docs if "component" in d}


def test_the_worker_and_every_component_run_under_sched_batch(crawl):
    """``owler.sched.batch`` (on by default): the launcher put the worker JVM under SCHED_BATCH,
    and every Python component runs under it (owler/sched.py)."""
    console = (crawl["work"] / "logs" / "owler-console.log").read_text()
    assert "storm: running under SCHED_BATCH" in console
    policies = component_policies(crawl["work"])
    assert {"spout", "fetcher", "parser", "status"} <= {k.rsplit("-", 1)[0] for k in policies}
    assert set(policies.values()) == {"SCHED_BATCH"}, policies


def test_warc_files_valid_with_a_response_per_fetched_page(crawl):
    warc_dir = crawl["work"] / "warc"
    files = sorted(warc_dir.glob("*.warc.gz"))
    assert len(files) >= 2  # rotation by size
    assert not list(warc_dir.glob("*.open"))
    responses, requests = warc_responses(warc_dir)
    port = crawl["farm"].port
    pages_200 = {f"http://{e['host']}:{port}{e['path']}" for e in served_pages(crawl["log"])}
    assert responses == pages_200
    assert requests == len(responses)


@pytest.mark.parametrize("variant", ["json-serializer", "no-warc"])
def test_the_crawl_on_the_json_serializer_and_without_warc(tmp_path, variant):
    """The default crawl speaks MessagePack to the JVM and archives every page. Storm's JSON
    protocol (pages as text, owler/wire.py) still crawls and archives the same, and
    ``warc.enabled: false`` crawls the same with no WARC writer at all (and here with
    ``owler.sched.batch: false``)."""
    extra = ("topology.multilang.serializer: eu.ows.owler.storm.FastJsonSerializer\n"
             if variant == "json-serializer" else "warc.enabled: false\nowler.sched.batch: false\n")
    conf = write_conf(tmp_path, extra)
    started_under = sched.policy_name()
    with FarmProcess(3, tmp_path / "access.log") as farm:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        owler("inject", str(seeds), "--conf", str(conf))
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "5", "--time", "300")
        status = json.loads(owler("status", "--conf", str(conf), "--json").stdout)
        log = farm.access_log()
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "stopped (idle for 5 s)" in run.stdout, run.stdout[-3000:]  # not at its time limit
    pages_200 = {f"http://{e['host']}:{farm.port}{e['path']}" for e in served_pages(log)}
    assert len(pages_200) >= 10  # outlinks parsed and followed
    assert status["FETCHED"] == len(pages_200) and status["DISCOVERED"] == 0
    if variant == "no-warc":
        assert "WARC files: none (warc.enabled: false)" in run.stdout
        # and owler.sched.batch: false: the policy owler run was started with, everywhere (the
        # test process's, SCHED_BATCH too if a test before put this worker under it)
        assert "SCHED_BATCH" not in (tmp_path / "logs" / "owler-console.log").read_text()
        assert set(component_policies(tmp_path).values()) == {started_under}
        assert not (tmp_path / "warc").exists() or not any((tmp_path / "warc").iterdir())
    else:
        assert warc_responses(tmp_path / "warc") == (pages_200, len(pages_200))


def test_the_demo_of_make_crawl_crawls_its_farm(tmp_path):
    """`make crawl` without SEEDS (the README's main job) runs tests.farm.demo: it must work."""
    work = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "tests.farm.demo", "--hosts", "3",
                           "--idle-exit", "4", "--work", str(work)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "3 new URL(s) injected" in proc.stdout and "idle for 4 s" in proc.stdout
    fetched = int(next(line.split()[1] for line in proc.stdout.splitlines()
                       if line.startswith("FETCHED")))
    assert fetched >= 10
    assert list((work / "warc").glob("*.warc.gz"))
