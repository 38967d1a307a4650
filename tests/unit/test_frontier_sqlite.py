"""SQLiteFrontier: create-only DISCOVERED, due() query, counts, concurrency of two processes' worth
of connections."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time

import pytest

from owler.conf import ConfError
from owler.constants import STATUS_NAMES, Status
from owler.frontier import NEVER, FrontierError, StatusUpdate, open_frontier
from owler.frontier.sqlite import SQLiteFrontier

NOW = 1_700_000_000.0


@pytest.fixture
def fr(tmp_path):
    f = SQLiteFrontier(tmp_path / "sub" / "frontier.sqlite", {"partition.url.mode": "byHost"})
    yield f
    f.close()


def upd(url, status=Status.DISCOVERED, nfd=NOW, key=None, md=None):
    return StatusUpdate(url, status, md or {}, nfd, key or url.split("/")[2])


def test_creates_parent_dir_wal_and_schema(tmp_path):
    path = tmp_path / "a" / "b" / "f.sqlite"
    f = SQLiteFrontier(path)
    f.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()[0] == "7"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"urls", "meta", "queues"} <= tables


def test_wrong_schema_version_is_a_clear_error(tmp_path):
    path = tmp_path / "f.sqlite"
    SQLiteFrontier(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value='99' WHERE name='schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(FrontierError, match="schema version 99"):
        SQLiteFrontier(path)


def test_a_schema_1_frontier_is_migrated_with_every_url(tmp_path):
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE urls (id TEXT PRIMARY KEY, url TEXT NOT NULL, status TEXT NOT NULL,
            next_fetch_date REAL NOT NULL, key TEXT NOT NULL, metadata TEXT NOT NULL,
            updated REAL NOT NULL);
        CREATE INDEX urls_key_next_fetch_date ON urls (key, next_fetch_date);
        CREATE TABLE queues (key TEXT PRIMARY KEY, next_due REAL NOT NULL);
    """)
    for i, status in enumerate(["DISCOVERED", "FETCHED"]):
        url = f"http://a.com/{i}"
        conn.execute("INSERT INTO urls VALUES (?, ?, ?, ?, 'a.com', '{\"depth\": [\"1\"]}', 1.0)",
                     (hashlib.sha256(url.encode()).hexdigest(), url, status, NOW + i))
    conn.execute("INSERT INTO queues VALUES ('a.com', ?)", (NOW,))
    conn.commit()
    conn.close()
    with SQLiteFrontier(path) as f:
        assert f.counts()["DISCOVERED"] == 1 and f.counts()["FETCHED"] == 1
        rec = f.get("http://a.com/1")
        assert rec.status == Status.FETCHED and rec.metadata == {"depth": ["1"]}
        assert f.due(NOW, 10, 10) == [("http://a.com/0", {"depth": ["1"]}, "a.com")]
        f.apply_updates([upd("http://a.com/0", Status.FETCHED, NOW + 60)])  # ids are new ones
        assert f.counts()["FETCHED"] == 2 and sum(f.counts().values()) == 2
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()[0] == "7"
    assert conn.execute("SELECT typeof(id) FROM urls LIMIT 1").fetchone()[0] == "blob"


def test_not_a_database_and_directory(tmp_path):
    bad = tmp_path / "junk.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(FrontierError, match="cannot open"):
        SQLiteFrontier(bad)
    with pytest.raises(FrontierError, match="directory"):
        SQLiteFrontier(tmp_path)


def test_bad_synchronous_key(tmp_path):
    with pytest.raises(ConfError, match="frontier.sqlite.synchronous"):
        SQLiteFrontier(tmp_path / "f.sqlite", {"frontier.sqlite.synchronous": "SOMETIMES"})


def test_open_frontier_factory(tmp_path):
    f = open_frontier({"frontier.sqlite.path": str(tmp_path / "x.sqlite")})
    assert isinstance(f, SQLiteFrontier)
    f.close()
    # nothing listens on this port: a clear error naming the address, after the retries
    with pytest.raises(FrontierError, match="cannot reach OpenSearch at http://127.0.0.1:9"):
        open_frontier({"frontier.backend": "opensearch", "opensearch.addresses": "127.0.0.1:9",
                       "opensearch.max.retries": 0})
    with pytest.raises(ConfError, match="unknown backend"):
        open_frontier({"frontier.backend": "redis"})


