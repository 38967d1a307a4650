"""The embedded frontier: one SQLite file shared by the spout, the status updater and the CLI.

Tables
    ``urls(id, url, status, next_fetch_date, key, metadata, updated)``: id = the first 16 bytes of
    sha256(url) as a BLOB (half the index of a 64-character hex id: a third smaller database and
    fewer pages written per batch, measured in ``bench/bench_frontier.py``; 128 bits make a
    collision among 10^10 URLs a 10^-19 event), ``next_fetch_date`` and ``updated`` in epoch seconds, ``metadata`` as JSON, ``key`` the
    partition key. One index, ``(key, next_fetch_date)``: every query needs only that one (a
    separate ``(next_fetch_date)`` index cost a third of the write throughput, measured, and
    :meth:`SQLiteFrontier.due_count` goes through ``queues`` and this index instead).
    ``queues(key, next_due)``: per partition key, the smallest ``next_fetch_date`` of its URLs,
    maintained inside every write transaction. It lets :meth:`SQLiteFrontier.due` pick the
    ``max_buckets`` most overdue keys from an index instead of ranking every due row (measured in
    ``bench/bench_frontier.py``: a window function over 1M due rows takes about a second; this takes
    milliseconds).
    ``meta(name, value)``: ``schema_version`` (a schema 1 file, with hex ids, a schema 2 file,
    without tags, or a schema 3 file, one tag per URL, is migrated when opened); ``crawl_id`` in
    the file of a crawl other than ``DEFAULT`` (:mod:`owler.frontier.crawls`: each crawl is a file
    of its own beside ``frontier.sqlite.path``; :func:`crawl_files` finds them).
    ``blocks(key, until)``: queues the server asked to leave alone (429/503, Retry-After; written
    with the throttled URL's status, :attr:`StatusUpdate.block_until`): :meth:`SQLiteFrontier.due`
    serves none of their URLs before ``until``. Created when a file is opened, if missing.
    ``rounds(key, began, until)``: the last round of each queue (below, "Rounds"). Created when a
    file is opened, if missing.
    Counters (schema 5; a file of schema 1-4 is counted by one scan when first opened):
    ``status_counts(status, n)``, ``due_buckets(bucket, n)`` (URLs per minute of their next fetch
    date, ``bucket`` = the date // :data:`DUE_BUCKET`) and ``key_counts(key, n)`` (with an index by
    ``n``: the largest queues), written in every write transaction from what its statements did
    (``_Counted``), so that :meth:`SQLiteFrontier.counts`, :meth:`~SQLiteFrontier.due_count`,
    :meth:`~SQLiteFrontier.top_hosts` and the whole frontier's ``count_urls`` read a few rows
    whatever the frontier's size (``owler status``, the progress line, the dashboard's recorder,
    GetStats), exact after any crash (the transaction is whole or absent).
    ``queue_buckets(bucket, n)`` (schema 6; a file of schema 5 or before is counted from its
    ``queues`` when first opened): the queues per minute of their ``next_due``, kept by triggers on
    ``queues`` (a queue's date changes a few hundred times a batch at most, not once per URL), so
    that :meth:`~SQLiteFrontier.queue_count` reads the minutes before ``now``'s and only the
    queues due in its own minute: exact, its cost growing with the minutes, not the queues.
    Schema 7: ``queues`` and ``key_counts`` are tables WITHOUT ROWID (a file of schema 6 or before
    has both copied when first opened: a few seconds for hundreds of thousands of queues).

Tags (schema 4; OWLer's interest tags, as the OpenSearch frontier's ``tags``)
    ``urls.tag``: every tag of the ``frontier.tags`` rules (``"<metadata key>=<value>": tag``,
    ``"lang=*": "lang:*"``; :class:`owler.frontier.Tagger`) the stored metadata matches, as a JSON
    array, NULL when none does. With the default rules a URL is ``Sitemap``
    (``isSitemap=true``), ``Feed`` or ``OnSitemap`` (``isDiscoveredOnSitemap=true``; also a
    sitemap listed in an index), tags the sitemap spout serves together. Tags are computed when a
    URL is written; changing the rules re-tags stored URLs only through :meth:`SQLiteFrontier.retag`
    (``owler frontier retag``). ``frontier.tags.priority`` shifts a tagged URL's stored next fetch
    date (:class:`owler.frontier.Tagger`).
    ``url_tags(tag, key, next_fetch_date, id)``: one row per tag of a tagged URL, kept by
    triggers on ``urls`` (an untagged write costs the triggers' ``WHEN`` test only:
    ``bench/bench_frontier.py``), its primary key the index of the interest queries.
    A spout's interest (:class:`owler.frontier.Interest`) is a signature: every one of
    ``frontier.interest.required.tags``, one of ``frontier.interest.tags`` (any-of) and none of
    ``frontier.interest.exclude.tags``.
    A spout with any-of tags only is served only URLs with one of those tags and none of the
    excluded ones, and is never starved by untagged URLs however many are due: it reads
    ``tag_queues(tag, key, next_due)``, maintained like ``queues`` for tagged rows only, and
    ``url_tags``.
    A spout with required tags (``"+Sitemap +FamilyFriendly -risk:adult"``) drives its query from
    one of them, the one with the fewest due queues (each counted up to :data:`DRIVE_COUNT`): the
    due ``tag_queues`` of that tag in order of their earliest date, and in each queue that tag's
    due ``url_tags`` rows, earliest first, each checked against the rest of the signature by
    probes of ``url_tags``' primary key (a URL's tag rows share its key, date and id: no row of
    ``urls`` is read for a URL that does not match). Untagged URLs and URLs of other tags never
    come into it. Bounds: at most :data:`REQUIRED_SCAN` rows of the driving tag per queue and
    :data:`REQUIRED_BUDGET` in all per query; when the budget runs out the next query goes on
    from the queue where this one stopped, and comes back to the most overdue queue only once it
    has been round all of them, so queues whose due URLs lack the rest of the signature never hold
    back the queues after them (the queues are served in turn rather than most overdue first).
    What can wait: in one queue, a URL of the signature behind more than :data:`REQUIRED_SCAN`
    due URLs that carry the driving tag but not the signature waits until enough of those are
    served (by another spout) or rescheduled.
    A spout with only ``frontier.interest.exclude.tags`` (the sitemap seed spout: untagged URLs)
    reads the ordinary queues and skips excluded rows, looking at most at the first
    :data:`EXCLUDE_SCAN` due URLs of a queue per query (untagged rows behind a longer backlog of
    excluded due rows wait until that backlog is served).

Rounds (``frontier.queue.round.delay``, OWLer's at least five minutes between two rounds on a queue)
    With a round delay, every queue :meth:`SQLiteFrontier.due` serves begins a round: ``rounds``
    records when it began and when the next may (``began`` + the delay), and no query serves the
    queue before then, whatever its interest. Choosing the queues and recording their rounds is
    one write transaction (``BEGIN IMMEDIATE``), so several spout processes sharing the file
    never begin a round on one queue together, and the rounds hold across restarts (they are in
    the file). A spout without a round delay records none but honours the others' (the table is
    read by every query). A round's size is the spout's URLs per queue per query
    (``spout.max.urls.per.bucket``; ``resources/owler-rounds.yaml`` is OWLer's profile). Unlike
    the OpenSearch frontier's leases, a round here does not wait for its URLs to be acked: the
    next begins ``round.delay`` after this one began (the fetcher keeps the per-queue delay).

Sitemap refresh (how a sitemap's news reaches known URLs without overwriting their status)
    DISCOVERED never overwrites a known URL. A DISCOVERED whose metadata says it comes from a
    sitemap (``isDiscoveredOnSitemap=true`` or ``isSitemap=true``; or ``sitemap.seeded``, the seed
    spout's mark) is, for a KNOWN URL, a refresh, applied in batch order:

    - status, key and ``updated`` stay; the sitemap facts are merged into the stored metadata
      (``isSitemap`` — true is never turned back to false —, ``isDiscoveredOnSitemap``, every
      ``sitemap.*`` key, and the extension keys ``IMAGE.* VIDEO.* NEWS.* LINKS.* MOBILE.*``, which
      a new listing replaces) and the tag is recomputed;
    - the URL becomes due (the earlier of its date and the update's) when its
      ``sitemap.lastModified`` is later than the stored one and than the URL's last write (it
      changed since it was fetched; a sitemap listing itself with ``lastmod`` = now cannot loop:
      its own FETCHED is written after), or when it is still DISCOVERED and was on no sitemap
      before (a seed home page that a sitemap lists);
    - ``sitemap.seeded`` (the seed spout looked up the host's sitemaps) moves a URL that is on no
      sitemap to the update's date: the next look-up.

Concurrency
    Several processes open the file at once (spout reads, status updater and ``owler inject``
    write, ``owler status`` reads). The database runs in WAL mode: readers never block writers nor
    each other; writers take the lock up front (``BEGIN IMMEDIATE``) and wait up to
    ``frontier.sqlite.busy.timeout`` seconds for one another. Every transaction is short: one batch.

Durability
    ``synchronous=NORMAL`` (the default, ``frontier.sqlite.synchronous``): a committed batch survives
    a crash of any process (the WAL is in the OS page cache), but the last commits may be lost on
    power loss or an OS crash; the database itself stays consistent. ``FULL`` syncs the WAL on every
    commit and survives power loss, at the cost of one fsync per batch.

Write cost
    A DISCOVERED is an ``INSERT OR IGNORE``: a known URL (most outlinks) costs a probe of the id
    index, never a read of its row. A queue's earliest date is refreshed by one probe of the key
    index (its first entry), whatever the queue's size.
    A commit writes every B-tree page the batch touched to the WAL; the URL id index and the key
    index take random inserts, so a batch of N new URLs dirties about 2N pages until N approaches
    the index size. Larger batches (``status.updater.batch.size``) are therefore cheaper per URL.
    ``frontier.sqlite.wal.autocheckpoint`` (pages, default 50000 = 200 MB of WAL) keeps checkpoints
    (copy WAL → database + two fsyncs) rare: a page rewritten by many batches is copied once per
    checkpoint. SQLite's default of 1000 pages checkpoints after nearly every batch; 10000 pages
    cost a third of the write throughput against 50000 (measured).
    A frontier that writes (the first :meth:`SQLiteFrontier.apply_updates`) checkpoints in a
    thread of its own with a connection of its own (``PASSIVE``: it never blocks a writer or a
    reader), every ``frontier.sqlite.checkpoint.interval`` seconds (default 1; 0: none, the
    committing connection does it as SQLite does): once a frontier holds millions of URLs a batch
    touches thousands of pages all over the file, and the checkpoint's copy and fsyncs inside the
    status updater's commit took 40 % of its time at 3 M URLs (``bench/bench_frontier_scale.py``,
    BENCHMARKS.md). The committing connection then checkpoints only when the WAL outgrows four
    times ``wal.autocheckpoint``, and under a steady stream of batches it does, although the
    thread keeps up: each of the thread's checkpoints copies every frame it finds, but the WAL
    starts again from its beginning only when a writer begins with every frame copied, and the
    writer commits new batches while the thread copies. The WAL file grows to about four times
    ``wal.autocheckpoint`` and stays that size, and once per such span the commit that crosses it
    checkpoints the rest itself (at 3 M URLs about 0.5 s, once in 85 batches: 8 % of the writes'
    time; docs/benchmarks-history.md, issue 45, eighth session).

Config keys read: ``frontier.sqlite.synchronous`` (NORMAL), ``frontier.sqlite.busy.timeout``
(30 s), ``frontier.sqlite.cache.mb`` (64), ``frontier.sqlite.wal.autocheckpoint`` (50000 pages),
``frontier.sqlite.checkpoint.interval`` (1 s), ``partition.url.mode`` (for :meth:`inject`), ``frontier.tags``, ``frontier.tags.priority``, the
interest keys (``frontier.interest.required.tags``, ``frontier.interest.tags``,
``frontier.interest.exclude.tags``), ``frontier.queue.round.delay`` (seconds, 0: no rounds).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import logging
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Container, Iterable, Iterator, Mapping, Sequence

import orjson

from owler import conf as C
from owler.conf import ConfError
from owler.constants import (ROUND_DELAY_KEY, SITEMAP_LAST_MODIFIED, SITEMAP_SEEDED,
                             STATUS_NAMES, Status)
from owler.frontier import (DEFAULT_KEY, NEVER, FrontierError, FrontierRecord, Interest,
                            StatusUpdate, Tagger, round_robin, seed_key)
from owler.frontier.crawls import DEFAULT_CRAWL, SEPARATOR, sqlite_path
from owler.frontier.refresh import REFRESH_KEYS, is_refresh, listed, merge_sitemap_facts
from owler.urls import partition_mode

log = logging.getLogger(__name__)

SCHEMA_VERSION = "7"
CHECKPOINT_INTERVAL_KEY = "frontier.sqlite.checkpoint.interval"

#: at most this many due rows of one queue are looked at per query when only exclude tags filter
EXCLUDE_SCAN = 200
#: with required tags: at most this many due rows of the driving tag looked at per queue and
#: query, and per query in all (module docstring, "Tags")
REQUIRED_SCAN = 1000
REQUIRED_BUDGET = 20_000
#: due queues of each required tag counted (at most) to choose the driving tag
DRIVE_COUNT = 10_000

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS urls (
        id BLOB PRIMARY KEY,
        url TEXT NOT NULL,
        status TEXT NOT NULL,
        next_fetch_date REAL NOT NULL,
        key TEXT NOT NULL,
        metadata TEXT NOT NULL,
        updated REAL NOT NULL,
        tag TEXT)""",
    "CREATE INDEX IF NOT EXISTS urls_key_next_fetch_date ON urls (key, next_fetch_date)",
    # schema 7: the tables keyed by a queue's key are WITHOUT ROWID (_KEYED)
    "CREATE TABLE IF NOT EXISTS queues (key TEXT PRIMARY KEY, next_due REAL NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS queues_next_due ON queues (next_due)",
    # tagged rows only (schema 4): one row per tag, kept by the triggers of _TRIGGERS
    """CREATE TABLE IF NOT EXISTS url_tags (tag TEXT NOT NULL, key TEXT NOT NULL,
        next_fetch_date REAL NOT NULL, id BLOB NOT NULL,
        PRIMARY KEY (tag, key, next_fetch_date, id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS tag_queues (tag TEXT NOT NULL, key TEXT NOT NULL,
        next_due REAL NOT NULL, PRIMARY KEY (tag, key))""",
    "CREATE INDEX IF NOT EXISTS tag_queues_next_due ON tag_queues (tag, next_due)",
    # queues the server asked to leave alone until a time (429/503, Retry-After)
    "CREATE TABLE IF NOT EXISTS blocks (key TEXT PRIMARY KEY, until REAL NOT NULL)",
    # the last round of each queue (frontier.queue.round.delay): not served again before until
    """CREATE TABLE IF NOT EXISTS rounds (key TEXT PRIMARY KEY, began REAL NOT NULL,
        until REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS rounds_until ON rounds (until)",
    # schema 5: the URLs per status and per minute of their next fetch date, kept in every write's
    # own transaction (_Counted; counts() and due_count() read these)
    "CREATE TABLE IF NOT EXISTS status_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS due_buckets (bucket INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS key_counts (key TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS key_counts_n ON key_counts (n DESC, key)",
    # schema 6: the queues per minute of their next_due (kept by the queues_count_* triggers)
    "CREATE TABLE IF NOT EXISTS queue_buckets (bucket INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
    # windowed counters shared by every task (charge(): the sitemap host budgets)
    """CREATE TABLE IF NOT EXISTS budgets (id TEXT PRIMARY KEY, start REAL NOT NULL,
        used INTEGER NOT NULL)""",
]

# schema 7: tables with one row per queue key, WITHOUT ROWID (the key's row is the primary key's
# B-tree entry: one B-tree written per change instead of a table and its key index; at 3 M URLs
# of 500,000 possible hosts 10 % more updates/s: docs/benchmarks-history.md, issue 45, eighth
# session); a file of schema 6 or before is rebuilt when opened (_rebuild_keyed)
_KEYED = {"queues": "key, next_due", "key_counts": "key, n"}

# url_tags follows urls.tag (a JSON array of tags, or NULL) on every insert, update and delete
_TAG_ROWS = ("INSERT OR IGNORE INTO url_tags (tag, key, next_fetch_date, id) "
             "SELECT value, new.key, new.next_fetch_date, new.id FROM json_each(new.tag);")
_UNTAG_ROWS = ("DELETE FROM url_tags WHERE tag IN (SELECT value FROM json_each(old.tag)) "
               "AND key = old.key AND next_fetch_date = old.next_fetch_date AND id = old.id;")
_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS urls_tag_insert AFTER INSERT ON urls "
    f"WHEN new.tag IS NOT NULL BEGIN {_TAG_ROWS} END",
    "CREATE TRIGGER IF NOT EXISTS urls_tag_update AFTER UPDATE OF tag, key, next_fetch_date ON urls "
    f"WHEN old.tag IS NOT NULL OR new.tag IS NOT NULL BEGIN {_UNTAG_ROWS} {_TAG_ROWS} END",
    "CREATE TRIGGER IF NOT EXISTS urls_tag_delete AFTER DELETE ON urls "
    f"WHEN old.tag IS NOT NULL BEGIN {_UNTAG_ROWS} END",
]

#: width of a ``due_buckets`` bucket, seconds: :meth:`SQLiteFrontier.due_count` counts to it
DUE_BUCKET = 60


def _bucket(column: str) -> str:
    """SQL: the ``due_buckets`` bucket of a date column (as :func:`_bucket_of`)."""
    return f"CAST({column} / {DUE_BUCKET} AS INTEGER)"


def _queue_bucket_add(date: str, n: int) -> str:
    return (f"INSERT INTO queue_buckets (bucket, n) VALUES ({_bucket(date)}, {n}) "
            "ON CONFLICT (bucket) DO UPDATE SET n = n + excluded.n;")


_QUEUE_BUCKET_DROP_EMPTY = "DELETE FROM queue_buckets WHERE bucket = {} AND n = 0;"

# queue_buckets follows every queue's next_due: inserted, moved to another minute, deleted
_TRIGGERS += [
    "CREATE TRIGGER IF NOT EXISTS queues_count_insert AFTER INSERT ON queues BEGIN "
    f"{_queue_bucket_add('new.next_due', 1)} END",
    "CREATE TRIGGER IF NOT EXISTS queues_count_update AFTER UPDATE OF next_due ON queues "
    f"WHEN {_bucket('old.next_due')} != {_bucket('new.next_due')} BEGIN "
    f"{_queue_bucket_add('old.next_due', -1)} "
    f"{_QUEUE_BUCKET_DROP_EMPTY.format(_bucket('old.next_due'))} "
    f"{_queue_bucket_add('new.next_due', 1)} END",
    "CREATE TRIGGER IF NOT EXISTS queues_count_delete AFTER DELETE ON queues BEGIN "
    f"{_queue_bucket_add('old.next_due', -1)} "
    f"{_QUEUE_BUCKET_DROP_EMPTY.format(_bucket('old.next_due'))} END",
]


def _bucket_of(date: float) -> int:
    return int(date / DUE_BUCKET)


_ADD_STATUS = ("INSERT INTO status_counts (status, n) VALUES (?, ?) "
               "ON CONFLICT (status) DO UPDATE SET n = n + excluded.n")
_ADD_BUCKET = ("INSERT INTO due_buckets (bucket, n) VALUES (?, ?) "
               "ON CONFLICT (bucket) DO UPDATE SET n = n + excluded.n")
_ADD_KEY = ("INSERT INTO key_counts (key, n) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET n = n + excluded.n")


class _Counted:
    """What one write transaction changes in ``status_counts``, ``due_buckets`` and
    ``key_counts``: added up in
    Python from what each statement did (the rows an ``INSERT OR IGNORE`` inserted, the stored
    status and date of a row before and after it was overwritten) and written before the commit,
    in the same transaction. (Triggers doing the same cost about 40 % more per new URL:
    ``bench/bench_frontier_scale.py``, BENCHMARKS.md.)"""

    def __init__(self) -> None:
        self.status: dict[str, int] = {}
        self.buckets: dict[int, int] = {}
        self.keys: dict[str, int] = {}

    def add(self, status: str, date: float, key: str, n: int = 1) -> None:
        if n:
            self.status[status] = self.status.get(status, 0) + n
            b = _bucket_of(date)
            self.buckets[b] = self.buckets.get(b, 0) + n
            self.keys[key] = self.keys.get(key, 0) + n

    def write(self, conn: sqlite3.Connection) -> None:
        for counts, add, table, column in (
                (self.status, _ADD_STATUS, "status_counts", "status"),
                (self.buckets, _ADD_BUCKET, "due_buckets", "bucket"),
                (self.keys, _ADD_KEY, "key_counts", "key")):
            changed = [(k, n) for k, n in counts.items() if n]
            if changed:
                conn.executemany(add, changed)
                if any(n < 0 for _, n in changed):
                    conn.executemany(f"DELETE FROM {table} WHERE {column} = ? AND n = 0",
                                     [(k,) for k, n in changed if n < 0])
            counts.clear()


_BLOCK = """
INSERT INTO blocks (key, until) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET until = MAX(until, excluded.until)
"""

_ROUND = """
INSERT INTO rounds (key, began, until) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET began = excluded.began, until = MAX(until, excluded.until)
"""


def _open(table: str) -> str:
    """The condition (two parameters: now, now) that a queue of ``table`` is neither blocked
    (``blocks``) nor in the pause of a round (``rounds``)."""
    return (f" AND {table}.key NOT IN (SELECT key FROM blocks WHERE until > ?) AND NOT EXISTS "
            f"(SELECT 1 FROM rounds AS r WHERE r.key = {table}.key AND r.until > ?)")

# DISCOVERED never overwrites a known URL; any other status replaces status, date, key, metadata.
# One statement for both keeps the batch's order (a FETCHED then a DISCOVERED of the same URL).
_UPSERT = """
INSERT INTO urls (id, url, status, next_fetch_date, key, metadata, updated, tag)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    status = excluded.status,
    next_fetch_date = excluded.next_fetch_date,
    key = excluded.key,
    metadata = excluded.metadata,
    updated = excluded.updated,
    tag = excluded.tag
