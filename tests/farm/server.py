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

Sitemap sites (``--sitemap-hosts N``, on their own addresses 127.0.40.<1+j> so that the sites
above keep theirs; by index j, see ``SITEMAP_SITES``):

- ``sm_robots``: robots.txt names ``/sitemap-a.xml`` (a urlset with lastmod, changefreq,
  priority, images, hreflang alternates, whitespace around a ``<loc>``, a relative ``<loc>``,
  an entry without ``<loc>``, an entry on another host, one disallowed by robots.txt); pages
  ``/p/<n>`` link to ``/unlisted`` (never to be fetched: outlinks are not followed). ``POST
  /__bump`` sets the lastmod of ``/p/1`` to now (and changes nothing else).
- ``sm_guess``: no robots.txt; ``/sitemap.xml`` is a urlset with a UTF-8 BOM, leading whitespace
  and Google's old namespace; ``/sitemap_index.xml`` 404.
- ``sm_index``: robots.txt names ``/index.xml``, an index of a nested index (``/sub-index.xml``:
  an RSS feed and an Atom feed), a gzipped sitemap served as ``application/gzip``, a text sitemap,
  and a chain of indexes ``/deep/0.xml`` → ``/deep/1.xml`` → … (ten levels; each lists
  ``/deep-page/<k>`` and the next index).
- ``sm_cross``: robots.txt names a sitemap on the ``sm_plain`` host that lists pages of both
  hosts and of an unrelated host (cross-submission: the first two are in scope).
- ``sm_plain``: no Sitemap line; ``/sitemap.xml`` 404, ``/sitemap_index.xml`` an index of its own
  ``/own.xml`` and of a sitemap on another host (out of scope).
- ``sm_bombs``: robots.txt names a gzip bomb (1 GiB of blanks, ~1 MB gzipped), a billion-laughs
  document, an XXE document whose external entity points at ``/secret`` on this host (never to be
  requested), and ``/ok.xml`` listing ``/fine``.

