"""What every OWLer component shares on the Storm side.

- ``owler_setup(storm_conf, context)``: the crawler configuration is the topology configuration
  (StormCrawler's way): every crawler key travels in the Storm conf.
- A clean end: Storm stops a shell component with SIGTERM (topology killed) or by closing its
  stdin (worker gone). Both paths call :meth:`OwlerComponent.shutdown` once, where a component
  closes what it holds (WARC files, database connections) before the process exits.
- Counters written every few seconds to ``<owler.run.dir>/<component>-<task>.json`` for
  ``owler run``'s progress line and idle detection: a file, because ``report_metric`` kills a
  ShellBolt that has no Java metric registered under the same name.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections import Counter

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

    # -- counters ---------------------------------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self.counters[name] += n

    def write_stats(self, force: bool = False) -> None:
        if not self._stats_path:
            return
        now = time.time()
        if not force and now - self._stats_written < self.stats_interval:
            return
        self._stats_written = now
        with self._stats_lock:
            doc = {"component": self.component_name, "task": self.task_id, "pid": os.getpid(),
                   "time": now, "counters": dict(self.counters), "gauges": dict(self.gauges)}
        tmp = f"{self._stats_path}.tmp"
        try:
            os.makedirs(os.path.dirname(self._stats_path), exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, self._stats_path)
        except OSError as exc:  # stats are best effort; the crawl goes on
            log.warning("cannot write stats file %s: %s", self._stats_path, exc)

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

    def _on_sigterm(self, signum, frame):  # noqa: ARG002
        self._shutdown_once()
        os._exit(0)

    def _exit(self, status_code):  # pystorm calls this when Storm went away or after a crash
        self._shutdown_once()
        os._exit(status_code)