def test_shared_frontier_protocol_is_trivial_for_a_local_file(tmp_path):
    path = tmp_path / "sub" / "f.sqlite"
    with open_frontier({"frontier.sqlite.path": str(path)}) as f:
        assert f.leases_queues is False
        assert f.location == str(path.resolve())
        f.inject([("http://a.com/", {})], now=1.0)
        f.refresh()
        f.release("a.com", 2.0)
        f.release_all(2.0)
        # nothing was leased, so the queue is still due after a release
        assert [r[0] for r in f.due(3.0, 10, 10)] == ["http://a.com/"]


def test_discovered_never_overwrites(fr):
    url = "http://a.com/x"
    fr.apply_updates([upd(url, Status.FETCHED, NOW + 3600, md={"k": ["v"]})])
    fr.apply_updates([upd(url, Status.DISCOVERED, NOW, md={"other": ["1"]})])
    rec = fr.get(url)
    assert rec.status == Status.FETCHED
    assert rec.next_fetch_date == NOW + 3600
    assert rec.metadata == {"k": ["v"]}


def test_other_statuses_overwrite_and_order_in_batch(fr):
    url = "http://a.com/x"
    fr.apply_updates([upd(url), upd(url, Status.FETCHED, NOW + 60, md={"a": ["1"]}), upd(url)])
    rec = fr.get(url)
    assert rec.status == Status.FETCHED and rec.metadata == {"a": ["1"]}
    fr.apply_updates([upd(url, Status.FETCH_ERROR, NOW + 120, md={"fetch.error.count": ["1"]})])
    rec = fr.get(url)
    assert rec.status == Status.FETCH_ERROR and rec.next_fetch_date == NOW + 120
    assert rec.metadata == {"fetch.error.count": ["1"]}
    assert rec.key == "a.com"


def test_never_again_is_stored_far_and_read_as_none(fr):
    fr.apply_updates([upd("http://a.com/e", Status.ERROR, None)])
    assert fr.get("http://a.com/e").next_fetch_date is None
    assert fr.due(NEVER - 1, 10, 10) == []
    assert fr.due_count(NOW * 100) == 0
    assert fr.get("http://unknown.com/") is None


def test_apply_updates_rejects_garbage_and_writes_nothing(fr):
    with pytest.raises(TypeError):
        fr.apply_updates([upd("http://a.com/1"), None])
    assert fr.get("http://a.com/1") is None


def test_failed_transaction_rolls_back(fr, monkeypatch):
    fr.apply_updates([upd("http://a.com/1")])
    bad = upd("http://a.com/2")
    bad.metadata = {"x": [object()]}  # not JSON-serialisable: fails before BEGIN
    with pytest.raises(TypeError):
        fr.apply_updates([upd("http://a.com/3"), bad])
    assert fr.get("http://a.com/3") is None
    # a failure inside the transaction: the connection is usable afterwards
    import owler.frontier.sqlite as mod

    monkeypatch.setattr(mod, "_REFRESH_QUEUE", "INSERT INTO nonexistent VALUES (?)")
    with pytest.raises(sqlite3.OperationalError):
        fr.apply_updates([upd("http://a.com/4")])
    monkeypatch.undo()
    assert fr.get("http://a.com/4") is None
    fr.apply_updates([upd("http://a.com/5")])
    assert fr.get("http://a.com/5") is not None


def test_inject_normalizes_and_is_idempotent(fr):
    seeds = [("HTTP://Example.COM/a#frag", {"tag": ["x"]}), ("http://b.org/", {})]
    assert fr.inject(seeds, NOW) == 2
    assert fr.inject(seeds, NOW) == 0
    rec = fr.get("http://example.com/a")
    assert rec.status == Status.DISCOVERED and rec.metadata == {"tag": ["x"]}
    assert rec.key == "example.com" and rec.next_fetch_date == NOW
    assert fr.counts()["DISCOVERED"] == 2


