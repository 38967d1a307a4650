"""The URL filter chain on links it has not seen: what each new outlink of a page costs.

A crawl of the real web meets mostly new URLs; the chain's memo (``urlfilters.memo.size``) only
answers links that come again, as a site's navigation does. Here the memo is off, so every link
pays the whole chain.

Input: the outlinks of the real pages of the Common Crawl and dolma samples and trafilatura's test
pages (``tests/realpages.py``), resolved by the parser (``owler.parse.html.parse_html``), as the
parsers hand them to the chain. Figures: ns per URL of the default chain (``urlfilters.json``)
and of each of its filters alone, best of ``--rounds``; and RegexURLFilter with its ``(?i)`` rules
searched in the lower-cased URL (the shipped way, ``owler.filters.regex.lowercase_form``) against
the same rules searched ignoring case, alternated in the same process.

A last table times the WHATWG parse under the parser's ``resolve`` and the normaliser: ada called
through ``ada_url``'s cffi binding as ``owler.urls`` does (``_join_url``, ``_normalize_url``)
against ``ada_url``'s own functions, on every ``href`` of the same real pages with its page's
URL, alternated, best of ``--rounds``.

Usage: .venv/bin/python bench/bench_urlfilters.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

import ada_url  # noqa: E402
from owler import conf as C  # noqa: E402
from owler import urls  # noqa: E402
from owler.filters import URLFilters  # noqa: E402
from owler.filters.regex import RegexURLFilter  # noqa: E402
from owler.parse.html import parse_html  # noqa: E402
from tests.realpages import CRAWL_WARCS, TRAF, real_hrefs, trafilatura, warc_html  # noqa: E402

SOURCE = "https://www.example.org/index.html"


def real_links() -> list[str]:
    out = []
    for name in CRAWL_WARCS:
        for url, headers, body in warc_html(name):
            page = parse_html(url, body, {k.lower(): v for k, v in headers})
            out += [link.url for link in page.outlinks]
    for path in sorted(TRAF.iterdir()):
        page = parse_html("https://www.example.org/page.html", trafilatura(path.name), {})
        out += [link.url for link in page.outlinks]
    return out


def ns_per_call(fn, args: list[tuple]) -> float:
    t0 = time.perf_counter()
    for a in args:
        try:
            fn(*a)
        except ValueError:
            pass
    return (time.perf_counter() - t0) / len(args) * 1e9


def ns_per_url(fn, links: list[str]) -> float:
    t0 = time.perf_counter()
    for url in links:
        fn(SOURCE, {}, url)
    return (time.perf_counter() - t0) / len(links) * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    links = real_links()
    chain = URLFilters.from_conf({**C.load_conf(), "urlfilters.memo.size": 0})
    print(f"{len(links):,} outlinks of real pages ({len(set(links)):,} distinct), memo off\n")
    print("| filter | ns per URL |")
    print("|---|---:|")
    print(f"| the default chain | {min(ns_per_url(lambda s, m, u: chain.filter(s, m, u), links) for _ in range(args.rounds)):,.0f} |")
    for f in chain.filters:
        print(f"| {f.name} alone | {min(ns_per_url(f.filter, links) for _ in range(args.rounds)):,.0f} |")
    lowered = next(f for f in chain.filters if isinstance(f, RegexURLFilter))
    ignoring = RegexURLFilter()
    ignoring.configure({}, {})
    ignoring._compiled = [(accept, p, None) for accept, p, _ in ignoring._compiled]
    assert all(lowered.filter(SOURCE, {}, u) == ignoring.filter(SOURCE, {}, u) for u in links)
    best = {"lowered": float("inf"), "ignoring": float("inf")}
    for _ in range(args.rounds):
        best["ignoring"] = min(best["ignoring"], ns_per_url(ignoring.filter, links))
        best["lowered"] = min(best["lowered"], ns_per_url(lowered.filter, links))
    print(f"\nRegexURLFilter, default rules: (?i) rules searched ignoring case {best['ignoring']:,.0f} "
          f"ns per URL, in the lower-cased URL {best['lowered']:,.0f} "
          f"({best['lowered'] / best['ignoring']:.2f}×)")

    pairs = real_hrefs()
    singles = [(u,) for u in links]
    runs = {"join, ada_url.join_url": (ada_url.join_url, pairs),
            "join, owler.urls._join_url": (urls._join_url, pairs),
            "parse, ada_url.normalize_url": (ada_url.normalize_url, singles),
            "parse, owler.urls._normalize_url": (urls._normalize_url, singles)}
    best = {name: float("inf") for name in runs}
    for k in range(args.rounds):
        for name in (list(runs) if k % 2 == 0 else list(runs)[::-1]):
            fn, inputs = runs[name]
            best[name] = min(best[name], ns_per_call(fn, inputs))
    print(f"\n{len(pairs):,} hrefs of the same pages with their page's URL; ada's parse:\n")
    print("| call | ns per URL |")
    print("|---|---:|")
    for name, ns in best.items():
        print(f"| {name} | {ns:,.0f} |")


if __name__ == "__main__":
    main()
