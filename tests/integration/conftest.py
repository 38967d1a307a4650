"""A real single-node OpenSearch for the integration tests, started once per test session with
`owler services up` (installed by `make setup`) and stopped at the end. Never skipped: a node that
does not start fails the tests that need it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    """A port P in 9230..9299 (the runner's range) with P and P + 100 (transport) free."""
    for port in range(9230, 9300):
        busy = False
        for p in (port, port + 100):
            with socket.socket() as s:
                s.settimeout(0.2)
                busy = busy or s.connect_ex(("127.0.0.1", p)) == 0
        if not busy:
            return port
    raise RuntimeError("no free port pair in 9230..9299 on 127.0.0.1")


class Node:
    def __init__(self, work: Path, port: int) -> None:
        self.work = work
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def conf_lines(self, index: str) -> str:
        return (f"frontier.backend: opensearch\n"
                f"services.opensearch.port: {self.port}\n"
                f"opensearch.status.index.name: {index}\n")

    def owler(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "owler.cli", *args, "-o", f"owler.work.dir={self.work}",
             "-o", f"services.opensearch.port={self.port}"],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "OWLER_HOME": str(ROOT)})

    def request(self, method: str, path: str, body=None):
        import orjson
        import urllib3

        data = orjson.dumps(body) if body is not None else None
        resp = urllib3.request(method, self.url + path, body=data,
                               headers={"Content-Type": "application/json"})
        return resp.status, (orjson.loads(resp.data) if resp.data else None)


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
