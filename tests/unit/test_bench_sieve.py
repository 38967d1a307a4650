"""bench/bench_frontier_sieve.py: the sieve model does the frontier's work (its table ends as the
frontier's for the same stream), and its window counts every update's merge."""

from __future__ import annotations

import time

import pytest

from bench.bench_frontier_sieve import (SieveFrontier, open_variant, parse_variant,
                                        sieve_table, window)
from bench.bench_frontier_scale import Web
from owler.frontier.sqlite import SQLiteFrontier


def _rows(fr, sql: str) -> list[tuple]:
    return sorted(fr.conn.execute(sql))


@pytest.mark.parametrize("order", ["id", "arrival"])
def test_the_sieve_ends_with_the_frontiers_table(tmp_path, order):
    """The same stream into the frontier and into the sieve (merged three times on the way and
    once at the end; the stream's FETCHED often name URLs still in the inbox): the same rows,
    counters and queues."""
    web = Web(300, links=20, clock=time.time() - 86400)
    plain = SQLiteFrontier(tmp_path / "plain.sqlite")
    sieve = SieveFrontier(tmp_path / "sieve.sqlite", order=order, fraction=1, floor=2500)
    for i in range(12):
        batch = web.batch(1000, new_share=1.0 if i == 0 else 0.3)
        plain.apply_updates(batch)
        sieve.apply_updates(batch)
    assert sieve.merges >= 3 and sieve.pending > 0
    sieve.merge()
    assert sieve.conn.execute("SELECT COUNT(*) FROM inbox").fetchone()[0] == 0
    assert sieve.counts() == plain.counts() == sieve.scan_counts()
    assert plain.counts()["FETCHED"] > 0
    for sql in ("SELECT url, status, next_fetch_date, key, metadata FROM urls",
                "SELECT * FROM queues", "SELECT * FROM key_counts", "SELECT * FROM due_buckets"):
        assert _rows(sieve, sql) == _rows(plain, sql), sql
    plain.close()
    sieve.close()


def test_the_window_merges_what_it_wrote(tmp_path):
    """The warm batches' inbox is merged before the timed ones, and the last timed call is
    followed by a merge: nothing the window wrote is left out of its time."""
    web = Web(300, links=20, clock=time.time() - 86400)
    fr = open_variant(tmp_path / "f.sqlite", "id:4", floor=3000)
    fr.apply_updates(web.batch(2000, new_share=1.0))
    r = window(fr, web, 1000, 2, 8)
    assert fr.conn.execute("SELECT COUNT(*) FROM inbox").fetchone()[0] == 0 and fr.pending == 0
    assert r["merges"] >= 3 and 0 < r["merge_share"] < 1 and r["updates_per_s"] > 0
    assert fr.counts() == fr.scan_counts()
    fr.close()
    plain = window(open_variant(tmp_path / "p.sqlite", "plain", 0), web, 1000, 1, 2)
    assert "merges" not in plain and plain["user_ms"] > 0


def test_the_oracle_leaves_out_only_what_the_frontier_ignores(tmp_path):
    """The oracle's stream is the whole stream less the known URLs' DISCOVERED: drawn the same
    (the next batches are equal), counted whole, and the frontier ends with the same rows."""
    start = time.time() - 86400
    whole, oracle = (Web(300, links=20, clock=start) for _ in range(2))
    frs = [SQLiteFrontier(tmp_path / f"{n}.sqlite") for n in ("whole", "oracle")]
    for i in range(6):
        share = 1.0 if i == 0 else 0.3
        full, short = whole.batch(1000, new_share=share), oracle.batch(1000, share, known=False)
        assert whole.drawn == oracle.drawn == len(full) >= 1000
        assert len(short) < len(full) if i else len(short) == len(full)
        frs[0].apply_updates(full)
        frs[1].apply_updates(short)
    assert [u.url for u in whole.batch(50)] == [u.url for u in oracle.batch(50)]
    sql = "SELECT url, status, next_fetch_date, key, metadata FROM urls"
    assert _rows(frs[0], sql) == _rows(frs[1], sql)
    assert frs[0].counts() == frs[1].counts()
    fr = open_variant(tmp_path / "o.sqlite", "oracle", 0)
    fr.apply_updates(oracle.batch(2000, new_share=1.0))
    r = window(fr, oracle, 1000, 1, 2, known=False)
    assert r["updates_per_s"] > 0 and "merges" not in r
    for f in (*frs, fr):
        f.close()


def test_variants_are_checked():
    assert parse_variant("plain") is None and parse_variant("oracle") is None
    assert parse_variant("id:32") == ("id", 32) and parse_variant("arrival:8") == ("arrival", 8)
    for bad in ("id", "id:0", "key:8", "id:x", ""):
        with pytest.raises(ValueError, match="plain, oracle, or id:F or arrival:F"):
            parse_variant(bad)


def test_sieve_table_gives_each_run_and_the_ratio():
    results = [{"urls": 100_000, "variant": "plain", "updates_per_s": 100_000, "user_ms": 8.0,
                "sys_ms": 1.0},
               {"urls": 100_000, "variant": "id:32", "updates_per_s": 90_000, "user_ms": 9.0,
                "sys_ms": 1.0, "merges": 8, "merge_share": 0.5},
               {"urls": 10_000_000, "variant": "plain", "updates_per_s": 50_000, "user_ms": 11.0,
                "sys_ms": 4.0},
               {"urls": 10_000_000, "variant": "id:32", "updates_per_s": 63_000, "user_ms": 10.0,
                "sys_ms": 3.5, "merges": 5, "merge_share": 0.63}]
    lines = sieve_table(results, [100_000, 10_000_000]).splitlines()
    assert lines[0] == ("| updates/s (user · system ms per 1,000) | 0.1 M | 10 M "
                        "| largest ÷ smallest |")
    assert lines[2] == "| plain | 100,000 (8.0 · 1.0) | 50,000 (11.0 · 4.0) | 0.50 |"
    assert lines[3] == ("| id:32 | 90,000 (9.0 · 1.0), merges 8, 50% of the time "
                        "| 63,000 (10.0 · 3.5), merges 5, 63% of the time | 0.70 |")


def test_host_ids_put_a_hosts_urls_together_and_write_the_same_rows(tmp_path, monkeypatch):
    """``--ids host``: a host's URLs share their ids' first 4 bytes, and the frontier written
    with those ids holds the same URLs as with its own."""
    import owler.frontier.sqlite as frontier_sqlite
    from bench.bench_frontier_sieve import IDS, host_url_id

    a, b = host_url_id("https://h1.example1.com/p/1"), host_url_id("https://h1.example1.com/p/2")
    c = host_url_id("https://h2.example2.com/p/1")
    assert len(a) == len(c) == 16 and a[:4] == b[:4] != c[:4] and a != b
    assert IDS["sha"] is frontier_sqlite._url_id
    frs = []
    for layout in ("sha", "host"):
        monkeypatch.setattr(frontier_sqlite, "_url_id", IDS[layout])
        web = Web(300, links=20, clock=time.time() - 86400)
        fr = SQLiteFrontier(tmp_path / f"{layout}.sqlite")
        for i in range(5):
            fr.apply_updates(web.batch(1000, new_share=1.0 if i == 0 else 0.3))
        frs.append(fr)
    sql = "SELECT url, status, key FROM urls"
    assert _rows(frs[0], sql) == _rows(frs[1], sql)
    assert frs[0].counts() == frs[1].counts()
    assert all(i == host_url_id(u) for i, u in frs[1].conn.execute("SELECT id, url FROM urls"))
    for fr in frs:
        fr.close()
