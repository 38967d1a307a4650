"""The benchmark web farm: many loopback hosts serving realistic pages at negligible CPU cost.

Host i answers on its own address 127.0.{100 + i // 250}.{1 + i % 250}, all on one port. Every
host has a home page `/` and `--pages` pages `/s<k>/p<n>.html`; a page is 30-100 KB of HTML with
100-200 links: most to the same host (relative, absolute-path and absolute URLs, some with a
fragment), about 15 % to other hosts of the farm, and one or two under `/private/`, which every
host's robots.txt disallows. Everything is generated once at start-up from `--seed`, so two runs
with the same seed serve byte-identical webs, and a request costs a dictionary lookup and one
socket write (asyncio protocol, HTTP/1.1 keep-alive) - the crawler is measured, not the farm.

The farm counts what it serves: pages, robots.txt, requests for disallowed paths (a politeness
bug in the crawler), 404s, the same URL requested twice, bytes, and the times of the first and
last page. `GET /__stats` on any host returns them as JSON; SIGTERM writes them to `--stats`.

    python -m bench.farm --hosts 500 --pages 40 --seed 1 --stats stats.json
    (prints "READY <port>" once every host listens)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

SECTIONS = 8
EXTERNAL_SHARE = 0.15


def host_addr(i: int) -> str:
    return f"127.0.{100 + i // 250}.{1 + i % 250}"


def page_path(n: int) -> str:
    return f"/s{n % SECTIONS}/p{n}.html"


def _corpus(rng: random.Random, size: int = 1 << 21) -> str:
    """Words of a made-up language whose frequencies follow Zipf's law, as in real text (a uniform
    choice would compress worse and slower than any real page does)."""
    syllables = ["an", "be", "co", "da", "el", "fi", "go", "ha", "in", "jo", "ka", "lu", "me",
                 "no", "or", "pa", "qu", "ri", "sa", "te", "ul", "vi", "we", "xa", "yo", "ze"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
             for _ in range(20000)]
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    out = rng.choices(words, weights=weights, k=size // 6)
    for k in range(0, len(out), 17):
        out[k] = out[k] + "."
    return " ".join(out)


SCRIPT = ("<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}"
          "gtag('js',new Date());gtag('config','G-BENCHFARM');document.documentElement.className="
          "document.documentElement.className.replace('no-js','js');</script>")


class Web:
    """The pages of every host, as complete HTTP responses (bytes)."""

    def __init__(self, n_hosts: int, n_pages: int, seed: int, port: int):
        self.n_hosts, self.n_pages, self.seed, self.port = n_hosts, n_pages, seed, port
        self.corpus = _corpus(random.Random(seed))
        self.robots = _response(200, "text/plain",
                                b"User-agent: *\nDisallow: /private/\n")
        self.not_found = _response(404, "text/html", b"<html><body>not found</body></html>")
        self.private = _response(200, "text/html", b"<html><body>private</body></html>")
        self.pages: list[dict[bytes, bytes]] = [self._host(i) for i in range(n_hosts)]
        self.pass_no = 1
        self._changed: dict[tuple[int, bytes], bytes] = {}

    def revisit(self, host: int, path: bytes, resp: bytes, request_headers: bytes) -> bytes:
        """A page as a re-crawl sees it (``GET /__pass2`` starts the second pass): by a hash of
        its path, a quarter of the pages send an ETag and answer ``304`` to it, a quarter never
        change and send no validator, and half change in the second pass."""
        kind = zlib.crc32(path) % 4
        if kind == 0:
            tag = b'"%08x"' % zlib.crc32(path)
            if b"if-none-match: " + tag in request_headers.lower():
                return b"HTTP/1.1 304 Not Modified\r\nETag: " + tag + b"\r\n\r\n"
            head, _, body = resp.partition(b"\r\n\r\n")
            return head + b"\r\nETag: " + tag + b"\r\n\r\n" + body
        if kind == 1 or self.pass_no < 2:
            return resp
        changed = self._changed.get((host, path))
        if changed is None:
            head, _, body = resp.partition(b"\r\n\r\n")
            body = body.replace(b"</body>", b"<p>changed in pass 2</p></body>", 1)
            changed = self._changed[(host, path)] = _response(200, "text/html; charset=utf-8",
                                                              body)
        return changed

    def _text(self, rng: random.Random, n: int) -> str:
        start = rng.randrange(0, len(self.corpus) - n - 1)
        return self.corpus[start:start + n]

    def _link(self, rng: random.Random, i: int, n: int) -> str:
        roll = rng.random()
        if roll < EXTERNAL_SHARE and self.n_hosts > 1:
            j = rng.randrange(self.n_hosts - 1)
            j += j >= i
            return f"http://{host_addr(j)}:{self.port}{page_path(rng.randrange(self.n_pages))}"
        m = rng.randrange(self.n_pages)
        target = page_path(m)
        if roll < 0.55:  # relative to the current page
            if n >= 0 and m % SECTIONS == n % SECTIONS:
                rel = f"p{m}.html"
            else:
                rel = ".." + target if n >= 0 else target[1:]
            return rel + ("#part" if roll < 0.2 else "")
        if roll < 0.85:
            return target
        return f"http://{host_addr(i)}:{self.port}{target}"

    def _chrome(self, i: int) -> tuple[str, str]:
        """The header and footer every page of host i shares (markup-heavy, as real sites)."""
        rng = random.Random(self.seed * 7_919 + i)
        items = "".join(
            f'<li class="menu-item menu-item-type-post_type menu-item-object-page menu-item-{k}">'
            f'<a class="menu-link" href="{page_path(k * SECTIONS // 10 % max(self.n_pages, 1))}"'
            f' aria-label="{self._text(rng, 14).strip()}">{self._text(rng, 14).strip()}</a>'
            f'<ul class="sub-menu" aria-hidden="true"><li class="menu-item"><span class="menu-'
            f'text">{self._text(rng, 30)}</span></li></ul></li>' for k in range(10))
        header = (f'<header id="masthead" class="site-header" role="banner"><div class="header-'
                  f'inner container"><div class="site-branding"><p class="site-title"><a href="/"'
                  f' rel="home">{self._text(rng, 20)}</a></p></div><nav id="site-navigation" '
                  f'class="main-navigation" role="navigation" aria-label="Primary"><ul id="primary'
                  f'-menu" class="menu nav-menu">{items}<li class="menu-item"><a href="/private/'
                  f'account">account</a></li></ul></nav></div></header>')
        footer = ('<footer id="colophon" class="site-footer" role="contentinfo"><div class="footer'
                  '-widgets container">' + "".join(
                      f'<section class="widget widget_text"><h2 class="widget-title">'
                      f'{self._text(rng, 16)}</h2><div class="textwidget"><p>'
                      f'{self._text(rng, 200)}</p></div></section>' for _ in range(4))
                  + '</div><div class="site-info">generated by the benchmark farm</div></footer>')
        return header, footer

    def _page(self, i: int, n: int, chrome: tuple[str, str]) -> bytes:
        rng = random.Random(self.seed * 1_000_003 + i * 10_007 + n)
        size = rng.randint(30_000, 100_000)
        n_links = rng.randint(100, 200) - 11  # the header has 11
        title = self._text(rng, 40).strip()
        parts = [f'<!DOCTYPE html>\n<html lang="en" class="no-js"><head><meta charset="utf-8">'
                 f'<meta name="viewport" content="width=device-width, initial-scale=1">'
                 f"<title>{title}</title>"
                 f'<meta name="description" content="{self._text(rng, 120)}">'
                 f'<link rel="canonical" href="{page_path(n) if n >= 0 else "/"}">{SCRIPT}'
                 f'</head><body class="post-template-default single single-post">{chrome[0]}'
                 f'<main id="main" class="site-main"><article class="post type-post status-'
                 f'publish format-standard hentry"><h1 class="entry-title">{title}</h1>'
                 f'<div class="entry-content">']
        related = n_links // 3
        fixed = len(parts[0]) + len(chrome[0]) + len(chrome[1]) + 200
        text_budget = max(size - fixed - related * 200 - (n_links - related) * 120, 4000)
        per_link = text_budget // (n_links - related)
        for _ in range(n_links - related):
            parts.append(f'<div class="article-section"><p class="article-text">'
                         f"{self._text(rng, rng.randint(per_link // 2, per_link * 3 // 2))} "
                         f'<a class="inline-link" href="{self._link(rng, i, n)}">'
                         f"{self._text(rng, 24)}</a></p></div>\n")
        parts.append('</div></article><aside id="secondary" class="widget-area" role="'
                     'complementary"><section class="widget widget_recent_entries"><ul>')
        for _ in range(related):
            parts.append(f'<li class="recent-post"><div class="recent-post-inner"><a class="'
                         f'recent-post-link" href="{self._link(rng, i, n)}"><span class="'
                         f'recent-post-title">{self._text(rng, 30)}</span></a><span class="'
                         f'post-date">2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'
                         f"</span></div></li>\n")
        parts.append("</ul></section></aside></main>")
        if rng.random() < 0.5:
            parts.append('<p><a href="/private/hidden" rel="nofollow">hidden</a></p>')
        parts.append(f"{chrome[1]}</body></html>\n")
        return _response(200, "text/html; charset=utf-8", "".join(parts).encode())

    def _host(self, i: int) -> dict[bytes, bytes]:
        chrome = self._chrome(i)
        pages = {b"/": self._page(i, -1, chrome), b"/robots.txt": self.robots}
        for n in range(self.n_pages):
            pages[page_path(n).encode()] = self._page(i, n, chrome)
        return pages


def _response(status: int, ctype: str, body: bytes) -> bytes:
    reason = {200: "OK", 404: "Not Found"}[status]
    return (f"HTTP/1.1 {status} {reason}\r\nServer: benchfarm\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class Stats:
    def __init__(self) -> None:
        self.pages = self.robots = self.private = self.not_found = self.requests = 0
        self.duplicates = self.connections = 0
        self.bytes = 0
        self.first = self.last = 0.0
        self.per_second: dict[int, int] = {}
        self.seen: dict[tuple[int, bytes], float] = {}  # page -> when first served
        self.again: list[tuple[int, str, float, float]] = []  # the first 1,000 served again

    def as_dict(self) -> dict:
        return {"requests": self.requests, "pages": self.pages, "robots": self.robots,
                "private": self.private, "not_found": self.not_found,
                "duplicates": self.duplicates, "connections": self.connections,
                "bytes": self.bytes,
                "first_page": self.first, "last_page": self.last,
                "per_second": sorted(self.per_second.items())}


class Server(asyncio.Protocol):
    def __init__(self, web: Web, stats: Stats, addr_index: dict[str, int]):
        self.web, self.stats, self.addr_index = web, stats, addr_index
        self.buf = b""
        self.host = 0

    def connection_made(self, transport) -> None:
        self.stats.connections += 1
        self.transport = transport
        self.host = self.addr_index.get(transport.get_extra_info("sockname")[0], 0)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.transport.close()
                return
            head, self.buf = self.buf[:end], self.buf[end + 4:]
            line, _, headers = head.partition(b"\r\n")
            parts = line.split(b" ")
            path = parts[1] if len(parts) > 2 else b"/"
            self.transport.write(self.answer(path, headers))
            if b"connection: close" in headers.lower():
                self.transport.close()
                return

    def answer(self, path: bytes, headers: bytes = b"") -> bytes:
        st = self.stats
        if path == b"/__pass2":  # the second pass of a re-crawl begins: counts start again
            self.web.pass_no = 2
            st.__init__()
            return _response(200, "text/plain", b"pass 2\n")
        st.requests += 1
        if path == b"/__stats":
            return _response(200, "application/json", json.dumps(st.as_dict()).encode())
        if path == b"/__again":  # pages served twice: host, path, first and second time
            return _response(200, "application/json", json.dumps(st.again).encode())
        path = path.split(b"?", 1)[0]
        resp = self.web.pages[self.host].get(path)
        if resp is not None and path != b"/robots.txt":
            resp = self.web.revisit(self.host, path, resp, headers)
        now = time.time()
        if path.startswith(b"/private/"):
            st.private += 1
            resp = self.web.private
        elif path == b"/robots.txt":
            st.robots += 1
        elif resp is None:
            st.not_found += 1
            resp = self.web.not_found
        else:
            key = (self.host, path)
            first = st.seen.get(key)
            if first is not None:
                st.duplicates += 1
                if len(st.again) < 1000:
                    st.again.append((self.host, path.decode(), first, now))
            else:
                st.seen[key] = now
            st.pages += 1
            st.first = st.first or now
            st.last = now
            sec = int(now)
            st.per_second[sec] = st.per_second.get(sec, 0) + 1
        st.bytes += len(resp)
        return resp


async def serve(args) -> None:
    loop = asyncio.get_running_loop()
    stats = Stats()
    addrs = [host_addr(i) for i in range(args.hosts)]
    index = {a: i for i, a in enumerate(addrs)}
    port = args.port
    if not port:  # any free port that every host address can take
        with socket.socket() as s:
            s.bind((addrs[0], 0))
            port = s.getsockname()[1]
    t0 = time.time()
    web = Web(args.hosts, args.pages, args.seed, port)
    gen = time.time() - t0
    servers = []
    for a in addrs:
        servers.append(await loop.create_server(lambda: Server(web, stats, index), a, port,
                                                backlog=256, reuse_address=True))
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_signal_handler(signal.SIGINT, done.set)
    size = sum(len(b) for h in web.pages for b in h.values())
    print(f"READY {port} pages={args.hosts * (args.pages + 1)} bytes={size} "
          f"generated_in={gen:.1f}s", flush=True)
    await done.wait()
    for s in servers:
        s.close()
    if args.stats:
        Path(args.stats).write_text(json.dumps(stats.as_dict()))


class BenchFarm:
    """Run the farm in its own process (its CPU is not the crawler's)."""

    def __init__(self, hosts: int, pages: int, seed: int, stats_path: Path):
        self.hosts, self.pages, self.seed = hosts, pages, seed
        self.stats_path = Path(stats_path)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.info = ""

    def __enter__(self) -> "BenchFarm":
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.farm", "--hosts", str(self.hosts), "--pages",
             str(self.pages), "--seed", str(self.seed), "--stats", str(self.stats_path)],
            cwd=root, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(root)})
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            self.proc.kill()
            raise RuntimeError(f"the benchmark farm did not start: {line!r}")
        self.port = int(line.split()[1])
        self.info = line.strip()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> dict:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        return json.loads(self.stats_path.read_text()) if self.stats_path.exists() else {}

    def seeds(self) -> list[str]:
        return [f"http://{host_addr(i)}:{self.port}/" for i in range(self.hosts)]

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--pages", type=int, default=40, help="pages per host besides the home page")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--stats", default="")
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
