"""How the frontier's costs grow with its size: one frontier filled step by step to each of
``--sizes`` URLs, every figure measured again at each size; the embedded SQLite frontier, or
(``--backend opensearch``) the OpenSearch one on nodes of its own.

    .venv/bin/python bench/bench_frontier_scale.py [--sizes 100k,1M,10M] [--keys-per-url 0.05]
        [--batch N] [--pages-per-s 480] [--warm 20] [--measured 60] [--repeat 1] [--pages N]
        [--dir DIR]
        [--json] [-o KEY=VALUE ...]
        [--backend opensearch [--nodes 1] [--shards 1] [--replicas 0] [--heap 2g] [--port 9284]]

The web's shape, not a closed farm's: partition keys (hosts) drawn from a Zipf law (exponent 1)
over ``size × --keys-per-url`` keys at the largest size (500,000 hosts for 10 M URLs), so that a few
hosts hold a large share (the first about 7 %) and most hold a handful; keys and URLs are drawn from
a seeded generator. The status updater's stream is made of fetched pages, as a crawl's is: a
FETCHED (rescheduled a day later) followed by its ``--links`` outlinks as DISCOVERED, ``--internal``
of them to the page's own host, each new with probability ``--new-share`` (OWLer discovered nine
new URLs per page fetched; the default, 0.15 of 60 links, is that) and otherwise a known URL, which
the frontier ignores. The frontier is filled to each size with pages whose links are all new.
The stream has a clock, as a crawl's status updater has: each fetched page moves it on by
``1 / --pages-per-s`` seconds, its DISCOVERED are dated by it (the scheduler's date for DISCOVERED
is now: owler/scheduler.py) and its FETCHED a day after it; the reads ask for what is due at the
clock's time. (Before, every DISCOVERED was dated at random within the hour before one fixed time,
so a host's new URLs fell all over its range of the key index instead of after its last ones:
docs/benchmarks-history.md, issue 45, eighth session.)

At each size:

- **status updates/s**: ``--measured`` batches (60) of ``--batch`` updates
  (``status.updater.batch.size``) of that stream, timed on their own, after ``--warm`` batches (20)
  written untimed, so that the window finds SQLite's page cache as a status updater that has run a
  while has it (a window that began with the frontier just opened also paid for filling its cache:
  docs/benchmarks-history.md, issue 45, ninth session), the fill's WAL checkpointed before them
  (SQLite: no size pays the checkpoints of its fill's new URLs), and long enough to span several of
  the checkpoint thread's cycles and the WAL's growth to its steady size (the 20 batches of the
  first version took 1.6 s at 0.1 M: docs/benchmarks-history.md, issue 45, fifth session); where the
  writes' time goes, from ``getrusage``: the writer thread's user and system CPU per 1,000 updates,
  the rest of their wall time (waiting: for the disk, for the kernel's writeback of dirty pages, for
  a lock), the other threads' CPU meanwhile (the checkpoint thread), and the blocks the writer read
  from disk. With ``--repeat R`` (SQLite) the window is measured R times over the same database and
  the same stream: the database is copied (and synced) before the first window and put back before
  each of the others, the stream's generator rewound, and each rate is the median of the R windows
  (the spread is printed beside it). A single window is a few seconds at the smallest size, and the
  machine's own drift between two such windows reaches a third (117,815 against 75,917 updates/s for
  the same stream at 0.1 M, one run after the other, docs/benchmarks-history.md), which a ratio to
  that size would carry whole;
- **URLs served/s**: ``due(clock, 1000 queues, 10 per queue)`` as the spout calls it, for 3 s;
- **monitoring reads**, ms each (median of 5): ``counts()`` (``owler status``, the dashboard's
  recorder), ``due_count()`` (every progress line of ``owler run``), ``queue_count()`` with and
  without ``now``, ``most_delayed()``;
- **pages a batch writes** (SQLite, ``--pages N``): after the rest, N more batches written with
  no checkpoint at all (neither the checkpoint thread nor SQLite's own), so that the WAL keeps
  every page each commit wrote; each page is then named by the table or index it belongs to
  (SQLite's ``dbstat``), per batch: what a batch's commit costs, and which B-tree's share grows
  with the size (the map of every page to its B-tree counts in this process's peak RSS, so the
  memory row is not comparable with a run without ``--pages``);
- **disk**: the database's pages per URL (``page_count``, those not yet checkpointed from the
  WAL included) and the WAL file (``frontier.sqlite.wal.autocheckpoint`` bounds it), and the
  process's **peak RSS** (this process: the frontier's page cache, ``frontier.sqlite.cache.mb``,
  and the benchmark's own tables of hosts, 12 bytes a host: their weights and URL counts).

On OpenSearch the writes go as the status updater's frontier sends them (``round_results``: the
FETCHED are the spout's rounds' results; ``carry_queues``: each bulk lowers the queues of the one
before, the window's last its own alone, timed), one bulk after the other; the reads come after a
refresh;
``due()`` leases its queues and each is released as the spout releases it (paused after its
round); each monitoring read is timed after one more write made searchable, as in a crawl (with
nothing new, the node answers a search again from its request cache: 8-16 ms whatever the
size). Above ``frontier.stats.exact.max`` URLs (100,000) those reads answer from the snapshot of
the figures the writer renews every ``frontier.stats.interval`` (owler.frontier.opensearch_stats);
the table gives what one computation of it costs at each size. Disk is the status index's store
(primaries and replicas) per URL, memory the nodes' RSS.

Prints a markdown table with the ratio of each figure at the largest size to the smallest.
"""

