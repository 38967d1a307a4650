"""Benchmark: owler.parse.html.parse_html on a realistic 75 KB page with ~200 links.

Compared in the same run (interleaved rounds, median), as the parser bolt runs it (no text
extraction) with and without the SimHash of near-duplicate detection (simhash.enabled), and against
- a bare loop: selectolax lexbor ``css('a[href]')`` + ``ada_url.join_url`` (the floor), and
- bs4 + lxml with ``urllib.parse.urljoin`` (the library the request named).

A second table times the SimHash alone, compiled (``owler/parse/_simhash.pyx``) against its numpy
reference, over the body texts of 186 pages of the benchmark farm taken in turn: a new text at
every call, as in a crawl (one text timed over and over lets the branch predictor learn it, which
hid a threefold cost in a first version of the loop).

Ratios matter, not absolutes. Run: ``.venv/bin/python bench/bench_parse.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urljoin

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import ada_url  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from owler.parse import simhash  # noqa: E402
from owler.parse.html import rough_text, parse_html  # noqa: E402

PAGE_URL = "https://news.example.com/world/2024/05/article-123.html?ref=home"
WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no what "
    "europe search index crawler open web markets climate policy football election university "
    "Zürich straße café naïve résumé"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _href(rng: random.Random, i: int) -> str:
    kind = i % 10
    if kind == 0:
        return f"/section/{rng.choice(WORDS)}/{i}"
    if kind == 1:
        return f"https://www.{rng.choice(['bbc', 'lemonde', 'spiegel', 'elpais'])}.example/{i}.html"
    if kind == 2:
        return f"//cdn.example.net/media/{i}/index.html"
    if kind == 3:
        return f"../../2023/12/story-{i}.html"
    if kind == 4:
        return f"related-{i}.html?utm_source=home&utm_medium=web&id={i}"
    if kind == 5:
        return f"#comment-{i}"
    if kind == 6:
        return f"?page={i}&sort=date"
    if kind == 7:
        return f"/tag/{rng.choice(WORDS)}%20{rng.choice(WORDS)}/"
    if kind == 8:
        return f"https://news.example.com/world/2024/05/other-{i}.html#top"
    return rng.choice(["mailto:desk@example.com", "javascript:void(0)", f"/author/{i}"])


def make_page(target_bytes: int = 75_000, links: int = 200, seed: int = 7) -> bytes:
    """A news-style page: head with metas, a big inline script and style, nav, article
    paragraphs with inline links, sidebar lists, footer."""
    rng = random.Random(seed)
    head = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>Europe's open web index: what the crawler sees | Example News</title>",
        "<meta name='description' content='A long read about crawling the open web.'>",
        "<meta name='keywords' content='crawler, index, europe'>",
        "<meta name='robots' content='index, follow, max-image-preview:large'>",
        f"<link rel='canonical' href='{PAGE_URL.split('?')[0]}'>",
        "<link rel='stylesheet' href='/static/main.css'><link rel='alternate' hreflang='de' "
        "href='/de/world/article-123.html'>",
        "<style>" + "body{margin:0;padding:0}.nav a{color:#333;text-decoration:none}" * 60
        + "</style>",
        "<script>window.dataLayer=[];" + "function f(a,b){return a+b};" * 150 + "</script>",
        "</head><body><header><nav class='nav'><ul>",
    ]
    parts = list(head)
    link_i = 0
    for _ in range(40):
        parts.append(f"<li><a href='{_href(rng, link_i)}'>{rng.choice(WORDS).title()}</a></li>")
        link_i += 1
    parts.append("</ul></nav></header><main><article><h1>Europe's open web index</h1>")
    body_links = links - 40 - 30
    per_para = 3
    paras = body_links // per_para
    for _p in range(paras):
        seg = [f"<p class='para'>{_sentence(rng, 25)} "]
        for _ in range(per_para):
            seg.append(
                f"<a href='{_href(rng, link_i)}' title='more'>{_sentence(rng, 4)}</a> "
                f"<b>{rng.choice(WORDS)}</b> {_sentence(rng, 18)} "
            )
            link_i += 1
        seg.append("</p>")
        parts.append("".join(seg))
    parts.append("</article><aside><h2>Most read</h2><ol>")
    while link_i < links:
        parts.append(f"<li><a href='{_href(rng, link_i)}'>{_sentence(rng, 6)}</a></li>")
        link_i += 1
    parts.append("</ol></aside></main><footer><p>© Example News</p>")
    html = "".join(parts)
    filler = []
    while len(html.encode()) + sum(len(x) for x in filler) < target_bytes - 40:
        filler.append(f"<div class='teaser'><p>{_sentence(rng, 20)}</p></div>")
    html += "".join(filler) + "</footer></body></html>"
    return html.encode("utf-8")


def bare_loop(url: str, content: bytes) -> list[str]:
    tree = LexborHTMLParser(content.decode("utf-8", "replace"))
    out = []
    for node in tree.css("a[href]"):
        try:
            out.append(ada_url.join_url(url, node.attributes["href"]))
        except ValueError:
            pass
    return out


def bs4_lxml(url: str, content: bytes) -> list[str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(content, "lxml")
    return [urljoin(url, a["href"]) for a in soup.find_all("a", href=True)]


def owler_parse(url: str, content: bytes) -> object:
    return parse_html(url, content, {"content-type": "text/html; charset=utf-8"})


BOLT_CONF = {"textextractor.no.text": True}  # the parser bolt's: no text unless it is needed


def owler_bolt(url: str, content: bytes) -> object:
    return parse_html(url, content, {"content-type": "text/html; charset=utf-8"}, conf=BOLT_CONF)


def owler_bolt_simhash(url: str, content: bytes) -> object:
    return parse_html(url, content, {"content-type": "text/html; charset=utf-8"},
                      conf={**BOLT_CONF, "simhash.enabled": True})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    page = make_page()
    res = parse_html(PAGE_URL, page, {"content-type": "text/html; charset=utf-8"})
    n_a = len(bare_loop(PAGE_URL, page))
    methods = {"owler parse_html (full)": owler_parse,
               "owler parse_html, as the parser bolt (no text)": owler_bolt,
               "owler parse_html, as the parser bolt + SimHash": owler_bolt_simhash,
               "bare lexbor + ada join": bare_loop}
    try:
        import bs4  # noqa: F401
        import lxml  # noqa: F401

        methods["bs4 + lxml + urljoin"] = bs4_lxml
    except ImportError:
        print("(bs4/lxml not installed: skipped)")
    medians = interleaved(methods, args.rounds, [(PAGE_URL, page)] * args.iters)
    print(
        f"page: {len(page):,} B, {n_a} a[href], parse_html kept {len(res.outlinks)} outlinks, "
        f"text {len(res.text):,} chars; {args.rounds} rounds x {args.iters}\n"
    )
    base = medians["bare lexbor + ada join"]
    print("| method | µs/page (median) | pages/s/core | x vs bare |")
    print("|---|---:|---:|---:|")
    for name, med in medians.items():
        print(f"| {name} | {med:,.0f} | {1e6 / med:,.0f} | {med / base:.2f} |")
    simhash_table(args.rounds)


def interleaved(methods: dict, rounds: int, inputs: list[tuple]) -> dict[str, float]:
    """Median µs per call of each method over ``inputs``, the methods taking turns each round."""
    times: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(rounds):
        for name, fn in methods.items():
            t0 = time.perf_counter()
            for args in inputs:
                fn(*args)
            times[name].append((time.perf_counter() - t0) / len(inputs) * 1e6)
    return {name: statistics.median(ts) for name, ts in times.items()}


def farm_texts(n_hosts: int = 6, n_pages: int = 30) -> list[bytes]:
    """The body texts of the benchmark farm's pages, cut as simhash64 cuts them."""
    from farm import Web  # bench/farm.py, beside this file

    texts = []
    for host in Web(n_hosts, n_pages, seed=1, port=8080).pages:
        for path, resp in host.items():
            if path.endswith(b".html") or path == b"/":
                tree = LexborHTMLParser(resp.partition(b"\r\n\r\n")[2])
                texts.append(simhash._utf8_start(rough_text(tree)))
    return texts


def simhash_table(rounds: int) -> None:
    texts = farm_texts()
    impls = {"numpy (reference)": simhash.simhash_numpy}
    if simhash.IMPLEMENTATION == "compiled":
        impls["compiled loop"] = simhash.simhash_compiled
    else:
        print("(the compiled SimHash is not built: `make setup`)")
    medians = interleaved(impls, rounds, [(data,) for data in texts])
    mean = sum(map(len, texts)) / len(texts)
    print(f"\nSimHash alone: {len(texts)} farm page texts (mean {mean:,.0f} B, at most "
          f"{simhash.MAX_BYTES:,}), each once per round; {rounds} rounds\n")
    ref = medians["numpy (reference)"]
    print("| SimHash | µs/text (median) | x vs numpy |")
    print("|---|---:|---:|")
    for name, med in medians.items():
        print(f"| {name} | {med:,.1f} | {med / ref:.2f} |")


if __name__ == "__main__":
    main()
