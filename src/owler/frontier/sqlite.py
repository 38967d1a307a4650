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
    ``meta(name, value)``: ``schema_version`` (a schema 1 file, with hex ids, is migrated when
    opened).

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
    A commit writes every B-tree page the batch touched to the WAL; the URL id index and the key
    index take random inserts, so a batch of N new URLs dirties about 2N pages until N approaches
    the index size. Larger batches (``status.updater.batch.size``) are therefore cheaper per URL.
    ``frontier.sqlite.wal.autocheckpoint`` (pages, default 50000 = 200 MB of WAL) keeps checkpoints
    (copy WAL → database + two fsyncs) rare: a page rewritten by many batches is copied once per
    checkpoint. SQLite's default of 1000 pages checkpoints after nearly every batch; 10000 pages
    cost a third of the write throughput against 50000 (measured).

Config keys read: ``frontier.sqlite.synchronous`` (NORMAL), ``frontier.sqlite.busy.timeout``
(30 s), ``frontier.sqlite.cache.mb`` (64), ``frontier.sqlite.wal.autocheckpoint`` (50000 pages),
``partition.url.mode`` (for :meth:`inject`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any, Container, Iterable, Mapping

import orjson

from owler import conf as C
from owler.conf import ConfError
from owler.constants import STATUS_NAMES, Status
from owler.frontier import DEFAULT_KEY, NEVER, FrontierError, FrontierRecord, StatusUpdate

SCHEMA_VERSION = "2"

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS urls (
        id BLOB PRIMARY KEY,
        url TEXT NOT NULL,
        status TEXT NOT NULL,
        next_fetch_date REAL NOT NULL,
        key TEXT NOT NULL,
        metadata TEXT NOT NULL,
        updated REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS urls_key_next_fetch_date ON urls (key, next_fetch_date)",
    "CREATE TABLE IF NOT EXISTS queues (key TEXT PRIMARY KEY, next_due REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS queues_next_due ON queues (next_due)",
]

# DISCOVERED never overwrites a known URL; any other status replaces status, date, key, metadata.
# One statement for both keeps the batch's order (a FETCHED then a DISCOVERED of the same URL).
_UPSERT = """
INSERT INTO urls (id, url, status, next_fetch_date, key, metadata, updated)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    status = excluded.status,
    next_fetch_date = excluded.next_fetch_date,
    key = excluded.key,
    metadata = excluded.metadata,
    updated = excluded.updated
WHERE excluded.status != 'DISCOVERED'
"""

_INSERT_NEW = """
INSERT OR IGNORE INTO urls (id, url, status, next_fetch_date, key, metadata, updated)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

# Recompute a queue's earliest date from the (key, next_fetch_date) index: one index probe.
# (A DISCOVERED of a known URL may name a key without rows: HAVING skips it.)
_REFRESH_QUEUE = """
INSERT INTO queues (key, next_due)
SELECT ?1, MIN(next_fetch_date) FROM urls WHERE key = ?1 HAVING MIN(next_fetch_date) IS NOT NULL
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

_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def _url_id(url: str) -> bytes:
    """The row id of a URL: the first 16 bytes of its sha256."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).digest()[:16]


def _sha256_hex(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def _dump(md: Mapping[str, list[str]]) -> str:
    return orjson.dumps(md).decode("utf-8")


def _stored_date(next_fetch_date: float | None) -> float:
    if next_fetch_date is None:
        return NEVER
    return min(float(next_fetch_date), NEVER)


class SQLiteFrontier:
    """The frontier in one SQLite file (created with its parent folder if missing).

    One instance = one connection; use one instance per thread or process.
    """

    def __init__(self, path: str | Path, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.path = Path(path)
        self.partition_mode = C.get_str(conf, "partition.url.mode", "byDomain") or "byDomain"
        sync = (C.get_str(conf, "frontier.sqlite.synchronous", "NORMAL") or "NORMAL").upper()
        if sync not in _SYNC_MODES:
            raise ConfError(
                f"frontier.sqlite.synchronous: expected one of {', '.join(_SYNC_MODES)}, got {sync!r}"
            )
        busy = C.get_float(conf, "frontier.sqlite.busy.timeout", 30.0)
        cache_mb = C.get_int(conf, "frontier.sqlite.cache.mb", 64)
        ckpt = C.get_int(conf, "frontier.sqlite.wal.autocheckpoint", 50000)
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
            elif row is not None and row[0] != SCHEMA_VERSION:
                raise FrontierError(
                    f"{self.path} has frontier schema version {row[0]}, this code expects "
                    f"{SCHEMA_VERSION}; use a new frontier.sqlite.path"
                )
            for stmt in _SCHEMA:
                self.conn.execute(stmt)
            if row is None:
                self.conn.execute(
                    "INSERT INTO meta (name, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                )

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

    def _write(self) -> "_Transaction":
        return _Transaction(self.conn)

    # -- writes ----------------------------------------------------------------------------------
    def apply_updates(self, updates: Iterable[StatusUpdate]) -> list[int]:
        """Write all updates in ONE transaction; returns ``[]`` (no update failed alone) after
        COMMIT, raises (nothing written) on failure. DISCOVERED = insert if unknown; other statuses
        replace the record."""
        now = time.time()
        rows = []
        lowered: dict[str, float] = {}  # key -> earliest date among its new DISCOVERED rows
        rescheduled: set[str] = set()  # keys with a rewritten URL: recompute their earliest date
        discovered = Status.DISCOVERED.value
        for u in updates:
            if not isinstance(u, StatusUpdate):
                raise TypeError(f"apply_updates expects StatusUpdate objects, got {type(u).__name__}")
            status = u.status.value if isinstance(u.status, Status) else Status(u.status).value
            key = u.key or DEFAULT_KEY
            nfd = _stored_date(u.next_fetch_date)
            rows.append((_url_id(u.url), u.url, status, nfd, key, _dump(u.metadata or {}), now))
            if status == discovered:
                if nfd < lowered.get(key, NEVER + 1):
                    lowered[key] = nfd
            else:
                rescheduled.add(key)
        if not rows:
            return []
        with self._write():
            self.conn.executemany(_UPSERT, rows)
            self.conn.executemany(_LOWER_QUEUE, [(k, d) for k, d in lowered.items()
                                                 if k not in rescheduled])
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in rescheduled])
        return []

    def inject(self, seeds: Iterable[tuple[str, Mapping[str, list[str]]]], now: float) -> int:
        """Add seed URLs as DISCOVERED, due ``now``, never overwriting a known URL.

        Each URL is normalised (``owler.urls.normalize``) and keyed by ``partition.url.mode``.
        Returns how many were new. A URL that does not normalise raises ``ValueError`` before
        anything is written (validate with :func:`owler.seeds.parse_seeds` first).
        """
        from owler.urls import normalize, partition_key

        rows = []
        keys: set[str] = set()
        for url, md in seeds:
            norm = normalize(url)
            if norm is None:
                raise ValueError(f"cannot inject {url!r}: not a valid http(s) URL")
            try:
                key = partition_key(norm, self.partition_mode)
            except ValueError:
                key = DEFAULT_KEY
            rows.append((_url_id(norm), norm, Status.DISCOVERED.value, float(now), key,
                         _dump(dict(md or {})), time.time()))
            keys.add(key)
        if not rows:
            return 0
        with self._write():
            before = self.conn.total_changes
            self.conn.executemany(_INSERT_NEW, rows)
            inserted = self.conn.total_changes - before
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in keys])
        return inserted

    # -- the spout's query -----------------------------------------------------------------------
    def due(
        self, now: float, max_buckets: int, per_bucket: int, exclude: Container[str] = ()
    ) -> list[tuple[str, dict[str, list[str]], str]]:
        """URLs with ``next_fetch_date <= now`` as ``(url, metadata, key)``.

        At most ``max_buckets`` keys (the most overdue first: smallest earliest date, then key) and
        ``per_bucket`` URLs per key (earliest first), interleaved round-robin: the first URL of every
        key, then the second of every key, … URLs (or their sha256 ids) in ``exclude`` — the
        spout's in-flight set — are skipped and the next due URLs of the key are taken instead.
        """
        if max_buckets <= 0 or per_bucket <= 0:
            return []
        cur = self.conn.cursor()
        cur.execute("BEGIN")  # one snapshot for the whole query
        try:
            keys = [r[0] for r in cur.execute(
                "SELECT key FROM queues WHERE next_due <= ? ORDER BY next_due, key LIMIT ?",
                (now, max_buckets),
            )]
            check_ids = bool(exclude)
            stale: list[str] = []  # queues whose earliest date is out of date (a URL changed key)
            buckets: list[list[tuple[str, dict, str]]] = []
            for key in keys:
                bucket = []
                skipped = 0
                rows = cur.execute(
                    "SELECT url, metadata FROM urls WHERE key = ? AND next_fetch_date <= ? "
                    "ORDER BY next_fetch_date, url",
                    (key, now),
                )
                for url, md in rows:
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
        finally:
            cur.execute("COMMIT")
        if stale:
            self._refresh_queues(stale)
        out = []
        for i in range(per_bucket):
            for bucket in buckets:
                if i < len(bucket):
                    out.append(bucket[i])
        return out

    def _refresh_queues(self, keys: list[str]) -> None:
        """Recompute (or drop) queues whose stored earliest date is stale. Happens only when a URL
        was rewritten under another partition key (``partition.url.mode`` changed)."""
        with self._write():
            self.conn.executemany(_REFRESH_QUEUE, [(k,) for k in keys])
            self.conn.executemany(_DROP_EMPTY_QUEUE, [(k,) for k in keys])

    # -- statistics ------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """URLs per status; every status name is present (0 when none)."""
        out = {name: 0 for name in STATUS_NAMES}
        for status, n in self.conn.execute("SELECT status, COUNT(*) FROM urls GROUP BY status"):
            out[status] = n
        return out

    def due_count(self, now: float) -> int:
        """URLs with ``next_fetch_date <= now`` (through the due queues and the key index)."""
        return self.conn.execute(
            "SELECT COUNT(*) FROM queues AS q JOIN urls AS u ON u.key = q.key "
            "AND u.next_fetch_date <= ?1 WHERE q.next_due <= ?1", (now,)
        ).fetchone()[0]

    def queue_count(self, now: float | None = None) -> int:
        """Distinct partition keys; with ``now``, only keys that have a due URL."""
        if now is None:
            return self.conn.execute("SELECT COUNT(*) FROM queues").fetchone()[0]
        return self.conn.execute(
            "SELECT COUNT(*) FROM queues WHERE next_due <= ?", (now,)
        ).fetchone()[0]

    def top_hosts(self, n: int = 10) -> list[tuple[str, int]]:
        """The ``n`` partition keys with the most URLs, largest first."""
        return [(k, c) for k, c in self.conn.execute(
            "SELECT key, COUNT(*) AS c FROM urls GROUP BY key ORDER BY c DESC, key LIMIT ?", (n,)
        )]

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

    # -- shared-frontier protocol: a local file has no leases and no refresh lag ---------------
    leases_queues = False

    def release(self, key: str, now: float, served: bool = True) -> None:
        """Nothing to give back: SQLite spout tasks split the queues by hash, not by lease."""

    def release_all(self, now: float) -> None:
        """See :meth:`release`."""

    def refresh(self) -> None:
        """Committed writes are visible at once."""

    @property
    def location(self) -> str:
        return str(self.path.resolve())

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None  # type: ignore[assignment]

    def __enter__(self) -> "SQLiteFrontier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
