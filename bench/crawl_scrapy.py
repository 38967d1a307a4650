"""Scrapy crawling the benchmark web farm: the peer column of the crawl benchmarks.

    python bench/crawl_scrapy.py --seeds SEEDS_FILE --out DIR [--delay 1.0] [--concurrency 50]
                                 [--agent owler-bench] [--timeout 10]

One process, Scrapy run in-process with ``CrawlerProcess`` (no project scaffolding). It crawls from
the seeds (one URL per line; blank lines, ``#`` comments and anything after a tab are ignored)
until Scrapy has no request left - the farm (``bench/farm.py``) is finite and closed - writes
every fetched page as a gzipped WARC response record with warcio, logs to ``DIR/scrapy.log``
(level INFO: Scrapy's start-up, the once-a-minute rate line and the final stats, nothing per
request) and prints one JSON line on stdout::

    {"pages": ..., "errors": ..., "warc_bytes": ..., "seconds": ..., ...}

``pages`` = HTTP 200 HTML pages stored; ``errors`` = requests that ended without a response after
retries (connection errors, timeouts) plus non-2xx answers; ``seconds`` = wall time of the crawl
(``CrawlerProcess.start()``, robots.txt fetches included); the other keys are Scrapy's own counters
(requests, robots.txt fetched and denials, retries, requests dropped by the dupe filter) and this
process's CPU seconds and peak RSS.

Settings, chosen to match OWLer's explorative crawl (one fetch at a time per host, a fixed delay
between fetches of a host, a global cap on fetches in flight):

* ``ROBOTSTXT_OBEY = True`` with the default parser (protego, as our fetcher);
  ``USER_AGENT = --agent`` (robots.txt groups are matched on it too).
* Politeness: ``DOWNLOAD_DELAY = --delay``, no jitter (``DOWNLOAD_DELAY_JITTER = 0``, the
  Scrapy >= 2.19 name of ``RANDOMIZE_DOWNLOAD_DELAY = False``, which is deprecated and would only
  add a warning), ``CONCURRENT_REQUESTS_PER_DOMAIN = 1`` and ``CONCURRENT_REQUESTS_PER_IP = 0``
  so the download slot is the URL's host - each farm host is an IP literal, its own slot.
  ``CONCURRENT_REQUESTS = --concurrency``, ``DOWNLOAD_TIMEOUT = --timeout``. One difference
  remains: Scrapy's delay runs from the START of a host's previous request, ours (StormCrawler's)
  from its END, so Scrapy is ahead by one fetch time per page (about a millisecond on loopback).
  The robots.txt request goes through the host's slot like a page and waits its turn; a URL that
  robots.txt forbids is dropped before the slot and costs no delay (as in our fetcher).
* Breadth-first-ish order like a frontier: ``DEPTH_PRIORITY = 1`` with FIFO memory/disk queues,
  under Scrapy's default ``DownloaderAwarePriorityQueue`` (one queue per download slot, the
  queue meant for broad crawls); ``DEPTH_LIMIT = 0`` (unlimited).
* Retries: Scrapy's default kept (``RETRY_TIMES = 2`` on 5xx/408/429 and connection errors,
  timeouts); the farm answers none of those, so none happen there. Redirects on (default; the
  farm has none), meta refresh on (default; none in the farm).
* Off: HTTP cache, cookies (our crawler keeps none), Referer header (we send none:
  ``REFERRER_POLICY = "no-referrer"``; ``REFERER_ENABLED = False`` would do the same but makes the
  redirect middlewares log two warnings), AutoThrottle, telnet console and Scrapy 2.19's remote
  control HTTP server (``REMOTE_CONTROL_ENABLED``). DNS plays no part (IP literals). Default
  request headers and compression middleware kept (Scrapy's out-of-the-box behaviour).
* Links followed, as our parser: ``a[href]`` and ``area[href]`` (``LinkExtractor``'s default tags
  and attributes, default ``deny_extensions`` which has no ``.html``, ``canonicalize=False``, the
  default, so URLs are only made absolute and percent-encoded safely), dropping ``rel=nofollow``,
  fragment removed, http(s) only, any host (no ``allowed_domains``: links to other farm hosts are
  followed). Duplicates are left to Scrapy's default fingerprint dupe filter.
* Storage: an item pipeline writes each response that reached the callback (HTTP 200; robots.txt
  is fetched by the robots middleware and never reaches it) as a WARC/1.1 ``response`` record,
  one gzip member per record (warcio's writer: zlib level 9), with the HTTP status line and
  headers, ``WARC-Date`` (time of writing, microseconds), ``WARC-IP-Address``; no request
  records (our crawler writes none). Files ``DIR/scrapy-<time>-<n>.warc.gz`` start with a
  warcinfo record and rotate at 1 GB (compressed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import socket
import sys
import time
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from urllib.parse import urldefrag

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spidermiddlewares.httperror import HttpError
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

ROTATION_BYTES = 1 << 30


def read_seeds(path: str) -> list[str]:
    seeds = []
    for line in Path(path).read_text().splitlines():
        url = line.split("\t", 1)[0].strip()
        if url and not url.startswith("#"):
            seeds.append(url)
    return seeds


def scrapy_settings(args: argparse.Namespace) -> dict:
    return {
        "BOT_NAME": "owler-bench-peer",
        "USER_AGENT": args.agent,
        "ROBOTSTXT_OBEY": True,
        "ROBOTSTXT_PARSER": "scrapy.robotstxt.ProtegoRobotParser",
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS_PER_IP": 0,
        "DOWNLOAD_DELAY": args.delay,
        "DOWNLOAD_DELAY_JITTER": 0,
        "DOWNLOAD_TIMEOUT": args.timeout,
        "DEPTH_LIMIT": 0,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "RETRY_ENABLED": True,
        "REDIRECT_ENABLED": True,
        "HTTPCACHE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "REFERER_ENABLED": True,  # disabling it makes the redirect middlewares warn
        "REFERRER_POLICY": "no-referrer",  # ... so keep it and send no Referer, as we do
        "AUTOTHROTTLE_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,  # Scrapy 2.19's HTTP control server, like telnet
        "LOG_LEVEL": "INFO",
        "LOG_FILE": str(Path(args.out) / "scrapy.log"),
        "LOG_FILE_APPEND": False,
        "ITEM_PIPELINES": {f"{__name__}.WarcPipeline": 100},
        "WARC_DIR": str(args.out),
        "WARC_ROTATION_BYTES": ROTATION_BYTES,
    }


class FarmSpider(scrapy.Spider):
    """Follows every a/area link (no nofollow, no fragment, http(s), any host)."""

    name = "farm"

    def __init__(self, seeds: list[str], **kwargs):
        super().__init__(**kwargs)
        self.seeds = seeds
        self.links = LinkExtractor(tags=("a", "area"), attrs=("href",))
        self.errors = 0
        self.robots_denied = 0

    async def start(self):
        for url in self.seeds:
            yield scrapy.Request(url, callback=self.parse, errback=self.on_error)

    def parse(self, response):
        yield {"response": response}
        if not isinstance(response, HtmlResponse):
            return
        seen = set()
        for link in self.links.extract_links(response):
            if link.nofollow:
                continue
            url = urldefrag(link.url)[0]
            if url in seen or not url.startswith(("http://", "https://")):
                continue
            seen.add(url)
            yield scrapy.Request(url, callback=self.parse, errback=self.on_error)

    def on_error(self, failure) -> None:
        if failure.check(HttpError):
            self.errors += 1  # a non-2xx answer
        elif failure.check(IgnoreRequest):
            self.robots_denied += 1  # robots.txt forbids it: not an error
        else:
            self.errors += 1  # connection error or timeout, after retries


class WarcPipeline:
    """Writes each response item as a gzipped WARC/1.1 response record (warcio), rotating files."""

    def __init__(self, out_dir: str, rotation: int):
        self.dir = Path(out_dir)
        self.rotation = rotation
        self.stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        self.seq = 0
        self.fh = None
        self.writer: WARCWriter | None = None
        self.records = 0
        self.html_pages = 0
        self.files: list[Path] = []

    @classmethod
    def from_crawler(cls, crawler):
        pipe = cls(crawler.settings.get("WARC_DIR"), crawler.settings.getint("WARC_ROTATION_BYTES"))
        crawler.warc_pipeline = pipe  # read back by main() for the summary
        return pipe

    def _open(self) -> None:
        name = f"scrapy-{self.stamp}-{self.seq:05d}.warc.gz"
        self.seq += 1
        path = self.dir / name
        self.files.append(path)
        self.fh = open(path, "wb")
        self.writer = WARCWriter(self.fh, gzip=True, warc_version="1.1")
        self.writer.write_record(self.writer.create_warcinfo_record(name, {
            "software": f"Scrapy/{scrapy.__version__} (bench/crawl_scrapy.py)",
            "hostname": socket.gethostname(),
            "format": "WARC File Format 1.1",
        }))

    def _close(self) -> None:
        if self.fh:
            self.fh.close()
            self.fh = self.writer = None

    def close_spider(self) -> None:
        self._close()

    def process_item(self, item):
        response = item["response"]
        if self.fh is None:
            self._open()
        status = response.status
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        headers = [(k.decode("latin-1"), v.decode("latin-1"))
                   for k, values in response.headers.items() for v in values]
        http_headers = StatusAndHeaders(f"{status} {reason}".rstrip(), headers,
                                        protocol=getattr(response, "protocol", None) or "HTTP/1.1")
        warc_headers = {"WARC-Date": datetime_to_iso_date(
            dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), use_micros=True)}
        if response.ip_address is not None:
            warc_headers["WARC-IP-Address"] = str(response.ip_address)
        record = self.writer.create_warc_record(
            response.url, "response", payload=BytesIO(response.body), length=len(response.body),
            http_headers=http_headers, warc_headers_dict=warc_headers)
        self.writer.write_record(record)
        self.records += 1
        if status == 200 and isinstance(response, HtmlResponse):
            self.html_pages += 1
        if self.fh.tell() >= self.rotation:
            self._close()
        return item


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", required=True, help="file with one URL per line")
    ap.add_argument("--out", required=True, help="directory for the WARC files and scrapy.log")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds between fetches of a host")
    ap.add_argument("--concurrency", type=int, default=50, help="fetches in flight in all")
    ap.add_argument("--agent", default="owler-bench", help="User-Agent (and robots.txt agent)")
    ap.add_argument("--timeout", type=float, default=10, help="download timeout, seconds")
    args = ap.parse_args()

    seeds = read_seeds(args.seeds)
    if not seeds:
        print(f"no seeds in {args.seeds}", file=sys.stderr)
        return 2
    Path(args.out).mkdir(parents=True, exist_ok=True)

    process = CrawlerProcess(scrapy_settings(args))
    crawler = process.create_crawler(FarmSpider)
    process.crawl(crawler, seeds=seeds)
    t0 = time.monotonic()
    process.start()
    wall = time.monotonic() - t0

    stats = crawler.stats.get_stats()
    spider = crawler.spider
    pipe: WarcPipeline | None = getattr(crawler, "warc_pipeline", None)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    files = pipe.files if pipe else []
    result = {
        "pages": pipe.html_pages if pipe else 0,
        "errors": spider.errors if spider else 0,
        "warc_bytes": sum(f.stat().st_size for f in files if f.exists()),
        "seconds": round(wall, 2),
        "records": pipe.records if pipe else 0,
        "warc_files": len(files),
        "requests": stats.get("downloader/request_count", 0),
        "responses": stats.get("downloader/response_count", 0),
        "robots_fetched": stats.get("robotstxt/request_count", 0),
        "robots_denied": stats.get("robotstxt/forbidden", 0),
        "retries": stats.get("retry/count", 0),
        "dupes_filtered": stats.get("dupefilter/filtered", 0),
        "finish_reason": stats.get("finish_reason"),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "max_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "scrapy": scrapy.__version__,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
