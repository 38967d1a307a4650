"""Pages/s of the explorative crawl on the cluster of hosts as hosts join it (issue 46).

`owler cluster up --hosts 1` with ``cluster.hosts.cpus`` (each host a share of this machine's
CPUs of its own, owler/run/cgroups.py: without it every host would share all the cores and a
joining host would add processes but no capacity), `owler cluster submit explorative` (sparse
over SSH, the OpenSearch frontier on a node of the benchmark's own, WARC files in each host's
home), then twice: `owler cluster up --hosts N+1` and `owler cluster rebalance explorative
--workers N+1`, the way an operator adds a machine to a running crawl. After each step the crawl
settles (``--settle`` seconds; the first time from its first page), then pages/s is the farm's
count of pages served over ``--window`` seconds (a page served again counts once;
``fetched_twice`` says how many were; the frontier spout's tuples failed in the window, from the
Storm UI, say whether they were replays, and ``twice_after_s`` at the end gives the quartiles of
the seconds between a page's two fetches), and the frontier's writes/s (the status index's
indexing operations, OpenSearch's own count). Per host it reports the share of CFS periods in which the
kernel stopped the host's processes for having used their CPUs (near 1: the host is saturated),
and the machine's idle share (what the hosts left unused: the farm, OpenSearch and ZooKeeper run
outside them; nimbus runs on 127.0.0.1's host, which has the same share as the workers).

Needs root, Debian's openssh-server and python3-virtualenv (`make setup`), the package registry
(each host builds its virtualenv with pip), cluster ports 2181/6627/8080 free, and about 20
minutes. Not part of `make bench`.

    python bench/bench_cluster_join.py [--hosts 3] [--cpus 0.45] [--window 90] [--settle 30]
        [--farm 2000x55] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.farm import BenchFarm, host_addr  # noqa: E402
from owler.constants import CLUSTER_HOSTS_CPUS_KEY  # noqa: E402
from owler.run.cgroups import CpuLimit  # noqa: E402
from owler.run.hosts import USER, node_host  # noqa: E402


def owler(*args: str, timeout: float = 900) -> str:
    r = subprocess.run([sys.executable, "-m", "owler", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"owler {' '.join(args)} exited {r.returncode}:\n{r.stdout[-3000:]}\n"
                           f"{r.stderr[-3000:]}")
    return r.stdout


def farm_stats(farm: BenchFarm) -> dict:
    with urllib.request.urlopen(f"http://{host_addr(0)}:{farm.port}/__stats", timeout=30) as r:
        return json.loads(r.read())


def cfs(limit: CpuLimit) -> tuple[int, int]:
    """(periods, throttled periods) of a host's group."""
    stat = dict(line.split() for line in (limit.path / "cpu.stat").read_text().splitlines()
                if len(line.split()) == 2)
    return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0))


def idle_total() -> tuple[float, float]:
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return ticks[3] + ticks[4], sum(ticks)


