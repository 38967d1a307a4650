"""The bare crawl loop: asyncio, no Storm - the practical limit of this machine.

Does the work of the explorative crawl with the fastest sound libraries in the virtualenv, and
nothing else: aiohttp (keep-alive connection reuse) fetches, protego reads robots.txt, selectolax
(lexbor) finds the links, ada-url resolves and normalizes them, and the project's own
``owler.warc.storage.files.WARCWriter`` writes the same per-record-gzipped WARC files as the crawler
(a request and a response record per page, zlib level 6). Parsing and WARC writing run inline in
the event loop: what one Python process can do on its own. ``--workers N`` runs N such processes,
each owning the hosts whose CRC-32 falls to it (its own seen-set, queues and WARC partition) and
sending the URLs it finds for other hosts to their owner through a pipe, so a crawl whose limit
is the CPU and not politeness can use every core; the crawl ends when every worker is idle and
no URL is on its way. ``--no-warc`` archives nothing (the like-for-like peer of a crawl with
``warc.enabled: false`` and of StormCrawler without its WARC module).

Politeness, as the crawler's fetcher:
  - robots.txt is fetched once per origin (scheme://host:port), in the slot of the first URL of
    that origin, right before it (as StormCrawler's fetcher does); redirects followed (5 at most);
    2xx = the rules for ``--agent``, 4xx = allow all, 429/5xx/unreachable = skip the origin
    (its queued and future URLs are dropped). A Crawl-delay above ``--delay`` raises the host's
    delay; one above 30 s skips the origin (``fetcher.max.crawl.delay``).
  - at most one request in flight per host, and ``--delay`` seconds from the end of one request
    to the start of the next on the same host (robots.txt + the page count as one slot);
  - at most ``--concurrency`` requests in flight overall.

Frontier, in memory: a seen-set of URLs (every URL is queued at most once), a FIFO queue per
host, and a heap of (next allowed time, host) for the hosts that have work and nothing in flight;
the loop starts the hosts that are due, round-robin by time, and sleeps until the next one is.
Pages are not refetched and there is no depth limit: the crawl ends when nothing is queued or in
flight.

Per page: GET without following redirects; 200 + text/html → WARC request+response records, then
the links of ``a[href]`` and ``area[href]`` (``rel=nofollow`` skipped; resolved against the page
URL or its first ``<base href>``; fragment dropped; http/https only) are queued. Other 2xx are
archived but not parsed; a 3xx queues its Location; anything else counts as an error.

    python bench/crawl_bare.py --seeds SEEDS_FILE --out DIR [--delay 1.0] [--concurrency 50]
                               [--agent owler-bench] [--timeout 10] [--workers 1] [--no-warc]

``--concurrency`` is shared by the workers. Prints one JSON line on stdout at the end (pages, errors,
warc_bytes, seconds, robots and a few more counters summed over the workers, and their CPU
seconds); logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import heapq
import json
import logging
import multiprocessing as mp
import os
import queue
import resource
import sys
import time
import zlib
from collections import deque
from pathlib import Path

import ada_url
import aiohttp
from protego import Protego
from selectolax.lexbor import LexborHTMLParser

try:
    from owler.urls import host_of
    from owler.warc.storage.files import WARCWriter
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from owler.urls import host_of
    from owler.warc.storage.files import WARCWriter

log = logging.getLogger("crawl_bare")

MAX_CRAWL_DELAY = 30.0
ROBOTS_LIMIT = 524288  # RFC 9309: parse at least 500 KiB
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
LINKS = "a[href], area[href]"

_UNKNOWN = object()  # robots.txt of the origin not fetched yet
_ALLOW_ALL = object()
_DEAD = object()  # robots.txt unreachable / 5xx: the origin is skipped

_join = ada_url.join_url
_normalize = ada_url.normalize_url


def split_url(url: str) -> tuple[str, str] | None:
    """(origin, host) of a normalized http(s) URL (ada's serialization: the path starts with
    '/'); None for any other scheme. The host as the crawler's partitioner takes it."""
    if url.startswith("http://"):
        start = 7
    elif url.startswith("https://"):
        start = 8
    else:
        return None
    end = url.find("/", start)
    return (url if end < 0 else url[:end]), host_of(url)


_peer: contextvars.ContextVar[list] = contextvars.ContextVar("crawl_bare_peer")


