"""Benchmark of the SQLite frontier: status updates/s and URLs served/s by ``due()``.

    .venv/bin/python bench/bench_frontier.py [--rows 500000] [--keys 10000] [--batch N]

1. Writes: batches of ``--batch`` updates (default: the status updater's, ``status.updater.batch.size``
   of ``resources/crawler-conf.yaml``) into a fresh database until it holds ``--rows`` URLs.
   Each batch is 80 % DISCOVERED (70 % new URLs, 10 % already known: ignored) and 20 % FETCHED
   (overwrites of known URLs, rescheduled a day later), as a status updater sees them.
2. Reads: ``due(now, max_buckets=1000, per_bucket=10)`` as the spout calls it, against the same
   database, compared with the alternative design: one query ranking every due row with
   ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY next_fetch_date)``.

Prints a markdown table (goal: ≥ 50,000 updates/s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from owler import conf as C  # noqa: E402
from owler.conf import load_conf  # noqa: E402
from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate  # noqa: E402
from owler.frontier.sqlite import SQLiteFrontier  # noqa: E402

WINDOW_SQL = """
WITH d AS (
  SELECT url, metadata, key, next_fetch_date AS nfd,
         ROW_NUMBER() OVER (PARTITION BY key ORDER BY next_fetch_date, url) AS rn
  FROM urls WHERE next_fetch_date <= ?),
k AS (SELECT key, nfd FROM d WHERE rn = 1 ORDER BY nfd, key LIMIT ?)
SELECT d.url, d.metadata, d.key FROM d JOIN k USING (key) WHERE d.rn <= ? ORDER BY d.rn, k.nfd, k.key
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--batch", type=int,
                    default=C.get_int(load_conf(), "status.updater.batch.size", 5000))
    ap.add_argument("--synchronous", default="NORMAL")
    ap.add_argument("--wal-pages", type=int, default=50000,
                    help="frontier.sqlite.wal.autocheckpoint (pages between checkpoints)")
    ap.add_argument("--dir", default=None, help="where to put the database (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the headline figures as JSON")
    args = ap.parse_args()

    rnd = random.Random(42)
    tmp = tempfile.mkdtemp(prefix="bench-frontier-", dir=args.dir)
    path = Path(tmp) / "frontier.sqlite"
    fr = SQLiteFrontier(path, {"frontier.sqlite.synchronous": args.synchronous,
                              "frontier.sqlite.wal.autocheckpoint": args.wal_pages})
    now = time.time()
    md = {"depth": ["2"], "url.path": ["https://www.example.org/parent/page.html"]}
    known: list[str] = []
    n_new = 0
    written = 0
    t_write = 0.0
    last_rate = 0.0
    while n_new < args.rows:
        batch = []
        for _ in range(args.batch):
            r = rnd.random()
            if r < 0.7 or len(known) < 1000:
                k = rnd.randrange(args.keys)
                url = f"https://host{k}.example{k % 97}.com/path/{n_new}/page.html?q={n_new}"
                known.append(url)
                n_new += 1
                batch.append(StatusUpdate(url, Status.DISCOVERED, md, now - rnd.random() * 3600,
                                          f"example{k}.com"))
            elif r < 0.8:
                url = known[rnd.randrange(len(known))]
                k = url.split("/")[2].split(".")[0][4:]
                batch.append(StatusUpdate(url, Status.DISCOVERED, md, now, f"example{k}.com"))
            else:
                url = known[rnd.randrange(len(known))]
                k = url.split("/")[2].split(".")[0][4:]
                batch.append(StatusUpdate(url, Status.FETCHED, {"signature": ["abc"], **md},
                                          now + 86400, f"example{k}.com"))
        t0 = time.perf_counter()
        fr.apply_updates(batch)
        dt = time.perf_counter() - t0
        t_write += dt
        written += len(batch)
        if n_new >= args.rows - args.batch:
            last_rate = len(batch) / dt
    rows = sum(fr.counts().values())
    size_mb = path.stat().st_size / 1e6
    wal = path.with_name(path.name + "-wal")
    wal_mb = wal.stat().st_size / 1e6 if wal.exists() else 0.0

    # reads
    due_now = fr.due_count(now)
    queues_due = fr.queue_count(now)
    served = 0
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < 3.0 or calls < 3:
        served += len(fr.due(now, 1000, 10))
        calls += 1
    t_due = (time.perf_counter() - t0) / calls
    excl = {u for u, _, _ in fr.due(now, 500, 1)}
    t0 = time.perf_counter()
    n_ex = len(fr.due(now, 1000, 10, exclude=excl))
    t_due_ex = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_win = len(fr.conn.execute(WINDOW_SQL, (now, 1000, 10)).fetchall())
    t_win = time.perf_counter() - t0

    # rounds (frontier.queue.round.delay): each call begins a round on the queues it serves, so
    # the next call serves the next 1,000 queues; the same work per call as above plus the rounds
    # written under the write lock
    fr.round_delay = 300.0
    t0 = time.perf_counter()
    r_calls = r_served = 0
    while r_calls < max(1, min(10, queues_due // 1000)):
        r_served += len(fr.due(now, 1000, 10))
        r_calls += 1
    t_rounds = (time.perf_counter() - t0) / r_calls
    fr.round_delay = 0.0

    t0 = time.perf_counter()
    fr.counts()
    t_counts = time.perf_counter() - t0
    t0 = time.perf_counter()
    fr.due_count(now)
    t_due_count = time.perf_counter() - t0
    fr.close()

    if args.json:
        print(json.dumps({"rows": rows, "batch": args.batch, "updates_per_s": round(written / t_write),
                          "served_per_s": round(served / (t_due * calls))}))
        shutil.rmtree(tmp, ignore_errors=True)
        return
    print(f"SQLite frontier, {rows:,} URLs over {args.keys:,} keys "
          f"({due_now:,} due in {queues_due:,} queues), synchronous={args.synchronous}, "
          f"wal.autocheckpoint={args.wal_pages}, DB {size_mb:.0f} MB + WAL {wal_mb:.0f} MB, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print("| measure | value |")
    print("|---|---|")
    print(f"| status updates/s, whole fill ({written:,} updates, batches of {args.batch}) "
          f"| {written / t_write:,.0f} |")
    print(f"| status updates/s, last batch (at {rows:,} rows) | {last_rate:,.0f} |")
    print(f"| due(1000 buckets, 10 per bucket): ms per call | {t_due * 1000:.1f} |")
    print(f"| due(): URLs served/s | {served / (t_due * calls):,.0f} |")
    print(f"| due() with 500 URLs excluded: ms ({n_ex} URLs) | {t_due_ex * 1000:.1f} |")
    print(f"| alternative: window-function query, ms ({n_win} URLs) | {t_win * 1000:.1f} |")
    print(f"| due() beginning rounds (frontier.queue.round.delay): ms per call "
          f"({r_served / r_calls:,.0f} URLs, {r_calls} calls) | {t_rounds * 1000:.1f} |")
    print(f"| counts(): ms | {t_counts * 1000:.1f} |")
    print(f"| due_count(): ms | {t_due_count * 1000:.1f} |")
    for f in Path(tmp).iterdir():
        f.unlink()
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
