"""The dashboard's charts from a run's metrics documents (:mod:`owler.run.history` rows).

Rows are ``(time, component, task, name, value)``; counters are cumulative per task (a restarted
task starts again from 0), gauges are values at a time. :func:`charts` puts every row on a common
time grid (times rounded to ``resolution`` seconds: one grid point per snapshot), carries each
task's last value forward, and builds the charts of :data:`CHARTS`: a rate is computed per task
and then summed, so a task that restarts adds no negative spike; a total is summed over tasks.

The result is what the page (``resources/dashboard/dashboard.js``) hands to uPlot: ``t`` (epoch
seconds) and per chart its series of values (None where nothing is known yet).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable, Sequence

from owler.constants import STATUS_NAMES

Key = tuple[str, int, str]  # component, task, name

#: the document names the charts read: these names, and every name under these prefixes (a
#: history with many tasks is read for these only: history.OpenSearchHistory)
NAMES = ("fetched", "bytes", "warc/bytes", "records", "warc/records", "due", "queues", "queues_due")
PREFIXES = ("http/", "error.cause/", "status/", "queue/", "storm/", "files/")
Values = list[float | None]


class Grid:
    """Rows on a common time grid, each (component, task, name) carried forward."""

    def __init__(self, rows: Iterable[Sequence], resolution: float = 1.0) -> None:
        res = max(resolution, 1e-3)
        points: dict[Key, dict[float, float]] = defaultdict(dict)
        times = set()
        for ts, comp, task, name, value in rows:
            t = round(round(ts / res) * res, 3)
            times.add(t)
            points[(comp, task, name)][t] = value  # the last of a grid point wins
        self.t = sorted(times)
        self.keys = sorted(points)
        self._points = points
        self._filled: dict[Key, Values] = {}

    def filled(self, key: Key) -> Values:
        got = self._filled.get(key)
        if got is None:
            last, got, pts = None, [], self._points[key]
            for t in self.t:
                last = pts.get(t, last)
                got.append(last)
            self._filled[key] = got
        return got

    def select(self, want: Callable[[str, str], bool]) -> list[Key]:
        return [k for k in self.keys if want(k[0], k[2])]

    def total(self, keys: Sequence[Key], scale: float = 1.0) -> Values:
        """The sum over ``keys`` at each point (None until one of them has a value)."""
        out: Values = []
        for i in range(len(self.t)):
            vals = [v for v in (self.filled(k)[i] for k in keys) if v is not None]
            out.append(round(sum(vals) * scale, 6) if vals else None)
        return out

    def rate(self, keys: Sequence[Key]) -> Values:
        """Per second, per task then summed; a counter that went down (a restarted task) counts
        from 0."""
        out: Values = [None] * len(self.t)
        for k in keys:
            vals = self.filled(k)
            for i in range(1, len(self.t)):
                a, b = vals[i - 1], vals[i]
                if b is None:
                    continue
                step = b - a if a is not None and b >= a else b
                r = step / (self.t[i] - self.t[i - 1])
                out[i] = r if out[i] is None else out[i] + r
        return [None if v is None else round(v, 3) for v in out]


def _series(label: str, values: Values) -> dict:
    return {"label": label, "values": values}


def _grouped(g: Grid, want: Callable[[str, str], bool], label: Callable[[str], str],
             how: str) -> list[dict]:
    """One series per label of the wanted keys' names (summed over tasks and components)."""
    groups: dict[str, list[Key]] = defaultdict(list)
    for k in g.select(want):
        groups[label(k[2])].append(k)
    return [_series(lab, g.rate(keys) if how == "rate" else g.total(keys))
            for lab, keys in sorted(groups.items())]


def _http_class(name: str) -> str:
    code = name.split("/", 1)[1]
    return f"{code[0]}xx" if code[:1].isdigit() else code


def _pages(g: Grid) -> list[dict]:
    return [_series("pages/s", g.rate(g.select(lambda c, n: c == "fetcher" and n == "fetched")))]


def _http(g: Grid) -> list[dict]:
    return _grouped(g, lambda c, n: c == "fetcher" and n.startswith("http/"), _http_class, "rate")


def _errors(g: Grid) -> list[dict]:
    return _grouped(g, lambda c, n: c not in ("frontier",) and n.startswith("error.cause/"),
                    lambda n: n.split("/", 1)[1], "total")


