"""An Apache Storm cluster on loopback addresses: ZooKeeper, nimbus, one or more supervisors and the
Storm UI.

``owler cluster up`` starts, in this order and each only when it is not running yet, ZooKeeper
(Debian's package), Storm's nimbus, ``cluster.supervisors`` supervisors (``--supervisors N``, 1),
and the project's Storm UI server (the installation's ``storm ui``: Maven Central has no
``storm-webapp``), and waits until nimbus is the leader, every supervisor has offered its slots
and the UI answers. Each supervisor stands for one machine of a real cluster (a *node*):
supervisor *k* (1, 2, …) has its own ``storm.local.hostname`` 127.0.0.k, its own
``storm.local.dir``, logs and ``storm.yaml`` under ``nodes/127.0.0.k/``, its own Thrift port
(``cluster.supervisor.port`` + k − 1) and worker ports (``cluster.slots`` + 10 (k − 1)); its
workers and their Python components live in its process group, so that killing the group is
losing the machine. Nimbus schedules with Storm's ``DefaultScheduler``, which spreads a topology's
workers over the supervisors (``topology.workers`` ≥ 2 puts them on different nodes); ``status``
says which node and port each component runs on. ``up --supervisors N`` on a running cluster adds
the nodes it lacks. ``down`` kills the running
topologies (each gets ``cluster.kill.wait`` seconds to drain, so the Python components close their
WARC files), stops the daemons and everything they started (the supervisor's workers and their
Python components are in its process group), and removes the cluster's state, so that the next
``up`` starts clean. ``status`` reports each daemon and the running topologies. All three are safe
to call twice. A port that another process holds, a missing installation, or a daemon that does not
come up gives a clear error, and stops what this call started: no orphaned daemons.

Everything lives under ``<owler.work.dir>/cluster``: ``conf/storm.yaml`` (nimbus and the UI; written
by ``up``), ``conf/zoo.cfg``, ``logs/`` (``nimbus.log``, ``ui.log``, ``zookeeper.out``), ``run/*.pid``,
``zookeeper/``, ``storm-local/`` (nimbus), and per node ``nodes/<host>/``: ``storm.yaml`` (the
supervisor hands it on to its workers), ``storm-local/``, and ``logs/`` (``supervisor.log``, the
workers' logs under ``logs/workers-artifacts/<topology id>/<port>/worker.log``).

The workers run the Python components with the project's virtualenv: the supervisor starts with
the virtualenv's ``bin`` first on its ``PATH``, where streamparse's ``streamparse_run`` is found
(``config.json`` env ``local`` sets ``use_virtualenv: false`` for that reason).

A cluster of hosts (``cluster.hosts``, ``up --hosts N``) is deployed as operators deploy one:
supervisor *k* (2 … N+1) runs on host 127.0.0.k of :mod:`owler.run.hosts`, inside that host's
mount namespace, as its service account, with Debian's Python running Storm's launcher and an
environment of its own (no project virtualenv on its ``PATH``); its storm.yaml, local dir and logs
are in the host's home (``<cluster>/hosts/127.0.0.k/home/storm/``, ``~/storm/`` as the host sees
it). 127.0.0.1 gets an SSH server too, for the operator's tunnel to nimbus. ``submit`` and
``switch`` then run ``sparse submit -e hosts`` as the hosts' operator (its ``HOME`` and ``ssh``):
streamparse builds the topology's virtualenv on every host nimbus knows, tunnels to nimbus and
submits, after a check that each of those hosts lets the operator in (a refused key would
otherwise make streamparse's SSH library ask for a password nobody types); a failed build is a
ClusterError with pip's message and the host. ``rebalance`` spreads a running topology over the
supervisors there are (a host added by ``up --hosts N+1`` gets its virtualenv first), paused
until nothing is in flight, so that no tuple is killed in flight and replayed. ``up``
records the hosts in ``run/hosts`` for the commands after it; ``down`` removes them, with their
files. With ``cluster.hosts.cpus`` each host has that many CPUs of its own (owler/run/cgroups.py),
so that a host that joins adds capacity as a real machine does.

Config keys (the crawler conf, ``--conf`` / ``-o``): ``owler.work.dir``, ``cluster.zookeeper.port``
(2181), ``cluster.nimbus.port`` (6627), ``cluster.supervisors`` (1, at most
:data:`MAX_SUPERVISORS`), ``cluster.supervisor.port`` (6628), ``cluster.slots`` ([6700, 6701]: one
worker each, per node), ``cluster.ui.port`` (8080), ``cluster.worker.heap.mb`` (768),
``cluster.kill.wait`` (30 s), ``cluster.storm.conf`` (a map of further storm.yaml keys),
``cluster.hosts`` (0), ``cluster.hosts.ssh.port`` (2222) and ``cluster.hosts.cpus`` (0: the
machine's, shared), ``cluster.dashboard.port`` (8766:
the crawl dashboard, ``owler dashboard``, which ``submit`` starts for the submitted crawl and
``down`` stops; the UI serves it under ``/owler/dashboard/`` and links to it from each topology;
not ``dashboard.port``, which local runs take).
``config.json``'s env ``local`` must name the same nimbus and UI ports.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import orjson
import yaml

from owler import conf as C
from owler import sched
from owler.constants import (CLUSTER_HOSTS_CPUS_KEY, CLUSTER_UI_PORT_KEY, EXECUTOR_METRICS_KEY,
                             MESSAGE_TIMEOUT_KEY, MULTILANG_SERIALIZER_KEY, STORM_HOSTNAME_KEY)
from owler.run.cgroups import checked_cpus
from owler.run.hosts import Host, Hosts, HostsError, node_host
from owler.run.procs import alive, port_open, read_pid_file, stop_group, write_pid_file
from owler.run.runner import storm_home

MAX_SUPERVISORS = 9
#: worker ports of node k are cluster.slots + SLOT_STRIDE * (k - 1)
SLOT_STRIDE = 10
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
UI_CLASS = "eu/ows/owler/storm/UiServer.class"
#: the Java agent that binds Storm's Thrift and Netty servers to one address (LoopbackBind.java)
BIND_AGENT = Path("lib-owler") / "owler-bind-agent.jar"
#: config.json's env of a cluster of hosts (``sparse submit -e hosts``)
HOSTS_ENV = "hosts"
#: the Python a host runs Storm's launcher with: Debian's, without the project's packages
HOST_PYTHON = "/usr/bin/python3"
#: what a host's supervisor inherits of the operator's environment
_HOST_ENV_KEYS = ("LANG", "LC_ALL", "TZ", "JAVA_HOME")


_YAML_HEAD = "# Written by `owler cluster up` (owler/run/cluster.py); edit cluster.* keys instead.\n"


class ClusterError(RuntimeError):
    """The cluster cannot be started, stopped or reached; the message says why and what to do."""


def nimbus_client(port: int, host: str = "127.0.0.1", timeout_ms: int = 10000):
    """A Thrift client of nimbus (streamparse's IDL, framed binary transport as Storm serves)."""
    from streamparse.thrift import storm_thrift
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.rpc import make_client
    from thriftpy2.transport import TFramedTransportFactory

    return make_client(storm_thrift.Nimbus, host=host, port=port, timeout=timeout_ms,
                       proto_factory=TBinaryProtocolFactory(),
                       trans_factory=TFramedTransportFactory())


@dataclass(frozen=True)
class Node:
    """One supervisor of the cluster, standing for one machine (module docstring)."""

    index: int  # 1, 2, ...
    base: Path  # <cluster>/nodes/<host>
    thrift_port: int
    slots: tuple[int, ...]

    @property
    def host(self) -> str:
        return node_host(self.index)

    @property
    def name(self) -> str:
        return f"supervisor-{self.index}"

    @property
    def storm_yaml(self) -> Path:
        return self.base / "storm.yaml"

    @property
    def logs(self) -> Path:
        return self.base / "logs"


class StormCluster:
    """A Storm cluster on loopback addresses (module docstring)."""

    def __init__(self, root: Path, work: Path, *, zookeeper_port: int = 2181,
                 nimbus_port: int = 6627, supervisor_port: int = 6628,
                 slots: tuple[int, ...] = (6700, 6701), ui_port: int = 8080,
                 worker_heap_mb: int = 768, kill_wait: int = 30,
                 extra: Mapping[str, Any] | None = None, supervisors: int = 1,
                 dashboard_port: int = 8766, sched_batch: bool = True, hosts: int = 0,
                 ssh_port: int = 2222, host_cpus: float = 0.0) -> None:
        self.root = Path(root)
        self.base = Path(work) / "cluster"
        self.home = storm_home(self.root)
        self.supervisor_port = supervisor_port
        self.slots = tuple(slots)
        #: with hosts (``cluster.hosts``, ``up --hosts N``), the supervisors run on hosts
        #: 127.0.0.2 .. 127.0.0.N+1 reached over SSH (owler/run/hosts.py); 127.0.0.1, the machine
        #: of ZooKeeper, nimbus and the UI, has an SSH server for the operator's tunnel to nimbus
        self.machines: Hosts | None = None
        if hosts:
            self.machines = Hosts(self.base / "hosts", hosts + 1, ssh_port=ssh_port, first=1,
                                  cpus=host_cpus)
            supervisors_at = range(2, hosts + 2)
        else:
            supervisors_at = range(1, supervisors + 1)
        self.nodes = [self.node(k) for k in supervisors_at]
        self.ports = {"zookeeper": [zookeeper_port], "nimbus": [nimbus_port], "ui": [ui_port]}
        for node in self.nodes:
            self.ports[node.name] = [node.thrift_port, *node.slots]
        self.nimbus_port = nimbus_port
        self.ui_port = ui_port
        self.dashboard_port = dashboard_port
        self.zookeeper_port = zookeeper_port
        self.worker_heap_mb = worker_heap_mb
        self.kill_wait = kill_wait
        #: supervisors (and the worker JVMs they start) run under SCHED_BATCH (owler/sched.py)
        self.sched_batch = sched_batch
        self.extra = dict(extra or {})
        self.conf_dir = self.base / "conf"
        self.storm_yaml = self.conf_dir / "storm.yaml"
        self.logs = self.base / "logs"
        self.run_dir = self.base / "run"

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "StormCluster":
        conf = C.absolute_paths(dict(conf))
        slots = C.get_list(conf, "cluster.slots", [6700, 6701])
        try:
            slot_ports = tuple(int(p) for p in slots)
        except (TypeError, ValueError):
            raise C.ConfError(f"cluster.slots: expected a list of ports, got {slots!r}") from None
        if not slot_ports:
            raise C.ConfError("cluster.slots: at least one worker port is needed")
        extra = conf.get("cluster.storm.conf") or {}
        if not isinstance(extra, Mapping):
            raise C.ConfError(f"cluster.storm.conf: expected a map of storm.yaml keys, got {extra!r}")
        cluster = cls(
            C.project_root(), Path(C.get_str(conf, "owler.work.dir", ".work")),
            zookeeper_port=C.get_int(conf, "cluster.zookeeper.port", 2181),
            nimbus_port=C.get_int(conf, "cluster.nimbus.port", 6627),
            supervisor_port=C.get_int(conf, "cluster.supervisor.port", 6628),
            slots=slot_ports, ui_port=C.get_int(conf, CLUSTER_UI_PORT_KEY, 8080),
            worker_heap_mb=C.get_int(conf, "cluster.worker.heap.mb", 768),
            kill_wait=C.get_int(conf, "cluster.kill.wait", 30), extra=extra,
            supervisors=_supervisors(conf),
            dashboard_port=C.get_int(conf, "cluster.dashboard.port", 8766),
            sched_batch=sched.wants_batch(conf), **_hosts(conf))
        ports = [p for ps in cluster.ports.values() for p in ps] + [cluster.dashboard_port]
        if cluster.machines is not None:
            ports.append(cluster.machines.ssh_port)
        for p in ports:
            if not 1024 < p < 65536:
                raise C.ConfError(f"cluster ports must be in 1025..65535, got {p}")
        if len(set(ports)) != len(ports):
            raise C.ConfError(f"cluster ports must all differ, got {ports}")
        return cluster

    # -- nodes and files --------------------------------------------------------------------------
    def node(self, index: int) -> Node:
        base = self.base / "nodes" / node_host(index)
        if self.machines is not None:  # the supervisor's files in the home of its host
            base = self.host(index).home / "storm"
        return Node(index, base, self.supervisor_port + index - 1,
                    tuple(p + SLOT_STRIDE * (index - 1) for p in self.slots))

    def host(self, index: int) -> Host:
        """The host of node ``index`` (a cluster of hosts only)."""
        assert self.machines is not None
        return Host(index, self.machines.base / node_host(index), self.machines.ssh_port)

    def seen(self, node: Node, path: Path) -> Path:
        """``path`` (under ``node.base``) as ``node``'s supervisor and workers see it: on a host,
        its home is the service account's (owler/run/hosts.py)."""
        if self.machines is None:
            return path
        return self.machines.account_home / path.relative_to(self.host(node.index).home)

    @property
    def sparse_env(self) -> str:
        """The env of config.json that ``sparse`` uses for this cluster."""
        return "local" if self.machines is None else HOSTS_ENV

    def known_nodes(self) -> list[Node]:
        """The configured nodes and any other whose supervisor a pid file names (started by an
        earlier ``up --supervisors N`` with a larger N)."""
        indexes = {n.index for n in self.nodes}
        for f in self.run_dir.glob("supervisor-*.pid"):
            tail = f.stem.rpartition("-")[2]
            if tail.isdigit() and 1 <= int(tail) <= MAX_SUPERVISORS:
                indexes.add(int(tail))
        return [self.node(k) for k in sorted(indexes)]

    def daemons(self, nodes: list[Node] | None = None) -> list[str]:
        """Daemon names in start order."""
        return ["zookeeper", "nimbus", *(n.name for n in (nodes or self.nodes)), "ui"]

    def _node_of(self, name: str) -> Node | None:
        if name.startswith("supervisor-") and name[11:].isdigit():
            return self.node(int(name[11:]))
        return None

    def _address(self, name: str) -> str:
        """The address daemon ``name`` listens on: its node's, else 127.0.0.1."""
        node = self._node_of(name)
        return node.host if node is not None else "127.0.0.1"

    def daemon_ports(self, name: str) -> list[int]:
        node = self._node_of(name)
        return [node.thrift_port, *node.slots] if node else self.ports[name]

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def on_host(self, name: str) -> Node | None:
        """On a cluster of hosts, the node whose host runs daemon ``name`` as the service
        account: a supervisor's, or for nimbus 127.0.0.1 (nimbus runs as the account, as on a
        real cluster: a topology's owner is the user nimbus runs as, and a supervisor tells its
        workers from a process that took a dead one's pid by that owner)."""
        if self.machines is None:
            return None
        if name == "nimbus":
            return Node(1, self.host(1).home / "storm", self.nimbus_port, ())
        return self._node_of(name)

    def log_file(self, name: str) -> Path:
        node = self._node_of(name)
        if node is not None:
            return node.logs / "supervisor.log"
        host = self.on_host(name)
        if host is not None:
            return host.logs / f"{name}.log"
        return self.logs / ("zookeeper.out" if name == "zookeeper" else f"{name}.log")

    @property
    def hosts_file(self) -> Path:
        """Where ``up`` records a cluster of hosts ("N SSH-port CPUs") for the commands after
        it."""
        return self.run_dir / "hosts"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def storm_conf(self, node: Node | None = None) -> dict[str, Any]:
        """The storm.yaml of nimbus and the UI (or of ``node``'s supervisor and workers):
        everything on loopback addresses, state and logs under ``base``."""
        conf: dict[str, Any] = {
            "storm.zookeeper.servers": ["127.0.0.1"],
            "storm.zookeeper.port": self.zookeeper_port,
            "nimbus.seeds": ["127.0.0.1"],
            "nimbus.thrift.port": self.nimbus_port,
            STORM_HOSTNAME_KEY: "127.0.0.1",
            "storm.local.dir": str(self.base / "storm-local"),
            "storm.log.dir": str(self.logs),
            "ui.host": "127.0.0.1",
            "ui.port": self.ui_port,
            # the crawl dashboard the UI passes on under /owler/dashboard/ (UiServer.java)
            "owler.dashboard.port": self.dashboard_port,
            "worker.heap.memory.mb": self.worker_heap_mb,
            "topology.worker.max.heap.size.mb": self.worker_heap_mb,
            # the parallel collector: less CPU per tuple than G1 for a throughput job
            "worker.childopts": "-Xmx%HEAP-MEM%m -XX:+UseParallelGC -XX:+HeapDumpOnOutOfMemoryError",
            # a shell component's JVM side is small: its Python process holds the work
            "topology.component.resources.onheap.memory.mb": 32,
            "topology.subprocess.timeout.secs": 120,
            # exact figures in the UI, refreshed every 5 s (Storm's default: a sample of 5 % of the
            # tuples, sent to nimbus once a minute); cheap at a crawler's tuple rates on one node
            "topology.stats.sample.rate": 1.0,
            EXECUTOR_METRICS_KEY: 5,
            "supervisor.worker.shutdown.sleep.secs": 3,
            # EvenScheduler: a topology's workers go to different supervisors when it can
            "storm.scheduler": "org.apache.storm.scheduler.DefaultScheduler",
        }
        if node is not None:
            conf.update({STORM_HOSTNAME_KEY: node.host,
                         "storm.local.dir": str(self.seen(node, node.base / "storm-local")),
                         "storm.log.dir": str(self.seen(node, node.logs)),
                         "supervisor.slots.ports": list(node.slots),
                         "supervisor.thrift.port": node.thrift_port})
        conf.update(self.extra)
        if node is not None:  # the node's workers listen on its address only
            conf["worker.childopts"] = f"{conf['worker.childopts']} {self.bind_opts(node.host)}"
        return conf

    def bind_opts(self, host: str) -> str:
        """JVM options that make Storm's servers listen on ``host`` only (Storm binds them to
        every address and has no setting for it: storm/java/LoopbackBind.java)."""
        return f"-javaagent:{self.home / BIND_AGENT} -Dowler.bind.host={host}"

    def _write_node_conf(self, node: Node, conf: dict[str, Any] | None = None) -> None:
        node.logs.mkdir(parents=True, exist_ok=True)
        conf = conf or self.storm_conf(node)
        node.storm_yaml.write_text(_YAML_HEAD + yaml.safe_dump(conf, sort_keys=True))
        if self.machines is not None:  # the host's daemon runs as the service account
            (node.base / "storm-local").mkdir(exist_ok=True)
            account = pwd.getpwnam(self.machines.user)
            for path in (node.base, node.logs, node.base / "storm-local", node.storm_yaml):
                os.chown(path, account.pw_uid, account.pw_gid)

    def _write_confs(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.storm_yaml.write_text(_YAML_HEAD + yaml.safe_dump(self.storm_conf(), sort_keys=True))
        for node in self.nodes:
            self._write_node_conf(node)
        nimbus = self.on_host("nimbus")
        if nimbus is not None:  # nimbus's own storm.yaml, local dir and logs on its host
            self._write_node_conf(nimbus, {
                **self.storm_conf(),
                "storm.local.dir": str(self.seen(nimbus, nimbus.base / "storm-local")),
                "storm.log.dir": str(self.seen(nimbus, nimbus.logs))})
        data = self.base / "zookeeper" / "data"
        data.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "zoo.cfg").write_text(
            "tickTime=2000\n"
            f"dataDir={data}\n"
            f"clientPort={self.zookeeper_port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n")

    # -- installation -----------------------------------------------------------------------------
    def check_installation(self) -> None:
        storm = self.home / "bin" / "storm"
        if not storm.exists():
            raise ClusterError(f"Storm is not installed ({storm} is missing): run `make setup`")
        jar = self.home / "lib-owler" / "owler-storm.jar"
        try:
            with zipfile.ZipFile(jar) as z:
                has_ui = UI_CLASS in z.namelist()
        except (OSError, zipfile.BadZipFile):
            has_ui = False
        if not has_ui:
            raise ClusterError(f"the project's Storm UI server is not built ({jar}): run `make setup`")
        if not (self.home / BIND_AGENT).exists():
            raise ClusterError(f"the project's bind agent is not built ({self.home / BIND_AGENT}): "
                               "run `make setup`")
        if not ZOOKEEPER_JAR.exists():
            raise ClusterError(f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): "
                               "run `make setup` (Debian package zookeeper)")

    # -- state ------------------------------------------------------------------------------------
    def running(self, name: str) -> tuple[int, int] | None:
        """``(pid, port)`` of a running daemon of this cluster."""
        return read_pid_file(self.pid_file(name))

    def status(self) -> dict[str, Any]:
        daemons = {}
        nodes = self.known_nodes()
        for name in self.daemons(nodes):
            found = self.running(name)
            daemons[name] = {"running": found is not None, "pid": found[0] if found else None,
                             "port": found[1] if found else self.daemon_ports(name)[0],
                             "log": str(self.log_file(name))}
            node = self._node_of(name)
            if node is not None:
                daemons[name].update(host=node.host, slots=list(node.slots))
        doc: dict[str, Any] = {"daemons": daemons, "nimbus_leader": False, "supervisors": [],
                               "topologies": [], "ui": self.ui_url, "storm_yaml": str(self.storm_yaml),
                               "logs": str(self.logs)}
        dash = self.running("dashboard")
        doc["dashboard"] = {"running": dash is not None, "pid": dash[0] if dash else None,
                            "url": f"{self.ui_url}/owler/dashboard/",
                            "port": self.dashboard_port}
        if daemons["nimbus"]["running"]:
            try:
                info = self._cluster_info(timeout_ms=5000)
                doc["nimbus_leader"] = any(n.isLeader for n in info.nimbuses)
                doc["supervisors"] = sorted(
                    ({"host": s.host, "slots": s.num_workers, "slots_used": s.num_used_workers}
                     for s in info.supervisors), key=lambda d: d["host"])
                doc["topologies"] = [{"name": t.name, "id": t.id, "status": t.status,
                                      "uptime_secs": t.uptime_secs, "workers": t.num_workers,
                                      "executors": t.num_executors,
                                      "placement": self.placement(t.id)}
                                     for t in info.topologies]
            except ClusterError as exc:
                doc["nimbus_error"] = str(exc)
        doc["up"] = all(d["running"] for d in daemons.values()) and doc["nimbus_leader"]
        return doc

    def placement(self, topology_id: str) -> dict[str, list[str]]:
        """Where each component of a topology runs: ``{component: ["host:port", ...]}``, the
        worker of each of its executors (sorted; Storm's own ``__acker`` and ``__system`` left
        out)."""
        info = self._nimbus(lambda client: client.getTopologyInfo(topology_id), 5000)
        where: dict[str, list[str]] = {}
        for ex in info.executors or []:
            if not ex.component_id.startswith("__"):
                where.setdefault(ex.component_id, []).append(f"{ex.host}:{ex.port}")
        return {c: sorted(v) for c, v in sorted(where.items())}

    def _cluster_info(self, timeout_ms: int = 10000):
        return self._nimbus(lambda client: client.getClusterInfo(), timeout_ms)

    def _nimbus(self, call, timeout_ms: int = 10000):
        """``call(client)`` with a Thrift client of nimbus; its errors as ClusterError."""
        try:
            client = nimbus_client(self.nimbus_port, timeout_ms=timeout_ms)
        except (OSError, socket.timeout) as exc:
            raise ClusterError(f"nimbus at 127.0.0.1:{self.nimbus_port} does not answer: {exc}") from exc
        try:
            return call(client)
        except Exception as exc:  # noqa: BLE001 - Thrift errors of every kind: nimbus not ready
            raise ClusterError(f"nimbus at 127.0.0.1:{self.nimbus_port}: {exc}") from exc
        finally:
            client.close()

    # -- up ---------------------------------------------------------------------------------------
    def up(self, timeout: float = 240.0) -> str:
        self.check_installation()
        started: list[str] = []
        deadline = time.monotonic() + timeout
        if self.machines is not None:
            try:
                self.machines.up()
            except HostsError as exc:
                raise ClusterError(str(exc)) from None
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.hosts_file.write_text(f"{len(self.nodes)} {self.machines.ssh_port} "
                                       f"{self.machines.cpus:g}\n")
        try:
            for name in self.daemons():
                found = self.running(name)
                if found is not None:
                    if found[1] != self.ports[name][0]:
                        raise ClusterError(
                            f"{name} of this work folder already runs on port {found[1]} (pid "
                            f"{found[0]}), not {self.ports[name][0]}: run `owler cluster down` first")
                    self._wait_ready(name, found[0], deadline)
                    continue
                if name == "zookeeper" or not self.storm_yaml.exists():
                    self._write_confs()  # a fresh ZooKeeper means a fresh cluster state
                node = self._node_of(name)
                if node is not None:  # a node added to a running cluster gets its conf here
                    self._write_node_conf(node)
                host = self._address(name)
                for port in self.ports[name]:
                    if port_open(port, host):
                        raise ClusterError(
                            f"port {port} on {host} ({name}) is already taken by another "
                            f"process; stop it or choose other cluster.* ports")
                pid = self._start(name)
                started.append(name)
                self._wait_ready(name, pid, deadline)
        except BaseException:
            for name in reversed(started):
                self._stop(name, grace=10.0)
            raise
        if not started:
            return f"cluster already up: nimbus 127.0.0.1:{self.nimbus_port}, UI {self.ui_url}"
        nodes = "; ".join(f"{n.host} slots {', '.join(map(str, n.slots))}" for n in self.nodes)
        if self.machines is not None:
            nodes += (f"; hosts reached as {self.machines.user}@<address> on SSH port "
                      f"{self.machines.ssh_port}, `sparse -e {HOSTS_ENV}` with HOME="
                      f"{self.machines.operator_home} and PATH={self.machines.operator / 'bin'}:..")
        return (f"cluster up: zookeeper 127.0.0.1:{self.zookeeper_port}, nimbus "
                f"127.0.0.1:{self.nimbus_port} (leader), {len(self.nodes)} supervisor(s) ({nodes}), "
                f"Storm UI {self.ui_url}; logs in {self.logs}")

    def _command(self, name: str) -> list[str]:
        if name == "zookeeper":
            java = os.environ.get("JAVA_HOME")
            java = str(Path(java) / "bin" / "java") if java else "java"
            return [java, "-Xmx256m", "-cp", f"{ZOOKEEPER_JAR}:/etc/zookeeper/conf", ZOOKEEPER_MAIN,
                    str(self.conf_dir / "zoo.cfg")]
        node = self._node_of(name)
        host = self.on_host(name)
        if host is not None:
            return self.machines.enter(self.host(host.index)) + [
                HOST_PYTHON, str(self.home / "bin" / "storm"), "--config",
                str(self.seen(host, host.storm_yaml)), "supervisor" if node else name]
        if node is not None:
            return [sys.executable, str(self.home / "bin" / "storm"), "--config",
                    str(node.storm_yaml), "supervisor"]
        return [sys.executable, str(self.home / "bin" / "storm"), "--config", str(self.storm_yaml),
                name]

    def _start(self, name: str) -> int:
        node = self._node_of(name) or self.on_host(name)
        logs = node.logs if node is not None else self.logs
        env = dict(os.environ)
        env["STORM_LOG_DIR"] = str(logs)
        if name == "nimbus" or node is not None:  # ZooKeeper and the UI have their own setting
            env["STORM_JAVA_OPTS"] = (env.get("STORM_JAVA_OPTS", "") + " "
                                      + self.bind_opts(self._address(name))).strip()
        env[sched.ENV] = "1" if self.sched_batch else "0"  # read by storm/bin/storm's supervisor
        if self.on_host(name) is not None:
            # a host's own environment: its workers run the components from the virtualenvs
            # that sparse submit builds there (config.json env "hosts"), nothing of the operator's
            env = {k: env[k] for k in (*_HOST_ENV_KEYS, "STORM_LOG_DIR", "STORM_JAVA_OPTS",
                                       sched.ENV) if k in env}
            env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
            env["STORM_LOG_DIR"] = str(self.seen(node, node.logs))
        else:
            # the workers find `streamparse_run` (and the project's Python) on the supervisor's
            # PATH
            env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        out_path = self._out_file(name)
        logs.mkdir(parents=True, exist_ok=True)
        try:
            cmd = self._command(name)
        except HostsError as exc:
            raise ClusterError(f"cannot start {name}: {exc}") from None
        with open(out_path, "ab") as out:
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, cwd=node.base if node else self.base,
                                        env=env, start_new_session=True)
            except FileNotFoundError as exc:
                raise ClusterError(f"cannot start {name}: {exc} (install Java 17: `make setup`)")
        write_pid_file(self.pid_file(name), proc.pid, self.ports[name][0])
        return proc.pid

    def _out_file(self, name: str) -> Path:
        if name == "zookeeper":
            return self.log_file(name)
        return self.log_file(name).with_suffix(".out")

    def _wait_ready(self, name: str, pid: int, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            if not alive(pid):
                raise ClusterError(f"{name} exited while starting; see {self.log_file(name)}:\n"
                                   + _tail(self.log_file(name)) + _tail(self._out_file(name)))
            try:
                if self._ready(name):
                    return
            except ClusterError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise ClusterError(f"{name} did not become ready in time ({last or 'no answer'}); "
                           f"see {self.log_file(name)}")

    def _ready(self, name: str) -> bool:
        if name == "zookeeper":
            return _four_letter(self.zookeeper_port, b"ruok") == b"imok"
        if name == "nimbus":
            if not port_open(self.nimbus_port):
                return False
            return any(n.isLeader for n in self._cluster_info(timeout_ms=5000).nimbuses)
        node = self._node_of(name)
        if node is not None:
            info = self._cluster_info(timeout_ms=5000)
            return any(s.host == node.host and s.num_workers > 0 for s in info.supervisors)
        try:
            with urllib.request.urlopen(f"{self.ui_url}/api/v1/cluster/summary", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    # -- down -------------------------------------------------------------------------------------
    def down(self) -> str:
        killed = []
        if self.running("nimbus") is not None and port_open(self.nimbus_port):
            try:
                killed = self.kill_all(self.kill_wait)
            except ClusterError as exc:  # a nimbus that cannot answer is stopped all the same
                print(f"owler cluster down: {exc}", file=sys.stderr)
        stopped = [name for name in ["dashboard", *reversed(self.daemons(self.known_nodes()))]
                   if self._stop(name)]
        for state in ("storm-local", "zookeeper"):
            shutil.rmtree(self.base / state, ignore_errors=True)
        for node_dir in (self.base / "nodes").glob("*"):
            shutil.rmtree(node_dir / "storm-local", ignore_errors=True)
        hosts = ""
        if self.machines is not None:  # the hosts go, with their files (their logs too)
            try:
                hosts = f"; {self.machines.down()}"
            except HostsError as exc:
                raise ClusterError(str(exc)) from None
            self.hosts_file.unlink(missing_ok=True)
        if not stopped:
            return "cluster is not running" + hosts
        what = f"; killed topologies: {', '.join(killed)}" if killed else ""
        return f"cluster stopped ({', '.join(stopped)}){what}; logs kept in {self.logs}{hosts}"

    def kill_all(self, wait: int) -> list[str]:
        """Kill every topology (each drains ``wait`` seconds) and wait until its workers are gone."""
        info = self._cluster_info()
        names = [t.name for t in info.topologies if t.status != "KILLED"]
        for name in names:
            self.kill(name, wait, block=False)
        deadline = time.monotonic() + wait + 60
        while time.monotonic() < deadline:
            if not self._cluster_info().topologies and not self._workers_running():
                break
            time.sleep(1.0)
        return names

    def kill(self, name: str, wait: int, block: bool = True) -> None:
        """Kill topology ``name``; with ``block``, return once it and its workers are gone."""
        from streamparse.thrift import storm_thrift

        client = nimbus_client(self.nimbus_port)
        try:
            client.killTopologyWithOpts(name, storm_thrift.KillOptions(wait_secs=wait))
        except storm_thrift.NotAliveException:
            raise ClusterError(f"no topology named {name!r} runs on the cluster") from None
        finally:
            client.close()
        if not block:
            return
        deadline = time.monotonic() + wait + 60
        while time.monotonic() < deadline:
            names = [t.name for t in self._cluster_info().topologies]
            if name not in names and not self._workers_running():
                return
            time.sleep(1.0)
        raise ClusterError(f"topology {name!r} did not go away within {wait + 60} s")

    def _check_topology(self, name: str) -> None:
        from owler.run.runner import topology_names

        names = topology_names(self.root)
        if name not in names:
            raise ClusterError(f"unknown topology {name!r}; available: {', '.join(names)}")

    def _check_conf(self, name: str, conf_file: str | None, options: list[str]
                    ) -> dict[str, Any]:
        """The topology's own check of its keys (as ``owler run`` does), before anything is
        submitted or killed: a bad key is a clear error here, not a topology dying on the
        cluster. Returns the configuration."""
        from owler.run.runner import check_topology_conf, load_topology

        try:
            conf = C.load_conf(conf_file, options, root=self.root)
            check_topology_conf(load_topology(self.root, name, conf), self.root, conf)
            speaks = C.multilang_serializer(conf)
        except C.ConfError as exc:
            raise ClusterError(f"configuration error: {exc}") from None
        # sparse starts the components with config.json's serializer
        project = orjson.loads((self.root / "config.json").read_bytes())
        told = project.get("envs", {}).get(self.sparse_env, {}).get(
            "serializer", project.get("serializer", "json"))
        if told != speaks:
            raise ClusterError(f"configuration error: {MULTILANG_SERIALIZER_KEY} speaks {speaks}, "
                               f"but config.json starts the Python components with {told!r}: "
                               "set the same protocol in both")
        return conf

    def _resource_options(self, conf: Mapping[str, Any]) -> list[str]:
        """Options that make the resource keys found only in the current directory absolute
        (``conf.resource_overrides``): sparse builds the topology in the project root, and the
        workers look a resource up from the topology's folder, so ``-o blacklist.dir=mylists``
        given elsewhere would be an empty blacklist. The workers of a cluster of hosts read
        their own disks: there such a value is an error, as nothing would carry it there."""
        extra = C.resource_overrides(conf, self.root)
        if extra and self.machines is not None:
            names = ", ".join(opt.partition("=")[0] for opt in extra)
            raise ClusterError(
                f"configuration error: {names}: found only in the current directory, which the "
                "hosts' workers do not have: put it under the project's resources/ folder (it "
                "travels with the topology) or give a path that every host has")
        return extra

    def wait_leader(self, timeout: float) -> None:
        """Return once nimbus answers as leader; a clear error when the cluster is not up or
        nimbus is not the leader within ``timeout`` seconds (Nimbus refuses uploads until then)."""
        if self.running("nimbus") is None and not port_open(self.nimbus_port):
            raise ClusterError(f"the cluster is not up (no nimbus on 127.0.0.1:{self.nimbus_port}): "
                               "run `owler cluster up` first")
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            try:
                if any(n.isLeader for n in self._cluster_info(timeout_ms=5000).nimbuses):
                    return
                last = "nimbus is not the leader yet"
            except ClusterError as exc:
                last = str(exc)
            if time.monotonic() >= deadline:
                raise ClusterError(f"cannot submit: {last} (waited {timeout:.0f} s); "
                                   "see `owler cluster status`")
            time.sleep(0.5)

    def submit(self, name: str, conf_file: str | None, options: list[str], *, force: bool = False,
               leader_timeout: float = 60.0, requirements: str | None = None) -> int:
        """``sparse submit -e ENV -n NAME`` once nimbus is leader (env ``local``, or ``hosts``
        for a cluster of hosts, after checking that the operator can log in to each); 0, or a
        ClusterError that says why sparse failed. ``requirements``: the workers' virtualenv spec
        in place of ``virtualenvs/NAME.txt`` (hosts)."""
        self._check_topology(name)
        if requirements and self.machines is None:
            raise ClusterError("--requirements: this cluster's workers run the project's "
                               "virtualenv; only a cluster of hosts (`up --hosts N`) builds them")
        options = [*options, *self._resource_options(self._check_conf(name, conf_file, options))]
        self.wait_leader(leader_timeout)
        running = [t.name for t in self._cluster_info().topologies]
        if name in running and not force:
            raise ClusterError(f"topology {name!r} already runs on the cluster: "
                               f"`owler cluster kill {name}` first, or --force")
        cmd = [str(Path(sys.executable).parent / "sparse"), "submit", "-e", self.sparse_env,
               "-n", name]
        if force:
            cmd += ["--force", "--wait", str(self.kill_wait)]
        for opt in options:
            cmd += ["-o", opt]
        env = dict(os.environ, LEIN_ROOT="1",
                   PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
        if conf_file:
            env["OWLER_CONF"] = str(Path(conf_file).resolve())
        # the topology class, built by sparse in its own process, reads parallelism.* from these
        env[C.OPTIONS_ENV] = "\n".join(options)
        if requirements:
            cmd += ["--requirements", str(Path(requirements).resolve())]
        if self.machines is not None:  # sparse reaches the hosts over SSH as their operator
            env = self.machines.operator_env(env)
            self.check_reachable()
        _sparse(cmd, cwd=self.root, env=env)
        self.start_dashboard(conf_file, options)
        return 0

    def rebalance(self, name: str, workers: int | None, executors: Mapping[str, int],
                  wait: int = 10, timeout: float = 300.0) -> dict[str, list[str]]:
        """Storm's rebalance of topology ``name`` over the supervisors there are now (a node
        that joined gets its share; ``workers``: the new number of worker processes,
        ``executors``: of components, at most their tasks), losing nothing: the topology is
        deactivated and what is in flight settles first (as for :meth:`drain`: Storm's own
        rebalance kills the workers with their tuples, whose URLs come back after the message
        timeout and are fetched a second time), then it pauses ``wait`` seconds, nimbus
        assigns its executors again, the workers start where it put them, and the topology is
        activated again if it was active. On a cluster of hosts, streamparse first builds the
        topology's virtualenv on every host nimbus knows (``sparse update_virtualenv``; quick
        where it exists). Returns the new placement once every executor runs where nimbus put
        it."""
        from streamparse.thrift import storm_thrift

        if workers is not None and workers < 1:
            raise ClusterError(f"--workers: expected at least 1, got {workers}")
        info = self._cluster_info()
        topo = next((t for t in info.topologies if t.name == name), None)
        if topo is None:
            raise ClusterError(f"no topology named {name!r} runs on the cluster")
        if self.machines is not None:
            self.check_reachable()
            env = self.machines.operator_env(dict(os.environ, LEIN_ROOT="1"))
            _sparse([str(Path(sys.executable).parent / "sparse"), "update_virtualenv", "-e",
                     self.sparse_env, "-n", name], cwd=self.root, env=env)
        opts = storm_thrift.RebalanceOptions(wait_secs=wait, num_workers=workers,
                                             num_executors=dict(executors) or None)
        deadline = time.monotonic() + wait + timeout
        with self._paused([topo], deadline):
            self._nimbus(lambda client: client.rebalance(name, opts))
            want = workers or topo.num_workers
            while time.monotonic() < deadline:
                time.sleep(2.0)
                now = next((t for t in self._cluster_info().topologies if t.name == name), None)
                if now is None or now.status == "REBALANCING" or now.num_workers != want:
                    continue
                where = self.placement(now.id)
                if len({w for ws in where.values() for w in ws}) == want:
                    return where
            raise ClusterError(f"topology {name!r} was not running again on {want} worker(s) "
                               f"within {wait + timeout:.0f} s; see `owler cluster status`")

    @contextlib.contextmanager
    def _paused(self, topologies: list, deadline: float) -> Iterator[list[str]]:
        """The active ones of ``topologies`` (nimbus's summaries) deactivated and settled (nothing
        of them in flight: :meth:`_settle`) while the block runs, activated again after it
        whatever happened; yields their names."""
        paused: list = []
        try:
            for t in topologies:
                if t.status == "ACTIVE":
                    self._nimbus(lambda client, n=t.name: client.deactivate(n))
                    paused.append(t)
            for t in paused:
                self._settle(t.id, deadline)
            yield [t.name for t in paused]
        finally:
            for t in paused:
                self._resume(t.name)

    def _resume(self, name: str, timeout: float = 60.0) -> None:
        """Activate topology ``name`` again after a pause (nimbus refuses while it is still
        rebalancing: tried until ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._nimbus(lambda client: client.activate(name))
                return
            except ClusterError as exc:
                if time.monotonic() > deadline:
                    raise ClusterError(f"cannot activate {name!r} again ({exc}): run "
                                       f"`storm activate {name}`") from None
                time.sleep(2.0)

    def drain(self, host: str, timeout: float = 600.0) -> list[str]:
        """Take node ``host`` out of the running crawl, losing nothing: every running topology is
        deactivated (its spouts stop emitting), the tuples in flight settle (every one a spout
        emitted is acked or failed: :meth:`_in_flight`), the node's supervisor and its workers
        stop, nimbus moves their executors to the other nodes, and the topologies are
        activated again. Storm has no drain of its own; the pause is its cost (a WARC file a
        stopped writer left open is completed by its task where it starts again, as for a lost
        node). Returns the names of the topologies that were paused. The node's machine stays
        (on a cluster of hosts, its SSH server): ``up`` starts its supervisor again."""
        node = next((n for n in self.known_nodes() if n.host == host), None)
        if node is None or self.running(node.name) is None:
            running = [n.host for n in self.known_nodes() if self.running(n.name) is not None]
            raise ClusterError(f"no supervisor runs on {host}; the nodes: {', '.join(running)}")
        info = self._cluster_info()
        others = [s for s in info.supervisors if s.host != host]
        if not others:
            raise ClusterError(f"{host} is the last node: nothing could take over its work")
        deadline = time.monotonic() + timeout
        with self._paused(info.topologies, deadline) as names:
            self._stop(node.name)
            while time.monotonic() < deadline:
                left = [t for t in self._cluster_info().topologies if t.name in names
                        and any(w.startswith(f"{host}:") for ws in self.placement(t.id).values()
                                for w in ws)]
                if not left:
                    break
                time.sleep(2.0)
            else:
                raise ClusterError(f"nimbus did not move the executors off {host} within "
                                   f"{timeout:.0f} s; see `owler cluster status`")
        return names

    def _in_flight(self, topology_id: str) -> int:
        """Tuples the topology's spouts emitted and nobody acked or failed yet (Storm's figures,
        exact at the cluster's sample rate of 1.0)."""
        info = self._nimbus(lambda client: client.getTopologyInfo(topology_id), 5000)
        emitted = settled = 0
        for ex in info.executors or []:
            spout = ex.stats and ex.stats.specific and ex.stats.specific.spout
            if not spout:
                continue
            emitted += sum(n for stream, n in (ex.stats.emitted or {}).get(":all-time", {}).items()
                           if not stream.startswith("__"))
            for figures in (spout.acked, spout.failed):
                settled += sum((figures or {}).get(":all-time", {}).values())
        return emitted - settled

    def _settle(self, topology_id: str, deadline: float) -> None:
        """Wait until nothing of the topology is in flight, the same over two of Storm's stats
        refreshes (every ``EXECUTOR_METRICS_KEY`` seconds), or until its message timeout has
        passed (every tuple is then acked or failed; a spout emitting on an unanchored stream
        never shows 0)."""
        conf = orjson.loads(self._nimbus(lambda client: client.getTopologyConf(topology_id)))
        until = min(deadline, time.monotonic() + int(conf.get(MESSAGE_TIMEOUT_KEY, 30)) + 5)
        seen: list[int] = []
        while time.monotonic() < until:
            seen.append(self._in_flight(topology_id))
            if len(seen) >= 3 and seen[-3:] == [0, 0, 0]:
                return
            time.sleep(3.0)

    def check_reachable(self) -> None:
        """On a cluster of hosts, a ClusterError unless the operator can log in over SSH to
        nimbus's machine (the tunnel) and to every host whose supervisor nimbus knows (where
        sparse builds the virtualenvs)."""
        if self.machines is None:
            return
        workers = sorted({s.host for s in self._cluster_info().supervisors})
        problems = self.machines.unreachable(["127.0.0.1", *workers])
        if problems:
            raise ClusterError("cannot submit: sparse submit logs in to nimbus's machine and "
                               "every worker over SSH: " + "; ".join(problems))

    def start_dashboard(self, conf_file: str | None, options: list[str],
                        timeout: float = 60.0) -> str:
        """``owler dashboard`` for the crawl just submitted (its conf), on 127.0.0.1 at
        ``dashboard.port``, in place of the previous crawl's; the Storm UI passes it on under
        ``/owler/dashboard/``. Returns its address."""
        self._stop("dashboard")
        cmd = [sys.executable, "-m", "owler", "dashboard", "--port", str(self.dashboard_port)]
        if conf_file:
            cmd += ["--conf", str(Path(conf_file).resolve())]
        for opt in options:
            cmd += ["-o", opt]
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / "dashboard.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.root,
                                    env=dict(os.environ, OWLER_HOME=str(self.root)),
                                    start_new_session=True)
        write_pid_file(self.pid_file("dashboard"), proc.pid, self.dashboard_port)
        deadline = time.monotonic() + timeout
        while not port_open(self.dashboard_port):
            if proc.poll() is not None or time.monotonic() > deadline:
                self._stop("dashboard")
                raise ClusterError(f"the crawl dashboard did not start on 127.0.0.1:"
                                   f"{self.dashboard_port}; see {self.logs / 'dashboard.log'}:\n"
                                   + _tail(self.logs / "dashboard.log"))
            time.sleep(0.3)
        return f"{self.ui_url}/owler/dashboard/"

    def switch(self, name: str, conf_file: str | None, options: list[str],
               leader_timeout: float = 60.0) -> tuple[list[str], int]:
        """Kill every running topology (each drains), then submit ``name``."""
        self._check_topology(name)
        options = [*options, *self._resource_options(self._check_conf(name, conf_file, options))]
        self.wait_leader(leader_timeout)
        self.check_reachable()  # before the running crawl is killed
        killed = self.kill_all(self.kill_wait)
        return killed, self.submit(name, conf_file, options, leader_timeout=leader_timeout)

    def _workers_running(self) -> bool:
        """A worker JVM of this cluster is still alive (in a supervisor's process group)."""
        from owler.run.procs import group_members

        for node in self.known_nodes():
            found = self.running(node.name)
            if found is None:
                continue
            for pid in group_members(found[0]):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"org.apache.storm.daemon.worker.Worker" in cmdline and alive(pid):
                    return True
        return False

    def _stop(self, name: str, grace: float = 30.0) -> bool:
        found = self.running(name)
        pid_file = self.pid_file(name)
        if found is None:
            pid_file.unlink(missing_ok=True)
            return False
        stop_group(found[0], grace)
        pid_file.unlink(missing_ok=True)
        return True


def _supervisors(conf: Mapping[str, Any]) -> int:
    n = C.get_int(conf, "cluster.supervisors", 1)
    if not 1 <= n <= MAX_SUPERVISORS:
        raise C.ConfError(f"cluster.supervisors: expected 1..{MAX_SUPERVISORS}, got {n}")
    return n


def _tee(cmd: list[str], **kw) -> tuple[int, list[str]]:
    """Run ``cmd``, its output passed on to ours as it comes; its exit code and its last lines."""
    kept: deque[str] = deque(maxlen=2000)
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace", **kw) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line.rstrip("\n"))
    return proc.returncode, list(kept)


def _sparse(cmd: list[str], **kw) -> None:
    """Run a ``sparse`` command (:func:`_tee`); a ClusterError that says why it failed. A tunnel
    to nimbus that could not be opened is tried once more: streamparse probes for a free local
    port by binding it itself, a race an ``ssh`` starting at that moment can lose (the hosts'
    SSH config makes that ``ssh`` exit rather than listen on half its addresses)."""
    for attempt in (1, 2):
        rc, lines = _tee(cmd, **kw)
        if rc == 0:
            return
        why = sparse_failure(lines)
        if attempt == 1 and why.startswith(_TUNNEL_FAILED):
            print(f"owler: {why}; trying once more", file=sys.stderr)
            continue
        raise ClusterError(f"sparse {cmd[1]} exited {rc}: {why}")


_TUNNEL_FAILED = "the SSH tunnel to nimbus failed"
#: a line of streamparse's SSH library (Fabric): "[host] out: text"
_HOST_LINE = re.compile(r"^\[([^\]]+)\] (?:out|err): (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def sparse_failure(lines: list[str]) -> str:
    """Why ``sparse submit`` failed, from its output: a virtualenv that a worker could not build
    (pip's error, with the host), a host it could not reach, the tunnel to nimbus, else its last
    lines."""
    lines = [_ANSI.sub("", line) for line in lines]  # pip colours its errors on the SSH pty
    pip = [(m.group(1), m.group(2).strip()) for m in map(_HOST_LINE.match, lines)
           if m and m.group(2).strip().startswith("ERROR:")]
    if pip:
        hosts = sorted({h for h, _ in pip})
        return (f"the virtualenv could not be built on {', '.join(hosts)}: {pip[-1][1]} "
                "(the topology was not submitted)")
    for line in lines:
        if "Unable to open ssh tunnel" in line:
            return f"{_TUNNEL_FAILED}: {line.strip()}"
    fatal = [line.strip() for line in lines if line.strip().startswith("Fatal error:")]
    if fatal:
        return fatal[-1]
    tail = [line.strip() for line in lines if line.strip()][-8:]
    return " | ".join(tail) or "no output"


def _hosts(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``cluster.hosts``, ``cluster.hosts.ssh.port`` and ``cluster.hosts.cpus``; once ``up``
    recorded a cluster of hosts in the work folder, its SSH port and CPUs per host, and its number
    of hosts unless ``cluster.hosts`` is given (a cluster of hosts is one until ``down``)."""
    hosts = C.get_int(conf, "cluster.hosts", 0)
    port = C.get_int(conf, "cluster.hosts.ssh.port", 2222)
    cpus = C.get_float(conf, CLUSTER_HOSTS_CPUS_KEY, 0.0)
    recorded = Path(C.get_str(conf, "owler.work.dir", ".work")) / "cluster" / "run" / "hosts"
    try:
        fields = recorded.read_text().split()
        was, port_was = int(fields[0]), int(fields[1])
        cpus_were = float(fields[2]) if len(fields) > 2 else 0.0  # a record from before CPUs
    except (OSError, ValueError, IndexError):
        pass
    else:  # the hosts keep their SSH port and CPUs until `down`; `up --hosts N` may add hosts
        hosts, port, cpus = hosts or was, port_was, cpus_were
    if not 0 <= hosts <= MAX_SUPERVISORS - 1:
        raise C.ConfError(f"cluster.hosts: expected 0..{MAX_SUPERVISORS - 1}, got {hosts}")
    checked_cpus(CLUSTER_HOSTS_CPUS_KEY, cpus)
    return {"hosts": hosts, "ssh_port": port, "host_cpus": cpus}


def _four_letter(port: int, word: bytes) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(word)
            return s.recv(64).strip()
    except OSError:
        return b""


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line[:300] for line in text[-lines:]) + "\n"


def format_status(doc: Mapping[str, Any]) -> str:
    out = []
    for name, d in doc["daemons"].items():
        state = f"running (pid {d['pid']}, port {d['port']})" if d["running"] else "not running"
        if d.get("host"):
            state += f", node {d['host']}, slots {', '.join(map(str, d['slots']))}"
        out.append(f"{name:<12} {state}")
    leader = "leader" if doc["nimbus_leader"] else "not leader"
    out.append(f"nimbus:     {leader}; supervisors: "
               + (", ".join(f"{s['host']} ({s['slots_used']}/{s['slots']} slots used)"
                            for s in doc["supervisors"]) or "none"))
    if doc.get("nimbus_error"):
        out.append(f"nimbus error: {doc['nimbus_error']}")
    out.append(f"Storm UI:   {doc['ui']}")
    dash = doc.get("dashboard") or {}
    if dash:
        out.append(f"dashboard:  {dash['url']}" + (f" (pid {dash['pid']})" if dash["running"]
                                                   else " (starts with `cluster submit`)"))
    if doc["topologies"]:
        out.append("topologies:")
        for t in doc["topologies"]:
            out.append(f"  {t['name']:<16} {t['status']:<10} up {t['uptime_secs']} s, "
                       f"{t['workers']} worker(s), {t['executors']} executors  ({t['id']})")
            for component, where in t.get("placement", {}).items():
                out.append(f"    {component:<22} {', '.join(where)}")
    else:
        out.append("topologies: none")
    out.append(f"logs:       {doc['logs']}")
    return "\n".join(out)


def dumps(doc: Mapping[str, Any]) -> str:
    return orjson.dumps(doc).decode()
