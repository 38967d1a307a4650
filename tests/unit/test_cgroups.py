"""owler/run/cgroups.py on made-up hierarchies: where the cpu controller is found, the limit each
cgroup version is given, the error without one. The kernel's side (a process joins the group and
is held to its share) is tested on real hosts in tests/integration/test_cluster_hosts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from owler.constants import CLUSTER_HOSTS_CPUS_KEY as KEY
from owler.run.cgroups import CgroupError, CpuLimit, cpu_hierarchy


def mountinfo(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "mountinfo"
    p.write_text("\n".join(lines) + "\n")
    return p


def v1_line(point: Path, options: str) -> str:
    return f"32 31 0:29 / {point} rw,relatime - cgroup cgroup rw,{options}"


def v2_line(point: Path) -> str:
    return f"40 31 0:35 / {point} rw,relatime - cgroup2 cgroup2 rw"


def test_the_cpu_controller_is_found_in_either_version(tmp_path):
    v1, v2, other = tmp_path / "cpu,cpuacct", tmp_path / "unified", tmp_path / "memory"
    for d in (v1, v2, other):
        d.mkdir()
    (v2 / "cgroup.controllers").write_text("hugetlb\n")
    info = mountinfo(tmp_path, ["23 1 8:1 / / rw - ext4 /dev/vda rw", v1_line(other, "memory"),
                                v2_line(v2), v1_line(v1, "cpu,cpuacct")])
    assert cpu_hierarchy(info) == (v1, 1)  # v2's root does not offer cpu: v1 holds it
    info = mountinfo(tmp_path, [v2_line(v2)])
    assert cpu_hierarchy(info) is None
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    assert cpu_hierarchy(info) == (v2, 2)
    # "cpuacct" alone is not "cpu"
    assert cpu_hierarchy(mountinfo(tmp_path, [v1_line(other, "cpuacct")])) is None
    assert cpu_hierarchy(tmp_path / "missing") is None


def test_a_v1_group_gets_a_quota_per_period(tmp_path):
    root = tmp_path / "cpu"
    root.mkdir()
    limit = CpuLimit("127.0.0.2-2222", 0.5, KEY, mountinfo(tmp_path, [v1_line(root, "cpu")]))
    group = limit.create()
    assert group == root / "owler-hosts" / "127.0.0.2-2222" == limit.path
    assert (group / "cpu.cfs_quota_us").read_text() == "50000\n"
    assert (group / "cpu.cfs_period_us").read_text() == "100000\n"
    assert limit.limit() == 0.5
    assert limit.join_prefix()[-1] == str(group / "cgroup.procs")
    (group / "cpu.stat").write_text("nr_periods 40\nnr_throttled 7\nthrottled_time 9\n")
    assert limit.throttled() == 7
    # the kernel's smallest quota is 1 ms
    assert CpuLimit("x", 0.001, KEY).quota_us == 1000


def test_a_v2_group_is_reached_by_the_controller_and_gets_cpu_max(tmp_path):
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "cgroup.subtree_control").write_text("memory\n")
    (root / "owler-hosts").mkdir()
    (root / "owler-hosts" / "cgroup.subtree_control").write_text("")
    limit = CpuLimit("h", 1.5, KEY, mountinfo(tmp_path, [v2_line(root)]))
    group = limit.create()
    # enabling is a write of "+cpu" (the kernel keeps the rest); a file here takes the write
    assert (root / "cgroup.subtree_control").read_text() == "+cpu\n"
    assert (root / "owler-hosts" / "cgroup.subtree_control").read_text() == "+cpu\n"
    assert (group / "cpu.max").read_text() == "150000 100000\n"
    assert limit.limit() == 1.5
    (group / "cpu.max").write_text("max 100000\n")
    assert limit.limit() is None


def test_no_controller_and_bad_arguments_are_clear_errors(tmp_path):
    limit = CpuLimit("h", 1, KEY, mountinfo(tmp_path, []))
    with pytest.raises(CgroupError, match="cluster.hosts.cpus needs Linux's cgroup cpu controller"):
        limit.create()
    assert limit.remove()  # nothing to remove
    # the message names the setting that asked for the group
    node = CpuLimit("n", 1, "services.opensearch.cpus", mountinfo(tmp_path, []))
    with pytest.raises(CgroupError, match=r"services.opensearch.cpus needs .*; set "
                                          r"services.opensearch.cpus: 0"):
        node.create()
    with pytest.raises(ValueError):
        CpuLimit("h", 0, KEY)
    with pytest.raises(ValueError):
        CpuLimit("a/b", 1, KEY)


def test_remove_takes_the_group_and_the_empty_parent(tmp_path):
    root = tmp_path / "cpu"
    root.mkdir()
    info = mountinfo(tmp_path, [v1_line(root, "cpu")])
    a, b = CpuLimit("a", 1, KEY, info), CpuLimit("b", 1, KEY, info)
    a.create()
    b.create()
    for f in a.path.iterdir():  # the kernel's files vanish with the group; made-up ones do not
        f.unlink()
    assert a.remove() and not a.path.exists() and (root / "owler-hosts").exists()
    assert not b.remove()  # "files" in it stand for processes: the group stays
    for f in b.path.iterdir():
        f.unlink()
    assert b.remove() and not (root / "owler-hosts").exists()


def test_remove_waits_for_the_last_process_to_go(tmp_path):
    import threading
    import time

    root = tmp_path / "cpu"
    root.mkdir()
    limit = CpuLimit("n", 1, KEY, mountinfo(tmp_path, [v1_line(root, "cpu")]))
    limit.create()
    t0 = time.monotonic()
    assert not limit.remove(wait=0.3)  # a "process" in it throughout: gives up after the wait
    assert time.monotonic() - t0 >= 0.3 and limit.path.exists()

    def leave():  # the last one goes a moment later
        time.sleep(0.2)
        for f in limit.path.iterdir():
            f.unlink()

    threading.Thread(target=leave).start()
    assert limit.remove(wait=5.0) and not limit.path.exists()
