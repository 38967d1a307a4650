"""Would HTTP/2 pay for the crawler? The fetcher's HTTP/1.1 keep-alive against HTTP/2, over TLS.

A crawler's connections are one per host, and politeness allows one request in flight per host
(``fetcher.threads.per.queue`` 1): a host gets a few requests, one after the other, seconds
apart. HTTP/2's gains are multiplexing (many requests at once on one connection) and header
compression (HPACK); its cost, in Python, is a framing layer written in Python (h2) where
aiohttp parses HTTP/1.1 in C (llhttp). This measures both sides on loopback:

- the server: Hypercorn (in a process of its own, its CPU not counted) on ``--hosts`` loopback
  addresses 127.0.71.x with one self-signed certificate, offering h2 and http/1.1 by ALPN, every
  path a 75 KB HTML page (bench/bench_http.py's);
- the crawl's pattern: ``--hosts`` x ``--requests`` requests, each host's one after the other,
  ``--concurrency`` hosts at once, by the fetcher's client (owler.fetch.http over aiohttp,
  HTTP/1.1 keep-alive), httpx over HTTP/1.1 and httpx over HTTP/2 (h2): the client's CPU per
  request (``time.process_time``), the wall time, the protocol each response came by;
- the browser's pattern, for contrast: ``--requests`` requests at once to one host (what HTTP/2
  multiplexing is for), httpx over HTTP/1.1 (a connection each) and over HTTP/2 (one);
- the bytes a request's head costs: the fetcher's own request head on HTTP/1.1, and HPACK's
  encoding of the same fields for the first request on a connection and for a later one.

Loopback has no round-trip time worth the name, so the wall times say what the clients cost, not
what a network would add: on a real network each of these requests costs one round trip on a
kept-alive connection with either protocol, since the crawler never has two in flight to a host.

    .venv/bin/python bench/bench_http2.py [--hosts 40] [--requests 25] [--concurrency 10]

Needs bench/requirements.txt (httpx, h2, Hypercorn). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.bench_http

import hpack  # noqa: E402
import httpx  # noqa: E402

from bench.bench_http import make_page  # noqa: E402
from owler.fetch.http import HttpFetcher  # noqa: E402

NET = "127.0.71"


def host(i: int) -> str:
    return f"{NET}.{1 + i}"


def serve(hosts: int, port: int, cert: str, key: str, ready) -> None:
    """Hypercorn on every host's address (run in a process of its own)."""
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    page = make_page()

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html; charset=utf-8"),
                                (b"content-length", str(len(page)).encode())]})
        await send({"type": "http.response.body", "body": page})

    config = Config()
    config.bind = [f"{host(i)}:{port}" for i in range(hosts)]
    config.certfile, config.keyfile = cert, key
    config.alpn_protocols = ["h2", "http/1.1"]
    config.keep_alive_timeout = 60
    config.accesslog = None
    config.errorlog = None
    config.h2_max_concurrent_streams = 1000

    async def main():
        task = asyncio.ensure_future(hypercorn_serve(app, config))
        await asyncio.sleep(1.0)
        ready.set()
        await task
    asyncio.run(main())


def cert_pair(d: Path) -> tuple[str, str]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(d / "k.pem"),
                    "-out", str(d / "c.pem"), "-days", "1", "-subj", "/CN=bench"],
                   check=True, capture_output=True)
    return str(d / "c.pem"), str(d / "k.pem")


async def crawl_pattern(fetch_one, hosts: int, requests: int, concurrency: int, port: int):
    """Each host's requests one after the other, ``concurrency`` hosts at once. Returns the
    protocol versions seen."""
    sem = asyncio.Semaphore(concurrency)
    versions: list[str] = []

    async def one_host(i: int):
        async with sem:
            for k in range(requests):
                versions.append(await fetch_one(f"https://{host(i)}:{port}/page/{k}"))
    await asyncio.gather(*(one_host(i) for i in range(hosts)))
    return versions


def measure(label: str, coro_factory, n: int) -> dict:
    c0, t0 = time.process_time(), time.perf_counter()
    versions = asyncio.run(coro_factory())
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    assert len(versions) == n, (label, len(versions))
    return {"label": label, "cpu_us": cpu / n * 1e6, "wall_s": wall, "rps": n / wall,
            "versions": sorted(set(versions))}


def owler_conf() -> dict:
    return {"http.agent.name": "bench", "http.trust.everything": True,
            "http.allowed.networks": [f"{NET}.0/24"], "http.timeout": 30000,
            "fetcher.threads.number": 50}


async def owler_crawl(hosts, requests, concurrency, port):
    async with HttpFetcher(owler_conf()) as f:
        async def one(url):
            res = await f.fetch(url)
            assert res.status == 200 and len(res.content) > 70_000, res.error_message
            return "HTTP/" + res.http_version
        return await crawl_pattern(one, hosts, requests, concurrency, port)


