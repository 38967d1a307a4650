"""The farm the proxy tests crawl through a proxy (tests/integration/test_proxy_crawl.py): three
small sites on 127.0.62.1-3, and two canaries no crawl may reach, 127.0.63.1 and 127.0.0.1 (a
literal address and ``localhost`` outside the crawl's ``http.allowed.networks``), on one port.

Each site: robots.txt (``/private/`` disallowed), ``/`` linking to ``/a``, ``/b``, the next site's
``/`` and both canaries' ``/secret``, ``/a`` and ``/b`` linking home; everything else 404 (TDMRep's
file included). The canaries answer ``/secret`` with 200: a proxy asked for it fetches it.

Every request is a JSON line of the log: ``t``, ``host`` (the address it came to), ``path``,
``status``, ``ua``, and what tells where it came from and what it carried: ``peer`` and
``peer_port`` (the connection's other end: a proxy's outgoing address), ``via`` (the Via header
an HTTP proxy adds), ``headers`` (every request header, as received).

Run: ``python -m tests.farm.proxied --log FILE [--port P]`` → ``READY <port>``.
"""

from __future__ import annotations

import json
import time

from aiohttp import web

from tests.farm.aiosites import main

SITES = ("127.0.62.1", "127.0.62.2", "127.0.62.3")
NETWORK = "127.0.62.0/24"
#: the canaries: a literal address and a name (localhost: 127.0.0.1) outside NETWORK
CANARY_ADDR = "127.0.63.1"
CANARY_NAME = "localhost"
ADDRS = ("127.0.0.1", *SITES, CANARY_ADDR)  # 127.0.0.1 first: the port is free there
PAGES = ("/", "/a", "/b")


def page(title: str, links: list[str]) -> web.Response:
    anchors = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    return web.Response(text=f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
                             f"<h1>{title}</h1><p>A page of the proxied farm, reached through "
                             f"a proxy.</p><ul>{anchors}</ul></body></html>",
                        content_type="text/html")


def make_handler(log_path: str, port: int):
    log = open(log_path, "a", buffering=1)

    def site(addr: str, path: str) -> web.Response:
        if addr not in SITES:
            if path == "/secret":
                return web.Response(text="a canary: no crawl may reach it\n")
            raise web.HTTPNotFound()
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        nxt = SITES[(SITES.index(addr) + 1) % len(SITES)]
        if path == "/":
            return page(f"home of {addr}", [
                "/a", "/b", "/private/x", f"http://{nxt}:{port}/",
                f"http://{CANARY_ADDR}:{port}/secret", f"http://{CANARY_NAME}:{port}/secret"])
        if path in PAGES:
            return page(f"{path} of {addr}", ["/"])
        raise web.HTTPNotFound()

    async def handle(request: web.Request) -> web.StreamResponse:
        addr = request.transport.get_extra_info("sockname")[0]
        peer = request.transport.get_extra_info("peername")
        try:
            resp = site(addr, request.path)
        except web.HTTPException as exc:
            resp = exc
        log.write(json.dumps({"t": time.time(), "host": addr, "path": request.path_qs,
                              "status": resp.status, "ua": request.headers.get("User-Agent", ""),
                              "peer": peer[0], "peer_port": peer[1],
                              "via": request.headers.get("Via", ""),
                              "headers": [[k, v] for k, v in request.headers.items()]}) + "\n")
        return resp

    return handle


if __name__ == "__main__":
    main(make_handler, ADDRS)
