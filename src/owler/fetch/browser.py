"""The browser protocol: pages built by scripts, rendered in Debian's headless Chromium
(``chromium-headless-shell``) over the DevTools protocol, every byte the page loads fetched by
the crawler itself (issue 48).

Why the browser fetches nothing itself. Chromium is started with the DevTools protocol on a pipe
(``--remote-debugging-pipe``: file descriptors 3 and 4, no listening socket anybody on the host
could reach), and each page is opened with the ``Fetch`` domain intercepting every request at its
request stage. The crawler answers each one:

- the page's own document with the response :class:`owler.fetch.http.HttpFetcher` already got
  (the fetch engine's request, archived as today): no second request, and what was archived is
  what was rendered;
- images, media and fonts (``browser.block.types``) are failed (``BlockedByClient``) without a
  request: a crawler reads text and links, and they are most of a page's bytes;
- every other request the page makes (scripts, style sheets, ``fetch()``/XHR, frames) through
  the same :class:`HttpFetcher`, so through its SSRF guard (:class:`owler.fetch.http.AddressGuard`,
  ``http.allowed.networks``: a script asking for a private address gets ``AddressUnreachable``),
  after its host's robots.txt (:class:`owler.fetch.robots.RobotsSource`, the engine's cache) and
  with a politeness of its own (below); a method other than GET, a scheme other than http(s),
  and a second navigation of the page's main frame are failed too. Each refusal is noted in the
  page's metadata (``browser.refused``: the cause, then the URL).

As a belt to those braces, the browser's own network stack is pointed at a dead end
(``--proxy-server`` on the discard port of loopback, loopback included, and every host name
mapped to "not found"), so a request the interception would miss (a WebSocket, a pre-connect)
fails instead of reaching the network.

Politeness of the page's requests: the page's own queue is busy while it renders (the engine
holds its turn), so no other fetch of this task reaches its host meanwhile; its requests go to
each host one at a time, ``browser.resource.delay`` seconds apart (per fetcher task), and the
scripts and style sheets answered with 200 are kept for ``browser.cache.ttl`` seconds
(``browser.cache.entries`` of them, :data:`CACHE_MAX_BYTES` at most), so that the pages of one
single-page application do not ask for its bundle again and again. Their bodies are cut at
``http.content.limit`` as any response's.

A page's time (``browser.page.budget`` seconds, 10): the page is rendered until its load event
fired and no request of it was pending for ``browser.idle`` seconds (0.5) — ``browser.end=idle``
— or until its budget ran out, ``browser.end=budget`` with the cause in ``browser.end.detail``
(no load event; requests still pending; the page's scripts still running, stopped with
``Runtime.terminateExecution`` so that the DOM can be read). The DOM as it stands then is the
page's rendered content either way; a page whose DOM could not be read at all (a crashed
renderer) is ``browser.end=failed`` and the raw response alone is kept.

Pool: at most ``browser.pages`` pages render at once (a semaphore; a page waits for a slot
inside its queue's turn); each page is a target of its own in a browser context of its own
(cookies, storage, caches of one page never seen by the next), disposed of when it is done. The
browser is started on the first page that needs it (a crawl that never routes a page to it
starts no browser and costs nothing more per page) and again after it died; it is stopped with
the engine. ``browser.executable`` names the binary (``chromium-headless-shell``, installed by
``make setup``), ``browser.args`` adds flags, ``browser.sandbox`` (false: Chromium's sandbox
needs user namespaces that containers often lack) keeps Chromium's sandbox on.

Outcome (:class:`Rendered`): the DOM serialised as HTML (UTF-8; cut at ``browser.dom.limit``
characters, 8 Mi, noted in ``browser.end.detail``: a script can build a DOM of any size, and
a DOM over :data:`MAX_MESSAGE` is not read at all), how the render ended, the requests
answered, blocked and refused. :func:`note` writes it into the page's metadata: the
``browser.*`` keys and the transient ``_raw.rendered`` (:data:`owler.wire.RAW_RENDERED`), which
the fetcher's archiver writes as a ``conversion`` record referring to the response
(:mod:`owler.warc.storage.files`), and :func:`for_parser` turns into the content the parser reads
(outlinks, title, text, parse filters: all from the rendered DOM).

Routing (StormCrawler's ``DelegatorProtocol``): :class:`Router`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Mapping

from owler import conf as C
from owler import wire
from owler.constants import BROWSER_END as END
from owler.constants import FETCH_WITH
from owler.fetch.http import user_agent
from owler.signals import MD_WITHHELD
from owler.signals.head import is_html

log = logging.getLogger(__name__)

BROWSER = "chromium-headless-shell"

# ---- configuration keys ----------------------------------------------------------------------
EXECUTABLE_KEY = "browser.executable"
ARGS_KEY = "browser.args"
SANDBOX_KEY = "browser.sandbox"
PAGES_KEY = "browser.pages"
BUDGET_KEY = "browser.page.budget"
IDLE_KEY = "browser.idle"
BLOCK_TYPES_KEY = "browser.block.types"
RESOURCE_DELAY_KEY = "browser.resource.delay"
CACHE_TTL_KEY = "browser.cache.ttl"
CACHE_ENTRIES_KEY = "browser.cache.entries"
DOM_LIMIT_KEY = "browser.dom.limit"
DELEGATOR_KEY = "protocol.delegator.config"

# ---- metadata keys -----------------------------------------------------------------------------
END_DETAIL = "browser.end.detail"
REQUESTS = "browser.requests"
BLOCKED = "browser.blocked"
REFUSED = "browser.refused"
RENDER_MS = "browser.render.ms"
#: every key :func:`note` writes (a fetch without the browser removes them: nothing stale)
KEYS = (END, END_DETAIL, REQUESTS, BLOCKED, REFUSED, RENDER_MS)
#: the most refusals noted per page
MAX_NOTED = 20

DEFAULT_BLOCK_TYPES = ("Image", "Media", "Font")
#: the longest DevTools message read: a page whose DOM is longer takes its browser down with it
#: (the browser is started again for the next page), rather than the fetcher's memory
MAX_MESSAGE = 64 << 20
#: the most bytes of bodies the cache of one fetcher task holds
CACHE_MAX_BYTES = 64 << 20
#: resource types kept in the cache when answered with 200
CACHED_TYPES = frozenset({"Script", "Stylesheet"})
#: response headers not handed to the browser: the body it gets is decoded and whole
_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding",
                              "connection", "keep-alive"})
#: StormCrawler's class names of its browser protocols and of its HTTP ones
BROWSER_CLASSES = frozenset({
    "browser", "owler.fetch.browser",
    "org.apache.stormcrawler.protocol.playwright.HttpProtocol",
    "com.digitalpebble.stormcrawler.protocol.selenium.RemoteDriverProtocol",
    "org.apache.stormcrawler.protocol.selenium.RemoteDriverProtocol"})
HTTP_CLASSES = frozenset({"http", "owler.fetch.http",
                          "org.apache.stormcrawler.protocol.okhttp.HttpProtocol",
                          "org.apache.stormcrawler.protocol.httpclient.HttpProtocol",
                          "com.digitalpebble.stormcrawler.protocol.okhttp.HttpProtocol",
                          "com.digitalpebble.stormcrawler.protocol.httpclient.HttpProtocol"})


class BrowserError(RuntimeError):
    """The browser could not be started or stopped answering (the page gets ``FETCH_ERROR``
    ``browser``)."""


# ---- routing -----------------------------------------------------------------------------------

@dataclass(slots=True)
class Route:
    protocol: str  # "browser" | "http"
    filters: tuple[tuple[str, str], ...] = ()
    patterns: tuple[re.Pattern, ...] = ()
    any_of: bool = False  # operator OR

    def matches(self, url: str, md: Mapping[str, list[str]]) -> bool:
        tests = []
        for key, value in self.filters:
            values = md.get(key)
            tests.append(bool(values) if value == "" else bool(values) and value in values)
        if self.patterns:
            tests.append(any(p.search(url) for p in self.patterns))
        if not tests:
            return True
        return any(tests) if self.any_of else all(tests)


class Router:
    """Which protocol fetches a URL, as StormCrawler's ``DelegatorProtocol`` decides it:
    ``protocol.delegator.config`` is a list of entries tried in order, the first that matches
    wins, and the last has no condition (the default)::

        protocol.delegator.config:
          - className: browser            # or StormCrawler's Playwright class name
            filters: {"fetch.with": "browser"}   # metadata key -> value ("" = key present)
            regex: ["^https?://spa\\\\.example\\\\.org/"]   # URL patterns (re.search)
            operator: OR                  # filters and patterns: AND (default) or OR
          - className: http

    ``className`` is ``browser`` (or ``owler.fetch.browser``, or StormCrawler's Playwright or
    Selenium protocol class) or ``http`` (``owler.fetch.http``, StormCrawler's OkHttp or
    HttpClient class). Unset or empty: every URL is fetched over HTTP. :class:`ConfError` for an
    entry it cannot read or a last entry with conditions (StormCrawler refuses it too)."""

    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes
        self.uses_browser = any(r.protocol == "browser" for r in routes)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "Router":
        raw = conf.get(DELEGATOR_KEY)
        if raw in (None, "", []):
            return cls([])
        if not isinstance(raw, list):
            raise C.ConfError(f"{DELEGATOR_KEY}: expected a list of entries, got {raw!r:.200}")
        routes = []
        for i, entry in enumerate(raw):
            where = f"{DELEGATOR_KEY}[{i}]"
            if not isinstance(entry, Mapping):
                raise C.ConfError(f"{where}: expected a mapping, got {entry!r:.200}")
            name = str(entry.get("className") or "")
            if name in BROWSER_CLASSES:
                protocol = "browser"
            elif name in HTTP_CLASSES:
                protocol = "http"
            else:
                raise C.ConfError(f"{where}: className {name!r} is neither a browser protocol "
                                  f"({', '.join(sorted(BROWSER_CLASSES))}) nor an HTTP one")
            filters = entry.get("filters") or {}
            if not isinstance(filters, Mapping):
                raise C.ConfError(f"{where}.filters: expected a mapping, got {filters!r:.200}")
            regex = entry.get("regex") or entry.get("urlPatterns") or []
            if isinstance(regex, str):
                regex = [regex]
            try:
                patterns = tuple(re.compile(str(p)) for p in regex)
            except re.error as exc:
                raise C.ConfError(f"{where}.regex: {exc}") from None
            op = str(entry.get("operator") or "AND").upper()
            if op not in ("AND", "OR"):
                raise C.ConfError(f"{where}.operator: expected AND or OR, got {op!r}")
            routes.append(Route(protocol, tuple((str(k), "" if v is None else str(v))
                                                for k, v in filters.items()),
                                patterns, op == "OR"))
        if routes[-1].filters or routes[-1].patterns:
            raise C.ConfError(f"{DELEGATOR_KEY}: the last entry must have no filters and no "
                              "regex: it is the default")
        return cls(routes)

    def protocol(self, url: str, md: Mapping[str, list[str]]) -> str:
        for route in self.routes:
            if route.matches(url, md):
                return route.protocol
        return "http"


def check_conf(conf: Mapping[str, Any]) -> None:
    """Raise :class:`ConfError` for browser keys that would stop a fetcher (before Storm)."""
    Router.from_conf(conf)
    _block_types(conf)


def _block_types(conf: Mapping[str, Any]) -> frozenset[str]:
    raw = conf.get(BLOCK_TYPES_KEY)
    if raw is None:
        return frozenset(DEFAULT_BLOCK_TYPES)
    if isinstance(raw, str):
        raw = [t for t in re.split(r"[,\s]+", raw) if t]
    if not isinstance(raw, list):
        raise C.ConfError(f"{BLOCK_TYPES_KEY}: expected a list of resource types, got {raw!r}")
    return frozenset(str(t) for t in raw)


# ---- the outcome -------------------------------------------------------------------------------

@dataclass(slots=True)
class Rendered:
    dom: str | None  # the DOM serialised as HTML; None when it could not be read
    end: str  # "idle" | "budget" | "failed"
    detail: str = ""
    requests: int = 0  # answered through the crawler's fetcher (or its cache)
    blocked: int = 0  # failed by type (browser.block.types)
    refused: list[str] = field(default_factory=list)  # "cause url", in order
    elapsed: float = 0.0


def note(md: dict, rendered: Rendered) -> None:
    """Write the render's outcome into a page's metadata: ``browser.end`` (and
    ``browser.end.detail``), ``browser.requests``, ``browser.blocked``, ``browser.refused``
    (at most :data:`MAX_NOTED`), ``browser.render.ms``, and the DOM as ``_raw.rendered``."""
    for key in KEYS:
        md.pop(key, None)
    md[END] = [rendered.end]
    if rendered.detail:
        md[END_DETAIL] = [rendered.detail]
    md[REQUESTS] = [str(rendered.requests)]
    md[BLOCKED] = [str(rendered.blocked)]
    if rendered.refused:
        md[REFUSED] = rendered.refused[:MAX_NOTED]
    md[RENDER_MS] = [str(round(rendered.elapsed * 1000))]
    if rendered.dom is not None:
        md[wire.RAW_RENDERED] = [rendered.dom]


def forget(md: dict) -> None:
    """Remove what an earlier render noted (a fetch that is not rendered keeps nothing of it)."""
    for key in KEYS:
        md.pop(key, None)
    md.pop(wire.RAW_RENDERED, None)


def for_parser(payload: bytes, md: dict) -> tuple[bytes, dict]:
    """What the parser gets of a fetched page: for a rendered one, the rendered DOM (UTF-8,
    behind a byte order mark, which outweighs any charset the response or a ``<meta>`` of the
    DOM declares: the DOM is text already decoded) with the response's headers but its
    Content-Type said to be ``text/html; charset=utf-8``, and ``_raw.rendered`` removed (it has
    been archived; it need not cross Storm twice). Any other page unchanged."""
    dom = md.get(wire.RAW_RENDERED)
    if not dom:
        return payload, md
    md = dict(md)
    del md[wire.RAW_RENDERED]
    headers = [(k, v) for k, v in wire.decode_headers(md.get(wire.RAW_HEADERS))
               if k.lower() not in ("content-type", "content-length", "content-encoding")]
    headers.append(("Content-Type", "text/html; charset=utf-8"))
    md[wire.RAW_HEADERS] = wire.encode_headers(headers)
    return b"\xef\xbb\xbf" + dom[0].encode("utf-8", "surrogatepass"), md


# ---- the DevTools connection -------------------------------------------------------------------

class _Connection:
    """The DevTools protocol over Chromium's pipe: JSON messages ended by a NUL byte, commands
    answered by id, events dispatched to the handler of their session."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self.handlers: dict[str, Any] = {}  # session id -> callable(method, params)
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    async def send(self, method: str, params: dict | None = None, session: str | None = None,
                   timeout: float = 10.0) -> dict:
        if self.closed.is_set():
            raise BrowserError("the browser is gone")
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = fut
        self.writer.write(json.dumps(msg).encode() + b"\0")
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(msg["id"], None)

    async def _read(self) -> None:
        try:
            while True:
                raw = await self.reader.readuntil(b"\0")
                msg = json.loads(raw[:-1])
                if "id" in msg:
                    fut = self._pending.get(msg["id"])
                    if fut is not None and not fut.done():
                        if "error" in msg:
                            fut.set_exception(BrowserError(
                                f"{msg['error'].get('message')} ({msg['error'].get('code')})"))
                        else:
                            fut.set_result(msg.get("result") or {})
                    continue
                handler = self.handlers.get(msg.get("sessionId", ""))
                if handler is not None:
                    handler(msg.get("method", ""), msg.get("params") or {})
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a message we cannot read: the browser is unusable
            log.exception("DevTools connection failed")
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(BrowserError("the browser is gone"))

    def close(self) -> None:
        self._task.cancel()
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001
            pass


