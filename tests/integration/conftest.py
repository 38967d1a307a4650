"""A real single-node OpenSearch for the integration tests, started once per test session with
`owler services up` (installed by `make setup`) and stopped at the end. Never skipped: a node that
does not start fails the tests that need it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owler.osclient import service_nodes

ROOT = Path(__file__).resolve().parents[2]


def _free_port(nodes: int = 1) -> int:
    """A port P in 9230..9299 (the runner's range) with P and P + 100 (transport) free, for each
    node k of ``nodes`` P + k − 1 and P + 100 + k − 1 on 127.0.0.k (owler.run.services). Each
    pytest-xdist worker (``make test`` runs two) looks from a start of its own, so that two
    workers starting their nodes at once do not pick the same port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    start = 9230 + 10 * (int(worker[2:]) if worker[2:].isdigit() else 0)
    last = 9300 - (nodes - 1)
    for port in [*range(start, last), *range(9230, min(start, last))]:
        busy = False
        for host, p in service_nodes(port, nodes):
            # (the runner looks for its HTTP port on 127.0.0.1, whatever the node's address)
            for h, q in {(host, p), ("127.0.0.1", p), (host, p + 100)}:
                with socket.socket() as s:
                    s.settimeout(0.2)
                    busy = busy or s.connect_ex((h, q)) == 0
        if not busy:
            return port
    raise RuntimeError(f"no free ports for {nodes} OpenSearch node(s) in 9230..9299")


class Node:
    """The OpenSearch of ``owler services`` for the tests: one node, or a cluster of ``nodes``."""

    def __init__(self, work: Path, port: int, nodes: int = 1, cpus: float = 0.0) -> None:
        self.work = work
        self.port = port
        self.nodes = nodes
        self.cpus = cpus  # services.opensearch.cpus: each node's CPUs (0: shared)
        self.urls = [f"http://{host}:{p}" for host, p in service_nodes(port, nodes)]
        self.url = self.urls[0]

    def conf_lines(self, index: str) -> str:
        return (f"frontier.backend: opensearch\n"
                f"services.opensearch.port: {self.port}\n"
                f"services.opensearch.nodes: {self.nodes}\n"
                f"opensearch.status.index.name: {index}\n")

    def owler(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "owler", *args, "-o", f"owler.work.dir={self.work}",
             "-o", f"services.opensearch.port={self.port}",
             "-o", f"services.opensearch.nodes={self.nodes}",
             "-o", f"services.opensearch.cpus={self.cpus}"],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "OWLER_HOME": str(ROOT)})

    def request(self, method: str, path: str, body=None):
        """One request to the first node that answers (a cluster's node may be down)."""
        import orjson
        import urllib3

        data = orjson.dumps(body) if body is not None else None
        for url in self.urls:
            try:
                resp = urllib3.request(method, url + path, body=data, timeout=30.0,
                                       retries=False if len(self.urls) > 1 else None,
                                       headers={"Content-Type": "application/json"})
            except urllib3.exceptions.HTTPError:
                if url == self.urls[-1]:
                    raise
                continue
            return resp.status, (orjson.loads(resp.data) if resp.data else None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under ``make test`` (pytest-xdist, ``--dist loadgroup``) the modules of the loopback Storm
    cluster must share one worker: refuse to run if pytest-xdist could not group them (it names
    a grouped test ``<id>@<group>``; pytest 9.2 no longer lets it, hence pytest 9.1 in
    requirements.txt)."""
    grouping = getattr(config.option, "dist", "no") == "loadgroup"
    if not grouping or "PYTEST_XDIST_WORKER" not in os.environ:
        return
    lost = [i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {lost[0]} (and {len(lost) - 1} more): "
                                "the Storm cluster's tests would run at once in two workers")


@pytest.fixture(scope="session")
def opensearch(tmp_path_factory):
    work = tmp_path_factory.mktemp("opensearch")
    node = Node(work, _free_port())
    up = node.owler("services", "up", "opensearch")
    if up.returncode != 0:
        pytest.fail(f"OpenSearch did not start (rc {up.returncode}):\n{up.stdout}\n{up.stderr}")
    try:
        yield node
    finally:
        node.owler("services", "down")


class S3Server:
    """A real S3 API server (moto's) on 127.0.0.1 for the tests, with a boto3 client."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self.env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_DEFAULT_REGION": "us-east-1"}
        import boto3

        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                   aws_access_key_id="test", aws_secret_access_key="test")

    def bucket(self, name: str) -> str:
        self.client.create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str, prefix: str = "", indices: bool = False) -> dict[str, bytes]:
        """The objects under ``prefix``, key -> bytes: the WARC files, without the CDXJ index
        beside each (``*.cdxj``) unless ``indices``."""
        out = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                           Prefix=prefix):
            for obj in page.get("Contents", []):
                if obj["Key"].endswith(".cdxj") and not indices:
                    continue
                out[obj["Key"]] = self.client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        return out


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    exe = Path(sys.executable).parent / "moto_server"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"moto_server exited ({proc.returncode}): {log.read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            pytest.fail(f"moto_server did not listen on {port}: {log.read_text()[-2000:]}")
        yield S3Server(port)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