from __future__ import annotations

import argparse
import bisect
import copy
import itertools
import json
import os
import random
import resource
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import time
from array import array
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from owler import conf as C  # noqa: E402
from owler.conf import load_conf  # noqa: E402
from owler.constants import Status  # noqa: E402
from owler.frontier import StatusUpdate  # noqa: E402
from owler.frontier.sqlite import CHECKPOINT_INTERVAL_KEY, SQLiteFrontier  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

MD = {"depth": ["2"], "url.path": ["https://www.example.org/parent/page.html"]}
FETCHED_MD = {"signature": ["abc"], **MD}


def parse_size(text: str) -> int:
    text = text.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


class Web:
    """Hosts with a Zipf law of sizes, and the status updater's stream of fetched pages.

    URL ``j`` of host ``k`` is ``https://h<k>.example<k % 97>.com/p/<j>/page.html``; a host's URLs
    are numbered as they are discovered (``count[k]``), so a known URL is drawn back by number and
    nothing per URL is kept in memory."""

    def __init__(self, keys: int, seed: int = 42, links: int = 60, internal: float = 0.8,
                 new_share: float = 0.15, clock: float = 0.0, pages_per_s: float = 480.0) -> None:
        self.rnd = random.Random(seed)
        self.clock = clock  # the stream's time: a fetched page moves it on by 1 / pages_per_s
        self.tick = 1.0 / pages_per_s
        # the Zipf law's cumulative weights: 8 bytes a host (a list of floats took 32, 160 MB of
        # the process's peak RSS at 5 M hosts, counted as the frontier's memory)
        self.cum = array("d", itertools.accumulate(1.0 / (i + 1) for i in range(keys)))
        self.total = self.cum[-1]
        self.count = array("I", bytes(4 * keys))
        self.urls = 0
        self.drawn = 0  # updates drawn by the last batch()
        self.links, self.internal, self.new_share = links, internal, new_share

    def state(self) -> tuple:
        """Where the stream is (to draw the same batches again: :meth:`rewind`)."""
        return self.rnd.getstate(), copy.copy(self.count), self.urls, self.clock

    def rewind(self, state: tuple) -> None:
        rnd, count, self.urls, self.clock = state
        self.rnd.setstate(rnd)
        self.count = copy.copy(count)

    def host(self) -> int:
        return min(bisect.bisect_left(self.cum, self.rnd.random() * self.total), len(self.cum) - 1)

    @staticmethod
    def url(k: int, j: int) -> tuple[str, str]:
        key = f"h{k}.example{k % 97}.com"
        return f"https://{key}/p/{j}/page.html", key

    def link(self, k: int, new: bool) -> tuple[str, str, bool]:
        """A link to host ``k``: a new URL, or (when the host has any) a known one."""
        if new or not self.count[k]:
            j = self.count[k]
            self.count[k] += 1
            self.urls += 1
            return (*self.url(k, j), True)
        return (*self.url(k, self.rnd.randrange(self.count[k])), False)

    def batch(self, size: int, new_share: float | None = None,
              known: bool = True) -> list[StatusUpdate]:
        """Fetched pages until ``size`` updates: each a FETCHED (rescheduled a day after the
        clock) and its ``links`` outlinks as DISCOVERED at the clock's time, ``internal`` of them to
        its own host, each a new URL with probability ``new_share`` (else a known one, which the
        frontier ignores). ``known=False``: the DISCOVERED of known URLs are drawn as ever (the
        stream stays the same) but left out of the list, as a perfect filter in front of the
        frontier would leave them out; they count toward ``size``, and :attr:`drawn` is the
        number of updates drawn, the list's length with them."""
        share = self.new_share if new_share is None else new_share
        rnd = self.rnd
        out: list[StatusUpdate] = []
        drawn = 0
        while drawn < size:
            self.clock += self.tick
            now = self.clock
            k = self.host()
            url, key, _ = self.link(k, False)
            out.append(StatusUpdate(url, Status.FETCHED, FETCHED_MD, now + 86400, key))
            for _ in range(self.links):
                target = k if rnd.random() < self.internal else self.host()
                url, key, new = self.link(target, rnd.random() < share)
                if new or known:
                    out.append(StatusUpdate(url, Status.DISCOVERED, MD, now, key))
            drawn += 1 + self.links
        self.drawn = drawn
        return out


