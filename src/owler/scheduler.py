"""Schedulers: when a URL is due again (StormCrawler's ``Scheduler``, ``DefaultScheduler``,
``AdaptiveScheduler``).

``schedule(status, metadata, now) -> float | None``: the next fetch date in epoch seconds, ``None``
= never fetch again. All intervals are in minutes; ``-1`` means never.

DefaultScheduler, in order of precedence:

1. metadata ``scheduler.delay.mins`` (the sitemap parser staggers URLs with it), any status;
2. custom intervals from the configuration (StormCrawler's syntax):
   ``fetchInterval.<mdKey>=<value>: N`` applies to every status (DISCOVERED included, as in
   StormCrawler) when the metadata has ``<value>`` among the values of ``<mdKey>``;
   ``fetchInterval.<STATUS>.<mdKey>=<value>: N`` applies to that status only and beats the generic
   rule of the same key/value. The first matching rule in configuration order wins. If the part
   after ``fetchInterval.`` does not start with a status name, all of it up to ``=`` is the key
   (``fetchInterval.parse.lang=de`` → key ``parse.lang``; StormCrawler would fail to start);
3. metadata ``fetchInterval`` (minutes, a per-URL override; also what AdaptiveScheduler keeps),
   for FETCHED and REDIRECTION only;
3b. metadata ``sitemap.changefreq`` (what a sitemap says of the URL), FETCHED and REDIRECTION,
   with ``scheduler.sitemap.changefreq`` (true): always/hourly 60, daily 1440, weekly 10080,
   monthly 43200, yearly 525600 minutes, never = ``scheduler.sitemap.max.interval``; clamped to
   [``scheduler.sitemap.min.interval`` (60), ``scheduler.sitemap.max.interval`` (525600)];
4. by status: ``fetchInterval.default`` (FETCHED, REDIRECTION; 1440), ``fetchInterval.fetch.error``
   (FETCH_ERROR; 120), ``fetchInterval.error`` (ERROR; 44640 when the key is missing, StormCrawler's
   code default); DISCOVERED → now.

A DISCOVERED URL with a sitemap ``sitemap.priority`` p (0..1) and no ``scheduler.delay.mins`` is
due ``p * scheduler.sitemap.priority.seconds`` (60) seconds before now: within its queue, what a
webmaster ranks higher is fetched first (the queue order is the due date). A sitemap's
``lastmod`` is not a scheduling input here: a changed lastmod makes a known URL due in the
frontier (:mod:`owler.frontier.sqlite`, "Sitemap refresh").

An unparsable per-URL value (metadata) is ignored with a warning, never an exception.

Config keys read: ``scheduler.class``, ``fetchInterval.default``, ``fetchInterval.fetch.error``,
``fetchInterval.error``, ``fetchInterval.[STATUS.]key=value``, ``scheduler.adaptive.*``,
``scheduler.sitemap.*``.
"""

from __future__ import annotations

import importlib
import logging
import re
from typing import Any, Mapping

from owler import conf as C
from owler.conf import ConfError
from owler.constants import (DELAY_MINS, FETCH_INTERVAL, FETCH_STATUS_CODE, LAST_MODIFIED,
                             SIGNATURE, SIGNATURE_OLD, SITEMAP_CHANGEFREQ, SITEMAP_PRIORITY, Status)
from owler.metadata import first

log = logging.getLogger(__name__)

#: Key of the scheduler implementation (dotted path or a StormCrawler class name).
SCHEDULER_CLASS_KEY = "scheduler.class"
SIGNATURE_CHANGE_DATE = "signatureChangeDate"
#: sitemap changefreq → minutes ("never" → scheduler.sitemap.max.interval)
CHANGEFREQ_MINUTES = {"always": 60.0, "hourly": 60.0, "daily": 1440.0, "weekly": 10080.0,
                      "monthly": 43200.0, "yearly": 525600.0}

_CUSTOM = re.compile(r"^fetchInterval\.(.+?)=(.+)$")
_STATUS_NAMES = {s.value for s in Status}


def _minutes(value: str | None, what: str, url_hint: str = "") -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        log.warning("ignoring metadata %s=%r%s: not a number of minutes", what, value, url_hint)
        return None