class _Browser:
    """One Chromium process and its DevTools pipe."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        exe = C.get_str(conf, EXECUTABLE_KEY, BROWSER) or BROWSER
        self.exe = shutil.which(exe)
        if not self.exe:
            raise BrowserError(f"{exe} not found (browser.executable; make setup installs "
                               f"{BROWSER})")
        extra = conf.get(ARGS_KEY) or []
        self.extra = [str(a) for a in (extra.split() if isinstance(extra, str) else extra)]
        self.sandbox = C.get_bool(conf, SANDBOX_KEY, False)
        self.proc: subprocess.Popen | None = None
        self.conn: _Connection | None = None
        self.profile: str | None = None

    async def start(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="owler-browser-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        args = [f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
                "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-background-networking",
                "--disable-component-update", "--disable-default-apps", "--disable-sync",
                "--disable-extensions", "--mute-audio", "--hide-scrollbars",
                "--window-size=1280,2000",
                # the dead end for anything the interception would miss (module docstring)
                "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                *([] if self.sandbox else ["--no-sandbox"]), *self.extra, "about:blank"]
        # fds 3 and 4 are where Chromium reads and writes the protocol: bash puts them there (a
        # POSIX shell need not move descriptors above 9)
        script = (f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} '
                  f'{to_browser_r}<&- {from_browser_w}>&-')
        self.errlog = open(os.path.join(self.profile, "stderr.log"), "wb")
        try:
            self.proc = subprocess.Popen(["/bin/bash", "-c", script, self.exe, *args],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=self.errlog,
                                         pass_fds=(to_browser_r, from_browser_w))
        finally:
            os.close(to_browser_r)
            os.close(from_browser_w)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_MESSAGE, loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                     os.fdopen(from_browser_r, "rb", 0))
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(to_browser_w, "wb", 0))
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self.conn = _Connection(reader, writer)
        try:
            self.version = (await self.conn.send("Browser.getVersion", timeout=30)).get(
                "product", "?")
        except Exception as exc:
            tail = self._stderr_tail()
            await self.close()
            raise BrowserError(f"{self.exe} did not answer on its DevTools pipe: {exc}; {tail}")
        log.info("browser started: %s (pid %d)", self.version, self.proc.pid)

    def _stderr_tail(self) -> str:
        try:
            with open(os.path.join(self.profile, "stderr.log"), "rb") as f:
                return f.read()[-500:].decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return (self.proc is not None and self.proc.poll() is None and self.conn is not None
                and not self.conn.closed.is_set())

    async def close(self) -> None:
        if self.conn is not None:
            try:
                await self.conn.send("Browser.close", timeout=2)
            except Exception:  # noqa: BLE001 - killed below
                pass
            self.conn.close()
        if self.proc is not None:
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "errlog", None) is not None:
            self.errlog.close()
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)


# ---- rendering ---------------------------------------------------------------------------------

class _Page:
    """One page's render: its target, its session's events, its intercepted requests."""

    def __init__(self, owner: "BrowserFetcher", url: str, main_response) -> None:
        self.owner, self.url, self.main = owner, url, main_response
        self.conn = owner._browser.conn
        self.session = ""
        self.main_frame: str | None = None
        self.main_answered = False
        self.loaded = asyncio.Event()
        self.pending: set[asyncio.Task] = set()
        self._side: set[asyncio.Task] = set()  # not requests: they do not keep the page busy
        self.last_activity = time.monotonic()
        self.out = Rendered(None, "idle")
        self.crashed = False

    def on_event(self, method: str, params: dict) -> None:
        if method == "Fetch.requestPaused":
            task = asyncio.create_task(self._answer(params))
            self.pending.add(task)
            self.last_activity = time.monotonic()
            task.add_done_callback(self._done)
        elif method == "Page.loadEventFired":
            self.loaded.set()
        elif method == "Page.javascriptDialogOpening":  # alert() would stop the page
            task = asyncio.create_task(self._send("Page.handleJavaScriptDialog",
                                                  {"accept": False}))
            self._side.add(task)  # (a task nothing refers to may be collected unfinished)
            task.add_done_callback(self._side.discard)
        elif method in ("Inspector.targetCrashed", "Inspector.detached"):
            self.crashed = True
            self.loaded.set()

    def _done(self, task: asyncio.Task) -> None:
        self.pending.discard(task)
        self.last_activity = time.monotonic()
        if not task.cancelled() and task.exception() is not None:
            log.debug("answering a request of %s failed: %r", self.url, task.exception())

    async def _send(self, method: str, params: dict | None = None, timeout: float = 10.0):
        return await self.conn.send(method, params, self.session, timeout)

    def _refuse(self, cause: str, url: str) -> None:
        self.out.refused.append(f"{cause} {url}")

    async def _fail(self, rid: str, reason: str) -> None:
        await self._send("Fetch.failRequest", {"requestId": rid, "errorReason": reason})

    async def _fulfil(self, rid: str, status: int, reason: str | None, headers, body: bytes):
        await self._send("Fetch.fulfillRequest", {
            "requestId": rid, "responseCode": status,
            "responsePhrase": reason or "OK",
            "responseHeaders": [{"name": k, "value": v} for k, v in headers
                                if k.lower() not in _DROPPED_HEADERS],
            "body": base64.b64encode(body).decode("ascii")})

    async def _answer(self, params: dict) -> None:
        """Answer one intercepted request (module docstring); a failure of our own fails the
        request rather than leave the page waiting for it until its budget."""
        try:
            await self._answer_request(params)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the page goes on without this request
            url = (params.get("request") or {}).get("url", "")
            self._refuse(f"exception:{type(exc).__name__}", url)
            try:
                await self._fail(params["requestId"], "Failed")
            except Exception:  # noqa: BLE001 - the page itself is gone
                pass

    async def _answer_request(self, params: dict) -> None:
        rid = params["requestId"]
        req = params.get("request") or {}
        url = req.get("url", "")
        rtype = params.get("resourceType", "Other")
        owner = self.owner
        if rtype == "Document" and params.get("frameId") == self.main_frame:
            if self.main_answered:  # a script sending the page elsewhere: not followed
                self._refuse("navigation", url)
                await self._fail(rid, "Aborted")
                return
            self.main_answered = True
            m = self.main
            await self._fulfil(rid, m.status, m.reason, m.headers, m.content)
            return
        if rtype in owner.block_types:
            self.out.blocked += 1
            await self._fail(rid, "BlockedByClient")
            return
        if not url.startswith(("http://", "https://")):
            self._refuse("scheme", url)
            await self._fail(rid, "BlockedByClient")
            return
        if req.get("method", "GET") != "GET":
            self._refuse(f"method:{req.get('method')}", url)
            await self._fail(rid, "BlockedByClient")
            return
        cached = owner._cache_get(url)
        if cached is None:
            try:
                rules = await owner.robots.rules_for(url)
            except ValueError:
                self._refuse("malformed", url)
                await self._fail(rid, "BlockedByClient")
                return
            if not rules.allowed(url):
                refused = owner.http.refuses(url, names=True)
                self._refuse("private_address" if refused else "robots.txt", url)
                await self._fail(rid, "AddressUnreachable" if refused else "BlockedByClient")
                return
            accept = next((v for k, v in (req.get("headers") or {}).items()
                           if k.lower() == "accept"), None)
            res = await owner._polite_fetch(url, {"Accept": accept} if accept else None)
            if res.status is None:
                cause = res.error_cause or "exception"
                self._refuse(cause, url)
                await self._fail(rid, "AddressUnreachable" if cause == "private_address"
                                 else "TimedOut" if cause == "timeout" else "Failed")
                return
            cached = (res.status, res.reason, res.headers, res.content)
            if res.status == 200 and rtype in CACHED_TYPES:
                owner._cache_put(url, cached)
        self.out.requests += 1
        log.debug("answered %s %s: %s", rtype, url, cached[0])
        await self._fulfil(rid, *cached)

    async def run(self, budget: float, idle: float) -> Rendered:
        t0 = time.monotonic()
        deadline = t0 + budget
        conn = self.conn
        ctx = (await conn.send("Target.createBrowserContext", {"disposeOnDetach": True}))[
            "browserContextId"]
        target = None
        try:
            target = (await conn.send("Target.createTarget", {
                "url": "about:blank", "browserContextId": ctx}))["targetId"]
            self.session = (await conn.send("Target.attachToTarget", {
                "targetId": target, "flatten": True}))["sessionId"]
            conn.handlers[self.session] = self.on_event
            await self._send("Fetch.enable", {"patterns": [{"urlPattern": "*",
                                                            "requestStage": "Request"}]})
            await self._send("Page.enable")
            await self._send("Emulation.setUserAgentOverride",
                             {"userAgent": self.owner.agent})
            # the main frame known before the navigation: its document is the fetched one
            tree = await self._send("Page.getFrameTree")
            self.main_frame = tree["frameTree"]["frame"]["id"]
            nav = asyncio.create_task(self._send("Page.navigate", {"url": self.url},
                                                 timeout=budget))
            end, detail = await self._wait(nav, deadline, idle)
            self.out.end, self.out.detail = end, detail
            self.out.dom = await self._dom()
            limit = self.owner.dom_limit
            if self.out.dom is not None and 0 <= limit < len(self.out.dom):
                self.out.detail = (self.out.detail + "; " if self.out.detail else "") + \
                    f"the DOM cut at {limit} of its {len(self.out.dom)} characters"
                self.out.dom = self.out.dom[:limit]
            if self.out.dom is None:
                self.out.end = "failed"
                self.out.detail = (self.out.detail + "; " if self.out.detail else "") + \
                    "the DOM could not be read"
        finally:
            for task in list(self.pending):
                task.cancel()
            conn.handlers.pop(self.session, None)
            if target is not None:
                try:
                    await conn.send("Target.closeTarget", {"targetId": target}, timeout=5)
                except Exception:  # noqa: BLE001 - disposed with its context below
                    pass
            try:
                await conn.send("Target.disposeBrowserContext", {"browserContextId": ctx},
                                timeout=5)
            except Exception:  # noqa: BLE001 - the browser is restarted if it is gone
                pass
        self.out.elapsed = time.monotonic() - t0
        return self.out

    async def _wait(self, nav: asyncio.Task, deadline: float, idle: float) -> tuple[str, str]:
        """Until the load event fired and no request was pending for ``idle`` seconds, or the
        deadline: ("idle", "") or ("budget", why)."""
        while True:
            now = time.monotonic()
            if self.crashed:
                return "failed", "the page's renderer crashed"
            if (self.loaded.is_set() and not self.pending
                    and now - self.last_activity >= idle):
                return "idle", ""
            if now >= deadline:
                break
            if nav.done() and not nav.cancelled() and nav.exception() is None:
                err = nav.result().get("errorText")
                if err:
                    return "failed", f"navigation failed: {err}"
            try:
                await asyncio.wait_for(self.loaded.wait(), min(0.05, deadline - now))
            except asyncio.TimeoutError:
                pass
            if self.loaded.is_set():
                await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        if not nav.done():
            nav.cancel()
        if not self.loaded.is_set():
            return "budget", "no load event within the budget (scripts or requests still running)"
        return "budget", (f"{len(self.pending)} requests still pending at the end of the budget"
                          if self.pending else "requests still being made at the end of the "
                          "budget")

    async def _dom(self) -> str | None:
        """The DOM serialised (doctype included); a page whose scripts hold its thread is
        stopped first (``Runtime.terminateExecution``), noted in the detail."""
        for attempt in range(2):
            try:
                doc = await self._send("DOM.getDocument", timeout=2.0)
                html = await self._send("DOM.getOuterHTML",
                                        {"nodeId": doc["root"]["nodeId"]}, timeout=5.0)
                return html.get("outerHTML")
            except (asyncio.TimeoutError, BrowserError):
                if attempt or self.crashed:
                    return None
                try:
                    await self._send("Runtime.terminateExecution", timeout=2.0)
                except (asyncio.TimeoutError, BrowserError):
                    return None
                self.out.end = "budget"
                self.out.detail = ((self.out.detail + "; ") if self.out.detail else "") + \
                    "its scripts never finished: stopped"
        return None


def wants_render(md: Mapping[str, list[str]], res) -> bool:
    """Whether a fetched page routed to the browser is rendered: a 2xx answer but 304 whose
    content is HTML and was not withheld (``signals.withheld``: nothing of it may be parsed);
    anything else (a PDF, an error page, a 304 whose content the archive holds already) is a
    page of the HTTP protocol's."""
    return (res.status is not None and 200 <= res.status < 300 and bool(res.content)
            and MD_WITHHELD not in md and is_html(res.header("content-type"), res.content))


