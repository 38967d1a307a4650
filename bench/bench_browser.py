"""Benchmark: what the browser protocol costs (issue 48).

1. The JsRenderingDetector parse filter (owler.parse.filters.jsrender) per page, on pages that
   need no browser: the 44 real pages of tests/realpages.py (trafilatura's test pages, the HTML
   responses of the Common Crawl and dolma samples), each parsed once as the parser does, then
   the filter timed alone (the best of ``--repeat`` repeats of ``--number`` calls; the page's
   text length counted first, as PageMetadata does before it in the default chain), and on the
   scripted farm's shell (tests/farm/scripted.py), which it marks. This is all a crawl with the
   detector on and no page built by scripts pays more per page in the parser; the browser
   never starts.
2. The fetcher's step after each page (``render_page``: the routing, the ``browser.*`` keys of
   an earlier render removed) for a page the default routing does not send to the browser.
3. A rendered page: the scripted farm's settling pages (``/``, ``/a``, ``/dcl``, ``/fetched``,
   ``/private``) rendered ``--renders`` times each through owler.fetch.browser (one browser,
   started before the clock): wall time per page (most of it ``browser.idle``, the quiet time a
   page must keep before its DOM is read: 0.5 s by default; here set with ``--idle``), and the
   CPU time of this process and of Chromium's processes per page (Chromium's read from
   ``/proc`` before it is stopped), and the memory Chromium's processes hold then (PSS).

Run: ``.venv/bin/python bench/bench_browser.py [--repeat 7 --number 200 --renders 4 --idle 0.5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from owler.fetch.browser import BrowserFetcher  # noqa: E402
from owler.fetch.http import HttpFetcher  # noqa: E402
from owler.fetch.robots import RobotsSource  # noqa: E402
from owler.parse.filters import ParsedPage  # noqa: E402
from owler.parse.filters.jsrender import JsRenderingDetector  # noqa: E402
from owler.parse.html import parse_html  # noqa: E402
from tests.farm import scripted as S  # noqa: E402
from tests.farm.harness import farm_module  # noqa: E402
from tests.realpages import CRAWL_WARCS, TRAF, trafilatura, warc_html  # noqa: E402

SETTLING = ["/", "/a", "/dcl", "/fetched", "/private"]


def pages() -> list[tuple[str, bytes]]:
    out = [(f"http://t.example/{p.name}", trafilatura(p.name)) for p in TRAF.iterdir()
           if p.name.endswith((".html", ".html.gz"))]
    out += [(url, body) for name in CRAWL_WARCS for url, _, body in warc_html(name)]
    return out


def detector_cost(repeat: int, number: int) -> None:
    f = JsRenderingDetector()
    f.configure({}, {})
    headers = {"content-type": "text/html; charset=utf-8"}

    def parsed(url, body):
        res = parse_html(url, body, headers, conf={"textextractor.no.text": True})
        page = ParsedPage(url, body, headers, res, {}, [o.url for o in res.outlinks])
        page.text_length  # noqa: B018 - counted by PageMetadata before the detector runs
        return page

    per_page = []
    marked = 0
    for url, body in pages():
        page = parsed(url, body)

        def run():
            page.metadata = {}
            f.filter(page)
        best = min(timeit.repeat(run, repeat=repeat, number=number)) / number
        per_page.append(best * 1e6)
        marked += bool(page.metadata)
    shell = parsed("http://127.0.74.1/", S.SHELL.format(private=S.PRIVATE).encode())

    def run_shell():
        shell.metadata = {}
        f.filter(shell)
    best = min(timeit.repeat(run_shell, repeat=repeat, number=number)) / number
    print(f"detector: {len(per_page)} real pages, {marked} marked; per page median "
          f"{statistics.median(per_page):.2f} us, max {max(per_page):.2f} us; "
          f"the farm's shell (marked: {shell.metadata.get('fetch.with.reason')}) "
          f"{best * 1e6:.2f} us")


def routing_cost(number: int) -> None:
    """The fetch engine's step after every fetched page (render_page) for a page the default
    routing does not send to the browser: what a crawl with the browser configured pays."""
    from owler.conf import load_conf
    from owler.fetch.browser import Router, render_page
    from owler.fetch.http import FetchResult

    conf = {**load_conf(), "http.agent.name": "owler-bench"}
    router = Router.from_conf(conf)
    browser = BrowserFetcher(conf, None, None)
    res = FetchResult(url="http://a.example/", status=200,
                      headers=[("Content-Type", "text/html")], content=b"<html></html>")
    md = {"depth": ["1"], "url.path": ["http://a.example/"], "signature": ["abc"]}

    async def run():
        count = lambda name: None  # noqa: E731
        t0 = time.perf_counter()
        for _ in range(number):
            await render_page(browser, router, "http://a.example/", md, res, count)
        return (time.perf_counter() - t0) / number

    best = min(asyncio.run(run()) for _ in range(5))
    print(f"routing: a page not routed to the browser (default protocol.delegator.config) "
          f"{best * 1e6:.2f} us per page")


def _cpu_of_tree(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its descendants, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        stats[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, 0.0)
        todo.extend(children.get(p, ()))
    return total


def _pss_of_tree(pid: int) -> int:
    """Proportional set size in bytes of ``pid`` and its descendants (shared pages counted
    once across them), from /proc/<pid>/smaps_rollup."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, ()))
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def render_cost(renders: int, idle: float) -> None:
    log = Path("/tmp") / f"bench-browser-{os.getpid()}.log"
    conf = {"http.agent.name": "owler-bench", "http.allowed.networks": [S.NETWORK],
            "browser.idle": idle, "browser.pages": 1}

    async def run(port: str):
        http = HttpFetcher(conf)
        await http.start()
        browser = BrowserFetcher(conf, http, RobotsSource(conf, http))
        try:
            fetched = {}
            for path in SETTLING:
                url = f"http://{S.HOST}:{port}{path}"
                fetched[url] = await http.fetch(url)
            await browser.render(*next(iter(fetched.items())))  # start it, warm its caches
            pid = browser._browser.proc.pid
            cpu0, own0, t0 = _cpu_of_tree(pid), time.process_time(), time.perf_counter()
            ends = []
            for _ in range(renders):
                for url, res in fetched.items():
                    ends.append((await browser.render(url, res)).end)
            n = len(ends)
            wall = (time.perf_counter() - t0) / n
            own = (time.process_time() - own0) / n
            chrome = (_cpu_of_tree(pid) - cpu0) / n
            pss = _pss_of_tree(pid)
        finally:
            await browser.close()
            await http.close()
        print(f"render: {n} pages ({dict((e, ends.count(e)) for e in set(ends))}), "
              f"browser.idle {idle:g} s: wall {wall * 1000:.0f} ms per page "
              f"({(wall - idle) * 1000:.0f} ms beside the idle wait); CPU per page: "
              f"Chromium {chrome * 1000:.0f} ms, the fetcher's process {own * 1000:.1f} ms; "
              f"Chromium's memory after them (PSS of its processes) {pss / 2**20:.0f} MiB")

    try:
        with farm_module("tests.farm.scripted", log) as (port,):
            asyncio.run(run(port))
    finally:
        log.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--renders", type=int, default=4)
    ap.add_argument("--idle", type=float, default=0.5)
    args = ap.parse_args()
    detector_cost(args.repeat, args.number)
    routing_cost(args.number * 50)
    render_cost(args.renders, args.idle)


if __name__ == "__main__":
    main()