def _frontier(g: Grid) -> list[dict]:
    out = []
    for status in STATUS_NAMES:
        keys = g.select(lambda c, n, s=status: c == "frontier" and n == f"status/{s}")
        values = g.total(keys)
        if any(values):  # a status that never had a URL is left out
            out.append(_series(status, values))
    out.append(_series("due", g.total(g.select(lambda c, n: c == "frontier" and n == "due"))))
    return out


def _queues(g: Grid) -> list[dict]:
    return [_series(label, g.total(g.select(lambda c, n, m=name: c == "frontier" and n == m)))
            for label, name in (("queues", "queues"), ("with URLs due", "queues_due"),
                                ("URLs in the busiest", "queue/busiest"))]


def _delayed(g: Grid) -> list[dict]:
    return [_series("most delayed queue, s", g.total(g.select(
        lambda c, n: c == "frontier" and n == "queue/delayed_s")))]


def _bytes(g: Grid) -> list[dict]:
    return [_series("fetched", g.total(g.select(lambda c, n: c == "fetcher" and n == "bytes"),
                                       1e-6)),
            _series("WARC written", g.total(g.select(
                lambda c, n: n == "warc/bytes" and c in ("fetcher", "spout")), 1e-6))]


def _latency(g: Grid) -> list[dict]:
    """Storm's latencies of the last 10 minutes: each spout's complete latency (emit to ack of
    the tuple tree), each bolt's process latency (receipt to ack: a multilang bolt's execute
    latency is only the hand-over to its process)."""
    out = []
    for name, label in (("storm/complete_latency_ms", "complete"),
                        ("storm/process_latency_ms", "process")):
        for comp in sorted({k[0] for k in g.select(lambda c, n, nn=name: n == nn)}):
            keys = g.select(lambda c, n, cc=comp, nn=name: c == cc and n == nn)
            out.append(_series(f"{comp} {label}", g.total(keys)))
    return out


def _failed(g: Grid) -> list[dict]:
    """Storm's failed tuples per component since the topology started (Storm counts a sample of
    the tuples, ``topology.stats.sample.rate``, and scales it up)."""
    return [_series(comp, g.total(g.select(lambda c, n, cc=comp: c == cc and n == "storm/failed")))
            for comp in sorted({k[0] for k in g.select(lambda c, n: n == "storm/failed")})]


def _files(g: Grid) -> list[dict]:
    def files(*states: str) -> Values:
        return g.total(g.select(lambda c, n: c == "warc2warc" and n in
                                {f"files/{s}" for s in states}))
    return [_series("done", files("done")), _series("in progress", files("reading", "pending")),
            _series("failed", files("failed"))]


def _records(g: Grid) -> list[dict]:
    # the spout copies them (a history of the former copy bolt, "warc", counts "records")
    return [_series("records/s", g.rate(g.select(
        lambda c, n: (c, n) in (("spout", "warc/records"), ("warc", "records")))))]


#: id, title, unit, builder, topologies (None: every one)
CHARTS = [
    ("pages", "Pages fetched per second", "pages/s", _pages, ("explorative", "sitemap")),
    ("records", "WARC records per second", "records/s", _records, ("warc2warc",)),
    ("files", "warc2warc input files", "files", _files, ("warc2warc",)),
    ("http", "HTTP status classes", "responses/s", _http, ("explorative", "sitemap")),
    ("errors", "Errors by error.cause", "total", _errors, None),
    ("frontier", "Frontier by status, and URLs due", "URLs", _frontier, None),
    ("queues", "Queues", "queues / URLs", _queues, None),
    ("delayed", "The most delayed queue", "s", _delayed, None),
    ("bytes", "Bytes fetched and WARC bytes written", "MB", _bytes, None),
    ("latency", "Storm latency per component (last 10 minutes)", "ms", _latency, None),
    ("failed", "Failed tuples per component (Storm)", "total", _failed, None),
]


def charts(rows: Iterable[Sequence], topology: str, resolution: float = 1.0) -> dict:
    """``{"t": [...], "charts": [{"id", "title", "unit", "series": [{"label", "values"}],
    "points"}]}``: ``points`` counts the values that are not None over all series."""
    g = Grid(rows, resolution)
    out = []
    for cid, title, unit, build, topologies in CHARTS:
        if topologies is not None and topology not in topologies:
            continue
        series = build(g) if g.t else []
        points = sum(v is not None for s in series for v in s["values"])
        out.append({"id": cid, "title": title, "unit": unit, "series": series, "points": points})
    return {"t": g.t, "charts": out}
