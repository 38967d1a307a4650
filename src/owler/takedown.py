"""Take-downs: sites and URL prefixes whose webmasters asked the crawl to stop, at once (issue 47).

An opt-out list (:mod:`owler.blacklist`) refuses a URL when it is next due; a take-down acts on
everything the crawl has of the site as soon as it is made. ``owler takedown add TARGET --reason
TEXT`` (:mod:`owler.run.cli`):

1. writes the entry to the take-down file (``takedown.file``), which every task of the crawl
   reloads within ``blacklist.reload.interval`` seconds (through :class:`owler.blacklist.Blacklist`,
   which every component that checks the blacklists builds): from then on no request reaches the
   site (the fetcher refuses a URL just before its fetch, so URLs already in its queues are
   dropped there), its outlinks are not stored, and any status a task still reports for one of its
   URLs is written as ERROR (the status updater: :meth:`TakedownList.overrule`);
2. gives every URL of the site that the frontier holds the status ERROR at once
   (:func:`take_down`, on every backend, through the backend's own ``apply_updates``: counters,
   queues and tags stay as a crawl's own writes keep them);
3. lists the captures already archived, from the CDXJ indices beside the WARC files
   (:mod:`owler.warc.format.cdxj`): file, offset, length, URL, date, for whoever has to delete
   them downstream.

A taken-down URL gets ``error.cause`` ``takedown`` (:data:`CAUSE`) and ``takedown.target``,
``takedown.reason``, ``takedown.date`` (:data:`MD_TARGET` …, persisted by ``metadata.persist``'s
``takedown.*``). Its next fetch date is the scheduler's for an ERROR (``fetchInterval.error``); when
that comes and the entry is still there, the fetcher refuses it again, without a request; after
``owler takedown remove`` it is fetched then.

Targets (:func:`parse_target`): a host (``example.com``: that host and its subdomains, on label
boundaries, as a blacklist's domain line) or a URL prefix (``https://example.com/private/``: URLs
whose normalised form, the scheme left aside, starts with it).

The file: UTF-8 text, one entry per line, ``added<TAB>target<TAB>reason`` (``added`` in ISO 8601
UTC), ``#`` comments. It is rewritten whole (a temporary file renamed over it, under a lock file:
two commands never lose each other's entries), so a task reading it sees the old list or the new
one. It survives restarts; on a cluster of several machines it must be on storage that every
worker reads (the loopback cluster's hosts share the file system). A line that cannot be read is
logged and skipped by a crawl, never fatal; ``owler takedown list`` names it.

Config keys: ``takedown.file`` (``.work/takedowns.tsv``, relative to the project root: one of
:data:`owler.conf.PATH_KEYS`), ``blacklist.reload.interval`` (the reload's period).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from owler import conf as C
from owler import urls
from owler.blacklist import IPV4_RE, clean_host, fast_host
from owler.constants import ERROR_CAUSE, PARTITION_MODE_IP, Status

log = logging.getLogger(__name__)

FILE_KEY = "takedown.file"
DEFAULT_FILE = ".work/takedowns.tsv"
#: ``error.cause`` of a taken-down URL
CAUSE = "takedown"
MD_TARGET, MD_REASON, MD_DATE = "takedown.target", "takedown.reason", "takedown.date"
HEADER = "# owler take-downs: added (UTC)\ttarget\treason (owler takedown add|list|remove)\n"
#: URLs per frontier write of :func:`take_down`
BATCH = 1000


class TakedownError(ValueError):
    """A target that is neither a host nor an http(s) URL prefix, or a file that cannot be
    written; the message says which."""


@dataclass(frozen=True)
class Takedown:
    """One entry: ``target`` as normalised (a host, or a URL prefix), ``added`` (ISO 8601 UTC),
    ``reason``. ``prefix`` is the URL prefix without its scheme (``//host/path``), empty for a
    host."""

    target: str
    added: str
    reason: str
    host: str
    prefix: str = ""

    def matches(self, url: str) -> bool:
        host = _host(url)
        if host is None:
            return False
        if not self.prefix:
            return _within(host, self.host)
        if host != self.host:
            return False
        href = urls.normalize(url)
        return href is not None and href[href.index("://") + 1:].startswith(self.prefix)

    def metadata(self) -> dict[str, list[str]]:
        """What a taken-down URL's metadata gets (module docstring)."""
        return {ERROR_CAUSE: [CAUSE], MD_TARGET: [self.target], MD_REASON: [self.reason],
                MD_DATE: [self.added]}

    def line(self) -> str:
        return f"{self.added}\t{self.target}\t{self.reason}\n"


def _host(url: str) -> str | None:
    host = fast_host(url)
    if host is None:
        host = urls.host_of(url) or None
    return host


def _within(host: str, domain: str) -> bool:
    """``host`` is ``domain`` or one of its subdomains (IP addresses: only themselves)."""
    if host == domain:
        return True
    if IPV4_RE.match(domain) or domain.startswith("["):
        return False
    return host.endswith("." + domain)


def parse_target(text: str) -> tuple[str, str, str]:
    """``(target, host, prefix)`` of a host or URL prefix as written by an operator; raises
    :class:`TakedownError` for anything else."""
    raw = text.strip()
    if "://" in raw:
        href = urls.normalize(raw)
        if href is None:
            raise TakedownError(f"{raw!r} is not an http(s) URL")
        return href, urls.host_of(href), href[href.index("://") + 1:]
    if "/" in raw or not raw:
        raise TakedownError(f"{raw!r} is neither a host (example.com) nor a URL prefix "
                            "(https://example.com/path/)")
    host = clean_host(raw)
    if host is None:
        raise TakedownError(f"{raw!r} is not a host name")
    return host, host, ""


def make(target: str, reason: str, added: str) -> Takedown:
    """An entry from its parts (:func:`parse_target`'s rules)."""
    reason = " ".join(reason.split())  # one line, one field
    norm, host, prefix = parse_target(target)
    return Takedown(norm, added, reason, host, prefix)


def iso(now: float) -> str:
    return datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def file_of(conf: Mapping[str, Any] | None) -> Path:
    """The take-down file of ``conf`` (absolute: relative names from the project root)."""
    name = C.get_str(conf or {}, FILE_KEY, DEFAULT_FILE) or DEFAULT_FILE
    return Path(C.absolute_paths({FILE_KEY: name})[FILE_KEY])


def read(path: Path) -> tuple[list[Takedown], list[str]]:
    """The entries of the file at ``path`` (none when it does not exist) and the problems of
    the lines that could not be read (``line N: why``)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], []
    entries, problems = [], []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = raw.split("\t")
        if len(parts) != 3:
            problems.append(f"line {lineno}: not added<TAB>target<TAB>reason: {raw[:200]!r}")
            continue
        try:
            entries.append(make(parts[1], parts[2], parts[0].strip()))
        except TakedownError as exc:
            problems.append(f"line {lineno}: {exc}")
    return entries, problems


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write(path: Path, entries: list[Takedown]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        fh.writelines(e.line() for e in entries)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def add(path: Path, target: str, reason: str, now: float | None = None) -> tuple[Takedown, bool]:
    """Add an entry for ``target``; returns it and whether it is new (an existing entry for the
    same target is kept as it was, with its date and reason)."""
    entry = make(target, reason, iso(time.time() if now is None else now))
    if not entry.reason:
        raise TakedownError("a take-down needs a reason (--reason)")
    try:
        with _locked(path):
            entries, _ = read(path)
            for old in entries:
                if old.target == entry.target:
                    return old, False
            _write(path, [*entries, entry])
    except OSError as exc:
        raise TakedownError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return entry, True


def remove(path: Path, target: str) -> Takedown | None:
    """Remove the entry for ``target``; returns it, or None when the file has none."""
    norm = parse_target(target)[0]
    try:
        with _locked(path):
            entries, _ = read(path)
            kept = [e for e in entries if e.target != norm]
            if len(kept) == len(entries):
                return None
            _write(path, kept)
    except OSError as exc:
        raise TakedownError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return next(e for e in entries if e.target == norm)


class TakedownList:
    """The take-down file as a crawl's task reads it: reloaded when it changed (checked at most
    every ``reload_interval`` seconds), matched in a few dict lookups per URL whatever its size."""

    def __init__(self, path: Path | None, reload_interval: float = 30.0) -> None:
        self.path = path
        self.reload_interval = reload_interval
        self._hosts: dict[str, Takedown] = {}
        self._prefixes: dict[str, list[Takedown]] = {}
        self.entries: list[Takedown] = []
        self._stamp: tuple[int, int] | None = None
        self._last_check = 0.0
        self.reload()

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any] | None, reload_interval: float = 30.0
                  ) -> "TakedownList":
        return cls(file_of(conf), reload_interval)

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat() if self.path is not None else None
        except OSError:
            return None
        return None if st is None else (st.st_mtime_ns, st.st_size)

    def reload(self) -> None:
        stamp = self._stat()
        entries, problems = read(self.path) if stamp is not None else ([], [])
        for problem in problems[:5]:
            log.warning("take-down file %s: %s (skipped)", self.path, problem)
        hosts: dict[str, Takedown] = {}
        prefixes: dict[str, list[Takedown]] = {}
        for e in entries:
            if e.prefix:
                prefixes.setdefault(e.host, []).append(e)
            else:
                hosts.setdefault(e.host, e)
        if entries or self.entries:
            log.info("take-down file %s: %d entries", self.path, len(entries))
        self._hosts, self._prefixes, self.entries, self._stamp = hosts, prefixes, entries, stamp

    def maybe_reload(self, now: float | None = None) -> bool:
        """Reload when the file changed, appeared or went; never raises on file errors."""
        now = time.monotonic() if now is None else now
        if now - self._last_check < self.reload_interval:
            return False
        self._last_check = now
        if self._stat() == self._stamp:
            return False
        self.reload()
        return True

    def __len__(self) -> int:
        return len(self.entries)

    def match(self, url: str) -> Takedown | None:
        """The entry that takes ``url`` down, else None (a host entry before a prefix)."""
        if not self.entries:
            return None
        host = _host(url)
        if host is None:
            return None
        hosts = self._hosts
        if hosts:
            h = host
            while True:
                e = hosts.get(h)
                if e is not None:
                    return e
                if IPV4_RE.match(h) or h.startswith("["):
                    break
                i = h.find(".")
                if i < 0:
                    break
                h = h[i + 1:]
        for e in self._prefixes.get(host, ()):
            if e.matches(url):
                return e
        return None

    def overrule(self, url: str, status: Status | str, md: dict[str, list[str]]
                 ) -> Status | str:
        """The status to write for ``url``: ERROR with the take-down's metadata (written into
        ``md``) when an entry names it and ``status`` is a result of the crawl's (a DISCOVERED is
        left: it is create-only and never overwrites the ERROR), else ``status`` as it is."""
        if not self.entries or Status(status) == Status.DISCOVERED:
            return status
        entry = self.match(url)
        if entry is None:
            return status
        md.update(entry.metadata())
        return Status.ERROR


# -- the frontier -----------------------------------------------------------------------------------
def candidate_keys(frontier: Any, entry: Takedown, mode: str) -> list[str] | None:
    """The queues that may hold URLs of ``entry``: its host, its pay-level domain and the keys
    of its subdomains the frontier has; None with ``byIP`` keys (any queue may: every URL is
    read)."""
    if mode == PARTITION_MODE_IP:
        return None
    keys = {entry.host, urls.pay_level_domain(entry.host)}
    if not entry.prefix:
        keys.update(subdomain_keys(frontier, entry.host))
    return sorted(keys)


def subdomain_keys(frontier: Any, host: str) -> list[str]:
    """The keys of ``frontier`` that are subdomains of ``host``, asked of each backend in its
    own way: SQLite's ``queues`` (every key), an OpenSearch terms aggregation
    with a regular expression, a URLFrontier service's ListQueues."""
    if IPV4_RE.match(host) or host.startswith("["):
        return []
    suffix = "." + host
    from owler.frontier.sqlite import SQLiteFrontier

    if isinstance(frontier, SQLiteFrontier):
        rows = frontier.conn.execute(
            "SELECT key FROM queues WHERE key LIKE ? ESCAPE '\\'",
            ("%" + suffix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"),))
        return [k for (k,) in rows if k.endswith(suffix)]
    from owler.frontier.opensearch import OpenSearchFrontier

    if isinstance(frontier, OpenSearchFrontier):
        import re
        body = {"size": 0, "aggs": {"keys": {"terms": {
            "field": "key", "size": 65536, "include": ".+" + re.escape(suffix)}}}}
        _, data = frontier.client.request("POST", f"/{frontier.index}/_search", body)
        return [b["key"] for b in data["aggregations"]["keys"]["buckets"]
                if b["key"].endswith(suffix)]
    from owler.frontier.urlfrontier import URLFrontierClient

    if isinstance(frontier, URLFrontierClient):
        return [k for k in frontier.keys() if k.endswith(suffix)]
    raise TypeError(f"cannot list the queues of a {type(frontier).__name__}")


def take_down(frontier: Any, entry: Takedown, updater: Any, mode: str,
              now: float | None = None) -> int:
    """Give every URL of ``entry`` in ``frontier`` the status ERROR (module docstring), through
    ``updater`` (:class:`owler.status.StatusUpdater`: the crawl's own metadata and scheduling
    rules) and the backend's ``apply_updates``; returns how many URLs were written. URLs already
    taken down by the same target are left as they are (running it again writes nothing)."""
    from owler.frontier.dump import records

    now = time.time() if now is None else now
    keys = candidate_keys(frontier, entry, mode)
    batch: list = []
    written = 0

    def flush() -> None:
        nonlocal written
        if batch:
            frontier.apply_updates(batch)
            written += len(batch)
            batch.clear()

    for key in (keys if keys is not None else [None]):
        # (a URL written here may come again later in its queue's order, by its new date: it is
        # then one this target took down, and left)
        for rec in records(frontier, key=key):
            if not entry.matches(rec.url):
                continue
            md = rec.metadata
            if rec.status == Status.ERROR and md.get(MD_TARGET) == [entry.target]:
                continue
            update = updater.to_update(rec.url, {**md, **entry.metadata()}, Status.ERROR, now)
            batch.append(replace(update, key=rec.key))
            if len(batch) >= BATCH:
                flush()
    flush()
    return written


def archive_indices(conf: Mapping[str, Any], scratch: Path) -> list[tuple[str, Path]]:
    """The CDXJ indices of the crawl's WARC files: ``(where the WARC files are, index file)``,
    from ``warc.dir`` and, with ``warc.s3.bucket``, from the bucket's ``warc.s3.prefix`` (each
    index copied into ``scratch`` to be searched)."""
    from owler.constants import WARC_DIR_KEY
    from owler.warc.format.cdxj import cdxj_files

    out: list[tuple[str, Path]] = []
    local = C.absolute_paths({WARC_DIR_KEY: C.get_str(conf, WARC_DIR_KEY, ".work/warc")})
    folder = Path(local[WARC_DIR_KEY])
    if folder.is_dir():
        out.extend((str(folder), p) for p in cdxj_files(folder))
    bucket = C.get_str(conf, "warc.s3.bucket", "")
    if bucket:
        from botocore.exceptions import BotoCoreError, ClientError

        from owler.warc.storage import s3 as S3

        prefix = C.get_str(conf, "warc.s3.prefix", "")
        client = S3.client(conf)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                        Prefix=prefix):
                for obj in page.get("Contents", []):
                    key = obj["Key"]
                    if key.endswith(".cdxj"):
                        copy = scratch / f"{len(out)}-{Path(key).name}"
                        client.download_file(bucket, key, str(copy))
                        where = f"s3://{bucket}/{key.rpartition('/')[0]}".rstrip("/")
                        out.append((where, copy))
        except (BotoCoreError, ClientError) as exc:
            raise TakedownError(f"cannot read the indices in s3://{bucket}/{prefix}: "
                                f"{exc}") from exc
    return out


def find_captures(indices: list[tuple[str, Path]], entry: Takedown) -> list[tuple[str, Any]]:
    """``(where, capture)`` of every archived capture of ``entry`` in ``indices``
    (:func:`archive_indices`; :func:`owler.warc.format.cdxj.find_captures`), by date."""
    from owler.warc.format.cdxj import find_captures as search

    out = []
    for where, index in indices:
        out.extend((where, c) for c in search([index], entry.target))
    out.sort(key=lambda wc: (wc[1].timestamp, wc[1].url))
    return out
