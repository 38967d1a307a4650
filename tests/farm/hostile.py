"""A hostile web farm on loopback: servers that trap, stall, flood and lie, for the tests that the
crawl survives them (issue: the real web). One process, raw asyncio servers (aiohttp would refuse
to send the broken responses), one site per address 127.0.60.<n>:

- ``traps`` (127.0.60.1): a calendar linking to the next day forever (``/cal/2026-01-01``), ``a/``
  relative links (``/rep/``: path repetition), a new session id on every link, in the path
  (``;jsessionid=``) and the query (``PHPSESSID``), links of 3,000+ characters, redirects to a
  new URL forever (``/redir/<n>``), and links to the canary in every spelling of a loopback
  address, directly and through redirects;
- ``slow`` (127.0.60.2): a body dripping one byte every 0.5 s for ten minutes, a server that
  accepts and never answers, header lines that never end, an endless chunked body at full speed,
  a Content-Length larger than the body then close, a 4 MB header line, a gzip bomb (200 MB of
  zeros); and two ordinary pages;
- ``calm`` (127.0.60.3, 127.0.60.4): ordinary sites of 12 pages each, to show that the trap hosts
  starve nobody;
- ``ratelimit`` (127.0.60.5): the first request of ``/r/1`` gets ``429`` with ``Retry-After: 40``;
  ``ratedate`` (127.0.60.7): the first of ``/r/1`` gets ``503`` with ``Retry-After`` an HTTP date
  4 s ahead; ``backoff`` (127.0.60.6): the first two page requests get ``503`` without it;
  ``robots429`` (127.0.60.8): robots.txt answers ``429`` (the site counts as unreachable); these
  four throttle pages only: their ``/.well-known/tdmrep.json`` is a plain 404;
- ``robotsmoved`` (127.0.60.9): robots.txt behind five redirects, disallowing ``/private``;
  ``robotsbig`` (127.0.60.10): a 600 KiB robots.txt disallowing ``/early`` at its start and
  ``/late`` after 500 KiB (to be ignored); ``robotsenc`` (127.0.60.11): rules and links that
  spell one path in different percent-encodings (``/foo/bar/ツ`` vs ``%E3%83%84``, ``<`` vs
  ``%3c``, ``~`` vs ``%7E``);
- ``markup`` (127.0.60.12): 200,000 nested ``<div>``s, 60,000 links (to ``sink``, 127.0.60.13,
  whose robots.txt disallows everything), NUL bytes and invalid UTF-8, an unknown charset, binary
  bytes served as text/html, ``<base href="javascript:…">``, a meta refresh to itself, malformed
  hrefs; every page also links to ``/good/<page>``, which must be fetched;
- sitemap hosts (the sitemap topology): ``smtrap`` (127.0.60.14) names ``/sm/0.xml``, an index of
  ``/sm/1.xml`` and so on forever (each also lists a urlset of one page); ``smslow``
  (127.0.60.15) names a dripping sitemap, a silent one, a gzip bomb, one answering 429 with
  ``Retry-After: 3`` the first time, and ``/ok.xml``.

The canary (``--canary-port``) listens on 127.0.0.1 and ::1, outside ``http.allowed.networks``;
the test asserts it is never reached. Every request is logged (JSON lines: time, host, path) to
``--log``. Run: ``python -m tests.farm.hostile --log FILE`` → prints ``READY <port> <canary>``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import email.utils
import gzip
import json
import socket
import sys
import time
from itertools import count

HOSTS = {"traps": "127.0.60.1", "slow": "127.0.60.2", "calm1": "127.0.60.3", "calm2": "127.0.60.4",
         "ratelimit": "127.0.60.5", "backoff": "127.0.60.6", "ratedate": "127.0.60.7",
         "robots429": "127.0.60.8", "robotsmoved": "127.0.60.9", "robotsbig": "127.0.60.10",
         "robotsenc": "127.0.60.11", "markup": "127.0.60.12", "sink": "127.0.60.13",
         "smtrap": "127.0.60.14", "smslow": "127.0.60.15"}
#: smslow: the sitemaps its robots.txt names; /ok.xml lists /fine, which must be fetched
SLOW_SITEMAPS = ["/drip.xml", "/silent.xml", "/bomb.xml.gz", "/throttle.xml", "/ok.xml"]
MANY_LINKS = 60_000  # markup /many-links: links to the sink host (robots.txt: Disallow: /)
NESTED = 200_000  # markup /nested: <div>s
#: markup pages (path, body bytes, Content-Type); each links to /good/<name>, which must be fetched
MARKUP_PAGES = ["/nested", "/many-links", "/nul", "/unknown-charset", "/binary", "/base-js",
                "/refresh-self", "/malformed"]
ROBOTS_HOPS = 5  # robotsmoved: redirects before its robots.txt (RFC 9309: follow at least five)
ROBOTS_BIG = 600 * 1024  # robotsbig: bytes of robots.txt; only the first 500 KiB count
#: robotsenc: (link on the home page, whether robots.txt allows it)
ENCODED_LINKS = [("/foo/bar/%E3%83%84", False), ("/foo/bar/ツ/x", False), ("/a%3cb", False),
                 ("/%7Euser/page", False), ("/q/%E3%83%84", True), ("/plain", True)]
RETRY_AFTER = 40  # ratelimit: seconds, longer than fetcher.max.throttle.sleep (30)
RETRY_DATE = 4  # ratedate: an HTTP date this many seconds ahead
THROTTLE_PAGES = 4
NETWORK = "127.0.60.0/24"
CALM_PAGES = 12
SLOW_PATHS = ["/drip", "/silent", "/endless-headers", "/endless-chunked", "/short-body",
              "/huge-header", "/bomb"]
DRIP_SECONDS = 600
CANARY_SPELLINGS = ["127.1", "2130706433", "0x7f.1", "localhost", "[::1]", "[::ffff:127.0.0.1]",
                    "127.0.0.1", "0177.0.0.1"]


def page(title: str, links: list[str]) -> bytes:
    anchors = "".join(f'<li><a href="{h}">link {k}</a></li>' for k, h in enumerate(links))
    return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{title}</title></head>"
            f"<body><h1>{title}</h1><p>{'Some text. ' * 30}</p><ul>{anchors}</ul></body>"
            "</html>").encode()


def response(status: str, body: bytes = b"", ctype: str = "text/html; charset=utf-8",
             extra: list[tuple[str, str]] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}", f"Content-Length: {len(body)}",
            "Connection: close"] + [f"{k}: {v}" for k, v in (extra or [])]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class Hostile:
    def __init__(self, port: int, canary_port: int, log_path: str) -> None:
        self.throttled: dict[str, int] = {}  # site -> throttled answers given so far
        self.port = port
        self.canary_port = canary_port
        self.log = open(log_path, "a", buffering=1)
        self.sessions = count(1)
        self.bomb = gzip.compress(b"\0" * (200 << 20), compresslevel=9)

    def url(self, host: str, path: str) -> str:
        return f"http://{HOSTS[host]}:{self.port}{path}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("sockname")[0]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            self.log.write(json.dumps({"t": time.time(), "host": addr, "path": path}) + "\n")
            site = {v: k for k, v in HOSTS.items()}.get(addr, "calm1")
            if site in ("ratelimit", "backoff", "ratedate", "robots429"):
                return await self.site_throttling(site, path, writer)
            if site.startswith("robots"):
                return await self.site_robots(site, path, writer)
            if site in ("markup", "sink"):
                return await self.site_markup(site, path, writer)
            if site in ("smtrap", "smslow"):
                return await self.site_sitemaps(site, path, writer)
            await getattr(self, "site_" + site.rstrip("0123456789"))(path, writer)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, IndexError):
            pass
        finally:
            writer.close()

    async def send(self, writer, data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    async def drip(self, writer, ctype: str, byte: bytes) -> None:
        """A 200 whose body comes one byte every 0.5 s for DRIP_SECONDS."""
        await self.send(writer, f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n"
                                f"Content-Length: {DRIP_SECONDS * 2}\r\n\r\n".encode())
        for _ in range(DRIP_SECONDS * 2):
            await self.send(writer, byte)
            await asyncio.sleep(0.5)

    # -- sites -----------------------------------------------------------------------------------
    async def site_traps(self, path: str, w) -> None:
        if path == "/robots.txt":
            return await self.send(w, response("200 OK", b"User-agent: *\nAllow: /\n", "text/plain"))
        if path == "/":
            canary = [f"http://{s}:{self.canary_port}/from-link" for s in CANARY_SPELLINGS]
            links = ["/cal/2026-01-01", "/rep/", "/sess/start", "/long/1", "/redir/1",
                     "/to-canary"] + canary
            return await self.send(w, response("200 OK", page("traps", links)))
        if path.startswith("/cal/"):
            day = dt.date.fromisoformat(path[5:15])
            nxt = day + dt.timedelta(days=1)
            return await self.send(w, response("200 OK", page(f"calendar {day}", [f"/cal/{nxt}"])))
        if path.startswith("/rep/"):
            return await self.send(w, response("200 OK", page("repetition", ["a/", "b/a/"])))
        if path.startswith("/sess/"):
            n = next(self.sessions)
            links = [f"/sess/page;jsessionid=S{n:08d}", f"/sess/list?PHPSESSID=P{n:08d}&view=all",
                     f"/sess/app;jsessionid=A{n:08d}/item?PHPSESSID=Q{n:08d}"]
            return await self.send(w, response("200 OK", page("sessions", links)))
        if path.startswith("/long/"):
            n = int(path[6:].split("?")[0]) + 1
            return await self.send(w, response("200 OK", page("long", [f"/long/{n}?pad=" + "x" * 3000])))
        if path.startswith("/redir/"):
            n = int(path[7:]) + 1
            return await self.send(w, response("302 Found", b"", extra=[("Location", f"/redir/{n}")]))
        if path == "/to-canary":
            target = f"http://127.1:{self.canary_port}/from-redirect"
            return await self.send(w, response("301 Moved", b"", extra=[("Location", target)]))
        await self.send(w, response("404 Not Found", b"not here"))

    async def site_slow(self, path: str, w) -> None:
        if path == "/robots.txt":
            return await self.send(w, response("200 OK", b"User-agent: *\nAllow: /\n", "text/plain"))
        if path == "/":
            return await self.send(w, response("200 OK", page("slow", SLOW_PATHS + ["/ok/1"])))
        if path.startswith("/ok/"):
            n = int(path[4:])
            links = [f"/ok/{n + 1}"] if n < 2 else []
            return await self.send(w, response("200 OK", page(f"ok {n}", links)))
        if path == "/drip":
            return await self.drip(w, "text/html", b"x")
        if path == "/silent":
            return await asyncio.sleep(DRIP_SECONDS)
        if path == "/endless-headers":
            await self.send(w, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
            for n in range(DRIP_SECONDS * 100):
                await self.send(w, b"X-Header-%d: more\r\n" % n)
                await asyncio.sleep(0.01)
            return
        if path == "/endless-chunked":
            await self.send(w, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"<p>" + b"flood " * 2000 + b"</p>"
            piece = b"%x\r\n%s\r\n" % (len(chunk), chunk)
            for _ in range(1 << 20):  # 12 GB at most: the crawler hangs up long before
                await self.send(w, piece)
            return
        if path == "/short-body":
            await self.send(w, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                               b"Content-Length: 100000\r\n\r\n<html><body>cut")
            return
        if path == "/huge-header":
            return await self.send(w, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Huge: "
                                      + b"h" * (4 << 20) + b"\r\nContent-Length: 2\r\n\r\nok")
        if path == "/bomb":
            return await self.send(w, response("200 OK", self.bomb,
                                               extra=[("Content-Encoding", "gzip")]))
        await self.send(w, response("404 Not Found", b"not here"))

    async def site_throttling(self, site: str, path: str, w) -> None:
        if path == "/.well-known/tdmrep.json":  # no TDMRep file; not a page: never throttled
            return await self.send(w, response("404 Not Found", b"not here"))
        if path == "/robots.txt":
            if site == "robots429":
                return await self.send(w, response("429 Too Many Requests", b"slow down",
                                                   extra=[("Retry-After", "1")]))
            return await self.send(w, response("200 OK", b"User-agent: *\nAllow: /\n",
                                               "text/plain"))
        n = self.throttled.get(site, 0)
        if site == "ratelimit" and path == "/r/1" and not n:
            self.throttled[site] = 1
            return await self.send(w, response("429 Too Many Requests", b"slow down",
                                               extra=[("Retry-After", str(RETRY_AFTER))]))
        if site == "ratedate" and path == "/r/1" and not n:
            self.throttled[site] = 1
            when = email.utils.formatdate(time.time() + RETRY_DATE, usegmt=True)
            return await self.send(w, response("503 Service Unavailable", b"busy",
                                               extra=[("Retry-After", when)]))
        if site == "backoff" and n < 2:
            self.throttled[site] = n + 1
            return await self.send(w, response("503 Service Unavailable", b"busy"))
        links = [f"/r/{k}" for k in range(1, THROTTLE_PAGES + 1)]
        return await self.send(w, response("200 OK", page(f"{site} {path}", links)))

    async def site_robots(self, site: str, path: str, w) -> None:
        if site == "robotsmoved":
            if path == "/robots.txt" or path.startswith("/moved/"):
                n = 0 if path == "/robots.txt" else int(path[7:])
                if n < ROBOTS_HOPS:
                    return await self.send(w, response("301 Moved", b"", extra=[
                        ("Location", f"/moved/{n + 1}")]))
                return await self.send(w, response("200 OK", b"User-agent: *\nDisallow: /private\n",
                                                   "text/plain"))
            links = ["/private/a", "/public/a"]
        elif site == "robotsbig":
            if path == "/robots.txt":
                body = b"User-agent: *\nDisallow: /early\n"
                body += b"# filler\n" * ((ROBOTS_BIG - len(body)) // 9) + b"Disallow: /late\n"
                return await self.send(w, response("200 OK", body, "text/plain"))
            links = ["/early/a", "/late/a"]
        else:
            if path == "/robots.txt":
                return await self.send(w, response("200 OK", (
                    "User-agent: *\nDisallow: /foo/bar/ツ\nDisallow: /a<b\nDisallow: /~user\n"
                    "Allow: /q/\n").encode(), "text/plain"))
            links = [link for link, _ in ENCODED_LINKS]
        if path == "/":
            return await self.send(w, response("200 OK", page(site, links)))
        return await self.send(w, response("200 OK", page(f"{site} {path}", [])))

    async def site_markup(self, site: str, path: str, w) -> None:
        if path == "/robots.txt":
            rules = b"User-agent: *\nDisallow: /\n" if site == "sink" else b"User-agent: *\n"
            return await self.send(w, response("200 OK", rules, "text/plain"))
        if site == "sink" or path.startswith("/good/"):
            return await self.send(w, response("200 OK", page(f"{site} {path}", [])))
        if path == "/":
            return await self.send(w, response("200 OK", page("markup", MARKUP_PAGES)))
        good = f'<a href="/good{path}">good</a>'.encode()
        ctype = "text/html; charset=utf-8"
        if path == "/nested":
            body = b"<html><body>" + good + b"<div>" * NESTED + good + b"</div>" * 10 + b"</body></html>"
        elif path == "/many-links":
            sink = f"http://{HOSTS['sink']}:{self.port}"
            body = b"<html><body>" + good + "".join(
                f'<a href="{sink}/s/{k}">{k}</a>' for k in range(MANY_LINKS)).encode() + b"</body></html>"
        elif path == "/nul":
            body = b"<html><body>\x00\x00" + good + b"\xff\xfe\xc3\x28 caf\xe9 \x00</body></html>"
        elif path == "/unknown-charset":
            body = b"<html><body>" + good + b" \xa4\xa4</body></html>"
            ctype = "text/html; charset=x-no-such-charset-42"
        elif path == "/binary":
            body = bytes((k * 7919) % 256 for k in range(50_000)) + good
        elif path == "/base-js":
            body = (b'<html><head><base href="javascript:alert(1)//"></head><body>'
                    b'<a href="relative/link">r</a>'
                    + f'<a href="http://{HOSTS["markup"]}:{self.port}/good{path}">g</a>'.encode()
                    + b"</body></html>")
        elif path == "/refresh-self":
            body = (b'<html><head><meta http-equiv="refresh" content="0; url=/refresh-self">'
                    b"</head><body>" + good + b"</body></html>")
        elif path == "/malformed":
            bad = ["http://[::1", "http://a b.example/", "http://x.example:99999/", "%" * 5000,
                   "http://%zz%/", "javascript:alert(1)", "ht!tp://x/", "//", "http://"]
            body = (b"<html><body>" + "".join(f'<a href="{h}">x</a>' for h in bad).encode()
                    + good + b"</body></html>")
        else:
            return await self.send(w, response("404 Not Found", b"not here"))
        return await self.send(w, response("200 OK", body, ctype))

    async def site_sitemaps(self, site: str, path: str, w) -> None:
        ns = "http://www.sitemaps.org/schemas/sitemap/0.9"
        base = f"http://{HOSTS[site]}:{self.port}"
        xml = "application/xml"
        if site == "smtrap":
            if path == "/robots.txt":
                return await self.send(w, response("200 OK", b"Sitemap: /sm/0.xml\n", "text/plain"))
            if path.startswith("/sm/"):
                n = int(path[4:-4])
                body = (f'<sitemapindex xmlns="{ns}"><sitemap><loc>{base}/sm/{n + 1}.xml</loc>'
                        f"</sitemap><sitemap><loc>{base}/set/{n}.xml</loc></sitemap></sitemapindex>")
                return await self.send(w, response("200 OK", body.encode(), xml))
            if path.startswith("/set/"):
                n = int(path[5:-4])
                body = f'<urlset xmlns="{ns}"><url><loc>{base}/page/{n}</loc></url></urlset>'
                return await self.send(w, response("200 OK", body.encode(), xml))
            return await self.send(w, response("200 OK", page(f"{site} {path}", [])))
        if path == "/robots.txt":
            body = "".join(f"Sitemap: {base}{p}\n" for p in SLOW_SITEMAPS)
            return await self.send(w, response("200 OK", body.encode(), "text/plain"))
        if path == "/drip.xml":
            return await self.drip(w, "application/xml", b" ")
        if path == "/silent.xml":
            return await asyncio.sleep(DRIP_SECONDS)
        if path == "/bomb.xml.gz":
            return await self.send(w, response("200 OK", self.bomb, "application/gzip"))
        if path == "/throttle.xml" and not self.throttled.get("smslow"):
            self.throttled["smslow"] = 1
            return await self.send(w, response("429 Too Many Requests", b"later",
                                               extra=[("Retry-After", "3")]))
        if path in ("/throttle.xml", "/ok.xml"):
            target = "/fine" if path == "/ok.xml" else "/fine-too"
            body = f'<urlset xmlns="{ns}"><url><loc>{base}{target}</loc></url></urlset>'
            return await self.send(w, response("200 OK", body.encode(), xml))
        return await self.send(w, response("200 OK", page(f"{site} {path}", [])))

    async def site_calm(self, path: str, w) -> None:
        if path == "/robots.txt":
            return await self.send(w, response("404 Not Found", b""))
        if path == "/" or path.startswith("/p/"):
            n = int(path[3:]) if path.startswith("/p/") else 0
            links = [f"/p/{k}" for k in (n + 1, n + 2) if k <= CALM_PAGES] + ["/"]
            return await self.send(w, response("200 OK", page(f"calm {n}", links)))
        await self.send(w, response("404 Not Found", b"not here"))


async def canary(port: int, log_path: str) -> int:
    """A server on 127.0.0.1 and ::1 (one port) that logs every connection: it must see none.
    Returns its port."""
    log = open(log_path, "a", buffering=1)

    async def seen(reader, writer):
        log.write(json.dumps({"t": time.time(), "canary": True,
                              "peer": str(writer.get_extra_info("peername"))}) + "\n")
        writer.write(response("200 OK", page("canary", [])))
        await writer.drain()
        writer.close()

    v4 = await asyncio.start_server(seen, "127.0.0.1", port)
    port = v4.sockets[0].getsockname()[1]
    if socket.has_ipv6:
        try:
            await asyncio.start_server(seen, "::1", port)
        except OSError:
            pass
    return port


async def serve(log_path: str, port: int, canary_port: int) -> None:
    canary_port = await canary(canary_port, log_path)
    farm = Hostile(port, canary_port, log_path)
    for addr in HOSTS.values():
        server = await asyncio.start_server(farm.serve, addr, farm.port, reuse_address=True)
        farm.port = server.sockets[0].getsockname()[1]  # the first bind picks it, the rest use it
    print(f"READY {farm.port} {canary_port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--canary-port", type=int, default=0)
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.log, args.port, args.canary_port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
