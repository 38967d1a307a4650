"""What every OWLer component shares on the Storm side.

- ``owler_setup(storm_conf, context)``: the crawler configuration is the topology configuration
  (StormCrawler's way): every crawler key travels in the Storm conf.
- A clean end: Storm stops a shell component with SIGTERM (topology killed) or by closing its
  stdin (worker gone). Both paths call :meth:`OwlerComponent.shutdown` once, where a component
  closes what it holds (WARC files, database connections) before the process exits.
- Counters written every few seconds to ``<owler.run.dir>/<component>-<task>.json`` for
  ``owler run``'s progress line and idle detection: a file, because ``report_metric`` kills a
  ShellBolt that has no Java metric registered under the same name.
- With ``metrics.opensearch: true`` the same counters and gauges go every ``metrics.interval``
  seconds to StormCrawler's metrics index from a background thread (:mod:`owler.metrics`).
- :meth:`OwlerComponent.report_error`: an operational error shown in the Storm UI (throttled by
  ``metrics.errors.interval``).
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
from owler import metrics as M

log = logging.getLogger("owler")


class OwlerComponent:
    """Mixin for pystorm components (put it first in the bases)."""

    stats_interval = 2.0

    def owler_setup(self, storm_conf: dict, context: dict) -> None:
        self.conf = storm_conf
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
        try:
            self.metrics = M.MetricsReporter.from_conf(storm_conf, context, self.metrics_snapshot)
        except C.ConfError as exc:  # bad metrics keys must not stop the crawl
            log.error("metrics to OpenSearch disabled: %s", exc)
            self.report_error(f"metrics to OpenSearch disabled: {exc}")

    # -- counters ---------------------------------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self.counters[name] += n

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
               "time": now, "counters": counters, "gauges": gauges}
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

    def _on_sigterm(self, signum, frame):  # noqa: ARG002
        self._shutdown_once()
        os._exit(0)

    def _exit(self, status_code):  # pystorm calls this when Storm went away or after a crash
        self._shutdown_once()
        os._exit(status_code)
