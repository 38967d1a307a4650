"""The explorative crawl from a big frontier: the benchmark farm crawled once from an empty
frontier and once from a frontier that already holds ``--urls`` other URLs (not due: rescheduled
a month ahead, on hosts of a Zipf law as in ``bench/bench_frontier_scale.py``), the farm's seeds
injected into each; the embedded SQLite frontier, or (``--backend opensearch``) the OpenSearch one
on a node of its own (``--heap``, ``--port``).

    .venv/bin/python bench/bench_big_frontier.py [--urls 10M] [--farm 3000x6] [--rounds 2]
        [--dir DIR] [--backend sqlite|opensearch] [--heap 2g] [--port 9286]

The big frontier is built once (its build time is printed) and copied for each run (SQLite: the
file; OpenSearch: the status and queues indices cloned, ``_clone``, the empty run's indices
fresh). The runs
alternate (empty first in odd rounds, big first in even ones); each round gives the ratio of the
big run's pages/s to the empty run's; the figure is their median. Pages/s, CPU and memory are
measured by ``bench/run_all.py``'s crawl (the farm's access log, the process tree), on the
CPU-bound farm by default (3,000 hosts × 7 pages: there the frontier's cost shows first).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.bench_frontier_scale import Web, exit_on_sigterm, parse_size  # noqa: E402
from bench.run_all import parse_farms, run_crawl  # noqa: E402
from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate  # noqa: E402
from owler.frontier.sqlite import SQLiteFrontier  # noqa: E402

MONTH = 30 * 86400


def build(f, urls: int, keys_per_url: float) -> float:
    """Fill frontier ``f`` with ``urls`` URLs, none due for a month; the seconds it took."""
    web = Web(max(1000, int(urls * keys_per_url)))
    t0 = time.time()
    later = time.time() + MONTH
    while web.urls < urls:
        failed = f.apply_updates([StatusUpdate(u.url, Status.DISCOVERED, u.metadata, later, u.key)
                                  for u in web.batch(5000, new_share=1.0)])
        assert not failed, f"{len(failed)} writes failed"
    f.refresh()
    assert f.due_count(time.time()) == 0
    return time.time() - t0


class OpenSearchCopies:
    """The big frontier as OpenSearch indices on a node of the benchmark's own: built once into
    ``big`` (and ``big_queues``), then for each run cloned (``_clone`` hard-links the segments)
    or, for an empty run, nothing (the crawl creates its indices)."""

    def __init__(self, tmp: Path, port: int, heap: str) -> None:
        from owler.osclient import OSClient
        from owler.run.services import OpenSearchNode

        self.port = port
        self.node = OpenSearchNode(ROOT, tmp / "opensearch", port, heap)
        self.node.up()
        self.client = OSClient({"services.opensearch.port": port})
        self.runs = 0

    def conf(self, index: str) -> dict:
        return {"frontier.backend": "opensearch", "services.opensearch.port": self.port,
                "opensearch.status.index.name": index}

    def build(self, urls: int, keys_per_url: float) -> tuple[float, int]:
        from owler.frontier.opensearch import OpenSearchFrontier

        f = OpenSearchFrontier(self.conf("big"), owner="bench")
        f.round_results = False  # DISCOVERED only: each write dates its queue
        took = build(f, urls, keys_per_url)
        # exact: counts() answers from the writer's snapshot above frontier.stats.exact.max,
        # which may predate the last writes (9,693,002 shown for 10,003,299 held)
        held = f._count({"match_all": {}})
        f.close()
        for index in ("big", "big_queues"):
            self.client.request("PUT", f"/{index}/_settings",
                                {"index.blocks.write": True})  # (what _clone requires)
        return took, held

    def options(self, big: bool) -> list[str]:
        """The crawl's options for a run: a fresh index name, cloned from the big one if ``big``."""
        self.runs += 1
        name = f"run{self.runs}"
        if big:
            for suffix in ("", "_queues"):
                self.client.request("POST", f"/big{suffix}/_clone/{name}{suffix}", {"settings": {
                    "index.blocks.write": None, "index.number_of_replicas": 0}})
            self.client.request("GET", f"/_cluster/health/{name}*",
                                params={"wait_for_status": "green", "timeout": "50s"})
        return [f"{k}={v}" for k, v in self.conf(name).items()]

    def drop(self) -> None:
        name = f"run{self.runs}"
        self.client.request("DELETE", f"/{name},{name}_queues,{name}_leases,{name}_budgets",
                            params={"ignore_unavailable": "true"})

    def close(self) -> None:
        self.client.close()
        self.node.down()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", default="10M")
    ap.add_argument("--keys-per-url", type=float, default=0.05)
    ap.add_argument("--farm", default="3000x6", help="HOSTSxPAGES (bench/run_all.py --farms)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where the frontiers and the runs go")
    # what bench/run_all.py's crawl reads
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("-o", dest="options", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--backend", choices=("sqlite", "opensearch"), default="sqlite")
    ap.add_argument("--heap", default="2g", help="opensearch: the node's heap")
    ap.add_argument("--port", type=int, default=9286, help="opensearch: the node's port")
    args = ap.parse_args()
    exit_on_sigterm()
    farm = parse_farms(args.farm)[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-big-frontier-", dir=args.dir))
    copies = None
    base_options = list(args.options)
    try:
        big = tmp / "big.sqlite"
        if args.backend == "sqlite":
            with SQLiteFrontier(big, {}) as f:
                built = build(f, parse_size(args.urls), args.keys_per_url)
                held = sum(f.counts().values())
            size = f"{big.stat().st_size / 1e9:.1f} GB"
        else:
            copies = OpenSearchCopies(tmp, args.port, args.heap)
            built, held = copies.build(parse_size(args.urls), args.keys_per_url)
            _, stats = copies.client.request("GET", "/big/_stats/store")
            size = f"{stats['_all']['total']['store']['size_in_bytes'] / 1e9:.1f} GB"
        print(f"[big] {held:,} URLs built in {built:.0f} s ({size})", file=sys.stderr, flush=True)
        rounds = []
        for k in range(args.rounds):
            order = ["empty", "big"] if k % 2 == 0 else ["big", "empty"]
            got = {}
            for which in order:
                if copies is not None:
                    args.options = base_options + copies.options(which == "big")
                got[which] = run_crawl("explorative", farm, args, frontier=big if (
                    which == "big" and copies is None) else None)
                if copies is not None:
                    copies.drop()
                print(f"[big] round {k + 1} {which}: {json.dumps(got[which])}", file=sys.stderr,
                      flush=True)
            rounds.append(got)
    finally:
        if copies is not None:
            copies.close()
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = [r["big"]["pages_per_s"] / r["empty"]["pages_per_s"] for r in rounds]
    print(f"Explorative crawl of the {args.farm} farm ({args.backend} frontier), from an empty "
          f"frontier and from one holding "
          f"{held:,} other URLs (none due); {args.rounds} rounds in alternating order\n")
    print("| round | pages | pages/s, empty | pages/s, big | big ÷ empty | CPU ms/page, empty | "
          "CPU ms/page, big | peak MB, empty | peak MB, big |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k, (r, ratio) in enumerate(zip(rounds, ratios), 1):
        e, b = r["empty"], r["big"]
        print(f"| {k} | {e['pages']:,} / {b['pages']:,} | {e['pages_per_s']:,} | "
              f"{b['pages_per_s']:,} | {ratio:.2f} | {e['cpu_ms_per_page_window']} | "
              f"{b['cpu_ms_per_page_window']} | {e['peak_rss_mb']:,} | {b['peak_rss_mb']:,} |")
    print(f"\nbig ÷ empty, median of the rounds: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
