"""What seeding a parser's near-duplicate memory from the frontier costs
(:class:`owler.parse.simhash.FrontierSeeds`): one query per host a parser task meets without a
memory of it (its first page of the host in this task, after a restart, or once forgotten).

    .venv/bin/python bench/bench_simhash_seed.py [--hosts 3000] [--urls 8,120]
        [--backend sqlite|opensearch|both] [--port 9290] [--heap 1g]

The frontier holds ``--hosts`` queues (``byHost``) of ``--urls`` URLs each (each size in turn, a
frontier of its own: 8 is a queue of the benchmark farm, whose hosts have 7 pages), as a crawl
leaves them:
five in six FETCHED, next fetch dates spread over a day, each with a SimHash and the metadata a
crawled page persists (about 900 bytes of JSON: title, description, signature, digests, WARC
position, language, risk, …), the rest DISCOVERED. Then every host is seeded once, in a random
order, by a fresh ``FrontierSeeds`` (a parser task meeting all of them for the first time), twice:
the second pass asks the same hosts again (a restarted task, the frontier's pages or the node's
caches as the first pass left them). The SQLite frontier is a file on the work disk in the page
cache (it was just written, as a crawl's is); OpenSearch is one local node
(``owler services`` machinery, started in a temp folder and stopped), the index refreshed.

Prints per backend, queue size and pass: µs per host (mean, median, 99th percentile), SimHashes
read per host, and this process's CPU µs per host (OpenSearch's own CPU is the node's, not
counted). The parse of a farm page costs about 900 µs of the parser
(BENCHMARKS.md), so a host's first page pays the query once.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate, open_frontier  # noqa: E402
from owler.parse.simhash import FrontierSeeds  # noqa: E402

NOW = time.time()


def metadata(rnd: random.Random, host: str, i: int) -> dict[str, list[str]]:
    """What a FETCHED page persists (metadata.persist of resources/crawler-conf.yaml), with
    values of realistic lengths."""
    return {
        "depth": [str(rnd.randrange(1, 6))], "url.path": [f"https://{host}/"],
        "parse.title": [f"Page {i} of {host}: " + "word " * rnd.randrange(3, 12)],
        "parse.description": ["a description of the page " * rnd.randrange(2, 6)],
        "parse.charset": ["utf-8"], "parse.mimetype": ["text/html"],
        "parse.text.length": [str(rnd.randrange(500, 20000))],
        "parse.outlinks.count": [str(rnd.randrange(5, 200))],
        "signature": [f"{rnd.getrandbits(128):032x}"], "fetchInterval": ["1440"],
        "simhash": [f"{rnd.getrandbits(64):016x}"],
        "capture.digest": [f"sha1:{rnd.getrandbits(160):040x}"],
        "capture.date": ["2026-12-01T10:00:00Z"], "protocol.etag": [f'W/"{i:x}"'],
        "warc.file.name": ["OWLER-20261201100000-00003-00012.warc.gz"],
        "warc.record.offset": [str(rnd.randrange(10**9))],
        "warc.record.length": [str(rnd.randrange(2000, 90000))],
        "lang": ["en"], "lang.confidence": ["0.98"], "risk": ["benign"],
        "signals.search": ["allowed"],
    }


def build(conf: dict, hosts: list[str], urls: int, rnd: random.Random) -> None:
    with open_frontier(conf) as f:
        batch: list[StatusUpdate] = []
        for h in hosts:
            for i in range(urls):
                url = f"https://{h}/page/{i}"
                if i % 6 == 5:
                    batch.append(StatusUpdate(url, Status.DISCOVERED, {"depth": ["2"]}, NOW, h))
                else:
                    batch.append(StatusUpdate(url, Status.FETCHED, metadata(rnd, h, i),
                                              NOW + rnd.uniform(0, 86400), h))
            if len(batch) >= 5000:
                f.apply_updates(batch)
                batch = []
        if batch:
            f.apply_updates(batch)
        f.refresh()


def seed_pass(conf: dict, hosts: list[str]) -> dict[str, float]:
    seeds = FrontierSeeds(conf)
    seeds("warm.example", "warm.example", "https://warm.example/")  # the frontier opened
    times = []
    read = 0
    cpu0 = time.process_time()
    for h in hosts:
        t0 = time.perf_counter()
        read += len(seeds(h, h, f"https://{h}/new"))
        times.append((time.perf_counter() - t0) * 1e6)
    cpu = (time.process_time() - cpu0) * 1e6 / len(hosts)
    seeds.close()
    assert seeds.counters["simhash/seed_failed"] == 0, seeds.counters
    times.sort()
    return {"mean": statistics.fmean(times), "median": times[len(times) // 2],
            "p99": times[int(len(times) * 0.99)], "read": read / len(hosts), "cpu": cpu}


def run(name: str, conf: dict, args, urls: int) -> list[str]:
    rnd = random.Random(5)
    hosts = [f"h{i}.example{i % 97}.org" for i in range(args.hosts)]
    t0 = time.perf_counter()
    build(conf, hosts, urls, rnd)
    built = time.perf_counter() - t0
    rows = []
    for k in (1, 2):
        order = hosts[:]
        random.Random(k).shuffle(order)
        r = seed_pass(conf, order)
        rows.append(f"| {name} | {urls} | {k} | {r['mean']:.0f} | {r['median']:.0f} | "
                    f"{r['p99']:.0f} | {r['read']:.1f} | {r['cpu']:.0f} |")
    print(f"{name}: {args.hosts * urls:,} URLs written in {built:.1f} s", file=sys.stderr)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=3000)
    ap.add_argument("--urls", default="8,120", help="URLs per host (comma-separated sizes)")
    ap.add_argument("--backend", choices=("sqlite", "opensearch", "both"), default="both")
    ap.add_argument("--port", type=int, default=9290)
    ap.add_argument("--heap", default="1g")
    args = ap.parse_args()
    sizes = [int(n) for n in args.urls.split(",")]
    (ROOT / ".work").mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-seed-", dir=ROOT / ".work"))
    lines = ["| frontier | URLs per queue | pass | µs per host, mean | median | p99 | SimHashes "
             "read per host | CPU µs per host (this process) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    base = {"partition.url.mode": "byHost", "simhash.host.memory": 100}
    try:
        if args.backend in ("sqlite", "both"):
            for n in sizes:
                lines += run("SQLite", {**base, "frontier.sqlite.path": str(tmp / f"f{n}.sqlite")},
                             args, n)
        if args.backend in ("opensearch", "both"):
            from owler.run.services import OpenSearchNode

            node = OpenSearchNode(ROOT, tmp / "node", args.port, args.heap)
            node.up()
            try:
                for n in sizes:
                    lines += run("OpenSearch", {**base, "frontier.backend": "opensearch",
                                                "services.opensearch.port": args.port,
                                                "opensearch.status.index.name": f"seeds{n}"},
                                 args, n)
            finally:
                node.down()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
