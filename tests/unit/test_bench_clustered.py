"""bench/bench_frontier_clustered.py: the two layouts it compares hold the same URLs after the
same stream (the clustered one's id table in step with its table), and serve as many."""

from __future__ import annotations

import pytest

from bench.bench_frontier_clustered import Layout, queue_number, table, window
from bench.bench_frontier_scale import Web

CLOCK = 1.7e9


def _filled(tmp_path, name: str) -> tuple[Layout, Web]:
    web = Web(400, links=20, clock=CLOCK)
    layout = Layout(tmp_path / f"{name}.sqlite", name)
    while web.urls < 6000:
        layout.write(web.batch(1000, new_share=1.0))
    for _ in range(8):  # known and new URLs, FETCHED moving their rows a day on
        layout.write(web.batch(1000))
    return layout, web


@pytest.mark.parametrize("name", ["clustered", "numbered"])
def test_both_layouts_hold_the_same_urls(tmp_path, name):
    today, web = _filled(tmp_path, "today")
    clustered, _ = _filled(tmp_path, name)
    sql = "SELECT id, url, status, next_fetch_date, key, metadata FROM {}"
    rows = sorted(today.conn.execute(sql.format("urls")))
    assert rows == sorted(clustered.conn.execute(sql.format("urls_by_queue")))
    statuses = {r[2] for r in rows}
    assert statuses == {"DISCOVERED", "FETCHED"}, statuses
    queue = queue_number if name == "numbered" else str
    assert sorted(clustered.conn.execute("SELECT * FROM url_ids")) == \
        sorted((r[0], queue(r[4]), r[3]) for r in rows)
    for layout in (today, clustered):
        layout.index_queues()
    served = today.due(web.clock, 50, 3)
    assert served == clustered.due(web.clock, 50, 3) > 50
    today.close()
    clustered.close()


@pytest.mark.parametrize("name", ["today", "clustered", "numbered"])
def test_the_window_measures_writes_and_due(tmp_path, name):
    layout, web = _filled(tmp_path, name)
    r = window(layout, web, 1000, 1, 2, 0.05)
    assert r["updates_per_s"] > 0 and r["served_per_s"] > 0 and r["user_ms"] > 0
    assert set(r["mb"]) == ({"urls", "urls_key_next_fetch_date", "sqlite_autoindex_urls_1"}
                            if name == "today" else {"urls_by_queue", "url_ids"})
    layout.close()


def test_table_divides_the_largest_size_by_the_smallest():
    def r(layout, size, up, served):
        return {"layout": layout, "size": size, "updates_per_s": up, "user_ms": 1.0,
                "sys_ms": 0.5, "served_per_s": served, "due_ms": 10.0, "mb": {"urls": 1.5}}

    lines = table([r("today", 100_000, 100_000, 200_000), r("today", 10**7, 50_000, 150_000)],
                  [100_000, 10**7]).splitlines()
    assert lines[2] == ("| today | updates/s (user · system ms per 1,000) | 100,000 (1.0 · 0.5) "
                        "| 50,000 (1.0 · 0.5) | 0.50 |")
    assert lines[3] == ("| today | URLs served/s by due() (ms a call) | 200,000 (10.0) "
                        "| 150,000 (10.0) | 0.75 |")
    assert lines[4] == "| today | MB a B-tree | urls 1.5 | urls 1.5 | — |"
