"""The crawl dashboard: one page of charts over a run's history, and its JSON.

Served on 127.0.0.1 by ``owler dashboard`` (any run of the configured crawl, the newest by
default) and by ``owler run`` while it runs (the run prints the address). Routes:

- ``/``: the page (``resources/dashboard/``), charts drawn by uPlot (installed by ``make setup``
  from its npm package into ``.services/dashboard``, served from here: no CDN);
- ``/api/dashboard.json[?run=ID]``: ``status`` (the object ``owler status --json`` prints:
  :func:`owler.run.report.crawl_status`), ``runs``, ``run`` (``run``, ``topology``, ``started``,
  ``ended``, ``live``), ``t`` and ``charts`` (:func:`owler.run.series.charts`), ``problems``
  (plain sentences: no metrics yet, no frontier, OpenSearch down, ...) and ``refresh`` (seconds);
- ``/api/status.json``: ``status`` alone;
- ``/takedowns``: a read-only page of the take-downs (:mod:`owler.blacklist.takedown`): what was taken
  down, when and why, and the lines of the file the crawl skips; ``/api/takedowns.json``: the
  same as ``file``, ``entries`` (``added``, ``target``, ``reason``) and ``problems``.

Where the history comes from: :mod:`owler.run.history` (a local run's SQLite file, or the metrics
index with ``metrics.opensearch``). Nothing here raises to the browser: every failure becomes a
problem on the page.

Config keys: ``dashboard.port`` (8765; ``owler run`` takes a free port when it is taken),
``metrics.interval`` (the page's refresh and the grid of OpenSearch documents).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping

import orjson

from owler import conf as C
from owler.constants import METRICS_ENABLED_KEY
from owler.osclient import OpenSearchError
from owler.run import history as H
from owler.run.report import StatusError, crawl_status
from owler.run.series import charts
from owler.task.metrics import DEFAULT_INTERVAL, INTERVAL_KEY

log = logging.getLogger("owler.dashboard")

PORT_KEY = "dashboard.port"
DEFAULT_PORT = 8765

#: URL path → (file under resources/dashboard or .services/dashboard, content type)
_PAGE = {"/": ("index.html", "text/html; charset=utf-8"),
         "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
         "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8")}
_LIBRARY = {"/uPlot.iife.min.js": ("uPlot.iife.min.js", "text/javascript; charset=utf-8"),
            "/uPlot.min.css": ("uPlot.min.css", "text/css; charset=utf-8")}


def library_dir(root: Path | None = None) -> Path:
    """Where ``services/dashboard/install.sh`` puts uPlot's files."""
    return (root or C.project_root()) / ".services" / "dashboard"


class DashboardData:
    """What the page shows, read afresh at every request (``conf`` with absolute paths)."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.conf = dict(conf)
        self.interval = C.get_float(conf, INTERVAL_KEY, DEFAULT_INTERVAL)
        self.from_opensearch = C.get_bool(conf, METRICS_ENABLED_KEY, False)

    def status(self) -> tuple[dict | None, list[str]]:
        try:
            return crawl_status(self.conf), []
        except StatusError as exc:
            return None, [f"frontier: {exc}"]
        except Exception as exc:  # noqa: BLE001 - a page, not a traceback
            log.exception("dashboard: cannot read the crawl's status")
            return None, [f"frontier: {type(exc).__name__}: {exc}"]

    def _history(self, run: str | None) -> tuple[dict, list[str]]:
        empty = {"runs": [], "run": None, "t": [], "charts": []}
        if self.from_opensearch:
            source: Any = H.OpenSearchHistory(self.conf)
            where = f"the OpenSearch index {source.index!r} at {source.address}"
            resolution = self.interval
        else:
            path = H.store_path(self.conf)
            where = str(path)
            if not path.exists():
                return empty, [f"no metrics yet: no run was recorded at {path} "
                               "(`owler run` records one)"]
            source, resolution = H.MetricsStore(path, create=False), 1.0
        try:
            runs = source.runs()
            if not runs:
                return empty, [f"no metrics yet in {where}"]
            chosen = next((r for r in runs if r["run"] == run), None) if run else runs[0]
            if chosen is None:
                return {**empty, "runs": runs}, [f"no run {run!r} in {where}"]
            rows = source.rows(chosen["run"])
        except OpenSearchError as exc:
            return empty, [f"metrics: cannot read {where}: {exc}"]
        except Exception as exc:  # noqa: BLE001 - a damaged file: say so on the page
            log.exception("dashboard: cannot read the metrics")
            return empty, [f"metrics: cannot read {where}: {type(exc).__name__}: {exc}"]
        finally:
            source.close()
        newest = rows[-1][0] if rows else None
        fresh = newest is not None and time.time() - newest <= 3 * max(self.interval, 2.0)
        live = fresh and (chosen.get("ended") is None or self.from_opensearch)
        problems = [] if rows else [f"no metrics yet for run {chosen['run']} in {where}"]
        return {"runs": runs, "run": {**chosen, "live": live},
                **charts(rows, chosen["topology"], resolution)}, problems

    def takedowns(self) -> dict:
        """The take-down file's entries, newest first, and the lines it cannot read."""
        from owler.blacklist import takedown as T

        path = T.file_of(self.conf)
        try:
            entries, problems = T.read(path)
        except OSError as exc:
            entries, problems = [], [f"cannot read {path}: {exc.strerror or exc}"]
        return {"file": str(path), "problems": problems,
                "entries": [{"added": e.added, "target": e.target, "reason": e.reason}
                            for e in sorted(entries, key=lambda e: e.added, reverse=True)]}

    def payload(self, run: str | None = None) -> dict:
        status, problems = self.status()
        hist, more = self._history(run)
        return {"generated": time.time(), "refresh": max(1.0, min(self.interval, 10.0)),
                "status": status, "problems": problems + more, **hist}