def median_ms(fn, n: int = 5, before=None) -> float:
    times = []
    for _ in range(n):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def rss_mb(pid: int) -> float:
    """A process's resident memory, MB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def store_facts(fr, path: Path | None, rows: int, node) -> dict:
    """Disk per URL, the WAL and memory, as the backend has them (module docstring)."""
    if node is None:
        wal = path.with_name(path.name + "-wal")
        return {
            # the database's pages, those still in the WAL too (the file alone lags a checkpoint)
            "disk_bytes_per_url": round(fr.conn.execute("PRAGMA page_count").fetchone()[0]
                                        * fr.conn.execute("PRAGMA page_size").fetchone()[0] / rows),
            "wal_mb": round(wal.stat().st_size / 1e6 if wal.exists() else 0),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    _, data = fr.client.request("GET", f"/{fr.index}/_stats/store")
    store = data["_all"]["total"]["store"]["size_in_bytes"]
    return {"disk_bytes_per_url": round(store / rows), "wal_mb": 0,
            "peak_rss_mb": round(sum(rss_mb(pid) for pid in node.pids().values()))}


def _cpu() -> tuple[float, float, int, float]:
    """This thread's user and system CPU seconds and the blocks it read from disk, and the whole
    process's CPU seconds (the checkpoint thread's too)."""
    me = resource.getrusage(resource.RUSAGE_THREAD)
    process = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime, me.ru_stime, me.ru_inblock, process.ru_utime + process.ru_stime


def measure(fr, web: Web, path: Path | None, batch: int, node, measured: int,
            due_s: float = 3.0, warm: int = 0) -> dict:
    for _ in range(warm):  # untimed: the page cache as a running status updater has it
        failed = fr.apply_updates(web.batch(batch))
        assert not failed, f"{len(failed)} updates failed"
    t_write = 0.0
    written = 0
    spent = [0.0, 0.0, 0, 0.0]  # the writes' share of _cpu(), summed over the window's batches
    for _ in range(measured):
        b = web.batch(batch)
        c0 = _cpu()
        t0 = time.perf_counter()
        failed = fr.apply_updates(b)
        t_write += time.perf_counter() - t0
        spent = [total + after - before for total, after, before in zip(spent, _cpu(), c0)]
        assert not failed, f"{len(failed)} updates failed"
        written += len(b)
    if getattr(fr, "carry_queues", False):  # the last batch's queues (the bolt's next tick)
        t0 = time.perf_counter()
        fr.flush_queues()
        t_write += time.perf_counter() - t0
    per_k = 1e6 / written  # seconds in all -> ms per 1,000 updates
    user, system, blocks_in, process = spent
    if node is not None:
        fr.refresh()  # the writes searchable, as the spout finds them a refresh later
    now = web.clock  # what is due once the window's pages are written
    served = calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < due_s or calls < 3:
        served += len(fr.due(now, 1000, 10))
        calls += 1
        # OpenSearch: each round ends, as the spout's, at the stream's time (released at the
        # machine's, a day ahead of the stream, a queue stayed paused for the stream's whole day:
        # with few hosts the next size found every queue paused and served almost nothing)
        for key in list(getattr(fr, "leases", ())):
            fr.release(key, now, defer=True)
    t_due = time.perf_counter() - t0
    # OpenSearch: exact (counts() answers from the writer's snapshot above
    # frontier.stats.exact.max, which may predate the window: 127,827 URLs shown at 1 M)
    rows = fr._count({"match_all": {}}) if node is not None else sum(fr.counts().values())
    fresh = None
    if node is not None:
        # as in a crawl, a write made searchable before each read: OpenSearch answers a search
        # again from its request cache until a refresh brings a change
        extra = web.batch(1)[:1]

        def fresh():
            fr.apply_updates(extra)
            fr.refresh()
    snapshot = {}
    if node is not None:
        # what the figures' snapshot costs the node at this size, once per frontier.stats.interval
        # (renewed here as the writer would be at its next tick: the reads below answer from it
        # above frontier.stats.exact.max URLs, each one asking the node as another process does)
        from owler.frontier import opensearch_stats

        opensearch_stats.SHARED_FOR = 0.0
        fr.stats.join(600)
        t0 = time.perf_counter()
        assert fr.stats.renew(time.time(), *fr.stats.read()) is not None
        snapshot = {"snapshot_ms": round((time.perf_counter() - t0) * 1000)}
    return {
        "urls": rows,
        "updates_per_s": round(written / t_write),
        "write_user_ms": round(user * per_k, 2),
        "write_sys_ms": round(system * per_k, 2),
        "write_wait_ms": round(max(t_write - user - system, 0.0) * per_k, 2),
        "write_other_cpu_ms": round(max(process - user - system, 0.0) * per_k, 2),
        "write_blocks_in": round(blocks_in / measured),
        "served_per_s": round(served / t_due),
        "due_ms": round(t_due / calls * 1000, 1),
        "counts_ms": round(median_ms(fr.counts, before=fresh), 2),
        "due_count_ms": round(median_ms(lambda: fr.due_count(now), before=fresh), 2),
        "queue_count_ms": round(median_ms(fr.queue_count, before=fresh), 2),
        "due_queue_count_ms": round(median_ms(lambda: fr.queue_count(now), before=fresh), 2),
        "most_delayed_ms": round(median_ms(lambda: fr.most_delayed(now, 5), before=fresh), 2),
        **snapshot,
        **store_facts(fr, path, rows, node),
        "keys": fr.queue_count(),
    }


def repeated(fr, web: Web, path: Path, overrides: dict, window, repeat: int):
    """``window(fr)`` ``repeat`` times over the same database and stream (module docstring);
    returns the frontier as the last window left it and the windows' results, the median window
    first (by updates/s), each rate of the first the median of all."""
    if repeat <= 1:
        return fr, [window(fr)]
    saved = path.with_name(path.name + ".window")
    fr.close()
    shutil.copyfile(path, saved)
    os.sync()  # the copy's dirty pages written now, not during the windows
    state = web.state()
    runs = []
    for i in range(repeat):
        if i:
            fr.close()
            restore(path, saved)
            web.rewind(state)
        fr = SQLiteFrontier(path, overrides)
        runs.append(window(fr))
    saved.unlink()
    runs.sort(key=lambda r: r["updates_per_s"])
    mid = dict(runs[len(runs) // 2])
    for key in ("updates_per_s", "served_per_s"):
        values = sorted(r[key] for r in runs)
        mid[key] = round(statistics.median(values))
        mid[key + "_runs"] = values
    return fr, [mid]


def restore(path: Path, saved: Path) -> None:
    """The database at ``path`` put back as ``saved`` holds it (its WAL and shared memory gone),
    synced, so that the next window starts from the same file."""
    for extra in ("-wal", "-shm"):
        path.with_name(path.name + extra).unlink(missing_ok=True)
    shutil.copyfile(saved, path)
    os.sync()


def wal_frames(wal: Path) -> list[int]:
    """The page number of every frame of a WAL file, in order (SQLite's WAL format: a 32-byte
    header whose bytes 8-11 give the page size, then frames of a 24-byte header, whose first 4
    bytes are the page number, and the page)."""
    data = wal.read_bytes() if wal.exists() else b""
    if len(data) < 32:
        return []
    size = struct.unpack(">I", data[8:12])[0]
    return [struct.unpack(">I", data[off:off + 4])[0]
            for off in range(32, len(data) - size - 23, 24 + size)]


def batch_pages(fr, web: Web, path: Path, overrides: dict, batch: int, n: int):
    """``--pages``: ``n`` more batches without checkpoints, the WAL's pages named by B-tree
    (module docstring). Returns the frontier opened again as before and ``{B-tree: pages per
    batch}``, largest first, ``(free)`` for pages no B-tree holds any more."""
    fr.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    fr.close()
    quiet = SQLiteFrontier(path, {**overrides, CHECKPOINT_INTERVAL_KEY: 0,
                                  "frontier.sqlite.wal.autocheckpoint": 0})
    try:
        for _ in range(n):
            failed = quiet.apply_updates(web.batch(batch))
            assert not failed, f"{len(failed)} updates failed"
        frames = wal_frames(path.with_name(path.name + "-wal"))
        owner = dict(quiet.conn.execute("SELECT pageno, name FROM dbstat"))
    finally:
        quiet.close()
    counts = Counter(owner.get(p, "(free)") for p in frames)
    return SQLiteFrontier(path, overrides), {k: round(v / n) for k, v in counts.most_common()}


ROWS = [("status updates/s", "updates_per_s"),
        ("… ms of the writer's CPU per 1,000 updates: user", "write_user_ms"),
        ("… system", "write_sys_ms"),
        ("… waiting (the writes' wall time less the writer's CPU)", "write_wait_ms"),
        ("… the other threads' CPU meanwhile (SQLite: the checkpoints)", "write_other_cpu_ms"),
        ("… blocks the writer read from disk per batch", "write_blocks_in"),
        ("URLs served/s by due()", "served_per_s"),
        ("due() ms per call (1,000 queues × 10)", "due_ms"), ("counts() ms", "counts_ms"),
        ("due_count() ms", "due_count_ms"), ("queue_count() ms", "queue_count_ms"),
        ("queue_count(now) ms", "due_queue_count_ms"), ("most_delayed() ms", "most_delayed_ms"),
        ("OpenSearch: one computation of the figures' snapshot, ms", "snapshot_ms"),
        ("pages a batch writes (`--pages`)", "pages_per_batch"),
        ("disk bytes per URL", "disk_bytes_per_url"), ("WAL MB", "wal_mb"),
        ("memory MB (SQLite: this process's peak RSS; OpenSearch: the nodes' RSS)", "peak_rss_mb")]


def table(results: list[dict], name: str = "SQLite frontier") -> str:
    head = f"| {name} | " + " | ".join(
        f"{r['urls'] / 1e6:.3g} M URLs / {r['keys']:,} keys" for r in results) + " | largest ÷ smallest |"
    lines = [head, "|---|" + "---:|" * (len(results) + 1)]
    for label, name in ROWS:
        if name not in results[0]:
            continue
        vals = [r[name] for r in results]
        ratio = vals[-1] / vals[0] if vals[0] else float("nan")
        cells = [f"{v:,}" + (" (" + ", ".join(f"{x:,}" for x in r[name + "_runs"]) + ")"
                             if name + "_runs" in r else "") for v, r in zip(vals, results)]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    return "\n".join(lines)


def pages_table(results: list[dict], top: int = 8) -> str:
    """``--pages``: the pages a batch writes by B-tree at each size, the largest shares at the
    largest size first."""
    last = results[-1]["pages_by_btree"]
    names = sorted(last, key=lambda k: -last[k])[:top]
    head = "| pages a batch writes, by B-tree | " + " | ".join(
        f"{r['urls'] / 1e6:.3g} M" for r in results) + " | largest ÷ smallest |"
    lines = [head, "|---|" + "---:|" * (len(results) + 1)]
    for name in names + ["(all)"]:
        vals = [r["pages_per_batch"] if name == "(all)" else r["pages_by_btree"].get(name, 0)
                for r in results]
        ratio = f"{vals[-1] / vals[0]:.2f}" if vals[0] else "—"
        lines.append(f"| {name} | " + " | ".join(f"{v:,}" for v in vals) + f" | {ratio} |")
    return "\n".join(lines)


def exit_on_sigterm() -> None:
    """SIGTERM (kill, timeout) as SystemExit: a benchmark's ``finally`` still takes its OpenSearch
    node down and its temporary files away (else the node outlived the run and the next found
    its port taken)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100k,1M,10M", help="frontier sizes, growing (k, M)")
    ap.add_argument("--keys-per-url", type=float, default=0.05,
                    help="hosts per URL at the largest size (default 0.05: 500,000 for 10 M)")
    ap.add_argument("--links", type=int, default=60, help="outlinks per fetched page")
    ap.add_argument("--internal", type=float, default=0.8, help="share of links to the same host")
    ap.add_argument("--new-share", type=float, default=0.15, help="share of links that are new")
    ap.add_argument("--pages-per-s", type=float, default=480.0,
                    help="the stream's clock: fetched pages per second (the farm crawl's rate)")
    ap.add_argument("--batch", type=int,
                    default=C.get_int(load_conf(), "status.updater.batch.size", 5000))
    ap.add_argument("--warm", type=int, default=20,
                    help="batches written untimed before each window (a warm page cache)")
    ap.add_argument("--measured", type=int, default=60,
                    help="batches timed at each size (the window spans several WAL checkpoints)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="SQLite: windows measured at each size over the same database (median)")
    ap.add_argument("--pages", type=int, default=0, metavar="N",
                    help="SQLite: N more batches per size without checkpoints, their pages by B-tree")
    ap.add_argument("--dir", default=None, help="where to put the database (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--backend", choices=("sqlite", "opensearch"), default="sqlite")
    ap.add_argument("--nodes", type=int, default=1, help="opensearch: nodes (127.0.0.1 .. N)")
    ap.add_argument("--shards", type=int, default=1, help="opensearch: shards of the status index")
    ap.add_argument("--replicas", type=int, default=0, help="opensearch: its replicas")
    ap.add_argument("--heap", default="2g", help="opensearch: each node's heap")
    ap.add_argument("--port", type=int, default=9284, help="opensearch: the first node's port")
    ap.add_argument("-o", dest="options", action="append", default=[], metavar="KEY=VALUE",
                    help="a frontier setting (e.g. frontier.sqlite.checkpoint.interval=5)")
    args = ap.parse_args()
    exit_on_sigterm()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes):
        ap.error("--sizes must grow")
    if args.repeat < 1 or (args.repeat > 1 and args.backend != "sqlite"):
        ap.error("--repeat: 1 or more, and more than 1 on the SQLite frontier only")
    if args.warm < 0:
        ap.error("--warm: 0 or more batches")
    if args.pages < 0 or (args.pages and args.backend != "sqlite"):
        ap.error("--pages: 0 or more, on the SQLite frontier only")
    # the clock starts a day back: every date the run writes is in the past, as a crawl's are
    web = Web(max(1000, int(sizes[-1] * args.keys_per_url)), links=args.links,
              internal=args.internal, new_share=args.new_share, clock=time.time() - 86400,
              pages_per_s=args.pages_per_s)
    try:
        overrides = dict(C.parse_override(o) for o in args.options)
    except C.ConfError as exc:
        ap.error(str(exc))
    tmp = Path(tempfile.mkdtemp(prefix="bench-frontier-scale-", dir=args.dir))
    path = tmp / "frontier.sqlite"
    results = []
    node = None
    try:
        if args.backend == "sqlite":
            fr = SQLiteFrontier(path, overrides)
            name = "SQLite frontier"
        else:
            from owler.frontier.opensearch import OpenSearchFrontier
            from owler.run.services import OpenSearchNode

            node = OpenSearchNode(ROOT, tmp / "opensearch", args.port, args.heap, args.nodes)
            node.up()
            fr = OpenSearchFrontier({
                "frontier.backend": "opensearch", "services.opensearch.port": args.port,
                "services.opensearch.nodes": args.nodes, "opensearch.status.index.name": "scale",
                "opensearch.status.shards": args.shards,
                "opensearch.status.replicas": args.replicas, **overrides}, owner="bench")
            # as the status updater opens it (owler.status)
            fr.round_results = fr.carry_queues = True
            path = None
            name = (f"OpenSearch frontier, {args.nodes} node(s), {args.shards} shard(s), "
                    f"{args.replicas} replica(s)")
        for size in sizes:
            t0 = time.perf_counter()
            # the fill: pages whose links are all new, up to where the measured batches end at size
            while web.urls < size - (args.warm + args.measured) * args.batch * web.new_share:
                failed = fr.apply_updates(web.batch(args.batch, new_share=1.0))
                assert not failed, f"{len(failed)} updates failed in the fill"
            fill = time.perf_counter() - t0
            if node is None:
                # every size's window starts from an empty WAL: the fill's checkpoint debt (its
                # writes are all new URLs) is not the measured stream's
                fr.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if node is None:
                fr, (r,) = repeated(fr, web, path, overrides, lambda f: measure(
                    f, web, path, args.batch, None, args.measured, warm=args.warm), args.repeat)
            else:
                r = measure(fr, web, path, args.batch, node, args.measured, warm=args.warm)
            if args.pages:
                fr, by_btree = batch_pages(fr, web, path, overrides, args.batch, args.pages)
                r["pages_by_btree"] = by_btree
                r["pages_per_batch"] = sum(by_btree.values())
            r["fill_s"] = round(fill)
            results.append(r)
            print(f"[scale] {json.dumps(r)}", file=sys.stderr, flush=True)
        fr.close()
    finally:
        if node is not None:
            node.down()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps({"sizes": results}))
        return
    print(f"{name}, batches of {args.batch}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs\n")
    print(table(results, name))
    if args.pages:
        print()
        print(pages_table(results))


if __name__ == "__main__":
    main()