def test_inject_does_not_overwrite_fetched(fr):
    fr.apply_updates([upd("http://a.com/", Status.FETCHED, NOW + 999)])
    assert fr.inject([("http://a.com/", {})], NOW) == 0
    assert fr.get("http://a.com/").status == Status.FETCHED


def test_inject_rejects_invalid_before_writing(fr):
    with pytest.raises(ValueError, match="ftp"):
        fr.inject([("http://ok.com/", {}), ("ftp://x.com/", {})], NOW)
    assert fr.get("http://ok.com/") is None


def test_inject_partition_by_domain(tmp_path):
    f = SQLiteFrontier(tmp_path / "f.sqlite", {"partition.url.mode": "byDomain"})
    f.inject([("http://www.bbc.co.uk/news", {})], NOW)
    assert f.get("http://www.bbc.co.uk/news").key == "bbc.co.uk"
    f.close()


def _fill(fr):
    ups = []
    for host, n in (("a.com", 5), ("b.com", 3), ("c.com", 1)):
        for i in range(n):
            ups.append(upd(f"http://{host}/{i}", nfd=NOW - 100 + i + (0 if host == "a.com" else 10)))
    ups.append(upd("http://d.com/future", nfd=NOW + 10))
    fr.apply_updates(ups)


def test_due_round_robin_per_bucket_and_now(fr):
    _fill(fr)
    got = [u for u, _, _ in fr.due(NOW, max_buckets=10, per_bucket=2)]
    # a.com is the most overdue queue, then b.com and c.com (same earliest date: by key)
    assert got == ["http://a.com/0", "http://b.com/0", "http://c.com/0",
                   "http://a.com/1", "http://b.com/1"]
    assert "http://d.com/future" not in got
    assert [u for u, _, _ in fr.due(NOW + 10, 10, 1)][-1] == "http://d.com/future"


def test_due_max_buckets_and_keys(fr):
    _fill(fr)
    rows = fr.due(NOW, max_buckets=2, per_bucket=10)
    assert {k for _, _, k in rows} == {"a.com", "b.com"}
    assert len(rows) == 8
    assert fr.due(NOW, 0, 10) == [] and fr.due(NOW, 10, 0) == []


def test_due_exclude_urls_and_ids(fr):
    _fill(fr)
    excl = {"http://a.com/0", hashlib.sha256(b"http://a.com/1").hexdigest()}
    got = [u for u, _, _ in fr.due(NOW, 1, 2, exclude=excl)]
    assert got == ["http://a.com/2", "http://a.com/3"]


def test_due_returns_metadata(fr):
    fr.apply_updates([upd("http://a.com/", md={"depth": ["2"], "tag": ["x", "y"]})])
    assert fr.due(NOW, 1, 1) == [("http://a.com/", {"depth": ["2"], "tag": ["x", "y"]}, "a.com")]


def test_queue_follows_rescheduling(fr):
    fr.apply_updates([upd("http://a.com/1"), upd("http://b.com/1", nfd=NOW - 5)])
    assert fr.queue_count() == 2 and fr.queue_count(NOW) == 2
    fr.apply_updates([upd("http://a.com/1", Status.FETCHED, NOW + 86400)])
    assert fr.queue_count(NOW) == 1
    assert [k for _, _, k in fr.due(NOW, 10, 10)] == ["b.com"]
    assert fr.queue_count() == 2


def test_discovery_lowers_a_queue_date_and_never_raises_it(fr):
    fr.apply_updates([upd("http://a.com/1", nfd=NOW + 100)])
    assert fr.queue_count(NOW) == 0
    fr.apply_updates([upd("http://a.com/2", nfd=NOW + 200)])  # later: the queue keeps +100
    assert fr.queue_count(NOW + 150) == 1
    fr.apply_updates([upd("http://a.com/3", nfd=NOW - 1)])  # earlier: the queue is due now
    assert [u for u, _, _ in fr.due(NOW, 10, 10)] == ["http://a.com/3"]


