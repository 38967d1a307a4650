"""`make bench`: every benchmark of the project in one run, printed as a table and written into
BENCHMARKS.md (between the `make bench` markers) with the machine and the date.

1. Crawls of the benchmark web farms (`bench/farm.py`; `--farms HOSTSxPAGES,...`: loopback hosts
   of 30-100 KB pages with 100-200 links each, the same web for every run, a fresh farm process
   per run), with the same politeness (robots.txt obeyed, `--delay` seconds between two requests
   to a host, one request at a time per host, `--concurrency` requests in flight), each run to
   the end of the farm. The default farms: 500 hosts × 41 pages, where politeness caps every
   crawler at 500 pages/s, and 3,000 hosts × 7 pages (the same ~21,000 pages), where it allows
   3,000 pages/s and the CPU is the limit. The runs:
   - `explorative`: the explorative topology on real Storm (local mode), embedded SQLite
     frontier, outlinks and WARC writing on (`owler inject` + `owler run explorative`);
   - `explorative-nowarc`: the work of StormCrawler's column: `warc.enabled: false`, and no parse
     filters and no SimHash (its run has neither; our default chain adds language
     identification, the risk classifier and page metadata);
   - `explorative-warc`: the same with our WARC writing on, the one thing changed (the issue's
     "with our WARC on, still ≥ StormCrawler without it");
   - `scrapy`: Scrapy crawling the same farm (`bench/crawl_scrapy.py`), pages stored as WARC;
   - `stormcrawler`: StormCrawler 2.4 (Java) in Storm local mode with its in-memory frontier
     (`bench/crawl_stormcrawler.py`); it writes no WARC (no StormCrawler WARC module could be
     had from the registry: see BENCHMARKS.md);
   - `bare` / `bare-nowarc`: asyncio loops, one process per core, fetching, extracting links and
     writing WARC (or not) with the fastest libraries at hand (`bench/crawl_bare.py`), the
     practical limit of the machine.
   Pages/s is what the farm served between its first and last page (distinct pages: a page
   fetched twice counts once; the table shows the repeats). CPU is the whole process
   tree of the run (JVM and every Python component for Storm), over the crawl window (first to
   last page) and over the whole run (start-up and idle tail included); memory is the peak of
   the tree's summed resident sets. `--repeat N` crawls each farm N times in rounds, every run
   once per round (the order reversed in even rounds), so that the machine's drift (±30 %
   within an hour here) and the place in a round fall on all runs alike: a row is then a run's
   median round, and a ratio the median of the ratios of the rounds.
2. warc2warc against its bare loop (`bench/bench_warc2warc.py`).
3. The frontier backends (`bench/bench_frontier.py`, `bench/bench_frontier_opensearch.py`).
   `frontier-scale`: the embedded frontier grown to 0.1 M, 1 M and 10 M URLs on hosts of a Zipf
   law, every figure at each size (`bench/bench_frontier_scale.py`, about 15 minutes).
4. The URLFrontier service against the frontier used directly (`bench/bench_urlfrontier.py`).

Usage: .venv/bin/python bench/run_all.py [--only explorative,explorative-nowarc,
       explorative-warc,scrapy,stormcrawler,bare,bare-nowarc,warc2warc,frontier,frontier-scale,
       urlfrontier]
       [--farms 500x40,3000x6]
       [--delay 1.0] [--concurrency 50] [--repeat N] [-o KEY=VALUE ...] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.farm import BenchFarm  # noqa: E402
from bench.measure import TreeSampler, lower_median, machine  # noqa: E402

AGENT = "owler-bench"
BEGIN, END = "<!-- make bench: begin -->", "<!-- make bench: end -->"
#: run name -> (crawler, writes WARC)
RUNS = {"explorative": ("explorative", True), "explorative-nowarc": ("explorative", False),
        "explorative-warc": ("explorative", True),
        "scrapy": ("scrapy", True), "stormcrawler": ("stormcrawler", False),
        "bare": ("bare", True), "bare-nowarc": ("bare", False)}
#: the explorative runs that parse as StormCrawler's run does (bench/stormcrawler/
#: crawler-conf.yaml: no parse filters; it has no SimHash); `explorative` is the shipped parse
PARSE_LIKE_STORMCRAWLER = {"explorative-nowarc", "explorative-warc"}
NO_PARSE_EXTRAS = "parsefilters.config.file: ''\nsimhash.enabled: false\n"
#: (ours, peer, what the issue asks of the ratio): the ratios printed under each farm's table
PAIRS = (("explorative-nowarc", "stormcrawler", "like for like: no WARC, no parse filters"),
         ("explorative-warc", "stormcrawler", "our WARC on, StormCrawler's off, no parse filters"),
         ("explorative", "stormcrawler", "our WARC and parse filters on, StormCrawler's off"),
         ("explorative", "scrapy", "both write WARC"),
         ("explorative", "bare", "both write WARC"),
         ("explorative-nowarc", "bare-nowarc", "no WARC on either side"))


def parse_farms(text: str) -> list[tuple[int, int]]:
    """``500x40,3000x6`` -> [(500, 40), (3000, 6)]: hosts × pages besides the home page."""
    farms = []
    for item in text.split(","):
        hosts, sep, pages = item.strip().lower().partition("x")
        if not sep or not hosts.isdigit() or not pages.isdigit() or int(hosts) < 1:
            raise SystemExit(f"--farms: expected HOSTSxPAGES[,HOSTSxPAGES...], got {item!r}")
        farms.append((int(hosts), int(pages)))
    return farms


def crawl_command(run: str, work: Path, seeds: Path, args) -> list[str]:
    py = sys.executable
    name, warc = RUNS[run]
    if name == "explorative":
        conf = work / "conf.yaml"
        conf.write_text(
            f"frontier.sqlite.path: {work / 'frontier.sqlite'}\nwarc.dir: {work / 'warc'}\n"
            f"owler.work.dir: {work}\nhttp.allow.private.addresses: true\n"
            f"http.agent.name: {AGENT}\nfetcher.server.delay: {args.delay}\n"
            f"fetcher.threads.number: {args.concurrency}\nhttp.timeout: 10000\n"
            + ("" if warc else "warc.enabled: false\n")
            + (NO_PARSE_EXTRAS if run in PARSE_LIKE_STORMCRAWLER else "")
            + "".join(f"{k}: {v}\n" for k, _, v in (o.partition("=") for o in args.options)))
        subprocess.run([py, "-m", "owler", "inject", str(seeds), "--conf", str(conf)],
                       cwd=ROOT, check=True, capture_output=True)
        return [py, "-m", "owler", "run", "explorative", "--conf", str(conf),
                "--idle-exit", "5"]
    script = ROOT / "bench" / f"crawl_{name}.py"
    cmd = [py, str(script), "--seeds", str(seeds), "--out", str(work / "warc"),
           "--delay", str(args.delay), "--concurrency", str(args.concurrency), "--agent", AGENT]
    if name == "bare":
        cmd += ["--workers", str(os.cpu_count() or 1)] + ([] if warc else ["--no-warc"])
    return cmd


def run_crawl(name: str, farm_size: tuple[int, int], args, frontier: Path | None = None) -> dict:
    """One crawl of the farm; ``frontier``: an SQLite frontier file the explorative run starts
    from (copied; bench/bench_big_frontier.py), instead of an empty one."""
    hosts, pages_per_host = farm_size
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=getattr(args, "dir", None)))
    if frontier is not None:
        shutil.copyfile(frontier, work / "frontier.sqlite")
        os.sync()  # the copy's gigabytes written back now, not during the crawl it is timed by
    try:
        with BenchFarm(hosts, pages_per_host, args.seed, work / "farm.json") as farm:
            seeds = work / "seeds.txt"
            seeds.write_text("\n".join(farm.seeds()) + "\n")
            cmd = crawl_command(name, work, seeds, args)
            farm_cpu0 = farm.cpu_seconds()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.time()
            log = open(work / "run.log", "wb")
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            sampler = TreeSampler(proc.pid)
            sampler.start()
            rc = proc.wait()
            sampler.stop()
            wall = time.time() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            farm_cpu = farm.cpu_seconds() - farm_cpu0
            stats = farm.stop()
        if rc != 0:
            tail = (work / "run.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} exited with {rc}:\n{tail}")
        warc = sum(f.stat().st_size for f in (work / "warc").rglob("*.warc*") if f.is_file())
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    pages = stats["pages"] - stats["duplicates"]  # a page fetched twice counts once
    window = max(stats["last_page"] - stats["first_page"], 1e-9)
    cpu_run = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu_window = sampler.cpu_at(stats["last_page"]) - sampler.cpu_at(stats["first_page"])
    return {"run": name, "farm": f"{hosts}x{pages_per_host}", "pages": pages,
            "expected_pages": hosts * (pages_per_host + 1),
            "pages_per_s": round(pages / window, 1), "crawl_s": round(window, 1),
            "run_wall_s": round(wall, 1), "cpu_s_run": round(cpu_run, 1),
            "cpu_ms_per_page_window": round(1000 * cpu_window / max(pages, 1), 2),
            "cpu_ms_per_page_run": round(1000 * cpu_run / max(pages, 1), 2),
            "peak_rss_mb": round(sampler.peak_rss / 2**20), "processes": sampler.peak_procs,
            "warc_mb": round(warc / 1e6, 1), "robots_requests": stats["robots"],
            "robots_violations": stats["private"], "duplicates": stats["duplicates"],
            "connections": stats.get("connections"), "requests": stats["requests"],
            "farm_cpu_ms_per_page": round(1000 * farm_cpu / max(pages, 1), 2),
            "steal_pct": round(100 * sampler.steal_share(stats["first_page"], stats["last_page"]),
                               1),
            "cpu_ms_per_page_by_process_crawl": {
                k: round(1000 * v / max(pages, 1), 2)
                for k, v in sampler.cpu_by_label(stats["first_page"], stats["last_page"]).items()},
            "cpu_s_by_process_run": {k: round(v, 1) for k, v in sampler.cpu_by_label().items()}}


def run_json(cmd: list[str]) -> dict:
    out = subprocess.run([sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return json.loads(out.stdout[out.stdout.index("{"):])


def round_order(runs: list[str], k: int) -> list[str]:
    """The runs of round ``k`` (from 0): as given in even rounds, reversed in odd ones, so that
    the run that goes second of a pair is not always the same one (issue 20's eleventh session
    found the second of two back-to-back crawls the faster in every round)."""
    return list(runs) if k % 2 == 0 else list(reversed(runs))


def median_run(runs: list[dict]) -> dict:
    """The run whose pages/s is the median of ``runs`` (:func:`bench.measure.lower_median`)."""
    return lower_median(runs, lambda r: r["pages_per_s"])


def paired_ratios(rounds: list[list[dict]], ours: str, peer: str) -> dict | None:
    """``ours`` against ``peer`` within each round (the two ran minutes apart, so the machine's
    drift cancels out better than between medians): the median and range of each ratio."""
    pairs = []
    for rows in rounds:
        by = {r["run"]: r for r in rows}
        if ours in by and peer in by:
            pairs.append((by[ours], by[peer]))
    if not pairs:
        return None
    out = {}
    for key, field in (("pages", "pages_per_s"), ("cpu", "cpu_ms_per_page_window"),
                       ("memory", "peak_rss_mb")):
        values = [a[field] / max(b[field], 1e-9) for a, b in pairs]
        out[key] = (statistics.median(values), min(values), max(values))
    return out


def crawl_table(rounds: list[list[dict]], farm_size: tuple[int, int], args) -> list[str]:
    """The farm's table: one row per run (its median run over the rounds) and the ratios."""
    hosts, pages = farm_size
    bound = ("politeness is the limit" if hosts / args.delay <= 1000 else
             "the CPU is the limit")
    repeated = len(rounds) > 1
    lines = [f"Farm: {hosts:,} hosts × {pages + 1} pages (30–100 KB, 100–200 links), "
             f"seed {args.seed}; politeness: robots.txt, {args.delay} s between requests to a "
             f"host, one at a time per host, {args.concurrency} in flight: at most "
             f"{hosts / args.delay:,.0f} pages/s ({bound}).", ""]
    if repeated:
        lines += [f"Each run crawled the farm {len(rounds)} times, in rounds (every run once per "
                  "round, in the table's order in odd rounds and the reverse in even ones); a "
                  "row is the run's median round by pages/s, and each ratio below is the median"
                  " of the rounds' ratios (their range in brackets).", ""]
    lines += ["| run | pages | pages/s | " + ("pages/s, each round | " if repeated else "")
              + "CPU ms/page, crawl | CPU ms/page, whole run | CPU stolen"
              + (", each round" if repeated else "") + " | peak memory "
              "(all processes) | WARC MB | duplicates | robots violations |",
              "|---|---:|---:|" + ("---:|" if repeated else "")
              + "---:|---:|---:|---:|---:|---:|---:|"]
    names = [r["run"] for r in rounds[0]]
    for name in names:
        runs = [r for rows in rounds for r in rows if r["run"] == name]
        r = median_run(runs)
        each = (" · ".join(f"{x['pages_per_s']:,}" for x in runs) + " | ") if repeated else ""
        stolen = " · ".join(_percent(x.get("steal_pct")) for x in (runs if repeated else [r]))
        lines.append(f"| {r['run']} | {r['pages']:,} of {r['expected_pages']:,} | "
                     f"{r['pages_per_s']:,} | {each}{r['cpu_ms_per_page_window']} | "
                     f"{r['cpu_ms_per_page_run']} | {stolen} | {r['peak_rss_mb']:,} MB "
                     f"({r['processes']} proc.) | {r['warc_mb'] or 'none'} | {r['duplicates']} | "
                     f"{r['robots_violations']} |")
    lines.append("")

    def shown(ratio: tuple[float, float, float]) -> str:
        mid, lo, hi = ratio
        return f"{mid:.2f}×" + (f" ({lo:.2f}–{hi:.2f})" if repeated else "")

    for ours, peer, what in PAIRS:
        ratios = paired_ratios(rounds, ours, peer)
        if ratios is not None:
            lines.append(f"- {ours} / {peer} ({what}): pages/s {shown(ratios['pages'])}, CPU per "
                         f"page (crawl) {shown(ratios['cpu'])}, peak memory "
                         f"{shown(ratios['memory'])}.")
    return lines


