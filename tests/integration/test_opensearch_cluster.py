"""The explorative crawl on real Storm with its frontier on a cluster of three OpenSearch nodes
(``owler services up opensearch --nodes 3``: three processes on 127.0.0.1, .2 and .3, the status
index in three shards with a replica each), the node the crawl talks to first, holding a primary,
killed with SIGKILL mid-crawl: no URL is lost and no status is written out of order. Then ``services
up`` brings the node back and the cluster is whole again. Each node has a CPU of its own
(``services.opensearch.cpus``), as on a cluster of machines."""

from __future__ import annotations

import calendar
import os
import signal
import time
import uuid
from pathlib import Path

import orjson
import pytest

from owler.run.cgroups import PARENT, cpu_hierarchy
from tests.farm.harness import FarmProcess
from tests.integration.conftest import Node, _free_port
from tests.integration.test_opensearch_crawl import (archived, finish_crawl, index_counts, owler,
                                                     page_urls, served_200, start_crawl,
                                                     wait_for_pages, write_conf)
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.integration

DAY = 1440 * 60  # fetchInterval.default, s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    node = Node(tmp_path_factory.mktemp("opensearch-cluster"), _free_port(3), nodes=3, cpus=1)
    up = node.owler("services", "up", "opensearch", timeout=400)
    if up.returncode != 0:
        node.owler("services", "down")
        pytest.fail(f"the 3-node OpenSearch did not start (rc {up.returncode}):\n{up.stdout}\n"
                    f"{up.stderr}")
    groups = {k: cpu_group(node_pid(node, k)) for k in (1, 2, 3)}
    try:
        yield node
    finally:
        down = node.owler("services", "down")
    assert down.returncode == 0, down.stderr
    # `down` removes the nodes' CPU groups with them
    assert not [g for g in groups.values() if g is not None and g.exists()], groups


def cpu_group(pid: int) -> Path | None:
    """The folder of the cgroup of the ``cpu`` controller that holds ``pid``."""
    root, version = cpu_hierarchy()
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (version == 2 and controllers == "") or "cpu" in controllers.split(","):
            return root / path.lstrip("/")
    return None


def cpu_limit(group: Path) -> float:
    """The group's limit in CPUs (either cgroup version)."""
    if (group / "cpu.max").exists():
        quota, period = (group / "cpu.max").read_text().split()
    else:
        quota = (group / "cpu.cfs_quota_us").read_text().strip()
        period = (group / "cpu.cfs_period_us").read_text().strip()
    return int(quota) / int(period)


def assert_each_node_in_its_cpu_group(node: Node) -> None:
    groups = {k: cpu_group(node_pid(node, k)) for k in (1, 2, 3)}
    assert len(set(groups.values())) == 3, groups
    for k, group in groups.items():
        assert group.parent.name == PARENT and group.name.endswith(f"-node-{k}"), group
        assert cpu_limit(group) == 1.0, (k, group)


def node_pid(node: Node, k: int) -> int:
    base = node.work / "services" / "opensearch"
    return int((base / ("node.pid" if k == 1 else f"node_{k}.pid")).read_text().split()[0])


def primaries_by_address(node: Node, index: str) -> dict[str, int]:
    """How many primary shards of ``index`` each node (by address) holds."""
    _, shards = node.request("GET", f"/_cat/shards/{index}?format=json&h=prirep,ip,state")
    out: dict[str, int] = {}
    for s in shards:
        if s["prirep"] == "p" and s["state"] == "STARTED":
            out[s["ip"]] = out.get(s["ip"], 0) + 1
    return out


def stored(node: Node, index: str) -> dict[str, dict]:
    """Every URL's document in the status index."""
    node.request("POST", f"/{index}/_refresh")
    _, data = node.request("POST", f"/{index}/_search", {
        "size": 10000, "_source": ["url", "status", "nextFetchDate"]})
    return {h["_source"]["url"]: h["_source"] for h in data["hits"]["hits"]}


