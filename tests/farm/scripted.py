"""A farm of pages built by scripts (issue 48): one single-page application on 127.0.74.1 whose
every page is the same shell — an empty ``<div id="root"></div>``, a ``<noscript>`` notice, one
script (``/app.js``) and almost no text — and whose links and text exist only once the script ran.
What the script does depends on the page's path (:data:`LINKS` gives the links it makes):

- most pages: links and text written at once; ``/b`` first opens an ``alert()``, which holds the
  script until it is dismissed;
- ``/dcl``: written by a ``DOMContentLoaded`` handler;
- ``/fetched``: links read from ``/api/links.json`` with ``fetch()`` (same host);
- ``/a``: also asks for ``/api/hidden`` (robots.txt disallows it: never requested);
- ``/private``: also asks for ``http://127.0.75.1:<port>/secret`` (an address outside the
  crawl's allowed networks: the SSRF guard refuses it, never requested) and shows an image
  (``/pic.png``: blocked by type, never requested); and it opens a frame of another site,
  ``http://127.0.74.2:<port>/frame``, whose script asks for ``/api/from-frame`` there, and a
  worker (``/api/worker.js``) that asks for ``/api/from-worker``: requests of a frame and of a
  worker are the crawler's to answer too;
- ``/forever``: then asks for ``/api/tick`` every 100 ms, forever: the network is never idle, the
  page ends at its budget;
- ``/busy``: then, 100 ms later, runs a loop that never ends: the page's thread is held, it ends
  at its budget with its scripts stopped.

Beside them a static page, ``/about``, linked from the shell's footer (in the raw HTML): a page
with real text that needs no browser. Every request is logged as a JSON line (time, host, path,
status). Run: ``python -m tests.farm.scripted --log FILE`` → prints ``READY <port>``.
"""

from __future__ import annotations

import json

from aiohttp import web

from tests.farm import aiosites

HOST = "127.0.74.1"
#: another site of the allowed network, the frame's
FRAME_HOST = "127.0.74.2"
#: an address the crawl may not reach (the test allows 127.0.74.0/24 only); served all the same,
#: so that a request which got past the guard would show in the log
PRIVATE = "127.0.75.1"
NETWORK = "127.0.74.0/24"

#: the links the script writes on each page (every page of the site is a key)
LINKS = {
    "/": ["/a", "/b", "/dcl", "/fetched", "/forever", "/busy", "/private"],
    "/a": ["/a/child"], "/b": ["/"], "/dcl": ["/dcl/child"],
    "/fetched": [],  # its links come from /api/links.json
    "/forever": ["/forever/child"], "/busy": ["/busy/child"], "/private": ["/private/child"],
    "/a/child": [], "/dcl/child": [], "/from-fetch/1": [], "/from-fetch/2": ["/b"],
    "/forever/child": [], "/busy/child": [], "/private/child": [],
}
FETCHED_LINKS = ["/from-fetch/1", "/from-fetch/2"]
STATIC = "/about"
#: every page a full crawl of the site fetches (robots.txt aside)
PAGES = sorted([*LINKS, STATIC])

ROBOTS = "User-agent: *\nDisallow: /api/hidden\n"

SHELL = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Loading…</title>
<script src="/app.js" defer></script></head>
<body data-private="{private}"><noscript>You need to enable JavaScript to run this app.</noscript>
<div id="root"></div>
<footer><a href="/about">about</a></footer>
<img src="/pic.png" alt="">
</body></html>
"""

APP = """
(function () {
  var LINKS = %(links)s;
  var path = location.pathname;
  function words(n) {
    var w = [];
    for (var i = 0; i < n; i++) w.push("word" + i);
    return w.join(" ");
  }
  function render(links) {
    document.title = "Rendered " + path;
    var root = document.getElementById("root");
    var h = document.createElement("h1");
    h.textContent = "Page " + path + " built by its script";
    root.appendChild(h);
    var p = document.createElement("p");
    p.textContent = "This text of " + path + " exists only after the script ran. " + words(60);
    root.appendChild(p);
    var ul = document.createElement("ul");
    links.forEach(function (href) {
      var li = document.createElement("li"), a = document.createElement("a");
      a.href = href; a.textContent = "to " + href;
      li.appendChild(a); ul.appendChild(li);
    });
    root.appendChild(ul);
  }
  var links = LINKS[path] || [];
  if (path === "/b") alert("Welcome to /b");  // a dialog the page waits on until dismissed
  if (path === "/dcl") {
    document.addEventListener("DOMContentLoaded", function () { render(links); });
  } else if (path === "/fetched") {
    fetch("/api/links.json").then(function (r) { return r.json(); })
      .then(function (data) { render(data.links); });
  } else {
    render(links);
  }
  if (path === "/a") fetch("/api/hidden").catch(function () {});
  if (path === "/private") {
    var port = location.port;
    fetch("http://%(private)s:" + port + "/secret").catch(function () {});
    new Image().src = "/pic2.png";
    var frame = document.createElement("iframe");
    frame.src = "http://%(frame)s:" + port + "/frame";
    document.body.appendChild(frame);
    new Worker("/api/worker.js");
  }
  if (path === "/forever") {
    var n = 0;
    setInterval(function () { fetch("/api/tick?n=" + (n++)).catch(function () {}); }, 100);
  }
  if (path === "/busy") setTimeout(function () { for (;;) {} }, 100);
})();
"""

FRAME = """<!DOCTYPE html><html><body><p>A frame of another site.</p>
<script>fetch("/api/from-frame").catch(function () {});</script></body></html>"""
WORKER = 'fetch("/api/from-worker").catch(function () {});'

ABOUT = """<!DOCTYPE html><html><head><title>About the scripted site</title></head><body>
<h1>About</h1><p>This page is plain HTML: its text is here without any script, and it is long
enough that nobody would call it empty. """ + "It says a great many ordinary things. " * 20 + \
    """</p><a href="/">home</a></body></html>"""


def make_answer(port: int) -> aiosites.Answer:
    app_js = APP % {"links": json.dumps(LINKS), "private": PRIVATE, "frame": FRAME_HOST}

    def answer(addr: str, path: str) -> web.StreamResponse:
        if addr == FRAME_HOST:
            if path == "/frame":
                return web.Response(text=FRAME, content_type="text/html")
            if path == "/robots.txt":
                return web.Response(status=404, text="none")
            return web.json_response({"ok": True})
        if addr != HOST:
            return web.Response(text="secret", content_type="text/plain")
        if path == "/robots.txt":
            return web.Response(text=ROBOTS, content_type="text/plain")
        if path == "/app.js":
            return web.Response(text=app_js, content_type="application/javascript")
        if path == "/api/links.json":
            return web.json_response({"links": FETCHED_LINKS})
        if path == "/api/worker.js":
            return web.Response(text=WORKER, content_type="application/javascript")
        if path in ("/api/tick", "/api/hidden", "/api/from-worker"):
            return web.json_response({"ok": True})
        if path in ("/pic.png", "/pic2.png"):
            return web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")
        if path == STATIC:
            return web.Response(text=ABOUT, content_type="text/html")
        if path in LINKS:
            return web.Response(text=SHELL.format(private=PRIVATE), content_type="text/html")
        return web.Response(status=404, text="not found")
    return answer


def main() -> None:
    aiosites.main(aiosites.answering(make_answer), [HOST, FRAME_HOST, PRIVATE])


if __name__ == "__main__":
    main()
