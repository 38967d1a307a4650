"""owler.run.services: the OpenSearch node that answers on the port is known to be the one
started, by its cluster name (unique to its data folder)."""

from __future__ import annotations

import os

from owler.conf import load_conf
from owler.run import services as S


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
    assert not n._wait_healthy(me, 5, {n.cluster_name})
    answers["cluster_name"] = n.cluster_name
    assert n._wait_healthy(me, 5, {n.cluster_name})
    answers["status"] = "red"  # not healthy: waits out its time, then says no
    assert not n._wait_healthy(me, 0.6, {n.cluster_name})