WHERE excluded.status != 'DISCOVERED'
"""

_INSERT_NEW = """
INSERT OR IGNORE INTO urls (id, url, status, next_fetch_date, key, metadata, updated, tag)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

# Recompute a queue's earliest date from the (key, next_fetch_date) index: one index probe, the
# first entry of the key (ORDER BY ... LIMIT 1: an aggregate MIN with HAVING read every row of the
# key, which grew with the largest hosts: bench/bench_frontier_scale.py). A DISCOVERED of a known
# URL may name a key without rows: the subquery is then empty and nothing is written.
_REFRESH_QUEUE = """
INSERT INTO queues (key, next_due)
SELECT ?1, d FROM (SELECT next_fetch_date AS d FROM urls WHERE key = ?1
                   ORDER BY next_fetch_date LIMIT 1) WHERE true
ON CONFLICT (key) DO UPDATE SET next_due = excluded.next_due
"""
# New DISCOVERED rows can only lower a queue's earliest date: no index probe needed, and no write
# at all when the queue is due earlier already (the common case: outlinks of a busy queue). (A DISCOVERED
# of a known URL is ignored by the upsert but may lower it too early; due() repairs such a queue.)
_LOWER_QUEUE = """
INSERT INTO queues (key, next_due) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET next_due = excluded.next_due
WHERE excluded.next_due < queues.next_due
"""
_DROP_EMPTY_QUEUE = "DELETE FROM queues WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM urls WHERE key = ?1)"

