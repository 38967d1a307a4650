"""Real HTML pages nobody on the project wrote, for tests and benchmarks: the HTML responses of
the Common Crawl and dolma WARC samples in tests/data/warc, and trafilatura 2.3.1's test pages
(tests/data/html/trafilatura, Apache-2.0)."""

from __future__ import annotations

import gzip
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser
from warcio.archiveiterator import ArchiveIterator

DATA = Path(__file__).resolve().parent / "data"
TRAF = DATA / "html" / "trafilatura"
#: the WARC samples with HTML pages
CRAWL_WARCS = ("CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
               "dolma-sample-0000.warc.gz", "dolma-sample-0001.warc.gz")


def warc_html(name: str) -> list[tuple[str, list[tuple[str, str]], bytes]]:
    """``(url, HTTP headers, body)`` of each HTML response of ``tests/data/warc/<name>``."""
    out = []
    with open(DATA / "warc" / name, "rb") as fh:
        for rec in ArchiveIterator(fh, arc2warc=True):
            if rec.rec_type != "response" or not rec.http_headers:
                continue
            if "html" not in (rec.http_headers.get_header("Content-Type") or "").lower():
                continue
            out.append((rec.rec_headers.get_header("WARC-Target-URI"),
                        list(rec.http_headers.headers), rec.content_stream().read()))
    return out


def trafilatura(name: str) -> bytes:
    """A trafilatura test page's bytes (``.gz`` files decompressed)."""
    body = (TRAF / name).read_bytes()
    return gzip.decompress(body) if name.endswith(".gz") else body


def real_hrefs(selector: str = "a[href], area[href]") -> list[tuple[str, str]]:
    """``(page URL, href)`` of every element ``selector`` finds in the real pages, the href as
    written (not resolved): the Common Crawl and dolma pages with their own URL, trafilatura's
    under a stand-in one."""
    out = []
    pages = [(url, body) for name in CRAWL_WARCS for url, _, body in warc_html(name)]
    pages += [("https://www.example.org/page.html", trafilatura(p.name))
              for p in sorted(TRAF.iterdir())]
    for url, body in pages:
        out += [(url, n.attributes.get("href") or "")
                for n in LexborHTMLParser(body).css(selector)]
    return out
