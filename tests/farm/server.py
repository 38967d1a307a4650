"""A web farm on loopback for the integration tests and the demo: many hosts, one process.

Each host is a loopback address 127.0.<a>.<b> on one port (hosts are IP literals, so no DNS is
needed); the site a host serves is chosen by its address. Sites (by index, see ``SITES``):

- ``normal``: 30 pages in a chain and a tree, links to other sites, robots.txt disallows /private/
- ``robots503``: robots.txt answers 503 → nothing else may be fetched
- ``crawldelay``: robots.txt with ``Crawl-delay: 2``
- ``oddities``: redirects (one hop, and a loop), 404, 500, a PNG, an oversized page, a slow page
  that never answers in time, a path-repetition trap
- ``nofollow``: a page with ``<meta name=robots content=nofollow>``, a page with an
  ``X-Robots-Tag: nofollow`` header, and ``rel=nofollow`` links; their targets must not be crawled
- ``norobots``: robots.txt 404 → everything allowed

Every request is appended to an access log (JSON lines: time, host, path, status) that tests judge
the crawl by. Run: ``python -m tests.farm.server --hosts 6 --log FILE`` → prints ``READY <port>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from aiohttp import web

SITES = ["normal", "robots503", "crawldelay", "oddities", "nofollow", "norobots"]
BIG = 3 * 1024 * 1024


def host_addr(i: int) -> str:
    return f"127.0.{10 + i // 200}.{1 + i % 200}"


class Farm:
    def __init__(self, n_hosts: int, port: int, log_path: str):
        self.n = n_hosts
        self.port = port
        self.log = open(log_path, "a", buffering=1)
        self.addr_to_index = {host_addr(i): i for i in range(n_hosts)}

    def url(self, i: int, path: str) -> str:
        return f"http://{host_addr(i)}:{self.port}{path}"

    def page(self, title: str, links: list[str], extra_head: str = "", body: str = "") -> str:
        anchors = "\n".join(f'<li><a href="{h}">link {k}</a></li>' for k, h in enumerate(links))
        filler = " ".join(["Lorem ipsum dolor sit amet, consectetur adipiscing elit."] * 40)
        return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{title}</title>"
                f"{extra_head}</head><body><h1>{title}</h1><p>{filler}</p>{body}<ul>{anchors}</ul>"
                f"</body></html>")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        addr = request.transport.get_extra_info("sockname")[0]
        i = self.addr_to_index.get(addr, 0)
        site = SITES[i % len(SITES)]
        try:
            resp = await getattr(self, f"site_{site}")(i, request)
        except web.HTTPException as exc:
            resp = exc
        self.log.write(json.dumps({"t": time.time(), "host": addr, "site": site,
                                   "path": request.path_qs, "status": resp.status,
                                   "ua": request.headers.get("User-Agent", "")}) + "\n")
        return resp

    def other_site_links(self, i: int) -> list[str]:
        return [self.url((i + k) % self.n, "/") for k in (1, 2)]

    # -- sites ---------------------------------------------------------------------------
    async def site_normal(self, i, req):
        p = req.path
        if p == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        if p.startswith("/private/"):
            return web.Response(text=self.page("private", []), content_type="text/html")
        if p == "/":
            links = ["/page/1", "/page/2", "page/3", "/private/secret", "./page/4#frag"] + self.other_site_links(i)
            return web.Response(text=self.page(f"home {i}", links), content_type="text/html")
        if p.startswith("/page/"):
            try:
                n = int(p.rsplit("/", 1)[1])
            except ValueError:
                raise web.HTTPNotFound()
            if n > 30:
                raise web.HTTPNotFound()
            links = [f"/page/{n + 1}", f"/page/{2 * n}", "/", "/private/x"]
            return web.Response(text=self.page(f"page {n} of {i}", links), content_type="text/html")
        raise web.HTTPNotFound()

    async def site_robots503(self, i, req):
        if req.path == "/robots.txt":
            return web.Response(status=503, text="unavailable")
        return web.Response(text=self.page("should not be fetched", ["/a"]), content_type="text/html")

    async def site_crawldelay(self, i, req):
        p = req.path
        if p == "/robots.txt":
            return web.Response(text="User-agent: *\nCrawl-delay: 2\n", content_type="text/plain")
        if p == "/":
            return web.Response(text=self.page("delayed home", [f"/d/{k}" for k in range(4)]),
                                content_type="text/html")
        if p.startswith("/d/"):
            return web.Response(text=self.page(p, ["/"]), content_type="text/html")
        raise web.HTTPNotFound()

    async def site_oddities(self, i, req):
        p = req.path
        if p == "/robots.txt":
            raise web.HTTPNotFound()
        if p == "/":
            links = ["/redirect", "/loop1", "/missing", "/error", "/image.png", "/big", "/slow",
                     "/trap/", "/latin1", "/final"]
            return web.Response(text=self.page("oddities", links), content_type="text/html")
        if p == "/redirect":
            raise web.HTTPMovedPermanently("/final")
        if p == "/loop1":
            raise web.HTTPFound("/loop2")
        if p == "/loop2":
            raise web.HTTPFound("/loop1")
        if p == "/final":
            return web.Response(text=self.page("final", []), content_type="text/html")
        if p == "/error":
            raise web.HTTPInternalServerError()
        if p == "/image.png":
            return web.Response(body=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, content_type="image/png")
        if p == "/big":
            return web.Response(body=b"<html><body>" + b"x" * BIG + b"</body></html>", content_type="text/html")
        if p == "/slow":
            await asyncio.sleep(30)
            return web.Response(text="too late", content_type="text/html")
        if p == "/latin1":
            body = self.page("caf\u00e9 cr\u00e8me", ["/final"]).encode("latin-1")
            return web.Response(body=body, headers={"Content-Type": "text/html; charset=iso-8859-1"})
        if p.startswith("/trap/"):
            return web.Response(text=self.page("trap", ["trap/", "./x/../trap/"]), content_type="text/html")
        raise web.HTTPNotFound()

    async def site_nofollow(self, i, req):
        p = req.path
        if p == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n", content_type="text/plain")
        if p == "/":
            return web.Response(text=self.page("nofollow home", ["/meta-nofollow", "/header-nofollow",
                                                                 "/ok"], body='<a rel="nofollow" href="/hidden-rel">x</a>'),
                                content_type="text/html")
        if p == "/meta-nofollow":
            return web.Response(text=self.page("meta", ["/hidden-meta"], '<meta name="robots" content="noindex,nofollow">'),
                                content_type="text/html")
        if p == "/header-nofollow":
            return web.Response(text=self.page("header", ["/hidden-header"]), content_type="text/html",
                                headers={"X-Robots-Tag": "nofollow"})
        if p == "/ok":
            return web.Response(text=self.page("ok", []), content_type="text/html")
        if p.startswith("/hidden"):
            return web.Response(text=self.page("hidden", []), content_type="text/html")
        raise web.HTTPNotFound()

    async def site_norobots(self, i, req):
        p = req.path
        if p == "/robots.txt":
            raise web.HTTPNotFound()
        if p == "/":
            return web.Response(text=self.page("no robots", ["/a", "/b"] + self.other_site_links(i)),
                                content_type="text/html")
        if p in ("/a", "/b"):
            return web.Response(text=self.page(p, ["/"]), content_type="text/html")
        raise web.HTTPNotFound()


async def serve(n_hosts: int, port: int, log_path: str) -> None:
    farm = Farm(n_hosts, port, log_path)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", farm.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sites = []
    for i in range(n_hosts):
        site = web.TCPSite(runner, host_addr(i), port, reuse_address=True)
        await site.start()
        sites.append(site)
        if port == 0:  # the first bind picks the port, the others use it
            port = site._server.sockets[0].getsockname()[1]
            farm.port = port
    print(f"READY {port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=len(SITES))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.hosts, args.port, args.log))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
