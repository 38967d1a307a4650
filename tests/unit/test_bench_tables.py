"""bench/run_all.py's tables: a repeated benchmark shows each run's median round, and its ratios
pair the runs of one round."""

from __future__ import annotations

import argparse

from bench import run_all


def _row(run: str, pages_per_s: float, cpu: float, memory: int, k: int) -> dict:
    return {"run": run, "pages": 21000, "expected_pages": 21000, "pages_per_s": pages_per_s,
            "cpu_ms_per_page_window": cpu, "cpu_ms_per_page_run": cpu + 1.0,
            "peak_rss_mb": memory, "processes": 9, "warc_mb": 10.0, "duplicates": 0,
            "robots_violations": 0, "round": k}


ARGS = argparse.Namespace(delay=1.0, seed=1, concurrency=50)
ROUNDS = [[_row("explorative", 250.0, 7.4, 900, 1), _row("bare", 600.0, 2.6, 160, 1)],
          [_row("explorative", 240.0, 7.6, 910, 2), _row("bare", 400.0, 3.0, 160, 2)],
          [_row("explorative", 260.0, 7.1, 900, 3), _row("bare", 560.0, 2.8, 150, 3)]]


def test_median_run_is_a_real_run():
    runs = [r for rows in ROUNDS for r in rows if r["run"] == "bare"]
    assert run_all.median_run(runs)["round"] == 3  # 400 < 560 < 600
    assert run_all.median_run(runs[:2])["pages_per_s"] == 400.0  # the lower middle one


def test_ratios_pair_the_runs_of_a_round():
    r = run_all.paired_ratios(ROUNDS, "explorative", "bare")
    # 250/600, 240/400, 260/560: the median is 0.464..., not median/median (250/560 = 0.446)
    assert round(r["pages"][0], 3) == round(260 / 560, 3)
    assert round(r["pages"][1], 3) == round(250 / 600, 3)
    assert round(r["pages"][2], 3) == round(240 / 400, 3)
    assert run_all.paired_ratios(ROUNDS, "explorative", "scrapy") is None


def test_table_of_rounds_and_of_one_run():
    lines = run_all.crawl_table(ROUNDS, (3000, 6), ARGS)
    text = "\n".join(lines)
    assert "| explorative | 21,000 of 21,000 | 250.0 | 250.0 · 240.0 · 260.0 | 7.4 |" in text
    assert "| bare | 21,000 of 21,000 | 560.0 | 600.0 · 400.0 · 560.0 | 2.8 |" in text
    assert "pages/s 0.46× (0.42–0.60)" in text
    # the CPU the hypervisor took, each round's (none recorded in these rows)
    assert "| 7.4 | 8.4 | — · — · — | 900 MB" in text
    one = "\n".join(run_all.crawl_table(ROUNDS[:1], (3000, 6), ARGS))
    assert "each round" not in one
    assert "pages/s 0.42×, CPU per page (crawl) 2.85×" in one


def test_rounds_alternate_their_order_and_the_table_keeps_its_own():
    runs = ["explorative", "stormcrawler", "bare"]
    assert run_all.round_order(runs, 0) == runs
    assert run_all.round_order(runs, 1) == ["bare", "stormcrawler", "explorative"]
    assert run_all.round_order(runs, 2) == runs
    # a round run in reverse still gives the rows in the first round's order and pairs by name
    flipped = [ROUNDS[0], ROUNDS[1][::-1], ROUNDS[2]]
    assert run_all.crawl_table(flipped, (3000, 6), ARGS) == run_all.crawl_table(
        ROUNDS, (3000, 6), ARGS)


def _measure(records: int, wall: float, cpu: float) -> dict:
    return {"records": records, "wall": wall, "cpu": cpu, "steal": 0.05, "links": 1000,
            "run_wall": wall + 20,
            "run_cpu": cpu + 5, "max_rss_mb": 300, "cpu_ms_per_record_by_process": {}}


