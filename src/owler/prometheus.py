"""The crawl's counters and gauges for Prometheus, in its text format.

Two routes, one for each kind of process that holds metrics:

- **Spout and bolt tasks** live on whichever worker host Storm puts them, come and go with
  rebalances and restarts, and no scrape target list could follow them. Each task pushes its
  counters and gauges every ``metrics.interval`` seconds to a Prometheus **Pushgateway**
  (``metrics.prometheus.pushgateway``), the route of Storm's own Prometheus reporter; Prometheus
  scrapes the gateway with ``honor_labels: true``. A task's values form one group of the gateway
  (grouping key ``job`` = ``metrics.prometheus.job``, ``topology`` = the Storm topology id,
  ``component``, ``task``); every push replaces the group whole. A task pushes a last time when it
  closes cleanly; the group of a task that was killed keeps its last values (the gateway's
  ``push_time_seconds`` says since when) until the gateway restarts or the group is deleted.
  Pushing runs on a thread of its own: a gateway that is down or slow costs the crawl nothing but
  the ``metrics/prometheus_failed`` counter and one warning a minute.
- **``owler frontier serve``** is one long-lived process at a known address: it serves
  ``/metrics`` itself (``--metrics-port``, as URLFrontier's ``-s``), with the reference service's
  metric names (:class:`ServiceMetrics`).

Names (:func:`families`). A component counter ``name`` becomes ``owler_<name>_total``, a gauge
``owler_<name>``, every character that Prometheus does not allow in a name replaced by ``_``.
A counter of a family in :data:`LABELLED` (``http/404``, ``error.cause/<cause>``,
``rejected/<filter>``, ...) becomes one metric with the member as a label
(``owler_http_total{code="404"}``), and the statuses a component emits (``FETCHED``, ...) become
``owler_status_total{status="FETCHED"}``; other ``a/b`` names flatten to ``owler_a_b``. Every
metric carries ``host`` (the worker's ``storm.local.hostname``) besides the grouping key's labels.
So the pages fetched by a crawl are ``sum(owler_fetched_total{component="fetcher"})``.

Config keys: ``metrics.prometheus.pushgateway`` (none: no push; ``host:port`` or an
``http(s)://`` URL), ``metrics.prometheus.job`` ("owler"), ``metrics.interval`` (10 s).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.parse
from typing import Any, Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Summary
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import push_to_gateway

from owler import conf as C
from owler.constants import ERROR_CAUSE, STATUS_NAMES

log = logging.getLogger("owler.prometheus")

PUSHGATEWAY_KEY = "metrics.prometheus.pushgateway"
JOB_KEY = "metrics.prometheus.job"
DEFAULT_JOB = "owler"
PREFIX = "owler_"
#: counter families whose member becomes a label, and the label's name
LABELLED = {"http": "code", ERROR_CAUSE: "cause", "error": "cause", "rejected": "filter",
            "blacklisted": "list", "records": "type", "kind": "kind", "truncated": "reason",
            "dropped": "reason", "robots": "decision", "status": "status"}
#: seconds between two warnings about a gateway that does not take the pushes
WARN_EVERY = 60.0

_BAD = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(name: str) -> str:
    """``name`` with the prefix, every character a Prometheus name does not allow as ``_``."""
    return PREFIX + _BAD.sub("_", name)


def families(counters: Mapping[str, float], gauges: Mapping[str, float],
             labels: Mapping[str, str]) -> list[Metric]:
    """The metric families of one snapshot (module docstring, "Names"), each sample labelled
    with ``labels`` plus its family's member label. Values that are not numbers are left out.

    A bare counter named as a labelled family (``http`` beside ``http/200``, ``status`` beside
    ``FETCHED``) joins that family with an empty member (Prometheus reads an empty label as no
    label), so that one name always has one set of labels; a gauge whose name a counter family
    has taken gets ``_gauge`` appended, so that no name has two types."""
    base = list(labels)
    values = list(labels.values())
    out: dict[str, Metric] = {}

    def family(kind: type, name: str, extra: str | None) -> Metric:
        found = out.get(name)
        if found is None:
            what = "counter" if kind is CounterMetricFamily else "gauge"
            found = out[name] = kind(name, f"owler {what} {name[len(PREFIX):]}",
                                     labels=base + ([extra] if extra else []))
        return found

    for raw, value in counters.items():
        if not _number(value):
            continue
        head, _, member = raw.partition("/")
        if raw in STATUS_NAMES:  # the statuses a component emits or receives
            head, member = "status", raw
        if head in LABELLED:
            family(CounterMetricFamily, metric_name(head), LABELLED[head]).add_metric(
                values + [member], value)
        else:
            family(CounterMetricFamily, metric_name(raw), None).add_metric(values, value)
    for raw, value in gauges.items():
        if _number(value):
            name = metric_name(raw)
            if isinstance(out.get(name), CounterMetricFamily):
                name += "_gauge"
            family(GaugeMetricFamily, name, None).add_metric(values, value)
    return list(out.values())


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class SnapshotCollector:
    """A collector for :class:`prometheus_client.CollectorRegistry` that reads ``snapshot()``
    (``(counters, gauges)``) at every collection."""

    def __init__(self, snapshot: Callable[[], tuple[Mapping[str, float], Mapping[str, float]]],
                 labels: Mapping[str, str]) -> None:
        self.snapshot = snapshot
        self.labels = dict(labels)

    def collect(self) -> Iterable[Metric]:
        counters, gauges = self.snapshot()
        return families(counters, gauges, self.labels)


def gateway_address(value: Any) -> str:
    """The Pushgateway of ``metrics.prometheus.pushgateway`` as ``http(s)://host:port``; a
    ConfError naming what is wrong with a malformed one."""
    text = str(value).strip()
    if not text:
        raise C.ConfError(f"{PUSHGATEWAY_KEY}: empty; give host:port or a URL")
    url = text if "://" in text else f"http://{text}"
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError as exc:
        raise C.ConfError(f"{PUSHGATEWAY_KEY}: {text!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise C.ConfError(f"{PUSHGATEWAY_KEY}: {text!r} is not host:port or an http(s):// URL "
                          "with a port")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


class Pusher:
    """Every ``interval`` seconds, the registry of one task to its group of the Pushgateway, on
    a thread of its own (module docstring)."""

    def __init__(self, gateway: str, job: str, grouping: Mapping[str, str],
                 snapshot: Callable[[], tuple[Mapping[str, float], Mapping[str, float]]],
                 labels: Mapping[str, str], interval: float, timeout: float = 5.0) -> None:
        self.gateway = gateway
        self.job = job
        self.grouping = dict(grouping)
        self.interval = max(0.1, interval)
        self.timeout = timeout
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(snapshot, labels))
        self.pushed = 0
        self.failed = 0
        self._warned = 0.0
        self._lock = threading.Lock()  # one push at a time: the loop's and close()'s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="owler-prometheus", daemon=True)
        self._thread.start()

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], grouping: Mapping[str, str],
                  snapshot: Callable[[], tuple[Mapping[str, float], Mapping[str, float]]],
                  labels: Mapping[str, str], interval: float) -> "Pusher | None":
        """A running pusher when ``metrics.prometheus.pushgateway`` is set, else None; a
        ConfError for a malformed address or job. ``interval``: the caller's
        ``metrics.interval``."""
        value = conf.get(PUSHGATEWAY_KEY)
        if value in (None, "", False):
            return None
        gateway = gateway_address(value)
        job = str(conf.get(JOB_KEY) or DEFAULT_JOB)
        if _BAD.search(job):
            raise C.ConfError(f"{JOB_KEY}: {job!r}: letters, digits and _ only")
        return cls(gateway, job, grouping, snapshot, labels, interval)

    def stats(self) -> dict[str, int]:
        """Counters for the task's own snapshot: a gateway that fails shows in the stats files
        and the metrics index too."""
        return {"metrics/prometheus_pushed": self.pushed,
                "metrics/prometheus_failed": self.failed}

    def push(self) -> bool:
        """One push of the task's values now; False (counted, a warning a minute) if the
        gateway did not take it."""
        with self._lock:
            try:
                push_to_gateway(self.gateway, job=self.job, registry=self.registry,
                                grouping_key=self.grouping, timeout=self.timeout)
            except Exception as exc:  # noqa: BLE001 - any failure of the gateway or the network
                self.failed += 1
                now = time.monotonic()
                if now - self._warned >= WARN_EVERY:
                    self._warned = now
                    log.warning("metrics: the Pushgateway %s did not take the push of %s (%d "
                                "failed so far): %s", self.gateway, self.grouping, self.failed,
                                exc)
                return False
            self.pushed += 1
            return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.push()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread and push the last values (within ``timeout`` seconds)."""
        self._stop.set()
        self._thread.join(timeout)
        self.timeout = min(self.timeout, timeout)
        self.push()


class ServiceMetrics:
    """The URLFrontier service's metrics, under the names of the reference service (its
    ``AbstractFrontierService``), in a registry of their own (so that several services can run
    in one process, as the tests do)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.get_calls = Counter("frontier_getURLs_calls", "GetURLs calls answered", registry=r)
        self.get_urls = Counter("frontier_getURLs", "URLs given out by GetURLs", registry=r)
        self.get_latency = Summary("frontier_getURLs_latency_seconds",
                                   "time to choose the URLs of one GetURLs call", registry=r)
        self.put_calls = Counter("frontier_putURLs_calls", "PutURLs streams opened", registry=r)
        self.put_urls = Counter("frontier_putURLs", "items received by PutURLs", registry=r)
        self.put_discovered = Counter("frontier_putURLs_discovered", "items received by PutURLs, "
                                      "discovered (true) or known (false)", ["discovered"],
                                      registry=r)
        self.put_ignored = Counter("frontier_putURLs_ignored", "discovered items of URLs the "
                                   "crawl held already (acked SKIPPED)", registry=r)
        self.put_completed = Counter("frontier_putURLs_completed", "known items never to be "
                                     "fetched again (refetchable_from_date 0)", registry=r)