# the same for (tag, key) queues of tagged rows
_REFRESH_TAG_QUEUE = """
INSERT INTO tag_queues (tag, key, next_due)
SELECT ?1, ?2, d FROM (SELECT next_fetch_date AS d FROM url_tags WHERE tag = ?1 AND key = ?2
                       ORDER BY next_fetch_date LIMIT 1) WHERE true
ON CONFLICT (tag, key) DO UPDATE SET next_due = excluded.next_due
"""
_LOWER_TAG_QUEUE = """
INSERT INTO tag_queues (tag, key, next_due) VALUES (?, ?, ?)
ON CONFLICT (tag, key) DO UPDATE SET next_due = excluded.next_due
WHERE excluded.next_due < tag_queues.next_due
"""
_DROP_EMPTY_TAG_QUEUE = ("DELETE FROM tag_queues WHERE tag = ?1 AND key = ?2 AND NOT EXISTS "
                         "(SELECT 1 FROM url_tags WHERE tag = ?1 AND key = ?2)")

_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def _url_id(url: str) -> bytes:
    """The row id of a URL: the first 16 bytes of its sha256."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).digest()[:16]


def _split_rows(rows: list[tuple]) -> tuple[dict[bytes, tuple], list[tuple], set[bytes]]:
    """A batch's rows (id first, status third) as the DISCOVERED that may be inserted (each
    URL's first, none of a URL the batch also writes with another status), by id; the rows of
    every other status, in batch order; and those rows' ids (SQLiteFrontier._write_rows)."""
    discovered = Status.DISCOVERED.value
    others = [r for r in rows if r[2] != discovered]
    over = {r[0] for r in others}
    first: dict[bytes, tuple] = {}
    for r in rows:
        if r[2] == discovered and r[0] not in over and r[0] not in first:
            first[r[0]] = r
    return first, others, over