async def render_page(browser: "BrowserFetcher | None", router: Router, url: str, md: dict,
                      res, count) -> None:
    """The fetch engine's step after a page was fetched (:mod:`owler.fetch.engine`): when
    ``router`` sends ``url`` to the browser and :func:`wants_render`, render it and :func:`note`
    the outcome in ``md`` (counted ``browser_rendered``, ``browser_budget`` for a render that
    ended at its budget); a browser that cannot render it (not installed, crashed) leaves the
    page as fetched with ``browser.end=failed`` and the cause (``browser_failed``). Any other
    page loses what an earlier render noted (:func:`forget`)."""
    forget(md)
    if browser is None or router.protocol(url, md) != "browser" or not wants_render(md, res):
        return
    try:
        rendered = await browser.render(url, res)
    except BrowserError as exc:
        count("browser_failed")
        md[END] = ["failed"]
        md[END_DETAIL] = [str(exc)[:500]]
        return
    note(md, rendered)
    count("browser_rendered")
    if rendered.end != "idle":
        count(f"browser_{rendered.end}")


class BrowserFetcher:
    """Renders pages (:meth:`render`) in a browser started on the first page, for the fetch
    engine's loop (not thread-safe). ``http`` is the engine's :class:`HttpFetcher` (started),
    ``robots`` its :class:`RobotsSource`."""

    def __init__(self, conf: Mapping[str, Any], http, robots) -> None:
        self.conf = conf
        self.http, self.robots = http, robots
        self.pages = max(1, C.get_int(conf, PAGES_KEY, 2))
        self.budget = C.get_float(conf, BUDGET_KEY, 10.0)
        self.idle = C.get_float(conf, IDLE_KEY, 0.5)
        self.block_types = _block_types(conf)
        self.resource_delay = C.get_float(conf, RESOURCE_DELAY_KEY, 0.2)
        self.cache_ttl = C.get_float(conf, CACHE_TTL_KEY, 300.0)
        self.cache_entries = C.get_int(conf, CACHE_ENTRIES_KEY, 256)
        self.dom_limit = C.get_int(conf, DOM_LIMIT_KEY, 8 << 20)
        self.agent = user_agent(conf)
        self._cache: OrderedDict[str, tuple[float, tuple]] = OrderedDict()
        self._cache_bytes = 0
        self._hosts: dict[str, tuple[asyncio.Lock, list[float]]] = {}
        self._browser: _Browser | None = None
        self._starting: asyncio.Lock | None = None
        self._slots: asyncio.Semaphore | None = None
        self.stats: dict[str, int] = {}

    async def _ensure(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
            self._slots = asyncio.Semaphore(self.pages)
        async with self._starting:
            if self._browser is not None and self._browser.alive:
                return
            if self._browser is not None:
                log.warning("the browser died; starting it again")
                await self._browser.close()
                self._browser = None
            browser = _Browser(self.conf)
            await browser.start()
            self._browser = browser
            self.stats["browser_starts"] = self.stats.get("browser_starts", 0) + 1

    async def render(self, url: str, response) -> Rendered:
        """The page ``url`` rendered from ``response`` (the engine's :class:`FetchResult` of it,
        HTML with a 2xx status). Raises :class:`BrowserError` when no browser can render it."""
        await self._ensure()
        async with self._slots:
            if not self._browser.alive:
                await self._ensure()
            page = _Page(self, url, response)
            try:
                return await page.run(self.budget, self.idle)
            except (BrowserError, asyncio.TimeoutError, KeyError) as exc:
                raise BrowserError(f"rendering {url} failed: {type(exc).__name__}: {exc}") \
                    from None

    async def close(self) -> None:
        if self._browser is not None:
            await self._browser.close()
            self._browser = None

    # -- the page's requests -----------------------------------------------------------------
    async def _polite_fetch(self, url: str, headers: dict | None):
        """One request at a time per host, ``browser.resource.delay`` seconds apart."""
        host = url.split("/", 3)[2].lower()
        lock, last = self._hosts.setdefault(host, (asyncio.Lock(), [0.0]))
        async with lock:
            wait = last[0] + self.resource_delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                return await self.http.fetch(url, extra_headers=headers)
            finally:
                last[0] = time.monotonic()
                if len(self._hosts) > 10_000:
                    self._hosts = {h: v for h, v in self._hosts.items() if v[0].locked()}

    def _cache_get(self, url: str) -> tuple | None:
        hit = self._cache.get(url)
        if hit is None:
            return None
        if time.monotonic() - hit[0] > self.cache_ttl:
            del self._cache[url]
            self._cache_bytes -= len(hit[1][3])
            return None
        self._cache.move_to_end(url)
        return hit[1]

    def _cache_put(self, url: str, answer: tuple) -> None:
        size = len(answer[3])
        if self.cache_entries <= 0 or size > CACHE_MAX_BYTES // 4:
            return
        old = self._cache.pop(url, None)
        if old is not None:
            self._cache_bytes -= len(old[1][3])
        self._cache[url] = (time.monotonic(), answer)
        self._cache_bytes += size
        while len(self._cache) > self.cache_entries or self._cache_bytes > CACHE_MAX_BYTES:
            _, (_, dropped) = self._cache.popitem(last=False)
            self._cache_bytes -= len(dropped[3])


__all__ = ["BrowserFetcher", "BrowserError", "Rendered", "Router", "note", "forget",
           "for_parser", "check_conf", "render_page", "wants_render", "FETCH_WITH"]