STEAL_NOTE = (
    "CPU stolen: the share of the machine's CPU time over the crawl window that the hypervisor "
    "gave to other guests while this machine had work (`/proc/stat`, steal). It takes pages/s "
    "away from whichever run it falls on, and not the CPU per page; a round where the two runs "
    "of a ratio lost very different shares is not a fair pair.")


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} %"


STORMCRAWLER_NOTE = (
    "StormCrawler 2.4: one JVM (3 GB heap), its in-memory frontier (`MemorySpout`, "
    "`MemoryStatusUpdater`), its JSoup parser extracting text; it writes no WARC (no "
    "StormCrawler WARC module resolves from the registry here: BENCHMARKS.md, issue 20). Its "
    "repeats: each seed is fetched again when found as a link (`MemorySpout` seeds are unknown "
    "to the status updater's cache); pages/s counts distinct pages. The bare loops run one "
    "process per core.")


def frontier_lines(sq: dict, os_: dict) -> list[str]:
    lines = ["| frontier | status updates/s | URLs served/s | peer |", "|---|---:|---:|---|"]
    if sq:
        lines.append(f"| SQLite ({sq['rows']:,} URLs, commits of {sq.get('batch', 0):,}) | "
                     f"{sq['updates_per_s']:,} | "
                     f"{sq['served_per_s']:,} | — |")
    if os_:
        lines.append(f"| OpenSearch, one local node ({os_['rows']:,} URLs) | "
                     f"{os_['updates_per_s']:,} | {os_['served_per_s']:,} | bare `_bulk` "
                     f"{os_['bare_updates_per_s']:,}/s in the same round; ours ÷ peer "
                     f"{os_['ratio']:.2f}×, the median of {len(os_['rounds'])} rounds in "
                     f"alternating order ("
                     + ", ".join(f"{r['ratio']:.2f}" for r in os_['rounds']) + ")"
                     + (("; CPU stolen, ours / peer: " + ", ".join(
                         f"{_percent(r['steal_pct_ours'])} / {_percent(r['steal_pct_bare'])}"
                         for r in os_['rounds'])) if "steal_pct_ours" in os_['rounds'][0] else "")
                     + " |")
    return lines


