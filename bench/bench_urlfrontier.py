"""Benchmark of URLFrontier: status updates/s and URLs served/s through ``owler frontier serve``
(PutURLs / GetURLs with the project's client, the service in a process of its own) against the
same frontier used directly, in the same run, for both backends.

    .venv/bin/python bench/bench_urlfrontier.py [--rows 100000] [--keys 5000] [--batch 2000]
        [--port 9291] [--heap 1g] [--backends sqlite,opensearch] [--json]

For each backend, on fresh storage (a SQLite file in a temp folder; an index of its own on one
local OpenSearch node started here, as bench_frontier_opensearch.py does):

1. Writes: the batches of bench_frontier_opensearch.py (80 % DISCOVERED: 70 % new URLs, 10 %
   known; 20 % FETCHED overwrites), ``--batch`` updates each, until ``--rows`` new URLs. Direct:
   ``apply_updates`` on the frontier. Service: ``apply_updates`` of the URLFrontier client, one
   PutURLs stream per batch, returning when every item is acked (the service acks after its write
   is durable; it writes what has arrived in batches of up to ``urlfrontier.service.batch``).
2. Reads, for 10 s: a spout's queries, 50 queues × 10 URLs. Direct: ``due`` (OpenSearch: the
   queues' leases taken and given back at once). Service: GetURLs, which holds every URL it gives
   (so each query goes on to URLs not served yet).

The peer of the service: a bare gRPC endpoint of the same API in a process of its own (the same
grpc server, stubs and client; PutURLs acks every item without storing it, GetURLs streams URLs
from memory): what one Python gRPC stream carries at most on this machine, in the same run.

CPU: the benchmark process (client) and the service process, from /proc. Prints a markdown table
with the service's rate as a ratio of the direct frontier's and of the bare endpoint's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.bench_frontier_opensearch import batches  # noqa: E402
from owler.frontier import open_frontier  # noqa: E402
from owler.run.services import OpenSearchNode  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Service:
    def __init__(self, conf_file: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "owler", "frontier", "serve", "--port", "0", "--conf",
             str(conf_file)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env={**os.environ, "OWLER_HOME": str(ROOT)})
        line = self.proc.stdout.readline()
        m = re.match(r"URLFrontier service on (\S+) over ", line)
        if not m:
            self.proc.kill()
            raise SystemExit(f"the service did not start: {line}")
        self.address = m.group(1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def echo_server(port: int) -> None:
    """The bare endpoint (module docstring), until killed."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    from owler.frontier.urlfrontier_api import add_service, pb

    class Echo:
        def PutURLs(self, items, context):
            for item in items:
                yield pb.AckMessage(ID=item.ID)

        def GetURLs(self, request, context):
            for i in range(request.max_queues * request.max_urls_per_queue):
                yield pb.URLInfo(url=f"https://host{i}.example.com/page.html", key=f"q{i}",
                                 crawlID="DEFAULT")

        def GetStats(self, request, context):
            return pb.Stats()

    server = grpc.server(ThreadPoolExecutor(max_workers=16))
    add_service(server, Echo())
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"URLFrontier service on 127.0.0.1:{port} over nothing", flush=True)
    server.wait_for_termination()


