"""A farm on loopback whose hosts say what may be done with their content (issue 47), each signal
in each of its places, some in conflict and some wrongly: one site per address 127.0.61.<n>,
raw asyncio servers.

- ``usage`` (.1): robots.txt with the IETF AI preferences by path: ``train-ai=n`` for the whole
  site, ``search=n`` under ``/no-search/``, ``train-ai=y`` under ``/ai-ok/``; and a group for
  another crawler saying ``search=n`` everywhere (not ours);
- ``cfsignal`` (.2): ``Content-Signal: search=yes, ai-train=no`` before any group, as a CDN's
  managed robots.txt may write it, and ``use=reference`` in the group;
- ``cfnosearch`` (.3): ``Content-Signal: search=no`` in the ``*`` group: nothing but its
  robots.txt may be requested by a crawl for search that skips what is refused;
- ``headers`` (.4): no robots.txt; ``/`` answers with ``Content-Usage: train-ai=n, search=y``,
  ``X-Robots-Tag: owler: noai`` and ``tdm-reservation: 1`` with a ``tdm-policy``; ``/other``
  with ``X-Robots-Tag: otherbot: noai`` only (not ours);
- ``malformed`` (.5): robots.txt with ``Content-Usage: Train-AI=n`` (not a dictionary: keys are
  lower case) and ``Content-Signal: search=maybe``; its page's header says ``search=yes`` (not
  the token ``y``): every signal unknown, each with its reason, the site crawled as any other;
- ``meta`` (.6): the ``<meta>`` signals. ``/``: ``<meta name="robots" content="noai, noimageai">``,
  ``<META NAME=Owler CONTENT='noimageai'>`` (the crawler's agent), another crawler's ``noai``,
  a reservation inside a comment and a script (text, not elements), and a header
  ``Content-Usage: train-ai=y`` that the meta's ``noai`` outweighs; ``/tdm``: a reservation meta
  (attributes reversed, upper case) with a ``tdm-policy`` holding a character reference, and a
  link to ``/linked`` found nowhere else; ``/tdm-off``: the header reserves, the meta lifts it
  (TDMRep: the meta comes last); ``/bad``: ``tdm-reservation`` ``yes``; ``/after-head``: a
  reservation after ``</head>`` (not the head's). Any other path, ``/.well-known/tdmrep.json``
  too, answers a page of markup with 200, as some sites do;
- ``tdmfile`` (.7): a valid ``/.well-known/tdmrep.json`` reserving ``/reserved/`` (with a policy)
  and not the rest (the first rule in sequence decides); ``/reserved/lifted`` answers with
  ``tdm-reservation: 0``, which supersedes the file;
- ``tdmbad`` (.8): a ``/.well-known/tdmrep.json`` that is not JSON;
- ``tdm5xx`` (.9): a ``/.well-known/tdmrep.json`` answering 500.

Every other host has no TDMRep file (404). Each home page links to the site's other pages
(:data:`PAGES`). Every request is logged (JSON lines: time, host, path, User-Agent) to ``--log``.
Run: ``python -m tests.farm.signals --log FILE`` → prints ``READY <port>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from tests.farm.hostile import page, response

HOSTS = {"usage": "127.0.61.1", "cfsignal": "127.0.61.2", "cfnosearch": "127.0.61.3",
         "headers": "127.0.61.4", "malformed": "127.0.61.5", "meta": "127.0.61.6",
         "tdmfile": "127.0.61.7", "tdmbad": "127.0.61.8", "tdm5xx": "127.0.61.9"}
NETWORK = "127.0.61.0/24"
TDMREP = "/.well-known/tdmrep.json"
#: the pages of each site beside its home page
PAGES = {"usage": ["/no-search/a", "/ai-ok/b", "/plain/c"], "cfsignal": ["/p"],
         "cfnosearch": ["/p"], "headers": ["/other"], "malformed": ["/p"],
         "meta": ["/tdm", "/tdm-off", "/bad", "/after-head"],
         "tdmfile": ["/reserved/a", "/reserved/lifted"], "tdmbad": ["/p"], "tdm5xx": ["/p"]}
#: pages linked from a page of the site and not from its home page (found only by parsing it)
LINKED = {("meta", "/tdm"): "/linked"}
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
    ("meta", "/"): [("Content-Usage", "train-ai=y")],
    ("meta", "/tdm-off"): [("tdm-reservation", "1")],
    ("tdmfile", "/reserved/lifted"): [("tdm-reservation", "0")],
}
#: what goes in the head of a page (its <meta> signals and decoys)
HEAD = {
    ("meta", "/"): ('<meta name="robots" content="noai, noimageai">'
                    "<META NAME=Owler CONTENT='noimageai'>"
                    '<meta name="otherbot" content="noai">'
                    "<!-- <meta name=tdm-reservation content=1> -->"
                    "<script>var m = '<meta name=tdm-reservation content=1>';</script>"),
    ("meta", "/tdm"): ('<meta content="1" NAME="TDM-Reservation">'
                       "<meta name=tdm-policy content='https://policy.example/t?a=1&amp;b=2'>"),
    ("meta", "/tdm-off"): '<meta name="tdm-reservation" content="0">',
    ("meta", "/bad"): '<meta name="tdm-reservation" content="yes">',
}
BODY_AFTER_HEAD = {("meta", "/after-head"): '<meta name="tdm-reservation" content="1">'}
TDM_FILES = {
    "tdmfile": json.dumps([
        {"location": "/reserved/", "tdm-reservation": 1,
         "tdm-policy": "https://policy.example/tdm.json"},
        {"location": "/", "tdm-reservation": 0}]).encode(),
    "tdmbad": b"{not json: [",
}


def html(site: str, path: str) -> bytes:
    """The page at ``path``: the hostile farm's page, its head and body given their signals."""
    links = PAGES[site] if path == "/" else ([LINKED[(site, path)]] if (site, path) in LINKED
                                             else [])
    doc = page(f"{site} {path}", links)
    head = HEAD.get((site, path))
    if head:
        doc = doc.replace(b"</head>", head.encode() + b"</head>", 1)
    late = BODY_AFTER_HEAD.get((site, path))
    if late:
        doc = doc.replace(b"<body>", b"<body>" + late.encode(), 1)
    return doc


def answer(site: str, path: str) -> bytes:
    if path == "/robots.txt":
        body = ROBOTS.get(site)
        return (response("200 OK", body, "text/plain") if body is not None
                else response("404 Not Found", ctype="text/plain"))
    if path == TDMREP and site in TDM_FILES:
        return response("200 OK", TDM_FILES[site], "application/json")
    if path == TDMREP and site == "tdm5xx":
        return response("500 Internal Server Error", b"oops", "text/plain")
    if path == "/" or path in PAGES[site] or path in LINKED.values() and site == "meta":
        return response("200 OK", html(site, path), extra=HEADERS.get((site, path)))
    if site == "meta":  # every other path a page, as some sites answer
        return response("200 OK", page("not found, but a page", []))
    return response("404 Not Found", ctype="text/plain")


class Farm:
    def __init__(self, log_path: str) -> None:
        self.log = open(log_path, "a", buffering=1)
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("sockname")[0]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            agent = next((line.split(":", 1)[1].strip() for line in lines[1:]
                          if line.lower().startswith("user-agent:")), "")
            self.log.write(json.dumps({"t": time.time(), "host": addr, "path": path,
                                       "ua": agent}) + "\n")
            site = {v: k for k, v in HOSTS.items()}[addr]
            writer.write(answer(site, path))
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
