"""First benchmark of the explorative topology on real Storm (local mode), embedded frontier.

A loopback web farm (tests.farm.server) of N hosts, zero politeness delay, WARC writing on. It
reports pages/s (first to last page request in the farm's access log), CPU seconds per page of all
processes of the crawl (JVM and every Python component: they are all waited-for descendants of
`owler run`, so RUSAGE_CHILDREN holds them), the largest resident set of one process, and the
WARC bytes written. Usage: python bench/bench_explorative.py [--hosts 120] [--threads 50]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.farm.harness import FarmProcess  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=120)
    ap.add_argument("--threads", type=int, default=50)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="owler-bench-"))
    conf = work / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {work / 'f.sqlite'}\nwarc.dir: {work / 'warc'}\n"
                    f"owler.work.dir: {work}\nhttp.allow.private.addresses: true\n"
                    f"fetcher.server.delay: 0.0\nfetcher.threads.number: {args.threads}\n"
                    "http.timeout: 2000\nspout.min.delay.queries: 200\n")
    with FarmProcess(args.hosts, work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        py = [sys.executable, "-m", "owler"]
        subprocess.run(py + ["inject", str(seeds), "--conf", str(conf)], cwd=ROOT, check=True,
                       capture_output=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        subprocess.run(py + ["run", "explorative", "--conf", str(conf), "--idle-exit", "5"],
                       cwd=ROOT, check=True, capture_output=True)
        wall = time.time() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log = farm.access_log()
    pages = [e for e in log if e["path"] != "/robots.txt" and e["status"] == 200]
    times = sorted(e["t"] for e in log)
    crawl_secs = times[-1] - times[0]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    warc = sum(f.stat().st_size for f in (work / "warc").glob("*.warc.gz"))
    res = {"hosts": args.hosts, "requests": len(log), "pages": len(pages),
           "crawl_seconds": round(crawl_secs, 1), "pages_per_s": round(len(pages) / crawl_secs, 1),
           "run_wall_seconds": round(wall, 1), "cpu_seconds_total": round(cpu, 1),
           "cpu_ms_per_page": round(1000 * cpu / max(len(pages), 1), 1),
           "max_rss_mb": round(after.ru_maxrss / 1024, 1), "warc_bytes": warc}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
