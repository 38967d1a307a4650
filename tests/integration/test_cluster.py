"""Cluster mode for real: `owler cluster up` (ZooKeeper, nimbus, supervisor, Storm UI on 127.0.0.1),
`sparse submit/list/stats/kill` and `owler cluster submit/switch/kill` of the explorative topology with
the OpenSearch frontier against the loopback web farm, the Storm UI's REST API, kill -9 of a Python
bolt mid-crawl (the worker restarts, the crawl completes, no WARC record lost or half-written), and
the cluster's bad input. The cluster uses config.json's env "local" ports (nimbus 6627, UI 8080)."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import urllib3
from warcio.archiveiterator import ArchiveIterator

from owler.run.procs import port_open
from tests.farm.harness import FarmProcess
from tests.integration.browser import browser, charts, figures
from tests.integration.test_explorative import served_pages

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PORTS = (2181, 6627, 6628, 6700, 6701, 8080)
UI = "http://127.0.0.1:8080"

# the Storm cluster's fixed ports (config.json's env "local"): both modules run in one
# pytest-xdist worker, one after the other (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("storm-cluster")]


def run(cmd, timeout=600, **kw):
    env = {**os.environ, "OWLER_HOME": str(ROOT), "LEIN_ROOT": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env,
                          **kw)


def owler(*args, timeout=600):
    return run([sys.executable, "-m", "owler", *args], timeout=timeout)


def sparse(*args, timeout=600):
    return run([str(Path(sys.executable).parent / "sparse"), *args], timeout=timeout)


def ok(proc):
    assert proc.returncode == 0, f"{proc.args}\nrc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def ui(path: str):
    with urllib.request.urlopen(UI + path, timeout=10) as resp:
        return json.loads(resp.read())


def wait_for(what: str, check, timeout: float, every: float = 2.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (urllib.error.URLError, OSError, ValueError, KeyError,
                urllib3.exceptions.HTTPError) as exc:  # (a busy OpenSearch: try again)
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def processes_with(marker: bytes, cwd_under: Path | None = None) -> list[int]:
    """Processes whose command line holds ``marker``; with ``cwd_under``, only those working in
    that folder (the cluster's, not a local-mode run of another pytest-xdist worker)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes() and (
                        cwd_under is None
                        or Path(os.readlink(f"/proc/{entry}/cwd")).is_relative_to(cwd_under)):
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def listening() -> dict[int, set[str]]:
    """Port -> the addresses a socket listens on (TCP, IPv4 and IPv6), from /proc/net."""
    out: dict[int, set[str]] = {}
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with open(table) as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                if fields[3] != "0A":  # LISTEN
                    continue
                addr_hex, port_hex = fields[1].split(":")
                raw = bytes.fromhex(addr_hex)
                # the kernel prints each 32-bit word in host (little-endian) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))
                ip = ipaddress.ip_address(raw)
                if ip.version == 6 and ip.ipv4_mapped:
                    ip = ip.ipv4_mapped
                out.setdefault(int(port_hex, 16), set()).add(str(ip))
    return out


def assert_on_loopback(ports) -> None:
    """Each of ``ports`` that listens does so on loopback addresses, never on every address."""
    found = listening()
    for port in ports:
        for addr in found.get(port, ()):
            assert ipaddress.ip_address(addr).is_loopback, (port, addr, "listens beyond loopback")


def status(conf: Path) -> dict:
    return json.loads(ok(owler("status", "--conf", str(conf), "--json")).stdout)


def topology_id(name: str) -> str:
    return next(t["id"] for t in ui("/api/v1/topology/summary")["topologies"] if t["name"] == name)


def crawl_done(conf: Path, topology: str, polls: int = 3):
    """A check for ``wait_for(..., every=5)``: the crawl's status once it is over. Nothing is due
    in the frontier (a URL emitted keeps its due date until its status is written) and every tuple
    the spouts emitted is acked or failed (the Storm UI's figures: exact with the cluster's
    topology.stats.sample.rate 1.0, refreshed every 5 s, src/owler/run/cluster.py), both the same
    over the last ``polls`` checks: the UI's figures lag, and a tuple emitted after the figures
    it shows (its page FETCHED, its outlinks not yet written) changes them at the next refresh."""
    seen: list = []

    def check():
        st = status(conf)
        spouts = ui(f"/api/v1/topology/{topology_id(topology)}")["spouts"]
        emitted = sum(int(s["emitted"]) for s in spouts)
        settled = sum(int(s["acked"]) + int(s["failed"]) for s in spouts)
        seen.append((st["due_now"], st["FETCHED"], st["total"], emitted, settled))
        still = len(seen) >= polls and seen[-polls:] == [seen[-1]] * polls
        return still and st["due_now"] == 0 and emitted == settled and st
    return check


