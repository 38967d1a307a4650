"""Would a table of URLs clustered by queue keep the embedded frontier's costs flat where today's
layout does not? A probe for issue 45, on the stream and sizes of ``bench/bench_frontier_scale.py``.

    .venv/bin/python bench/bench_frontier_clustered.py [--sizes 100k,10M] [--keys-per-url 0.05]
        [--batch 5000] [--warm 20] [--measured 60] [--due-s 3] [--layouts today,clustered,numbered]
        [--ids sha|host] [--dir DIR] [--json]

Today ``urls`` (owler/frontier/sqlite.py) is a rowid table: a row sits where its URL was first
written; the id index finds it for the writes and the key index ``(key, next_fetch_date)`` for the
spout. ``due(now, 1000, 10)`` takes the 1,000 most overdue queues and, for each, its first 10 due
URLs from the key index, then each row from the table by rowid: ten URLs of one queue discovered
at ten moments sit on ten pages of a table that is 2 GB at 10 M URLs. The frontier's URLs served
per second fell to 0.67-0.86 of the 0.1 M figure at 10 M, 0.50 at 100 M (BENCHMARKS.md).

The other layout: ``urls_by_queue``, a ``WITHOUT ROWID`` table whose primary key is ``(key,
next_fetch_date, id)``, so that a queue's due URLs sit side by side and ten come from one or two
pages, and ``url_ids`` (``id`` → key and date, ``WITHOUT ROWID``) for the writes' lookups, in
place of the id index. A new URL is one probe of ``url_ids`` and two inserts, one of them at the
end of its queue's stretch (dated now, after the queue's earlier URLs); a FETCHED moves its row
from its queue's head to its end. ``numbered`` is the same clustered by a 64-bit number of the
queue's key (the first 8 bytes of its sha256) instead of the key's text, which every entry of
``url_ids`` and of the table's key carries otherwise (a host name, about 22 bytes here); two keys of
one number would share a stretch (at 500,000 keys, a chance of about 1 in 10^8). That is a new
schema; this measures what it would buy before anyone builds it.

Both layouts are minimal models, written the same way: the batch's rows prepared as the
frontier's ``_write_rows`` prepares them (a URL overwritten in the batch loses its DISCOVERED rows,
a URL's first DISCOVERED is the one that may be inserted), then one transaction: today's layout
with the frontier's own ``INSERT OR IGNORE`` and upsert statements, the clustered one through two
views whose ``INSTEAD OF`` triggers do the probe and the inserts, moves and updates in SQLite's C
code, one ``executemany`` each. Neither keeps the frontier's counters, queue table, tags or
rounds, the same for both layouts (a third of the frontier's time at 0.1 M; how they grow with
the size is in neither model's ratio). SQLite as the frontier opens it: WAL,
``synchronous=NORMAL``, a 64 MB page cache, checkpoints every 50,000 pages (by the writer itself
here, not a thread).

Method: at each size each layout's file is filled, from the same point of the stream, with pages
whose links are all new; then ``--warm`` batches (untimed) and ``--measured`` batches (timed
around the writes, with the writer's user and system CPU per 1,000 updates from ``getrusage``) of
the crawl's stream (known and new URLs, each FETCHED rescheduled a day later), the same batches for
both; then ``due(clock, 1000, 10)`` for ``--due-s`` seconds: the 1,000 keys with the earliest due
URL (a ``queues`` table written after the window: which queues are due is not what differs) and
each one's first 10 URLs with their metadata parsed. ``--ids host`` makes every URL id of both
layouts begin with its host's hash (bench/bench_frontier_sieve.py), so that a page's internal
links probe and insert into one stretch of the id B-tree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontier_scale import Web, exit_on_sigterm  # noqa: E402
from bench_frontier_sieve import IDS, growing_sizes, model_options  # noqa: E402

from owler.frontier.sqlite import (_INSERT_NEW, _UPSERT, _dump, _split_rows,  # noqa: E402
                                   _stored_date)

TODAY = [
    """CREATE TABLE urls (id BLOB PRIMARY KEY, url TEXT NOT NULL, status TEXT NOT NULL,
        next_fetch_date REAL NOT NULL, key TEXT NOT NULL, metadata TEXT NOT NULL,
        updated REAL NOT NULL, tag TEXT)""",
    "CREATE INDEX urls_key_next_fetch_date ON urls (key, next_fetch_date)",
]
CLUSTERED = [
    """CREATE TABLE urls_by_queue (key TEXT NOT NULL, next_fetch_date REAL NOT NULL,
        id BLOB NOT NULL, url TEXT NOT NULL, status TEXT NOT NULL, metadata TEXT NOT NULL,
        updated REAL NOT NULL, tag TEXT, PRIMARY KEY (key, next_fetch_date, id)) WITHOUT ROWID""",
    """CREATE TABLE url_ids (id BLOB PRIMARY KEY, key TEXT NOT NULL,
        next_fetch_date REAL NOT NULL) WITHOUT ROWID""",
    # the rows a batch offers, in the frontier's column order: a DISCOVERED inserted if unknown
    """CREATE VIEW discover AS SELECT id, url, status, next_fetch_date, key, metadata, updated,
        tag FROM urls_by_queue WHERE 0""",
    """CREATE TRIGGER discover_row INSTEAD OF INSERT ON discover
        WHEN NOT EXISTS (SELECT 1 FROM url_ids WHERE id = new.id) BEGIN
        INSERT INTO url_ids VALUES (new.id, new.key, new.next_fetch_date);
        INSERT INTO urls_by_queue VALUES (new.key, new.next_fetch_date, new.id, new.url,
            new.status, new.metadata, new.updated, new.tag);
        END""",
    # any other status replaces the row: moved from its old place in its queue to its new one
    """CREATE VIEW overwrite AS SELECT id, url, status, next_fetch_date, key, metadata, updated,
        tag FROM urls_by_queue WHERE 0""",
    """CREATE TRIGGER overwrite_row INSTEAD OF INSERT ON overwrite BEGIN
        DELETE FROM urls_by_queue WHERE (key, next_fetch_date, id) =
            (SELECT key, next_fetch_date, id FROM url_ids WHERE id = new.id);
        INSERT INTO url_ids VALUES (new.id, new.key, new.next_fetch_date)
            ON CONFLICT (id) DO UPDATE SET key = excluded.key,
            next_fetch_date = excluded.next_fetch_date;
        INSERT INTO urls_by_queue VALUES (new.key, new.next_fetch_date, new.id, new.url,
            new.status, new.metadata, new.updated, new.tag);
        END""",
]
# the same clustered by a 64-bit number of the queue's key (the first 8 bytes of its sha256) instead
# of the key's text: the id table's entries and the table's key a third of their size
CLUSTERED_NUMBERED = [
    """CREATE TABLE urls_by_queue (queue INTEGER NOT NULL, next_fetch_date REAL NOT NULL,
        id BLOB NOT NULL, key TEXT NOT NULL, url TEXT NOT NULL, status TEXT NOT NULL,
        metadata TEXT NOT NULL, updated REAL NOT NULL, tag TEXT,
        PRIMARY KEY (queue, next_fetch_date, id)) WITHOUT ROWID""",
    """CREATE TABLE url_ids (id BLOB PRIMARY KEY, queue INTEGER NOT NULL,
        next_fetch_date REAL NOT NULL) WITHOUT ROWID""",
    """CREATE VIEW discover AS SELECT id, url, status, next_fetch_date, key, metadata, updated,
        tag, queue FROM urls_by_queue WHERE 0""",
    """CREATE TRIGGER discover_row INSTEAD OF INSERT ON discover
        WHEN NOT EXISTS (SELECT 1 FROM url_ids WHERE id = new.id) BEGIN
        INSERT INTO url_ids VALUES (new.id, new.queue, new.next_fetch_date);
        INSERT INTO urls_by_queue VALUES (new.queue, new.next_fetch_date, new.id, new.key,
            new.url, new.status, new.metadata, new.updated, new.tag);
        END""",
    """CREATE VIEW overwrite AS SELECT id, url, status, next_fetch_date, key, metadata, updated,
        tag, queue FROM urls_by_queue WHERE 0""",
    """CREATE TRIGGER overwrite_row INSTEAD OF INSERT ON overwrite BEGIN
        DELETE FROM urls_by_queue WHERE (queue, next_fetch_date, id) =
            (SELECT queue, next_fetch_date, id FROM url_ids WHERE id = new.id);
        INSERT INTO url_ids VALUES (new.id, new.queue, new.next_fetch_date)
            ON CONFLICT (id) DO UPDATE SET queue = excluded.queue,
            next_fetch_date = excluded.next_fetch_date;
        INSERT INTO urls_by_queue VALUES (new.queue, new.next_fetch_date, new.id, new.key,
            new.url, new.status, new.metadata, new.updated, new.tag);
        END""",
]
QUEUES = [
    "DROP TABLE IF EXISTS queues",
    "CREATE TABLE queues (key TEXT PRIMARY KEY, next_due REAL NOT NULL) WITHOUT ROWID",
]

#: per layout: its schema, its two write statements (DISCOVERED, the rest), its table of URLs, and
#: its query for one queue's due URLs, earliest first
LAYOUTS = {
    "today": (TODAY, _INSERT_NEW, _UPSERT, "urls",
              "SELECT url, metadata, tag FROM urls WHERE key = ? AND next_fetch_date <= ? "
              "ORDER BY next_fetch_date, rowid LIMIT ?"),
    "clustered": (CLUSTERED, "INSERT INTO discover VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  "INSERT INTO overwrite VALUES (?, ?, ?, ?, ?, ?, ?, ?)", "urls_by_queue",
                  "SELECT url, metadata, tag FROM urls_by_queue WHERE key = ? "
                  "AND next_fetch_date <= ? ORDER BY next_fetch_date, id LIMIT ?"),
    "numbered": (CLUSTERED_NUMBERED, "INSERT INTO discover VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 "INSERT INTO overwrite VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", "urls_by_queue",
                 "SELECT url, metadata, tag FROM urls_by_queue WHERE queue = ? "
                 "AND next_fetch_date <= ? ORDER BY next_fetch_date, id LIMIT ?"),
}


def queue_number(key: str) -> int:
    """The ``numbered`` layout's number of a queue: the first 8 bytes of its key's sha256, signed
    (SQLite's integers)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:8],
                          "big", signed=True)


