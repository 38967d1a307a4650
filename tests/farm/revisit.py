"""A farm for re-crawls: pages that change between passes, and a site that opts out mid-crawl.

Two sites on one port (aiohttp), by address:

- ``site`` (127.0.70.1): ``/`` links to every page; ``/etag/<n>`` answers ``304`` to its ETag
  (``If-None-Match``), ``/lm/<n>`` to ``If-Modified-Since`` at or after its Last-Modified;
  ``/plain/<n>`` sends neither and never changes (a re-fetch gets the same bytes);
  ``/changing/<n>`` sends neither and changes with every pass; ``/dup/<n>`` are one article with
  one word changed per page (near-duplicates), with an ETag (a later pass gets ``304`` and parses
  none of them again); from pass 2 on ``/`` also links ``/dup/<NEW_DUP>``, one more of them,
  whose originals are then known only from what the frontier holds of pass 1. The texts are a
  few hundred words drawn from a fixed vocabulary, different per page.
- ``optout`` (127.0.70.2): ``/`` links to ``/o/1`` … ``/o/20``; the test adds the host to an
  opt-out list while it is being crawled.

``POST /__pass/<n>`` (any host) starts pass ``n`` (``/changing/<n>`` changes). Every request is
logged as a JSON line: time, host, path, status, and the conditional headers it carried
(``inm``, ``ims``). Run: ``python -m tests.farm.revisit --log FILE`` → prints ``READY <port>``.
"""

from __future__ import annotations

import json
import random
import time
from email.utils import formatdate, parsedate_to_datetime

from aiohttp import web

from tests.farm import aiosites

SITE, OPTOUT = "127.0.70.1", "127.0.70.2"
NETWORK = "127.0.70.0/24"
PAGES = {"etag": 4, "lm": 4, "plain": 4, "changing": 4, "dup": 8}
#: the near-duplicate linked from pass 2 on
NEW_DUP = PAGES["dup"] + 1
OPTOUT_PAGES = 20
LAST_MODIFIED = 1_700_000_000
WORDS = ("crawl frontier archive index search open web page link host queue fetch parse record "
         "revisit change signature digest storm cluster spout bolt tuple metadata status schedule "
         "interval politeness robots sitemap feed language text content header response request "
         "server client network address domain path query fragment anchor title body paragraph "
         "table list image video audio script style form input button select option label field "
         "value name type size length offset date time year month day hour minute second number "
         "river mountain forest ocean desert island valley city village road bridge tower castle "
         "garden market harbour station library museum theatre school hospital church temple farm "
         "apple bread cheese honey lemon onion pepper potato rice salt sugar tomato water wine milk "
         "red blue green yellow black white brown purple orange silver golden quiet loud bright "
         "dark warm cold early late quick slow happy sad brave calm eager gentle proud wise").split()


def text(seed: str, words: int = 300) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(WORDS) for _ in range(words))


def html(title: str, body: str, links: list[str] = ()) -> bytes:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
            f"<p>{body}</p><ul>{anchors}</ul></body></html>").encode()


class Farm:
    def __init__(self, log_path: str) -> None:
        self.log = open(log_path, "a", buffering=1)
        self.pass_no = 1

    async def handle(self, request: web.Request) -> web.StreamResponse:
        host = request.transport.get_extra_info("sockname")[0]
        if request.method == "POST" and request.path.startswith("/__pass/"):
            self.pass_no = int(request.path.rsplit("/", 1)[1])
            return web.Response(text=f"pass {self.pass_no}\n")
        resp = self.answer(host, request)
        self.log.write(json.dumps({
            "t": time.time(), "host": host, "path": request.path, "status": resp.status,
            "inm": request.headers.get("If-None-Match"),
            "ims": request.headers.get("If-Modified-Since")}) + "\n")
        return resp

    def answer(self, host: str, request: web.Request) -> web.Response:
        path = request.path
        if path == "/robots.txt":
            return web.Response(status=404)
        if host == OPTOUT:
            if path == "/":
                return self.page(html("opt-out", text("optout"),
                                      [f"/o/{n}" for n in range(1, OPTOUT_PAGES + 1)]))
            return self.page(html(path, text(path)))
        if path == "/":
            links = [f"/{kind}/{n}" for kind, count in PAGES.items() for n in range(1, count + 1)]
            if self.pass_no >= 2:
                links.append(f"/dup/{NEW_DUP}")
            return self.page(html("index", text("index"), links))
        parts = path.strip("/").split("/")
        if len(parts) != 2 or parts[0] not in PAGES or not parts[1].isdigit() or (
                parts[0] == "dup" and int(parts[1]) > NEW_DUP):
            return web.Response(status=404)
        kind, n = parts[0], int(parts[1])
        if kind == "etag":
            tag = f'W/"e{n}"'
            if request.headers.get("If-None-Match") == tag:
                return web.Response(status=304, headers={"ETag": tag})
            return self.page(html(path, text(path)), {"ETag": tag})
        if kind == "lm":
            since = request.headers.get("If-Modified-Since")
            if since:
                try:
                    if parsedate_to_datetime(since).timestamp() >= LAST_MODIFIED:
                        return web.Response(status=304)
                except (TypeError, ValueError):
                    pass
            return self.page(html(path, text(path)),
                             {"Last-Modified": formatdate(LAST_MODIFIED, usegmt=True)})
        if kind == "changing":
            return self.page(html(path, text(f"{path} pass {self.pass_no}")))
        if kind == "dup":  # one article, one word changed per page
            tag = f'W/"d{n}"'
            if request.headers.get("If-None-Match") == tag:
                return web.Response(status=304, headers={"ETag": tag})
            words = text("dup article").split()
            words[n * 10] = "changed"
            return self.page(html("an article", " ".join(words)), {"ETag": tag})
        return self.page(html(path, text(path)))

    @staticmethod
    def page(body: bytes, headers: dict | None = None) -> web.Response:
        return web.Response(body=body, content_type="text/html", headers=headers)


def main() -> None:
    aiosites.main(lambda log, port: Farm(log).handle, (SITE, OPTOUT))


if __name__ == "__main__":
    main()
