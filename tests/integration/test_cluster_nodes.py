"""A Storm cluster of two nodes on one machine: `owler cluster up --supervisors 2` (each supervisor
with its own 127.0.0.k address, local dir, worker ports and logs), and the explorative topology
spread over two workers on both nodes, with the OpenSearch frontier and its WARC files going to
S3 (moto server). Checks where each component ran (nimbus's assignment, the workers' logs in each
node's folder), that each node listens on its own address only, and that the crawl is whole: every
seed final, every page the farm served FETCHED and once in the bucket. Then the node of the
fetcher is killed -9 mid-crawl (its supervisor, workers and their Python components), as soon as
its open WARC file has a part stored in S3 (the farm's pages are padded to make megabytes): Storm
moves its executors to the other node and the crawl completes, each FETCHED page archived exactly
once: the fetcher streams its WARC files to S3 (owler.warc.crawl.archiver,
owler.warc.storage.s3_stream) and passes a page on to the parser only once its part is stored, and
the fetcher task restarted on the surviving node completes the upload the dead one left open (its
log says so) and does not archive again the pages of its stored parts that Storm replays.
The sitemap topology runs spread over both nodes as well, its two parser tasks sharing the host
budgets in OpenSearch. Last, warc2warc on both nodes, its progress in OpenSearch: the node of a
copy task is killed -9 mid-file, and every input record ends in the bucket exactly once (the
restarted copy task completes the dead one's upload up to its recorded length, the spout tasks
resume each file where its acks stop). No node keeps crawl state on its disk.
The cluster uses config.json's env "local" ports (nimbus 6627, UI 8080), as test_cluster.py
does; the two modules run one after the other."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import urllib3
from warcio.archiveiterator import ArchiveIterator

from owler.warc.format.reader import iter_records
from owler.warc.storage.files import parse_file_name, partition_name
from tests import warcgen as G
from tests.farm.harness import HOST_FILES, FarmProcess
from tests.integration.test_cluster import (DEFAULT_PORTS, assert_on_loopback, crawl_done,
                                           listening, ok, owler, processes_with, served_urls,
                                           topology_id, ui, wait_for)
from tests.integration.test_explorative import served_pages
from tests.integration.test_warc2warc import plain_records

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "warc"

NODE_PORTS = (6629, 6710, 6711)  # node 2: supervisor Thrift port and worker slots
HOSTS = {"127.0.0.1", "127.0.0.2"}

# the Storm cluster's fixed ports (config.json's env "local"): both modules run in one
# pytest-xdist worker, one after the other (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("storm-cluster")]


def fetched_urls(opensearch, index: str) -> set[str]:
    opensearch.request("POST", f"/{index}/_refresh")
    _, data = opensearch.request("POST", f"/{index}/_search", {
        "size": 5000, "query": {"term": {"status": "FETCHED"}}, "_source": ["url"]})
    return {h["_source"]["url"] for h in data["hits"]["hits"]}


def assert_seeds_final(opensearch, index: str, seeds: list[str]) -> None:
    for seed in seeds:
        _, data = opensearch.request("POST", f"/{index}/_search", {"query": {"term": {"url": seed}}})
        hits = data["hits"]["hits"]
        assert hits and hits[0]["_source"]["status"] != "DISCOVERED", (seed, hits)


def responses_in(objects: dict[str, bytes]) -> Counter:
    """Response records per target URI in the WARC objects (every record read and checked)."""
    return Counter({u: len(where) for u, where in response_places(objects).items()})


def response_places(objects: dict[str, bytes]) -> dict[str, list[tuple[str, str]]]:
    """The object and WARC-Date of each response record, per target URI (every record read and
    checked)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for key, body in objects.items():
        assert key.endswith(".warc.gz"), key
        for rec in ArchiveIterator(io.BytesIO(body), check_digests="raise"):
            rec.content_stream().read()
            if rec.rec_type == "response":
                found.setdefault(rec.rec_headers.get_header("WARC-Target-URI"), []).append(
                    (key, rec.rec_headers.get_header("WARC-Date")))
    return found


def served(farm) -> tuple[Counter, dict[str, list[float]]]:
    """How often the farm answered each page with 200 (test_cluster.served_urls), and when."""
    log = farm.access_log()
    at: dict[str, list[float]] = {}
    for e in served_pages(log):
        at.setdefault(f"http://{e['host']}:{farm.port}{e['path']}", []).append(e["t"])
    return served_urls(log, farm.port), at


