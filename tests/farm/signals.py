"""A farm on loopback whose hosts say what may be done with their content (issue 47), each in
another place, some wrongly: one site per address 127.0.61.<n>, raw asyncio servers.

- ``usage`` (.1): robots.txt with the IETF AI preferences by path: ``train-ai=n`` for the whole
  site, ``search=n`` under ``/no-search/``, ``train-ai=y`` under ``/ai-ok/``; and a group for
  another crawler saying ``search=n`` everywhere (not ours);
- ``cfsignal`` (.2): ``Content-Signal: search=yes, ai-train=no`` before any group, as a CDN's
  managed robots.txt may write it, and ``use=reference`` in the group;
- ``cfnosearch`` (.3): ``Content-Signal: search=no`` in the ``*`` group: nothing but its
  robots.txt may be requested by a crawl for search;
- ``headers`` (.4): no robots.txt; ``/`` answers with ``Content-Usage: train-ai=n, search=y``,
  ``X-Robots-Tag: owler: noai`` and ``tdm-reservation: 1`` with a ``tdm-policy``; ``/other``
  with ``X-Robots-Tag: otherbot: noai`` only (not ours);
- ``malformed`` (.5): robots.txt with ``Content-Usage: Train-AI=n`` (not a dictionary: keys are
  lower case) and ``Content-Signal: search=maybe``; its page's header says ``search=yes`` (not
  the token ``y``): every signal unknown, each with its reason, the site crawled as any other.

Each home page links to the site's other pages (:data:`PAGES`). Every request is logged (JSON
lines: time, host, path) to ``--log``. Run: ``python -m tests.farm.signals --log FILE`` → prints
``READY <port>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from tests.farm.hostile import page, response

HOSTS = {"usage": "127.0.61.1", "cfsignal": "127.0.61.2", "cfnosearch": "127.0.61.3",
         "headers": "127.0.61.4", "malformed": "127.0.61.5"}
NETWORK = "127.0.61.0/24"
#: the pages of each site beside its home page
PAGES = {"usage": ["/no-search/a", "/ai-ok/b", "/plain/c"], "cfsignal": ["/p"],
         "cfnosearch": ["/p"], "headers": ["/other"], "malformed": ["/p"]}
ROBOTS = {
    "usage": b"User-agent: otherbot\nContent-Usage: search=n\n\n"
             b"User-agent: *\nAllow: /\nContent-Usage: train-ai=n\n"
             b"Content-Usage: /no-search/ search=n\nContent-Usage: /ai-ok/ train-ai=y\n",
    "cfsignal": b"Content-Signal: search=yes, ai-train=no\n"
                b"User-agent: *\nContent-Signal: use=reference\nAllow: /\n",
    "cfnosearch": b"User-agent: *\nContent-Signal: search=no\nAllow: /\n",
    "malformed": b"User-agent: *\nContent-Usage: Train-AI=n\nContent-Signal: search=maybe\n",
}
HEADERS = {
    ("headers", "/"): [("Content-Usage", "train-ai=n, search=y"), ("X-Robots-Tag", "owler: noai"),
                       ("tdm-reservation", "1"), ("tdm-policy", "https://policy.example/p.json")],
    ("headers", "/other"): [("X-Robots-Tag", "otherbot: noai")],
    ("malformed", "/"): [("Content-Usage", "search=yes")],
}


class Farm:
    def __init__(self, log_path: str) -> None:
        self.log = open(log_path, "a", buffering=1)
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("sockname")[0]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            self.log.write(json.dumps({"t": time.time(), "host": addr, "path": path}) + "\n")
            site = {v: k for k, v in HOSTS.items()}[addr]
            if path == "/robots.txt":
                body = ROBOTS.get(site)
                data = (response("200 OK", body, "text/plain") if body is not None
                        else response("404 Not Found", ctype="text/plain"))
            elif path == "/" or path in PAGES[site]:
                links = PAGES[site] if path == "/" else []
                data = response("200 OK", page(f"{site} {path}", links),
                                extra=HEADERS.get((site, path)))
            else:
                data = response("404 Not Found", ctype="text/plain")
            writer.write(data)
            await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, IndexError,
                KeyError):
            pass
        finally:
            writer.close()


async def serve(log_path: str, port: int) -> None:
    farm = Farm(log_path)
    farm.port = port
    for addr in HOSTS.values():
        server = await asyncio.start_server(farm.serve, addr, farm.port, reuse_address=True)
        farm.port = server.sockets[0].getsockname()[1]  # the first bind picks it, the rest use it
    print(f"READY {farm.port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.log, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