class Layout:
    """One layout's file, written and read as the module docstring says."""

    def __init__(self, path: Path, name: str, ids: str = "sha") -> None:
        self.name, self.url_id = name, IDS[ids]
        schema, self.discover, self.overwrite, self.table, self.queue_urls = LAYOUTS[name]
        fresh = not path.exists()
        self.conn = sqlite3.connect(str(path), isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL").fetchone()
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute(f"PRAGMA cache_size = {-1024 * 64}")
        self.conn.execute("PRAGMA wal_autocheckpoint = 50000")
        if fresh:
            for statement in schema:
                self.conn.execute(statement)

    def write(self, updates) -> None:
        now = time.time()
        rows, last_md, last_json = [], None, ""
        url_id = self.url_id
        numbers: dict[str, int] | None = {} if self.name == "numbered" else None
        for u in updates:
            md = u.metadata or {}
            if md is not last_md:
                last_md, last_json = md, _dump(md)
            row = (url_id(u.url), u.url, u.status.value, _stored_date(u.next_fetch_date), u.key,
                   last_json, now, None)
            if numbers is not None:  # a batch's queues numbered once each
                n = numbers.get(u.key)
                if n is None:
                    n = numbers[u.key] = queue_number(u.key)
                row += (n,)
            rows.append(row)
        first, others, _ = _split_rows(rows)
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(self.discover, first.values())
        self.conn.executemany(self.overwrite, others)
        self.conn.execute("COMMIT")

    def index_queues(self) -> None:
        """``queues`` written from the table: each key's earliest date (not timed)."""
        for statement in QUEUES:
            self.conn.execute(statement)
        self.conn.execute(f"INSERT INTO queues SELECT key, MIN(next_fetch_date) FROM {self.table} "
                          "GROUP BY key")
        self.conn.execute("CREATE INDEX queues_next_due ON queues (next_due)")

    def due(self, now: float, queues: int = 1000, per_queue: int = 10) -> int:
        served = 0
        self.conn.execute("BEGIN")
        keys = [k for (k,) in self.conn.execute(
            "SELECT key FROM queues WHERE next_due <= ? ORDER BY next_due, key LIMIT ?",
            (now, queues))]
        for key in keys:
            queue = queue_number(key) if self.name == "numbered" else key
            for _url, md, _tag in self.conn.execute(self.queue_urls, (queue, now, per_queue)):
                orjson.loads(md)
                served += 1
        self.conn.execute("COMMIT")
        return served

    def sizes_mb(self) -> dict[str, float]:
        """Each B-tree of the layout (SQLite's ``dbstat``), MB."""
        return {name: round(mb, 1) for name, mb in self.conn.execute(
            "SELECT name, SUM(pgsize) / 1e6 FROM dbstat WHERE name NOT IN "
            "('queues', 'queues_next_due', 'sqlite_schema') GROUP BY name ORDER BY name")}

    def close(self) -> None:
        self.conn.close()


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_THREAD)
    return me.ru_utime, me.ru_stime


