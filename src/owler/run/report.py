"""What ``owler status`` shows, and the dashboard's ``status`` with it (:func:`crawl_status`): URLs
per status, due now, queues, of the crawl and of the frontier's other crawls; a warc2warc
pipeline's progress; the latest metrics of a crawl, read
back from StormCrawler's metrics index (written by :mod:`owler.task.metrics`).

Config keys: ``metrics.interval`` (the window of "latest"), ``opensearch.metrics.index.name`` and
the ``opensearch.metrics.<k>`` / ``opensearch.<k>`` connection keys.
"""

from __future__ import annotations

import contextlib
import textwrap
import time
from typing import Any, Mapping

from owler import conf as C
from owler.constants import METRICS_ENABLED_KEY, SQLITE_PATH_KEY, STATUS_NAMES
from owler.osclient import OpenSearchError, OSClient, epoch_of
from owler.task.metrics import DEFAULT_INTERVAL, INTERVAL_KEY, KIND, index_name, iso_millis


class StatusError(RuntimeError):
    """The crawl's status cannot be read; the message says why, ``exit_code`` is the CLI's (1: no
    frontier or a frontier error, 3: a service cannot be reached)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def crawl_status(conf: dict, now: float | None = None, with_metrics: bool = True) -> dict:
    """One JSON object: the crawl the configuration names (``crawl``: ``frontier.crawl.id`` or
    ``urlfrontier.crawlid``), its count of URLs per status (:data:`STATUS_NAMES`) and ``total``,
    ``due_now``, ``queues``, ``queues_due``, ``top_hosts`` (``[key, URLs]``, 10), ``most_delayed``
    (``[key, seconds due]``, 5; not through a URLFrontier service), ``frontier`` (where it is);
    ``crawls``: per crawl of the frontier (its other crawls too: :mod:`owler.frontier.crawls`)
    the URLs per status, ``total``, ``due_now`` and ``queues``; ``warc2warc`` when a warc2warc
    pipeline ran on this frontier; ``metrics`` with ``metrics.opensearch`` (and ``with_metrics``);
    ``estimate`` when the figures come from a snapshot of a large OpenSearch frontier (its
    ``as_of``, ``age_s`` and ``writes_since``: :meth:`OpenSearchFrontier.estimate`).
    ``conf`` has absolute paths. Raises :class:`StatusError`."""
    from owler.frontier import (FrontierError, backend_of, configured_crawl, crawl_spaces,
                                list_crawls, open_frontier, space_exists)
    from owler.frontier.crawls import DEFAULT_CRAWL, sqlite_path
    from owler.warc.warc2warc.progress import open_progress

    now = time.time() if now is None else now
    try:
        crawl = configured_crawl(conf)
        backend = backend_of(conf)
        if backend == "sqlite" and not space_exists(conf, crawl):
            path = sqlite_path(str(conf.get(SQLITE_PATH_KEY)), crawl)
            of = "" if crawl == DEFAULT_CRAWL else f" for crawl {crawl!r}"
            raise StatusError(f"no frontier at {path}{of} (run `owler inject SEEDS` first)")
        if backend == "opensearch" and crawl != DEFAULT_CRAWL and not space_exists(conf, crawl):
            # a misspelt crawl is said, not made (opening it would create its index)
            raise StatusError(f"no crawl {crawl!r} in the OpenSearch frontier; crawls: "
                              f"{', '.join(crawl_spaces(conf)) or 'none'}")
        frontier = open_frontier(conf)
    except FrontierError as exc:
        raise StatusError(f"cannot use the frontier: {exc}",
                          3 if "cannot reach" in str(exc) else 1) from None
    except C.ConfError as exc:
        raise StatusError(str(exc), 2) from None
    try:
        doc: dict[str, Any] = {"crawl": crawl, **_summary(frontier, now)}
        doc["queues_due"] = frontier.queue_count(now)
        doc["top_hosts"] = [[k, c] for k, c in frontier.top_hosts(10)]
        if hasattr(frontier, "most_delayed"):  # not a URLFrontier service: it has no such query
            doc["most_delayed"] = [[k, s] for k, s in frontier.most_delayed(now, 5)]
        doc["frontier"] = frontier.location
        others = (list_crawls(conf) if backend == "urlfrontier" else list(crawl_spaces(conf)))
        doc["crawls"] = {}
        for name in dict.fromkeys([crawl, *others]):
            if name == crawl:
                doc["crawls"][name] = {k: doc[k] for k in (*STATUS_NAMES, "total", "due_now",
                                                           "queues")}
                continue
            with contextlib.closing(open_frontier(conf, crawl=name)) as other:
                doc["crawls"][name] = _summary(other, now)
    except FrontierError as exc:
        raise StatusError(str(exc), 3 if "cannot reach" in str(exc) else 1) from None
    finally:
        frontier.close()
    try:
        progress = open_progress(conf, create=False)  # a warc2warc pipeline ran on this frontier
        if progress is not None:
            try:
                doc["warc2warc"] = progress.summary()
            finally:
                progress.close()
    except Exception as exc:  # noqa: BLE001 - OpenSearch away or the like: say so, not a trace
        raise StatusError(f"the warc2warc progress: {exc}") from None
    if with_metrics and C.get_bool(conf, METRICS_ENABLED_KEY, False):  # the metrics index
        doc["metrics"] = latest_metrics(conf)
    return doc


def _summary(frontier: Any, now: float) -> dict[str, Any]:
    """A crawl's URLs per status, ``total``, ``due_now`` and ``queues``."""
    frontier.refresh()
    counts = frontier.counts()
    out: dict[str, Any] = {name: counts.get(name, 0) for name in STATUS_NAMES}
    out["total"] = sum(out.values())
    out["due_now"] = frontier.due_count(now)
    # the embedded frontier counts to the minute: URLs due later in the current minute too
    out["due_resolution_s"] = getattr(frontier, "due_resolution", 0)
    out["queues"] = frontier.queue_count()
    # a large OpenSearch frontier answers from figures computed a moment ago, with their bound
    estimate = frontier.estimate(now) if hasattr(frontier, "estimate") else None
    if estimate is not None:
        out["estimate"] = estimate
    return out