Every request is appended to an access log (JSON lines: time, host, path, status) that tests judge
the crawl by. The time is the request's arrival, as a server's access log keeps it: politeness is
about when requests reach a host, and ``/slow`` answers 30 s after it was asked (its entry stamped
at the answer once fell between two later requests to its host, a gap of 1.3 s where 3 s were
kept). Run: ``python -m tests.farm.server --hosts 6 --log FILE`` → prints ``READY <port>``.
``--pad BYTES``: every HTML page of ``Farm.page`` carries that many random bytes (base64, in a
comment: gzipped they stay about that many bytes, and the page's text and links do not change),
for tests that need megabytes of WARC records from a small crawl.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import gzip
import json
import os
import sys
import time

from aiohttp import web

SITES = ["normal", "robots503", "crawldelay", "oddities", "nofollow", "norobots"]
BIG = 3 * 1024 * 1024


SITEMAP_SITES = ["sm_robots", "sm_guess", "sm_index", "sm_cross", "sm_plain", "sm_bombs"]
SM_PAGES = 6  # /p/1 … /p/6 of sm_robots
DEEP_LEVELS = 10


def host_addr(i: int) -> str:
    return f"127.0.{10 + i // 200}.{1 + i % 200}"


def sitemap_addr(j: int) -> str:
    return f"127.0.40.{1 + j}"


@functools.lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """1 GiB of blanks after <urlset>, gzipped (about 1 MB)."""
    z = gzip.GzipFile
    import io

    buf = io.BytesIO()
    with z(fileobj=buf, mode="wb", compresslevel=9) as f:
        f.write(b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">')
        block = b" " * (1 << 20)
        for _ in range(1024):
            f.write(block)
    return buf.getvalue()


LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
          + "".join(f' <!ENTITY lol{i} "{(f"&lol{i - 1};" if i > 1 else "&lol;") * 10}">\n'
                    for i in range(1, 10))
          + ']>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>'
          '&lol9;</loc></url></urlset>\n')


class Farm:
    def __init__(self, n_hosts: int, port: int, log_path: str, n_sitemap_hosts: int = 0,
                 pad: int = 0):
        self.n = n_hosts
        self.pad = pad  # random bytes in every page of page() (module docstring)
        self.port = port
        self.log = open(log_path, "a", buffering=1)
        self.addr_to_index = {host_addr(i): i for i in range(n_hosts)}
        self.sm_index = {sitemap_addr(j): j for j in range(n_sitemap_hosts)}
        self.generation = 0  # sm_robots: bumped by POST /__bump (the lastmod of /p/1)
        self.bumped = ""

    def url(self, i: int, path: str) -> str:
        return f"http://{host_addr(i)}:{self.port}{path}"

    def page(self, title: str, links: list[str], extra_head: str = "", body: str = "") -> str:
        anchors = "\n".join(f'<li><a href="{h}">link {k}</a></li>' for k, h in enumerate(links))
        filler = " ".join(["Lorem ipsum dolor sit amet, consectetur adipiscing elit."] * 40)
        if self.pad:
            extra_head += f"<!-- {base64.b64encode(os.urandom(self.pad)).decode()} -->"
        return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{title}</title>"
                f"{extra_head}</head><body><h1>{title}</h1><p>{filler}</p>{body}<ul>{anchors}</ul>"
                f"</body></html>")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time()
        addr = request.transport.get_extra_info("sockname")[0]
        if addr in self.sm_index:
            i = self.sm_index[addr]
            site = SITEMAP_SITES[i % len(SITEMAP_SITES)]
        else:
            i = self.addr_to_index.get(addr, 0)
            site = SITES[i % len(SITES)]
        try:
            resp = await getattr(self, f"site_{site}")(i, request)
        except web.HTTPException as exc:
            resp = exc
        self.log.write(json.dumps({"t": arrived, "host": addr, "site": site,
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


    # -- sitemap sites (SITEMAP_SITES) ------------------------------------------------------
    def surl(self, j: int, path: str) -> str:
        return f"http://{sitemap_addr(j)}:{self.port}{path}"

    def sm_of(self, name: str) -> int | None:
        """Index of the first sitemap host serving site ``name`` (None when not served)."""
        for j in range(len(self.sm_index)):
            if SITEMAP_SITES[j % len(SITEMAP_SITES)] == name:
                return j
        return None

    @staticmethod
    def xml(body: str, status: int = 200) -> web.Response:
        return web.Response(text=body, status=status, content_type="application/xml")

    @staticmethod
    def urlset(entries: list[str], ns: str = "http://www.sitemaps.org/schemas/sitemap/0.9",
               extra_ns: str = "") -> str:
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{ns}"{extra_ns}>\n'
                + "\n".join(entries) + "\n</urlset>\n")

    @staticmethod
    def index(locs: list[str]) -> str:
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="http://www.sitemaps.'
                'org/schemas/sitemap/0.9">\n' + "\n".join(
                    f"<sitemap><loc>{loc}</loc><lastmod>2024-03-01</lastmod></sitemap>"
                    for loc in locs) + "\n</sitemapindex>\n")

    def sm_page(self, title: str) -> web.Response:
        return web.Response(text=self.page(title, ["/unlisted", "/p/1"]), content_type="text/html")

    async def site_sm_robots(self, j, req):
        p = req.path
        if p == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n"
                                     "Sitemap: /sitemap-a.xml\n", content_type="text/plain")
        if p == "/__bump" and req.method == "POST":  # /p/1 changed now
            self.generation += 1
            self.bumped = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
            return web.Response(text=self.bumped)
        if p == "/sitemap-a.xml":
            lm1 = self.bumped if self.generation else "2024-01-01T10:00:00+01:00"
            entries = [
                f"<url><loc>{self.surl(j, '/p/1')}</loc><lastmod>{lm1}</lastmod>"
                "<changefreq>daily</changefreq><priority>0.9</priority>"
                f"<image:image><image:loc>{self.surl(j, '/img/1.jpg')}</image:loc></image:image>"
                f'<xhtml:link rel="alternate" hreflang="de" href="{self.surl(j, "/p/2")}"/></url>',
                f"<url><loc>\n   {self.surl(j, '/p/2')}   \n</loc><lastmod>2023-06-30</lastmod>"
                "<changefreq>weekly</changefreq><priority>0.3</priority></url>",
                "<url><loc>/p/3</loc></url>",  # relative: resolved against the sitemap
                f"<url>{self.surl(j, '/p/4')}</url>",  # no <loc>: the URL as the entry's text
                "<url><lastmod>2024-01-01</lastmod></url>",  # no location at all: dropped
                f"<url><loc>{self.surl(j, '/p/5')}</loc><changefreq>monthly</changefreq></url>",
                f"<url><loc>{self.surl(j, '/p/6')}</loc></url>",
                f"<url><loc>{self.surl(j, '/private/x')}</loc></url>",  # robots.txt: disallowed
                "<url><loc>http://203.0.113.9/elsewhere</loc></url>",  # another host: out of scope
            ]
            return self.xml(self.urlset(entries, extra_ns=(
                ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
                ' xmlns:xhtml="http://www.w3.org/1999/xhtml"')))
        if p.startswith("/p/"):
            return self.sm_page(f"sitemap page {p}")
        if p in ("/", "/unlisted") or p.startswith("/private/"):
            return web.Response(text=self.page(p, ["/p/1", "/unlisted"]), content_type="text/html")
        raise web.HTTPNotFound()

    async def site_sm_guess(self, j, req):
        p = req.path
        if p == "/sitemap.xml":
            body = ("\ufeff  \n" + self.urlset(
                [f"<url><loc>{self.surl(j, f'/g/{k}')}</loc><lastmod>2022-02-0{k}</lastmod></url>"
                 for k in (1, 2)], ns="http://www.google.com/schemas/sitemap/0.84"))
            return web.Response(body=body.encode("utf-8"), content_type="text/xml")
        if p.startswith("/g/") or p == "/":
            return self.sm_page(p)
        raise web.HTTPNotFound()  # robots.txt and /sitemap_index.xml too

    async def site_sm_index(self, j, req):
        p = req.path
        if p == "/robots.txt":
            return web.Response(text=f"Sitemap: {self.surl(j, '/index.xml')}\n",
                                content_type="text/plain")
        if p == "/index.xml":
            return self.xml(self.index([self.surl(j, x) for x in (
                "/sub-index.xml", "/gz/sitemap.xml.gz", "/text.txt", "/deep/0.xml")]))
        if p == "/sub-index.xml":
            return self.xml(self.index([self.surl(j, "/feed.rss"), self.surl(j, "/feed.atom")]))
        if p == "/gz/sitemap.xml.gz":
            body = gzip.compress(self.urlset([f"<url><loc>{self.surl(j, '/gz-page')}</loc>"
                                              "<lastmod>2021-05-05</lastmod></url>"]).encode())
            return web.Response(body=body, content_type="application/gzip")
        if p == "/text.txt":
            return web.Response(text=f"{self.surl(j, '/text-page/1')}\n\n"
                                     f"  {self.surl(j, '/text-page/2')}  \nnot a url\n",
                                content_type="text/plain")
        if p == "/feed.rss":
            return web.Response(text=(
                '<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
                f"<item><title>a</title><link>{self.surl(j, '/rss-item')}</link>"
                "<pubDate>Tue, 10 Jun 2025 04:00:00 GMT</pubDate></item></channel></rss>"),
                content_type="application/rss+xml")
        if p == "/feed.atom":
            return web.Response(text=(
                '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
                f'<title>t</title><entry><title>e</title><link href="{self.surl(j, "/atom-entry")}"/>'
                "<updated>2025-07-01T12:00:00Z</updated></entry></feed>"),
                content_type="application/atom+xml")
        if p.startswith("/deep/") and p.endswith(".xml"):
            k = int(p[len("/deep/"):-len(".xml")])
            if k >= DEEP_LEVELS:
                raise web.HTTPNotFound()
            return self.xml(self.index([self.surl(j, f"/deep/{k + 1}.xml"),
                                        self.surl(j, f"/deep-set/{k}.xml")]))
        if p.startswith("/deep-set/"):
            k = p[len("/deep-set/"):-len(".xml")]
            return self.xml(self.urlset([f"<url><loc>{self.surl(j, f'/deep-page/{k}')}</loc></url>"]))
        if p in ("/gz-page", "/rss-item", "/atom-entry", "/") or p.startswith(("/text-page/",
                                                                               "/deep-page/")):
            return self.sm_page(p)
        raise web.HTTPNotFound()

    async def site_sm_cross(self, j, req):
        p = req.path
        plain = self.sm_of("sm_plain")
        if p == "/robots.txt":
            return web.Response(text=f"User-agent: *\nAllow: /\nSitemap: "
                                     f"{self.surl(plain, '/cross/sitemap.xml')}\n",
                                content_type="text/plain")
        if p.startswith("/c/") or p == "/":
            return self.sm_page(p)
        raise web.HTTPNotFound()

    async def site_sm_plain(self, j, req):
        p = req.path
        cross = self.sm_of("sm_cross")
        robots = self.sm_of("sm_robots")
        if p == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow:\n", content_type="text/plain")
        if p == "/cross/sitemap.xml":  # named by sm_cross's robots.txt
            return self.xml(self.urlset([
                f"<url><loc>{self.surl(cross, '/c/1')}</loc><lastmod>2020-01-01</lastmod></url>",
                f"<url><loc>{self.surl(j, '/plain-listed-by-cross')}</loc></url>",
                f"<url><loc>{self.surl(robots, '/p/unrelated')}</loc></url>",  # not in scope
            ]))
        if p == "/sitemap_index.xml":
            return self.xml(self.index([self.surl(j, "/own.xml"),
                                        self.surl(robots, "/foreign.xml")]))  # foreign: dropped
        if p == "/own.xml":
            return self.xml(self.urlset([f"<url><loc>{self.surl(j, '/own-page')}</loc></url>"]))
        if p in ("/own-page", "/plain-listed-by-cross", "/"):
            return self.sm_page(p)
        raise web.HTTPNotFound()

    async def site_sm_bombs(self, j, req):
        p = req.path
        if p == "/robots.txt":
            return web.Response(text="".join(f"Sitemap: {self.surl(j, x)}\n" for x in (
                "/bomb.xml.gz", "/laughs.xml", "/xxe.xml", "/ok.xml")), content_type="text/plain")
        if p == "/bomb.xml.gz":
            return web.Response(body=gzip_bomb(), content_type="application/gzip")
        if p == "/laughs.xml":
            return self.xml(LAUGHS)
        if p == "/xxe.xml":
            return self.xml(f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY x SYSTEM '
                            f'"{self.surl(j, "/secret")}">]><urlset xmlns="http://www.sitemaps.'
                            f'org/schemas/sitemap/0.9"><url><loc>&x;</loc></url></urlset>')
        if p == "/ok.xml":
            return self.xml(self.urlset([f"<url><loc>{self.surl(j, '/fine')}</loc></url>"]))
        if p in ("/fine", "/"):
            return self.sm_page(p)
        raise web.HTTPNotFound()  # /secret included


async def serve(n_hosts: int, port: int, log_path: str, n_sitemap_hosts: int = 0,
                pad: int = 0) -> None:
    farm = Farm(n_hosts, port, log_path, n_sitemap_hosts, pad)
    if n_sitemap_hosts:
        gzip_bomb()  # built once, before READY
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", farm.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sites = []
    addrs = [host_addr(i) for i in range(n_hosts)] + [sitemap_addr(j) for j in range(n_sitemap_hosts)]
    for addr in addrs:
        site = web.TCPSite(runner, addr, port, reuse_address=True)
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
    ap.add_argument("--sitemap-hosts", type=int, default=0,
                    help="also serve this many sitemap sites (SITEMAP_SITES) on 127.0.40.x")
    ap.add_argument("--pad", type=int, default=0,
                    help="random bytes in every HTML page (base64, in a comment)")
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.hosts, args.port, args.log, args.sitemap_hosts, args.pad))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
