"""Client CPU per fetch: owler.fetch.http.HttpFetcher vs a bare aiohttp loop, same run, same server.

A 75 KB HTML page is served over keep-alive by an aiohttp server in a separate process (its CPU is
not counted); the client process measures ``time.process_time()`` per fetch. Variants:

- ``bare aiohttp``: one ClientSession, default settings, ``session.get(url)`` + ``resp.read()``;
- ``owler.fetch.http``: HttpFetcher with the guard ON (127.0.0.1 is let through by a patched check that
  still runs the full address test on every fetch), limits, raw read and our header capture;
- ``owler.fetch.http gzip``: the same page gzip-encoded (decoding with the bomb guard included).

Prints a markdown table (µs CPU/fetch, fetches/s of one core, ratio to bare aiohttp).

    .venv/bin/python bench/bench_http.py [--fetches 3000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import multiprocessing as mp
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

import owler.fetch.http as H  # noqa: E402


def make_page(size: int = 75_000) -> bytes:
    rnd = random.Random(1)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(3000)]
    parts = ["<!doctype html><html><head><title>bench</title></head><body>"]
    n = 0
    while n < size - 100:
        w = rnd.choice(words)
        s = f'<p><a href="/{w}/{rnd.randint(0, 999)}">{w}</a> ' + " ".join(rnd.choices(words, k=12)) + "</p>\n"
        parts.append(s)
        n += len(s)
    parts.append("</body></html>")
    return "".join(parts).encode()


def serve(port_q: mp.Queue) -> None:
    page = make_page()
    page_gz = gzip.compress(page, 6)

    async def plain(request):
        return web.Response(body=page, content_type="text/html")

    async def gz(request):
        return web.Response(body=page_gz, headers={"Content-Type": "text/html",
                                                   "Content-Encoding": "gzip"})

    async def main():
        app = web.Application()
        app.router.add_get("/page", plain)
        app.router.add_get("/gz", gz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_q.put(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())


async def run_bare(url: str, n: int, conc: int) -> tuple[float, int]:
    async with aiohttp.ClientSession() as s:
        async def worker(k: int) -> int:
            got = 0
            for _ in range(k):
                async with s.get(url) as r:
                    got += len(await r.read())
            return got
        await worker(50)  # warm up
        t0 = time.process_time()
        sizes = await asyncio.gather(*(worker(n // conc) for _ in range(conc)))
        return (time.process_time() - t0) / (n // conc * conc), sum(sizes) // (n // conc * conc)


async def run_owler(url: str, n: int, conc: int) -> tuple[float, int]:
    conf = {"http.agent.name": "bench", "http.allow.private.addresses": False,
            "http.content.limit": 2_097_152, "fetcher.threads.number": conc}
    async with H.HttpFetcher(conf) as f:
        async def worker(k: int) -> int:
            got = 0
            for _ in range(k):
                res = await f.fetch(url)
                assert res.ok, res.error_message
                got += len(res.content)
            return got
        await worker(50)
        t0 = time.process_time()
        sizes = await asyncio.gather(*(worker(n // conc) for _ in range(conc)))
        return (time.process_time() - t0) / (n // conc * conc), sum(sizes) // (n // conc * conc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fetches", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="best of N per variant")
    args = ap.parse_args()

    real_check = H.is_public_address
    H.is_public_address = lambda a: real_check(a) or True  # full check, loopback let through

    q: mp.Queue = mp.Queue()
    server = mp.Process(target=serve, args=(q,), daemon=True)
    server.start()
    try:
        port = q.get(timeout=20)
        base = f"http://127.0.0.1:{port}"
        variants = [("bare aiohttp", run_bare, "/page"), ("owler.fetch.http", run_owler, "/page"),
                    ("owler.fetch.http gzip", run_owler, "/gz")]
        results = {}
        for _ in range(args.rounds):
            for name, fn, path in variants:
                cpu, size = asyncio.run(fn(base + path, args.fetches, args.concurrency))
                if name not in results or cpu < results[name][0]:
                    results[name] = (cpu, size)
        bare = results["bare aiohttp"][0]
        print(f"{args.fetches} fetches of a {results['bare aiohttp'][1] // 1000} KB page, "
              f"keep-alive, concurrency {args.concurrency}, best of {args.rounds}\n")
        print("| variant | µs CPU/fetch | fetches/s/core | vs bare |")
        print("|---|---:|---:|---:|")
        for name, (cpu, _) in results.items():
            print(f"| {name} | {cpu * 1e6:.0f} | {1 / cpu:,.0f} | {cpu / bare:.2f}x |")
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