def test_warc2warc_ratios_pair_the_runs_of_a_round():
    from bench.bench_warc2warc import summarize

    # records/s: like-bare 800, 700, 900; bare 1000, 700, 1200 → ratios 0.8, 1.0, 0.75
    per_core = _measure(1000, 0.5, 1.0)
    rounds = [{"bare_loop": _measure(1000, 1.0, 1.0), "bare_loop_per_core": per_core,
               "like-bare": _measure(1000, 1.25, 2.0), "order": "bare first"},
              {"bare_loop": _measure(1000, 1 / 0.7, 1.0), "bare_loop_per_core": per_core,
               "like-bare": _measure(1000, 1 / 0.7, 2.5), "order": "bare last"},
              {"bare_loop": _measure(1000, 1 / 1.2, 1.0), "bare_loop_per_core": per_core,
               "like-bare": _measure(1000, 1 / 0.9, 2.2), "order": "bare first"}]
    res = summarize(rounds, ["like-bare"], {"files": 1, "records": 1000, "compressed_mb": 4.0,
                                             "parser_tasks": 2}, 1000, 4_000_000)
    r = res["ratios"]["like-bare"]["records_per_s_to_bare"]
    # the median of the paired ratios (0.8), not 800 / 1000 of the runs' own medians
    assert r == {"median": 0.8, "range": [0.75, 1.0], "rounds": [0.8, 1.0, 0.75]}
    assert res["pipelines"]["like-bare"]["records_per_s"] == 800
    assert res["pipelines"]["like-bare"]["records_per_s_rounds"] == [800, 700, 900]
    assert res["bare_loop"]["records_per_s"] == 1000
    assert res["ratios"]["like-bare"]["cpu_per_record_to_bare"]["rounds"] == [2.0, 2.5, 2.2]
    assert res["input"]["rounds"] == 3 and res["input"]["order"][1] == "bare last"
    text = "\n".join(run_all.warc2warc_lines(res))
    assert ("| warc2warc topology, like-bare | 800 | 800 · 700 · 900 | 3.2 | 2.0 | "
            "5 % · 5 % · 5 % | 0.80× (0.75–1.00) |") in text
    assert "| bare loop, one process | 1,000 | 1,000 · 700 · 1,200 |" in text
    assert "3 rounds, the bare loops first in one round and last in the next" in text


def test_stolen_cpu_is_shown_for_each_round():
    rounds = [[{**r, "steal_pct": 10.0 * k + 3} for r in rows] for k, rows in enumerate(ROUNDS)]
    text = "\n".join(run_all.crawl_table(rounds, (3000, 6), ARGS))
    assert "| 7.4 | 8.4 | 3 % · 13 % · 23 % | 900 MB" in text
    one = "\n".join(run_all.crawl_table(rounds[1:2], (3000, 6), ARGS))
    assert "| 7.6 | 8.6 | 13 % | 910 MB" in one
    assert "CPU stolen" in one


def test_steal_share_of_a_window():
    from bench.measure import TreeSampler, steal_between

    sampler = TreeSampler(1)  # not started: its series set by hand
    sampler.total = [(0.0, 100.0), (10.0, 120.0), (20.0, 140.0)]
    sampler.stolen = [(0.0, 5.0), (10.0, 5.0), (20.0, 15.0)]
    assert sampler.steal_share(0.0, 10.0) == 0.0
    assert sampler.steal_share(10.0, 20.0) == 0.5
    assert sampler.steal_share(5.0, 15.0) == 5.0 / 20.0  # interpolated within the samples
    assert steal_between((1.0, 10.0), (4.0, 22.0)) == 0.25
    assert steal_between((1.0, 10.0), (1.0, 10.0)) == 0.0


def test_frontier_line_shows_the_rounds_and_their_stolen_cpu():
    os_ = {"rows": 300110, "updates_per_s": 19219, "bare_updates_per_s": 22716, "ratio": 0.846,
           "served_per_s": 1875,
           "rounds": [{"ratio": 0.883, "steal_pct_ours": 0.4, "steal_pct_bare": 12.6},
                      {"ratio": 0.798, "steal_pct_ours": 0.0, "steal_pct_bare": 0.0}]}
    line = run_all.frontier_lines({}, os_)[-1]
    assert "ours ÷ peer 0.85×, the median of 2 rounds in alternating order (0.88, 0.80)" in line
    assert "CPU stolen, ours / peer: 0 % / 13 %, 0 % / 0 %" in line
    old = {**os_, "rounds": [{"ratio": 0.883}]}  # a bench from before the steal was recorded
    assert "stolen" not in run_all.frontier_lines({}, old)[-1]


def test_scale_table_names_each_size_shortly_and_divides_the_largest_by_the_smallest():
    from bench.bench_frontier_scale import ROWS, table

    def size(urls: int, keys: int, updates: int) -> dict:
        return {"urls": urls, "keys": keys, **{name: 1 for _, name in ROWS},
                "updates_per_s": updates}

    lines = table([size(121_778, 27_519, 60_000), size(10_004_321, 282_011, 30_000)]).splitlines()
    assert lines[0] == ("| SQLite frontier | 0.122 M URLs / 27,519 keys | 10 M URLs / 282,011 keys "
                        "| largest ÷ smallest |")
    assert lines[2] == "| status updates/s | 60,000 | 30,000 | 0.50 |"
    assert len(lines) == 2 + len(ROWS)


