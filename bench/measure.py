"""Measure a benchmark run: CPU and memory of a whole process tree, sampled from /proc.

A crawl on Storm is many processes (the JVM and one Python process per component), so a figure
for "the crawler" must add them all up. `TreeSampler` follows every descendant of one root pid
every `interval` seconds and keeps, per sample, the time, the tree's CPU seconds (user + system of
the live processes, plus what their reaped children used: cutime/cstime) and its resident memory;
`cpu_at(t)` interpolates the CPU at a moment, so the CPU of a window (first page to last page)
can be told apart from start-up and the idle tail. The exact whole-run CPU comes from
RUSAGE_CHILDREN, which the caller reads before and after waiting for the root.

The machine is a virtual one shared with other guests: `TreeSampler` also samples the time the
hypervisor gave to others while this machine's vCPUs had work (`/proc/stat`'s steal), and
`steal_share(start, end)` says what share of the machine's CPU time in a window was stolen. A run
that lost a third of its CPU that way is slower for a reason outside the crawler.
"""

from __future__ import annotations

import bisect
import os
import platform
import re
import subprocess
import threading
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _snapshot() -> dict[int, tuple[int, float, int, float]]:
    """pid -> (ppid, cpu seconds incl. reaped children, resident bytes, own cpu seconds) of every
    process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        own = (int(fields[11]) + int(fields[12])) / TICK
        cpu = own + (int(fields[13]) + int(fields[14])) / TICK
        out[int(entry)] = (int(fields[1]), cpu, int(fields[21]) * PAGE, own)
    return out


def machine_cpu() -> tuple[float, float]:
    """(stolen, total) CPU seconds of all the machine's vCPUs since boot, from ``/proc/stat``'s
    first line (user, nice, system, idle, iowait, irq, softirq, steal; guest time is already in
    user)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    ticks = [int(x) for x in fields]
    return ticks[7] / TICK, sum(ticks) / TICK


def steal_between(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of the machine's CPU time stolen between two :func:`machine_cpu` readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def lower_median(items: list, key):
    """The item whose ``key`` is the median of ``items`` (the lower middle one of an even count):
    a real run or round, so its figures belong together."""
    return sorted(items, key=key)[(len(items) - 1) // 2]


def tree(root: int) -> dict[int, tuple[int, float, int, float]]:
    """The snapshot entries of `root` and all its descendants."""
    snap = _snapshot()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in snap.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in snap:
            out[pid] = snap[pid]
        todo.extend(children.get(pid, ()))
    return out


def label(pid: int) -> str:
    """A short name for a process of a run: the JVM, a Storm component's class, or the command."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    component = re.search(r"\b(?:bolts|spouts)\.[\w.]+", " ".join(args))
    if component:
        return component.group(0).rsplit(".", 1)[-1]
    if args and args[0].endswith("java"):
        return "jvm"
    words = " ".join(Path(a).name if k == 0 else a for k, a in enumerate(args[:3])).split()
    return " ".join(words)[:60]


class TreeSampler(threading.Thread):
    def __init__(self, root: int, interval: float = 0.5):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.samples: list[tuple[float, float, int]] = []
        self.peak_rss = 0
        self.peak_procs = 0
        self.labels: dict[int, str] = {}
        self.history: dict[int, list[tuple[float, float]]] = {}  # pid -> [(time, own CPU)]
        self.stolen: list[tuple[float, float]] = []  # (time, the machine's stolen CPU seconds)
        self.total: list[tuple[float, float]] = []  # (time, the machine's CPU seconds)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            procs = tree(self.root)
            cpu = sum(p[1] for p in procs.values())
            rss = sum(p[2] for p in procs.values())
            n = len(procs)
            now = time.time()
            stolen, total = machine_cpu()
            self.stolen.append((now, stolen))
            self.total.append((now, total))
            for pid, (_, _, _, pcpu) in procs.items():
                name = label(pid)  # every time: a launcher may exec java
                if name not in ("?", "") or pid not in self.labels:
                    self.labels[pid] = name
                self.history.setdefault(pid, []).append((now, pcpu))
            if n:
                # a reaped child's CPU moves into its parent's cutime: never let the total drop
                last = self.samples[-1][1] if self.samples else 0.0
                self.samples.append((now, max(cpu, last), rss))
                self.peak_rss = max(self.peak_rss, rss)
                self.peak_procs = max(self.peak_procs, n)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def cpu_by_label(self, start: float = 0.0, end: float = float("inf")) -> dict[str, float]:
        """Own CPU seconds per kind of process between two moments (default: the whole run)."""
        out: dict[str, float] = {}
        for pid, series in self.history.items():
            cpu = _interpolate(series, end) - _interpolate(series, start)
            out[self.labels[pid]] = out.get(self.labels[pid], 0.0) + cpu
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def steal_share(self, start: float, end: float) -> float:
        """The share of the machine's CPU time stolen by the hypervisor between two moments."""
        return steal_between(*((_interpolate(self.stolen, t), _interpolate(self.total, t))
                               for t in (start, end)))

    def cpu_at(self, t: float) -> float:
        """The tree's CPU seconds at moment t (interpolated between samples)."""
        return _interpolate([(s[0], s[1]) for s in self.samples], t)


def _interpolate(series: list[tuple[float, float]], t: float) -> float:
    if not series:
        return 0.0
    k = bisect.bisect_left(series, (t, float("-inf")))
    if k == 0:
        return 0.0 if t < series[0][0] else series[0][1]
    if k >= len(series):
        return series[-1][1]
    (t0, c0), (t1, c1) = series[k - 1], series[k]
    return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) // (1024 * 1024)
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
        java = java.splitlines()[0].replace('"', "")
    except OSError:
        java = "no java"
    return (f"{os.cpu_count()} vCPU ({model}), {mem} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}, {java}")