def test_counts_due_count_top_hosts(fr):
    assert fr.counts() == {name: 0 for name in STATUS_NAMES}
    _fill(fr)
    fr.apply_updates([upd("http://a.com/0", Status.FETCHED, NOW + 60),
                      upd("http://a.com/1", Status.REDIRECTION, NOW + 60),
                      upd("http://b.com/0", Status.ERROR, None),
                      upd("http://b.com/1", Status.FETCH_ERROR, NOW - 1)])
    c = fr.counts()
    assert set(c) == set(STATUS_NAMES)
    assert c == {"DISCOVERED": 6, "FETCHED": 1, "FETCH_ERROR": 1, "REDIRECTION": 1, "ERROR": 1}
    # 5 DISCOVERED + 1 FETCH_ERROR, and d.com, due 10 s later in the same minute: the count is to
    # the minute (DUE_BUCKET), whether anything is due exact
    assert fr.due_count(NOW) == 7 and fr.has_due(NOW)
    # at NOW - 97.5 only a.com/2 is due (NOW - 98), and the minute counts its neighbours too
    assert fr.due_count(NOW - 97.5) == 5 and fr.due_count(NOW - 98.5) == 0
    assert fr.due_count(NOW - 300) == 0 and not fr.has_due(NOW - 300)
    assert fr.due_count(NOW + 30) == 7  # NOW + 60 is in the next minute
    assert fr.due_count(NOW + 600) == 9 == fr.due_count(NOW + 86400)  # never again: not due
    assert fr.top_hosts(2) == [("a.com", 5), ("b.com", 3)]
    assert fr.queue_count() == 4


def test_two_connections_concurrently(tmp_path):
    """A spout (reads) and a status updater (writes) on the same file in parallel: no
    'database is locked', every write lands."""
    path = tmp_path / "f.sqlite"
    SQLiteFrontier(path).close()
    errors: list[BaseException] = []
    stop = threading.Event()
    n_batches, batch = 40, 200

    def writer(tag):
        try:
            f = SQLiteFrontier(path)
            for b in range(n_batches):
                f.apply_updates([upd(f"http://{tag}{i % 17}.com/{b}/{i}") for i in range(batch)])
            f.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader():
        try:
            f = SQLiteFrontier(path)
            while not stop.is_set():
                f.due(NOW, 100, 5)
                f.counts()
                f.due_count(NOW)
            f.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("w", "v")]
    r = threading.Thread(target=reader)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    r.join()
    assert errors == []
    f = SQLiteFrontier(path)
    assert f.counts()["DISCOVERED"] == 2 * n_batches * batch
    f.close()


def test_stale_queue_is_repaired_by_due(fr):
    """An ignored DISCOVERED of a known URL may lower its queue's date; due() repairs it."""
    fr.apply_updates([upd("http://a.com/1", Status.FETCHED, NOW + 3600)])
    fr.apply_updates([upd("http://a.com/1", Status.DISCOVERED, NOW - 10)])
    assert fr.get("http://a.com/1").status == Status.FETCHED
    assert fr.due(NOW, 10, 10) == []
    assert fr.queue_count(NOW) == 0  # repaired
    # a URL rewritten under another key leaves an empty queue behind: dropped on the next due()
    fr.apply_updates([upd("http://b.com/1", nfd=NOW - 5, key="old")])
    fr.apply_updates([upd("http://b.com/1", Status.FETCH_ERROR, NOW - 5, key="new")])
    assert [k for _, _, k in fr.due(NOW, 10, 10)] == ["new"]
    assert fr.queue_count() == 2  # a.com and new


def test_a_blocked_queue_is_not_served_before_its_block_ends(fr):
    now = time.time()  # blocks that have ended (by the clock) are dropped on the next write
    fr.apply_updates([upd("http://a.example/1", nfd=now), upd("http://a.example/2", nfd=now),
                      upd("http://b.example/1", nfd=now)])
    throttled = StatusUpdate("http://a.example/1", Status.FETCH_ERROR, {}, now + 30,
                             "a.example", block_until=now + 30)
    fr.apply_updates([throttled])
    assert [u for u, _, _ in fr.due(now + 1, 10, 10)] == ["http://b.example/1"]
    # a shorter block never shortens it; the block ends on time
    fr.apply_updates([StatusUpdate("http://a.example/1", Status.FETCH_ERROR, {}, now + 30,
                                   "a.example", block_until=now + 5)])
    assert "http://a.example/2" not in [u for u, _, _ in fr.due(now + 10, 10, 10)]
    assert "http://a.example/2" in [u for u, _, _ in fr.due(now + 31, 10, 10)]


