"""StormCrawler (Java) crawling the benchmark web farm: the fourth column of the crawl benchmarks.

    python bench/crawl_stormcrawler.py --seeds SEEDS_FILE --out DIR [--delay 1.0]
                                       [--concurrency 50] [--agent owler-bench]

StormCrawler 2.4 (``com.digitalpebble.stormcrawler:storm-crawler-core``, the newest release for
Storm 2.x that Maven Central serves here; its jars are fetched by ``bench/stormcrawler/pom.xml``
into ``.work/bench/stormcrawler/lib`` on first use) runs in Storm local mode on the project's own
Storm installation and launcher (``storm/java/LocalRunner.java``), as one JVM. The topology is
StormCrawler's in-memory one, the counterpart of our embedded frontier::

    MemorySpout(seeds) → URLPartitionerBolt → FetcherBolt → JSoupParserBolt
                                                  ↘ status ↘ status → MemoryStatusUpdater

``MemoryStatusUpdater`` puts discovered URLs back into the ``MemorySpout``'s queue (its cache of
known URLs keeps a URL from being queued twice). Settings (``bench/stormcrawler/crawler-conf.yaml``
over StormCrawler's ``crawler-default.yaml``): queues by host, one fetch at a time per host,
``fetcher.server.delay`` = ``--delay``, ``fetcher.threads.number`` = ``--concurrency``, robots.txt
obeyed (StormCrawler always does), links normalized with the fragment removed
(``BasicURLNormalizer``), every link followed once. StormCrawler's defaults otherwise: its HTTP
client (Apache httpclient), its parser extracting the text of every page.

Not like the other columns: **no WARC is written.** StormCrawler's WARC module for Storm 2.x is
not on Maven Central (only 1.18, for Storm 1.x), and nothing else in StormCrawler stores pages;
its column therefore does less work than ours: archiving a page (the fetcher's WARC archiver, its
deflate most of it) costs about 1.6 ms of CPU per page on this machine
(docs/benchmarks-history.md, issue 20, fifth session).

Memory: the whole crawler is one JVM, pages included. ``MemorySpout`` hands out URLs in date order
(the order they were discovered), so for all hosts to be fetched in parallel the fetcher's per-host
queues must hold many URLs at once (``topology.max.spout.pending`` 20,000); the pages fetched wait
for the parser in Storm's queues, and with 1 GB of heap (our local runner's) the JVM died of
``GC overhead limit exceeded`` two thirds into the crawl. It gets 3 GB (``--heap``); the peak
memory of the run is reported as for the others.

StormCrawler does not stop by itself. The script watches the farm (``/__stats`` on the first
seed's host): once the farm has served nothing for ``--idle`` seconds after the crawl began, it
tells the launcher to stop (deactivate, drain, kill). It prints one JSON line:
``{"pages": ..., "seconds": ..., "farm": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench" / "stormcrawler"
LIB = ROOT / ".work" / "bench" / "stormcrawler" / "lib"
sys.path.insert(0, str(ROOT / "src"))

from owler.run.runner import storm_home  # noqa: E402

TOPOLOGY = """name: "stormcrawler-bench"
includes:
  - resource: true
    file: "/crawler-default.yaml"
    override: false
  - resource: false
    file: {conf}
    override: true
spouts:
  - id: "spout"
    className: "com.digitalpebble.stormcrawler.spout.MemorySpout"
    parallelism: 1
    constructorArgs:
      - {seeds}
bolts:
  - id: "partitioner"
    className: "com.digitalpebble.stormcrawler.bolt.URLPartitionerBolt"
    parallelism: 1
  - id: "fetcher"
    className: "com.digitalpebble.stormcrawler.bolt.FetcherBolt"
    parallelism: 1
  - id: "parse"
    className: "com.digitalpebble.stormcrawler.bolt.JSoupParserBolt"
    parallelism: 1
  - id: "status"
    className: "com.digitalpebble.stormcrawler.persistence.MemoryStatusUpdater"
    parallelism: 1