def httpx_client(http2: bool, connections: int) -> httpx.AsyncClient:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return httpx.AsyncClient(http1=not http2, http2=http2, verify=ctx, timeout=30.0,
                             limits=httpx.Limits(max_connections=connections,
                                                 max_keepalive_connections=connections,
                                                 keepalive_expiry=60.0),
                             headers={"User-Agent": "bench", "Accept-Encoding": "gzip, br"})


async def httpx_crawl(http2, hosts, requests, concurrency, port):
    async with httpx_client(http2, hosts) as client:
        async def one(url):
            resp = await client.get(url)
            assert resp.status_code == 200 and len(resp.content) > 70_000
            return resp.http_version
        return await crawl_pattern(one, hosts, requests, concurrency, port)


async def httpx_burst(http2, requests, port):
    """``requests`` at once to one host."""
    async with httpx_client(http2, requests) as client:
        async def one(k):
            resp = await client.get(f"https://{host(0)}:{port}/burst/{k}")
            assert resp.status_code == 200
            return resp.http_version
        return await asyncio.gather(*(one(k) for k in range(requests)))


async def owler_request_head(port: int) -> list[tuple[str, str]]:
    async with HttpFetcher(owler_conf()) as f:
        res = await f.fetch(f"https://{host(0)}:{port}/articles/2026/11/some-page.html")
    return res


def header_bytes(res) -> dict:
    """The fetcher's request head on HTTP/1.1, and HPACK's encoding of the same fields for a
    connection's first request and for a later one (another path on the same host)."""
    h1 = len(res.request_bytes())
    fields = [(k.lower(), v) for k, v in res.request_headers if k.lower() != "host"]
    authority = dict((k.lower(), v) for k, v in res.request_headers)["host"]

    def pseudo(path):
        return [(":method", "GET"), (":scheme", "https"), (":authority", authority),
                (":path", path)] + fields
    enc = hpack.Encoder()
    first = len(enc.encode(pseudo("/articles/2026/11/some-page.html")))
    later = len(enc.encode(pseudo("/articles/2026/11/another-page.html")))
    return {"h1": h1, "h2_first": first, "h2_later": later}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--requests", type=int, default=25)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not 1 <= args.hosts <= 250:
        raise SystemExit("--hosts: 1 to 250 (the addresses 127.0.71.1 … 127.0.71.250)")
    with socket.socket() as s:
        s.bind((host(0), 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        cert, key = cert_pair(Path(d))
        ready = mp.Event()
        server = mp.Process(target=serve, args=(args.hosts, port, cert, key, ready), daemon=True)
        server.start()
        try:
            if not ready.wait(30):
                raise SystemExit("the server did not start")
            n = args.hosts * args.requests
            runs = {
                "owler.fetch.http (aiohttp), HTTP/1.1 keep-alive":
                    lambda: owler_crawl(args.hosts, args.requests, args.concurrency, port),
                "httpx, HTTP/1.1 keep-alive":
                    lambda: httpx_crawl(False, args.hosts, args.requests, args.concurrency, port),
                "httpx + h2, HTTP/2":
                    lambda: httpx_crawl(True, args.hosts, args.requests, args.concurrency, port),
            }
            results = {label: [] for label in runs}
            for _ in range(args.rounds):
                for label, factory in runs.items():
                    results[label].append(measure(label, factory, n))
            bursts = {label: [measure(label, lambda h2=h2: httpx_burst(h2, args.requests, port),
                                      args.requests) for _ in range(args.rounds)]
                      for label, h2 in (("httpx, HTTP/1.1 (a connection each)", False),
                                        ("httpx + h2, HTTP/2 (one connection)", True))}
            heads = header_bytes(asyncio.run(owler_request_head(port)))
        finally:
            server.terminate()
            server.join(10)

    def row(label, rs):
        cpu = statistics.median(r["cpu_us"] for r in rs)
        rps = statistics.median(r["rps"] for r in rs)
        return f"| {label} | {', '.join(rs[0]['versions'])} | {cpu:,.0f} | {rps:,.0f} |"

    print(f"\nCrawl pattern: {args.hosts} hosts x {args.requests} requests, each host's in turn, "
          f"{args.concurrency} hosts at once; 75 KB page over TLS; median of {args.rounds} rounds\n")
    print("| client | protocol | client CPU us/request | requests/s (wall) |")
    print("|---|---|---:|---:|")
    base = statistics.median(r["cpu_us"] for r in next(iter(results.values())))
    for label, rs in results.items():
        print(row(label, rs))
    print(f"\nBurst: {args.requests} requests at once to one host\n")
    print("| client | protocol | client CPU us/request | requests/s (wall) |")
    print("|---|---|---:|---:|")
    for label, rs in bursts.items():
        print(row(label, rs))
    print(f"\nRequest head: HTTP/1.1 {heads['h1']} bytes; HPACK {heads['h2_first']} bytes for a "
          f"connection's first request, {heads['h2_later']} for a later one")
    print(f"(fetcher's client CPU: {base:,.0f} us/request)")


if __name__ == "__main__":
    main()
