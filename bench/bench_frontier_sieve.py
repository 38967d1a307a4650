"""Would a sieve keep the embedded frontier's writes flat where the write path of today does not?
A probe for issue 45, on the stream and sizes of ``bench/bench_frontier_scale.py``.

    .venv/bin/python bench/bench_frontier_sieve.py [--sizes 100k,10M] [--keys-per-url 0.05]
        [--batch 5000] [--warm 20] [--measured 300] [--floor 200000]
        [--variants plain,oracle,id:32,arrival:32,id:8,plain] [--ids sha|host] [--dir DIR] [--json]

Most of the status updater's stream is DISCOVERED of URLs the frontier knows (85 % of a fetched
page's 60 outlinks), and today each one is a probe of the URL id index at its own random place:
an ``INSERT OR IGNORE`` that finds the id and writes nothing. Once that index outgrows SQLite's
page cache every probe reads a page of its own, and the writes fall to about half their 0.1 M
figure at 10 M URLs (BENCHMARKS.md, the embedded frontier as it grows). A sieve, as large crawlers
keep their set of seen URLs, puts off that test: the DISCOVERED rows are appended to an inbox, and
when the inbox holds enough of them they are merged into the table in one statement, in the order
of their ids, so that consecutive probes fall on the same leaf of the index and a leaf read from
disk serves many of them. Whether that amortizes on this disk, with this stream, is what this
measures before anyone rebuilds the frontier's write path on it.

The model (:class:`SieveFrontier`) is the SQLite frontier of ``owler.frontier.sqlite`` with its
write path changed for DISCOVERED rows only: a batch appends them to ``inbox`` (a rowid table: an
append, no probe) and writes every other status as the frontier does (the upsert, its counters,
its queue's earliest date), in one transaction; when the inbox holds max(``--floor``, the
frontier's URLs ÷ F) rows, one more transaction inserts them with ``INSERT OR IGNORE ... SELECT``
in id order (variant ``id:F``) or in the order they came (``arrival:F``: what one statement
instead of a batch's ``executemany`` gains without the sort), counts the rows it added and lowers
their queues' earliest dates, as the frontier's own write does, and empties the inbox. A URL's
FETCHED written while its DISCOVERED waits in the inbox is an insert; the merge then ignores the
DISCOVERED: the table ends as the frontier's would (a unit test checks it row by row). Not
modelled: sitemap refreshes, tags, blocks; a discovered URL is not served until its merge, and
the monitoring counts leave out the inbox.

``oracle`` bounds every such design, and any other filter of known URLs (a Bloom filter, a
hash of seen URLs, a cache): the frontier as it is, sent the same stream without the known URLs'
DISCOVERED, which are still drawn and counted as written but cost nothing, as a perfect filter
that took no time would leave them out. What it writes is the new URLs and the FETCHED; if its
updates/s fall as much with the size, no filter of known URLs makes the writes flat.

Method: the frontier is filled to each size with pages whose links are all new, the fill's WAL
checkpointed, the file copied. Each variant then starts from the copy and from the same point of
the stream (rewound), writes ``--warm`` batches untimed (a sieve variant merges its inbox after
them, so its window starts empty), then ``--measured`` batches, timed around the frontier's calls
only (the stream's generation is not), the last call followed by a merge of what is left, so every
update's cost is in the window; ``--measured`` should span several merges at the largest size.
The writer thread's user and system CPU per 1,000 updates come from ``getrusage``, and the
merges' share of the window's time is given for the sieve variants. ``plain`` (the frontier as it
is) runs first and last, so that the machine's drift over the run shows.

``--ids host`` runs every variant on another layout of the URL ids: the first 4 bytes of the
sha256 of the URL's host, then the first 12 of the URL's (the frontier's id is the first 16 of the
URL's). A page's internal links (80 % of them) then probe and insert into one host's stretch of the
id index instead of 48 random places, and the stretches of the hosts the stream fetches most stay
in the cache. Both the fill and the windows use it; a frontier built on it would need its every
row's id rewritten (a new schema).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontier_scale import Web, _cpu, exit_on_sigterm, parse_size, restore  # noqa: E402

import owler.frontier.sqlite as frontier_sqlite  # noqa: E402
from owler.constants import Status  # noqa: E402
from owler.frontier import DEFAULT_KEY  # noqa: E402
from owler.frontier.sqlite import (_LOWER_QUEUE, _REFRESH_QUEUE, SQLiteFrontier,  # noqa: E402
                                   _bucket, _Counted, _dump, _stored_date)

INBOX = ("CREATE TABLE IF NOT EXISTS inbox (id BLOB NOT NULL, url TEXT NOT NULL, "
         "next_fetch_date REAL NOT NULL, key TEXT NOT NULL, metadata TEXT NOT NULL, "
         "updated REAL NOT NULL)")
ORDERS = {"id": "ORDER BY id", "arrival": ""}


def host_url_id(url: str) -> bytes:
    """``--ids host``: 4 bytes of the host's sha256, then 12 of the URL's (module docstring)."""
    parts = url.split("/", 3)
    host = parts[2] if len(parts) > 2 else url
    return (hashlib.sha256(host.encode("utf-8", "surrogatepass")).digest()[:4]
            + hashlib.sha256(url.encode("utf-8", "surrogatepass")).digest()[:12])


#: how a URL's id is made (``--ids``)
IDS = {"sha": frontier_sqlite._url_id, "host": host_url_id}


def use_ids(layout: str) -> None:
    """Every id of the frontier (and of the sieve model) made by ``IDS[layout]`` from now on."""
    frontier_sqlite._url_id = IDS[layout]


class SieveFrontier(SQLiteFrontier):
    """The SQLite frontier with its DISCOVERED rows put off to an inbox (module docstring)."""

    def __init__(self, path, conf=None, order: str = "id", fraction: int = 32,
                 floor: int = 200_000) -> None:
        super().__init__(path, conf)
        self.conn.execute(INBOX)
        self.order, self.fraction, self.floor = ORDERS[order], fraction, floor
        self.pending = self.conn.execute("SELECT COUNT(*) FROM inbox").fetchone()[0]
        self.size = sum(self.counts().values())
        self.merges, self.merge_s = 0, 0.0

    def apply_updates(self, updates) -> list[int]:
        if self._checkpointer is None:
            self._start_checkpointer()
        now = time.time()
        inbox, others, rescheduled = [], [], set()
        last_md, last_json = None, ""
        url_id = frontier_sqlite._url_id
        for u in updates:
            key = u.key or DEFAULT_KEY
            nfd = _stored_date(u.next_fetch_date)
            md = u.metadata or {}
            if md is not last_md:
                last_md, last_json = md, _dump(md)
            if u.status == Status.DISCOVERED:
                inbox.append((url_id(u.url), u.url, nfd, key, last_json, now))
            else:
                status = u.status.value if isinstance(u.status, Status) else u.status
                others.append((url_id(u.url), u.url, status, nfd, key, last_json, now, None))
                rescheduled.add(key)
        counted = _Counted()
        with self._write():
            if inbox:
                self.conn.executemany("INSERT INTO inbox VALUES (?, ?, ?, ?, ?, ?)", inbox)
            if others:
                self._write_rows(others, counted)
            counted.write(self.conn)
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in rescheduled])
        self.pending += len(inbox)
        if self.pending >= max(self.floor, self.size // self.fraction):
            self.merge()
        return []

    def merge(self) -> None:
        """The inbox into ``urls`` in one transaction; its rows counted and their queues
        lowered as :meth:`SQLiteFrontier.apply_updates` does for new rows."""
        t0 = time.perf_counter()
        counted = _Counted()
        lowered: dict[str, float] = {}
        with self._write():
            last = self.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM urls").fetchone()[0]
            self.conn.execute(
                "INSERT OR IGNORE INTO urls (id, url, status, next_fetch_date, key, metadata, "
                f"updated, tag) SELECT id, url, '{Status.DISCOVERED.value}', next_fetch_date, "
                f"key, metadata, updated, NULL FROM inbox {self.order}")
            for date, key, n in self.conn.execute(
                    "SELECT MIN(next_fetch_date), key, COUNT(*) FROM urls WHERE rowid > ? "
                    f"GROUP BY {_bucket('next_fetch_date')}, key", (last,)):
                counted.add(Status.DISCOVERED.value, date, key, n)
                lowered[key] = min(date, lowered.get(key, date))
            counted.write(self.conn)
            self.conn.executemany(_LOWER_QUEUE, list(lowered.items()))
            self.conn.execute("DELETE FROM inbox")
        self.size = sum(self.counts().values())
        self.pending = 0
        self.merges += 1
        self.merge_s += time.perf_counter() - t0


#: the frontier as it is, on the whole stream and on the stream without its known URLs' DISCOVERED
PLAIN = ("plain", "oracle")


def parse_variant(variant: str) -> tuple[str, int] | None:
    """``plain`` or ``oracle`` (the frontier as it is: None) or ``ORDER:F`` (a
    :class:`SieveFrontier`'s merge order and fraction); ValueError for anything else."""
    if variant in PLAIN:
        return None
    order, _, fraction = variant.partition(":")
    if order not in ORDERS or not fraction.isdigit() or int(fraction) < 1:
        raise ValueError(f"variant {variant!r}: plain, oracle, or id:F or arrival:F with F ≥ 1")
    return order, int(fraction)


def open_variant(path: Path, variant: str, floor: int) -> SQLiteFrontier:
    parsed = parse_variant(variant)
    if parsed is None:
        return SQLiteFrontier(path)
    return SieveFrontier(path, order=parsed[0], fraction=parsed[1], floor=floor)


def window(fr: SQLiteFrontier, web: Web, batch: int, warm: int, measured: int,
           known: bool = True) -> dict:
    """``warm`` batches untimed, then ``measured`` timed around the frontier's calls (module
    docstring). ``known=False`` (``oracle``): the known URLs' DISCOVERED are left out of each
    batch and counted as written."""
    for _ in range(warm):
        fr.apply_updates(web.batch(batch, known=known))
    sieve = isinstance(fr, SieveFrontier)
    if sieve:
        fr.merge()
        fr.merges, fr.merge_s = 0, 0.0
    wall = user = system = 0.0
    written = 0
    for i in range(measured):
        b = web.batch(batch, known=known)
        c0, t0 = _cpu(), time.perf_counter()
        fr.apply_updates(b)
        if sieve and i == measured - 1:
            fr.merge()
        wall += time.perf_counter() - t0
        c1 = _cpu()
        user, system = user + c1[0] - c0[0], system + c1[1] - c0[1]
        written += web.drawn
    out = {"updates_per_s": round(written / wall), "user_ms": round(user * 1e6 / written, 2),
           "sys_ms": round(system * 1e6 / written, 2)}
    if sieve:
        out.update(merges=fr.merges, merge_share=round(fr.merge_s / wall, 2))
    return out


def model_options(ap: argparse.ArgumentParser, measured: int) -> None:
    """The options every model of the frontier shares (this one, bench_frontier_clustered.py):
    sizes, hosts, batches, the window, the ids, where its files go and how it prints."""
    ap.add_argument("--sizes", default="100k,10M", help="frontier sizes, growing (k, M)")
    ap.add_argument("--keys-per-url", type=float, default=0.05,
                    help="partition keys per URL at the largest size")
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--measured", type=int, default=measured)
    ap.add_argument("--ids", choices=sorted(IDS), default="sha",
                    help="the URL ids' layout (bench/bench_frontier_sieve.py)")
    ap.add_argument("--dir", default=None, help="where to put the files (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")


def growing_sizes(ap: argparse.ArgumentParser, text: str) -> list[int]:
    """``--sizes`` as numbers of URLs, growing, each at least 1 (else the parser's error)."""
    try:
        sizes = [parse_size(s) for s in text.split(",")]
    except ValueError:
        ap.error(f"--sizes: sizes such as 100k,10M, not {text!r}")
    if sizes != sorted(sizes) or sizes[0] < 1:
        ap.error("--sizes: growing, each at least 1")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_options(ap, measured=300)
    ap.add_argument("--floor", type=int, default=200_000, help="the smallest inbox merged")
    ap.add_argument("--variants", default="plain,oracle,id:32,arrival:32,id:8,plain")
    args = ap.parse_args()
    sizes = growing_sizes(ap, args.sizes)
    variants = args.variants.split(",")
    if min(args.batch, args.measured) < 1 or min(args.warm, args.floor) < 0:
        ap.error("--batch and --measured: 1 or more; --warm and --floor: 0 or more")
    try:
        for v in variants:
            parse_variant(v)
    except ValueError as exc:
        ap.error(f"--variants: {exc}")
    use_ids(args.ids)
    exit_on_sigterm()
    tmp = Path(tempfile.mkdtemp(prefix="bench-frontier-sieve-", dir=args.dir))
    web = Web(max(1000, int(sizes[-1] * args.keys_per_url)), clock=time.time() - 86400)
    path, saved = tmp / "frontier.sqlite", tmp / "filled.sqlite"
    results = []
    try:
        for size in sizes:
            fr = SQLiteFrontier(path)
            while web.urls < size:
                fr.apply_updates(web.batch(args.batch, new_share=1.0))
            fr.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            fr.close()
            shutil.copyfile(path, saved)
            state = web.state()
            for v in variants:
                restore(path, saved)
                web.rewind(state)
                f = open_variant(path, v, args.floor)
                try:
                    r = {"urls": size, "variant": v,
                         **window(f, web, args.batch, args.warm, args.measured,
                                  known=v != "oracle")}
                finally:
                    f.close()
                results.append(r)
                print(f"[sieve] {json.dumps(r)}", file=sys.stderr, flush=True)
            restore(path, saved)  # the next size grows from the fill, not from a window
            web.rewind(state)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
        return
    print(sieve_table(results, sizes))


def sieve_table(results: list[dict], sizes: list[int]) -> str:
    """Updates/s of each variant's run at each size, and the largest size's over the smallest."""
    runs: dict[tuple[str, int], list[dict]] = {}
    for r in results:
        runs.setdefault((r["variant"], r["urls"]), []).append(r)
    names = list(dict.fromkeys(r["variant"] for r in results))
    lines = ["| updates/s (user · system ms per 1,000) | " + " | ".join(
        f"{s / 1e6:.3g} M" for s in sizes) + " | largest ÷ smallest |",
        "|---|" + "---:|" * (len(sizes) + 1)]
    for name in names:
        for k in range(len(runs[(name, sizes[0])])):
            row = [runs[(name, s)][k] for s in sizes]
            cells = [f"{r['updates_per_s']:,} ({r['user_ms']} · {r['sys_ms']})"
                     + (f", merges {r['merges']}, {r['merge_share']:.0%} of the time"
                        if "merges" in r else "") for r in row]
            ratio = row[-1]["updates_per_s"] / row[0]["updates_per_s"]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
