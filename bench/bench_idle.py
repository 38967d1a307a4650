"""What a crawl topology costs when it has nothing to do: CPU of every process, and of the worker
JVM's threads by kind, over a window after start-up.

A re-crawl waits for due dates, a frontier runs dry, a node of a cluster gets few URLs: a worker
that idles must cost next to nothing. The explorative topology is started with ``owler run`` (local
mode, embedded frontier) on a frontier holding one seed on a closed loopback port (refused at
once: an ERROR, then nothing is due), left ``--warm`` seconds to start and settle, and measured
over the next ``--seconds``: the own CPU of each process of the tree (bench/measure.py), and the
JVM's per thread (/proc/<pid>/task), grouped by thread name with the numbers taken out
(``Thread-12-parser-executor[4, 4]`` → ``Thread-#-parser-executor[#, #]``).

``--compare KEY=VALUE`` (repeatable) also measures the topology with that override (``owler run
-o``), alternated with the shipped configuration over ``--rounds`` rounds.

Usage: .venv/bin/python bench/bench_idle.py [--warm 45] [--seconds 30] [--rounds 1]
       [--compare topology.bolt.wait.progressive.level3.sleep.millis=1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import TICK, label, tree  # noqa: E402


def jvm_threads(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid`` so far, summed by name without its numbers."""
    out: Counter = Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        out[re.sub(r"\d+", "#", name)] += (int(fields[11]) + int(fields[12])) / TICK
    return dict(out)


def measure(overrides: list[str], warm: float, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        work = Path(tmp)
        conf = work / "conf.yaml"
        conf.write_text(f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
                        f"warc.dir: {work / 'warc'}\nowler.work.dir: {work}\n"
                        "http.allow.private.addresses: true\n")
        seeds = work / "seeds.txt"
        seeds.write_text("http://127.0.0.1:9/\n")  # the discard port: nothing listens
        py = sys.executable
        subprocess.run([py, "-m", "owler", "inject", str(seeds), "--conf", str(conf)], cwd=ROOT,
                       check=True, capture_output=True)
        cmd = [py, "-m", "owler", "run", "explorative", "--conf", str(conf), "--idle-exit", "3600"]
        for o in overrides:
            cmd += ["-o", o]
        with open(work / "run.log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            time.sleep(warm)
            if proc.poll() is not None:
                raise RuntimeError(f"the topology ended early:\n{(work / 'run.log').read_text()}")
            before = tree(proc.pid)
            jvm = next((pid for pid in before if label(pid) == "jvm"), None)
            if jvm is None:
                raise RuntimeError("no worker JVM in the run's process tree")
            threads0 = jvm_threads(jvm)
            time.sleep(seconds)
            after = tree(proc.pid)
            threads1 = jvm_threads(jvm)
            names = {pid: label(pid) for pid in after}  # while they live
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    processes: Counter = Counter()
    for pid, entry in after.items():
        if pid in before:  # own CPU of the processes alive over the whole window
            processes[names[pid]] += entry[3] - before[pid][3]
    threads = {k: v - threads0.get(k, 0.0) for k, v in threads1.items()}
    return {"overrides": overrides, "seconds": seconds,
            "cpu_s": round(sum(processes.values()), 2),
            "processes": {k: round(v, 2) for k, v in processes.most_common() if v > 0},
            "jvm_threads": {k: round(v, 2) for k, v in
                            sorted(threads.items(), key=lambda kv: -kv[1]) if v > 0}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=float, default=45.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--compare", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    variants = [("shipped", [])] + [(o, [o]) for o in args.compare]
    runs = []
    for k in range(args.rounds):
        for name, overrides in variants:
            print(f"[bench] idle topology: {name}, round {k + 1} ...", file=sys.stderr, flush=True)
            runs.append({"name": name, "round": k + 1} | measure(overrides, args.warm, args.seconds))
    if args.json:
        print(json.dumps(runs))
        return
    for r in runs:
        share = 100 * r["cpu_s"] / r["seconds"]
        print(f"\n{r['name']}, round {r['round']}: {r['cpu_s']} s of CPU in {r['seconds']:g} s "
              f"({share:.1f} % of a core)")
        print("  processes: " + ", ".join(f"{k} {v}" for k, v in r["processes"].items()))
        top = list(r["jvm_threads"].items())[:12]
        print("  JVM threads: " + ", ".join(f"{k} {v}" for k, v in top))


if __name__ == "__main__":
    main()