def status_writes(port: int) -> tuple[int, int]:
    """The status index's indexing operations so far, and those that failed (OpenSearch's
    ``index_total`` and ``index_failed`` of the primaries)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/join/_stats/indexing",
                                timeout=30) as r:
        st = json.loads(r.read())["_all"]["primaries"]["indexing"]
    return st["index_total"], st["index_failed"]


def spout_tuples(ui: str = "http://127.0.0.1:8080") -> tuple[int, int]:
    """The frontier spout's tuples acked and failed so far (Storm UI, all time). A failed tuple's
    URL is given out again: when it failed by the message timeout its page is fetched twice."""
    acked = failed = 0
    with urllib.request.urlopen(f"{ui}/api/v1/topology/summary", timeout=30) as r:
        tops = json.loads(r.read())["topologies"]
    for top in tops:
        q = urllib.parse.quote(top["id"])
        with urllib.request.urlopen(f"{ui}/api/v1/topology/{q}?window=:all-time",
                                    timeout=30) as r:
            for spout in json.loads(r.read())["spouts"]:
                acked += int(spout.get("acked") or 0)
                failed += int(spout.get("failed") or 0)
    return acked, failed


def served_again(farm: BenchFarm) -> list[float]:
    """Seconds between the two fetches of each page the farm served twice (the first 1,000)."""
    url = f"http://{host_addr(0)}:{farm.port}/__again"
    with urllib.request.urlopen(url, timeout=30) as r:
        return sorted(round(second - first, 1) for _, _, first, second in json.loads(r.read()))


def measure(farm: BenchFarm, hosts: list[CpuLimit], window: float, port: int) -> dict:
    p0, c0, i0, t0 = farm_stats(farm), [cfs(h) for h in hosts], idle_total(), time.time()
    w0, s0 = status_writes(port), spout_tuples()
    time.sleep(window)
    p1, c1, i1, t1 = farm_stats(farm), [cfs(h) for h in hosts], idle_total(), time.time()
    w1, s1 = status_writes(port), spout_tuples()
    twice = p1["duplicates"] - p0["duplicates"]
    pages = p1["pages"] - p0["pages"] - twice  # a page fetched again counts once
    return {"pages": pages, "seconds": round(t1 - t0, 1),
            "pages_per_s": round(pages / (t1 - t0), 1),
            "requests_per_s": round((p1["requests"] - p0["requests"]) / (t1 - t0), 1),
            "fetched_twice": twice,
            "spout_acked": s1[0] - s0[0], "spout_failed": s1[1] - s0[1],
            # the frontier's writes: statuses and outlinks indexed into the status index
            "status_writes_per_s": round((w1[0] - w0[0]) / (t1 - t0), 1),
            "status_writes_failed_per_s": round((w1[1] - w0[1]) / (t1 - t0), 1),
            "throttled_share": [round((b[1] - a[1]) / max(b[0] - a[0], 1), 2)
                                for a, b in zip(c0, c1)],
            "machine_idle_share": round((i1[0] - i0[0]) / max(i1[1] - i0[1], 1), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=3, help="hosts at the end (one joins at a time)")
    ap.add_argument("--cpus", type=float, default=0.45, help="CPUs of each host")
    ap.add_argument("--window", type=float, default=90.0)
    ap.add_argument("--settle", type=float, default=30.0)
    ap.add_argument("--farm", default="2000x55", help="HOSTSxPAGES of the benchmark farm: pages "
                    "enough for every window and join (about 110,000 at 0.45 CPUs per host), "
                    "few hosts enough that their robots.txt are fetched before the first window")
    ap.add_argument("--ssh-port", type=int, default=2322)
    ap.add_argument("--opensearch-port", type=int, default=9286)
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    farm_hosts, farm_pages_per_host = (int(x) for x in args.farm.split("x"))
    work = Path(tempfile.mkdtemp(prefix="bench-join-"))
    opt = ["-o", f"owler.work.dir={work}"]
    conf = work / "conf.yaml"
    conf.write_text(
        "frontier.backend: opensearch\n"
        f"services.opensearch.port: {args.opensearch_port}\n"
        "opensearch.status.index.name: join\n"
        f"warc.dir: /home/{USER}/warc\n"
        f"owler.work.dir: {work}\n"
        "topology.workers: 1\n"
        "parallelism.fetcher: 3\n"
        "parallelism.parser: 3\n"
        "http.allow.private.addresses: true\n"
        "fetcher.server.delay: 1.0\n"
        "http.timeout: 10000\n"
        f"cluster.hosts.ssh.port: {args.ssh_port}\n"
        f"cluster.hosts.cpus: {args.cpus}\n")
    from owler.run.services import OpenSearchNode

    node = OpenSearchNode(ROOT, work / "opensearch", args.opensearch_port, "1g")
    steps = []
    try:
        node.up()
        with BenchFarm(farm_hosts, farm_pages_per_host, 1, work / "farm.json") as farm:
            seeds = work / "seeds.txt"
            seeds.write_text("\n".join(farm.seeds()) + "\n")
            owler("inject", str(seeds), "--conf", str(conf))
            print(owler("cluster", "up", "--hosts", "1", "--conf", str(conf)).strip()[:300],
                  flush=True)
            owler("cluster", "submit", "explorative", "--conf", str(conf))
            deadline = time.time() + 600
            while farm_stats(farm)["pages"] == 0:  # the first worker takes a while on its CPUs
                if time.time() > deadline:
                    raise RuntimeError("no page fetched 10 minutes after the submit")
                time.sleep(2)
            for n in range(1, args.hosts + 1):
                if n > 1:
                    t = time.time()
                    owler("cluster", "up", "--hosts", str(n), *opt)
                    owler("cluster", "rebalance", "explorative", "--workers", str(n), *opt)
                    joined_in = round(time.time() - t, 1)
                else:
                    joined_in = None
                time.sleep(args.settle)
                port = args.ssh_port
                limits = [CpuLimit(f"{node_host(k)}-{port}", args.cpus, CLUSTER_HOSTS_CPUS_KEY)
                          for k in range(2, n + 2)]
                step = {"hosts": n, "cpus": round(n * args.cpus, 2), "join_s": joined_in,
                        **measure(farm, limits, args.window, args.opensearch_port)}
                steps.append(step)
                print(json.dumps(step), flush=True)
            served = farm_stats(farm)
            gaps = served_again(farm)
            owler("cluster", "kill", "explorative", *opt)
    finally:
        try:
            owler("cluster", "down", *opt)
        finally:
            node.down()
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    total = farm_hosts * (farm_pages_per_host + 1)
    base = steps[0]["pages_per_s"]
    result = {"cpus_per_host": args.cpus, "farm": args.farm, "farm_pages": total,
              "served": served["pages"], "fetched_twice": served["duplicates"],
              # quartiles of the seconds between a page's two fetches
              "twice_after_s": [gaps[int(q * (len(gaps) - 1))] for q in (0, .25, .5, .75, 1)]
              if gaps else [], "steps": steps,
              "ratios": [round(s["pages_per_s"] / base, 2) if base else None for s in steps]}
    if served["pages"] - served["duplicates"] >= total * 0.95:
        result["warning"] = "the farm ran nearly dry: the last windows may have lacked URLs"
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
