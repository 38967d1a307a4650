"""Property-based fuzzing (hypothesis) of every parser of untrusted input: robots.txt, sitemaps
(XML, text, feeds, gzip), HTML parsing and outlink extraction, URL normalisation and filters, the
WARC reader and record parser, HTTP header handling (bodies, Retry-After, Location).

Inputs are generated or mutated from the real material in tests/data (real robots.txt files,
feeds, pages, WARC files): byte flips, cuts, insertions, repeated slices, splices of two seeds.
The property: no exception escapes (only the documented ones), each input ends within hypothesis'
deadline (5 s: a guard against a hang or a run-away parse, far above what any input takes, not a
speed figure) and the process stays within bounded memory.

Each target is one test, and that test checks its own run, wherever it runs (alone, or on any
pytest-xdist worker): hypothesis must have run it on at least 90% of ``OWLER_FUZZ_EXAMPLES``
inputs, at least half of them distinct (``max_examples`` is only an upper bound: a target that
stopped after a few inputs, or a strategy stuck on a few, would pass without it).

Environment:

``OWLER_FUZZ_EXAMPLES``
    inputs per target: 150 by default (``make test``); ``make fuzz`` runs 10,000 per target (each
    test prints its count, its seed and the peak memory with ``-s``).
``OWLER_FUZZ_SEED``
    the seed of the inputs (hypothesis' ``@seed``, one for every target). Unset, each run draws
    one (shared by the pytest-xdist workers of one run); a failing target names it in its error
    (``reproduce with OWLER_FUZZ_SEED=...``), and the same seed, examples count and code give the
    same inputs again.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import resource
import tarfile
import zlib
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from owler.conf import load_conf
from owler.fetch.http import DecodeError, FetchResult, TooLarge, decode_body, redirect_target
from owler.fetch.politeness import retry_after_seconds
from owler.fetch.robots import parse_robots
from owler.filters import URLFilters, check_url
from owler.parse.html import parse_html
from owler.sitemap.parser import Limits, SitemapError, parse_sitemap
from owler.warc.format.reader import InputRecord, WARCReadError, iter_records
from owler.warc.warc2warc.record_as_page import RecordParser, parse_http_response

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = int(os.environ.get("OWLER_FUZZ_EXAMPLES", "150"))
#: the share of EXAMPLES a target must have run (hypothesis runs all of them unless it stops early)
MIN_RUN = 0.9
#: the share of EXAMPLES that must be distinct inputs: hypothesis repeats some (a seed drawn
#: without mutation, its simplest values), 70 to 95% are new; a strategy stuck on a few is not
MIN_DISTINCT = 0.5
#: the peak memory (RSS) the process may reach, in MiB
MAX_RSS_MB = 2048


def run_seed() -> int:
    """``OWLER_FUZZ_SEED``; else one for this run: derived from pytest-xdist's id of the run
    (every worker of a run gets the same), or drawn."""
    chosen = os.environ.get("OWLER_FUZZ_SEED", "").strip()
    if chosen:
        return int(chosen)
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    if run_id:
        return int(run_id[:8], 16)
    return random.SystemRandom().randrange(1 << 32)


SEED = run_seed()
FUZZ = settings(max_examples=EXAMPLES, deadline=5000, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def target(*strategies):
    """Make ``check`` a test: hypothesis runs it on up to EXAMPLES inputs drawn from
    ``strategies`` (seeded with SEED), then the test asserts how many inputs it ran, how many of
    them distinct, and the process's peak memory so far. A failure names the seed that draws the
    same inputs again."""
    def wrap(check):
        ran: list[int] = []  # the hash of each input this test ran, this run

        @seed(SEED)
        @FUZZ
        @given(st.tuples(*strategies))
        def each(args):
            ran.append(hash(args))
            check(*args)

        def test():
            ran.clear()
            try:
                each()
            except Exception as exc:
                exc.add_note(f"reproduce with OWLER_FUZZ_SEED={SEED} OWLER_FUZZ_EXAMPLES={EXAMPLES}")
                raise
            distinct = len(set(ran))
            peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"\nfuzz {check.__name__}: {len(ran)} inputs ({distinct} distinct) of {EXAMPLES}, "
                  f"OWLER_FUZZ_SEED={SEED}, peak RSS {peak_mb:.0f} MB")
            assert len(ran) >= EXAMPLES * MIN_RUN, (
                f"{check.__name__} ran {len(ran)} inputs, fewer than {MIN_RUN:.0%} of {EXAMPLES} "
                f"(OWLER_FUZZ_SEED={SEED})")
            assert distinct >= EXAMPLES * MIN_DISTINCT, (
                f"{check.__name__} ran {distinct} distinct inputs, fewer than {MIN_DISTINCT:.0%} "
                f"of {EXAMPLES} (OWLER_FUZZ_SEED={SEED})")
            assert peak_mb < MAX_RSS_MB, f"peak RSS {peak_mb:.0f} MB after {check.__name__}"

        test.__name__ = test.__qualname__ = check.__name__
        test.__doc__ = check.__doc__
        return test
    return wrap


# -- seeds from the real material ----------------------------------------------------------------

@lru_cache(maxsize=None)
def robots_seeds() -> tuple[bytes, ...]:
    out = []
    with tarfile.open(DATA / "robots" / "real_world_robots_txt_sample500.tar.gz") as tar:
        for member in tar.getmembers()[:200]:
            fh = tar.extractfile(member)
            if fh is not None:
                out.append(fh.read()[:20000])
    return tuple(out)


@lru_cache(maxsize=None)
def sitemap_seeds() -> tuple[bytes, ...]:
    feeds = [p.read_bytes() for p in sorted((DATA / "sitemaps" / "feedparser").glob("*.xml"))]
    urlset = (b'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/'
              b'schemas/sitemap/0.9"><url><loc>http://a.example/p</loc><lastmod>2024-01-01'
              b'</lastmod></url></urlset>')
    index = (b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>'
             b'http://a.example/s.xml</loc></sitemap></sitemapindex>')
    text = b"http://a.example/1\nhttp://a.example/2\n"
    return tuple(feeds + [urlset, index, text, gzip.compress(urlset)])


@lru_cache(maxsize=None)
def html_seeds() -> tuple[bytes, ...]:
    pages = [(DATA / "html" / "news_page.html").read_bytes()]
    for line in (DATA / "html" / "w3lib_2.5.0_html_cases.jsonl").read_text().splitlines()[:150]:
        case = json.loads(line)
        text = case.get("input") or case.get("text") or case.get("html")
        if isinstance(text, str):
            pages.append(text.encode("utf-8", "replace"))
    return tuple(pages)


@lru_cache(maxsize=None)
def url_seeds() -> tuple[str, ...]:
    urls = []
    for name in ("url_normalize_3.1.0_cases.jsonl", "w3lib_2.5.0_url_cases.jsonl"):
        for line in (DATA / "url" / name).read_text().splitlines():
            case = json.loads(line)
            for v in case.values():
                if isinstance(v, str) and "://" in v:
                    urls.append(v)
                    break
    return tuple(urls[:2000])


@lru_cache(maxsize=None)
def warc_seeds() -> tuple[bytes, ...]:
    files = sorted(p for p in (DATA / "warc").glob("*.warc*"))
    return tuple(p.read_bytes()[:300_000] for p in files)


@lru_cache(maxsize=None)
def http_seeds() -> tuple[bytes, ...]:
    """HTTP response blocks of the real WARC files."""
    out = []
    for data in warc_seeds():
        try:
            for item in iter_records(io.BytesIO(data)):
                if isinstance(item, InputRecord) and item.is_http_response:
                    out.append(item.block[:50_000])
        except WARCReadError:
            pass
    return tuple(out[:200])


# -- mutation ----------------------------------------------------------------------------------

@st.composite
def mutated(draw, seeds) -> bytes:
    """A real seed, mutated a few times (or, now and then, plain random bytes)."""
    pool = seeds()
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=4096))
    data = bytearray(draw(st.sampled_from(pool)))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.integers(0, 5))
        pos = draw(st.integers(0, len(data))) if data else 0
        if op == 0 and data:  # flip bytes
            for _ in range(draw(st.integers(1, 8))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] = draw(st.integers(0, 255))
        elif op == 1:  # cut
            data = data[:pos]
        elif op == 2:  # insert random bytes
            data[pos:pos] = draw(st.binary(min_size=1, max_size=64))
        elif op == 3 and data:  # repeat a slice
            end = min(len(data), pos + draw(st.integers(1, 256)))
            data[pos:pos] = data[pos:end] * draw(st.integers(1, 50))
        elif op == 4:  # splice another seed in
            other = draw(st.sampled_from(pool))
            start = draw(st.integers(0, len(other)))
            data[pos:pos] = other[start:start + draw(st.integers(1, 2048))]
        elif op == 5:  # insert markup-ish tokens
            token = draw(st.sampled_from([b"<", b">", b"\x00", b"\r\n\r\n", b"%", b"&#", b"]]>",
                                          b"<!--", b"<a href=", b"\xef\xbb\xbf", b"\xff\xfe",
                                          b"0\r\n\r\n", b"WARC/1.1\r\n", b"\x1f\x8b\x08"]))
            data[pos:pos] = token * draw(st.integers(1, 20))
    return bytes(data[:400_000])


# -- targets -------------------------------------------------------------------------------------

@target(mutated(robots_seeds), st.sampled_from(["owler", "googlebot", "*"]),
       st.sampled_from(["/", "/a/b?c=d", "/%E3%83%84", "/x$", "/private/p.html"]))
def test_robots_txt(body, agent, path):
    rules = parse_robots(body, [agent], "http://a.example/robots.txt")
    assert rules.allowed("http://a.example" + path) in (True, False)


@target(mutated(sitemap_seeds))
def test_sitemaps(body):
    try:
        result = parse_sitemap(body, Limits(max_urls=1000, max_bytes=2_000_000))
    except SitemapError:
        return
    assert len(result.entries) <= 1000


@target(mutated(html_seeds), st.sampled_from([None, "text/html", "text/html; charset=koi8-r",
                                             "text/html; charset=x-bogus"]))
def test_html_and_outlinks(body, ctype):
    headers = {"Content-Type": ctype} if ctype else {}
    res = parse_html("http://a.example/dir/page.html", body, headers)
    for link in res.outlinks:
        assert link.url.startswith(("http://", "https://")), link.url


@lru_cache(maxsize=1)
def url_chain():
    conf = load_conf()
    return conf, URLFilters.from_conf(conf)


@target(st.one_of(st.sampled_from(url_seeds()), st.text(max_size=300),
                 st.builds(lambda a, b: a + b, st.sampled_from(url_seeds()),
                           st.text(alphabet="%[]:@/?#&=;~ \t\x00é<>\\", max_size=60))))
def test_url_normalisation_and_filters(url):
    conf, filters = url_chain()
    verdict = check_url(conf, url, filters, "http://a.example/", {})[1]
    assert verdict == "ACCEPT" or verdict.startswith("REJECT:")


@target(mutated(warc_seeds))
def test_warc_reader_and_records(data):
    parser = RecordParser({"http.max.decompressed.size": 5_000_000})
    try:
        for item in iter_records(io.BytesIO(data), max_record=2_000_000):
            if isinstance(item, InputRecord):
                parser.outcome(item.target_uri or "http://x.example/", item.raw, {})
    except WARCReadError:
        pass


@target(mutated(http_seeds), st.sampled_from(["gzip", "deflate", "br", "zstd", "gzip, br", None]))
def test_http_heads_and_bodies(block, coding):
    try:
        code, _, _, headers, body = parse_http_response(block)
    except ValueError:
        return
    try:
        decode_body(body, coding, 2_000_000)
    except (DecodeError, TooLarge):
        pass
    for name, value in headers:
        if name.lower() == "retry-after":
            retry_after_seconds(value, 1_700_000_000.0)
    res = FetchResult(url="http://a.example/x/y", status=code, headers=headers)
    location = redirect_target(res)
    assert location is None or isinstance(location, str)