def latest_metrics(conf: Mapping[str, Any], client: OSClient | None = None) -> dict:
    """Per component: the sum over its tasks of each name's latest value, and the newest document.

    Only documents written within ``max(3 × metrics.interval, 60 s)`` of the newest one count (the
    tasks of the latest run or runs; every live task writes all its values every interval). Returns
    ``{"index", "address", "newest", "storm_ids", "components": {name: {"tasks", "newest",
    "counters"}}}``, or ``{"index", "error"}`` when the index cannot be read.
    """
    index = index_name(conf)
    own = client is None
    client = client or OSClient(conf, KIND)
    out: dict[str, Any] = {"index": index, "address": client.address}
    try:
        status, _ = client.request("POST", f"/{index}/_refresh", ok=(200, 404), retries=0)
        if status == 404:
            out.update(newest=None, storm_ids=[], components={})
            return out
        _, data = client.request("POST", f"/{index}/_search", {
            "size": 0, "aggs": {"newest": {"max": {"field": "timestamp"}}}})
        newest = ((data or {}).get("aggregations") or {}).get("newest", {}).get("value")
        if newest is None:
            out.update(newest=None, storm_ids=[], components={})
            return out
        window = max(3 * C.get_float(conf, INTERVAL_KEY, DEFAULT_INTERVAL), 60.0)
        since = int(newest) - int(window * 1000)
        rows = _latest_rows(client, index, since)
    except OpenSearchError as exc:
        return {"index": index, "address": client.address, "error": str(exc)}
    finally:
        if own:
            client.close()
    comps: dict[str, dict] = {}
    storm_ids = set()
    for (storm_id, comp, task, name), (value, ts) in rows.items():
        storm_ids.add(storm_id)
        c = comps.setdefault(comp, {"tasks": set(), "newest": 0.0, "counters": {}})
        c["tasks"].add((storm_id, task))
        c["newest"] = max(c["newest"], ts)
        c["counters"][name] = c["counters"].get(name, 0.0) + value
    out["newest"] = iso_millis(newest / 1000.0)
    out["storm_ids"] = sorted(storm_ids)
    out["components"] = {
        comp: {"tasks": len(c["tasks"]), "newest": iso_millis(c["newest"]),
               "counters": {k: _number(v) for k, v in sorted(c["counters"].items())}}
        for comp, c in sorted(comps.items())}
    return out


def _latest_rows(client: OSClient, index: str, since_ms: int) -> dict[tuple, tuple[float, float]]:
    """(storm id, component, task, name) → (latest value, its time in epoch seconds)."""
    rows: dict[tuple, tuple[float, float]] = {}
    after = None
    while True:
        composite: dict[str, Any] = {"size": 1000, "sources": [
            # documents of other writers (StormCrawler's) may lack srcStormId or srcTaskId
            {"s": {"terms": {"field": "srcStormId", "missing_bucket": True}}},
            {"c": {"terms": {"field": "srcComponent"}}},
            {"t": {"terms": {"field": "srcTaskId", "missing_bucket": True}}},
            {"n": {"terms": {"field": "name"}}}]}
        if after:
            composite["after"] = after
        body = {"size": 0, "query": {"range": {"timestamp": {"gte": since_ms,
                                                             "format": "epoch_millis"}}},
                "aggs": {"k": {"composite": composite, "aggs": {"last": {"top_hits": {
                    "size": 1, "sort": [{"timestamp": {"order": "desc"}}],
                    "_source": ["value", "timestamp"]}}}}}}
        _, data = client.request("POST", f"/{index}/_search", body)
        agg = ((data or {}).get("aggregations") or {}).get("k") or {}
        buckets = agg.get("buckets") or []
        for b in buckets:
            hits = b["last"]["hits"]["hits"]
            if not hits:
                continue
            src = hits[0].get("_source") or {}
            ts = epoch_of(src.get("timestamp")) or 0.0
            try:
                value = float(src.get("value"))
            except (TypeError, ValueError):
                continue
            key = b["key"]
            rows[(key["s"] or "", key["c"], key["t"], key["n"])] = (value, ts)
        after = agg.get("after_key")
        if not buckets or not after:
            return rows


def _number(v: float) -> float | int:
    return int(v) if float(v).is_integer() else round(v, 3)


def format_latest(metrics: Mapping[str, Any], width: int = 100) -> list[str]:
    """Text lines for ``owler status``."""
    where = f"OpenSearch index {metrics.get('index')!r} at {metrics.get('address')}"
    if metrics.get("error"):
        return [f"metrics: unavailable ({where}): {metrics['error']}"]
    if not metrics.get("components"):
        return [f"metrics: none yet ({where})"]
    lines = [f"metrics ({where}; newest {metrics['newest']}; "
             f"topology {', '.join(metrics.get('storm_ids') or ['?'])}):"]
    for comp, c in metrics["components"].items():
        tasks = f"{c['tasks']} task{'s' if c['tasks'] != 1 else ''}"
        lines.append(f"  {comp} ({tasks}, newest {c['newest']}):")
        text = " ".join(f"{k}={v}" for k, v in c["counters"].items())
        lines.extend(textwrap.wrap(text, width=width, initial_indent="    ",
                                   subsequent_indent="    ", break_on_hyphens=False))
    return lines
