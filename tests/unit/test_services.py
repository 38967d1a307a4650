"""owler.run.services: the OpenSearch node that answers on the port is known to be the one
started, by its cluster name (unique to its data folder)."""

from __future__ import annotations

import os

import pytest

from owler.conf import ConfError, load_conf
from owler.osclient import OSClient
from owler.run import services as S
from owler.run.procs import write_pid_file


def node(tmp_path, name: str) -> S.OpenSearchNode:
    return S.OpenSearchNode.from_conf(load_conf(None, [f"owler.work.dir={tmp_path / name}"]))


def test_each_data_folder_names_its_own_cluster(tmp_path):
    a, b = node(tmp_path, "a"), node(tmp_path, "b")
    assert a.cluster_name != b.cluster_name and a.cluster_name.startswith("owler-")
    assert node(tmp_path, "a").cluster_name == a.cluster_name  # stable across runs


def test_a_healthy_node_of_another_cluster_is_not_this_one(tmp_path, monkeypatch):
    n = node(tmp_path, "a")
    answers = {"status": "green", "cluster_name": "owler-someone-else"}
    monkeypatch.setattr(n, "health", lambda timeout=2.0: answers)
    me = os.getpid()  # a live process stands for the node's
    assert not n._wait_healthy({1: me}, 5, {n.cluster_name})
    answers["cluster_name"] = n.cluster_name
    assert n._wait_healthy({1: me}, 5, {n.cluster_name})
    answers["status"] = "red"  # not healthy: waits out its time, then says no
    assert not n._wait_healthy({1: me}, 0.6, {n.cluster_name})


def cluster(tmp_path, nodes: int, port: int = 9250) -> S.OpenSearchNode:
    return S.OpenSearchNode.from_conf(load_conf(None, [
        f"owler.work.dir={tmp_path}", f"services.opensearch.port={port}",
        f"services.opensearch.nodes={nodes}"]))


def test_a_cluster_puts_node_k_on_127_0_0_k_and_bootstraps_by_address(tmp_path):
    c = cluster(tmp_path, 3)
    assert c.members() == [(1, "127.0.0.1", 9250), (2, "127.0.0.2", 9251), (3, "127.0.0.3", 9252)]
    assert c.urls == ["http://127.0.0.1:9250", "http://127.0.0.2:9251", "http://127.0.0.3:9252"]
    yml = c._settings(2, "127.0.0.2")
    seeds = '["127.0.0.1:9350", "127.0.0.2:9351", "127.0.0.3:9352"]'
    assert "network.host: 127.0.0.2\n" in yml and "transport.port: 9351\n" in yml
    # every runner names its node "Node 1": the first start must find its peers by address
    assert f"discovery.seed_hosts: {seeds}\n" in yml
    assert f"cluster.initial_cluster_manager_nodes: {seeds}\n" in yml
    assert "single-node" not in yml
    one = cluster(tmp_path / "one", 1)._settings(1, "127.0.0.1")
    assert "discovery.type: single-node\n" in one and "seed_hosts" not in one
    # the crawler's client defaults to every node, in order
    assert OSClient(load_conf(None, ["services.opensearch.port=9250",
                                     "services.opensearch.nodes=3"])).addresses == c.urls
    assert OSClient(load_conf(None, ["services.opensearch.port=9250"])).addresses == [
        "http://127.0.0.1:9250"]


def test_bad_cluster_sizes_and_ports_are_refused(tmp_path):
    with pytest.raises(ConfError, match=r"services.opensearch.nodes: 10 is outside 1..9"):
        cluster(tmp_path, 10)
    with pytest.raises(ConfError, match=r"services.opensearch.nodes: 0 is outside"):
        cluster(tmp_path, 0)
    # the last node's HTTP port must stay within the runner's 9299
    with pytest.raises(ConfError, match=r"9298 is outside 1025..9297, .* for 3 node"):
        cluster(tmp_path, 3, 9298)
    assert cluster(tmp_path, 3, 9297).members()[-1][2] == 9299


def test_each_node_may_have_cpus_of_its_own(tmp_path):
    """``services.opensearch.cpus``: a CPU group per node, named after the cluster's folder (two
    clusters of one machine never share a group); 0 shares the machine's cores; out of range is
    refused."""
    shared = cluster(tmp_path / "shared", 3)
    assert shared.cpus == 0 and shared.cpu_limit(1) is None
    own = S.OpenSearchNode.from_conf(load_conf(None, [
        f"owler.work.dir={tmp_path / 'own'}", "services.opensearch.nodes=3",
        "services.opensearch.cpus=0.5"]))
    limits = [own.cpu_limit(k) for k in (1, 2, 3)]
    assert [g.cpus for g in limits] == [0.5] * 3 and limits[0].quota_us == 50_000
    assert len({g.name for g in limits}) == 3
    assert all(g.name.startswith(own.cluster_name) for g in limits)
    other = S.OpenSearchNode.from_conf(load_conf(None, [f"owler.work.dir={tmp_path / 'other'}"]),
                                       cpus=0.5)  # (--cpus)
    assert other.cpu_limit(1).name != limits[0].name
    for bad in (-1, (os.cpu_count() or 1) + 1):
        with pytest.raises(ConfError, match=r"services.opensearch.cpus: expected 0 \(the "):
            S.OpenSearchNode.from_conf(load_conf(None, [f"owler.work.dir={tmp_path}",
                                                        f"services.opensearch.cpus={bad}"]))


def test_data_made_by_a_cluster_of_another_size_is_refused(tmp_path):
    three = cluster(tmp_path, 3)
    three._check_size()  # a new folder: recorded
    assert (three.base / "nodes").read_text() == "3\n"
    with pytest.raises(S.ServiceError, match=r"made by a cluster of 3 node\(s\), not 1"):
        cluster(tmp_path, 1)._check_size()
    cluster(tmp_path, 3)._check_size()  # the same size again: fine
    # a folder of a single node from before the record was kept counts as one node
    old = cluster(tmp_path / "old", 1)
    (old.node_dir(1) / "data" / "nodes").mkdir(parents=True)
    with pytest.raises(S.ServiceError, match=r"cluster of 1 node\(s\), not 3"):
        cluster(tmp_path / "old", 3)._check_size()
    old._check_size()


def test_the_pids_of_every_node_left_running_are_found(tmp_path):
    c = cluster(tmp_path, 3)
    me = os.getpid()  # a live process stands for the nodes'
    for k in (1, 3):
        write_pid_file(c.node_pid_file(k), me, 9250 + k - 1)
    write_pid_file(c.node_pid_file(2), 2 ** 22 + 7, 9251)  # a dead one
    assert c.pids() == {1: me, 3: me}
    # a smaller cluster's `down` on the same folder still finds node 3
    assert cluster(tmp_path, 1).pids() == {1: me, 3: me}
