"""Debian's Prometheus server and Pushgateway (packages prometheus and prometheus-pushgateway,
installed by `make setup`) for the integration tests, each on a free port of 127.0.0.1 with its
state in a folder of the test. A server that does not start fails the test with its output;
never skipped."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Daemon:
    binary = ""

    def __init__(self, work: Path, name: str, args: list[str], ready_path: str) -> None:
        path = shutil.which(self.binary)
        assert path, f"{self.binary} is not installed: run `make setup` (Debian package)"
        work.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / f"{name}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [path, f"--web.listen-address=127.0.0.1:{self.port}", *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=work)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.url + ready_path, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{self.binary} did not start on {self.url}:\n"
                                     + self.log.read_text()[-3000:])
            time.sleep(0.2)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Pushgateway(_Daemon):
    binary = "prometheus-pushgateway"

    def __init__(self, work: Path) -> None:
        # its own state file: Debian's default one in /var/lib outlives the test
        super().__init__(work, "pushgateway", [f"--persistence.file={work / 'pushgateway.data'}"],
                         "/-/ready")
        self.address = f"127.0.0.1:{self.port}"


class Prometheus(_Daemon):
    """Scrapes the Pushgateway (``honor_labels``: the pushed labels stay) and ``targets`` (job →
    list of host:port) every second."""

    binary = "prometheus"

    def __init__(self, work: Path, pushgateway: str | None, targets: dict[str, list[str]]) -> None:
        jobs = [{"job_name": job, "static_configs": [{"targets": hosts}]}
                for job, hosts in targets.items()]
        if pushgateway:
            jobs.append({"job_name": "pushgateway", "honor_labels": True,
                         "static_configs": [{"targets": [pushgateway]}]})
        conf = work / "prometheus.yml"
        work.mkdir(parents=True, exist_ok=True)
        conf.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s",
                                                   "evaluation_interval": "1s"},
                                        "scrape_configs": jobs}))
        super().__init__(work, "prometheus", [f"--config.file={conf}",
                                              f"--storage.tsdb.path={work / 'tsdb'}"],
                         "/-/ready")

    def query(self, expr: str) -> list[dict]:
        """The instant vector of ``expr`` now (``[]`` when it has no series)."""
        doc = self.get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The value of a one-series ``expr`` (a ``sum(...)``), None while it has none."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def targets(self) -> dict[str, list[str]]:
        """job → the health of each of its targets (``up``, ``down``, ``unknown``)."""
        out: dict[str, list[str]] = {}
        for t in self.get("/api/v1/targets")["data"]["activeTargets"]:
            out.setdefault(t["labels"]["job"], []).append(t["health"])
        return out
