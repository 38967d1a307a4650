"""The explorative crawl from a big embedded frontier: the benchmark farm crawled once from an empty
frontier and once from a frontier that already holds ``--urls`` other URLs (not due: rescheduled
a month ahead, on hosts of a Zipf law as in ``bench/bench_frontier_scale.py``), the farm's seeds
injected into each.

    .venv/bin/python bench/bench_big_frontier.py [--urls 10M] [--farm 3000x6] [--rounds 2]
        [--dir DIR]

The big frontier is built once (its build time is printed) and copied for each run. The runs
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

from bench.bench_frontier_scale import Web, parse_size  # noqa: E402
from bench.run_all import parse_farms, run_crawl  # noqa: E402
from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate  # noqa: E402
from owler.frontier.sqlite import SQLiteFrontier  # noqa: E402

MONTH = 30 * 86400


def build(path: Path, urls: int, keys_per_url: float) -> float:
    """A frontier of ``urls`` URLs, none due for a month; the seconds it took."""
    web = Web(max(1000, int(urls * keys_per_url)))
    t0 = time.time()
    later = time.time() + MONTH
    with SQLiteFrontier(path, {}) as f:
        while web.urls < urls:
            f.apply_updates([StatusUpdate(u.url, Status.DISCOVERED, u.metadata, later, u.key)
                             for u in web.batch(5000, later, new_share=1.0)])
        assert f.due_count(time.time()) == 0
    return time.time() - t0


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
    args = ap.parse_args()
    farm = parse_farms(args.farm)[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-big-frontier-", dir=args.dir))
    try:
        big = tmp / "big.sqlite"
        built = build(big, parse_size(args.urls), args.keys_per_url)
        with SQLiteFrontier(big) as f:
            held = sum(f.counts().values())
        print(f"[big] {held:,} URLs built in {built:.0f} s ({big.stat().st_size / 1e9:.1f} GB)",
              file=sys.stderr, flush=True)
        rounds = []
        for k in range(args.rounds):
            order = ["empty", "big"] if k % 2 == 0 else ["big", "empty"]
            got = {}
            for which in order:
                got[which] = run_crawl("explorative", farm, args,
                                       frontier=big if which == "big" else None)
                print(f"[big] round {k + 1} {which}: {json.dumps(got[which])}", file=sys.stderr,
                      flush=True)
            rounds.append(got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = [r["big"]["pages_per_s"] / r["empty"]["pages_per_s"] for r in rounds]
    print(f"Explorative crawl of the {args.farm} farm, from an empty frontier and from one holding "
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
