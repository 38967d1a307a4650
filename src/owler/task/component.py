"""What every OWLer component shares on the Storm side (:class:`OwlerComponent`), and what the
components that emit statuses share (:class:`StatusEmitter`).

- ``owler_setup(storm_conf, context)``: the crawler configuration is the topology configuration
  (StormCrawler's way): every crawler key travels in the Storm conf.
- A clean end: Storm stops a shell component with SIGTERM (topology killed) or by closing its
  stdin (worker gone). Both paths call :meth:`OwlerComponent.shutdown` once, where a component
  closes what it holds (WARC files, database connections) before the process exits; a SIGTERM
  that arrives while it closes does not cut the close short.
- Counters written every few seconds to ``<owler.run.dir>/<component>-<task>.json`` for
  ``owler run``'s progress line and idle detection: a file, because ``report_metric`` kills a
  ShellBolt that has no Java metric registered under the same name.
- With ``metrics.opensearch: true`` the same counters and gauges go every ``metrics.interval``
  seconds to StormCrawler's metrics index from a background thread (:mod:`owler.task.metrics`);
  with ``metrics.prometheus.pushgateway`` to a Prometheus Pushgateway (:mod:`owler.prometheus`).
- :meth:`OwlerComponent.report_error`: an operational error shown in the Storm UI (throttled by
  ``metrics.errors.interval``).
- :meth:`StatusEmitter.emit_status` / :meth:`StatusEmitter.emit_error`: a URL's status (and its
  outlinks as ONE tuple), or the ERROR of a document that could not be handled (StormCrawler's
  ``StatusEmitterBolt`` and ``JSoupParserBolt.handleException``: errors are data).

The classes call pystorm's ``emit``, ``send_message`` and ``_exit`` of the class they are mixed into
(put them first in the bases) and import nothing of streamparse.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections import Counter

from owler import conf as C
from owler import outlinks as outlink
from owler import prometheus as P
from owler import sched, wire
from owler.constants import (ERROR_CAUSE, ERROR_MESSAGE, ERROR_SOURCE, OUTLINKS_STREAM,
                             STATUS_STREAM, Status)
from owler.metadata import set_value
from owler.task import metrics as M
from owler.task import serializer as owler_serializer

log = logging.getLogger("owler")
owler_serializer.register()  # before any component is built: streamparse_run imports it first


def is_binary(serializer) -> bool:
    """Whether pystorm's ``serializer`` carries bytes as they are (MessagePack; JSON needs text)."""
    return isinstance(serializer, owler_serializer.OwlerMsgpackSerializer)