class Echo(Service):
    def __init__(self, port: int) -> None:  # noqa: D107 - the bare endpoint's process
        self.proc = subprocess.Popen([sys.executable, __file__, "--echo-server", str(port)],
                                     cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.proc.stdout.readline()
        self.address = f"127.0.0.1:{port}"


def measure(frontier, work, cpu_other) -> dict:
    """Writes then 10 s of reads through ``frontier``; CPU of this process and ``cpu_other()``."""
    c0, o0, t0 = time.process_time(), cpu_other(), time.perf_counter()
    n = failed = 0
    for batch in work:
        failed += len(frontier.apply_updates(batch))
        n += len(batch)
    t_write = time.perf_counter() - t0
    c_write, o_write = time.process_time() - c0, cpu_other() - o0
    frontier.refresh()
    served = rounds = 0
    c0, o0, t0 = time.process_time(), cpu_other(), time.perf_counter()
    while time.perf_counter() - t0 < 10.0:
        got = frontier.due(time.time(), 50, 10)
        served += len(got)
        rounds += 1
        for key in list(getattr(frontier, "leases", ())):
            frontier.release(key, time.time(), served=False)
    t_read = time.perf_counter() - t0
    c_read, o_read = time.process_time() - c0, cpu_other() - o0
    return {"updates": n, "failed": failed, "updates_per_s": n / t_write,
            "write_cpu_us": (c_write + o_write) / n * 1e6, "served_per_s": served / t_read,
            "read_cpu_us": (c_read + o_read) / max(served, 1) * 1e6,
            "ms_per_query": t_read / rounds * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=5_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--port", type=int, default=9291)
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--backends", default="sqlite,opensearch")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--echo-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.echo_server:
        echo_server(args.echo_server)
        return
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    tmp = Path(tempfile.mkdtemp(prefix="bench-uf-"))
    node = OpenSearchNode(ROOT, tmp / "node", args.port, args.heap) \
        if "opensearch" in backends else None
    results: dict[str, dict] = {}
    try:
        if node is not None:
            node.up()
        now = time.time()
        work = list(batches(random.Random(7), args.rows, args.keys, args.batch, now, "w"))
        for backend in backends:
            def conf_of(name: str) -> dict:
                if backend == "sqlite":
                    return {"frontier.backend": "sqlite",
                            "frontier.sqlite.path": str(tmp / f"{name}.sqlite")}
                return {"frontier.backend": "opensearch", "services.opensearch.port": args.port,
                        "opensearch.status.index.name": f"{name}", "fetcher.server.delay": 0.0}

            if backend == "opensearch":  # warm the node's JIT on a scratch index first
                warm = open_frontier(conf_of("warmup"), owner="warm")
                for b in work[: max(1, len(work) // 3)]:
                    warm.apply_updates(b)
                warm.close()
            direct = open_frontier(conf_of("direct"), owner="bench")
            results[f"{backend} direct"] = measure(direct, work, lambda: 0.0)
            direct.close()
            conf_file = tmp / f"{backend}-service.yaml"
            conf_file.write_text("".join(f"{k}: {json.dumps(v)}\n"
                                         for k, v in conf_of("service").items())
                                 + "urlfrontier.default.delay: 0\n")
            service = Service(conf_file)
            try:
                client = open_frontier({"frontier.backend": "urlfrontier",
                                        "urlfrontier.address": service.address,
                                        "urlfrontier.delay.requestable": 600})
                results[f"{backend} through the service"] = measure(
                    client, work, lambda: cpu_of(service.proc.pid))
                client.close()
            finally:
                service.stop()
        echo = Echo(args.port + 1)
        try:
            client = open_frontier({"frontier.backend": "urlfrontier",
                                    "urlfrontier.address": echo.address})
            results["bare gRPC endpoint (stores nothing)"] = measure(
                client, work, lambda: cpu_of(echo.proc.pid))
            client.close()
        finally:
            echo.stop()
    finally:
        if node is not None:
            node.down()
        shutil.rmtree(tmp, ignore_errors=True)

    if args.json:
        print(json.dumps(results))
        return
    print(f"URLFrontier service against the frontier used directly: {args.rows:,} new URLs over "
          f"{args.keys:,} keys, batches of {args.batch}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs\n")
    print("| frontier | status updates/s | CPU µs/update | URLs served/s | CPU µs/URL served "
          "| ms per query |")
    print("|---|---|---|---|---|---|")
    bare = results["bare gRPC endpoint (stores nothing)"]
    for name, r in results.items():
        base = results.get(f"{name.split()[0]} direct")
        ratios = ["", ""]
        if "service" in name:
            ratios = [f" ({r[k] / base[k]:.2f}× direct, {r[k] / bare[k]:.2f}× bare)"
                      for k in ("updates_per_s", "served_per_s")]
        print(f"| {name} | {r['updates_per_s']:,.0f}{ratios[0]} | {r['write_cpu_us']:.1f} | "
              f"{r['served_per_s']:,.0f}{ratios[1]} | {r['read_cpu_us']:.1f} | "
              f"{r['ms_per_query']:.1f} |")


if __name__ == "__main__":
    main()
