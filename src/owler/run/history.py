"""The history of a crawl's figures, for the dashboard (:mod:`owler.run.dashboard`).

Documents have the fields of StormCrawler's metrics index (:mod:`owler.task.metrics`): ``name``,
``value``, ``srcComponent``, ``srcTaskId``, ``srcWorkerHost``, ``srcWorkerPort``, ``srcStormId``,
``timestamp``. They come from two places:

- a local run (``owler run``): :class:`Recorder`, called by :class:`owler.run.runner.LocalRun`
  every ``metrics.interval`` seconds, takes one snapshot of every component task's counters and
  gauges (the stats files the tasks write), the frontier (``frontier`` component: ``status/<NAME>``,
  ``due``, ``queues``, ``queues_due``, ``queue/busiest``, ``queue/delayed_s``), Storm's own
  figures per component (``storm/acked``, ``storm/failed``, ``storm/emitted``,
  ``storm/complete_latency_ms``, ``storm/execute_latency_ms``, ``storm/process_latency_ms``,
  ``storm/capacity``: the file ``storm/java/LocalRunner.java`` writes) and a warc2warc pipeline's
  progress (``warc2warc`` component: ``files/<state>``), and appends them to
  :class:`MetricsStore`, a SQLite file beside the embedded frontier: no service needed;
- a crawl with ``metrics.opensearch: true`` (a cluster): the metrics index, read back by
  :class:`OpenSearchHistory`; the frontier's and Storm's figures (from the Storm UI's REST API)
  are then written there by ``owler dashboard`` (:class:`FrontierSampler`).

Config keys: ``metrics.sqlite.path`` (default: the frontier file's name with ``-metrics.sqlite``,
or ``<owler.work.dir>/metrics.sqlite`` with another frontier), ``metrics.interval``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Mapping

from owler import conf as C
from owler.constants import (CLUSTER_UI_PORT_KEY, FRONTIER_BACKEND_KEY, METRICS_SQLITE_PATH_KEY,
                             SQLITE_PATH_KEY, STATUS_NAMES)
from owler.osclient import OpenSearchError, OSClient, epoch_of
from owler.run.series import NAMES as CHART_NAMES
from owler.run.series import PREFIXES as CHART_PREFIXES
from owler.task.metrics import DEFAULT_INTERVAL, INTERVAL_KEY, KIND, index_name
from owler.task.metrics import Source, documents

log = logging.getLogger("owler.dashboard")

PATH_KEY = METRICS_SQLITE_PATH_KEY
FRONTIER = "frontier"  # srcComponent of the frontier's figures
MAX_POINTS = 720  # snapshots a chart shows at most (MetricsStore.rows)
WARC2WARC = "warc2warc"  # srcComponent of a warc2warc pipeline's progress

#: one row: (time in epoch seconds, component, task, name, value)
Row = tuple[float, str, int, str, float]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (run TEXT PRIMARY KEY, topology TEXT NOT NULL, "
    "started REAL NOT NULL, ended REAL)",
    "CREATE TABLE IF NOT EXISTS docs (run TEXT NOT NULL, ts REAL NOT NULL, component TEXT NOT NULL,"
    " task INTEGER NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL, name TEXT NOT NULL, "
    "value REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS docs_run_ts ON docs (run, ts)",
)


def store_path(conf: Mapping[str, Any]) -> Path:
    """Where a local run keeps its metrics (``conf`` with absolute paths)."""
    explicit = C.get_str(conf, PATH_KEY, "") or ""
    if explicit:
        return Path(explicit)
    if (C.get_str(conf, FRONTIER_BACKEND_KEY, "sqlite") or "sqlite") == "sqlite":
        frontier = Path(str(conf.get(SQLITE_PATH_KEY)))
        return frontier.with_name(frontier.stem + "-metrics.sqlite")
    return Path(C.get_str(conf, "owler.work.dir", ".work")) / "metrics.sqlite"


class MetricsStore:
    """The documents of local runs in one SQLite file (WAL: the dashboard reads while a run
    writes). A run is one ``owler run``: its id is the ``srcStormId`` of its documents."""

    def __init__(self, path: Path | str, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise FileNotFoundError(f"no metrics at {self.path}")
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False,
                                    isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        for stmt in _SCHEMA:
            self.conn.execute(stmt)

    def begin_run(self, run: str, topology: str, started: float) -> None:
        self.conn.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, NULL)",
                          (run, topology, started))

    def end_run(self, run: str, ended: float) -> None:
        self.conn.execute("UPDATE runs SET ended = ? WHERE run = ?", (ended, run))

    def append(self, docs: Iterable[Mapping[str, Any]]) -> int:
        rows = [(d["srcStormId"], epoch_of(d["timestamp"]), d["srcComponent"], int(d["srcTaskId"]),
                 d["srcWorkerHost"], int(d["srcWorkerPort"]), d["name"], float(d["value"]))
                for d in docs]
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def runs(self) -> list[dict]:
        """Every run, the newest first: ``run``, ``topology``, ``started``, ``ended`` (None while
        it runs, or when it was killed)."""
        return [{"run": r, "topology": t, "started": s, "ended": e} for r, t, s, e in
                self.conn.execute("SELECT run, topology, started, ended FROM runs "
                                  "ORDER BY started DESC, run")]

    def rows(self, run: str, since: float = 0.0, max_points: int = MAX_POINTS) -> list[Row]:
        """The run's rows from ``since``, of at most ``max_points`` snapshots spread evenly over
        it, the last one always in (a day's run has 8,640 snapshots at 10 s: counters are
        cumulative, so the rates of the ones kept are the means over the wider steps)."""
        times = [t for (t,) in self.conn.execute(
            "SELECT DISTINCT ts FROM docs WHERE run = ? AND ts >= ? ORDER BY ts", (run, since))]
        if len(times) > max_points:
            step = -(-len(times) // max_points)
            times = times[::step] + ([times[-1]] if (len(times) - 1) % step else [])
        return [(ts, c, t, n, v) for ts, c, t, n, v in self.conn.execute(
            "SELECT ts, component, task, name, value FROM docs WHERE run = ? AND ts IN "
            "(SELECT value FROM json_each(?)) ORDER BY ts", (run, json.dumps(times)))]

    def close(self) -> None:
        self.conn.close()


def frontier_values(status: Mapping[str, Any]) -> dict[str, float]:
    """The frontier's figures of :func:`owler.run.report.crawl_status`'s object."""
    out = {f"status/{name}": status.get(name, 0) for name in STATUS_NAMES}
    out.update(due=status.get("due_now", 0), queues=status.get("queues", 0),
               queues_due=status.get("queues_due", 0))
    top = status.get("top_hosts") or []
    out["queue/busiest"] = top[0][1] if top else 0
    delayed = status.get("most_delayed") or []
    out["queue/delayed_s"] = max(0.0, delayed[0][1]) if delayed else 0
    return out


def storm_values(component: Mapping[str, Any]) -> dict[str, float]:
    """One component's figures from Storm → ``storm/<figure>`` values."""
    return {f"storm/{k}": v for k, v in component.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def read_storm_stats(path: Path) -> dict | None:
    """LocalRunner's stats file, or None when it is not there (yet) or half-written."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Recorder:
    """A run's snapshots (module docstring): into a :class:`MetricsStore` (a local run), and the
    figures no component writes (frontier, Storm, warc2warc) also into the metrics index when
    ``sink`` is given (``metrics.opensearch``), under the topology id the components use."""

    def __init__(self, store: MetricsStore | None, run: str, topology: str, started: float,
                 sink: Any = None) -> None:
        self.store, self.run, self.sink = store, run, sink
        self.host = socket.gethostname()
        if store is not None:
            store.begin_run(run, topology, started)

    def record(self, ts: float, components: Mapping[str, Mapping[str, Any]],
               status: Mapping[str, Any] | None, storm: Mapping[str, Any] | None = None,
               storm_id: str | None = None) -> int:
        """``components``: stats file name → its object (``component``, ``task``, ``counters``,
        ``gauges``); ``status``: :func:`owler.run.report.crawl_status` (None: not readable now);
        ``storm``: Storm's figures (``components``: id → figures); ``storm_id``: the topology id
        of the sink's documents (none are sent without it)."""
        own: list[tuple[str, dict]] = []
        if status is not None:
            own.append((FRONTIER, frontier_values(status)))
            files = (status.get("warc2warc") or {}).get("files")
            if files:
                own.append((WARC2WARC, {f"files/{k}": v for k, v in files.items()}))
        for comp, figures in ((storm or {}).get("components") or {}).items():
            own.append((comp, storm_values(figures)))
        if self.sink is not None and storm_id:
            self.sink.offer([d for comp, values in own for d in documents(
                Source(comp, -1, self.host, -1, storm_id), values, ts)])
        if self.store is None:
            return 0
        docs: list[dict] = []
        for stats in components.values():
            values = {**stats.get("counters", {}), **stats.get("gauges", {})}
            docs += documents(Source(str(stats.get("component", "?")), int(stats.get("task", -1)),
                                     self.host, -1, self.run), values, ts)
        for comp, values in own:
            docs += documents(Source(comp, -1, self.host, -1, self.run), values, ts)
        return self.store.append(docs)

    def close(self, ended: float) -> None:
        if self.store is not None:
            self.store.end_run(self.run, ended)
            self.store.close()
        if self.sink is not None:
            self.sink.close(2.0)


class OpenSearchHistory:
    """The documents of the metrics index (``metrics.opensearch``), as :class:`MetricsStore` rows:
    the run is a topology id (``srcStormId``); the newest by default."""

    def __init__(self, conf: Mapping[str, Any], client: OSClient | None = None) -> None:
        self.index = index_name(conf)
        self.client = client or OSClient(conf, KIND)

    @property
    def address(self) -> str:
        return self.client.address

    def runs(self) -> list[dict]:
        """Every topology id with documents, the newest first (``started``/``ended``: the
        first and last document's time). Raises OpenSearchError."""
        status, data = self.client.request("POST", f"/{self.index}/_search", {
            "size": 0, "aggs": {"r": {"terms": {"field": "srcStormId", "size": 50,
                                                "order": {"last": "desc"}},
                                      "aggs": {"first": {"min": {"field": "timestamp"}},
                                               "last": {"max": {"field": "timestamp"}}}}}},
            ok=(200, 404), retries=0)
        if status == 404:
            return []
        return [{"run": b["key"], "topology": b["key"].rsplit("-", 2)[0],
                 "started": b["first"]["value"] / 1000.0, "ended": b["last"]["value"] / 1000.0}
                for b in data["aggregations"]["r"]["buckets"]]

    def rows(self, run: str, since: float = 0.0) -> list[Row]:
        rows: list[Row] = []
        after = None
        while True:
            body: dict[str, Any] = {
                "size": 5000, "sort": [{"timestamp": "asc"}, {"_id": "asc"}],
                "_source": ["timestamp", "srcComponent", "srcTaskId", "name", "value"],
                "query": {"bool": {"filter": [
                    {"term": {"srcStormId": run}},
                    {"range": {"timestamp": {"gte": int(since * 1000),
                                             "format": "epoch_millis"}}},
                    # only what the charts read: a cluster's tasks write many more names
                    {"bool": {"minimum_should_match": 1, "should": [
                        {"terms": {"name": list(CHART_NAMES)}},
                        *({"prefix": {"name": p}} for p in CHART_PREFIXES)]}}]}}}
            if after:
                body["search_after"] = after
            _, data = self.client.request("POST", f"/{self.index}/_search", body, retries=0)
            hits = data["hits"]["hits"]
            for h in hits:
                s = h["_source"]
                rows.append((epoch_of(s["timestamp"]) or 0.0, s["srcComponent"],
                             int(s.get("srcTaskId", -1)), s["name"], float(s["value"])))
            if len(hits) < 5000:
                return rows
            after = hits[-1]["sort"]

    def close(self) -> None:
        self.client.close()


def run_id(topology: str, started: float) -> str:
    """A local run's id, in the form of a Storm topology id (``<name>-<n>-<epoch seconds>``)."""
    return f"{topology}-{os.getpid()}-{int(started)}"


class FrontierSampler(threading.Thread):
    """``owler dashboard`` with ``metrics.opensearch`` (a cluster): the figures no component
    writes into the metrics index every ``metrics.interval`` seconds, under the newest topology
    id there while it is writing: the frontier's, and Storm's per component from the Storm UI's
    REST API (``cluster.ui.port``)."""

    def __init__(self, conf: Mapping[str, Any], stop: threading.Event,
                 start: bool = True) -> None:
        super().__init__(name="owler-frontier-sampler", daemon=True)
        from owler.task.metrics import MetricsSink

        self.conf, self.stop = conf, stop
        self.every = max(1.0, C.get_float(conf, INTERVAL_KEY, DEFAULT_INTERVAL))
        self.ui = f"http://127.0.0.1:{C.get_int(conf, CLUSTER_UI_PORT_KEY, 8080)}"
        self.sink = MetricsSink(conf)
        self.history = OpenSearchHistory(conf)
        if start:
            self.start()

    def storm_figures(self, topology_id: str) -> dict[str, dict[str, float]]:
        """Component → figures (``acked``, ``failed``, ``emitted``, latencies, ``capacity``) of
        the Storm UI's topology page (the last 10 minutes); {} when the UI does not answer."""
        url = f"{self.ui}/api/v1/topology/{urllib.parse.quote(topology_id)}?window=600"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                page = json.loads(resp.read())
        except (OSError, ValueError):
            return {}
        fields = {"acked": "acked", "failed": "failed", "emitted": "emitted",
                  "completeLatency": "complete_latency_ms", "executeLatency": "execute_latency_ms",
                  "processLatency": "process_latency_ms", "capacity": "capacity"}
        out: dict[str, dict[str, float]] = {}
        for comp in (page.get("spouts") or []) + (page.get("bolts") or []):
            name = comp.get("spoutId") or comp.get("boltId")
            figures = {}
            for src, dst in fields.items():
                try:
                    figures[dst] = float(comp[src])
                except (KeyError, TypeError, ValueError):
                    continue
            if name:
                out[name] = figures
        return out

    def sample(self, now: float) -> int:
        from owler.run.report import StatusError, crawl_status

        try:
            runs = self.history.runs()
        except OpenSearchError:
            return 0
        if not runs or now - runs[0]["ended"] > 3 * self.every:
            return 0  # no topology is writing now
        run = runs[0]["run"]
        host = socket.gethostname()
        docs = [d for comp, figures in self.storm_figures(run).items()
                for d in documents(Source(comp, -1, host, -1, run), storm_values(figures), now)]
        try:
            status = crawl_status(dict(self.conf), now, with_metrics=False)
            docs += documents(Source(FRONTIER, -1, host, -1, run), frontier_values(status), now)
        except StatusError:
            pass
        self.sink.offer(docs)
        return len(docs)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                self.sample(time.time())
            except Exception:  # noqa: BLE001 - a dashboard keeps going
                log.exception("dashboard: cannot sample the frontier")
        self.sink.close(2.0)
        self.history.close()