class PeerConnector(aiohttp.TCPConnector):
    """Notes the peer IP of the connection a request gets in the caller's context: a small
    response is complete, and its connection released, before the caller can look at it."""

    async def connect(self, req, traces, timeout):  # type: ignore[override]
        conn = await super().connect(req, traces, timeout)
        slot = _peer.get(None)
        if slot is not None and conn.transport is not None:
            peer = conn.transport.get_extra_info("peername")
            slot[0] = peer[0] if peer else None
        return conn


class Mesh:
    """What the workers of one crawl share: who owns a host, a pipe into each worker (its inbox),
    and the counters that tell when the crawl is over. Built before the workers fork."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.inboxes = [os.pipe() for _ in range(n)]  # (read fd, write fd) per worker
        self.sent = mp.Value("q", 0)
        self.received = mp.Value("q", 0)
        self.idle = mp.Array("b", n)  # 0 until a worker has nothing queued, in flight or to send

    def owner(self, host: str) -> int:
        return zlib.crc32(host.encode()) % self.n

    def count_sent(self, n: int) -> None:
        with self.sent.get_lock():  # before the write: a URL is never received before it is sent
            self.sent.value += n

    def count_received(self, me: int, n: int) -> None:
        self.idle[me] = 0  # before the count: another worker must not see the crawl as over
        with self.received.get_lock():
            self.received.value += n

    def finished(self, me: int) -> bool:
        """Worker ``me`` is idle: is everyone, with no URL on its way? (A worker leaves idle only
        by receiving, which changes the counters read on both sides of the flags.)"""
        self.idle[me] = 1
        before = (self.sent.value, self.received.value)
        if before[0] != before[1] or not all(self.idle):
            return False
        return (self.sent.value, self.received.value) == before


class Inbox(asyncio.Protocol):
    """URLs other workers found for this worker's hosts, one per line."""

    def __init__(self, crawler: "BareCrawler") -> None:
        self.crawler = crawler
        self.rest = b""

    def data_received(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        if not lines:
            return
        c = self.crawler
        c.mesh.count_received(c.me, len(lines))
        seen = c.seen
        for line in lines:
            url = line.decode()
            if url not in seen:
                c.add(url)
        c.wake.set()


class Host:
    __slots__ = ("name", "queue", "next_time", "busy", "scheduled", "delay")

    def __init__(self, name: str, delay: float) -> None:
        self.name = name
        self.queue: deque[tuple[str, str]] = deque()  # (url, origin)
        self.next_time = 0.0
        self.busy = False
        self.scheduled = False
        self.delay = delay


class BareCrawler:
    def __init__(self, out: Path, delay: float, concurrency: int, agent: str,
                 timeout: float, gzip_level: int = 6, warc: bool = True,
                 mesh: Mesh | None = None, me: int = 0) -> None:
        self.delay = max(0.0, delay)
        self.concurrency = max(1, concurrency)
        self.agent = agent
        self.timeout = timeout
        self.writer = WARCWriter(out, prefix="BARE", partition=str(me), gzip_level=gzip_level,
                                 extra_info={"http-header-user-agent": agent}) if warc else None
        self.mesh, self.me = mesh, me
        self.outbox: dict[int, list[str]] = {}  # worker -> URLs of its hosts found here
        self.pipes: dict[int, asyncio.WriteTransport] = {}
        self.hosts: dict[str, Host] = {}
        self.robots: dict[str, object] = {}  # origin -> _UNKNOWN/_ALLOW_ALL/_DEAD/Protego
        self.seen: set[str] = set()
        self.heap: list[tuple[float, int, Host]] = []
        self.seq = 0
        self.inflight = 0
        self.wake: asyncio.Event | None = None
        self.session: aiohttp.ClientSession | None = None
        self.c = dict(pages=0, errors=0, robots=0, robots_errors=0, robots_denied=0,
                      skipped=0, redirects=0, not_html=0, links=0, queued=0)

    # -- frontier -------------------------------------------------------------------------------
    def add(self, url: str) -> None:
        """Queue a normalized URL if it was never seen (callers check the seen-set first when
        they can: that is the hot path)."""
        if url in self.seen:
            return
        parts = split_url(url)
        if parts is None:
            return
        self.seen.add(url)
        origin, name = parts
        if self.mesh is not None and (owner := self.mesh.owner(name)) != self.me:
            self.outbox.setdefault(owner, []).append(url)
            return
        if self.robots.get(origin) is _DEAD:
            self.c["skipped"] += 1
            return
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = Host(name, self.delay)
        host.queue.append((url, origin))
        self.c["queued"] += 1
        if not host.busy and not host.scheduled:
            self._schedule(host, max(time.monotonic(), host.next_time))

    def _send(self) -> None:
        """Hand the URLs found for other workers' hosts to them."""
        for owner, urls in self.outbox.items():
            if urls:
                self.mesh.count_sent(len(urls))
                self.pipes[owner].write(("\n".join(urls) + "\n").encode())
                urls.clear()

    async def _connect(self, loop) -> None:
        for i, (r, w) in enumerate(self.mesh.inboxes):
            if i == self.me:
                os.close(w)
                await loop.connect_read_pipe(lambda: Inbox(self), os.fdopen(r, "rb", 0))
            else:
                os.close(r)
                self.pipes[i] = (await loop.connect_write_pipe(
                    asyncio.Protocol, os.fdopen(w, "wb", 0)))[0]

    def _schedule(self, host: Host, when: float) -> None:
        self.seq += 1
        host.scheduled = True
        heapq.heappush(self.heap, (when, self.seq, host))

    def _next_url(self, host: Host) -> tuple[str, str] | None:
        """The host's next URL to fetch; URLs robots.txt denies or whose origin is dead are
        dropped on the way (no request is made for them)."""
        q = host.queue
        while q:
            url, origin = q.popleft()
            rules = self.robots.get(origin, _UNKNOWN)
            if rules is _UNKNOWN or rules is _ALLOW_ALL:
                return url, origin
            if rules is _DEAD:
                self.c["skipped"] += 1
            elif rules.can_fetch(url, self.agent):
                return url, origin
            else:
                self.c["robots_denied"] += 1
        return None

    # -- the loop -------------------------------------------------------------------------------
    async def run(self, seeds: list[str]) -> None:
        self.wake = asyncio.Event()
        t = self.timeout
        # no pool limit: the loop itself keeps `concurrency` requests in flight at most
        connector = PeerConnector(limit=0, limit_per_host=0,
                                  keepalive_timeout=max(15.0, 2 * self.delay + 5))
        self.session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=t, sock_connect=t, sock_read=t),
            headers={"User-Agent": self.agent, "Accept": ACCEPT,
                     "Accept-Language": "en-US,en;q=0.5"},
            raise_for_status=False, trust_env=False)
        loop = asyncio.get_running_loop()
        if self.mesh is not None:
            await self._connect(loop)
        for s in seeds:
            try:
                url = _normalize(s).partition("#")[0]
            except ValueError:
                log.warning("bad seed %r", s)
                continue
            self.add(url)
        heap, wake = self.heap, self.wake
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                now = time.monotonic()
                while heap and self.inflight < self.concurrency and heap[0][0] <= now:
                    host = heapq.heappop(heap)[2]
                    host.scheduled = False
                    nxt = self._next_url(host)
                    if nxt is None:
                        continue
                    host.busy = True
                    self.inflight += 1
                    task = loop.create_task(self._work(host, *nxt))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                wake.clear()
                timer = None
                if self.mesh is not None:
                    self._send()
                    if not heap and self.inflight == 0:
                        if self.mesh.finished(self.me):
                            break
                        timer = loop.call_later(0.05, wake.set)  # until a URL comes
                elif not heap and self.inflight == 0:
                    break
                if heap and self.inflight < self.concurrency:
                    timer = loop.call_later(max(0.0, heap[0][0] - now), wake.set)
                await wake.wait()
                if timer is not None:
                    timer.cancel()
        finally:
            for task in tasks:
                task.cancel()
            await self.session.close()
            if self.writer is not None:
                self.writer.close()

    async def _work(self, host: Host, url: str, origin: str) -> None:
        try:
            if self.robots.get(origin, _UNKNOWN) is _UNKNOWN:
                await self._fetch_robots(host, origin)
                rules = self.robots[origin]
                if rules is _DEAD:
                    self.c["skipped"] += 1
                    self._drop_dead(host, origin)
                    return
                if rules is not _ALLOW_ALL and not rules.can_fetch(url, self.agent):
                    self.c["robots_denied"] += 1
                    return
            await self._fetch_page(url)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one URL's failure is counted, not fatal
            self.c["errors"] += 1
            log.debug("%s: %s: %s", url, type(exc).__name__, exc)
        finally:
            host.busy = False
            self.inflight -= 1
            host.next_time = time.monotonic() + host.delay
            if host.queue:
                self._schedule(host, host.next_time)
            self.wake.set()

    def _drop_dead(self, host: Host, origin: str) -> None:
        keep = deque(item for item in host.queue if item[1] != origin)
        self.c["skipped"] += len(host.queue) - len(keep)
        host.queue = keep

    async def _fetch_robots(self, host: Host, origin: str) -> None:
        self.c["robots"] += 1
        status, body = None, b""
        try:
            async with self.session.get(origin + "/robots.txt", allow_redirects=True,
                                        max_redirects=5) as resp:
                status = resp.status
                if 200 <= status < 300:
                    body = await _read_limited(resp, ROBOTS_LIMIT)
                else:
                    await resp.read()  # drained: the connection goes back to the pool
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - unreachable: the origin is skipped
            log.debug("robots.txt of %s: %s: %s", origin, type(exc).__name__, exc)
        if status is None or status == 429 or status >= 500:
            self.c["robots_errors"] += 1
            self.robots[origin] = _DEAD
        elif 200 <= status < 300:
            rules = Protego.parse(body.decode("utf-8", "replace"))
            self.robots[origin] = rules
            crawl_delay = rules.crawl_delay(self.agent)
            if crawl_delay is not None and crawl_delay > MAX_CRAWL_DELAY:
                log.info("%s: Crawl-delay %s > %s s, skipped", origin, crawl_delay,
                         MAX_CRAWL_DELAY)
                self.robots[origin] = _DEAD
            elif crawl_delay is not None and crawl_delay > host.delay:
                host.delay = float(crawl_delay)
        else:  # 3xx left after 5 redirects, 4xx
            self.robots[origin] = _ALLOW_ALL

    async def _fetch_page(self, url: str) -> None:
        fetch_time = time.time()
        peer: list = [None]
        _peer.set(peer)  # this task's own context
        async with self.session.get(url, allow_redirects=False) as resp:
            status = resp.status
            body = await resp.read()
            if status >= 300:
                if status < 400 and (loc := resp.headers.get("Location")):
                    self.c["redirects"] += 1
                    try:
                        target = _join(url, loc.strip()).partition("#")[0]
                    except ValueError:
                        return
                    if target not in self.seen:
                        self.add(target)
                    return
                self.c["errors"] += 1
                return
            if status < 200:
                self.c["errors"] += 1
                return
            if self.writer is not None:
                info = resp.request_info
                request = "".join([f"GET {info.url.raw_path_qs or '/'} HTTP/1.1\r\n",
                                   *(f"{k}: {v}\r\n" for k, v in info.headers.items()),
                                   "\r\n"]).encode("latin-1", "replace")
                headers = [(k.decode("latin-1"), v.decode("latin-1"))
                           for k, v in resp.raw_headers]
                version = f"{resp.version.major}.{resp.version.minor}"
                status_line = f"HTTP/{version} {status} {resp.reason or ''}"
            ctype = resp.headers.get("Content-Type", "")
            charset = resp.charset
        if self.writer is not None:
            self.writer.write_exchange(url, fetch_time=fetch_time,
                                       request_line_and_headers=request,
                                       status_line=status_line.rstrip(),
                                       response_headers=headers, payload=body, ip=peer[0])
        self.c["pages"] += 1
        mime = ctype.partition(";")[0].strip().lower()
        if status != 200 or mime not in ("text/html", "application/xhtml+xml"):
            self.c["not_html"] += 1
            return
        self._links(url, body, charset)

    def _links(self, url: str, body: bytes, charset: str | None) -> None:
        if charset and charset.lower().replace("_", "-") not in ("utf-8", "utf8", "us-ascii",
                                                                   "ascii"):
            try:
                html: str | bytes = body.decode(charset, "replace")
            except LookupError:
                html = body
        else:
            html = body  # lexbor reads the bytes as UTF-8 itself
        tree = LexborHTMLParser(html)
        base = url
        node = tree.css_first("base[href]")
        if node is not None:
            try:
                base = _join(url, node.attrs.get("href") or "")
            except ValueError:
                pass
        seen, add, join = self.seen, self.add, _join
        hrefs: set[str] = set()  # an href met again on the same page resolves the same way
        n = 0
        for node in tree.css(LINKS):
            attrs = node.attrs
            href = attrs.get("href")
            if not href or href in hrefs:
                continue
            rel = attrs.get("rel")
            if rel and "nofollow" in rel.lower().split():
                continue
            hrefs.add(href)  # (after the nofollow test: a followed twin must still count)
            try:
                target = join(base, href)
            except ValueError:
                continue
            n += 1
            hash_at = target.find("#")
            if hash_at >= 0:
                target = target[:hash_at]
            if target not in seen:
                add(target)
        self.c["links"] += n


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """At most ``limit`` bytes of the body; a body cut short closes the connection (never
    returned half-read to the pool)."""
    if resp.content_length is not None and resp.content_length <= limit:
        return await resp.read()
    chunks, got = [], 0
    while got < limit:
        chunk = await resp.content.read(limit - got)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        got += len(chunk)
    if not resp.content.at_eof():
        resp.close()
    return b"".join(chunks)


