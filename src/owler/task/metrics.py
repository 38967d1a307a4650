"""Crawl metrics in StormCrawler's metrics index, and errors for the Storm UI.

Python multilang components cannot use Storm's metrics (``report_metric`` kills a ShellBolt that
has no matching Java metric), so every component task writes its own counters and gauges to
OpenSearch, as StormCrawler's ``MetricsConsumer`` does: one document per value with the fields of
``resources/opensearch/metrics.json`` (``name``, ``value``, ``srcComponent``, ``srcTaskId``,
``srcWorkerHost``, ``srcWorkerPort``, ``srcStormId``, ``timestamp``).

Names. A document's ``name`` is the counter or gauge name the component counts under (the same
names as in ``owler run``'s stats files); ``srcComponent`` says which component. Families read
``family/member``: ``http/<code>``, ``error.cause/<cause>``, ``robots/<decision>``,
``rejected/<filter>``, ``blacklisted/<list>``, ``errors/reported``, ``metrics/dropped``. Counter
values are cumulative since the component process started (a restarted worker starts from 0);
gauges are the value at the time of the document. The list: docs/configuration.md,
"Metrics and errors".

Writing never slows the component: :class:`MetricsReporter` takes a snapshot every
``metrics.interval`` seconds on its own thread and hands the documents to :class:`MetricsSink`, a
bounded queue drained by another thread with ``_bulk`` requests. While OpenSearch cannot be
reached the sink retries with back-off (1 s doubling to 60 s) and keeps at most
``metrics.queue.size`` documents, counting in the request being sent: beyond it the oldest waiting
ones are dropped (counted as ``metrics/dropped``), those in the request stay for its retry;
metrics are not crawl data.

The read side (the latest values per component, for ``owler status``) is
:mod:`owler.run.report`.

Config keys:

``metrics.opensearch`` (false)
    write metrics documents to OpenSearch.
``metrics.interval`` (10)
    seconds between two snapshots of one component task.
``metrics.queue.size`` (10000)
    documents held while OpenSearch is unreachable.
``metrics.errors.interval`` (5)
    seconds between two errors one component task shows in the Storm UI (:class:`ErrorThrottle`).
``opensearch.metrics.index.name`` ("metrics")
    the index; its template (``resources/opensearch/metrics.json``, patterns ``<index>*``) is
    installed as ``owler-<index>`` before the first write.
``opensearch.metrics.<k>`` then ``opensearch.<k>``
    the connection keys of :mod:`owler.osclient` (``addresses``, ``user``, ...).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import orjson

from owler import conf as C
from owler.constants import METRICS_ENABLED_KEY, STORM_HOSTNAME_KEY, STORM_ID_KEY
from owler.osclient import INDEX_NAME, OpenSearchError, OSClient, conn_key

log = logging.getLogger("owler.task.metrics")

INTERVAL_KEY = "metrics.interval"
QUEUE_KEY = "metrics.queue.size"
ERROR_INTERVAL_KEY = "metrics.errors.interval"
KIND = "metrics"  # opensearch.metrics.<k> connection keys

DEFAULT_INTERVAL = 10.0
DEFAULT_QUEUE = 10000
DEFAULT_ERROR_INTERVAL = 5.0

#: field → accepted OpenSearch types (what the template maps them to, or a compatible type)
FIELDS = {"name": ("keyword",), "value": ("double", "float", "long", "scaled_float"),
          "srcComponent": ("keyword",), "srcTaskId": ("long", "integer"),
          "srcWorkerHost": ("keyword",), "srcWorkerPort": ("long", "integer"),
          "srcStormId": ("keyword",), "timestamp": ("date", "date_nanos")}

_FILTER_BULK = "errors,items.*.status,items.*.error.type,items.*.error.reason"


def index_name(conf: Mapping[str, Any]) -> str:
    return str(conn_key(conf, KIND, INDEX_NAME, "metrics"))


def iso_millis(ts: float) -> str:
    """``2024-05-01T12:00:00.123Z`` (UTC)."""
    ms = int(round(ts * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


# ---- where a document comes from -----------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    component: str
    task_id: int
    host: str
    port: int
    storm_id: str


def worker_port(pid: int | None = None) -> int:
    """The Storm worker's port, from ``-Dworker.port=N`` on the command line of the worker JVM
    (the parent of a shell component, Linux ``/proc``); -1 when unknown (local mode: no worker)."""
    pid = os.getppid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return -1
    for arg in args:
        if arg.startswith(b"-Dworker.port="):
            try:
                return int(arg.split(b"=", 1)[1])
            except ValueError:
                return -1
    return -1


def source_from(storm_conf: Mapping[str, Any], context: Mapping[str, Any]) -> Source:
    """What the multilang handshake tells a component about itself.

    Storm's context (``TopologyContext.toJSONString``) has ``taskid`` and ``componentid`` but no
    worker; the topology conf a worker hands its shell components has ``storm.id`` (the topology
    id) and ``storm.local.hostname`` when set; the worker port is read from the worker JVM.
    """
    task = context.get("taskid", 0)
    try:
        task = int(task)
    except (TypeError, ValueError):
        task = -1
    host = storm_conf.get(STORM_HOSTNAME_KEY) or socket.gethostname()
    storm_id = storm_conf.get(STORM_ID_KEY) or storm_conf.get("topology.name") or ""
    return Source(str(context.get("componentid") or ""), task, str(host), worker_port(),
                  str(storm_id))


def documents(source: Source, values: Mapping[str, float], ts: float) -> list[dict]:
    """One metrics-index document per value (StormCrawler's fields)."""
    stamp = iso_millis(ts)
    return [{"name": str(name), "value": float(value), "srcComponent": source.component,
             "srcTaskId": source.task_id, "srcWorkerHost": source.host,
             "srcWorkerPort": source.port, "srcStormId": source.storm_id, "timestamp": stamp}
            for name, value in values.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)]


