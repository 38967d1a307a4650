"""The embedded frontier's counters (schema 5): ``status_counts``, ``due_buckets`` and
``key_counts``, kept in every write's own transaction, always equal what a scan of every URL says
— after every kind of write, after a process killed with SIGKILL in the middle of its batches,
and in a schema 4 file of before, counted once when it is first opened; and (schema 6)
``queue_buckets``, kept by triggers, equal to a scan of the queues."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from owler.constants import SITEMAP_LAST_MODIFIED, Status
from owler.frontier import NEVER, StatusUpdate
from owler.frontier.sqlite import DUE_BUCKET, SQLiteFrontier

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_000_000.0
STATUSES = [Status.FETCHED, Status.FETCH_ERROR, Status.ERROR, Status.REDIRECTION]


def scanned_due(f: SQLiteFrontier, now: float) -> int:
    """due_count's answer from every URL: those due before the end of ``now``'s minute, when one
    is due by ``now`` (else 0)."""
    if not f.conn.execute("SELECT COUNT(*) FROM urls WHERE next_fetch_date <= ?",
                          (now,)).fetchone()[0]:
        return 0
    end = (int(now // DUE_BUCKET) + 1) * DUE_BUCKET
    return f.conn.execute("SELECT COUNT(*) FROM urls WHERE next_fetch_date < ?",
                          (end,)).fetchone()[0]


def assert_counted(f: SQLiteFrontier) -> None:
    assert f.counts() == f.scan_counts()
    buckets = dict(f.conn.execute("SELECT bucket, n FROM due_buckets"))
    scanned = dict(f.conn.execute(
        f"SELECT CAST(next_fetch_date / {DUE_BUCKET} AS INTEGER) AS b, COUNT(*) FROM urls "
        "GROUP BY b"))
    assert buckets == scanned  # no bucket left at zero either
    keys = dict(f.conn.execute("SELECT key, n FROM key_counts"))
    assert keys == dict(f.conn.execute("SELECT key, COUNT(*) FROM urls GROUP BY key"))
    assert f.top_hosts(3) == sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    rows = f.conn.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
    never = f.conn.execute("SELECT COUNT(*) FROM urls WHERE next_fetch_date >= ?",
                           (NEVER,)).fetchone()[0]
    assert (f.count_urls(), f.count_urls(active=True), f.count_urls(active=False)) == (
        rows, rows - never, never)
    for t in (NOW - 3600, NOW - 1, NOW, NOW + 59, NOW + 3600, NOW + 86400 * 30):
        assert f.due_count(t) == scanned_due(f, t), t
        exact = f.conn.execute("SELECT COUNT(*) FROM urls WHERE next_fetch_date <= ?",
                               (t,)).fetchone()[0]
        assert f.has_due(t) == (exact > 0), t
    assert_queues_counted(f)


def random_updates(rnd: random.Random, n: int, urls: int = 400) -> list[StatusUpdate]:
    out = []
    for _ in range(n):
        i = rnd.randrange(urls)
        url, key = f"http://h{i % 13}.com/{i}", f"h{i % 13}.com"
        r = rnd.random()
        nfd = NOW + rnd.choice([-7200, -61, -1, 0, 30, 59, 61, 3600, 86400])
        if r < 0.5:
            out.append(StatusUpdate(url, Status.DISCOVERED, {"d": ["1"]}, nfd, key))
        elif r < 0.6:  # a sitemap refresh of a known URL: may move its date
            out.append(StatusUpdate(url, Status.DISCOVERED, {
                "isDiscoveredOnSitemap": ["true"],
                SITEMAP_LAST_MODIFIED: [f"2030-01-0{rnd.randrange(1, 9)}T00:00:00Z"]}, nfd, key))
        else:
            st = rnd.choice(STATUSES)
            out.append(StatusUpdate(url, st, {"s": [st.value]},
                                    None if st == Status.ERROR else nfd,
                                    key if rnd.random() < 0.9 else "moved.com"))
    return out


def test_counters_equal_a_scan_after_every_kind_of_write(tmp_path):
    rnd = random.Random(7)
    conf = {"frontier.tags": {"isDiscoveredOnSitemap=true": "OnSitemap"}}
    with SQLiteFrontier(tmp_path / "f.sqlite", conf) as f:
        assert f.counts() == f.scan_counts() and f.due_count(NOW) == 0
        f.inject([(f"http://seed{i}.com/", {}) for i in range(30)], NOW)
        assert_counted(f)
        for round_ in range(30):
            f.apply_updates(random_updates(rnd, rnd.randrange(1, 120)))
            assert_counted(f)
            if round_ % 7 == 3:
                key = f"h{rnd.randrange(13)}.com"
                held = f.conn.execute("SELECT COUNT(*) FROM urls WHERE key = ?", (key,)).fetchone()[0]
                assert f.delete(key) == held
                assert_counted(f)
        f.retag()
        assert_counted(f)
        assert sum(f.counts().values()) == f.conn.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
        assert f.counts()["ERROR"] > 0 and f.counts()["DISCOVERED"] > 0
        f.delete(None)
        assert f.counts() == {k: 0 for k in f.counts()} and f.due_count(NOW + 1e9) == 0
        assert f.conn.execute("SELECT COUNT(*) FROM due_buckets").fetchone()[0] == 0


def test_due_count_counts_to_the_minute_and_never_counts_never(tmp_path):
    start = (NOW // DUE_BUCKET) * DUE_BUCKET  # the first second of a minute
    with SQLiteFrontier(tmp_path / "f.sqlite") as f:
        f.apply_updates([StatusUpdate("http://a.com/1", Status.DISCOVERED, {}, start, "a.com"),
                         StatusUpdate("http://a.com/2", Status.DISCOVERED, {}, start + 59, "a.com"),
                         StatusUpdate("http://a.com/3", Status.DISCOVERED, {}, start + 60, "a.com"),
                         StatusUpdate("http://a.com/4", Status.ERROR, {}, None, "a.com")])
        assert f.due_count(start - 1) == 0
        assert f.due_count(start) == 2 and f.has_due(start)  # /2 is due within the minute
        f.apply_updates([StatusUpdate("http://a.com/1", Status.FETCHED, {}, start + 30, "a.com")])
        assert f.due_count(start + 29) == 0 and not f.has_due(start + 29)  # none due yet: exact
        assert f.due_count(start + 30) == 2
        assert f.due_count(start + 60) == 3
        assert f.due_count(NEVER - 1) == 3  # ERROR: never again
        assert f.due_resolution == DUE_BUCKET


WRITER = textwrap.dedent("""
    import random, sys
    from owler.constants import Status
    from owler.frontier import StatusUpdate
    from owler.frontier.sqlite import SQLiteFrontier
    f = SQLiteFrontier(sys.argv[1])
    rnd = random.Random(int(sys.argv[2]))
    n = 0
    while True:
        batch = []
        for _ in range(2000):
            i = rnd.randrange(200_000)
            st = rnd.choice([Status.DISCOVERED] * 3 + [Status.FETCHED, Status.ERROR])
            batch.append(StatusUpdate(f"http://h{i % 97}.com/{i}", st, {}, 
                                      None if st == Status.ERROR else
                                      1.7e9 + rnd.randrange(-9000, 9000), f"h{i % 97}.com"))
        f.apply_updates(batch)
        n += 1
        if n == 3:
            print("writing", flush=True)