def read_seeds(path: str) -> list[str]:
    """URLs of a seed file: one per line, StormCrawler's ``url<TAB>key=value…`` accepted (the
    metadata is ignored); blank lines and ``#`` comments skipped."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line.split("\t", 1)[0].strip())
    return out


def crawl(args, seeds: list[str], concurrency: int, mesh: Mesh | None = None,
          me: int = 0) -> dict:
    """One worker's crawl; its counters."""
    crawler = BareCrawler(Path(args.out), args.delay, concurrency, args.agent, args.timeout,
                          args.gzip_level, warc=not args.no_warc, mesh=mesh, me=me)
    asyncio.run(crawler.run(seeds))
    c = crawler.c
    return {"pages": c["pages"], "errors": c["errors"],
            "warc_bytes": crawler.writer.stats.bytes if crawler.writer is not None else 0,
            "robots": c["robots"], "robots_errors": c["robots_errors"],
            "robots_denied": c["robots_denied"], "skipped": c["skipped"],
            "redirects": c["redirects"], "not_html": c["not_html"],
            "urls_seen": len(crawler.seen), "links_resolved": c["links"],
            "hosts": len(crawler.hosts),
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _worker(args, seeds: list[str], concurrency: int, mesh: Mesh, me: int, done) -> None:
    try:
        done.put(crawl(args, seeds, concurrency, mesh, me))
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        done.put({"error": f"worker {me}: {type(exc).__name__}: {exc}"})
        raise


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", required=True, help="seed file (- for stdin)")
    ap.add_argument("--out", required=True, help="directory for the WARC files")
    ap.add_argument("--delay", type=float, default=1.0,
                    help="seconds between the end of a request and the next on the same host")
    ap.add_argument("--concurrency", type=int, default=50, help="requests in flight at most")
    ap.add_argument("--agent", default="owler-bench", help="User-Agent and robots.txt agent")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    ap.add_argument("--gzip-level", type=int, default=6,
                    help="zlib level of the WARC records (the crawler's warc.gzip.level: 6)")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes, each owning the hosts that hash to it")
    ap.add_argument("--no-warc", action="store_true", help="archive nothing")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    seeds = read_seeds(args.seeds)
    workers = max(1, args.workers)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    if workers == 1:
        results = [crawl(args, seeds, args.concurrency)]
    else:
        mesh = Mesh(workers)
        ctx = mp.get_context("fork")
        done = ctx.Queue()
        share = -(-args.concurrency // workers)
        procs = [ctx.Process(target=_worker, args=(args, seeds, share, mesh, i, done))
                 for i in range(workers)]
        for proc in procs:
            proc.start()
        for fds in mesh.inboxes:
            for fd in fds:
                os.close(fd)
        results = []
        while len(results) < workers:
            try:
                results.append(done.get(timeout=1.0))
            except queue.Empty:
                if any(proc.exitcode for proc in procs):  # died before it could say why
                    raise SystemExit(f"a worker died: exit codes "
                                     f"{[proc.exitcode for proc in procs]}") from None
        for proc in procs:
            proc.join()
        if any(proc.exitcode for proc in procs) or any("error" in r for r in results):
            raise SystemExit(f"a worker failed: {[r.get('error') for r in results]}")
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum((b.ru_utime - a.ru_utime) + (b.ru_stime - a.ru_stime)
              for a, b in ((r0, r1), (c0, c1)))
    res = {k: sum(r[k] for r in results) for k in results[0] if k != "max_rss_mb"}
    res.update(seconds=round(wall, 3), workers=workers, cpu_seconds=round(cpu, 3),
               max_rss_mb=round(sum(r["max_rss_mb"] for r in results), 1))
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
