"""The warc2warc pipeline on real Storm (local mode) against a bare single-process loop, same files,
same machine, same run.

Input: ``--files`` WARC files of ``--pages`` pages each (request + response records, one gzip member
per record, as Common Crawl writes them), pages of ~``--kb`` KB of HTML with 150 links (relative,
absolute and external; ``--links site``: shared navigation and links among a site's pages, as on
real sites; ``--links unique``: every link new), made once from ``--seed``.

1. The pipeline: ``owler run warc2warc`` reading the folder, the embedded frontier, the archive
   copy into ``warc.dir``, one parser task per core (``parallelism.parser``: the parser does most
   of the work). Records/s and MB/s (compressed input) are measured from the first to the last
   acked record (polling the progress file), CPU over the same interval by sampling
   ``/proc/<pid>/stat`` of every process of the run (JVM and Python components). Two runs:
   ``like-bare`` parses as the bare loop does (:data:`LIKE_BARE`: no parse filters, no SimHash, no
   anchor texts, no text), the like-for-like run the ratios are taken on; ``shipped`` parses with
   the shipped configuration (language identification, the risk classifier, page metadata,
   SimHash, anchors), for what a real run costs.
2. The bare loop: a process reads the files with :mod:`owler.warc.format.reader`, parses each 200
   response and extracts its links with the crawler's own parser (:func:`owler.parse.html.parse_html`,
   which resolves and normalizes them), and appends every record's bytes to one output file, with
   :data:`BARE_PARSE`. It runs in one process (the issue's measure) and with one process per
   core, each reading its share of the files (the machine's practical limit).

``--rounds`` rounds (3): the bare loops and every pipeline run once per round, the bare loops
first in the first round, last in the second, and so on (the machine's speed drifts by up to a
third within minutes, so a fixed order favours one side). Each ratio is taken within its round;
the figure is the median of the rounds' ratios, with their range. A run's row is its round of
median records/s.

With ``--opensearch PORT`` the pipeline runs as on a cluster: a local OpenSearch node started on
PORT holds the frontier and the progress (``owler.warc.warc2warc.progress_opensearch``), the bench
polls the progress there; the bare loop is the same.

Usage: .venv/bin/python bench/bench_warc2warc.py [--files 4] [--pages 1500] [--kb 40]
       [--runs like-bare,shipped] [--rounds 3] [--opensearch 9291] [-o KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import random
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
sys.path.insert(0, str(ROOT / "src"))

from bench.measure import TreeSampler, lower_median, machine_cpu, steal_between  # noqa: E402
from owler.parse.html import parse_html  # noqa: E402
from owler.conf import load_conf  # noqa: E402
from owler.run.services import OpenSearchNode  # noqa: E402
from owler.warc.format.reader import InputRecord, iter_records  # noqa: E402
from owler.warc.warc2warc.progress import open_progress  # noqa: E402
from owler.warc.warc2warc.record_as_page import parse_http_response  # noqa: E402
from tests import warcgen as G  # noqa: E402

WORDS = ("crawler open web index search europe archive page link text data storm python "
         "frontier sitemap robots fetch parse status queue host domain").split()


def make_page(rnd: random.Random, host: str, i: int, kb: int, links_model: str = "site") -> bytes:
    """~``kb`` KB of HTML with 150 links. ``site``: as on real sites, 40 navigation links shared by
    every page of the site, 95 links to pages of the site (a pool of 5,000) and 15 to other hosts
    (a pool of 2,000), relative and absolute; ``unique``: every link new (the worst case)."""
    links = []
    if links_model == "unique":
        for j in range(150):
            r = rnd.random()
            if r < 0.4:
                links.append(f"/section{j % 7}/page{rnd.randrange(10**9)}.html")
            elif r < 0.8:
                links.append(f"http://{host}/item?id={rnd.randrange(10**9)}&p={j}")
            else:
                links.append(f"https://ext{rnd.randrange(10**6)}.example.org/a/{rnd.randrange(999)}")
    else:
        links += [f"/nav/{k}.html" for k in range(40)]
        for j in range(95):
            n = rnd.randrange(5000)
            links.append(f"/page{n}.html" if j % 2 else f"http://{host}/page{n}.html")
        links += [f"https://ext{rnd.randrange(2000)}.example.org/" for _ in range(15)]
    parts = [f"<html><head><title>{host} {i}</title></head><body>"]
    for j, link in enumerate(links):
        words = " ".join(rnd.choice(WORDS) for _ in range(25))
        parts.append(f"<p>{words} <a href=\"{link}\">{rnd.choice(WORDS)} {j}</a></p>\n")
    html = "".join(parts)
    filler = " ".join(rnd.choice(WORDS) for _ in range(kb * 1024 // 7))
    html += f"<div>{filler[: max(0, kb * 1024 - len(html))]}</div></body></html>"
    return html.encode()


def make_inputs(folder: Path, files: int, pages: int, kb: int, seed: int,
                links_model: str = "site") -> tuple[int, int]:
    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    records = size = 0
    for f in range(files):
        host = f"site{f}.example"
        recs = G.exchanges(host, pages, lambda i: make_page(rnd, host, i, kb, links_model),
                           software="bench")
        data = G.per_record_gzip(recs)
        (folder / f"input-{f}.warc.gz").write_bytes(data)
        records += len(recs)
        size += len(data)
    return records, size


BARE_PARSE = {"track.anchors": False, "textextractor.no.text": True}
#: the pipeline options that make its parser do the bare loop's work: BARE_PARSE, and none of
#: what the bare loop leaves out (parse filters, SimHash)
LIKE_BARE = [f"{k}={str(v).lower()}" for k, v in BARE_PARSE.items()] + [
    "parsefilters.config.file=", "simhash.enabled=false"]
PIPELINE_RUNS = {"like-bare": LIKE_BARE, "shipped": []}


def bare_loop(folder: Path, out: Path, workers: int = 1) -> dict:
    """The bare loop over the files of ``folder``, in ``workers`` processes (file i to worker
    i mod workers); CPU is the sum of the workers'."""
    files = sorted(folder.glob("*.warc.gz"))
    before = machine_cpu()
    if workers <= 1:
        res = bare_files(files, out)
    else:
        t0 = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.starmap(bare_files, [(files[i::workers], out.with_suffix(f".{i}.gz"))
                                              for i in range(workers)])
        res = {"records": sum(p["records"] for p in parts),
               "links": sum(p["links"] for p in parts),
               "wall": time.perf_counter() - t0, "cpu": sum(p["cpu"] for p in parts)}
    res["steal"] = steal_between(before, machine_cpu())
    return res