def completed_objects(s3_server, bucket: str) -> dict[str, bytes] | None:
    """The bucket's WARC objects once no upload is open, else None (a writer completes its file
    when its oldest page has waited warc.s3.max.age; those of a dead writer are completed when
    its task starts again)."""
    if s3_server.client.list_multipart_uploads(Bucket=bucket).get("Uploads"):
        return None
    return s3_server.objects(bucket, "crawl/")


def open_uploads(s3_server, bucket: str, partitions) -> dict[str, list[dict]]:
    """The bucket's open uploads of WARC files of ``partitions`` that hold a stored part: key ->
    its parts (``PartNumber``, ``Size``, ``ETag``)."""
    client, found = s3_server.client, {}
    for up in client.list_multipart_uploads(Bucket=bucket, Prefix="crawl/").get("Uploads", []):
        name = parse_file_name(up["Key"].rsplit("/", 1)[-1])
        if name and name["partition"] in partitions:
            try:
                parts = client.list_parts(Bucket=bucket, Key=up["Key"],
                                          UploadId=up["UploadId"]).get("Parts", [])
            except client.exceptions.NoSuchUpload:  # completed since it was listed
                continue
            if parts:
                found[up["Key"]] = [{k: p[k] for k in ("PartNumber", "Size", "ETag")}
                                    for p in parts]
    return found


def fetcher_tasks(topology: str) -> dict[str, str]:
    """The WARC partition of each fetcher task (its task id:
    owler.warc.storage.files.partition_name) and the node it runs on, from the Storm UI; empty
    until the executors reported."""
    page = ui(f"/api/v1/topology/{topology_id(topology)}/component/fetcher")
    tasks = {}
    for ex in page["executorStats"]:
        first, last = (int(t) for t in ex["id"].strip("[]").split("-"))
        tasks.update({partition_name(t): ex["host"] for t in range(first, last + 1)})
    return tasks


def recovery_lines(nodes, host: str, topology: str) -> list[str]:
    """The lines of the workers' logs of ``topology`` on node ``host`` in which a WARC writer
    completed an upload left open (owler.warc.storage.s3_stream.recover_uploads; the Python
    components log through Storm into their worker's log)."""
    logs = nodes["work"] / "cluster" / "nodes" / host / "logs" / "workers-artifacts"
    return [line for f in sorted(logs.glob(f"{topology_id(topology)}/*/worker.log"))
            for line in f.read_text(errors="replace").splitlines()
            if "WARC recovery: completed" in line]


def placement(nodes, topology: str) -> tuple[dict, dict[str, list[str]]]:
    """``owler cluster status --json`` and where each component of ``topology`` runs
    (``host:port`` of its workers). Status exits 1 while a node is down: its document is read
    all the same."""
    doc = json.loads(owler("cluster", "status", "--json", *nodes["opt"]).stdout)
    topo = next(t for t in doc["topologies"] if t["name"] == topology)
    return doc, topo["placement"]


def hosts_of(where: dict[str, list[str]]) -> set[str]:
    return {w.split(":")[0] for ws in where.values() for w in ws}


def kill_node(nodes, victim: str) -> str:
    """Kill -9 the node ``victim`` (its supervisor's process group: the supervisor, its workers
    and their Python components) and wait until nothing of it runs; the surviving node."""
    k = victim.rsplit(".", 1)[1]
    marker = str(nodes["work"] / "cluster" / "nodes" / victim).encode()
    pid_file = nodes["work"] / "cluster" / "run" / f"supervisor-{k}.pid"
    assert processes_with(marker), f"node {victim} runs nothing"
    os.killpg(int(pid_file.read_text().split()[0]), signal.SIGKILL)
    assert wait_for(f"node {victim} gone", lambda: not processes_with(marker), 30, 0.5)
    return next(h for h in HOSTS if h != victim)


def wait_moved(nodes, topology: str, victim: str, survivor: str) -> dict[str, list[str]]:
    """Wait until Storm has moved every executor of ``topology`` to ``survivor``."""
    k = victim.rsplit(".", 1)[1]

    def moved():
        doc, where = placement(nodes, topology)
        assert not doc["daemons"][f"supervisor-{k}"]["running"]
        return hosts_of(where) == {survivor} and where
    return wait_for(f"the executors on {survivor}", moved, 240, 5)