def window(layout: Layout, web: Web, batch: int, warm: int, measured: int,
           due_s: float) -> dict:
    for _ in range(warm):
        layout.write(web.batch(batch))
    wall = user = system = 0.0
    written = 0
    for _ in range(measured):
        b = web.batch(batch)
        c0, t0 = _cpu(), time.perf_counter()
        layout.write(b)
        wall += time.perf_counter() - t0
        c1 = _cpu()
        user, system = user + c1[0] - c0[0], system + c1[1] - c0[1]
        written += len(b)
    layout.index_queues()
    now = web.clock
    served = calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < due_s or calls < 3:
        served += layout.due(now)
        calls += 1
    took = time.perf_counter() - t0
    per_k = 1e6 / max(written, 1)
    return {"updates_per_s": round(written / wall) if wall else 0,
            "user_ms": round(user * per_k, 2), "sys_ms": round(system * per_k, 2),
            "served_per_s": round(served / took), "due_ms": round(took / calls * 1000, 1),
            "mb": layout.sizes_mb()}


def table(results: list[dict], sizes: list[int]) -> str:
    by = {(r["layout"], r["size"]): r for r in results}
    names = list(dict.fromkeys(r["layout"] for r in results))
    lines = ["| layout | figure | " + " | ".join(f"{s / 1e6:.3g} M" for s in sizes)
             + " | largest ÷ smallest |", "|---|---|" + "---:|" * (len(sizes) + 1)]
    for name in names:
        row = [by[(name, s)] for s in sizes]
        lines.append(f"| {name} | updates/s (user · system ms per 1,000) | " + " | ".join(
            f"{r['updates_per_s']:,} ({r['user_ms']} · {r['sys_ms']})" for r in row)
            + f" | {row[-1]['updates_per_s'] / row[0]['updates_per_s']:.2f} |")
        lines.append(f"| {name} | URLs served/s by due() (ms a call) | " + " | ".join(
            f"{r['served_per_s']:,} ({r['due_ms']})" for r in row)
            + f" | {row[-1]['served_per_s'] / row[0]['served_per_s']:.2f} |")
        lines.append(f"| {name} | MB a B-tree | " + " | ".join(
            " · ".join(f"{k} {v:,}" for k, v in r["mb"].items()) for r in row) + " | — |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_options(ap, measured=60)
    ap.add_argument("--due-s", type=float, default=3.0, help="seconds of due() per layout")
    ap.add_argument("--layouts", default="today,clustered,numbered")
    args = ap.parse_args()
    sizes = growing_sizes(ap, args.sizes)
    if min(args.batch, args.measured) < 1 or args.warm < 0 or args.due_s <= 0:
        ap.error("--batch, --measured: 1 or more; --warm: 0 or more; --due-s > 0")
    names = args.layouts.split(",")
    if not names or any(n not in LAYOUTS for n in names):
        ap.error(f"--layouts: some of {', '.join(LAYOUTS)}")
    exit_on_sigterm()
    tmp = Path(tempfile.mkdtemp(prefix="bench-frontier-clustered-", dir=args.dir))
    web = Web(max(1000, int(sizes[-1] * args.keys_per_url)), clock=time.time() - 86400)
    results = []
    try:
        for size in sizes:
            start = web.state()
            for name in names:
                web.rewind(start)
                layout = Layout(tmp / f"{name}.sqlite", name, args.ids)
                try:
                    while web.urls < size:
                        layout.write(web.batch(args.batch, new_share=1.0))
                    layout.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    r = {"layout": name, "ids": args.ids, "size": size,
                         **window(layout, web, args.batch, args.warm, args.measured, args.due_s)}
                finally:
                    layout.close()
                results.append(r)
                print(f"[clustered] {json.dumps(r)}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
        return
    print(table(results, sizes))


if __name__ == "__main__":
    main()
