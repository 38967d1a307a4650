"""WARC writing cost: owler.warc.WARCWriter vs warcio's WARCWriter(gzip=True), same run, same data.

2,000 response records of ~45 KB synthetic HTML (Zipf-distributed pseudo-words in markup: compresses
about 4:1 like real pages; ``--html DIR`` uses real pages instead), one gzip member per record, SHA-1 block and payload digests for both.
Prints a markdown table (µs/record, records/s, MB/s of payload, output size, ratio to warcio).

    .venv/bin/python bench/bench_warc.py [--records 2000] [--size 45000] [--levels 6,9] [--verify] [--html DIR]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from warcio.archiveiterator import ArchiveIterator  # noqa: E402
from warcio.statusandheaders import StatusAndHeaders  # noqa: E402
from warcio.warcwriter import WARCWriter as WarcioWriter  # noqa: E402

from owler.warc import WARCWriter  # noqa: E402


def make_vocabulary(rnd: random.Random, n: int = 6000) -> tuple[list[str], list[float]]:
    """Pseudo-words with Zipf weights: compresses like natural-language HTML (about 4:1)."""
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [26 - i for i in range(26)]
    words = ["".join(rnd.choices(letters, weights, k=rnd.randrange(2, 11))) for _ in range(n)]
    return words, [1.0 / (i + 1) for i in range(n)]


TAGS = ["p", "div", "span", "li", "a", "td", "h2", "strong", "em"]
REQUEST = b"GET /page HTTP/1.1\r\nHost: example.com\r\nUser-Agent: OWLer-py/0.1\r\nAccept: */*\r\n\r\n"


def make_page(rnd: random.Random, size: int, vocab: tuple[list[str], list[float]]) -> bytes:
    words, weights = vocab

    def text(k: int) -> str:
        return " ".join(rnd.choices(words, weights, k=k))

    parts = ['<!doctype html><html lang="en"><head><meta charset="utf-8"><title>',
             text(8), "</title></head><body>"]
    n = sum(len(p) for p in parts)
    while n < size:
        tag = rnd.choice(TAGS)
        attrs = (f' href="/{text(1)}/{rnd.randrange(10**6)}.html"' if tag == "a"
                 else f' class="c{rnd.randrange(40)}"')
        chunk = f"<{tag}{attrs}>{text(rnd.randrange(3, 25))}</{tag}>\n"
        parts.append(chunk)
        n += len(chunk)
    parts.append("</body></html>")
    return "".join(parts).encode("utf-8")


def make_records(n: int, size: int, html_dir: str | None = None) -> list[tuple[str, bytes]]:
    if html_dir:
        pages = [p.read_bytes() for p in sorted(Path(html_dir).glob("*.htm*"))]
        if not pages:
            raise SystemExit(f"no *.htm* files in {html_dir}")
    else:
        rnd = random.Random(42)
        vocab = make_vocabulary(rnd)
        pages = [make_page(rnd, size, vocab) for _ in range(50)]
    return [(f"https://example.com/{i}/page.html", pages[i % len(pages)]) for i in range(n)]


HEADERS = [("Date", "Wed, 01 May 2024 12:00:00 GMT"), ("Server", "nginx"),
           ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "max-age=600")]


def bench_owler(records, directory: Path, level: int, with_request: bool) -> tuple[float, int]:
    w = WARCWriter(directory, prefix=f"BENCH{level}{'R' if with_request else ''}",
                   gzip_level=level, rotation_size=-1, rotation_time=-1)
    t = time.perf_counter()
    for url, payload in records:
        w.write_exchange(url, fetch_time=1714564800.0,
                         request_line_and_headers=REQUEST if with_request else None,
                         status_line="HTTP/1.1 200 OK",
                         response_headers=HEADERS + [("Content-Length", str(len(payload)))],
                         payload=payload, ip="192.0.2.1")
    w.close()
    elapsed = time.perf_counter() - t
    return elapsed, w.stats.bytes


def bench_warcio(records, path: Path) -> tuple[float, int]:
    t = time.perf_counter()
    with open(path, "wb") as f:
        writer = WarcioWriter(f, gzip=True)
        for url, payload in records:
            http = StatusAndHeaders("200 OK", HEADERS + [("Content-Length", str(len(payload)))],
                                    protocol="HTTP/1.1")
            rec = writer.create_warc_record(url, "response", payload=io.BytesIO(payload),
                                            http_headers=http,
                                            warc_headers_dict={"WARC-IP-Address": "192.0.2.1"})
            writer.write_record(rec)
    elapsed = time.perf_counter() - t
    return elapsed, path.stat().st_size


def verify(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            rec.content_stream().read()
            n += rec.rec_type == "response"
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--size", type=int, default=45000, help="approximate HTML bytes per page")
    ap.add_argument("--html", metavar="DIR", help="use the *.html files in DIR instead of synthetic pages")
    ap.add_argument("--levels", default="6,9", help="deflate levels for owler rows (default 6,9)")
    ap.add_argument("--verify", action="store_true", help="read every output back with warcio")
    a = ap.parse_args()
    records = make_records(a.records, a.size, a.html)
    mb = sum(len(p) for _, p in records) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        rows = []
        t_w, size_w = bench_warcio(records, d / "warcio.warc.gz")
        rows.append(("warcio 1.8.1 `WARCWriter(gzip=True)` (zlib 9)", "response", t_w, size_w))
        levels = [int(x) for x in a.levels.split(",")]
        for level, req in [(levels[0], True)] + [(lv, False) for lv in levels]:
            t, size = bench_owler(records, d, level, req)
            rows.append((f"owler `WARCWriter` (zlib-ng {level})",
                         "request+response" if req else "response", t, size))
        if a.verify:
            for f in sorted(d.glob("*.warc.gz")):
                assert verify(f) == a.records, f
        n = a.records
        print(f"{n} records, {mb / n * 1000:.1f} KB mean payload, Python {sys.version.split()[0]}\n")
        print("| writer | records | µs/record | records/s | MB/s payload | output MB | time vs warcio |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for name, kind, t, size in rows:
            print(f"| {name} | {kind} | {t / n * 1e6:,.0f} | {n / t:,.0f} | {mb / t:,.1f} | "
                  f"{size / 1e6:.1f} | {t / t_w:.2f}x |")
        if a.verify:
            print("\nall outputs read back with warcio, digests verified")


if __name__ == "__main__":
    main()