def test_each_node_has_a_cpu_of_its_own(cluster):
    assert_each_node_in_its_cpu_group(cluster)
    status = cluster.owler("services", "status", "--json")
    assert orjson.loads(status.stdout)["cpus"] == [1.0, 1.0, 1.0], status.stdout
    text = cluster.owler("services", "status")
    assert "nodes [1, 2, 3] of 3 running, 3 in the cluster, CPUs per node 1 1 1" in text.stdout, \
        text.stdout


def test_a_crawl_survives_a_node_killed_mid_crawl(cluster, tmp_path):
    index = f"cluster-{uuid.uuid4().hex[:8]}"
    conf = write_conf(cluster, tmp_path, index, "opensearch.status.shards: 3\n"
                                               "opensearch.status.replicas: 1\n")
    with FarmProcess(8, tmp_path / "access.log") as farm:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        inject = owler("inject", str(seeds), "--conf", str(conf))
        assert inject.returncode == 0, inject.stderr
        # every index of the frontier has its replica on another node before the kill
        _, health = cluster.request("GET", f"/_cluster/health/{index}*?wait_for_status=green"
                                           "&timeout=60s")
        assert health["status"] == "green" and health["active_shards"] >= 2 * 3, health
        # the node to kill: one holding a primary of the status index (the shard allocator
        # decides which), made the address the crawl talks to first
        primaries = primaries_by_address(cluster, index)
        target = max(primaries, key=primaries.get)
        k = int(target.rsplit(".", 1)[1])
        first = [u for u in cluster.urls if f"//{target}:" in u]
        with open(conf, "a") as fh:
            fh.write("opensearch.addresses: \"" + ";".join(
                first + [u for u in cluster.urls if u not in first]) + "\"\n")
        t, result = start_crawl(conf, 500)
        wait_for_pages(farm, 15)
        os.kill(node_pid(cluster, k), signal.SIGKILL)
        killed = time.time()
        finish_crawl(t, result)
        log = farm.access_log()
        after = [e for e in served_200(log) if e["t"] > killed]
        assert len(after) >= 15, f"only {len(after)} pages fetched after the kill"
        status_out = owler("status", "--conf", str(conf), "--json")
        assert status_out.returncode == 0, status_out.stderr
    # the cluster lost the node and kept every index (yellow while the replicas the node took
    # with it are missing, green once made again on the other two; never red)
    _, health = cluster.request("GET", "/_cluster/health")
    assert health["number_of_nodes"] == 2 and health["status"] in ("yellow", "green"), health
    served = page_urls(log, farm.port)
    docs = stored(cluster, index)
    # no URL lost: every page the farm served is FETCHED, nothing is left to fetch
    assert {u for u, d in docs.items() if d["status"] == "FETCHED"} == set(served)
    assert not [u for u, d in docs.items() if d["status"] == "DISCOVERED"]
    # archived once for each time it was served (a status refused during the kill: replayed)
    assert archived(tmp_path / "warc") == served
    # no status written out of order: each URL's stored date is the one of its last fetch
    last: dict[str, float] = {}
    for e in served_200(log):
        url = f"http://{e['host']}:{farm.port}{e['path']}"
        last[url] = max(last.get(url, 0.0), e["t"])
    end = time.time()
    for url, t_last in last.items():
        nfd = docs[url]["nextFetchDate"]
        due = calendar.timegm(time.strptime(nfd[:19], "%Y-%m-%dT%H:%M:%S"))
        assert t_last + DAY - 1 <= due <= end + DAY, (url, nfd, t_last)
    status = orjson.loads(status_out.stdout)
    counts = index_counts(cluster, index)
    for name in ("DISCOVERED", "FETCHED", "FETCH_ERROR", "REDIRECTION", "ERROR"):
        assert status[name] == counts.get(name, 0), (name, status, counts)
    # `services up` starts the lost node again; the cluster is whole and green
    up = cluster.owler("services", "up", "opensearch", timeout=400)
    assert up.returncode == 0, up.stdout + up.stderr
    wait_for("the cluster green again", lambda: cluster.request(
        "GET", "/_cluster/health")[1]["status"] == "green", 120, 1.0)
    assert cluster.request("GET", "/_cluster/health")[1]["number_of_nodes"] == 3
    assert_each_node_in_its_cpu_group(cluster)  # the node started again is in its group again