streams:
  - from: "spout"
    to: "partitioner"
    grouping: {{type: SHUFFLE}}
  - from: "partitioner"
    to: "fetcher"
    grouping: {{type: FIELDS, args: ["key"]}}
  - from: "fetcher"
    to: "parse"
    grouping: {{type: LOCAL_OR_SHUFFLE}}
  - from: "fetcher"
    to: "status"
    grouping: {{type: FIELDS, args: ["url"], streamId: "status"}}
  - from: "parse"
    to: "status"
    grouping: {{type: FIELDS, args: ["url"], streamId: "status"}}
"""


def ensure_jars() -> None:
    """StormCrawler and its dependencies (not Storm's, nor a second log4j) from Maven Central."""
    if LIB.is_dir() and any(LIB.glob("storm-crawler-core-*.jar")):
        return
    tmp = LIB.with_name("lib.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["mvn", "-q", "-B", "-C", "-f", str(HERE / "pom.xml"),
                    "dependency:copy-dependencies", f"-DoutputDirectory={tmp}",
                    "-DincludeScope=runtime",
                    "-DexcludeGroupIds=org.apache.logging.log4j,org.slf4j"], check=True)
    shutil.rmtree(LIB, ignore_errors=True)
    tmp.rename(LIB)


def farm_counts(stats_url: str) -> dict:
    with urllib.request.urlopen(stats_url, timeout=5) as resp:
        return json.loads(resp.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--agent", default="owler-bench")
    ap.add_argument("--idle", type=float, default=8.0,
                    help="seconds without a request to the farm that end the crawl")
    ap.add_argument("--max-time", type=float, default=3600)
    ap.add_argument("--heap", default="3g", help="the JVM's -Xmx (default 3g: see the module doc)")
    args = ap.parse_args()

    seeds = [line.split("\t")[0].strip() for line in Path(args.seeds).read_text().splitlines()]
    seeds = [s for s in seeds if s and not s.startswith("#")]
    if not seeds:
        print("crawl_stormcrawler: no seed URL", file=sys.stderr)
        return 2
    ensure_jars()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    conf = out / "crawler-conf.yaml"
    conf.write_text((HERE / "crawler-conf.yaml").read_text()
                    .replace("__DELAY__", str(args.delay))
                    .replace("__THREADS__", str(args.concurrency))
                    .replace("__AGENT__", args.agent))
    flux = out / "topology.yaml"
    flux.write_text(TOPOLOGY.format(conf=json.dumps(str(conf)), seeds=json.dumps(seeds)))

    home = storm_home(ROOT)
    cp = os.pathsep.join([str(home / "lib" / "*"), str(home / "lib-flux" / "*"),
                          str(home / "lib-owler" / "*"), str(HERE), str(LIB / "*")])
    java = shutil.which("java") or "java"
    cmd = [java, f"-Xmx{args.heap}", "-XX:+UseParallelGC", f"-Dstorm.home={home}",
           f"-Dstorm.log.dir={out}", "-Dlogfile.name=stormcrawler-worker.log",
           f"-Dlog4j.configurationFile={home / 'log4j2' / 'cluster.xml'}",
           "-cp", cp, "eu.ows.owler.storm.LocalRunner", str(flux), "--drain", "5", "--stdin"]
    first = urlsplit(seeds[0])
    stats_url = f"{first.scheme}://{first.netloc}/__stats"

    def served(st: dict) -> int:
        return sum(int(st.get(k, 0)) for k in ("pages", "robots", "not_found", "private"))

    start = time.time()
    base = served(farm_counts(stats_url))
    with open(out / "stormcrawler.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(out))
        last, last_change = base, time.time()
        try:
            while proc.poll() is None:
                time.sleep(1.0)
                now = time.time()
                count = served(farm_counts(stats_url))
                if count != last:
                    last, last_change = count, now
                began = last > base
                if (began and now - last_change >= args.idle) or now - start > args.max_time:
                    break
        finally:
            if proc.poll() is None:
                try:
                    proc.stdin.write(b"stop\n")
                    proc.stdin.flush()
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    stats = farm_counts(stats_url)
    rc = proc.returncode
    print(json.dumps({"pages": stats.get("pages"), "seconds": round(time.time() - start, 1),
                      "returncode": rc, "farm": stats}))
    if last == base:
        print("crawl_stormcrawler: the farm served nothing; see "
              f"{out / 'stormcrawler.log'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