def write_benchmarks(section: str) -> None:
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    block = f"{BEGIN}\n{section}\n{END}"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text,
                      flags=re.S)
    else:
        head, sep, rest = text.partition("\n## ")
        text = f"{head}\n{block}\n{sep}{rest}" if sep else f"{text}\n{block}\n"
    path.write_text(text)


def warc2warc_lines(w: dict) -> list[str]:
    """The warc2warc section of the table from ``bench/bench_warc2warc.py``'s JSON."""
    inp = w["input"]
    out = ["#### warc2warc against its bare loop", "",
           f"{inp['records']:,} records in {inp['files']} files ({inp['compressed_mb']} MB "
           f"gzip); the topology with {inp['parser_tasks']} parser tasks. `like-bare` parses "
           "as the bare loop does (no parse filters, no SimHash, no anchor texts, no text); "
           "`shipped` with the shipped configuration. "
           f"{inp['rounds']} rounds, the bare loops first in one round and last in the next; "
           "a row is the run's round of median records/s, each ratio the median of the "
           "rounds' ratios (their range in brackets).", "",
           "| run | records/s | records/s, each round | MB/s | CPU ms/record | CPU stolen, "
           "each round | records/s ÷ bare loop | ÷ bare, a process per core | CPU ÷ bare |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def stolen(figures: dict) -> str:
        return " · ".join(_percent(x) for x in figures.get("steal_pct_rounds", [None]))

    def ratio(r: dict) -> str:
        lo, hi = r["range"]
        return f"{r['median']:.2f}× ({lo:.2f}–{hi:.2f})"

    for run, p in w["pipelines"].items():
        r = w["ratios"][run]
        out.append(f"| warc2warc topology, {run} | {p['records_per_s']:,} | "
                   f"{' · '.join(f'{x:,}' for x in p['records_per_s_rounds'])} | "
                   f"{p['mb_per_s']} | {p['cpu_ms_per_record']} | {stolen(p)} | "
                   f"{ratio(r['records_per_s_to_bare'])} | "
                   f"{ratio(r['records_per_s_to_bare_per_core'])} | "
                   f"{ratio(r['cpu_per_record_to_bare'])} |")
    for key, label in (("bare_loop", "bare loop, one process"),
                       ("bare_loop_per_core", "bare loop, a process per core")):
        b = w[key]
        out.append(f"| {label} | {b['records_per_s']:,} | "
                   f"{' · '.join(f'{x:,}' for x in b['records_per_s_rounds'])} | "
                   f"{b['mb_per_s']} | {b['cpu_ms_per_record']} | {stolen(b)} | | | |")
    out.append("")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(RUNS)
                    + ",warc2warc,frontier,frontier-scale,urlfrontier")
    ap.add_argument("--farms", default="500x40,3000x6",
                    help="benchmark farms, HOSTSxPAGES (pages besides the home page), comma-separated")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("-o", dest="options", action="append", default=[], metavar="KEY=VALUE",
                    help="a crawler config key for the explorative run (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="crawl every farm N times with every run, in rounds; the tables show "
                         "each run's median and the ratios their median over the rounds")
    ap.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folders (logs, WARC)")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit(f"--repeat: expected a number of rounds >= 1, got {args.repeat}")
    only = set(args.only.split(","))
    started = datetime.datetime.now(datetime.timezone.utc)
    out: list[str] = [f"### `make bench`, {started:%Y-%m-%d %H:%M} UTC", "",
                      f"Machine: {machine()}.", ""]
    results: dict = {}
    runs = [name for name in RUNS if name in only]
    unknown = only - set(RUNS) - {"warc2warc", "frontier", "frontier-scale", "urlfrontier"}
    if unknown:
        raise SystemExit(f"--only: unknown runs {sorted(unknown)}")
    crawls = []
    for farm_size in parse_farms(args.farms) if runs else []:
        rounds: list[list[dict]] = []
        for k in range(args.repeat):  # every run once per round: the machine's drift hits all
            rounds.append([])
            for name in round_order(runs, k):
                print(f"[bench] crawl: {name}, farm {farm_size[0]}x{farm_size[1]}, round "
                      f"{k + 1} of {args.repeat} ...", file=sys.stderr, flush=True)
                rounds[-1].append(run_crawl(name, farm_size, args) | {"round": k + 1})
                print(json.dumps(rounds[-1][-1]), file=sys.stderr, flush=True)
        crawls += [r for rows in rounds for r in rows]
        out += ([f"#### Crawling the benchmark farm, {farm_size[0]:,} hosts", ""]
                + crawl_table(rounds, farm_size, args) + [""])
    if crawls:
        results["crawls"] = crawls
        out += [STEAL_NOTE, ""]
        if "stormcrawler" in runs:
            out += [STORMCRAWLER_NOTE, ""]
    if "warc2warc" in only:
        print("[bench] warc2warc ...", file=sys.stderr, flush=True)
        w = run_json(["bench/bench_warc2warc.py"])
        results["warc2warc"] = w
        out += warc2warc_lines(w)
    if "frontier" in only:
        print("[bench] frontier backends ...", file=sys.stderr, flush=True)
        sq = run_json(["bench/bench_frontier.py", "--json"])
        os_ = run_json(["bench/bench_frontier_opensearch.py", "--json"])
        results["frontier"] = {"sqlite": sq, "opensearch": os_}
        out += ["#### Frontier backends", ""] + frontier_lines(sq, os_) + [""]
    if "frontier-scale" in only:
        print("[bench] the embedded frontier at 0.1 M, 1 M and 10 M URLs ...", file=sys.stderr,
              flush=True)
        from bench.bench_frontier_scale import table

        scale = run_json(["bench/bench_frontier_scale.py", "--json", "--sizes", "100k,1M,10M"])
        results["frontier-scale"] = scale
        out += ["#### The embedded frontier as it grows (`bench/bench_frontier_scale.py`)", "",
                table(scale["sizes"]), ""]
    if "urlfrontier" in only:
        print("[bench] URLFrontier service ...", file=sys.stderr, flush=True)
        uf = run_json(["bench/bench_urlfrontier.py", "--json"])
        results["urlfrontier"] = uf
        bare = uf["bare gRPC endpoint (stores nothing)"]
        out += ["#### URLFrontier: the service against the frontier used directly", "",
                "| frontier | status updates/s | URLs served/s |", "|---|---:|---:|"]
        for name, r in uf.items():
            out.append(f"| {name} | {r['updates_per_s']:,.0f} | {r['served_per_s']:,.0f} |")
        for backend in ("sqlite", "opensearch"):
            via, direct = uf[f"{backend} through the service"], uf[f"{backend} direct"]
            out.append("")
            out.append(f"{backend} through the service: updates "
                       f"{via['updates_per_s'] / direct['updates_per_s']:.2f}× direct, "
                       f"{via['updates_per_s'] / bare['updates_per_s']:.2f}× the bare endpoint.")
        out.append("")
    section = "\n".join(out).rstrip() + "\n"
    print(section)
    print(json.dumps(results), file=sys.stderr)
    if not args.no_write:
        write_benchmarks(section)
        print("written into BENCHMARKS.md", file=sys.stderr)


if __name__ == "__main__":
    main()