class DefaultScheduler:
    """Fixed intervals per status, with custom rules and per-URL overrides (module docstring)."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.default_interval = C.get_float(conf, "fetchInterval.default", 1440)
        self.fetch_error_interval = C.get_float(conf, "fetchInterval.fetch.error", 120)
        self.error_interval = C.get_float(conf, "fetchInterval.error", 44640)
        # (md key, md value) -> {status or None: minutes}, configuration order kept
        self.custom: dict[tuple[str, str], dict[Status | None, float]] = {}
        for key in conf:
            m = _CUSTOM.match(str(key))
            if not m:
                continue
            path, md_value = m.group(1), m.group(2)
            status: Status | None = None
            head, dot, rest = path.partition(".")
            if dot and head in _STATUS_NAMES and rest:
                status, md_key = Status(head), rest
            else:
                md_key = path
            minutes = C.get_float(conf, str(key), 0)
            self.custom.setdefault((md_key, md_value), {})[status] = minutes
        self.use_changefreq = C.get_bool(conf, "scheduler.sitemap.changefreq", True)
        self.changefreq_min = C.get_float(conf, "scheduler.sitemap.min.interval", 60)
        self.changefreq_max = C.get_float(conf, "scheduler.sitemap.max.interval", 525600)
        self.priority_seconds = C.get_float(conf, "scheduler.sitemap.priority.seconds", 60)

    def custom_interval(self, status: Status, metadata: Mapping[str, list[str]]) -> float | None:
        """Minutes of the first custom rule that matches the metadata, or ``None``."""
        for (md_key, md_value), per_status in self.custom.items():
            values = metadata.get(md_key)
            if not values or md_value not in values:
                continue
            if status in per_status:
                return per_status[status]
            if None in per_status:
                return per_status[None]
        return None

    def interval(self, status: Status, metadata: Mapping[str, list[str]]) -> float:
        """Minutes until the next fetch (-1 = never; 0 = now)."""
        minutes = _minutes(first(metadata, DELAY_MINS), DELAY_MINS)
        if minutes is None:
            minutes = self.custom_interval(status, metadata)
        if minutes is None and status in (Status.FETCHED, Status.REDIRECTION):
            minutes = _minutes(first(metadata, FETCH_INTERVAL), FETCH_INTERVAL)
            if minutes is None and self.use_changefreq:
                minutes = self.changefreq_interval(first(metadata, SITEMAP_CHANGEFREQ))
        if minutes is None:
            if status in (Status.FETCHED, Status.REDIRECTION):
                minutes = self.default_interval
            elif status == Status.FETCH_ERROR:
                minutes = self.fetch_error_interval
            elif status == Status.ERROR:
                minutes = self.error_interval
            else:
                minutes = 0.0
        return minutes

    def changefreq_interval(self, changefreq: str | None) -> float | None:
        """Minutes for a sitemap ``changefreq`` (module docstring), None when there is none."""
        if not changefreq:
            return None
        cf = changefreq.strip().lower()
        minutes = self.changefreq_max if cf == "never" else CHANGEFREQ_MINUTES.get(cf)
        if minutes is None:
            return None
        return max(self.changefreq_min, min(self.changefreq_max, minutes))

    def schedule(self, status: Status, metadata: dict[str, list[str]], now: float) -> float | None:
        """Next fetch date (epoch seconds) or ``None`` for never. May update ``metadata`` (subclasses)."""
        status = Status(status)
        minutes = self.interval(status, metadata)
        if minutes == -1:
            return None
        when = now + minutes * 60.0
        if (status == Status.DISCOVERED and self.priority_seconds > 0
                and SITEMAP_PRIORITY in metadata and DELAY_MINS not in metadata):
            try:
                p = float(first(metadata, SITEMAP_PRIORITY))
            except (TypeError, ValueError):
                p = None
            if p is not None and 0.0 <= p <= 1.0:
                when -= p * self.priority_seconds
        return when


class AdaptiveScheduler(DefaultScheduler):
    """Shorter intervals for pages that change, longer for pages that don't (StormCrawler's
    AdaptiveScheduler). Needs ``signature`` and ``signatureOld`` in the metadata (a signature parse
    filter with a copy key) and ``fetch.statusCode``.

    For FETCHED: start from metadata ``fetchInterval`` (else the DefaultScheduler's interval); if
    the signature changed (or there is no previous one), ``signatureChangeDate`` = now and
    ``interval = (1-decr)*interval + decr*min``; if unchanged (or HTTP 304),
    ``interval = min(max, interval*(1+incr))``. The result is kept in metadata ``fetchInterval`` and
    ``signatureOld`` is removed. Without a signature the default interval is used and recorded.
    Other statuses: ``fetchInterval`` and ``signatureChangeDate`` are removed (ERROR also removes
    ``last-modified`` when ``scheduler.adaptive.setLastModified``) and DefaultScheduler decides.

    Config keys: ``scheduler.adaptive.fetchInterval.min`` (60), ``.max`` (20160),
    ``.rate.incr`` (0.5), ``.rate.decr`` (0.5), ``scheduler.adaptive.setLastModified`` (false).
    """

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(conf)
        conf = conf or {}
        self.min_interval = C.get_float(conf, "scheduler.adaptive.fetchInterval.min", 60)
        self.max_interval = C.get_float(conf, "scheduler.adaptive.fetchInterval.max", 20160)
        self.incr = C.get_float(conf, "scheduler.adaptive.fetchInterval.rate.incr", 0.5)
        self.decr = C.get_float(conf, "scheduler.adaptive.fetchInterval.rate.decr", 0.5)
        self.set_last_modified = C.get_bool(conf, "scheduler.adaptive.setLastModified", False)

    def schedule(self, status: Status, metadata: dict[str, list[str]], now: float) -> float | None:
        status = Status(status)
        if status != Status.FETCHED:
            metadata.pop(FETCH_INTERVAL, None)
            metadata.pop(SIGNATURE_CHANGE_DATE, None)
            if status == Status.ERROR and self.set_last_modified:
                metadata.pop(LAST_MODIFIED, None)
            return super().schedule(status, metadata, now)
        signature = first(metadata, SIGNATURE)
        base = _minutes(first(metadata, FETCH_INTERVAL), FETCH_INTERVAL)
        if base is None or base < 0:
            base = self.interval(status, {k: v for k, v in metadata.items() if k != FETCH_INTERVAL})
        if base == -1:
            return None
        if signature is None:
            metadata[FETCH_INTERVAL] = [_fmt(base)]
            return now + base * 60.0
        old = first(metadata, SIGNATURE_OLD)
        not_modified = first(metadata, FETCH_STATUS_CODE) == "304"
        if not_modified or (old is not None and old == signature):
            interval = min(self.max_interval, base * (1.0 + self.incr))
        else:
            metadata[SIGNATURE_CHANGE_DATE] = [_iso(now)]
            interval = (1.0 - self.decr) * base + self.decr * self.min_interval
            if self.set_last_modified:
                metadata[LAST_MODIFIED] = [_http_date(now)]
        metadata[FETCH_INTERVAL] = [_fmt(interval)]
        metadata.pop(SIGNATURE_OLD, None)
        return now + interval * 60.0


def _fmt(minutes: float) -> str:
    return str(int(minutes)) if float(minutes).is_integer() else f"{minutes:.2f}"


def _iso(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _http_date(ts: float) -> str:
    from email.utils import formatdate

    return formatdate(ts, usegmt=True)


_ALIASES = {
    "DefaultScheduler": DefaultScheduler,
    "AdaptiveScheduler": AdaptiveScheduler,
}
_SC_PACKAGES = ("org.apache.stormcrawler.persistence.", "com.digitalpebble.stormcrawler.persistence.")


def load_scheduler(conf: Mapping[str, Any] | None = None):
    """The scheduler named by ``scheduler.class``: a dotted path ``module.Class`` (built with the
    conf) or StormCrawler's class names (``org.apache.stormcrawler.persistence.DefaultScheduler``,
    ``…AdaptiveScheduler``). Raises :class:`ConfError` when it cannot be loaded."""
    conf = conf or {}
    name = (C.get_str(conf, SCHEDULER_CLASS_KEY, "owler.scheduler.DefaultScheduler") or "").strip()
    if not name:
        name = "owler.scheduler.DefaultScheduler"
    for pkg in _SC_PACKAGES:
        if name.startswith(pkg) and name[len(pkg):] in _ALIASES:
            return _ALIASES[name[len(pkg):]](conf)
    module_name, _, class_name = name.rpartition(".")
    if not module_name:
        if name in _ALIASES:
            return _ALIASES[name](conf)
        raise ConfError(f"{SCHEDULER_CLASS_KEY}: {name!r} is not a dotted path module.Class")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfError(f"{SCHEDULER_CLASS_KEY}: cannot load {name!r}: {exc}") from exc
    scheduler = cls(conf)
    if not callable(getattr(scheduler, "schedule", None)):
        raise ConfError(f"{SCHEDULER_CLASS_KEY}: {name!r} has no schedule(status, metadata, now)")
    return scheduler
