"""Blacklists: spam domains and webmaster opt-outs, from a folder of list files.

Every ``*.txt`` file in the folder is one list; its name without ``.txt`` is the list name that
:meth:`Blacklist.match` reports (``optout.txt`` → ``optout``); ``README*.txt`` files are not
lists. Line formats, detected per line:

- ``example.com`` / ``www.example.com`` / ``*.example.com`` / ``.example.com``: a domain or host;
  it matches that host and all its subdomains (on label boundaries);
- ``0.0.0.0 ads.example.com tracker.example.com`` / ``127.0.0.1 x.y`` / ``::1 x.y``: hosts-file
  lines (the names are domains as above; the usual ``localhost``/``broadcasthost`` lines of hosts
  files are skipped);
- ``||example.com^``: adblock-style domain rules (as in public domain lists);
- ``https://example.com/private/``: a URL prefix; it matches URLs on that host whose normalized
  form (scheme ignored) starts with it;
- an IP address alone: matches URLs with that IP as host;
- ``#`` or ``!`` comments (whole line, or after a space) and blank lines are ignored.

Invalid lines are counted and logged (the first few per file), never fatal. Lookup costs
O(number of labels of the host) dict lookups, whatever the size of the lists. The first file (in
name order) listing a domain names it.

Config keys read:

- ``blacklist.dir`` (``"blacklists"``): the folder, resolved with :func:`owler.conf.resource_path`;
  empty disables blacklisting. A missing folder is an empty blacklist (watched for appearance).
- ``blacklist.reload.interval`` (30): seconds between checks of the files' modification times by
  :meth:`Blacklist.maybe_reload`.

The lists apply twice: to outlinks before they reach the frontier (the blacklist bolt), and to
URLs the frontier already holds, just before they are fetched (the fetcher bolt,
:meth:`Blacklist.refusal`): an entry added to a list stops the fetching of its URLs within
``blacklist.reload.interval`` seconds, and each of them gets the final status ERROR with
``error.cause=blacklist:<list name>`` (fetched again only when its list no longer names it).

:meth:`Blacklist.from_conf` also reads the take-down file (:mod:`owler.blacklist.takedown`), reloaded with
the lists: a URL a take-down names is matched as the list ``takedown`` (:data:`TAKEDOWN_LIST`) and
refused with the take-down's metadata (``error.cause=takedown``), so every component that checks
the blacklists (outlinks, sitemaps, ``owler inject``, the fetcher) honours a take-down too.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping

from owler import urls
from owler.blacklist.hosts import (HOSTS_BOILERPLATE, HOSTS_IPS, IPV4_RE, clean_host,  # noqa: F401
                                   fast_host)
from owler.blacklist.takedown import TakedownList
from owler.conf import get_float, get_str, resource_path
from owler.constants import BLACKLIST_DIR_KEY

__all__ = ["Blacklist", "ListStats", "CAUSE_PREFIX"]

log = logging.getLogger(__name__)

DIR_KEY = BLACKLIST_DIR_KEY
RELOAD_INTERVAL_KEY = "blacklist.reload.interval"
#: ``error.cause`` of a URL not fetched because a list names it: ``blacklist:<list name>``
CAUSE_PREFIX = "blacklist:"
#: what :meth:`Blacklist.match` names for a URL of a take-down (the take-down file, not a list)
TAKEDOWN_LIST = "takedown"

_MAX_LOGGED_INVALID = 5
class ListStats:
    """Per-list counts from the last load."""

    __slots__ = ("name", "path", "domains", "prefixes", "invalid")

    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        self.domains = self.prefixes = self.invalid = 0

    def __repr__(self) -> str:
        return f"ListStats({self.name}: {self.domains} domains, {self.prefixes} prefixes, {self.invalid} invalid)"


class Blacklist:
    """Domain/host and URL-prefix blacklists loaded from a folder, reloaded when files change."""

    def __init__(self, directory: str | os.PathLike | None, reload_interval: float = 30.0) -> None:
        self.directory = Path(directory) if directory else None
        self.reload_interval = reload_interval
        self._domains: dict[str, str] = {}
        self._prefixes: dict[str, list[tuple[str, str]]] = {}
        self.stats: dict[str, ListStats] = {}
        self._snapshot: dict[str, tuple[int, int]] | None = None
        self._last_check = 0.0
        self.takedowns: TakedownList | None = None  # with from_conf
        self.reload()

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "Blacklist":
        """The lists of ``blacklist.dir`` and the take-down file of ``takedown.file``
        (:mod:`owler.blacklist.takedown`), both reloaded every ``blacklist.reload.interval`` seconds."""
        name = get_str(conf, DIR_KEY, "blacklists")
        interval = get_float(conf, RELOAD_INTERVAL_KEY, 30.0)
        directory = resource_path(name.strip()) if name and name.strip() else None
        blacklist = cls(directory, interval)
        blacklist.takedowns = TakedownList.from_conf(conf, interval)
        return blacklist

    # ---- loading -------------------------------------------------------------------------------

    def _scan(self) -> dict[str, tuple[int, int]]:
        if self.directory is None or not self.directory.is_dir():
            return {}
        snap = {}
        for p in self.directory.glob("*.txt"):
            if p.name.lower().startswith("readme"):
                continue  # the folder's documentation, not a list
            try:
                st = p.stat()
            except OSError:
                continue  # vanished between listing and stat
            if p.is_file():
                snap[p.name] = (st.st_mtime_ns, st.st_size)
        return snap

    def reload(self) -> None:
        """Load all list files now (replacing the current lists only when done)."""
        snapshot = self._scan()
        if self.directory is not None and not self.directory.is_dir():
            log.warning("blacklist folder %s does not exist: no blacklist until it appears", self.directory)
        domains: dict[str, str] = {}
        prefixes: dict[str, list[tuple[str, str]]] = {}
        stats: dict[str, ListStats] = {}
        for fname in sorted(snapshot):
            path = self.directory / fname  # type: ignore[operator]
            name = fname[:-4]
            st = ListStats(name, path)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    self._load_lines(fh, name, st, domains, prefixes)
            except OSError as exc:
                log.error("cannot read blacklist %s: %s", path, exc.strerror or exc)
                snapshot.pop(fname, None)
                continue
            if st.invalid:
                log.warning("blacklist %s: %d invalid lines ignored", path, st.invalid)
            log.info("blacklist %s: %d domains, %d URL prefixes", name, st.domains, st.prefixes)
            stats[name] = st
        self._domains, self._prefixes, self.stats = domains, prefixes, stats
        self._snapshot = snapshot

    def _load_lines(self, fh, name, st, domains, prefixes) -> None:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            for mark in (" #", "\t#", " !"):
                cut = line.find(mark)
                if cut >= 0:
                    line = line[:cut].rstrip()
            if "://" in line:
                url = urls.normalize(line)
                if url is None:
                    self._invalid(st, lineno, raw)
                    continue
                host = urls.host_of(url)
                rest = url[url.index("://") + 1:]  # "//host[:port]/path..."
                prefixes.setdefault(host, []).append((rest, name))
                st.prefixes += 1
                continue
            if line.startswith("||"):
                line = line[2:].rstrip("^")
            tokens = line.split()
            if len(tokens) > 1 and (tokens[0] in HOSTS_IPS or IPV4_RE.match(tokens[0])):
                hosts = [t for t in tokens[1:] if t.lower() not in HOSTS_BOILERPLATE]
            elif len(tokens) == 1:
                hosts = tokens
            else:
                self._invalid(st, lineno, raw)
                continue
            for token in hosts:
                h = clean_host(token)
                if h is None:
                    self._invalid(st, lineno, raw)
                    continue
                if h not in domains:
                    domains[h] = name
                st.domains += 1

    @staticmethod
    def _invalid(st: ListStats, lineno: int, raw: str) -> None:
        st.invalid += 1
        if st.invalid <= _MAX_LOGGED_INVALID:
            log.warning("blacklist %s line %d: not a domain, hosts line or URL: %r", st.path, lineno, raw.rstrip("\n"))

    def maybe_reload(self, now: float | None = None) -> bool:
        """Reload when a list file changed, appeared or disappeared; checks at most every
        ``reload_interval`` seconds. Returns whether it reloaded. Never raises on file errors."""
        now = time.monotonic() if now is None else now
        if now - self._last_check < self.reload_interval:
            return False
        self._last_check = now
        if self.takedowns is not None:
            self.takedowns.maybe_reload(now)
        try:
            snap = self._scan()
        except OSError as exc:
            log.error("cannot scan blacklist folder %s: %s", self.directory, exc)
            return False
        if snap == self._snapshot:
            return False
        self.reload()
        return True

    # ---- lookup --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._domains) + sum(len(v) for v in self._prefixes.values())

    def match_host(self, host: str) -> str | None:
        """The list naming this host or one of its parent domains, else None."""
        domains = self._domains
        if not domains or not host:
            return None
        h = host.lower().rstrip(".")
        if h in domains:
            return domains[h]
        if IPV4_RE.match(h) or h.startswith("["):
            return None  # IPs match exactly only
        i = h.find(".")
        while i >= 0:
            h = h[i + 1:]
            name = domains.get(h)
            if name is not None:
                return name
            i = h.find(".")
        return None

    def match(self, url: str) -> str | None:
        """Name of the list that blacklists ``url`` (by host/domain or URL prefix), else None;
        ``takedown`` for a URL that a take-down names (:mod:`owler.blacklist.takedown`). An
        unparsable URL matches nothing."""
        if self.takedowns is not None and self.takedowns.match(url) is not None:
            return TAKEDOWN_LIST
        return self._listed(url)

    def _listed(self, url: str) -> str | None:
        """:meth:`match` over the lists alone."""
        if not self._domains and not self._prefixes:
            return None
        host = fast_host(url)
        if host is None:
            host = urls.host_of(url)
            if not host:
                return None
        name = self.match_host(host)
        if name is not None:
            return name
        entries = self._prefixes.get(host)
        if entries:
            href = urls.normalize(url, keep_fragment=False)
            if href:
                rest = href[href.index("://") + 1:]
                for prefix, list_name in entries:
                    if rest.startswith(prefix):
                        return list_name
        return None

    def refusal(self, url: str, now: float | None = None) -> str | dict | None:
        """For a URL about to be fetched: the ``error.cause`` of its ERROR status when a list
        names it (``blacklist:optout``), the metadata of a take-down that names it
        (:meth:`owler.blacklist.takedown.Takedown.metadata`), else None. Reloads the lists first
        when they are due for a check (:meth:`maybe_reload`). The take-downs are matched once."""
        self.maybe_reload(now)
        if self.takedowns is not None:
            entry = self.takedowns.match(url)
            if entry is not None:
                return entry.metadata()
        name = self._listed(url)
        return None if name is None else CAUSE_PREFIX + name