def test_a_blocked_queue_is_not_served_to_an_interest_spout(tmp_path):
    now = time.time()
    conf = {"partition.url.mode": "byHost", "frontier.tags": {"isSitemap=true": "Sitemap"},
            "frontier.interest.tags": ["Sitemap"]}
    with SQLiteFrontier(tmp_path / "f.sqlite", conf) as f:
        f.apply_updates([upd("http://a.example/sm.xml", nfd=now, md={"isSitemap": ["true"]})])
        f.apply_updates([StatusUpdate("http://a.example/x", Status.FETCH_ERROR, {}, now,
                                      "a.example", block_until=now + 60)])
        assert f.due(now + 1, 10, 10) == []
        assert [u for u, _, _ in f.due(now + 61, 10, 10)] == ["http://a.example/sm.xml"]


def test_urls_of_one_date_come_in_the_order_they_were_written(fr):
    """Ties on the date are broken by the order of writing, which the key index holds (no sort of
    every URL of the date: a queue injected at one date can hold millions)."""
    names = ["z", "b", "y", "a", "x", "c"]
    fr.apply_updates([upd(f"http://a.com/{n}", nfd=NOW) for n in names[:3]])
    fr.apply_updates([upd(f"http://a.com/{n}", nfd=NOW) for n in names[3:]])
    got = [u for u, _, _ in fr.due(NOW, 1, 6)]
    assert got == [f"http://a.com/{n}" for n in names]
    assert [u for u, _, _ in fr.due(NOW, 1, 2, exclude={got[0]})] == got[1:3]


def test_latest_values_walk_a_queue_from_its_latest_next_fetch_dates(fr):
    """What seeds a parser's near-duplicate memory (owler.parse.simhash.FrontierSeeds): the
    values of the queue's URLs with the latest dates, never-again first, from the key index."""
    fr.apply_updates([
        upd("http://a.example/1", Status.FETCHED, NOW + 100, md={"simhash": ["01"]}),
        upd("http://a.example/2", Status.FETCHED, NOW + 300,
            md={"simhash": ["02", "x"], "parse.title": ["two"]}),
        upd("http://a.example/3", Status.REDIRECTION, NOW + 200),  # no SimHash
        upd("http://a.example/4", Status.FETCHED, None, md={"simhash": ["04"]}),  # never again
        upd("http://a.example/5", Status.DISCOVERED, NOW),
        upd("http://b.example/1", Status.FETCHED, NOW + 900, md={"simhash": ["b1"]})])
    assert fr.latest_values("a.example", "simhash", 10) == [
        ("http://a.example/4", "04"), ("http://a.example/2", "02"), ("http://a.example/1", "01")]
    # n is the URLs looked at: the redirect takes a place, so fewer values come back
    assert fr.latest_values("a.example", "simhash", 3) == [
        ("http://a.example/4", "04"), ("http://a.example/2", "02")]
    assert fr.latest_values("a.example", "parse.title", 10) == [("http://a.example/2", "two")]
    assert fr.latest_values("c.example", "simhash", 10) == []
    with pytest.raises(ValueError, match="double quote"):
        fr.latest_values("a.example", 'x"y', 10)
    # one walk of the (key, next_fetch_date) index, no sort of the queue's URLs
    run = []
    fr.conn.set_trace_callback(run.append)  # the statement as run, its values in it
    fr.latest_values("a.example", "simhash", 10)
    fr.conn.set_trace_callback(None)
    (sql,) = run
    plan = " ".join(str(r[-1]) for r in fr.conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "USING INDEX urls_key_next_fetch_date (key=?)" in plan and "TEMP B-TREE" not in plan