class OwlerComponent:
    """Mixin for pystorm components (put it first in the bases)."""

    stats_interval = 2.0

    def owler_setup(self, storm_conf: dict, context: dict) -> None:
        self.conf = storm_conf
        # first, so that the threads the component starts inherit it (owler/sched.py)
        self.sched_policy = sched.apply(storm_conf)
        #: pages go as bytes (owler.wire.encode_content): the serializer is MessagePack
        self.binary = is_binary(getattr(self, "serializer", None))
        self.task_id = context.get("taskid", 0)
        self.component_name = context.get("componentid", type(self).__name__)
        self.counters: Counter = Counter()
        self.gauges: dict[str, float] = {}
        self._stats_lock = threading.Lock()
        self._stats_written = 0.0
        run_dir = storm_conf.get("owler.run.dir")
        self._stats_path = (
            os.path.join(run_dir, f"{self.component_name}-{self.task_id}.json") if run_dir else None
        )
        self._shut = False
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._errors = M.ErrorThrottle(C.get_float(storm_conf, M.ERROR_INTERVAL_KEY,
                                                   M.DEFAULT_ERROR_INTERVAL))
        self.metrics = None
        self.prometheus = None
        # the reporters start with the first turn of pystorm's run loop, once initialize() (which
        # calls this first) has built what the component's collect() reads: started here, their
        # first snapshot could come before it (a Pushgateway push failed so on a loaded machine)
        self._reporting = context
        self._run = self._first_run

    def _first_run(self):
        """pystorm's first ``_run()``: start the reporters, then run as every time after."""
        self.__dict__.pop("_run", None)  # the class's own _run from now on
        self.start_reporting()
        return self._run()

    def start_reporting(self) -> None:
        """The metrics reporters of ``metrics.opensearch`` and ``metrics.prometheus.*``; a bad
        key is logged and shown in the Storm UI, and the component goes on without them."""
        context, self._reporting = getattr(self, "_reporting", None), None
        if context is None:
            return
        try:
            self.metrics = M.MetricsReporter.from_conf(self.conf, context, self.metrics_snapshot)
        except C.ConfError as exc:  # bad metrics keys must not stop the crawl
            log.error("metrics to OpenSearch disabled: %s", exc)
            self.report_error(f"metrics to OpenSearch disabled: {exc}")
        try:
            src = M.source_from(self.conf, context)
            self.prometheus = P.Pusher.from_conf(
                self.conf, {"topology": src.storm_id or "none", "component": src.component,
                            "task": str(src.task_id)}, self.snapshot, {"host": src.host},
                C.get_float(self.conf, M.INTERVAL_KEY, M.DEFAULT_INTERVAL))
        except C.ConfError as exc:  # likewise
            log.error("metrics to Prometheus disabled: %s", exc)
            self.report_error(f"metrics to Prometheus disabled: {exc}")

    # -- counters ---------------------------------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self.counters[name] += n

    def count_all(self, counts: dict[str, int]) -> None:
        """Add a library call's counts (name → how many) to the component's counters."""
        with self._stats_lock:
            self.counters.update(counts)

    def collect(self, counters: dict, gauges: dict) -> None:
        """Add values kept outside ``self.counters``/``self.gauges`` (an engine's) to a snapshot.

        May run on the metrics thread: read only what is safe to read from another thread.
        """

    def snapshot(self) -> tuple[dict, dict]:
        """(counters, gauges) now: the component's, :meth:`collect`'s, errors and metrics sink."""
        with self._stats_lock:
            counters, gauges = dict(self.counters), dict(self.gauges)
        self.collect(counters, gauges)
        if self._errors.reported:
            counters["errors/reported"] = self._errors.reported
        if self._errors.suppressed:
            counters["errors/suppressed"] = self._errors.suppressed
        if self.metrics is not None:
            counters.update(self.metrics.sink.stats())
            gauges["metrics/queued"] = self.metrics.sink.queued
        if getattr(self, "prometheus", None) is not None:
            counters.update(self.prometheus.stats())
        return counters, gauges

    def metrics_snapshot(self) -> dict:
        counters, gauges = self.snapshot()
        counters.update(gauges)
        return counters

    def write_stats(self, force: bool = False) -> None:
        if not self._stats_path:
            return
        now = time.time()
        if not force and now - self._stats_written < self.stats_interval:
            return
        self._stats_written = now
        counters, gauges = self.snapshot()
        doc = {"component": self.component_name, "task": self.task_id, "pid": os.getpid(),
               "sched": self.sched_policy, "time": now, "counters": counters, "gauges": gauges}
        tmp = f"{self._stats_path}.tmp"
        try:
            os.makedirs(os.path.dirname(self._stats_path), exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, self._stats_path)
        except OSError as exc:  # stats are best effort; the crawl goes on
            log.warning("cannot write stats file %s: %s", self._stats_path, exc)

    # -- errors for the Storm UI -------------------------------------------------------------
    def report_error(self, text: str) -> None:
        """Show ``text`` as this component's last error in the Storm UI.

        The multilang ``error`` command makes ShellBolt/ShellSpout call ``collector.reportError``.
        At most one every ``metrics.errors.interval`` seconds is sent; the others are counted
        (``errors/suppressed``) and the next one sent says how many. Safe from any thread:
        pystorm writes every message whole under its serializer's writer lock. No ``sync`` follows
        (a spout's would end the current next/ack/fail early). Callers log the error themselves.
        """
        dropped = self._errors.admit()
        if dropped is None:
            return
        try:
            self.send_message({"command": "error", "msg": M.error_message(text, dropped)})
        except Exception:  # noqa: BLE001 - Storm went away: the main loop finds out
            log.debug("cannot report an error to Storm", exc_info=True)

    # -- shutdown ----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Close what the component holds. Called once, from SIGTERM or when Storm went away."""

    def _shutdown_once(self) -> None:
        if getattr(self, "_shut", True):
            return
        self._shut = True
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - the process is ending; log and go
            log.exception("error during shutdown of %s", type(self).__name__)
        try:
            self.write_stats(force=True)
        except Exception:  # noqa: BLE001
            pass
        if getattr(self, "metrics", None) is not None:
            try:
                self.metrics.close(timeout=2.0)  # a last snapshot, if OpenSearch is there
            except Exception:  # noqa: BLE001
                pass
        if getattr(self, "prometheus", None) is not None:
            try:
                self.prometheus.close(timeout=2.0)  # the last values, if the gateway is there
            except Exception:  # noqa: BLE001
                pass

    def _on_sigterm(self, signum, frame):  # noqa: ARG002
        # Storm sends SIGTERM twice at a kill: the supervisor to every process of the worker, then
        # the worker's own shutdown to its shell components. Python runs the second handler inside
        # the first; it must let that one finish closing (WARC files) instead of exiting at once.
        if getattr(self, "_shut", True):
            return
        self._shutdown_once()
        os._exit(0)

    def _exit(self, status_code):  # pystorm calls this when Storm went away or after a crash
        self._shutdown_once()
        os._exit(status_code)


class StatusEmitter(OwlerComponent):
    """A component that emits statuses (``url, metadata, status`` on ``status``) and outlinks
    (``url, metadata, outlinks`` on ``outlinks``, one tuple per page)."""

    def emit_status(self, url: str, md: dict, status: Status, outlinks=(), anchors=None) -> None:
        """``url``'s status, after its outlinks (list form items or ``(url, anchor)`` pairs) as
        one tuple when it has any; anchored to ``anchors`` (pystorm's default: the input)."""
        if outlinks:
            self.emit([url, md, outlink.encode(outlinks)], stream=OUTLINKS_STREAM, anchors=anchors)
        self.emit([url, md, status.value], stream=STATUS_STREAM, anchors=anchors)

    def emit_error(self, url: str, md: dict, exc: BaseException, *, source: str = "parser",
                   cause: str | None = None, counter: str = "error") -> None:
        """The ERROR status of a document this component failed on: ``error.source``,
        ``error.cause`` (when given) and ``error.message`` in its metadata (the transient keys
        removed), counted as ``counter`` and shown in the Storm UI. The component lives on."""
        clean = wire.strip_transient(md)
        set_value(clean, ERROR_SOURCE, source)
        if cause:
            set_value(clean, ERROR_CAUSE, cause)
        set_value(clean, ERROR_MESSAGE, f"{type(exc).__name__}: {exc}"[:1000])
        self.count(counter)
        self.report_error(f"{source} failed on {url}: {type(exc).__name__}: {exc}")
        self.emit([url, clean, Status.ERROR.value], stream=STATUS_STREAM)