def crawl_conf(tmp_path_factory, nodes, opensearch, s3_server, name: str, extra: str) -> dict:
    """A crawl's folder and conf on the cluster: the OpenSearch index ``name`` (dashes become
    underscores), WARC files streamed to the S3 bucket ``name``, two workers, the farm's private
    addresses allowed; ``extra``: the crawl's own keys."""
    work = tmp_path_factory.mktemp(name)
    bucket = s3_server.bucket(name)
    conf = work / "conf.yaml"
    conf.write_text(opensearch.conf_lines(name.replace("-", "_")) + (
        f"warc.dir: {work / 'warc'}\n"
        f"warc.s3.bucket: {bucket}\n"
        "warc.s3.prefix: crawl\n"
        f"s3.endpoint: {s3_server.endpoint}\n"
        f"owler.work.dir: {nodes['work']}\n"
        "topology.workers: 2\n"
        "http.allow.private.addresses: true\n"
        "spout.min.delay.queries: 500\n") + extra)
    return {"work": work, "conf": conf, "bucket": bucket}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, s3_server):
    work = tmp_path_factory.mktemp("nodes")
    taken = [p for p in DEFAULT_PORTS + NODE_PORTS if p in listening()]
    if taken:
        pytest.fail(f"ports {taken} on 127.0.0.1 are taken: the cluster test needs them free")
    opt = ["-o", f"owler.work.dir={work}"]
    # the workers inherit the supervisors' environment: the S3 credentials of the moto server
    saved = {k: os.environ.get(k) for k in s3_server.env}
    os.environ.update(s3_server.env)
    up = owler("cluster", "up", "--supervisors", "2", *opt)
    try:
        ok(up)
        yield {"work": work, "opt": opt, "up": up}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        down = owler("cluster", "down", *opt)
        assert down.returncode == 0, down.stderr
        marker = str(work).encode()
        assert wait_for("no process of the cluster left",
                        lambda: not processes_with(marker), 60, 1.0)
        assert not [p for p in DEFAULT_PORTS + NODE_PORTS if p in listening()]


def test_two_nodes_each_with_its_own_address_dirs_and_ports(nodes):
    assert "2 supervisor(s)" in nodes["up"].stdout
    doc = json.loads(ok(owler("cluster", "status", "--json", *nodes["opt"])).stdout)
    assert doc["up"]
    sups = {name: d for name, d in doc["daemons"].items() if name.startswith("supervisor")}
    assert sorted(sups) == ["supervisor-1", "supervisor-2"] and all(d["running"] for d in sups.values())
    assert sups["supervisor-2"]["host"] == "127.0.0.2" and sups["supervisor-2"]["slots"] == [6710, 6711]
    assert doc["supervisors"] == [{"host": "127.0.0.1", "slots": 2, "slots_used": 0},
                                  {"host": "127.0.0.2", "slots": 2, "slots_used": 0}]
    assert {s["host"] for s in ui("/api/v1/supervisor/summary")["supervisors"]} == HOSTS
    # nimbus on 127.0.0.1, each supervisor's Thrift port on its node's address only
    found = listening()
    assert found[6627] == {"127.0.0.1"} and found[6628] == {"127.0.0.1"}
    assert found[6629] == {"127.0.0.2"}
    assert_on_loopback(DEFAULT_PORTS)
    for host in HOSTS:
        assert (nodes["work"] / "cluster" / "nodes" / host / "logs" / "supervisor.log").exists()
    text = ok(owler("cluster", "status", *nodes["opt"])).stdout
    assert "supervisor-2" in text and "node 127.0.0.2, slots 6710, 6711" in text
    again = ok(owler("cluster", "up", "--supervisors", "2", *nodes["opt"]))
    assert "already up" in again.stdout
    wrong = owler("cluster", "status", "--supervisors", "2", *nodes["opt"])
    assert wrong.returncode == 2 and "--supervisors goes with `up` only" in wrong.stderr