def served_urls(log: list[dict], port: int) -> Counter:
    """How often the farm answered each page with 200 (robots.txt and /slow aside:
    test_explorative.served_pages), by URL."""
    return Counter(f"http://{e['host']}:{port}{e['path']}" for e in served_pages(log))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster")
    taken = [p for p in DEFAULT_PORTS if port_open(p)]
    if taken:
        pytest.fail(f"ports {taken} on 127.0.0.1 are taken: the cluster test needs config.json's "
                    "env local ports free")
    opt = ["-o", f"owler.work.dir={work}"]
    up = owler("cluster", "up", *opt)
    try:
        ok(up)
        yield {"work": work, "opt": opt, "up": up}
    finally:
        down = owler("cluster", "down", *opt)
        assert down.returncode == 0, down.stderr
        marker = str(work).encode()
        assert wait_for("no process of the cluster left",
                        lambda: not processes_with(marker), 60, 1.0)
        assert wait_for("the crawl dashboard to stop",
                        lambda: not processes_with(b"dashboard\x00--port\x008766"), 30, 1.0)
        assert not [p for p in DEFAULT_PORTS if port_open(p)]


def test_up_is_idempotent_and_status_reports_every_daemon(cluster):
    assert "cluster up" in cluster["up"].stdout and "Storm UI http://127.0.0.1:8080" in cluster["up"].stdout
    again = ok(owler("cluster", "up", *cluster["opt"]))
    assert "already up" in again.stdout
    doc = json.loads(ok(owler("cluster", "status", "--json", *cluster["opt"])).stdout)
    assert doc["up"] and doc["nimbus_leader"]
    assert all(d["running"] for d in doc["daemons"].values())
    assert doc["supervisors"] == [{"host": "127.0.0.1", "slots": 2, "slots_used": 0}]
    summary = ui("/api/v1/cluster/summary")
    assert summary["supervisors"] == 1 and summary["slotsTotal"] == 2
    assert summary["stormVersion"] == (ROOT / "storm" / "VERSION").read_text().strip()
    assert ui("/api/v1/supervisor/summary")["supervisors"][0]["host"] == "127.0.0.1"
    # Storm binds its Thrift servers to every address unless told otherwise (LoopbackBind.java)
    assert_on_loopback(DEFAULT_PORTS)
    assert all(p in listening() for p in (2181, 6627, 6628, 8080))


