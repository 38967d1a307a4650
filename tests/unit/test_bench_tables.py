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
    one = "\n".join(run_all.crawl_table(ROUNDS[:1], (3000, 6), ARGS))
    assert "each round" not in one
    assert "pages/s 0.42×, CPU per page (crawl) 2.85×" in one