def bare_files(files: list[Path], out: Path) -> dict:
    t0 = time.perf_counter()
    c0 = time.process_time()
    records = links = 0
    with open(out, "wb") as sink:
        for path in files:
            with open(path, "rb") as f:
                for rec in iter_records(f):
                    if not isinstance(rec, InputRecord):
                        continue
                    records += 1
                    sink.write(rec.raw)
                    if rec.is_http_response:
                        block = gzip.decompress(rec.raw) if rec.compressed else rec.raw
                        head_end = block.find(b"\r\n\r\n")
                        code, _, _, headers, body = parse_http_response(
                            block[head_end + 4:len(block) - 4])
                        if code == 200:
                            res = parse_html(rec.target_uri, body, dict(
                                (k.lower(), v) for k, v in headers), conf=BARE_PARSE)
                            links += len(res.outlinks)
    return {"records": records, "links": links, "wall": time.perf_counter() - t0,
            "cpu": time.process_time() - c0}


def pipeline(folder: Path, work: Path, total: int, options: list[str],
             opensearch: int | None = None) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "conf.yaml"
    conf.write_text(f"warc2warc.input: {folder}\nwarc.dir: {work / 'warc'}\n"
                    f"owler.work.dir: {work}\nfrontier.sqlite.path: {work / 'f.sqlite'}\n" + (
                        f"frontier.backend: opensearch\nservices.opensearch.port: {opensearch}\n"
                        "opensearch.status.index.name: bench_w2w\n" if opensearch else ""))
    progress_conf = load_conf(conf, options)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_start = time.time()
    opts = [a for o in options for a in ("-o", o)]
    proc = subprocess.Popen([sys.executable, "-m", "owler", "run", "warc2warc", "--conf",
                             str(conf), "--idle-exit", "3", *opts], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sampler = TreeSampler(proc.pid, interval=0.25)
    sampler.start()
    progress = None
    t_first = t_last = None
    while proc.poll() is None:
        progress = progress or open_progress(progress_conf, create=False)
        if progress is not None:
            done = progress.summary()["records"]
            now = time.time()
            if done and t_first is None:
                t_first, n_first = now, done
            if done >= total and t_last is None:
                t_last = now
        time.sleep(0.25)
    sampler.stop()
    out = proc.stdout.read().decode()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or t_last is None:
        raise SystemExit(f"the pipeline run failed (rc {proc.returncode}):\n{out[-3000:]}")
    records = total - n_first
    by_process = sampler.cpu_by_label(t_first, t_last)
    return {"records": records, "wall": t_last - t_first,
            "cpu": sampler.cpu_at(t_last) - sampler.cpu_at(t_first),
            "steal": sampler.steal_share(t_first, t_last),
            "cpu_ms_per_record_by_process": {k: round(1000 * v / records, 3)
                                             for k, v in by_process.items()},
            "run_wall": time.time() - t_start,
            "run_cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "max_rss_mb": after.ru_maxrss / 1024}


def summarize(rounds: list[dict], runs: list[str], inputs: dict, total: int, size: int) -> dict:
    """The figures of ``rounds`` (each: the bare loops' and every run's measures, and its order):
    each run's and each bare loop's round of median records/s, and every ratio as the median of
    the ratios within a round, with their range and each round's."""
    per_record_mb = size / 1e6 / total

    def rate(m: dict) -> float:
        return m["records"] / m["wall"]

    def cpu_ms(m: dict) -> float:
        return 1000 * m["cpu"] / m["records"]

    def figures(name: str) -> tuple[dict, dict]:
        """``name``'s figures: those of its round of median records/s and every round's rate
        and stolen CPU; and that round's measures."""
        m = lower_median(rounds, lambda x: rate(x[name]))[name]
        return {"records_per_s": round(rate(m)),
                "mb_per_s": round(m["records"] * per_record_mb / m["wall"], 1),
                "cpu_ms_per_record": round(cpu_ms(m), 3),
                "records_per_s_rounds": [round(rate(x[name])) for x in rounds],
                "steal_pct_rounds": [round(100 * x[name]["steal"], 1) for x in rounds]}, m

    def bare_figures(which: str) -> dict:
        f, bare = figures(which)
        return {**f, "links": bare["links"]}

    def pipe_figures(run: str) -> dict:
        f, pipe = figures(run)
        return {**f, "measured_records": pipe["records"],
                "run_wall_s": round(pipe["run_wall"], 1),
                "run_cpu_s_all_processes": round(pipe["run_cpu"], 1),
                "max_rss_mb_one_process": round(pipe["max_rss_mb"]),
                "cpu_ms_per_record_by_process": pipe["cpu_ms_per_record_by_process"]}

    def ratio(of) -> dict:
        """The median of the rounds' ratios ``of(round)``, their range and each round's."""
        each = [of(x) for x in rounds]
        return {"median": round(statistics.median(each), 2),
                "range": [round(min(each), 2), round(max(each), 2)],
                "rounds": [round(v, 2) for v in each]}

    res = {"input": {**inputs, "rounds": len(rounds), "order": [x["order"] for x in rounds]},
           "bare_loop": bare_figures("bare_loop"),
           "bare_loop_per_core": bare_figures("bare_loop_per_core"),
           "pipelines": {run: pipe_figures(run) for run in runs}}
    res["ratios"] = {run: {
        "records_per_s_to_bare": ratio(lambda x, run=run: rate(x[run]) / rate(x["bare_loop"])),
        "records_per_s_to_bare_per_core": ratio(
            lambda x, run=run: rate(x[run]) / rate(x["bare_loop_per_core"])),
        "cpu_per_record_to_bare": ratio(
            lambda x, run=run: cpu_ms(x[run]) / cpu_ms(x["bare_loop"]))}
        for run in runs}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--pages", type=int, default=1500)
    ap.add_argument("--kb", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--links", choices=["site", "unique"], default="site",
                    help="link model of the pages (see make_page)")
    ap.add_argument("-o", dest="options", action="append", default=[], metavar="KEY=VALUE",
                    help="crawler key for the pipeline run (repeatable)")
    ap.add_argument("--runs", default=",".join(PIPELINE_RUNS),
                    help="pipeline runs, of " + ", ".join(PIPELINE_RUNS))
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of every run and the bare loops (3; 1 with --opensearch)")
    ap.add_argument("--opensearch", type=int, metavar="PORT",
                    help="frontier and progress in an OpenSearch node started on PORT")
    args = ap.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    unknown = set(runs) - set(PIPELINE_RUNS)
    if unknown or not runs:
        ap.error(f"--runs: unknown {', '.join(sorted(unknown)) or '(none given)'}")
    n_rounds = args.rounds if args.rounds is not None else (1 if args.opensearch else 3)
    if n_rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.opensearch and len(runs) * n_rounds > 1:
        ap.error("--opensearch takes one run and one round (its indices are not reset between "
                 "runs)")
    work = Path(tempfile.mkdtemp(prefix="bench-w2w-"))
    node = None
    rounds: list[dict] = []
    try:
        if args.opensearch:
            node = OpenSearchNode(ROOT, work / "opensearch", args.opensearch, "1g")
            node.up()
        total, size = make_inputs(work / "in", args.files, args.pages, args.kb, args.seed,
                                  args.links)
        cores = os.cpu_count() or 1
        # rounds: the bare loops and every pipeline run, the bare loops first in the first
        # round and last in the next, and so on (the machine's speed drifts by up to a third
        # within minutes); each ratio is taken within its round
        for r in range(n_rounds):
            order = ["bare", *runs] if r % 2 == 0 else [*runs, "bare"]
            measures: dict = {}
            for who in order:
                print(f"[bench] warc2warc round {r + 1} of {n_rounds}: {who} ...",
                      file=sys.stderr, flush=True)
                if who == "bare":
                    measures["bare_loop"] = bare_loop(work / "in", work / "bare.warc.gz")
                    measures["bare_loop_per_core"] = bare_loop(work / "in",
                                                               work / "bare-n.warc.gz", cores)
                    continue
                options = [*PIPELINE_RUNS[who], f"parallelism.parser={cores}", *args.options]
                measures[who] = pipeline(work / "in", work / f"{who}-{r}", total, options,
                                         args.opensearch)
                shutil.rmtree(work / f"{who}-{r}", ignore_errors=True)
            measures["order"] = "bare first" if r % 2 == 0 else "bare last"
            rounds.append(measures)
    finally:
        if node is not None:
            node.down()
        shutil.rmtree(work, ignore_errors=True)
    inputs = {"files": args.files, "records": total, "compressed_mb": round(size / 1e6, 1),
              "page_kb": args.kb, "links": args.links, "options": args.options,
              "parser_tasks": cores, "progress": "opensearch" if args.opensearch else "sqlite"}
    print(json.dumps(summarize(rounds, runs, inputs, total, size), indent=1))


if __name__ == "__main__":
    main()