@pytest.fixture(scope="module")
def crawl(cluster, opensearch, tmp_path_factory):
    """A crawl of the farm submitted to the cluster; a Python bolt killed -9 mid-crawl; then a switch
    to the warc2warc topology with an input folder that is not there (its spout reports the error
    to the UI)."""
    work = tmp_path_factory.mktemp("cluster-crawl")
    conf = work / "conf.yaml"
    conf.write_text(opensearch.conf_lines("cluster_crawl") + (
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {cluster['work']}\n"
        "http.allow.private.addresses: true\n"
        "fetcher.server.delay: 0.3\n"
        "http.timeout: 2000\n"
        "fetcher.max.crawl.delay: 5\n"
        "spout.min.delay.queries: 500\n"
        "spout.ttl.purgatory: 10\n"
        "topology.message.timeout.secs: 60\n"
        "frontier.lease.ttl: 30\n"
        "metrics.opensearch: true\n"
        "metrics.interval: 2\n"))
    out: dict = {"work": work, "conf": conf}
    with FarmProcess(6, work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        out["seeds"] = farm.seeds()
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        out["submit"] = owler("cluster", "submit", "explorative", "--conf", str(conf))
        ok(out["submit"])
        out["list"] = sparse("list", "-e", "local")
        wait_for("pages fetched", lambda: status(conf)["FETCHED"] >= 3, 180)
        out["listening"] = listening()  # the worker's port included

        # kill -9 the fetcher's Python process, pages in its WARC archiver included: its worker
        # dies and Storm restarts it
        marker = b"bolts.fetcher.FetcherBolt"
        victims = processes_with(marker, cluster["work"])
        workers = set(processes_with(b"org.apache.storm.daemon.worker.Worker", cluster["work"]))
        out["policies"] = {pid: policy_of(pid) for pid in [*victims, *workers]}
        assert len(victims) == 1, victims
        os.kill(victims[0], signal.SIGKILL)
        out["killed"] = victims[0]
        wait_for("a new worker", lambda: set(processes_with(
            b"org.apache.storm.daemon.worker.Worker", cluster["work"])) - workers, 120)
        wait_for("a new fetcher", lambda: [p for p in processes_with(marker, cluster["work"])
                                               if p != victims[0]], 120)

        out["status"] = wait_for("the crawl to finish", crawl_done(conf, "explorative"), 400, 5)
        out["ui_summary"] = ui("/api/v1/topology/summary")
        topo_id = next(t["id"] for t in out["ui_summary"]["topologies"] if t["name"] == "explorative")
        out["ui_topology"] = ui(f"/api/v1/topology/{topo_id}")

        # the bolts' figures once two reads a UI refresh apart (5 s) agree: every executor has
        # reported its last tuples
        reads: list = []

        def components():
            reads.append({c: ui(f"/api/v1/topology/{topo_id}/component/{c}") for c in (
                "partitioner", "fetcher", "parser", "urlfilter", "blacklist", "status")})
            return len(reads) >= 2 and figures_of(reads[-1]) == figures_of(reads[-2]) and reads[-1]
        out["ui_components"] = wait_for("the bolts' figures to stand still", components, 120, 6)
        out["ui_fetcher"] = out["ui_components"]["fetcher"]
        out["stats"] = sparse("stats", "-e", "local", "-n", "explorative")
        out["access"] = farm.access_log()
        out["served"] = served_urls(out["access"], farm.port)

        # the crawl dashboard `cluster submit` started, through the UI under /owler/dashboard/:
        # the components' metrics from OpenSearch, the frontier's and Storm's figures its sampler
        # wrote there
        def dashboard():
            with urllib.request.urlopen(UI + "/owler/dashboard/api/dashboard.json",
                                        timeout=30) as resp:
                doc = json.loads(resp.read())
            points = {c["id"]: c["points"] for c in doc["charts"]}
            return all(points.get(c) for c in ("pages", "frontier", "latency")) and doc
        out["dashboard"] = wait_for("the dashboard's charts", dashboard, 90, 3)
        out["dashboard_status"] = status(conf)
        out["dashboard_page"] = browser(UI + "/owler/dashboard/", work / "chrome",
                                        "dashboard-cluster.png")

        # switch to another topology: the crawl is killed (its WARC files closed) and warc2warc,
        # given an input folder that is not there, takes its place; its spout says so in the UI
        bad = work / "w2w.yaml"
        bad.write_text(f"warc2warc.input: {work / 'no-such-folder'}\n"
                       f"frontier.sqlite.path: {work / 'w2w-frontier.sqlite'}\n"
                       f"warc.dir: {work / 'warc-w2w'}\nowler.work.dir: {cluster['work']}\n")
        out["switch"] = owler("cluster", "switch", "warc2warc", "--conf", str(bad))
        ok(out["switch"])

        def spout_error():
            summary = ui("/api/v1/topology/summary")
            names = [t["name"] for t in summary["topologies"]]
            tid = next(t["id"] for t in summary["topologies"] if t["name"] == "warc2warc")
            spout = ui(f"/api/v1/topology/{tid}/component/spout")
            errors = [e.get("error", "") for e in spout.get("componentErrors", [])]
            return names == ["warc2warc"] and any(
                "cannot list the input WARC files" in e for e in errors) and (tid, errors)
        out["bad_topology"] = wait_for("the spout's error in the UI", spout_error, 180, 3)
        out["kill"] = sparse("kill", "-e", "local", "-n", "warc2warc", "--wait", "5")
        wait_for("the topology to go", lambda: not ui("/api/v1/topology/summary")["topologies"], 90)
        yield out


def figures_of(components: dict) -> dict:
    """Per component, its input and output streams' counts (the UI's all-time window; Storm's
    own streams, ``__tick`` and the like, aside)."""
    return {c: ([(s["component"], s["stream"], s["executed"], s["acked"], s["failed"])
                 for s in page.get("inputStats", []) if not s["stream"].startswith("__")],
                [(s["stream"], s["emitted"]) for s in page.get("outputStats", [])
                 if not s["stream"].startswith("__")])
            for c, page in components.items()}


def table_column(text: str, column: int = 0) -> str:
    """A texttable column's cells joined (streamparse wraps long cells over several lines)."""
    return "".join(line.split("|")[column + 1].strip() for line in text.splitlines()
                   if line.startswith("|"))


def policy_of(pid: int) -> int:
    """The scheduling policy of process ``pid`` (/proc/PID/stat, field 41)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[38])


def test_workers_and_their_components_run_under_sched_batch(crawl):
    """The supervisor starts its worker JVMs under SCHED_BATCH, and they their Python components
    (``owler.sched.batch``, on by default: owler/sched.py)."""
    # the fetcher, its worker's JVM and the LogWriter JVM the supervisor started it under (its
    # command line holds the worker's)
    assert len(crawl["policies"]) == 3, crawl["policies"]
    assert set(crawl["policies"].values()) == {os.SCHED_BATCH}, crawl["policies"]


def test_the_worker_listens_on_loopback_only(crawl):
    assert any(p in crawl["listening"] for p in (6700, 6701))
    for port in (6700, 6701):
        assert crawl["listening"].get(port, {"127.0.0.1"}) == {"127.0.0.1"}


def test_submit_list_and_stats(crawl):
    assert crawl["list"].returncode == 0, crawl["list"].stderr
    assert "explorative" in table_column(crawl["list"].stdout, 1)
    assert crawl["stats"].returncode == 0, crawl["stats"].stderr
    assert "fetcher" in crawl["stats"].stdout and "status" in crawl["stats"].stdout


def test_every_seed_reaches_a_final_status_despite_kill_9(crawl, opensearch):
    assert crawl["status"]["due_now"] == 0
    for seed in crawl["seeds"]:
        found, data = opensearch.request("POST", "/cluster_crawl/_search", {
            "query": {"term": {"url": seed}}})
        hits = data["hits"]["hits"]
        assert hits and hits[0]["_source"]["status"] != "DISCOVERED", (seed, hits)


def test_no_warc_record_lost_or_half_written(crawl, opensearch):
    warc_dir = crawl["work"] / "warc"
    assert not list(warc_dir.glob("*.open")), "a WARC file was left open after the switch"
    responses: Counter = Counter()
    for f in sorted(warc_dir.glob("*.warc.gz")):
        with open(f, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests="raise"):
                rec.content_stream().read()
                if rec.rec_type == "response":
                    responses[rec.rec_headers.get_header("WARC-Target-URI")] += 1
    opensearch.request("POST", "/cluster_crawl/_refresh")
    _, data = opensearch.request("POST", "/cluster_crawl/_search", {
        "size": 1000, "query": {"term": {"status": "FETCHED"}}, "_source": ["url"]})
    fetched = {h["_source"]["url"] for h in data["hits"]["hits"]}
    # every page the farm served is FETCHED (a page the killed fetcher had fetched, and never
    # passed on, was fetched again: served twice, FETCHED once) and has its response records
    served = crawl["served"]
    assert fetched == set(served), (sorted(set(served) - fetched), sorted(fetched - set(served)))
    assert set(responses) == fetched, sorted(set(responses) ^ fetched)
    # once each, but for a page fetched again after the kill: in warc.dir the killed fetcher's
    # records of a page it had not acked stay (its .open file is finalized at the restart,
    # src/owler/warc/storage/files.py), so such a page may be archived once per fetch
    assert {u: n for u, n in responses.items() if not 1 <= n <= served[u]} == {}


def test_the_crawl_dashboard_through_the_storm_ui(crawl):
    assert "crawl dashboard: http://127.0.0.1:8080/owler/dashboard/" in crawl["submit"].stdout
    doc = crawl["dashboard"]
    assert doc["problems"] == [] and doc["run"]["topology"] == "explorative"
    assert doc["run"]["run"].startswith("explorative-")
    st = crawl["dashboard_status"]
    for name in ("DISCOVERED", "FETCHED", "FETCH_ERROR", "REDIRECTION", "ERROR", "total",
                 "queues"):
        assert doc["status"][name] == st[name], (name, doc["status"], st)
    latency = {s["label"] for c in doc["charts"] if c["id"] == "latency" for s in c["series"]}
    assert {"spout complete", "fetcher process", "parser process"} <= latency
    page = crawl["dashboard_page"]
    assert page.body.get("data-ready") == "1"
    assert figures(page)["FETCHED"] == st["FETCHED"]
    drawn = charts(page)
    for chart in ("pages", "frontier", "latency"):
        assert drawn[chart][0] > 0 and drawn[chart][1] > 50, (chart, drawn)
    # the topology page links to it
    with urllib.request.urlopen(UI + "/ui.js", timeout=10) as resp:
        assert b'href: "owler/dashboard/"' in resp.read()


def test_storm_ui_shows_components_with_their_figures(crawl):
    summary = crawl["ui_summary"]["topologies"]
    assert [t["status"] for t in summary if t["name"] == "explorative"] == ["ACTIVE"]
    topo = crawl["ui_topology"]
    assert topo["name"] == "explorative" and topo["workersTotal"] == 1
    spouts = {s["spoutId"]: s for s in topo["spouts"]}
    bolts = {b["boltId"]: b for b in topo["bolts"]}
    assert set(bolts) >= {"partitioner", "fetcher", "parser", "urlfilter", "blacklist", "status"}
    assert int(spouts["spout"]["emitted"]) > 0 and int(spouts["spout"]["acked"]) > 0
    # the fetcher acks a tuple once its page is fetched and archived, the status updater once
    # its statuses are committed to OpenSearch: milliseconds at least (Storm counts whole ms)
    for name in ("fetcher", "status"):
        assert float(bolts[name]["processLatency"]) > 0, (name, bolts[name])
    # every tuple a component emitted was executed, and acked or failed, by the one it goes to
    # (the figures of the worker restarted after the kill: its executors all started afresh)
    figures = figures_of(crawl["ui_components"])
    emitted = {(c, stream): n for c, (_, outs) in figures.items() for stream, n in outs}
    emitted["spout", "default"] = int(spouts["spout"]["emitted"])
    inputs = {(c, src, stream): (executed, acked + failed)
              for c, (ins, _) in figures.items() for src, stream, executed, acked, failed in ins}
    assert inputs == {(c, src, stream): (emitted[src, stream],) * 2 for c, src, stream in (
        ("partitioner", "spout", "default"), ("fetcher", "partitioner", "default"),
        ("parser", "fetcher", "default"), ("urlfilter", "fetcher", "outlinks"),
        ("blacklist", "urlfilter", "outlinks"), ("status", "fetcher", "status"),
        ("status", "parser", "status"), ("status", "parser", "outlinks"),
        ("status", "blacklist", "outlinks"))}, (inputs, emitted)
    assert emitted["fetcher", "default"] > 0 and emitted["parser", "outlinks"] > 0
    fetcher = crawl["ui_fetcher"]
    assert fetcher["componentType"] == "bolt" and fetcher["executors"] == 1


def test_crawl_metrics_reach_the_metrics_index(crawl, opensearch):
    opensearch.request("POST", "/metrics/_refresh")
    _, data = opensearch.request("POST", "/metrics/_search", {
        "size": 0, "query": {"term": {"srcComponent": "fetcher"}},
        "aggs": {"names": {"terms": {"field": "name", "size": 100}}}})
    names = {b["key"] for b in data["aggregations"]["names"]["buckets"]}
    assert any("fetched" in n for n in names), names
    st = json.loads(ok(owler("status", "--conf", str(crawl["conf"]), "--json")).stdout)
    assert "fetcher" in json.dumps(st.get("metrics", {}))


def test_switch_to_another_topology_and_python_errors_show_in_the_ui(crawl):
    assert "killed: explorative" in crawl["switch"].stdout
    tid, errors = crawl["bad_topology"]
    assert tid.startswith("warc2warc-")
    assert any("no-such-folder" in e for e in errors)
    assert crawl["kill"].returncode == 0, crawl["kill"].stderr


def test_cluster_bad_input(cluster, tmp_path):
    opt = ["-o", f"owler.work.dir={cluster['work']}"]
    unknown = owler("cluster", "submit", "nosuch", *opt)
    assert unknown.returncode == 2 and "unknown topology 'nosuch'" in unknown.stderr
    missing = owler("cluster", "submit", *opt)
    assert missing.returncode == 2 and "name the topology" in missing.stderr
    nothing = owler("cluster", "kill", "explorative", *opt)
    assert nothing.returncode == 2 and "no topology named 'explorative'" in nothing.stderr

    # another work folder and other ports: a cluster that is not up
    other = ["-o", f"owler.work.dir={tmp_path}", "-o", "cluster.zookeeper.port=2291",
             "-o", "cluster.nimbus.port=6727", "-o", "cluster.supervisor.port=6728",
             "-o", "cluster.slots=[6790]", "-o", "cluster.ui.port=8191"]
    not_up = owler("cluster", "submit", "explorative", *other)
    assert not_up.returncode == 1 and "the cluster is not up" in not_up.stderr
    st = owler("cluster", "status", *other)
    assert st.returncode == 1 and "not running" in st.stdout
    assert "not running" in ok(owler("cluster", "down", *other)).stdout

    # a port taken by another process: clear error, exit 2, nothing left running
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 8191))
        holder.listen()
        taken = owler("cluster", "up", *other)
    assert taken.returncode == 2, taken.stderr
    assert "port 8191" in taken.stderr and "already taken" in taken.stderr
    assert not processes_with(str(tmp_path).encode())
    assert not any(port_open(p) for p in (2291, 6727, 6728))
