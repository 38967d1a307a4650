"""Re-crawl benchmark: the explorative topology (real Storm, local mode, embedded frontier, default
configuration) crawls the benchmark farm once, then again once every page is due, with the farm
in its second pass (``bench/farm.py``, ``GET /__pass2``): a quarter of the pages send an ETag and
answer 304 to it, a quarter are unchanged without validators, half have changed.

For each pass: pages/s (the farm's first to last page), bytes the farm sent, WARC bytes written,
records by type (response / revisit), CPU ms per page of the whole process tree over the crawl
window, and the ratios pass 2 / pass 1.

Usage: .venv/bin/python bench/bench_recrawl.py [--hosts 200] [--pages 20] [--delay 1.0]
       [--interval 1.5] [-o KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.farm import BenchFarm, host_addr  # noqa: E402
from bench.measure import TreeSampler  # noqa: E402
from bench.run_all import crawl_command  # noqa: E402


def farm_get(port: int, path: str) -> dict | str:
    with urllib.request.urlopen(f"http://{host_addr(0)}:{port}{path}", timeout=10) as resp:
        body = resp.read().decode()
    return json.loads(body) if path == "/__stats" else body


def warc_counts(files: list[Path]) -> tuple[int, Counter]:
    from warcio.archiveiterator import ArchiveIterator

    kinds: Counter = Counter()
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    profile = rec.rec_headers.get_header("WARC-Profile") or ""
                    kinds[rec.rec_type + ("/" + profile.rsplit("/", 1)[-1] if profile else "")] += 1
    return sum(p.stat().st_size for p in files), kinds


def one_pass(cmd: list[str], work: Path, port: int, name: str) -> dict:
    seen = set((work / "warc").glob("*.warc.gz"))
    log = open(work / f"{name}.log", "wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    rc = proc.wait()
    sampler.stop()
    if rc != 0:
        raise RuntimeError(f"{name} exited with {rc}: "
                           f"{(work / f'{name}.log').read_text(errors='replace')[-2000:]}")
    stats = farm_get(port, "/__stats")
    files = sorted(set((work / "warc").glob("*.warc.gz")) - seen)
    warc_bytes, kinds = warc_counts(files)
    window = max(stats["last_page"] - stats["first_page"], 1e-9)
    cpu = sampler.cpu_at(stats["last_page"]) - sampler.cpu_at(stats["first_page"])
    return {"pass": name, "pages": stats["pages"], "pages_per_s": round(stats["pages"] / window, 1),
            "farm_mb_sent": round(stats["bytes"] / 1e6, 1), "warc_mb": round(warc_bytes / 1e6, 1),
            "records": dict(kinds), "cpu_ms_per_page": round(1000 * cpu / max(stats["pages"], 1), 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--interval", type=float, default=1.5,
                    help="fetchInterval.default in minutes: longer than the first pass")
    ap.add_argument("-o", "--option", dest="options", action="append", default=[])
    args = ap.parse_args()
    args.options = [f"fetchInterval.default={args.interval}", *args.options]
    work = Path(tempfile.mkdtemp(prefix="bench-recrawl-"))
    with BenchFarm(args.hosts, args.pages, args.seed, work / "farm.json") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        cmd = crawl_command("explorative", work, seeds, args)
        first = one_pass(cmd, work, farm.port, "first")
        with sqlite3.connect(work / "frontier.sqlite") as db:
            (due,) = db.execute("SELECT max(next_fetch_date) FROM urls WHERE status='FETCHED'"
                                ).fetchone()
        farm_get(farm.port, "/__pass2")
        time.sleep(max(0.0, due - time.time()) + 1)
        second = one_pass(cmd, work, farm.port, "second")
        farm.stop()
    ratios = {k: round(second[k] / first[k], 3) for k in
              ("pages_per_s", "farm_mb_sent", "warc_mb", "cpu_ms_per_page") if first[k]}
    print(json.dumps({"hosts": args.hosts, "pages_per_host": args.pages + 1, "delay": args.delay,
                      "first": first, "second": second, "second_over_first": ratios}, indent=1))


if __name__ == "__main__":
    main()
