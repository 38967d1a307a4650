"""Benchmark of sitemap parsing: the project's streaming expat parser against lxml and defusedxml.

    .venv/bin/python bench/bench_sitemap.py [--urls 50000]

Input: a generated ``<urlset>`` of ``--urls`` entries (loc, lastmod, changefreq, priority, one
image each: ~9 MB), plain and gzipped; a gzip bomb (1 GiB of spaces after ``<urlset>``,
1 MB compressed); a billion-laughs document. For each parser: ms per parse and entries found.
lxml (``iterparse(resolve_entities=False, no_network=True, huge_tree=False)``) and defusedxml
(``defusedxml.ElementTree.iterparse``) are measured only when importable (they are not project
dependencies; install them in a scratch virtualenv to compare).

Recorded 2026-11-23 (Python 3.11.7, expat 2.5.0, lxml 6.1.3 and defusedxml 0.7.1 in a scratch
virtualenv, 2 CPUs shared with other work: ±30 %), 50,000 URLs (12.8 MB; 0.6 MB gzipped), best of
3–5. owler extracts every field (loc, lastmod normalised, changefreq, priority, image extension);
lxml and defusedxml only count the ``<url>`` elements, so their figures are lower bounds:

| parser | urlset | urlset.gz | gzip bomb (1 GiB, capped at 50 MB) | billion laughs |
|---|---:|---:|---:|---:|
| owler (expat, streaming, own guards) | 519 ms | 815 ms | 282 ms (0 URLs, truncated) | refused at once |
| lxml iterparse (count only) | 377 ms | 294 ms | 137 ms (syntax error) | refused |
| defusedxml iterparse (count only) | 374 ms | 487 ms | 214 ms (syntax error) | refused |

Chosen: the standard library's expat with own guards — within 1.5–3× of a count-only lxml while
doing all the per-entry work, streaming with bounded memory, no new dependency. Downstream, the
sitemap parser bolt spends ~130 µs per entry in all (parse, filters, blacklist, one JSON status
tuple; measured through the multilang protocol: 50,000 entries in 6.4 s).
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from owler.sitemap.parser import SitemapError, parse_sitemap  # noqa: E402


def make_urlset(n: int) -> bytes:
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
             'schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">\n']
    for i in range(n):
        parts.append(f"<url><loc>https://www.example.com/section/{i % 97}/article-{i}.html</loc>"
                     f"<lastmod>2024-05-{1 + i % 28:02d}T10:00:00+02:00</lastmod>"
                     f"<changefreq>daily</changefreq><priority>0.{i % 10}</priority>"
                     f"<image:image><image:loc>https://img.example.com/{i}.jpg</image:loc>"
                     f"</image:image></url>\n")
    parts.append("</urlset>\n")
    return "".join(parts).encode()


LAUGHS = (b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                     for i in range(1, 10))
          + b']>\n<urlset><url><loc>http://a/&lol9;</loc></url></urlset>')


def best(fn, data, runs=5):
    out, times = None, []
    for _ in range(runs):
        t = time.perf_counter()
        try:
            out = fn(data)
        except Exception as exc:  # noqa: BLE001 - a refusal is a result here
            out = f"refused ({type(exc).__name__})"
        times.append(time.perf_counter() - t)
    return min(times) * 1000, out


def owler(data):
    try:
        return len(parse_sitemap(data).entries)
    except SitemapError as exc:
        return f"refused ({exc.cause})"


def lxml_parse(data):
    from lxml import etree

    if data[:2] == b"\x1f\x8b":
        data = gzip.GzipFile(fileobj=io.BytesIO(data)).read(50 * 1024 * 1024)
    n = 0
    for _, el in etree.iterparse(io.BytesIO(data), events=("end",), resolve_entities=False,
                                 no_network=True, huge_tree=False, load_dtd=False):
        if el.tag.endswith("}url") or el.tag == "url":
            n += 1
            el.clear()
    return n


def defused_parse(data):
    from defusedxml.ElementTree import iterparse

    if data[:2] == b"\x1f\x8b":
        data = gzip.GzipFile(fileobj=io.BytesIO(data)).read(50 * 1024 * 1024)
    n = 0
    for _, el in iterparse(io.BytesIO(data), events=("end",)):
        if el.tag.endswith("}url") or el.tag == "url":
            n += 1
            el.clear()
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, default=50_000)
    args = ap.parse_args()
    urlset = make_urlset(args.urls)
    gz = gzip.compress(urlset, 6)
    bomb = gzip.compress(b"<urlset>" + b" " * (1 << 30), 9)
    inputs = [("urlset", urlset), ("urlset.gz", gz), ("gzip bomb", bomb), ("billion laughs", LAUGHS)]
    parsers = [("owler (expat, streaming)", owler)]
    for name, fn, mod in (("lxml iterparse", lxml_parse, "lxml"),
                          ("defusedxml iterparse", defused_parse, "defusedxml")):
        try:
            __import__(mod)
            parsers.append((name, fn))
        except ImportError:
            print(f"({mod} not importable: not measured)")
    print(f"urlset: {len(urlset) / 1e6:.1f} MB, {args.urls:,} URLs; gzipped {len(gz) / 1e6:.1f} MB; "
          f"bomb {len(bomb) / 1e6:.1f} MB compressed\n")
    print("| parser | " + " | ".join(n for n, _ in inputs) + " |")
    print("|---|" + "---:|" * len(inputs))
    for pname, fn in parsers:
        cells = []
        for _, data in inputs:
            ms, out = best(fn, data, 3 if len(data) > 1e6 else 5)
            cells.append(f"{ms:,.0f} ms ({out})")
        print(f"| {pname} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