def test_scale_window_splits_the_writes_time_into_the_writers_cpu_and_waiting(tmp_path):
    """``bench_frontier_scale.measure``: the writer's user and system CPU and its waiting add up
    to the writes' wall time, per 1,000 updates."""
    import time

    from bench.bench_frontier_scale import ROWS, Web, measure
    from owler.frontier.sqlite import SQLiteFrontier

    path = tmp_path / "frontier.sqlite"
    web = Web(200, links=20, clock=time.time() - 86400)
    fr = SQLiteFrontier(path, {})
    fr.apply_updates(web.batch(2000, new_share=1.0))
    r = measure(fr, web, path, 2000, None, 20, due_s=0.05, warm=1)
    fr.close()
    split = ("write_user_ms", "write_sys_ms", "write_wait_ms")
    assert r["write_user_ms"] > 0 and all(r[k] >= 0 for k in split)
    wall = 1e6 / r["updates_per_s"]  # ms per 1,000 updates
    # the kernel may account CPU time by the scheduler's tick: 10 ms over the window's updates
    # (the window is 0.1-0.3 s; one tick was 9 % of a 5-batch window on a fast processor)
    tick = 0.010 * 1e6 / (20 * web.drawn)
    assert abs(sum(r[k] for k in split) - wall) <= 0.05 * wall + tick, (r, wall)
    assert r["write_blocks_in"] >= 0 and r["write_other_cpu_ms"] >= 0
    assert {name for _, name in ROWS} >= set(split) | {"write_blocks_in", "write_other_cpu_ms"}


def test_scale_window_ends_each_round_at_the_streams_time(tmp_path):
    """OpenSearch's rounds end as the spout's do, at the time ``due()`` was asked for (the
    stream's clock, a day behind the machine's): released at the machine's time, a queue stayed
    paused for the stream's whole day, and with few hosts the next size served almost nothing."""
    import time

    from bench.bench_frontier_scale import Web, measure
    from owler.frontier.sqlite import SQLiteFrontier

    class Leasing(SQLiteFrontier):  # the leases and releases of the OpenSearch frontier's spout
        def __init__(self, path, conf):
            super().__init__(path, conf)
            self.leases: dict[str, float] = {}
            self.released: list[tuple[float, float]] = []

        def due(self, now, queues, per_queue):
            got = super().due(now, queues, per_queue)
            self.leases.update((key, now) for _, _, key in got)
            return got

        def release(self, key, now, defer=False):
            self.released.append((self.leases.pop(key), now))

    web = Web(200, links=20, clock=time.time() - 86400)
    fr = Leasing(tmp_path / "frontier.sqlite", {})
    fr.apply_updates(web.batch(2000, new_share=1.0))
    measure(fr, web, tmp_path / "frontier.sqlite", 2000, None, 2, due_s=0.05)
    fr.close()
    assert fr.released and all(at == asked == web.clock for asked, at in fr.released)


def test_repeated_windows_start_from_the_same_database_and_stream(tmp_path):
    """``bench_frontier_scale.py --repeat``: every window starts from the same file and draws the
    same batches; the rates are the windows' medians, shown beside them in the table."""
    import time

    from bench.bench_frontier_scale import Web, repeated, table
    from owler.frontier.sqlite import SQLiteFrontier

    path = tmp_path / "frontier.sqlite"
    web = Web(200, links=20, clock=time.time() - 86400)
    fr = SQLiteFrontier(path, {})
    fr.apply_updates(web.batch(500, new_share=1.0))
    seen = []
    rates = iter([300, 100, 200])

    def window(f):
        before = sum(f.counts().values())
        batch = web.batch(300)
        f.apply_updates(batch)
        seen.append((before, [(u.url, u.next_fetch_date) for u in batch],
                     sum(f.counts().values())))
        r = next(rates)
        return {"urls": seen[-1][2], "keys": f.queue_count(), "updates_per_s": r,
                "served_per_s": r * 2}

    fr, (mid,) = repeated(fr, web, path, {}, window, 3)
    assert len(seen) == 3 and len({(b, tuple(u), a) for b, u, a in seen}) == 1, seen
    assert seen[0][2] > seen[0][0]  # each window wrote new URLs, and each began without them
    assert sum(fr.counts().values()) == seen[0][2]  # the frontier as the last window left it
    assert not path.with_name(path.name + ".window").exists()
    assert mid["updates_per_s"] == 200 and mid["updates_per_s_runs"] == [100, 200, 300]
    assert mid["served_per_s"] == 400 and mid["served_per_s_runs"] == [200, 400, 600]
    fr.close()
    rows = table([mid, mid]).splitlines()
    assert rows[2] == "| status updates/s | 200 (100, 200, 300) | 200 (100, 200, 300) | 1.00 |"


