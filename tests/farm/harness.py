"""Start and judge the loopback web farm (tests.farm.server) from tests and the demo."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from tests.farm.server import SITES, host_addr


@contextlib.contextmanager
def farm_module(module: str, log: Path):
    """Run ``python -m <module> --log LOG`` (a farm that prints ``READY <port> …``) for the
    duration of the block; yields the fields of its READY line after the word."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", module, "--log", str(log)], cwd=root,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(root)})
    try:
        ready = proc.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError(f"{module} did not start")
        yield ready[1:]
    finally:
        proc.terminate()
        proc.wait(10)


class FarmProcess:
    def __init__(self, n_hosts: int, log_path: Path, sitemap_hosts: int = 0, pad: int = 0):
        self.n_hosts = n_hosts
        self.sitemap_hosts = sitemap_hosts
        self.pad = pad  # random bytes in every HTML page (tests/farm/server.py --pad)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    def __enter__(self) -> "FarmProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.farm.server", "--hosts", str(self.n_hosts),
             "--sitemap-hosts", str(self.sitemap_hosts), "--log", str(self.log_path),
             "--pad", str(self.pad)],
            cwd=root, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(root)})
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("READY"):
                self.port = int(line.split()[1])
                return
            if self.proc.poll() is not None:
                break
        raise RuntimeError("the web farm did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def url(self, i: int, path: str = "/") -> str:
        return f"http://{host_addr(i)}:{self.port}{path}"

    def site_of(self, i: int) -> str:
        return SITES[i % len(SITES)]

    def hosts_of(self, site: str) -> list[str]:
        return [host_addr(i) for i in range(self.n_hosts) if self.site_of(i) == site]

    def seeds(self) -> list[str]:
        return [self.url(i) for i in range(self.n_hosts)]

    def access_log(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]


def requests_by_host(entries: list[dict]) -> dict[str, list[dict]]:
    by = defaultdict(list)
    for e in entries:
        by[e["host"]].append(e)
    return by


#: the files a crawler asks of a host before its pages, inside the turn of the page that needed
#: them (back to back with it, as StormCrawler asks robots.txt): robots.txt and TDMRep's file
#: (owler.fetch.tdmrep)
HOST_FILES = ("/robots.txt", "/.well-known/tdmrep.json")


def min_interval(entries: list[dict], include_robots: bool = False) -> float | None:
    """The smallest gap between two consecutive requests to one host (the host's files,
    :data:`HOST_FILES`, excluded unless ``include_robots``)."""
    times = sorted(e["t"] for e in entries if include_robots or e["path"] not in HOST_FILES)
    gaps = [b - a for a, b in zip(times, times[1:])]
    return min(gaps) if gaps else None
