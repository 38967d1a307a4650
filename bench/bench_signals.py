"""Benchmark: what the webmasters' signals cost a page on the fetcher's path (issue 47).

Timed alone, each the best of ``--repeat`` repeats: ``from_headers`` over 12 ordinary headers;
the ``/.well-known/tdmrep.json`` cache hit of a host without a file (``tdmrep_url``, the lookup,
the statements); the ``<meta>`` scan (``meta_statements``) over real pages, the HTML responses of
pywb's archived crawl of iana.org (``.work/testdata``, fetched by ``make setup``) and
StormCrawler's test pages (``shared/testdata``, read in place), over the signals farm's pages
(tests/farm/signals.py), and over three of the farm's heads that say something. Prints µs per
page; docs/benchmarks-history.md (issue 47, second part) has a run.

Run: ``.venv/bin/python bench/bench_signals.py [--repeat 9]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from warcio.archiveiterator import ArchiveIterator  # noqa: E402

from owler.fetch.tdmrep import TdmRepFile, TdmRepSource, tdmrep_url  # noqa: E402
from owler.signals.head import meta_statements  # noqa: E402
from owler.signals.sources import from_headers  # noqa: E402
from tests.farm import signals as S  # noqa: E402

IANA = ROOT / ".work" / "testdata" / "pywb-2.10.0" / "warcs" / "iana.warc.gz"
STORMCRAWLER = ROOT.parent / "shared" / "testdata" / "html" / "stormcrawler"
AGENTS = ["owler", "owler-py"]
HEADERS = [("Date", "Mon, 01 Dec 2026 10:00:00 GMT"), ("Server", "nginx"),
           ("Content-Type", "text/html; charset=utf-8"), ("Content-Length", "12345"),
           ("Connection", "keep-alive"), ("Vary", "Accept-Encoding"),
           ("Cache-Control", "max-age=600"), ("ETag", '"abc"'),
           ("Last-Modified", "Mon, 01 Dec 2026 09:00:00 GMT"), ("X-Frame-Options", "DENY"),
           ("Strict-Transport-Security", "max-age=31536000"), ("Accept-Ranges", "bytes")]


def real_pages() -> list[bytes]:
    if not IANA.is_file():
        sys.exit(f"{IANA} is missing: run make setup")
    pages = []
    with open(IANA, "rb") as f:
        for rec in ArchiveIterator(f):
            if rec.rec_type == "response" and "html" in (
                    rec.http_headers.get_header("content-type") or ""):
                body = rec.content_stream().read()
                if body:
                    pages.append(body)
    pages.extend(p.read_bytes() for p in sorted(STORMCRAWLER.glob("*.html")))
    return pages


def best(fn, number: int, repeat: int) -> float:
    """µs per call: the best of ``repeat`` runs of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    pages = real_pages()
    farm = [S.html(site, path) for site in S.HOSTS for path in ["/", *S.PAGES[site]]]
    said = [S.html("meta", p) for p in ("/", "/tdm", "/tdm-off")]
    src = TdmRepSource({"http.agent.name": "bench"}, None)
    url = "http://www.example.org/some/path/page.html?q=1"
    src.cache.put(tdmrep_url(url), TdmRepFile([]))

    def tdm_hit() -> None:
        found = src.cache.get(tdmrep_url(url), time.time())
        if found.rules or found.problem:
            found.statements(url)

    headers = best(lambda: from_headers(HEADERS, AGENTS), 5000, args.repeat)
    tdm = best(tdm_hit, 5000, args.repeat)
    real = [best(lambda b=b: meta_statements(b, AGENTS), 200, args.repeat) for b in pages]
    small = [best(lambda b=b: meta_statements(b, AGENTS), 200, args.repeat) for b in farm]
    heads = [best(lambda b=b: meta_statements(b, AGENTS), 200, args.repeat) for b in said]
    print(f"from_headers, 12 ordinary headers        {headers:7.2f} µs")
    print(f"tdmrep.json cache hit, no file           {tdm:7.2f} µs")
    print(f"<meta> scan, {len(real)} real pages "
          f"({min(map(len, pages)) / 1024:.1f}-{max(map(len, pages)) / 1024:.0f} KiB): median "
          f"{statistics.median(real):.2f}, mean {statistics.mean(real):.2f}, max {max(real):.2f} µs")
    print(f"<meta> scan, {len(small)} signals farm pages: median {statistics.median(small):.2f} µs")
    print("<meta> scan, heads that say something (meta /, /tdm, /tdm-off): "
          + ", ".join(f"{t:.1f}" for t in heads) + " µs")


if __name__ == "__main__":
    main()