def make_server(data: DashboardData, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                root: Path | None = None) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (0: any free port); call ``serve_forever``."""
    page_dir = C.resource_path("dashboard", root)
    lib_dir = library_dir(root)

    class Handler(BaseHTTPRequestHandler):
        server_version = "owler-dashboard"

        def log_message(self, fmt, *args):  # noqa: D401 - quiet: the crawl prints enough
            log.debug("dashboard: " + fmt, *args)

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):  # noqa: N802
            self.do_GET()

        def do_GET(self):  # noqa: N802
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            try:
                if url.path == "/api/dashboard.json":
                    doc = data.payload((query.get("run") or [None])[0])
                    return self._send(200, orjson.dumps(doc), "application/json")
                if url.path == "/api/status.json":
                    status, problems = data.status()
                    return self._send(200, orjson.dumps({"status": status, "problems": problems}),
                                      "application/json")
                if url.path == "/api/takedowns.json":
                    return self._send(200, orjson.dumps(data.takedowns()), "application/json")
                if url.path == "/takedowns":
                    return self._send(200, takedowns_page(data.takedowns()).encode(),
                                      "text/html; charset=utf-8")
                if url.path in _PAGE or url.path in _LIBRARY:
                    name, ctype = _PAGE.get(url.path) or _LIBRARY[url.path]
                    path = (page_dir if url.path in _PAGE else lib_dir) / name
                    if not path.is_file():
                        return self._send(404, f"{path} is missing: run `make setup`\n".encode(),
                                          "text/plain; charset=utf-8")
                    return self._send(200, path.read_bytes(), ctype)
                return self._send(404, b"not found\n", "text/plain; charset=utf-8")
            except (BrokenPipeError, ConnectionResetError):
                return None
            except Exception as exc:  # noqa: BLE001 - the server lives on
                log.exception("dashboard: %s failed", self.path)
                body = orjson.dumps({"problems": [f"the dashboard failed: {exc}"]})
                return self._send(500, body, "application/json")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def takedowns_page(doc: dict) -> str:
    """The take-downs as a page of its own (:meth:`DashboardData.takedowns`), every text
    escaped: a reason is whatever an operator typed."""
    from html import escape

    rows = "".join(f"<tr><td>{escape(e['added'])}</td><td>{escape(e['target'])}</td>"
                   f"<td>{escape(e['reason'])}</td></tr>" for e in doc["entries"])
    problems = "".join(f"<li>{escape(p)} (skipped by the crawl)</li>" for p in doc["problems"])
    body = (f"<table id=\"takedowns\"><thead><tr><th>added (UTC)</th><th>host or URL prefix"
            f"</th><th>reason</th></tr></thead><tbody>{rows}</tbody></table>" if rows
            else "<p id=\"none\">Nothing was taken down.</p>")
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>OWLer take-downs</title>\n<link rel=\"stylesheet\" href=\"dashboard.css\">\n"
            "</head>\n<body>\n<header>\n<h1>Take-downs</h1>\n"
            f"<p id=\"run\">{len(doc['entries'])} in <code>{escape(doc['file'])}</code>: no request "
            "reaches them, their URLs are ERROR (<code>owler takedown add|list|remove</code>). "
            "<a href=\"./\">Back to the crawl</a></p>\n</header>\n"
            f"<ul id=\"problems\">{problems}</ul>\n{body}\n</body>\n</html>\n")


class Background:
    """The dashboard on a daemon thread (``owler run``): ``url``, ``close()``."""

    def __init__(self, conf: Mapping[str, Any], root: Path | None = None) -> None:
        port = C.get_int(conf, PORT_KEY, DEFAULT_PORT)
        try:
            self.server = make_server(DashboardData(conf), port=port, root=root)
            self.note = ""
        except OSError as exc:  # taken (another run's dashboard): any free port
            self.server = make_server(DashboardData(conf), port=0, root=root)
            self.note = f" (port {port}: {exc.strerror or exc})"
        host, bound = self.server.server_address[:2]
        self.url = f"http://{host}:{bound}/"
        self.thread = threading.Thread(target=self.server.serve_forever, name="owler-dashboard",
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