""")


def test_counters_equal_a_scan_after_a_writer_killed_mid_batch(tmp_path):
    """A status updater killed with SIGKILL while it writes, five times over one file: each time
    the file is reopened its counters equal a scan (they are written in the batch's own
    transaction, which is whole or absent)."""
    path = tmp_path / "f.sqlite"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rnd = random.Random(3)
    for seed in range(5):
        proc = subprocess.Popen([sys.executable, str(script), str(path), str(seed)],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                env={"PYTHONPATH": str(ROOT / "src")})
        try:
            assert proc.stdout.readline() == "writing\n"
            # a moment inside the next batches: read the file meanwhile, as owler status does
            with SQLiteFrontier(path) as reader:
                for _ in range(rnd.randrange(1, 4)):
                    reader.counts()
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        assert proc.returncode == -signal.SIGKILL
        with SQLiteFrontier(path) as f:
            assert sum(f.counts().values()) > 0
            assert_counted(f)


def test_a_schema_4_file_is_counted_once_when_opened(tmp_path):
    """Yesterday's file (schema 4: no counters): opened, its counters are
    built from a scan, and kept from then on."""
    path = tmp_path / "v4.sqlite"
    rnd = random.Random(11)
    with SQLiteFrontier(path) as f:
        f.apply_updates(random_updates(rnd, 500))
        expected = f.scan_counts()
    conn = sqlite3.connect(path)
    for table in ("status_counts", "due_buckets", "key_counts"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("UPDATE meta SET value = '4' WHERE name = 'schema_version'")
    conn.commit()
    conn.close()
    with SQLiteFrontier(path) as f:
        assert f.counts() == expected
        assert_counted(f)
        f.apply_updates(random_updates(rnd, 300))
        assert_counted(f)
        assert f.conn.execute(
            "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0] == "7"


def test_a_writer_checkpoints_in_a_thread_of_its_own(tmp_path):
    """The first write starts the checkpoint thread, which copies the WAL into the database
    while the writer goes on; close() stops it after a last checkpoint. Interval 0: no thread."""
    path = tmp_path / "f.sqlite"
    with SQLiteFrontier(path, {"frontier.sqlite.checkpoint.interval": 0.05}) as f:
        assert f._checkpointer is None  # a reader has none
        f.apply_updates([StatusUpdate(f"http://a.com/{i}", Status.DISCOVERED, {}, NOW, "a.com")
                         for i in range(2000)])
        thread = f._checkpointer._thread
        assert thread.is_alive()
        # the database file itself holds the rows once a checkpoint copied them from the WAL
        # (nothing else checkpoints: the writer's own threshold is 200,000 pages)
        deadline = time.monotonic() + 60  # a hang guard: the thread checkpoints every 0.05 s
        # (the file grows while a checkpoint copies; the count moves once it has returned)
        while ((path.stat().st_size <= 200_000 or f._checkpointer.checkpoints == 0)
               and time.monotonic() < deadline):
            threading.Event().wait(0.05)
        assert path.stat().st_size > 200_000, "no checkpoint copied the WAL within 60 s (hang?)"
        assert f._checkpointer.checkpoints > 0
        assert f.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 4 * 50000
    assert not thread.is_alive()
    with SQLiteFrontier(path, {"frontier.sqlite.checkpoint.interval": 0}) as f:
        f.apply_updates([StatusUpdate("http://b.com/", Status.DISCOVERED, {}, NOW, "b.com")])
        assert f._checkpointer is None
        assert f.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 50000


def scanned_queues(f: SQLiteFrontier) -> dict[int, int]:
    return dict(f.conn.execute(f"SELECT CAST(next_due / {DUE_BUCKET} AS INTEGER) AS b, COUNT(*) "
                               "FROM queues GROUP BY b"))


def assert_queues_counted(f: SQLiteFrontier) -> None:
    """``queue_buckets`` equals a scan of ``queues``, and queue_count answers as the scan does."""
    assert dict(f.conn.execute("SELECT bucket, n FROM queue_buckets")) == scanned_queues(f)
    assert f.queue_count() == f.conn.execute("SELECT COUNT(*) FROM queues").fetchone()[0]
    dates = [d for (d,) in f.conn.execute("SELECT next_due FROM queues")]
    for t in {NOW - 3600, NOW - 1, NOW, NOW + 59, NOW + 3600, *dates[:20],
              *(d - 0.001 for d in dates[:20])}:
        assert f.queue_count(t) == sum(d <= t for d in dates), t


def test_queue_counts_equal_a_scan_after_writes_rounds_blocks_and_deletes(tmp_path):
    """Schema 6: the queues per minute of their date, kept by triggers whatever moves a queue
    (new URLs, rewrites, a spout's rounds, a block, a deleted queue), and queue_count(now) exact
    to the second."""
    rnd = random.Random(5)
    with SQLiteFrontier(tmp_path / "f.sqlite", {"frontier.queue.round.delay": 30}) as f:
        for i in range(6):
            f.apply_updates(random_updates(rnd, 400))
            assert_queues_counted(f)
            got = f.due(NOW + 3600 * i, 20, 5)  # rounds begin: queues paused
            for key in {k for _, _, k in got}:
                f.release(key, NOW + 3600 * i)
            assert_queues_counted(f)
        key = f.conn.execute("SELECT key FROM queues LIMIT 1").fetchone()[0]
        f.block_queue(key, NOW + 7200, NOW)
        f.delete(key)
        assert_queues_counted(f)
        f.delete()
        assert f.queue_count() == 0 and f.queue_count(NOW + 10 ** 9) == 0
        assert f.conn.execute("SELECT COUNT(*) FROM queue_buckets").fetchone()[0] == 0


def test_a_schema_5_file_counts_its_queues_once_when_opened(tmp_path):
    """Yesterday's file (schema 5: no queue_buckets): opened, the queues are counted from the
    queues table (its URLs' counters are kept as they are), and kept by the triggers after."""
    path = tmp_path / "v5.sqlite"
    rnd = random.Random(12)
    with SQLiteFrontier(path) as f:
        f.apply_updates(random_updates(rnd, 500))
        queues = f.conn.execute("SELECT COUNT(*) FROM queues").fetchone()[0]
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE queue_buckets")
    for name in ("insert", "update", "delete"):
        conn.execute(f"DROP TRIGGER queues_count_{name}")
    conn.execute("UPDATE status_counts SET n = n + 1000")  # not recounted from the URLs
    conn.execute("UPDATE meta SET value = '5' WHERE name = 'schema_version'")
    conn.commit()
    conn.close()
    with SQLiteFrontier(path) as f:
        assert f.queue_count() == queues > 0
        assert f.counts() != f.scan_counts()  # (the URLs were not scanned again)
        assert_queues_counted(f)
        f.apply_updates(random_updates(rnd, 300))
        assert_queues_counted(f)
        assert f.conn.execute(
            "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0] == "7"


def test_a_schema_6_file_gets_its_keyed_tables_without_rowid(tmp_path):
    """Yesterday's file (schema 6: ``queues`` and ``key_counts`` rowid tables with a key index):
    opened, both are copied into tables WITHOUT ROWID with every row, their indexes and the
    queue triggers made again; the counters agree with a scan and stay exact as writes go on."""
    path = tmp_path / "v6.sqlite"
    rnd = random.Random(13)
    with SQLiteFrontier(path) as f:
        f.apply_updates(random_updates(rnd, 800))
        before = {t: sorted(f.conn.execute(f"SELECT * FROM {t}").fetchall())
                  for t in ("queues", "key_counts", "queue_buckets")}
    conn = sqlite3.connect(path)
    for table, cols in (("queues", "key TEXT PRIMARY KEY, next_due REAL NOT NULL"),
                        ("key_counts", "key TEXT PRIMARY KEY, n INTEGER NOT NULL")):
        conn.execute(f"CREATE TABLE {table}_old ({cols})")
        conn.execute(f"INSERT INTO {table}_old SELECT * FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_old RENAME TO {table}")
    conn.execute("CREATE INDEX queues_next_due ON queues (next_due)")
    conn.execute("CREATE INDEX key_counts_n ON key_counts (n DESC, key)")
    from owler.frontier.sqlite import _TRIGGERS

    for stmt in _TRIGGERS:  # schema 6's triggers, on the rowid queues table
        conn.execute(stmt)
    conn.execute("UPDATE meta SET value = '6' WHERE name = 'schema_version'")
    conn.commit()
    assert "WITHOUT ROWID" not in conn.execute(
        "SELECT sql FROM sqlite_schema WHERE name = 'queues'").fetchone()[0]
    assert conn.execute("SELECT COUNT(*) FROM sqlite_schema WHERE type = 'trigger' AND "
                        "tbl_name = 'queues'").fetchone()[0] == 3
    conn.close()
    with SQLiteFrontier(path) as f:
        for table in ("queues", "key_counts"):
            assert "WITHOUT ROWID" in f.conn.execute(
                "SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).fetchone()[0]
        assert {t: sorted(f.conn.execute(f"SELECT * FROM {t}").fetchall())
                for t in before} == before
        names = {n for (n,) in f.conn.execute("SELECT name FROM sqlite_schema")}
        assert {"queues_next_due", "key_counts_n", "queues_count_insert", "queues_count_update",
                "queues_count_delete"} <= names
        assert not any(n.endswith("_v6") for n in names)
        assert f.counts() == f.scan_counts()
        assert_queues_counted(f)
        f.apply_updates(random_updates(rnd, 400))
        assert f.counts() == f.scan_counts()
        assert_queues_counted(f)
        assert f.top_hosts(3) == f.conn.execute(
            "SELECT key, COUNT(*) AS n FROM urls GROUP BY key ORDER BY n DESC, key LIMIT 3"
        ).fetchall()
        assert f.conn.execute(
            "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0] == "7"