def test_scale_stream_dates_its_pages_by_a_clock():
    """``bench_frontier_scale.py``'s stream dates as a crawl's status updater does: a page's
    outlinks DISCOVERED at the page's time (the scheduler's now), its FETCHED a day after; the
    clock moves on by one page's share of ``pages_per_s``, and a rewind takes it back."""
    from bench.bench_frontier_scale import Web
    from owler.frontier import Status

    web = Web(50, links=10, clock=1000.0, pages_per_s=4.0)
    state = web.state()
    first = web.batch(33)
    assert len(first) == 33 and web.clock == 1000.0 + 3 * 0.25
    pages = [first[i:i + 11] for i in range(0, 33, 11)]
    for n, page in enumerate(pages, 1):
        fetched, links = page[0], page[1:]
        assert fetched.status == Status.FETCHED and fetched.next_fetch_date == 1000.0 + n * 0.25 + 86400
        assert {u.status for u in links} == {Status.DISCOVERED}
        assert {u.next_fetch_date for u in links} == {1000.0 + n * 0.25}
    web.rewind(state)
    assert web.clock == 1000.0
    assert [(u.url, u.next_fetch_date) for u in web.batch(33)] == \
        [(u.url, u.next_fetch_date) for u in first]


def test_wal_frames_reads_each_frames_page_number(tmp_path):
    """``bench_frontier_scale.wal_frames``: the page number of each whole frame of a WAL file (a
    32-byte header giving the page size, then 24-byte frame headers and pages); a torn last frame
    is not counted."""
    import struct

    from bench.bench_frontier_scale import wal_frames

    size = 512
    head = struct.pack(">IIII", 0x377F0682, 3007000, size, 0) + bytes(16)
    frame = lambda page: struct.pack(">II", page, 0) + bytes(16) + bytes(size)  # noqa: E731
    wal = tmp_path / "f-wal"
    wal.write_bytes(head + frame(7) + frame(9) + frame(3)[:100])
    assert wal_frames(wal) == [7, 9]
    assert wal_frames(tmp_path / "none-wal") == []


def test_batch_pages_names_the_btrees_a_batch_writes(tmp_path):
    """``bench_frontier_scale.py --pages``: batches written without checkpoints, their pages
    counted by B-tree; the frontier is opened again as it was and holds the batches' URLs."""
    import time

    from bench.bench_frontier_scale import Web, batch_pages, pages_table
    from owler.frontier.sqlite import SQLiteFrontier

    path = tmp_path / "frontier.sqlite"
    web = Web(300, links=20, clock=time.time() - 86400)
    fr = SQLiteFrontier(path, {})
    fr.apply_updates(web.batch(2000, new_share=1.0))
    before = sum(fr.counts().values())
    fr, by_btree = batch_pages(fr, web, path, {}, 500, 3)
    assert sum(fr.counts().values()) > before
    for name in ("urls", "sqlite_autoindex_urls_1", "urls_key_next_fetch_date", "key_counts"):
        assert by_btree.get(name, 0) > 0, by_btree
    assert list(by_btree.values()) == sorted(by_btree.values(), reverse=True)
    fr.apply_updates(web.batch(100))  # as usable as before
    fr.close()
    total = sum(by_btree.values())
    r = {"urls": 1e5, "pages_by_btree": by_btree, "pages_per_batch": total}
    rows = pages_table([r, r]).splitlines()
    assert rows[-1] == f"| (all) | {total:,} | {total:,} | 1.00 |"


def test_big_frontier_is_built_of_urls_none_of_them_due(tmp_path):
    """``bench_big_frontier.build``: the frontier holds at least the URLs asked for, on hosts of
    the stream's law, and none of them is due (the crawl's URLs are the only ones it serves)."""
    import time

    from bench.bench_big_frontier import build
    from owler.frontier.sqlite import SQLiteFrontier

    fr = SQLiteFrontier(tmp_path / "frontier.sqlite", {})
    try:
        assert build(fr, 12_000, 0.05) >= 0
        counts = fr.counts()
        assert counts["DISCOVERED"] == sum(counts.values()) >= 12_000, counts
        assert fr.due_count(time.time()) == 0 and fr.queue_count() > 100
    finally:
        fr.close()