@pytest.fixture(scope="module")
def spread_crawl(nodes, opensearch, s3_server, tmp_path_factory):
    """The explorative crawl of the farm on two workers (one per node), OpenSearch frontier,
    WARC files to S3."""
    out = crawl_conf(tmp_path_factory, nodes, opensearch, s3_server, "nodes-crawl", (
        "warc.rotation.time: 5\n"
        "parallelism.fetcher: 2\n"
        "fetcher.server.delay: 0.3\n"
        "http.timeout: 2000\n"
        "topology.message.timeout.secs: 60\n"
        "frontier.lease.ttl: 30\n"))
    work, conf, bucket = out["work"], out["conf"], out["bucket"]
    with FarmProcess(4, work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        out["seeds"] = farm.seeds()
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        ok(owler("cluster", "submit", "explorative", "--conf", str(conf),
                 "-o", "parallelism.parser=2"))

        def placed():
            doc = json.loads(ok(owler("cluster", "status", "--json", *nodes["opt"])).stdout)
            topo = next((t for t in doc["topologies"] if t["name"] == "explorative"), None)
            return topo and len(topo["placement"]) >= 7 and (doc, topo)
        out["status_doc"], out["topology"] = wait_for("the topology's placement", placed, 120)
        out["listening"] = wait_for("the workers' ports", lambda: (
            f := listening()) and sum(p in f for p in (6700, 6701, 6710, 6711)) >= 2 and f, 60)

        out["status"] = wait_for("the crawl to finish", crawl_done(conf, "explorative"), 400, 5)
        out["served"], out["served_at"] = served(farm)
        out["normal"] = {farm.url(i, path) for i in range(farm.n_hosts)
                         if farm.site_of(i) == "normal"
                         for path in ["/"] + [f"/page/{n}" for n in range(1, 31)]}
        out["final_doc"] = json.loads(ok(owler("cluster", "status", "--json", *nodes["opt"])).stdout)
        # the running writers complete their last files (warc.s3.max.age) before the topology
        # is killed
        out["objects"] = wait_for("every upload completed", lambda: completed_objects(
            s3_server, bucket), 90, 3)
        ok(owler("cluster", "kill", "explorative", *nodes["opt"]))
    yield out


def test_components_run_on_both_nodes(spread_crawl, nodes):
    topo = spread_crawl["topology"]
    assert topo["workers"] == 2
    placement = topo["placement"]
    assert set(placement) >= {"spout", "partitioner", "fetcher", "parser", "urlfilter",
                              "blacklist", "status"}
    hosts = {w.split(":")[0] for where in placement.values() for w in where}
    assert hosts == HOSTS, placement
    # parallelism.fetcher from the conf file, parallelism.parser from -o: two executors each
    assert len(placement["fetcher"]) == 2 and len(placement["parser"]) == 2, placement
    assert len(placement["status"]) == 1
    # each worker logged under the folder of the node it ran on
    for where in placement.values():
        for worker in where:
            host, port = worker.split(":")
            logs = nodes["work"] / "cluster" / "nodes" / host / "logs" / "workers-artifacts"
            assert list(logs.glob(f"{topo['id']}/{port}/worker.log")), (worker, logs)
    assert [s["slots_used"] for s in spread_crawl["final_doc"]["supervisors"]] == [1, 1]
    # each worker listens (for the tuples of the other) on its own node's address only
    found = spread_crawl["listening"]
    for where in placement.values():
        for worker in where:
            host, port = worker.split(":")
            assert found[int(port)] == {host}, (worker, found.get(int(port)))


def assert_each_archived_once(crawl: dict, fetched: set[str]) -> None:
    """The response records in the crawl's objects are those of the FETCHED pages, one each (a
    page archived twice is shown with its records' objects and dates, and when the farm served
    it)."""
    places = response_places(crawl["objects"])
    assert set(places) == fetched, (sorted(fetched - set(places)), sorted(set(places) - fetched))
    twice = {u: where for u, where in places.items() if len(where) != 1}
    assert not twice, ({u: (where, crawl["served_at"].get(u)) for u, where in twice.items()},
                       "killed at", crawl.get("killed_at"))


def test_the_spread_crawl_is_whole(spread_crawl, opensearch):
    assert spread_crawl["status"]["due_now"] == 0
    assert_seeds_final(opensearch, "nodes_crawl", spread_crawl["seeds"])
    fetched = fetched_urls(opensearch, "nodes_crawl")
    # every page the farm served with 200 is FETCHED (the normal site's 31 pages among them)
    served = set(spread_crawl["served"])
    assert fetched == served, (sorted(served - fetched), sorted(fetched - served))
    assert spread_crawl["normal"] <= fetched
    assert_each_archived_once(spread_crawl, fetched)


@pytest.fixture(scope="module")
def sitemap_spread(nodes, opensearch, s3_server, tmp_path_factory, spread_crawl):
    """The sitemap topology on both nodes: two workers, two sitemap parser tasks sharing the
    host budgets in OpenSearch, WARC files streamed to S3 (the writer before the parsers)."""
    from tests.integration.test_sitemap_crawl import SitemapFarm

    out = crawl_conf(tmp_path_factory, nodes, opensearch, s3_server, "nodes-sitemap", (
        "warc.s3.max.age: 3\n"
        "parallelism.sitemap: 2\n"
        "fetcher.server.delay: 0.3\n"
        "http.timeout: 3000\n"
        "spout.ttl.purgatory: 5\n"
        "opensearch.status.max.buckets: 20\n"
        "topology.message.timeout.secs: 60\n"
        "frontier.lease.ttl: 30\n"
        "sitemap.max.depth: 3\n"))
    work, conf, bucket = out["work"], out["conf"], out["bucket"]
    with SitemapFarm(work / "access.log") as farm:
        from tests.farm.server import SITEMAP_SITES

        seeds = work / "seeds.txt"
        seeds.write_text("".join(farm.u(s, "/") + "\n" for s in SITEMAP_SITES))
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        ok(owler("cluster", "submit", "sitemap", "--conf", str(conf)))

        def placed():
            doc = json.loads(ok(owler("cluster", "status", "--json", *nodes["opt"])).stdout)
            topo = next((t for t in doc["topologies"] if t["name"] == "sitemap"), None)
            return topo and len(topo["placement"]) >= 8 and topo
        out["topology"] = wait_for("the topology's placement", placed, 120)

        # the sitemaps and their pages: nothing due, nothing in flight
        out["status"] = wait_for("the sitemap crawl to settle", crawl_done(conf, "sitemap"), 400, 5)
        out["log"] = farm.access_log()
        out["served"] = served_urls(out["log"], farm.port)
        out["farm"] = farm
        out["objects"] = wait_for("every upload completed", lambda: completed_objects(
            s3_server, bucket), 90, 3)
        opensearch.request("POST", "/nodes_sitemap_budgets/_refresh")
        _, data = opensearch.request("POST", "/nodes_sitemap_budgets/_search", {"size": 100})
        out["budgets"] = {h["_id"]: h["_source"] for h in data["hits"]["hits"]}
        ok(owler("cluster", "kill", "sitemap", *nodes["opt"]))
    yield out


def test_the_sitemap_topology_spread_over_both_nodes(sitemap_spread, opensearch):
    from tests.integration.test_sitemap_crawl import PAGES, SITEMAP_FILES, requested

    placement = sitemap_spread["topology"]["placement"]
    assert len(placement["sitemap"]) == 2
    assert {w.split(":")[0] for ws in placement.values() for w in ws} == HOSTS
    farm, log = sitemap_spread["farm"], sitemap_spread["log"]
    for site in SITEMAP_FILES:
        paths = requested(log, farm, site)
        assert len(paths) == len(set(paths)), (site, sorted(paths))  # nothing fetched twice
        assert set(paths) - set(HOST_FILES) == SITEMAP_FILES[site] | PAGES[site], site
    # every sitemap and page the farm served with 200 is archived once (the fetcher archives
    # it before a parser sees it), and FETCHED but the two sitemaps whose XML entities their
    # parser refused (FETCH_ERROR: tests/integration/test_sitemap_crawl.py)
    served = set(sitemap_spread["served"])
    refused = {farm.u("sm_bombs", "/laughs.xml"), farm.u("sm_bombs", "/xxe.xml")}
    fetched = fetched_urls(opensearch, "nodes_sitemap")
    assert fetched == served - refused, (sorted(served - refused - fetched),
                                         sorted(fetched - served))
    counts = responses_in(sitemap_spread["objects"])
    assert set(counts) == served, (sorted(served - set(counts)), sorted(set(counts) - served))
    assert {u: n for u, n in counts.items() if n != 1} == {}
    # the host budgets were charged in the frontier, shared by both parser tasks
    host = farm.host("sm_robots")
    used = {k: v["used"] for k, v in sitemap_spread["budgets"].items() if host in k}
    assert used.get(f"urls:{host}", 0) >= len(PAGES["sm_robots"]), sitemap_spread["budgets"]
    assert used.get(f"sitemaps:{host}", 0) >= 1


#: random bytes in each page of the farm for the node-loss crawl (tests/farm/server.py --pad):
#: about 1 MiB of WARC records a page, so that five pages fill a 5 MiB part (with half a MiB, a
#: file on a slow CI machine once took its 45 s of warc.s3.max.age to hold six pages)
PAD = 1 << 20
#: warc.s3.stream.part.size of the node-loss crawl
PART = 5 << 20


@pytest.fixture(scope="module")
def node_lost(nodes, opensearch, s3_server, tmp_path_factory, spread_crawl):
    """The explorative crawl on both nodes, its fetcher's WARC file streamed to S3 in 5 MiB
    parts; the node of the fetcher task killed -9 (its supervisor, workers and their Python
    components) as soon as a full part of the fetcher's open file is stored; the crawl goes on
    on the other node, where the restarted fetcher task completes the upload the dead one left
    open."""
    out = crawl_conf(tmp_path_factory, nodes, opensearch, s3_server, "node-lost", (
        # a part leaves once 5 MiB of records wait (S3's smallest part but the last); a file is
        # completed when its oldest page not stored has waited warc.s3.max.age (the rest being
        # less than a part) or when it is warc.rotation.time old: long enough for the farm's
        # padded pages to fill a part, and for the node to be killed after a part is stored and
        # before the file is completed even when a busy machine slows the crawl down (CI once
        # saw the file completed within the 15 s of an earlier setting; below the message timeout)
        f"warc.s3.stream.part.size: {PART}\n"
        "warc.s3.max.age: 45\n"
        "warc.rotation.time: 300\n"
        "fetcher.server.delay: 0.5\n"
        "http.timeout: 2000\n"
        "topology.message.timeout.secs: 60\n"
        "frontier.lease.ttl: 20\n"))
    work, conf, bucket = out["work"], out["conf"], out["bucket"]

    with FarmProcess(8, work / "access.log", pad=PAD) as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        out["seeds"] = farm.seeds()
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        ok(owler("cluster", "submit", "explorative", "--conf", str(conf)))
        tasks = wait_for("the fetcher's task in the UI", lambda: fetcher_tasks("explorative"), 120)
        # the victim: the node of the fetcher task whose open WARC file has a full part stored
        # (not its last: a file completed at warc.s3.max.age stores a smaller last part and is
        # completed a moment later, before the kill; CI saw that once), killed at once
        stored = wait_for("a full part of the fetcher's open WARC file stored", lambda: {
            key: parts for key, parts in open_uploads(s3_server, bucket, tasks).items()
            if any(p["Size"] >= PART for p in parts)}, 300, 0.5)
        victim = tasks[parse_file_name(next(iter(stored)).rsplit("/", 1)[-1])["partition"]]
        survivor = kill_node(nodes, victim)
        out["killed_at"] = time.time()
        # what the dead writer left: nothing touches it until its task starts again
        out["left_open"] = open_uploads(s3_server, bucket, tasks)
        assert out["left_open"], f"the killed fetcher left no upload open (stored: {stored})"
        out["placement"] = wait_moved(nodes, "explorative", victim, survivor)

        def recovered():  # the restarted fetcher task names each upload the dead one left
            lines = recovery_lines(nodes, survivor, "explorative")
            return all(any(f"s3://{bucket}/{key} from" in x for x in lines)
                       for key in out["left_open"]) and lines
        out["recovery"] = wait_for(f"the restarted fetcher to complete {sorted(out['left_open'])}",
                                   recovered, 300, 3)
        out["status"] = wait_for("the crawl to finish", crawl_done(conf, "explorative"), 600, 5)
        out["finished_at"] = time.time()
        out["served"], out["served_at"] = served(farm)
        opensearch.request("POST", "/node_lost_leases/_refresh")
        _, data = opensearch.request("POST", "/node_lost_leases/_search", {
            "size": 1000, "query": {"bool": {"must_not": {"term": {"task": True}}}}})
        out["leases"] = [h["_source"] for h in data["hits"]["hits"]]
        out["objects"] = wait_for("every upload completed", lambda: completed_objects(
            s3_server, bucket), 150, 3)
        # what the running topology keeps on the nodes' disks (Storm's dirs, its workers' cwd)
        out["node_files"] = [p for p in (nodes["work"]).rglob("*") if p.is_file()]
        ok(owler("cluster", "kill", "explorative", *nodes["opt"]))
    yield out


def test_a_lost_node_loses_no_page_and_archives_none_twice(node_lost, opensearch):
    assert set(node_lost["placement"]) >= {"spout", "fetcher", "parser", "status"}
    assert_seeds_final(opensearch, "node_lost", node_lost["seeds"])
    fetched = fetched_urls(opensearch, "node_lost")
    # every page the farm served with 200 is FETCHED; a page the dead node had fetched and not
    # passed on was fetched again on the other: served twice, FETCHED (and archived) once
    served = set(node_lost["served"])
    assert fetched == served, (sorted(served - fetched), sorted(fetched - served))
    assert_each_archived_once(node_lost, fetched)


def test_the_restarted_fetcher_completes_the_upload_the_dead_one_left_open(node_lost):
    left = node_lost["left_open"]
    assert left, "the killed fetcher left no upload open with a stored part (it was killed late)"
    bucket, objects = node_lost["bucket"], node_lost["objects"]
    counts = responses_in(objects)
    for key, parts in left.items():
        # the fetcher task restarted on the other node says it completed the upload ...
        line = f"WARC recovery: completed s3://{bucket}/{key} from its {len(parts)} stored parts"
        assert [x for x in node_lost["recovery"] if line in x], (line, node_lost["recovery"])
        # ... which is in the bucket: the parts the dead writer stored, whole records ...
        assert len(objects[key]) == sum(p["Size"] for p in parts), key
        pages = responses_in({key: objects[key]})
        assert pages, key
        # ... each page of them archived once (the restarted writer read them back: a replay
        # of one is not archived again, src/owler/warc/storage/s3_stream.py)
        assert {u: counts[u] for u in pages} == dict.fromkeys(pages, 1)


def test_no_queue_lease_outlives_its_ttl(node_lost):
    # the dead node's spout leases expired (or were taken back by the same task on node 1); no
    # active lease reaches further than one TTL past the end of the crawl
    assert node_lost["leases"]
    limit = (node_lost["finished_at"] + 20) * 1000
    stuck = [d for d in node_lost["leases"] if d.get("active") and d["until"] > limit]
    assert not stuck, stuck


def crawl_state(crawl: dict) -> list:
    """Crawl state found on the nodes' disks while the topology ran (Storm's dirs, its workers'
    cwd) or in the crawl's warc.dir: a frontier or progress file, a WARC byte, a stats file."""
    assert any(p.name == "worker.yaml" for p in crawl["node_files"])  # the walk saw the workers'
    found = [p for p in crawl["node_files"]
             if p.name.endswith((".sqlite", ".sqlite-wal", ".warc", ".warc.gz", ".open"))
             or p.suffix == ".json" and p.parent.name == "run"]
    return found + [p for p in [crawl["work"] / "warc"] if p.exists()]


def test_no_crawl_state_on_a_nodes_disk(node_lost):
    # with the OpenSearch frontier and S3 streaming, a node holds Storm's own files only: no
    # frontier, no WARC byte, no progress file, neither in warc.dir nor in a worker's folders
    state = crawl_state(node_lost)
    assert not state, state



def big_site(host: str, pages: int) -> list[bytes]:
    """A WARC file's records: 6 KB responses that do not compress, so that the spouts' copies
    store S3 parts mid-file."""
    return G.exchanges(host, pages, lambda i: os.urandom(6000), name="blob{i}.bin",
                       content_type="application/octet-stream", software="test_cluster_nodes")


def copied_records(s3_server, bucket: str) -> Counter:
    """Each record (uncompressed) in the bucket's output files, but their own warcinfo records."""
    got: Counter = Counter()
    for data in s3_server.objects(bucket, "crawl/").values():
        for rec in iter_records(io.BytesIO(data)):
            raw = gzip.decompress(rec.raw) if rec.compressed else rec.raw
            if b"isPartOf: W2WLOST" not in raw:
                got[raw] += 1
    return got


@pytest.fixture(scope="module")
def w2w_lost(nodes, opensearch, s3_server, tmp_path_factory):
    """warc2warc spread over both nodes (two spout tasks, each copying the records it reads),
    its progress in OpenSearch and its output streamed to S3; the node of a spout task killed -9
    mid-file.

    On a fresh cluster: nimbus's BlacklistScheduler keeps a supervisor that went missing (the
    node node_lost killed) out of every assignment for blacklist.scheduler.resume.time.secs
    (30 minutes), even once it is back."""
    ok(owler("cluster", "down", *nodes["opt"]))
    ok(owler("cluster", "up", "--supervisors", "2", *nodes["opt"]))
    out = crawl_conf(tmp_path_factory, nodes, opensearch, s3_server, "w2w-lost", (
        "warc.prefix: W2WLOST\n"
        "parallelism.spout: 2\n"
        "warc.s3.stream.part.size: 5242880\n"
        "warc.s3.max.age: 3\n"
        "warc2warc.list.interval: 5\n"
        "topology.message.timeout.secs: 40\n"))
    work, conf, bucket = out["work"], out["conf"], out["bucket"]
    src = s3_server.bucket("w2w-lost-input")
    with open(conf, "a") as f:
        f.write(f"warc2warc.input: s3://{src}/in/\n")
    inputs = {f"in/blobs{i}.warc.gz": G.per_record_gzip(big_site(f"b{i}.example", 2000))
              for i in range(4)}
    for name in ("test-crawl_0.warc.gz", "fb.warc.gz", "example.com.warc"):  # real files
        inputs[f"in/real/{name}"] = (DATA / name).read_bytes()
    for key, data in inputs.items():
        s3_server.client.put_object(Bucket=src, Key=key, Body=data)
    out["expected"] = Counter(r for data in inputs.values() for r in plain_records(data))

    def progress():
        return json.loads(ok(owler("status", "--conf", str(conf), "--json")).stdout)["warc2warc"]

    def acked():  # (straight from the progress index: quicker than `owler status`)
        try:  # (the node is busy with the crawl's writes: a slow answer is "not yet")
            _, data = opensearch.request("POST", "/w2w_lost_warc2warc_files/_search", {
                "size": 0, "aggs": {"n": {"sum": {"field": "records"}}}})
        except urllib3.exceptions.HTTPError:
            return 0
        return data["aggregations"]["n"]["value"]

    ok(owler("cluster", "submit", "warc2warc", "--conf", str(conf)))
    out["before"] = wait_for("both nodes at work", lambda: (
        p := placement(nodes, "warc2warc")[1]) and hosts_of(p) == HOSTS and p, 120)
    wait_for("records copied", lambda: acked() >= 1500, 240, 0.5)
    victim = out["before"]["spout"][0].split(":")[0]  # the node of a spout task (and its copy)
    survivor = kill_node(nodes, victim)
    out["at_kill"] = progress()  # (the dead node's files stay "reading")
    out["placement"] = wait_moved(nodes, "warc2warc", victim, survivor)
    total = len(inputs)
    out["progress"] = wait_for("every input file done", lambda: (
        p := progress())["files"]["done"] == total and p, 300, 3)
    # the spouts complete their last files once nothing came for warc.s3.max.age
    wait_for("the last uploads completed", lambda: not s3_server.client.list_multipart_uploads(
        Bucket=bucket).get("Uploads"), 60, 2)
    out["copied"] = copied_records(s3_server, bucket)
    opensearch.request("POST", "/w2w_lost/_refresh")
    blobs = {"wildcard": {"url": "http://b?.example/*"}}
    for what, query in (("blob_urls", blobs), ("fetched", {"bool": {"filter": [
            blobs, {"term": {"status": "FETCHED"}}]}})):
        _, data = opensearch.request("POST", "/w2w_lost/_count", {"query": query})
        out[what] = data["count"]
    out["node_files"] = [p for p in (nodes["work"]).rglob("*") if p.is_file()]
    ok(owler("cluster", "kill", "warc2warc", *nodes["opt"]))
    yield out


def test_warc2warc_on_a_lost_node_copies_every_record_exactly_once(w2w_lost):
    at_kill = w2w_lost["at_kill"]
    assert at_kill["files"]["reading"] >= 1 and at_kill["records"] >= 1500  # killed mid-file
    assert set(w2w_lost["placement"]) >= {"spout", "parser", "status"}
    got, expected = w2w_lost["copied"], w2w_lost["expected"]
    twice = [r[:200] for r, n in got.items() if n > 1]
    assert not twice, twice[:3]
    assert got == expected  # none lost, none added
    # each input record acked once: a restarted spout task skips the records acked beyond its
    # file's resume point (src/owler/warc/warc2warc/progress_opensearch.py), a replay is counted
    # at its ack only
    assert w2w_lost["progress"]["records"] == sum(expected.values())
    # every response of the generated sites reached the frontier as FETCHED
    assert w2w_lost["blob_urls"] == w2w_lost["fetched"] == 4 * 2000


def test_warc2warc_keeps_no_state_on_a_nodes_disk(w2w_lost):
    # its progress in OpenSearch (no warc2warc.sqlite under owler.work.dir), its output in S3
    state = crawl_state(w2w_lost)
    assert not state, state
