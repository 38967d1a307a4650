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
   (:func:`owler.run.takedown.take_down`, on every backend, through the backend's own ``apply_updates``: counters,
   queues and tags stay as a crawl's own writes keep them);
3. lists the captures already archived, from the CDXJ indices beside the WARC files
   (:func:`owler.run.takedown.find_captures`): file, offset, length, URL, date, for whoever has
   to delete them downstream.

This module is the file and the matching, which every task needs (layer 3, beside the lists);
the frontier's and the archive's part is :mod:`owler.run.takedown`, the command's.

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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from owler import conf as C
from owler import urls
from owler.blacklist.hosts import IPV4_RE, clean_host, fast_host
from owler.constants import ERROR_CAUSE, TAKEDOWN_FILE_KEY, Status

log = logging.getLogger(__name__)

FILE_KEY = TAKEDOWN_FILE_KEY
DEFAULT_FILE = ".work/takedowns.tsv"
#: ``error.cause`` of a taken-down URL
CAUSE = "takedown"
MD_TARGET, MD_REASON, MD_DATE = "takedown.target", "takedown.reason", "takedown.date"
HEADER = "# owler take-downs: added (UTC)\ttarget\treason (owler takedown add|list|remove)\n"


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
