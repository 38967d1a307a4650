"""A share of the machine's CPU for a group of processes: the CPUs of one host of the loopback
cluster (owler/run/hosts.py, ``cluster.hosts.cpus``) or of one OpenSearch node of ``owler
services`` (owler/run/services.py, ``services.opensearch.cpus``).

The hosts of that cluster are loopback addresses of one machine, so every supervisor, worker and
component would otherwise share all of its cores, and a host that joins a crawl would add
processes but no capacity. A real machine brings its own cores; :class:`CpuLimit` gives each host
a fixed number of CPUs with Linux's cgroup ``cpu`` controller (the CFS bandwidth limit: at most
``cpus`` × the period of CPU time per period, over all the group's processes together), so that
the cluster's capacity grows with its hosts as a real one does.

Both cgroup versions are served: a v1 hierarchy with the ``cpu`` controller (``cpu.cfs_quota_us``
and ``cpu.cfs_period_us``) and the v2 hierarchy (``cpu.max``, with ``+cpu`` enabled in the
parents' ``cgroup.subtree_control``). The groups live under ``owler-hosts/`` of that hierarchy.
A process joins a group by writing its pid into the group's ``cgroup.procs``
(:meth:`CpuLimit.join_prefix` is a command prefix that does it before ``exec``); whatever it
starts afterwards is in the group too. Everything here needs root.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: the CFS period of every group (microseconds): the kernel's default
PERIOD_US = 100_000
#: the folder of every group of owler's, under the hierarchy's root
PARENT = "owler-hosts"
MOUNTINFO = Path("/proc/self/mountinfo")


def checked_cpus(key: str, cpus: float) -> float:
    """``cpus`` of setting ``key`` if it is 0 (the machine's, shared) up to this machine's CPUs;
    raises ConfError otherwise."""
    from owler.conf import ConfError

    if not 0 <= cpus <= (os.cpu_count() or 1):
        raise ConfError(f"{key}: expected 0 (the machine's, shared) .. {os.cpu_count() or 1} "
                        f"(this machine's CPUs), got {cpus:g}")
    return cpus


class CgroupError(RuntimeError):
    """No cgroup ``cpu`` controller can be used here, or a group could not be made."""


def cpu_hierarchy(mountinfo: Path = MOUNTINFO) -> tuple[Path, int] | None:
    """Where the ``cpu`` controller is mounted and its cgroup version (1 or 2), or None."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    v2 = None
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if after[0] == "cgroup" and "cpu" in after[2].split(","):
            return point, 1  # a v1 hierarchy that holds the controller wins: v2 cannot have it
        if after[0] == "cgroup2" and v2 is None:
            try:
                if "cpu" in (point / "cgroup.controllers").read_text().split():
                    v2 = point
            except OSError:
                pass
    return (v2, 2) if v2 is not None else None


class CpuLimit:
    """The group ``<hierarchy>/owler-hosts/<name>``, limited to ``cpus`` CPUs; ``key`` is the
    setting that asked for it (its messages name it)."""

    def __init__(self, name: str, cpus: float, key: str, mountinfo: Path = MOUNTINFO) -> None:
        if not cpus > 0:
            raise ValueError(f"cpus must be > 0, got {cpus}")
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"not a group name: {name!r}")
        self.name = name
        self.cpus = cpus
        self._mountinfo = mountinfo
        self.key = key

    def _hierarchy(self) -> tuple[Path, int]:
        found = cpu_hierarchy(self._mountinfo)
        if found is None:
            raise CgroupError(f"{self.key} needs Linux's cgroup cpu controller, and none "
                              f"is mounted here ({self._mountinfo}); set {self.key}: 0")
        return found

    @property
    def path(self) -> Path:
        root, _ = self._hierarchy()
        return root / PARENT / self.name

    @property
    def procs(self) -> Path:
        """The file a process writes its pid into to join the group."""
        return self.path / "cgroup.procs"

    @property
    def quota_us(self) -> int:
        return max(1000, round(self.cpus * PERIOD_US))  # the kernel refuses less than 1 ms

    def create(self) -> Path:
        """Make the group (or set the limit of the one there) and return its folder."""
        root, version = self._hierarchy()
        group = root / PARENT / self.name
        try:
            group.mkdir(parents=True, exist_ok=True)
            if version == 1:
                (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
                (group / "cpu.cfs_quota_us").write_text(f"{self.quota_us}\n")
            else:
                for parent in (root, root / PARENT):  # the controller reaches the group
                    if "cpu" not in (parent / "cgroup.subtree_control").read_text().split():
                        (parent / "cgroup.subtree_control").write_text("+cpu\n")
                (group / "cpu.max").write_text(f"{self.quota_us} {PERIOD_US}\n")
        except OSError as exc:
            raise CgroupError(f"cannot make the CPU group {group} ({exc.strerror or exc}): "
                              f"{self.key} needs root and a writable cgroup cpu "
                              f"controller; or set {self.key}: 0") from None
        return group

    def limit(self) -> float | None:
        """The group's limit in CPUs as the kernel holds it (None: no group, or unlimited)."""
        root, version = self._hierarchy()
        group = root / PARENT / self.name
        try:
            if version == 1:
                quota = int((group / "cpu.cfs_quota_us").read_text())
                period = int((group / "cpu.cfs_period_us").read_text())
            else:
                q, p = (group / "cpu.max").read_text().split()
                if q == "max":
                    return None
                quota, period = int(q), int(p)
        except (OSError, ValueError):
            return None
        return quota / period if quota > 0 else None

    def throttled(self) -> int:
        """How many periods the group's processes were stopped for having used their share."""
        try:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "nr_throttled":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def join_prefix(self) -> list[str]:
        """A command prefix: the program after it runs in the group (the shell joins the group,
        then becomes the program)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.procs)]

    def remove(self, wait: float = 0.0) -> bool:
        """Remove the group (and ``owler-hosts/`` once empty); False while a process is in it,
        after up to ``wait`` seconds for the last to go (one that was stopped a moment ago, or a
        zombie its parent has not reaped yet, holds the group a little longer)."""
        deadline = time.monotonic() + wait
        while not self._remove_once():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _remove_once(self) -> bool:
        try:
            root, _ = self._hierarchy()
        except CgroupError:
            return True
        group = root / PARENT / self.name
        try:
            group.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:
            (root / PARENT).rmdir()
        except OSError:  # other groups are left, or it was never there
            pass
        return True

