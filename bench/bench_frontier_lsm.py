"""Would a log-structured store keep the embedded frontier's cost flat where SQLite does not?
A probe for issue 45, run beside ``bench/bench_frontier_scale.py`` (the SQLite frontier itself),
on the same stream and the same sizes.

    .venv/bin/python bench/bench_frontier_lsm.py [--sizes 100k,1M,10M] [--keys-per-url 0.05]
        [--batch N] [--measured 60] [--cache-mb 64] [--dir DIR] [--json]

The SQLite frontier's writes and ``due()`` on the work disk fall to 0.47-0.65 of their 0.1 M figure
at 10 M URLs, while in memory they keep 0.79 and 1.11 (BENCHMARKS.md, the embedded frontier as it
grows): the B-trees' pages, written back in place at random across a file that outgrows the
page cache's dirty limits, are what grows. An LSM tree writes sorted runs sequentially and merges
them in the background; whether that holds on this disk, with this stream, is what this measures
before anyone rewrites the frontier on it.

The model is the SQLite frontier's write path and the spout's read, on RocksDB (the ``rocksdict``
binding, bench/requirements.txt) with four column families:

- ``urls``: URL id (8 bytes of BLAKE2b of the URL) → the record (status, next fetch date, key,
  metadata as JSON), with a Bloom filter, as the frontier's ``urls`` table;
- ``index``: key, 0, next fetch date (big-endian double), id → nothing: a queue's URLs in date
  order, as ``urls_key_next_fetch_date``;
- ``queues``: key → its earliest next fetch date, as the ``queues`` table, and ``order``: date,
  key → nothing, as ``queues_next_due``.

A batch of status updates (the stream of ``bench_frontier_scale.Web``: fetched pages and their 60
outlinks, 15 % of them new) reads the records it touches and the queues it may lower in two
multi-gets (the read-before-write the SQLite frontier does too: a DISCOVERED of a known URL is
ignored, a FETCHED moves the URL's index entry), then writes everything in one ``WriteBatch``
(write-ahead log on, not synced per batch, as ``synchronous=NORMAL`` in WAL mode). ``due(now,
1000, 10)`` walks ``order`` to the first 1,000 due queues, seeks each queue's first ten due URLs
in ``index`` and reads their records (the spout needs URL and metadata).

Not modelled: leases and rounds, tags, budgets, the counters the SQLite frontier keeps for its
monitoring reads (a few more keys per batch), crash recovery. So the absolute figures are an upper
bound for a frontier built on it; the ratio of the largest size to the smallest is the question.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontier_scale import Web, parse_size, table  # noqa: E402

from owler.constants import Status  # noqa: E402

try:
    from rocksdict import (BlockBasedOptions, Cache, Options, Rdict, ReadOptions,  # noqa: E402
                           WriteBatch, WriteOptions)
except ImportError:  # pragma: no cover - a clear message instead of a trace
    sys.exit("bench_frontier_lsm.py needs rocksdict: .venv/bin/pip install -r bench/requirements.txt")

_DATE = struct.Struct(">d")
FETCHED = Status.FETCHED.value
DISCOVERED = Status.DISCOVERED.value


def url_id(url: str) -> bytes:
    return hashlib.blake2b(url.encode(), digest_size=8).digest()


class LsmFrontier:
    """The write path and ``due()`` of the module docstring on RocksDB."""

    def __init__(self, path: Path, cache_mb: int) -> None:
        cache = Cache(cache_mb * 1024 * 1024)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        opts.set_max_background_jobs(2)
        opts.set_write_buffer_size(64 * 1024 * 1024)
        opts.set_level_compaction_dynamic_level_bytes(True)
        table = BlockBasedOptions()
        table.set_block_cache(cache)
        table.set_bloom_filter(10, False)
        table.set_cache_index_and_filter_blocks(True)
        opts.set_block_based_table_factory(table)
        plain = Options(raw_mode=True)
        plain.set_write_buffer_size(32 * 1024 * 1024)
        plain.set_level_compaction_dynamic_level_bytes(True)
        ptable = BlockBasedOptions()
        ptable.set_block_cache(cache)
        plain.set_block_based_table_factory(ptable)
        self.db = Rdict(str(path), opts, column_families={"urls": opts, "index": plain,
                                                          "queues": opts, "order": plain})
        self.urls = self.db.get_column_family("urls")
        self.index = self.db.get_column_family("index")
        self.queues = self.db.get_column_family("queues")
        self.order = self.db.get_column_family("order")
        self.h = {name: self.db.get_column_family_handle(name)
                  for name in ("urls", "index", "queues", "order")}
        self.wopts = WriteOptions()
        self.wopts.sync = False
        self.path = path

    def apply_updates(self, updates) -> None:
        # the last FETCHED of a URL wins; a DISCOVERED only where nothing else is known
        todo: dict[bytes, object] = {}
        for u in updates:
            uid = url_id(u.url)
            if u.status == FETCHED or uid not in todo:
                todo[uid] = u
        ids = list(todo)
        known = self.urls.get(ids)
        wb = WriteBatch(raw_mode=True)
        earliest: dict[str, float] = {}
        for uid, old in zip(ids, known):
            u = todo[uid]
            status = u.status.value if hasattr(u.status, "value") else u.status
            if old is not None:
                if status == DISCOVERED:
                    continue  # a known URL found again: nothing to write
                prev = orjson.loads(old)
                wb.delete(prev[2].encode() + b"\0" + _DATE.pack(prev[1]) + uid, self.h["index"])
            date = u.next_fetch_date
            key = u.key
            wb.put(uid, orjson.dumps([u.url, date, key, status, u.metadata]), self.h["urls"])
            wb.put(key.encode() + b"\0" + _DATE.pack(date) + uid, b"", self.h["index"])
            if key not in earliest or date < earliest[key]:
                earliest[key] = date
        keys = list(earliest)
        current = self.queues.get([k.encode() for k in keys])
        for key, cur in zip(keys, current):
            date = earliest[key]
            if cur is not None:
                cur_date = _DATE.unpack(cur)[0]
                if cur_date <= date:
                    continue
                wb.delete(cur + key.encode(), self.h["order"])
            wb.put(key.encode(), _DATE.pack(date), self.h["queues"])
            wb.put(_DATE.pack(date) + key.encode(), b"", self.h["order"])
        self.db.write(wb, self.wopts)

    def due(self, now: float, queues: int, per_queue: int) -> list:
        limit = _DATE.pack(now)
        picked: list[bytes] = []
        it = self.order.iter(ReadOptions())
        it.seek_to_first()
        while it.valid() and len(picked) < queues:
            k = it.key()
            if k[:8] > limit:
                break
            picked.append(k[8:])
            it.next()
        del it
        ids: list[bytes] = []
        ix = self.index.iter(ReadOptions())
        for key in picked:
            prefix = key + b"\0"
            ix.seek(prefix)
            n = 0
            while ix.valid() and n < per_queue:
                k = ix.key()
                if not k.startswith(prefix) or k[len(prefix):len(prefix) + 8] > limit:
                    break
                ids.append(k[-8:])
                n += 1
                ix.next()
        del ix
        return [orjson.loads(v) for v in self.urls.get(ids) if v is not None]

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())

    def close(self) -> None:
        self.db.close()


def measure(fr: LsmFrontier, web: Web, batch: int, now: float, measured: int) -> dict:
    t_write = 0.0
    written = 0
    for _ in range(measured):
        b = web.batch(batch, now)
        t0 = time.perf_counter()
        fr.apply_updates(b)
        t_write += time.perf_counter() - t0
        written += len(b)
    served = calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 3.0 or calls < 3:
        served += len(fr.due(now, 1000, 10))
        calls += 1
    t_due = time.perf_counter() - t0
    return {"urls": web.urls, "updates_per_s": round(written / t_write),
            "served_per_s": round(served / t_due), "due_ms": round(t_due / calls * 1000, 1),
            "disk_bytes_per_url": round(fr.disk_bytes() / web.urls),
            "keys": sum(1 for n in web.count if n),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100k,1M,10M", help="frontier sizes, growing (k, M)")
    ap.add_argument("--keys-per-url", type=float, default=0.05,
                    help="hosts per URL at the largest size (as bench_frontier_scale.py)")
    ap.add_argument("--batch", type=int, default=5000, help="updates per batch")
    ap.add_argument("--measured", type=int, default=60, help="batches timed at each size")
    ap.add_argument("--cache-mb", type=int, default=64,
                    help="block cache (as frontier.sqlite.cache.mb, 64)")
    ap.add_argument("--dir", default=None, help="where to put the store (default: a temp dir)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes):
        ap.error("--sizes must grow")
    web = Web(max(1000, int(sizes[-1] * args.keys_per_url)))
    tmp = Path(tempfile.mkdtemp(prefix="bench-frontier-lsm-", dir=args.dir))
    now = time.time()
    results = []
    try:
        fr = LsmFrontier(tmp / "frontier.rocksdb", args.cache_mb)
        for size in sizes:
            t0 = time.perf_counter()
            while web.urls < size - args.measured * args.batch * web.new_share:
                fr.apply_updates(web.batch(args.batch, now, new_share=1.0))
            fill = time.perf_counter() - t0
            r = measure(fr, web, args.batch, now, args.measured)
            r["fill_s"] = round(fill)
            results.append(r)
            print(f"[lsm] {json.dumps(r)}", file=sys.stderr, flush=True)
        fr.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps({"sizes": results}))
        return
    print(f"RocksDB model of the frontier, batches of {args.batch}, Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print(table(results, f"RocksDB model, {args.cache_mb} MB block cache"))
    print("fill s: " + " · ".join(str(r["fill_s"]) for r in results))


if __name__ == "__main__":
    main()