def _sha256_hex(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def _dump(md: Mapping[str, list[str]]) -> str:
    return orjson.dumps(md).decode("utf-8")


def _stored_date(next_fetch_date: float | None) -> float:
    if next_fetch_date is None:
        return NEVER
    return min(float(next_fetch_date), NEVER)


def _epoch(iso: str) -> float | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` (the sitemap parser's lastmod form) in epoch seconds."""
    try:
        return _dt.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=_dt.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return None


def _first_keys(rows: Iterable[tuple], n: int, skip: Container[str]) -> list[str]:
    """The first ``n`` keys (first column) of ``rows`` not in ``skip``, reading no further."""
    out = []
    for row in rows:
        if row[0] not in skip:
            out.append(row[0])
            if len(out) >= n:
                break
    return out


class SQLiteFrontier:
    """The frontier in one SQLite file (created with its parent folder if missing).

    One instance = one connection; use one instance per thread or process.
    """

    def __init__(self, path: str | Path, conf: Mapping[str, Any] | None = None,
                 crawl: str = DEFAULT_CRAWL) -> None:
        conf = conf or {}
        self.path = Path(path)
        self.crawl = crawl
        self.partition_mode = partition_mode(conf)
        sync = (C.get_str(conf, "frontier.sqlite.synchronous", "NORMAL") or "NORMAL").upper()
        if sync not in _SYNC_MODES:
            raise ConfError(
                f"frontier.sqlite.synchronous: expected one of {', '.join(_SYNC_MODES)}, got {sync!r}"
            )
        busy = C.get_float(conf, "frontier.sqlite.busy.timeout", 30.0)
        cache_mb = C.get_int(conf, "frontier.sqlite.cache.mb", 64)
        ckpt = C.get_int(conf, "frontier.sqlite.wal.autocheckpoint", 50000)
        self._ckpt_pages = max(ckpt, 0)
        self._ckpt_interval = max(C.get_float(conf, CHECKPOINT_INTERVAL_KEY, 1.0), 0.0)
        self._checkpointer: _Checkpointer | None = None
        self.tagger = Tagger(conf)
        self.tag_rules = self.tagger.rules
        self._rule_keys = self.tagger.keys
        self.want = Interest.from_conf(conf)
        self.required = list(self.want.required)
        self.interest = list(self.want.any)
        self.exclude = list(self.want.exclude)
        self._resume: dict[str, tuple[float, str] | None] = {}  # _due_required: per driving tag
        self.round_delay = max(0.0, C.get_float(conf, ROUND_DELAY_KEY, 0.0))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FrontierError(f"cannot create the folder of the frontier {self.path}: {exc}") from exc
        if self.path.is_dir():
            raise FrontierError(f"frontier path {self.path} is a directory, not a database file")
        try:
            # autocommit mode: transactions are explicit (BEGIN IMMEDIATE for writes)
            self.conn = sqlite3.connect(str(self.path), timeout=busy, isolation_level=None)
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
            mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise FrontierError(f"cannot switch {self.path} to WAL mode (got {mode!r})")
            self.conn.execute(f"PRAGMA synchronous = {sync}")
            self.conn.execute(f"PRAGMA cache_size = {-1024 * max(cache_mb, 1)}")
            self.conn.execute("PRAGMA temp_store = MEMORY")
            self.conn.execute(f"PRAGMA wal_autocheckpoint = {max(ckpt, 0)}")
            self._create_schema()
        except sqlite3.DatabaseError as exc:
            raise FrontierError(f"cannot open the frontier {self.path}: {exc}") from exc

    # -- set-up ----------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        with self._write():
            self.conn.execute(_SCHEMA[0])  # meta
            row = self.conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if row is not None and row[0] == "1":
                self._migrate_from_1()
            elif row is not None and row[0] == "2":
                self.conn.execute("ALTER TABLE urls ADD COLUMN tag TEXT")
                self.conn.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'",
                                  (SCHEMA_VERSION,))
            elif row is not None and row[0] == "3":
                self._migrate_from_3()
            elif row is not None and row[0] not in ("4", "5", "6", SCHEMA_VERSION):
                raise FrontierError(
                    f"{self.path} has frontier schema version {row[0]}, this code expects "
                    f"{SCHEMA_VERSION}; use a new frontier.sqlite.path"
                )
            if row is not None and row[0] != SCHEMA_VERSION:
                self._rebuild_keyed()
            for stmt in _SCHEMA + _TRIGGERS:
                self.conn.execute(stmt)
            if row is not None and row[0] in ("1", "2"):
                self._tag_stored_urls()
            if row is not None and row[0] not in ("5", SCHEMA_VERSION):
                self._count_stored_urls()
            if row is not None and row[0] != SCHEMA_VERSION:
                self._count_queues()
            if row is None:
                self.conn.execute(
                    "INSERT INTO meta (name, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                )
                if self.crawl != DEFAULT_CRAWL:
                    self.conn.execute("INSERT INTO meta (name, value) VALUES ('crawl_id', ?)",
                                      (self.crawl,))
            found = self.conn.execute("SELECT value FROM meta WHERE name = 'crawl_id'").fetchone()
            if (found[0] if found else DEFAULT_CRAWL) != self.crawl:
                raise FrontierError(f"{self.path} holds the crawl "
                                    f"{found[0] if found else DEFAULT_CRAWL!r}, not {self.crawl!r}")

    def _migrate_from_1(self) -> None:
        """Schema 1 (64-character hex ids) → 2 (16-byte BLOB ids), inside the caller's
        transaction: every URL kept with its status, date, key and metadata."""
        self.conn.create_function("owler_url_id", 1, _url_id, deterministic=True)
        self.conn.execute(_SCHEMA[1].replace("EXISTS urls (", "EXISTS urls_v2 ("))
        self.conn.execute(
            "INSERT INTO urls_v2 (id, url, status, next_fetch_date, key, metadata, updated) "
            "SELECT owler_url_id(url), url, status, next_fetch_date, key, metadata, updated "
            "FROM urls")
        self.conn.execute("DROP TABLE urls")
        self.conn.execute("ALTER TABLE urls_v2 RENAME TO urls")
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'",
                          (SCHEMA_VERSION,))

    def _migrate_from_3(self) -> None:
        """Schema 3 (one tag per URL, a partial index on it) → 4, inside the caller's transaction:
        each tag becomes a one-tag array and a ``url_tags`` row (before the triggers exist)."""
        for stmt in _SCHEMA:  # url_tags among them
            self.conn.execute(stmt)
        self.conn.execute("INSERT OR IGNORE INTO url_tags (tag, key, next_fetch_date, id) "
                          "SELECT tag, key, next_fetch_date, id FROM urls WHERE tag IS NOT NULL")
        self.conn.execute("UPDATE urls SET tag = json_array(tag) WHERE tag IS NOT NULL")
        self.conn.execute("DROP INDEX IF EXISTS urls_tag_key_next_fetch_date")
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'",
                          (SCHEMA_VERSION,))

    def _tag_stored_urls(self) -> None:
        """Schema 1/2 → 3: tag the stored URLs by ``frontier.tags`` (only rows whose metadata
        names a rule's key are looked at) and build their tag queues."""
        if not self.tag_rules:
            return
        self.conn.create_function("owler_tag", 1, lambda md: self._tags_json(orjson.loads(md)))
        names = sorted({k for k, _, _ in self.tag_rules})
        cond = " OR ".join("instr(metadata, ?) > 0" for _ in names)
        self.conn.execute(f"UPDATE urls SET tag = owler_tag(metadata) WHERE {cond}",
                          [orjson.dumps(n).decode() for n in names])
        self.conn.execute("INSERT OR REPLACE INTO tag_queues (tag, key, next_due) "
                          "SELECT tag, key, MIN(next_fetch_date) FROM url_tags GROUP BY tag, key")

    def _count_stored_urls(self) -> None:
        """Schema 1-4 → 5, inside the caller's transaction: the counters of the stored URLs, from
        one scan (afterwards every write keeps them)."""
        for table in ("status_counts", "due_buckets", "key_counts"):
            self.conn.execute(f"DELETE FROM {table}")
        self.conn.execute("INSERT INTO key_counts (key, n) SELECT key, COUNT(*) FROM urls "
                          "GROUP BY key")
        self.conn.execute("INSERT INTO status_counts (status, n) "
                          "SELECT status, COUNT(*) FROM urls GROUP BY status")
        self.conn.execute(f"INSERT INTO due_buckets (bucket, n) SELECT "
                          f"{_bucket('next_fetch_date')} AS b, COUNT(*) FROM urls GROUP BY b")
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'",
                          (SCHEMA_VERSION,))

    def _rebuild_keyed(self) -> None:
        """Schema 1-6 → 7, inside the caller's transaction: ``queues`` and ``key_counts`` copied
        into tables WITHOUT ROWID (:data:`_KEYED`), before the schema's statements make their
        indexes and triggers again (the old table's go with it; the copy fires no trigger, so
        ``queue_buckets`` counts every queue once)."""
        for table, columns in _KEYED.items():
            found = self.conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'table' AND "
                                      "name = ?", (table,)).fetchone()
            if found is None or "WITHOUT ROWID" in found[0].upper():
                continue
            self.conn.execute(f"ALTER TABLE {table} RENAME TO {table}_v6")
            self.conn.execute(next(q for q in _SCHEMA if f"EXISTS {table} (" in q))
            self.conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_v6")
            self.conn.execute(f"DROP TABLE {table}_v6")

    def _count_queues(self) -> None:
        """Schema 1-5 → 6, inside the caller's transaction: ``queue_buckets`` from the stored
        queues (one read of the queues, not of the URLs; afterwards the triggers keep it)."""
        self.conn.execute("DELETE FROM queue_buckets")
        self.conn.execute(f"INSERT INTO queue_buckets (bucket, n) SELECT "
                          f"{_bucket('next_due')} AS b, COUNT(*) FROM queues GROUP BY b")
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'",
                          (SCHEMA_VERSION,))

    def _tags_json(self, md: Mapping[str, list[str]]) -> str | None:
        """The stored form of ``md``'s tags: a JSON array, or None when it has none."""
        tags = self.tagger.tags(md)
        return orjson.dumps(tags).decode() if tags else None

    def _write(self) -> "_Transaction":
        return _Transaction(self.conn)

    # -- writes ----------------------------------------------------------------------------------
    def _start_checkpointer(self) -> None:
        """The writer's checkpoints in a thread (module docstring, "Write cost")."""
        if self._checkpointer is None and self._ckpt_interval > 0 and self._ckpt_pages > 0:
            self._checkpointer = _Checkpointer(self.path, self._ckpt_interval)
            # a frontier dropped without close() stops its thread too
            weakref.finalize(self, self._checkpointer.stop, False)
            self.conn.execute(f"PRAGMA wal_autocheckpoint = {4 * self._ckpt_pages}")

    def apply_updates(self, updates: Iterable[StatusUpdate]) -> list[int]:
        """Write all updates in ONE transaction; returns ``[]`` (no update failed alone) after
        COMMIT, raises (nothing written) on failure. DISCOVERED = insert if unknown; other statuses
        replace the record."""
        if self._checkpointer is None:
            self._start_checkpointer()
        now = time.time()
        rows = []
        lowered: dict[str, float] = {}  # key -> earliest date among its new DISCOVERED rows
        rescheduled: set[str] = set()  # keys with a rewritten URL: recompute their earliest date
        tag_lowered: dict[tuple[str, str], float] = {}  # the same per (tag, key) of tagged rows
        tag_rescheduled: set[tuple[str, str]] = set()
        refreshes: list[tuple[int, StatusUpdate]] = []  # sitemap refreshes, at their batch position
        last_md, last_json = None, ""
        discovered = Status.DISCOVERED.value
        tagger = self.tagger if self.tag_rules else None
        rule_keys = self._rule_keys
        blocks: dict[str, float] = {}
        for u in updates:
            if not isinstance(u, StatusUpdate):
                raise TypeError(f"apply_updates expects StatusUpdate objects, got {type(u).__name__}")
            if u.block_until is not None:
                k = u.key or DEFAULT_KEY
                blocks[k] = max(u.block_until, blocks.get(k, 0.0))
            status = u.status.value if isinstance(u.status, Status) else Status(u.status).value
            md = u.metadata or {}
            if status == discovered and not REFRESH_KEYS.isdisjoint(md) and is_refresh(status, md):
                refreshes.append((len(rows), u))
                continue
            key = u.key or DEFAULT_KEY
            nfd = _stored_date(u.next_fetch_date)
            tags = (tagger.tags(md) if tagger is not None and not rule_keys.isdisjoint(md)
                    else ())
            if tags and nfd < NEVER:
                nfd -= tagger.shift(tags)
            if md is not last_md:  # a page's outlinks share one metadata dict: dumped once
                last_md, last_json = md, _dump(md)
            rows.append((_url_id(u.url), u.url, status, nfd, key, last_json, now,
                         orjson.dumps(tags).decode() if tags else None))
            if status == discovered:
                if nfd < lowered.get(key, NEVER + 1):
                    lowered[key] = nfd
                for tag in tags:
                    if nfd < tag_lowered.get((tag, key), NEVER + 1):
                        tag_lowered[(tag, key)] = nfd
            else:
                rescheduled.add(key)
                tag_rescheduled.update((tag, key) for tag in tags)
        if not rows and not refreshes:
            return []
        counted = _Counted()
        with self._write():
            if blocks:
                self.conn.execute("DELETE FROM blocks WHERE until <= ?", (now,))
                self.conn.executemany(_BLOCK, list(blocks.items()))
            done = 0
            for pos, u in refreshes:  # in batch order with the plain rows around them
                if pos > done:
                    self._write_rows(rows[done:pos], counted)
                    done = pos
                self._refresh(u, now, lowered, rescheduled, tag_lowered, tag_rescheduled,
                              counted)
            if done < len(rows):
                self._write_rows(rows[done:] if done else rows, counted)
            counted.write(self.conn)
            self.conn.executemany(_LOWER_QUEUE, [(k, d) for k, d in lowered.items()
                                                 if k not in rescheduled])
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in rescheduled])
            if tag_lowered or tag_rescheduled:
                self.conn.executemany(_LOWER_TAG_QUEUE, [
                    (t, k, d) for (t, k), d in tag_lowered.items()
                    if (t, k) not in tag_rescheduled])
                self.conn.executemany(_REFRESH_TAG_QUEUE, list(tag_rescheduled))
        return []

    def _write_rows(self, rows: list[tuple], counted: _Counted) -> None:
        """Rows of :meth:`apply_updates` (no sitemap refresh among them), counted into
        ``counted``. DISCOVERED as ``INSERT OR IGNORE``, which decides from the id index alone
        (the upsert read the stored row's page even when it changed nothing: a random page of the
        table for every known outlink), every other status as the upsert, in batch order.

        The two sets may run one after the other: a URL with another status in the batch ends
        with the last of those whatever its DISCOVERED rows (an insert that an overwrite replaces,
        or ignored), so its DISCOVERED rows are left out; the first DISCOVERED row of every other
        URL is the one that may be inserted. Those are inserted by one statement and the rows it
        added read back to be counted; the overwritten URLs' status, date and key are read before
        and after."""
        discovered = Status.DISCOVERED.value
        first, others, over = _split_rows(rows)
        if first:
            # one statement for them all; the rows it inserted are those past the table's last
            # rowid before it (a rowid table gives a new row the largest rowid + 1, and this
            # transaction is the only writer), read back counted by minute and key
            last = self.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM urls").fetchone()[0]
            self.conn.executemany(_INSERT_NEW, first.values())
            for date, key, n in self.conn.execute(
                    f"SELECT MIN(next_fetch_date), key, COUNT(*) FROM urls WHERE rowid > ? "
                    f"GROUP BY {_bucket('next_fetch_date')}, key", (last,)):
                counted.add(discovered, date, key, n)
        if others:
            ids = list(over)
            for status, nfd, key in self._stored(ids):
                counted.add(status, nfd, key, -1)
            self.conn.executemany(_UPSERT, others)
            for status, nfd, key in self._stored(ids):
                counted.add(status, nfd, key)

    def _stored(self, ids: list[bytes], columns: str = "status, next_fetch_date, key"
                ) -> Iterator[tuple]:
        """``columns`` (the stored status, date and key) of the URLs of ``ids`` that exist."""
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            yield from self.conn.execute(
                f"SELECT {columns} FROM urls WHERE id IN ({','.join('?' * len(part))})", part)

    def _refresh(self, u: StatusUpdate, now: float, lowered: dict, rescheduled: set,
                 tag_lowered: dict, tag_rescheduled: set, counted: _Counted) -> None:
        """One sitemap refresh inside the write transaction (module docstring)."""
        uid = _url_id(u.url)
        md = u.metadata or {}
        nfd = _stored_date(u.next_fetch_date)
        row = self.conn.execute(
            "SELECT status, next_fetch_date, key, metadata, updated, tag FROM urls WHERE id = ?",
            (uid,)).fetchone()
        if row is None:  # unknown: a plain discovery
            key = u.key or DEFAULT_KEY
            tags = self.tagger.tags(md)
            if tags and nfd < NEVER:
                nfd -= self.tagger.shift(tags)
            self.conn.execute(_INSERT_NEW, (uid, u.url, Status.DISCOVERED.value, nfd, key,
                                            _dump(md), now,
                                            orjson.dumps(tags).decode() if tags else None))
            counted.add(Status.DISCOVERED.value, nfd, key)
            if nfd < lowered.get(key, NEVER + 1):
                lowered[key] = nfd
            for tag in tags:
                if nfd < tag_lowered.get((tag, key), NEVER + 1):
                    tag_lowered[(tag, key)] = nfd
            return
        status, old_nfd, key, old_json, updated, old_tag = row
        stored = orjson.loads(old_json)
        merged = merge_sitemap_facts(stored, md)
        new_nfd = old_nfd
        if SITEMAP_SEEDED in md:
            if not listed(stored):
                new_nfd = nfd
        elif status == Status.DISCOVERED.value and not listed(stored):
            new_nfd = min(old_nfd, nfd)  # a known, never fetched URL that a sitemap lists now
        else:
            new_lm = (md.get(SITEMAP_LAST_MODIFIED) or [None])[0]
            old_lm = (stored.get(SITEMAP_LAST_MODIFIED) or [None])[0]
            if new_lm and (old_lm is None or new_lm > old_lm):
                when = _epoch(new_lm)
                if when is not None and when > updated:
                    new_nfd = min(old_nfd, nfd)  # changed since it was last fetched
        tags = self.tagger.tags(merged)
        tag = orjson.dumps(tags).decode() if tags else None
        if merged == stored and new_nfd == old_nfd and tag == old_tag:
            return
        self.conn.execute("UPDATE urls SET metadata = ?, next_fetch_date = ?, tag = ? WHERE id = ?",
                          (_dump(merged), new_nfd, tag, uid))
        counted.add(status, old_nfd, key, -1)
        counted.add(status, new_nfd, key)
        if new_nfd != old_nfd:
            rescheduled.add(key)
        old_tags = orjson.loads(old_tag) if old_tag else []
        tag_rescheduled.update((t, key) for t in {*tags, *old_tags})

    def inject(self, seeds: Iterable[tuple[str, Mapping[str, list[str]]]], now: float) -> int:
        """Add seed URLs as DISCOVERED, due ``now``, never overwriting a known URL.

        Each URL is normalised (``owler.urls.normalize``) and keyed by ``partition.url.mode``.
        Returns how many were new. A URL that does not normalise raises ``ValueError`` before
        anything is written (validate with :func:`owler.seeds.parse_seeds` first).
        """

        rows = []
        keys: set[str] = set()
        for url, md in seeds:
            norm, key = seed_key(url, self.partition_mode)
            md = dict(md or {})
            rows.append((_url_id(norm), norm, Status.DISCOVERED.value, float(now), key,
                         _dump(md), time.time(), self._tags_json(md)))
            keys.add(key)
        if not rows:
            return 0
        with self._write():
            # rowcount: the statements' own inserts (total_changes would count the triggers');
            # one date (one bucket), a statement per key
            counted = _Counted()
            inserted = 0
            groups: dict[str, list[tuple]] = {}
            for r in rows:
                groups.setdefault(r[4], []).append(r)
            for key, group in groups.items():
                n = self.conn.executemany(_INSERT_NEW, group).rowcount
                counted.add(Status.DISCOVERED.value, float(now), key, n)
                inserted += n
            counted.write(self.conn)
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in keys])
            self.conn.executemany(_REFRESH_TAG_QUEUE, sorted({
                (t, r[4]) for r in rows if r[7] is not None for t in orjson.loads(r[7])}))
        return inserted

    # -- the spout's query -----------------------------------------------------------------------
    def due(
        self, now: float, max_buckets: int, per_bucket: int, exclude: Container[str] = (),
        key: str | None = None, skip_keys: Container[str] = (),
    ) -> list[tuple[str, dict[str, list[str]], str]]:
        """URLs with ``next_fetch_date <= now`` as ``(url, metadata, key)``.

        At most ``max_buckets`` keys (the most overdue first: smallest earliest date, then key) and
        ``per_bucket`` URLs per key (earliest first; of one date, in the order they were
        written), interleaved round-robin: the first URL of every key, then the second of every
        key, … URLs (or their sha256 ids) in ``exclude`` — the
        spout's in-flight set — are skipped and the next due URLs of the key are taken instead.

        The interest of the configuration this frontier was opened with (required, any-of and
        excluded tags) restricts the URLs served (module docstring, "Tags"; with required tags
        the queues are taken in turn from where the last query stopped). A queue in a round's
        pause (module docstring, "Rounds") or blocked is not served; with
        ``frontier.queue.round.delay`` every queue served begins a round. ``key``: only that
        queue; ``skip_keys``: not these queues (the next due ones instead).
        """
        if max_buckets <= 0 or per_bucket <= 0:
            return []
        cur = self.conn.cursor()
        # one snapshot for the whole query; with rounds, a write transaction: the queues chosen
        # and their rounds recorded at once, so that two processes sharing the file never begin
        # a round on one queue together
        cur.execute("BEGIN IMMEDIATE" if self.round_delay else "BEGIN")
        try:
            stale: list[str] = []
            stale_tags: list[tuple[str, str]] = []
            args = (now, max_buckets, per_bucket, exclude, key, skip_keys)
            if self.required:
                buckets, stale_tags = self._due_required(cur, *args)
            elif self.interest:
                buckets, stale_tags = self._due_tagged(cur, *args)
            else:
                buckets, stale = self._due_plain(cur, *args)
            if self.round_delay and buckets:
                self._begin_rounds(cur, [bucket[0][2] for bucket in buckets], now)
            cur.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        if stale:
            self._refresh_queues(stale)
        if stale_tags:
            with self._write():
                self.conn.executemany(_REFRESH_TAG_QUEUE, stale_tags)
                self.conn.executemany(_DROP_EMPTY_TAG_QUEUE, stale_tags)
        return round_robin(buckets, per_bucket)

    def _begin_rounds(self, cur: sqlite3.Cursor, keys: list[str], now: float) -> None:
        """Rounds of ``keys`` begin ``now``: no query serves them before ``round_delay`` has
        passed (inside :meth:`due`'s write transaction; rounds that ended are dropped)."""
        cur.execute("DELETE FROM rounds WHERE until <= ?", (now,))
        cur.executemany(_ROUND, [(k, now, now + self.round_delay) for k in keys])

    def _due_plain(self, cur: sqlite3.Cursor, now: float, max_buckets: int, per_bucket: int,
                   exclude: Container[str], key: str | None, skip_keys: Container[str]
                   ) -> tuple[list[list[tuple[str, dict, str]]], list[str]]:
        """:meth:`due` without an interest, or with excluded tags only: the queues from
        ``queues``, their due URLs from the key index; the buckets, and the queues whose stored
        earliest date is out of date (a URL changed key)."""
        one = "" if key is None else " AND key = ?"
        keys = _first_keys(cur.execute(
            f"SELECT key FROM queues WHERE next_due <= ?{one}{_open('queues')} ORDER BY next_due, key"
            + ("" if skip_keys else " LIMIT ?"),
            (now, *(() if key is None else (key,)), now, now,
             *(() if skip_keys else (max_buckets,)))), max_buckets, skip_keys)
        check_ids = bool(exclude)
        stale: list[str] = []
        buckets: list[list[tuple[str, dict, str]]] = []
        excluded_tags = frozenset(self.exclude)
        for key in keys:
            bucket = []
            skipped = 0
            rows = cur.execute(
                # ties by rowid (the order the URLs were written), as the key index has them: a
                # tie broken by URL made SQLite sort every due URL of the date, a whole queue
                # when its URLs were injected or discovered at one date
                "SELECT url, metadata, tag FROM urls WHERE key = ? AND next_fetch_date <= ? "
                "ORDER BY next_fetch_date, rowid",
                (key, now),
            )
            for url, md, tag in rows:
                if tag is not None and not excluded_tags.isdisjoint(orjson.loads(tag)):
                    skipped += 1
                    if skipped >= EXCLUDE_SCAN:
                        break
                    continue
                if check_ids and (url in exclude or _sha256_hex(url) in exclude):
                    skipped += 1
                    continue
                bucket.append((url, orjson.loads(md), key))
                if len(bucket) >= per_bucket:
                    break
            if bucket:
                buckets.append(bucket)
            elif not skipped:
                stale.append(key)
        return buckets, stale

    def _due_tagged(self, cur: sqlite3.Cursor, now: float, max_buckets: int, per_bucket: int,
                    exclude: Container[str], key: str | None, skip_keys: Container[str]
                    ) -> tuple[list[list[tuple[str, dict, str]]], list[tuple[str, str]]]:
        """:meth:`due` for any-of interest tags: queues from ``tag_queues``, URLs through
        ``url_tags``, one index range per tag, merged by date; a URL with an excluded tag is
        skipped, a URL with two interest tags served once. The buckets, and the stale
        ``(tag, key)`` queues."""
        tags = self.interest
        marks = ",".join("?" * len(tags))
        one = "" if key is None else " AND key = ?"
        keys = _first_keys(cur.execute(
            f"SELECT key, MIN(next_due) AS d FROM tag_queues WHERE tag IN ({marks}) "
            f"AND next_due <= ?{one}{_open('tag_queues')} GROUP BY key ORDER BY d, key"
            + ("" if skip_keys else " LIMIT ?"),
            (*tags, now, *(() if key is None else (key,)), now, now,
             *(() if skip_keys else (max_buckets,)))), max_buckets, skip_keys)
        check_ids = bool(exclude)
        excluded_tags = frozenset(self.exclude)
        stale: list[tuple[str, str]] = []
        buckets = []
        for key in keys:
            found: dict[str, tuple[float, str]] = {}
            for tag in tags:
                got = skipped = 0
                for url, md, nfd, url_tags in cur.execute(
                        "SELECT u.url, u.metadata, t.next_fetch_date, u.tag FROM url_tags AS t "
                        "JOIN urls AS u ON u.id = t.id WHERE t.tag = ? AND t.key = ? AND "
                        "t.next_fetch_date <= ? ORDER BY t.next_fetch_date, t.id",
                        (tag, key, now)):
                    if (check_ids and (url in exclude or _sha256_hex(url) in exclude)) or (
                            excluded_tags and not excluded_tags.isdisjoint(
                                orjson.loads(url_tags))):
                        skipped += 1
                        if skipped >= EXCLUDE_SCAN:
                            break
                        continue
                    found[url] = (nfd, md)
                    got += 1
                    if got >= per_bucket:
                        break
                if not got and not skipped:
                    stale.append((tag, key))
            if found:
                ranked = sorted((nfd, url, md) for url, (nfd, md) in found.items())
                buckets.append([(url, orjson.loads(md), key)
                                for _, url, md in ranked[:per_bucket]])
        return buckets, stale

    # -- signatures: required tags (module docstring, "Tags") --------------------------------------
    def _driving_tag(self, conn: Any, now: float | None) -> str:
        """The required tag whose rows a query walks: the one with the fewest due queues (each
        counted up to :data:`DRIVE_COUNT`), the first listed on a tie."""
        if len(self.required) == 1 or now is None:
            return self.required[0]
        best, fewest = self.required[0], -1
        for tag in self.required:
            n = conn.execute("SELECT COUNT(*) FROM (SELECT 1 FROM tag_queues WHERE tag = ? AND "
                             "next_due <= ? LIMIT ?)", (tag, now, DRIVE_COUNT)).fetchone()[0]
            if fewest < 0 or n < fewest:
                best, fewest = tag, n
        return best

    def _signature_sql(self, drive: str, alias: str = "t") -> tuple[str, list[str]]:
        """An SQL condition, true when the URL of ``url_tags`` row ``alias`` (a row of tag
        ``drive``) has the signature: every other required tag, one any-of tag, no excluded tag.
        Each is a probe of ``url_tags``' primary key: the tag rows of one URL share its key, date
        and id."""
        parts: list[str] = []
        args: list[str] = []
        for tags, negate in ([([t], False) for t in self.required if t != drive]
                             + [(self.interest if drive not in self.interest else [], False),
                                (self.exclude, True)]):
            if tags:
                part, more = self._tags_sql(tags, alias, negate)
                parts.append(part)
                args += more
        return " AND ".join(parts) or "1", args

    @staticmethod
    def _tags_sql(tags: list[str], alias: str, negate: bool = False) -> tuple[str, list[str]]:
        """An SQL condition, true when the URL of ``url_tags`` row ``alias`` has one of ``tags``
        (``negate``: none of them; no tags: always true)."""
        if not tags:
            return "1", []
        marks = ",".join("?" * len(tags))
        return (f"{'NOT ' if negate else ''}EXISTS (SELECT 1 FROM url_tags AS x WHERE x.tag IN "
                f"({marks}) AND x.key = {alias}.key AND x.next_fetch_date = "
                f"{alias}.next_fetch_date AND x.id = {alias}.id)"), list(tags)

    def _due_required(self, cur: sqlite3.Cursor, now: float, max_buckets: int, per_bucket: int,
                      exclude: Container[str], key: str | None, skip_keys: Container[str]
                      ) -> tuple[list[list[tuple[str, dict, str]]], list[tuple[str, str]]]:
        """:meth:`due` for an interest with required tags (module docstring, "Tags"): the due
        queues of the driving tag (:meth:`_driving_tag`) in order of their earliest date, taken
        in turn from where the last query stopped; in each, the driving tag's due rows, earliest
        first, checked against the signature in the index (:meth:`_signature_sql`), at most
        :data:`REQUIRED_SCAN` rows per queue and :data:`REQUIRED_BUDGET` per query."""
        drive = self._driving_tag(cur, now)
        check, check_args = self._signature_sql(drive)
        one = "" if key is None else " AND key = ?"
        base = (f"SELECT key, next_due FROM tag_queues WHERE tag = ? AND next_due <= ?{one}"
                + _open("tag_queues"))
        args = (drive, now, *(() if key is None else (key,)), now, now)
        after = self._resume.get(drive) if key is None else None
        order = " ORDER BY next_due, key"
        if after is None:
            queues = self.conn.execute(base + order, args)
        else:  # where the last query stopped, then from the start up to there
            queues = itertools.chain(
                self.conn.execute(base + " AND (next_due, key) > (?, ?)" + order, (*args, *after)),
                self.conn.execute(base + " AND (next_due, key) <= (?, ?)" + order,
                                  (*args, *after)))
        rows_sql = (f"SELECT t.id, {check} FROM url_tags AS t WHERE t.tag = ? AND t.key = ? AND "
                    "t.next_fetch_date <= ? ORDER BY t.next_fetch_date, t.id LIMIT ?")
        check_ids = bool(exclude)
        buckets: list[list[tuple[str, dict, str]]] = []
        stale: list[tuple[str, str]] = []
        scanned = 0
        last = None
        for k, next_due in queues:
            if k in skip_keys:
                continue
            last = (next_due, k)
            bucket: list[tuple[str, dict, str]] = []
            n = 0
            for uid, ok in cur.execute(rows_sql, (*check_args, drive, k, now, REQUIRED_SCAN)):
                n += 1
                if not ok:
                    continue
                url, md = self.conn.execute("SELECT url, metadata FROM urls WHERE id = ?",
                                            (uid,)).fetchone()
                if check_ids and (url in exclude or _sha256_hex(url) in exclude):
                    continue
                bucket.append((url, orjson.loads(md), k))
                if len(bucket) >= per_bucket:
                    break
            scanned += n
            if bucket:
                buckets.append(bucket)
            elif not n:
                stale.append((drive, k))
            if len(buckets) >= max_buckets or scanned >= REQUIRED_BUDGET:
                break
        else:
            last = None  # every queue looked at: the next query starts from the most overdue
        if key is None:
            self._resume[drive] = last
        return buckets, stale

    def _refresh_queues(self, keys: list[str]) -> None:
        """Recompute (or drop) queues whose stored earliest date is stale. Happens only when a URL
        was rewritten under another partition key (``partition.url.mode`` changed)."""
        with self._write():
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in keys])
            self.conn.executemany(_DROP_EMPTY_QUEUE, [(k,) for k in keys])

    # -- statistics ------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """URLs per status; every status name is present (0 when none). Read from
        ``status_counts`` (kept with every write, exact): a few rows whatever the frontier's size."""
        out = {name: 0 for name in STATUS_NAMES}
        for status, n in self.conn.execute("SELECT status, n FROM status_counts"):
            out[status] = n
        return out

    def scan_counts(self) -> dict[str, int]:
        """:meth:`counts` from a scan of every URL (what the counters must equal)."""
        out = {name: 0 for name in STATUS_NAMES}
        for status, n in self.conn.execute("SELECT status, COUNT(*) FROM urls GROUP BY status"):
            out[status] = n
        return out

    def due_count(self, now: float) -> int:
        """URLs due: without an interest, those whose ``next_fetch_date`` falls before the end of
        the :data:`DUE_BUCKET` (60 s) bucket that holds ``now``, summed from ``due_buckets``
        (one row per minute with URLs due in it): exact to the minute, so a URL due later in the
        current minute is counted, and the cost grows with the minutes that hold due URLs, not
        with the URLs; but 0 when no URL is due yet (:meth:`has_due`, exact), which is what
        ``owler run``'s idle check and a service's clients ask. With an interest (the frontier opened with one), the
        URLs with ``next_fetch_date <= now`` of that interest, counted through its tag rows."""
        if self.required:
            drive = self._driving_tag(self.conn, now)
            check, args = self._signature_sql(drive)
            return self.conn.execute(
                "SELECT COUNT(*) FROM tag_queues AS q JOIN url_tags AS t ON t.tag = q.tag AND "
                "t.key = q.key AND t.next_fetch_date <= ? WHERE q.tag = ? AND q.next_due <= ? "
                f"AND {check}", (now, drive, now, *args)).fetchone()[0]
        if self.interest:
            marks = ",".join("?" * len(self.interest))
            check, args = self._tags_sql(self.exclude, "t", negate=True)
            return self.conn.execute(
                "SELECT COUNT(DISTINCT t.id) FROM tag_queues AS q JOIN url_tags AS t ON "
                "t.tag = q.tag AND t.key = q.key AND t.next_fetch_date <= ? "
                f"WHERE q.tag IN ({marks}) AND q.next_due <= ? AND {check}",
                (now, *self.interest, now, *args)).fetchone()[0]
        if self.exclude:
            marks = ",".join("?" * len(self.exclude))
            return self.conn.execute(
                "SELECT COUNT(*) FROM queues AS q JOIN urls AS u ON u.key = q.key "
                "AND u.next_fetch_date <= ? WHERE q.next_due <= ? AND (u.tag IS NULL OR NOT "
                f"EXISTS (SELECT 1 FROM json_each(u.tag) WHERE value IN ({marks})))",
                (now, now, *self.exclude)).fetchone()[0]
        if not self.has_due(now):  # 0 is exact: idle checks (owler run, a service's client)
            return 0
        return self.conn.execute(
            f"SELECT COALESCE(SUM(n), 0) FROM due_buckets WHERE bucket <= {_bucket('?')} "
            f"AND bucket < {_bucket('?')}", (now, NEVER)).fetchone()[0]  # never again: not due

    @property
    def due_resolution(self) -> int:
        """Seconds to which :meth:`due_count` counts (0: exact)."""
        return 0 if (self.required or self.interest or self.exclude) else DUE_BUCKET

    def has_due(self, now: float) -> bool:
        """Whether any URL has ``next_fetch_date <= now`` (exact: the due queues, each checked in
        the key index until one holds a due URL)."""
        return self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM queues AS q WHERE q.next_due <= ?1 AND EXISTS "
            "(SELECT 1 FROM urls AS u WHERE u.key = q.key AND u.next_fetch_date <= ?1))", (now,)
        ).fetchone()[0] == 1

    def queue_count(self, now: float | None = None) -> int:
        """Distinct partition keys; with ``now``, only keys that have a due URL; of the interest
        when the frontier was opened with one (keys with a URL of it)."""
        if self.required:
            drive = self._driving_tag(self.conn, now)
            check, args = self._signature_sql(drive)
            if now is None:
                return self.conn.execute(
                    f"SELECT COUNT(DISTINCT t.key) FROM url_tags AS t WHERE t.tag = ? AND {check}",
                    (drive, *args)).fetchone()[0]
            return self.conn.execute(
                "SELECT COUNT(DISTINCT t.key) FROM tag_queues AS q JOIN url_tags AS t ON "
                "t.tag = q.tag AND t.key = q.key AND t.next_fetch_date <= ? WHERE q.tag = ? AND "
                f"q.next_due <= ? AND {check}", (now, drive, now, *args)).fetchone()[0]
        if self.interest and self.exclude:  # the queues with a URL not excluded
            marks = ",".join("?" * len(self.interest))
            check, args = self._tags_sql(self.exclude, "t", negate=True)
            if now is None:
                return self.conn.execute(
                    f"SELECT COUNT(DISTINCT t.key) FROM url_tags AS t WHERE t.tag IN ({marks}) "
                    f"AND {check}", (*self.interest, *args)).fetchone()[0]
            return self.conn.execute(
                "SELECT COUNT(DISTINCT t.key) FROM tag_queues AS q JOIN url_tags AS t ON "
                "t.tag = q.tag AND t.key = q.key AND t.next_fetch_date <= ? WHERE q.tag IN "
                f"({marks}) AND q.next_due <= ? AND {check}",
                (now, *self.interest, now, *args)).fetchone()[0]
        if self.interest:
            marks = ",".join("?" * len(self.interest))
            return self.conn.execute(
                f"SELECT COUNT(DISTINCT key) FROM tag_queues WHERE tag IN ({marks})"
                + ("" if now is None else " AND next_due <= ?"),
                (*self.interest,) + (() if now is None else (now,))).fetchone()[0]
        if self.exclude:  # the queues with a URL not excluded (every URL read: no tag index)
            marks = ",".join("?" * len(self.exclude))
            kept = ("(u.tag IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(u.tag) WHERE value IN "
                    f"({marks})))")
            if now is None:
                return self.conn.execute(f"SELECT COUNT(DISTINCT u.key) FROM urls AS u WHERE "
                                         f"{kept}", self.exclude).fetchone()[0]
            return self.conn.execute(
                "SELECT COUNT(DISTINCT u.key) FROM queues AS q JOIN urls AS u ON u.key = q.key "
                f"AND u.next_fetch_date <= ? WHERE q.next_due <= ? AND {kept}",
                (now, now, *self.exclude)).fetchone()[0]
        # queue_buckets: the minutes before now's summed, now's own minute counted in the index
        if now is None:
            return self.conn.execute("SELECT COALESCE(SUM(n), 0) FROM queue_buckets").fetchone()[0]
        return self.conn.execute(
            f"SELECT (SELECT COALESCE(SUM(n), 0) FROM queue_buckets WHERE bucket < {_bucket('?1')})"
            # (the range a second wider, the bucket computed as the triggers compute it)
            f" + (SELECT COUNT(*) FROM queues WHERE next_due >= {_bucket('?1')} * {DUE_BUCKET} - 1"
            f" AND next_due <= ?1 AND {_bucket('next_due')} >= {_bucket('?1')})", (now,)
        ).fetchone()[0]

    def top_hosts(self, n: int = 10) -> list[tuple[str, int]]:
        """The ``n`` partition keys with the most URLs, largest first (``key_counts``: the
        first entries of its index)."""
        return [(k, c) for k, c in self.conn.execute(
            "SELECT key, n FROM key_counts ORDER BY n DESC, key LIMIT ?", (n,))]

    def most_delayed(self, now: float, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` queues due the longest, as ``(key, seconds since their first URL was
        due)``, longest first (the dashboard's "most delayed")."""
        return [(k, round(now - due, 3)) for k, due in self.conn.execute(
            "SELECT key, next_due FROM queues WHERE next_due <= ? ORDER BY next_due, key LIMIT ?",
            (now, n))]

    def get(self, url: str) -> FrontierRecord | None:
        """The stored record of ``url`` (exact string), or ``None`` when unknown."""
        row = self.conn.execute(
            "SELECT url, status, next_fetch_date, key, metadata, updated FROM urls WHERE id = ?",
            (_url_id(url),),
        ).fetchone()
        if row is None:
            return None
        url, status, nfd, key, md, updated = row
        return FrontierRecord(url, Status(status), None if nfd >= NEVER else nfd, key,
                              orjson.loads(md), updated)

    def latest_values(self, key: str, name: str, n: int) -> list[tuple[str, str]]:
        """``(url, value)``: the first value of metadata ``name`` of the ``n`` URLs of queue
        ``key`` with the latest next fetch dates (never-again first), latest first, those
        without ``name`` left out (so fewer than ``n`` may come back). One backward walk of the
        ``(key, next_fetch_date)`` index, ``n`` entries long, and ``n`` row reads, whatever the
        queue's size; SQLite's ``json_extract`` takes the value out of the stored JSON, so only
        it crosses into Python. The parser seeds a host's near-duplicate memory with it
        (:class:`owler.parse.simhash.FrontierSeeds`, which says why the latest dates stand for
        the latest fetches)."""
        if '"' in name:
            raise ValueError(f"a metadata name with a double quote: {name!r}")
        path = f'$."{name}"[0]'
        rows = self.conn.execute(
            "SELECT url, json_extract(metadata, ?) FROM urls WHERE key = ? "
            "ORDER BY next_fetch_date DESC LIMIT ?", (path, key, max(int(n), 0))).fetchall()
        return [(url, value) for url, value in rows if isinstance(value, str)]

    # -- what a URLFrontier service needs beyond the spout (owler.urlfrontier.service) -----------
    def known(self, urls: Sequence[tuple[str, str]]) -> set[str]:
        """The URLs of ``urls`` (url, key) that are stored (a PutURLs ``discovered`` of one of
        them is SKIPPED)."""
        by_id = {_url_id(u): u for u, _ in urls}
        # the id index alone answers (no row is read)
        return {by_id[r[0]] for r in self._stored(list(by_id), "id")}

    def list_queues(self, start: int, size: int, now: float, include_inactive: bool = False
                    ) -> list[str]:
        """Partition keys by name, ``size`` from position ``start``; without ``include_inactive``
        only queues with a URL to fetch some day (not all "never again") that are not blocked."""
        if include_inactive:
            rows = self.conn.execute("SELECT key FROM queues ORDER BY key LIMIT ? OFFSET ?",
                                     (size, start))
        else:
            rows = self.conn.execute(
                "SELECT key FROM queues WHERE next_due < ? AND key NOT IN (SELECT key FROM blocks "
                "WHERE until > ?) ORDER BY key LIMIT ? OFFSET ?", (NEVER, now, size, start))
        return [r[0] for r in rows]

    def _url_filter(self, key: str | None, text: str | None, ignore_case: bool,
                    active: bool | None) -> tuple[str, list]:
        where, args = [], []
        if key is not None:
            where.append("key = ?")
            args.append(key)
        if text:
            where.append("instr(lower(url), ?) > 0" if ignore_case else "instr(url, ?) > 0")
            args.append(text.lower() if ignore_case else text)
        if active is not None:
            where.append("next_fetch_date < ?" if active else "next_fetch_date >= ?")
            args.append(NEVER)
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def count_urls(self, key: str | None = None, text: str | None = None,
                   ignore_case: bool = False, active: bool | None = None) -> int:
        """URLs of queue ``key`` (all queues: ``None``) whose URL contains ``text``; ``active``
        True/False: only those to be fetched again some day / never. Of the whole frontier
        (no key, no text): from the counters (the never-again bucket of ``due_buckets``; a date
        in the minute before :data:`NEVER` counts as never)."""
        if key is None and not text:
            total = self.conn.execute("SELECT COALESCE(SUM(n), 0) FROM status_counts").fetchone()[0]
            if active is None:
                return total
            never = self.conn.execute(f"SELECT COALESCE(SUM(n), 0) FROM due_buckets WHERE "
                                      f"bucket >= {_bucket('?')}", (NEVER,)).fetchone()[0]
            return total - never if active else never
        where, args = self._url_filter(key, text, ignore_case, active)
        return self.conn.execute(f"SELECT COUNT(*) FROM urls{where}", args).fetchone()[0]

    def list_urls(self, key: str | None, start: int, size: int, text: str | None = None,
                  ignore_case: bool = False) -> list[FrontierRecord]:
        """The records of :meth:`count_urls`, by next fetch date then URL, ``size`` from
        ``start``."""
        where, args = self._url_filter(key, text, ignore_case, None)
        rows = self.conn.execute(
            "SELECT url, status, next_fetch_date, key, metadata, updated FROM urls"
            f"{where} ORDER BY key, next_fetch_date, url LIMIT ? OFFSET ?", (*args, size, start))
        return [FrontierRecord(url, Status(status), None if nfd >= NEVER else nfd, k,
                               orjson.loads(md), updated)
                for url, status, nfd, k, md, updated in rows]

    def iter_urls(self, key: str | None, start: int = 0, text: str | None = None,
                  ignore_case: bool = False, page: int = 1000) -> Iterator[list[FrontierRecord]]:
        """The records of :meth:`list_urls` from ``start`` to the end, a page at a time: each page
        one query that continues after the last row of the one before (key, next fetch date,
        URL), so a deep listing never skips over what it has read (``LIMIT``/``OFFSET`` would)."""
        where, args = self._url_filter(key, text, ignore_case, None)
        cols = "SELECT url, status, next_fetch_date, key, metadata, updated FROM urls"
        order = " ORDER BY key, next_fetch_date, url LIMIT ?"
        rows = self.conn.execute(f"{cols}{where}{order} OFFSET ?", (*args, page, start)).fetchall()
        while rows:
            yield [FrontierRecord(url, Status(status), None if nfd >= NEVER else nfd, k,
                                  orjson.loads(md), updated)
                   for url, status, nfd, k, md, updated in rows]
            if len(rows) < page:
                return
            last = rows[-1]
            after = f"{where} AND" if where else " WHERE"
            rows = self.conn.execute(
                f"{cols}{after} (key, next_fetch_date, url) > (?, ?, ?){order}",
                (*args, last[3], last[2], last[0], page)).fetchall()

    def delete(self, key: str | None = None) -> int:
        """Remove queue ``key`` (every queue: ``None``) with all its URLs; how many URLs."""
        one, args = ("", ()) if key is None else (" WHERE key = ?", (key,))
        with self._write():
            if key is None:
                for table in ("status_counts", "due_buckets", "key_counts"):
                    self.conn.execute(f"DELETE FROM {table}")
            else:  # the key's rows, through the key index
                counted = _Counted()
                for status, b, n in self.conn.execute(
                        f"SELECT status, {_bucket('next_fetch_date')} AS b, COUNT(*) FROM urls "
                        "WHERE key = ? GROUP BY status, b", args):
                    counted.add(status, b * DUE_BUCKET, key, -n)
                counted.write(self.conn)
            n = self.conn.execute(f"DELETE FROM urls{one}", args).rowcount
            for table in ("queues", "tag_queues", "blocks", "rounds"):
                self.conn.execute(f"DELETE FROM {table}{one}", args)
        return n

    def block_queue(self, key: str, until: float, now: float) -> None:
        """Serve no URL of ``key`` before ``until`` (epoch seconds; a past time lifts a block),
        as URLFrontier's BlockQueueUntil: unlike :attr:`StatusUpdate.block_until` this may shorten
        a block."""
        with self._write():
            if until <= now:
                self.conn.execute("DELETE FROM blocks WHERE key = ?", (key,))
            else:
                self.conn.execute("INSERT OR REPLACE INTO blocks (key, until) VALUES (?, ?)",
                                  (key, until))

    def tags(self, url: str) -> list[str]:
        """The stored tags of ``url`` ([]: untagged or unknown)."""
        row = self.conn.execute("SELECT tag FROM urls WHERE id = ?", (_url_id(url),)).fetchone()
        return orjson.loads(row[0]) if row and row[0] else []

    def tag(self, url: str) -> str | None:
        """The first of :meth:`tags` by name (None: untagged or unknown)."""
        return min(self.tags(url), default=None)

    def retag(self, batch: int = 1000) -> Iterator[tuple[int, int]]:
        """Recompute the tags of every stored URL with the current rules (``frontier.tags``) and
        write those that changed, ``batch`` URLs at a time: each batch one query continuing after
        the last id of the one before (never the whole table at once) and one write
        transaction with its tag queues, so the crawl may go on meanwhile. Yields ``(URLs
        looked at, URLs retagged)`` per batch. Statuses, next fetch dates and metadata stay as
        they are: a ``frontier.tags.priority`` shift stays as it was stored (a URL gets the
        shift of its new tags at its next write)."""
        batch = max(1, int(batch))
        # a row untagged before whose metadata names no rule's key cannot have a tag now
        names = [orjson.dumps(k).decode() for k in sorted(self._rule_keys)]
        after = b""  # ids are BLOBs: the empty one sorts before every id
        while True:
            with self._write():
                rows = self.conn.execute(
                    "SELECT id, key, metadata, tag FROM urls WHERE id > ? ORDER BY id LIMIT ?",
                    (after, batch)).fetchall()
                if not rows:
                    return
                changed: list[tuple[str | None, bytes]] = []
                queues: set[tuple[str, str]] = set()
                for uid, key, md, old in rows:
                    if old is None and not any(n in md for n in names):
                        continue
                    new = self._tags_json(orjson.loads(md))
                    if new != old:
                        changed.append((new, uid))
                        queues.update((t, key) for t in (*orjson.loads(old or "[]"),
                                                         *orjson.loads(new or "[]")))
                if changed:  # the triggers move the url_tags rows; the tag queues follow
                    self.conn.executemany("UPDATE urls SET tag = ? WHERE id = ?", changed)
                    self.conn.executemany(_REFRESH_TAG_QUEUE, sorted(queues))
                    self.conn.executemany(_DROP_EMPTY_TAG_QUEUE, sorted(queues))
            after = rows[-1][0]
            yield len(rows), len(changed)

    def charge(self, counter: str, n: int, limit: int, now: float, period: float) -> int:
        """Take up to ``n`` from ``counter``'s allowance of ``limit`` per ``period`` seconds (a
        window starts at its first charge; ``limit < 0``: no limit); how many were granted. One
        transaction, so tasks in several processes share the allowance exactly."""
        try:
            with self._write():
                row = self.conn.execute("SELECT start, used FROM budgets WHERE id = ?",
                                        (counter,)).fetchone()
                start, used = (now, 0) if row is None or now - row[0] >= period else row
                granted = max(0, min(n, n if limit < 0 else limit - used))
                self.conn.execute("INSERT OR REPLACE INTO budgets (id, start, used) "
                                  "VALUES (?, ?, ?)", (counter, start, used + granted))
        except sqlite3.Error as exc:
            raise FrontierError(f"cannot charge {counter!r} in {self.path}: {exc}") from exc
        return granted

    # -- shared-frontier protocol: a local file has no leases and no refresh lag ---------------
    leases_queues = False

    def release(self, key: str, now: float, served: bool = True, defer: bool = False
                ) -> None:
        """Nothing to give back: SQLite spout tasks split the queues by hash, not by lease."""

    def release_all(self, now: float) -> None:
        """See :meth:`release`."""

    def refresh(self) -> None:
        """Committed writes are visible at once."""

    @property
    def location(self) -> str:
        return str(self.path.resolve())

    def close(self) -> None:
        checkpointer = getattr(self, "_checkpointer", None)
        if checkpointer is not None:
            checkpointer.stop()
            self._checkpointer = None
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None  # type: ignore[assignment]

    def __enter__(self) -> "SQLiteFrontier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def crawl_files(default_path: str | Path) -> dict[str, Path]:
    """Crawl ID -> file of every crawl whose file exists: ``DEFAULT``'s at ``default_path``, the
    others beside it (:func:`owler.frontier.crawls.sqlite_path`), each read for the crawl ID it
    records. A file that cannot be read as a crawl's is left out."""
    base = Path(default_path)
    out: dict[str, Path] = {}
    if base.is_file():
        out[DEFAULT_CRAWL] = base
    for path in sorted(base.parent.glob(f"{base.stem}{SEPARATOR}*{base.suffix}")):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                row = conn.execute("SELECT value FROM meta WHERE name = 'crawl_id'").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        if row and sqlite_path(base, row[0]) == path:
            out[row[0]] = path
    return out


def holds_urls(path: Path) -> bool:
    """Whether the frontier file ``path`` holds at least one URL (one index probe)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            return conn.execute("SELECT 1 FROM urls LIMIT 1").fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def remove_crawl_file(path: Path) -> None:
    """Remove a crawl's file with its WAL and shared-memory files."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)


class _Checkpointer:
    """A daemon thread that checkpoints the WAL of ``path`` (``PASSIVE``) every ``interval``
    seconds through a connection of its own; :meth:`stop` ends it after one last checkpoint. A
    checkpoint that fails is logged and tried again at the next interval."""

    def __init__(self, path: Path, interval: float) -> None:
        self.path = path
        self.interval = interval
        self._stop = threading.Event()
        self.checkpoints = 0  # completed, for tests and curious readers
        self._thread = threading.Thread(target=self._run, name=f"checkpoint {path.name}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            log.warning("no checkpoint thread for %s: %s", self.path, exc)
            return
        try:
            while True:
                stopping = self._stop.wait(self.interval)
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.checkpoints += 1
                except sqlite3.Error as exc:
                    log.warning("checkpoint of %s: %s", self.path, exc)
                if stopping:
                    return
        finally:
            conn.close()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait and self._thread is not threading.current_thread():
            self._thread.join(60)


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any exception)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