def doc_id(doc: Mapping[str, Any]) -> str:
    """A stable id, so a bulk request retried after a lost answer writes no duplicates."""
    key = (f"{doc['srcStormId']}\0{doc['srcComponent']}\0{doc['srcTaskId']}\0{doc['srcWorkerHost']}"
           f"\0{doc['timestamp']}\0{doc['name']}")
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# ---- errors for the Storm UI ---------------------------------------------------------------------

class ErrorThrottle:
    """At most one error per ``interval`` seconds; the others are counted.

    :meth:`admit` returns None for an error to drop, or the number of errors dropped since the
    last admitted one. Thread-safe.
    """

    def __init__(self, interval: float = DEFAULT_ERROR_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.reported = 0
        self.suppressed = 0
        self._since_last = 0
        self._last: float | None = None
        self._lock = threading.Lock()

    def admit(self) -> int | None:
        now = self.clock()
        with self._lock:
            if self._last is not None and now - self._last < self.interval:
                self.suppressed += 1
                self._since_last += 1
                return None
            self._last = now
            self.reported += 1
            dropped, self._since_last = self._since_last, 0
            return dropped


def error_message(text: str, dropped: int, limit: int = 2000) -> str:
    """The text of a Storm UI error (cut to ``limit`` characters), naming dropped ones."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    if dropped:
        text += f" ({dropped} more error(s) not shown since the last one)"
    return text


# ---- the OpenSearch sink -------------------------------------------------------------------------

class MetricsSink:
    """Writes documents to the metrics index from a background thread; never blocks the caller.

    :meth:`offer` appends to a queue of at most ``max_queue`` documents, the request in flight
    counted in (beyond it the oldest waiting documents are dropped, counted in ``dropped``; those
    in the request are kept for its retry). The writer thread installs the index template and creates
    the index if missing (once), then sends ``_bulk`` requests of up to ``batch_size`` documents.
    A request that reaches no node (or gets 429/5xx) puts its documents back and waits
    ``min_backoff`` seconds, doubling up to ``max_backoff``. Documents the index refuses (a
    conflicting mapping) are counted in ``rejected`` and logged, never retried.
    """

    def __init__(self, conf: Mapping[str, Any], *, max_queue: int | None = None,
                 batch_size: int = 1000, min_backoff: float = 1.0, max_backoff: float = 60.0,
                 client: OSClient | None = None, start: bool = True) -> None:
        conf = conf or {}
        self.index = index_name(conf)
        self.client = client or OSClient(conf, KIND)
        self.max_queue = max(1, max_queue if max_queue is not None
                             else C.get_int(conf, QUEUE_KEY, DEFAULT_QUEUE))
        self.batch_size = max(1, batch_size)
        self.min_backoff, self.max_backoff = min_backoff, max_backoff
        self.sent = self.dropped = self.rejected = self.failed_requests = 0
        self.template_error: str | None = None
        self.mapping_error: str | None = None
        self._setup_done = False
        self._queue: deque = deque()
        self._in_flight = 0
        self._cond = threading.Condition()
        self._closing = False
        self._down_since: float | None = None
        self._last_warning = 0.0
        self._thread = threading.Thread(target=self._loop, name="owler-metrics-sink", daemon=True)
        if start:
            self._thread.start()

    # -- caller side -------------------------------------------------------------------------------
    def offer(self, docs: Iterable[dict]) -> None:
        with self._cond:
            self._queue.extend(docs)
            self._trim()
            self._cond.notify()

    def stats(self) -> dict[str, int]:
        """Counters: documents sent, dropped (queue full while OpenSearch was away), refused."""
        with self._cond:
            return {"metrics/sent": self.sent, "metrics/dropped": self.dropped,
                    "metrics/rejected": self.rejected}

    @property
    def queued(self) -> int:
        return len(self._queue) + self._in_flight

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued document was sent (or refused); False after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (one attempt, at most ``timeout`` seconds), then stop."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.client.close()

    # -- writer thread -----------------------------------------------------------------------------
    def _trim(self) -> None:
        over = len(self._queue) + self._in_flight - self.max_queue
        while over > 0 and self._queue:
            self._queue.popleft()
            self.dropped += 1
            over -= 1

    def _loop(self) -> None:
        backoff = 0.0
        while True:
            with self._cond:
                if backoff:
                    self._cond.wait_for(lambda: self._closing, timeout=backoff)
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return  # closing, nothing left
                batch = [self._queue.popleft()
                         for _ in range(min(self.batch_size, len(self._queue)))]
                self._in_flight = len(batch)
                closing = self._closing
            try:
                retry = self._send(batch)
            except Exception:  # noqa: BLE001 - a bug here must not kill the thread silently
                log.exception("metrics: unexpected error while writing %d documents", len(batch))
                retry = []
            with self._cond:
                self._in_flight = 0
                if retry:
                    self._queue.extendleft(reversed(retry))
                    self._trim()
                self._cond.notify_all()
            if retry:
                if closing:
                    return  # shutting down and OpenSearch is away: give up
                backoff = min(self.max_backoff, max(self.min_backoff, backoff * 2))
            else:
                backoff = 0.0

    def _unreachable(self, exc: Exception) -> None:
        self.failed_requests += 1
        now = time.time()
        if self._down_since is None:
            self._down_since = now
        self._throttled(logging.WARNING, "metrics: cannot write to OpenSearch index %r: %s (%d "
                        "documents queued, %d dropped so far; retrying)", self.index, exc,
                        len(self._queue), self.dropped)

    def _setup(self) -> None:
        """Install the index template and check an existing index's mapping (once).

        Raises OpenSearchError with status 0 when no node answered (retried later); a conflict is
        logged as an error and writing goes on.
        """
        template = _template(self.index)
        name = f"owler-{self.index}"
        try:
            self.client.request("PUT", f"/_index_template/{name}", template, retries=0)
        except OpenSearchError as exc:
            if exc.status == 0:
                raise
            self.template_error = str(exc)
            log.error("metrics: cannot install the index template %r for index %r (%s); "
                      "documents are written with the mapping of whatever template or index is "
                      "there — remove the conflicting template or set "
                      "opensearch.metrics.index.name", name, self.index, exc)
        try:
            # created here: auto_create_index may be off (it is on `owler services` nodes)
            status, _ = self.client.request("HEAD", f"/{self.index}", ok=(200, 404), retries=0)
            if status == 404:
                status, data = self.client.request("PUT", f"/{self.index}", ok=(200, 201, 400),
                                                   retries=0)
                err = (data or {}).get("error") if isinstance(data, dict) else None
                if status == 400 and not (isinstance(err, dict) and
                                          err.get("type") == "resource_already_exists_exception"):
                    log.error("metrics: cannot create index %r: %s", self.index, err)
            status, data = self.client.request("GET", f"/{self.index}/_mapping", ok=(200, 404),
                                               retries=0)
        except OpenSearchError as exc:
            if exc.status == 0:
                raise
            log.error("metrics: cannot set up index %r: %s", self.index, exc)
            status, data = 0, None
        if status == 200 and isinstance(data, dict) and data:
            wrong = mapping_conflicts(next(iter(data.values())).get("mappings", {}))
            if wrong:
                self.mapping_error = "; ".join(wrong)
                log.error("metrics: index %r at %s has a conflicting mapping (%s): its documents "
                          "may be refused or not aggregate — delete the index or set "
                          "opensearch.metrics.index.name", self.index, self.client.address,
                          self.mapping_error)
        self._setup_done = True

    def _send(self, batch: list[dict]) -> list[dict]:
        """Write ``batch``; return the documents to try again."""
        try:
            if not self._setup_done:
                self._setup()
            lines = []
            for doc in batch:
                lines.append(orjson.dumps({"index": {"_index": self.index, "_id": doc_id(doc)}}))
                lines.append(orjson.dumps(doc))
            body = b"\n".join(lines) + b"\n"
            _, data = self.client.request("POST", "/_bulk", body,
                                          params={"filter_path": _FILTER_BULK}, retries=0)
        except OpenSearchError as exc:
            if exc.status == 0 or exc.status in (429, 502, 503, 504):
                self._unreachable(exc)
                return batch
            self.rejected += len(batch)  # e.g. 401 or 400 for the whole request: never retried
            self._throttled(logging.ERROR, "metrics: OpenSearch refused %d documents: %s",
                            len(batch), exc)
            return []
        if self._down_since is not None:
            log.warning("metrics: OpenSearch index %r writable again after %.0f s (%d documents "
                        "dropped so far)", self.index, time.time() - self._down_since, self.dropped)
            self._down_since = None
        retry, refused, reason = [], 0, ""
        if isinstance(data, dict) and data.get("errors"):
            for doc, item in zip(batch, data.get("items") or []):
                res = next(iter(item.values()), {}) if isinstance(item, dict) else {}
                if not res.get("error"):
                    continue
                if res.get("status") == 429:
                    retry.append(doc)
                else:
                    if res.get("status") == 404:  # the index was deleted: create it again next time
                        self._setup_done = False
                    refused += 1
                    err = res["error"]
                    reason = reason or f"{err.get('type')}: {err.get('reason')}"
        with self._cond:
            self.sent += len(batch) - len(retry) - refused
            self.rejected += refused
        if refused:
            self._throttled(logging.ERROR, "metrics: index %r refused %d documents (%s)",
                            self.index, refused, reason)
        return retry

    def _throttled(self, level: int, msg: str, *args: Any) -> None:
        """Log at most one such message a minute (a node that is down fails every request)."""
        now = time.time()
        if now - self._last_warning >= 60.0:
            self._last_warning = now
            log.log(level, msg, *args)


def _template(index: str) -> dict:
    path = C.resource_path(Path("opensearch") / "metrics.json")
    body = json.loads(path.read_text())
    body.pop("_comment", None)
    if index != "metrics":
        body["index_patterns"] = [f"{index}*"]
    return body


def mapping_conflicts(mappings: Mapping[str, Any]) -> list[str]:
    """The fields of an index mapping whose type differs from the metrics template's."""
    props = mappings.get("properties", {}) if isinstance(mappings, Mapping) else {}
    wrong = []
    for field, types in FIELDS.items():
        got = (props.get(field) or {}).get("type")
        if got is not None and got not in types:
            wrong.append(f"{field} is {got} (expected {types[0]})")
    return wrong


# ---- the periodic reporter of one component task -------------------------------------------------

class MetricsReporter:
    """Every ``interval`` seconds: ``snapshot()`` → documents → the sink, on its own thread."""

    def __init__(self, source: Source, snapshot: Callable[[], Mapping[str, float]],
                 sink: MetricsSink, interval: float = DEFAULT_INTERVAL) -> None:
        self.source = source
        self.snapshot = snapshot
        self.sink = sink
        self.interval = max(0.1, interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="owler-metrics", daemon=True)
        self._thread.start()

    @classmethod
    def from_conf(cls, storm_conf: Mapping[str, Any], context: Mapping[str, Any],
                  snapshot: Callable[[], Mapping[str, float]]) -> MetricsReporter | None:
        """A running reporter when ``metrics.opensearch`` is true, else None."""
        if not C.get_bool(storm_conf, METRICS_ENABLED_KEY, False):
            return None
        interval = C.get_float(storm_conf, INTERVAL_KEY, DEFAULT_INTERVAL)
        return cls(source_from(storm_conf, context), snapshot, MetricsSink(storm_conf), interval)

    def report(self, ts: float | None = None) -> None:
        try:
            values = self.snapshot()
        except Exception:  # noqa: BLE001 - a broken snapshot must not stop the reporting
            log.exception("metrics: cannot take a snapshot of %s", self.source.component)
            return
        self.sink.offer(documents(self.source, values, time.time() if ts is None else ts))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.report()

    def close(self, timeout: float = 2.0) -> None:
        """A last snapshot, sent within ``timeout`` seconds if OpenSearch is there."""
        self._stop.set()
        self._thread.join(timeout)
        self.report()
        self.sink.close(timeout)
