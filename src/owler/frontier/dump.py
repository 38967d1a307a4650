"""A crawl's URLs as JSON lines (``owler frontier dump``) and back (``owler inject --jsonl``).

The format: one JSON object per line (UTF-8, each line ended by ``\\n``), one line per URL::

    {"url": "https://example.com/a", "key": "example.com", "crawl": "DEFAULT",
     "status": "FETCHED", "nextFetchDate": 1767225600.25,
     "metadata": {"fetch.statusCode": ["200"], "lang": ["de"]}}

- ``url``: the URL as stored (never normalised again on the way back);
- ``key``: its partition key (queue);
- ``crawl``: the crawl it belongs to (:mod:`owler.frontier.crawls`);
- ``status``: ``DISCOVERED``, ``FETCHED``, ``FETCH_ERROR``, ``REDIRECTION`` or ``ERROR``;
- ``nextFetchDate``: epoch seconds as a number (a whole second without a fraction), or ``null``:
  never fetched again;
- ``metadata``: an object whose every value is a list of strings, keys as the crawler names them
  (``fetch.statusCode``: an OpenSearch index's ``%2E`` is a dot again).

Dumping (:func:`dump`) streams from any backend, a page at a time, never the whole frontier in
memory (:func:`records`):

- SQLite: keyset pagination by ``rowid``, each page read in a read transaction of its own (a writer
  waits for one page at most). An update keeps a URL's row, so every URL comes once, even one
  rewritten while the dump runs. With ``--key`` the pages follow the queue's index,
  ``(next_fetch_date, rowid)``: a URL rescheduled during the dump may then come twice or not at
  all.
- OpenSearch: ``search_after`` sorted by ``url`` (a URL's only document: its ``_id`` is the URL's
  hash) over a point in time opened once every write so far is searchable: the dump is the index
  as it was at that instant, whatever the crawl writes meanwhile. OpenSearch keeps whole seconds
  of a next fetch date (the fraction is dropped when a URL is written), so its dump has no
  fractions.
- A URLFrontier service (``frontier.backend: urlfrontier``): ListURLs of the crawl, ``start`` and
  ``size`` paging through each service; the status comes from the metadata this project's
  client and service keep it in (:data:`~owler.frontier.urlfrontier_api.STATUS_KEY`), dates in
  whole seconds (the API's ``refetchable_from_date``). The pages are positions in the service's
  listing: a crawl written to during the dump may lose or repeat a URL at a page's edge. Stop
  the crawl for an exact copy.

``--status`` (repeatable) and ``--key`` filter (the service has no status filter: this side drops
the other statuses). ``--crawl`` names the crawl (else ``frontier.crawl.id`` /
``urlfrontier.crawlid``, else ``DEFAULT``); ``--all-crawls`` dumps every crawl the frontier holds
one after the other. A crawl the frontier does not have is an error naming those it has
(:class:`UnknownCrawl`); the dump opens nothing it would have to create.

Injecting (:func:`check_dump`, then :class:`Loader`) validates the whole file first and writes
only a file without a broken line: a broken line (not JSON, no ``url``, an unknown status, a
metadata value that is not a list of strings, a ``nextFetchDate`` that is neither a number nor
``null``, an unknown field: a misspelt one would otherwise be dropped without a word) is
reported with its line number, and then nothing at all is written (:class:`BadDump`). Standard
input is kept in a temporary file for the second pass. ``url``, ``status`` and ``nextFetchDate``
are required; ``key`` (else the destination's ``partition.url.mode`` of the URL), ``crawl`` and
``metadata`` (else none) may be left out. The crawl of a line: ``--crawl`` when given, else the
line's ``crawl``, else the configuration's.

Lines are written in batches through the backend's ``apply_updates``, as the status updater
writes: a DISCOVERED line is create-only (a URL the destination knows stays as it is, except
that a DISCOVERED from a sitemap is the sitemap refresh of :mod:`owler.frontier.refresh`, as in a
crawl), any other status overwrites status, next fetch date (``null``: never), key and metadata.
The URL filters are not applied (the URLs passed them when they were first stored). Tags are
computed from the metadata by the destination's ``frontier.tags``; ``frontier.tags.priority`` is
not applied again, since a dumped date is the stored one, already moved by the source's
priorities. Items a backend reports failed are sent again (three times); a write that fails for
good stops the load with the number of lines written before it: running the same command
again writes those again unchanged (a DISCOVERED is create-only, any other line writes the same
values). Through a URLFrontier service a DISCOVERED line is due when the service stores it (the
API's discovered item has no date) and dates are whole seconds.

Progress goes to stderr every few seconds on a long run (:class:`Progress`), then a summary with
the URLs per status.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, TextIO

import orjson

from owler.constants import STATUS_NAMES, Status
from owler.frontier import (DEFAULT_KEY, NEVER, TAG_PRIORITY_KEY, FrontierError, FrontierRecord,
                            StatusUpdate, backend_of, configured_crawl, crawl_spaces,
                            list_crawls, open_frontier)
from owler.frontier.crawls import DEFAULT_CRAWL, CrawlIDError, crawl_id
from owler.urls import partition_key, partition_mode

__all__ = ["FIELDS", "DumpLine", "DumpLineError", "BadDump", "DumpFileError", "UnknownCrawl",
           "InjectError", "record_line", "parse_line", "records", "dump_crawls", "dump",
           "Dumped", "open_dump", "check_dump", "read_dump", "Loader", "Progress", "format_counts"]

#: the fields of a line, in the order a dump writes them
FIELDS = ("url", "key", "crawl", "status", "nextFetchDate", "metadata")
_REQUIRED = ("url", "status", "nextFetchDate")
#: URLs per page read from each backend
SQLITE_PAGE = 5000
OPENSEARCH_PAGE = 2000
URLFRONTIER_PAGE = 10_000
#: how long OpenSearch keeps the dump's point in time between two pages
PIT_KEEP_ALIVE = "5m"
#: updates per apply_updates when injecting
BATCH = 1000
#: how often items a backend reported failed are sent again, and the pause before the first retry
RETRIES = 3
RETRY_PAUSE = 1.0
#: broken lines reported one by one (the others are counted)
MAX_REPORTED = 20


class DumpLineError(ValueError):
    """A line that is not a URL of a dump: ``lineno`` and ``reason``."""

    def __init__(self, lineno: int, reason: str) -> None:
        super().__init__(f"line {lineno}: {reason}")
        self.lineno = lineno
        self.reason = reason


class BadDump(ValueError):
    """A dump with broken lines: the first :data:`MAX_REPORTED` in ``errors``, ``count`` of
    them in all, among ``lines`` lines."""

    def __init__(self, errors: list[DumpLineError], count: int, lines: int) -> None:
        super().__init__(f"{count} broken line(s) of {lines}")
        self.errors = errors
        self.count = count
        self.lines = lines


class DumpFileError(OSError):
    """The dump cannot be read at all (missing, a directory, no permission)."""


class UnknownCrawl(LookupError):
    """A crawl the frontier does not have; the message names those it has."""


class InjectError(RuntimeError):
    """A write that failed for good; ``written`` lines were written before it."""

    def __init__(self, message: str, written: int) -> None:
        super().__init__(message)
        self.written = written


@dataclass(slots=True)
class DumpLine:
    """A parsed line. ``key`` and ``crawl`` are ``None`` when the line leaves them out."""

    url: str
    status: Status
    next_fetch_date: float | None
    key: str | None = None
    crawl: str | None = None
    metadata: dict[str, list[str]] = field(default_factory=dict)


# -- the format ------------------------------------------------------------------------------------
def _number(value: float) -> float | int:
    """A date as written: a whole number of seconds without a fraction."""
    return int(value) if float(value).is_integer() else value


def record_line(rec: FrontierRecord, crawl: str) -> bytes:
    """``rec`` of crawl ``crawl`` as a line of a dump (with its ``\\n``)."""
    nfd = rec.next_fetch_date
    status = rec.status.value if isinstance(rec.status, Status) else str(rec.status)
    return orjson.dumps({
        "url": rec.url, "key": rec.key, "crawl": crawl, "status": status,
        "nextFetchDate": None if nfd is None or nfd >= NEVER else _number(nfd),
        "metadata": rec.metadata}, option=orjson.OPT_APPEND_NEWLINE)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) <= 80 else "a string"
    return "a list" if isinstance(value, list) else "an object"


def parse_line(raw: bytes | str, lineno: int) -> DumpLine | None:
    """A line of a dump; ``None`` for a blank line. :class:`DumpLineError` says what is wrong."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise DumpLineError(lineno, f"not JSON ({exc.msg} at character {exc.pos + 1})") from None
    if not isinstance(doc, dict):
        raise DumpLineError(lineno, f"{_kind(doc)}, not a JSON object")
    unknown = [k for k in doc if k not in FIELDS]
    if unknown:
        raise DumpLineError(lineno, f"unknown field {unknown[0]!r} (a line has "
                                    f"{', '.join(FIELDS)})")
    for name in _REQUIRED:
        if name not in doc:
            what = " (epoch seconds, or null for never)" if name == "nextFetchDate" else ""
            raise DumpLineError(lineno, f"no {name}{what}")
    url = doc["url"]
    if not isinstance(url, str) or not url.strip():
        raise DumpLineError(lineno, f"url is {_kind(url)}, not a URL")
    status = doc["status"]
    if status not in STATUS_NAMES:
        raise DumpLineError(lineno, f"unknown status {status!r} (one of "
                                    f"{', '.join(STATUS_NAMES)})")
    nfd = doc["nextFetchDate"]
    if nfd is not None:
        if isinstance(nfd, bool) or not isinstance(nfd, (int, float)):
            raise DumpLineError(lineno, f"nextFetchDate is {_kind(nfd)}, not a number of epoch "
                                        "seconds or null (never)")
        if not 0 <= nfd < NEVER:
            raise DumpLineError(lineno, f"nextFetchDate {nfd!r} is out of range (0 to "
                                        f"{NEVER:.0f}, 9999-12-31T23:59:59Z; null for never)")
        nfd = float(nfd)
    key = doc.get("key")
    if key is not None and (not isinstance(key, str) or not key):
        raise DumpLineError(lineno, f"key is {_kind(key)}, not a partition key (or null)")
    crawl = doc.get("crawl")
    if crawl is not None:
        if not isinstance(crawl, str):
            raise DumpLineError(lineno, f"crawl is {_kind(crawl)}, not a crawl ID (or null)")
        try:
            crawl = crawl_id(crawl)
        except CrawlIDError as exc:
            raise DumpLineError(lineno, str(exc)) from None
    md = doc.get("metadata")
    if md is None:
        md = {}
    elif not isinstance(md, dict):
        raise DumpLineError(lineno, f"metadata is {_kind(md)}, not an object of lists of strings")
    for k, values in md.items():
        if not k:
            raise DumpLineError(lineno, "metadata has an empty key")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            bad = values if not isinstance(values, list) else next(
                v for v in values if not isinstance(v, str))
            raise DumpLineError(lineno, f"metadata {k!r}: {_kind(bad)} where a list of strings "
                                        "belongs")
    return DumpLine(url, Status(status), nfd, key, crawl, md)


# -- reading a backend -------------------------------------------------------------------------------
def records(frontier: Any, statuses: Iterable[str] | None = None, key: str | None = None,
            page: int | None = None) -> Iterator[FrontierRecord]:
    """Every URL of ``frontier``'s crawl (only ``statuses``, only queue ``key`` when given),
    streamed a page at a time (module docstring: how each backend pages)."""
    names = sorted({Status(s).value for s in statuses}) if statuses else []
    from owler.frontier.sqlite import SQLiteFrontier

    if isinstance(frontier, SQLiteFrontier):
        return _sqlite_records(frontier, names, key, page or SQLITE_PAGE)
    from owler.frontier.opensearch import OpenSearchFrontier

    if isinstance(frontier, OpenSearchFrontier):
        return _opensearch_records(frontier, names, key, page or OPENSEARCH_PAGE)
    from owler.frontier.urlfrontier import URLFrontierClient

    if isinstance(frontier, URLFrontierClient):
        return _urlfrontier_records(frontier, names, key, page or URLFRONTIER_PAGE)
    raise TypeError(f"cannot list the URLs of a {type(frontier).__name__}")


def _sqlite_records(f: Any, names: list[str], key: str | None, page: int
                    ) -> Iterator[FrontierRecord]:
    cols = "SELECT rowid, url, status, next_fetch_date, key, metadata, updated FROM urls"
    where = [f"status IN ({','.join('?' * len(names))})"] if names else []
    if key is None:
        order, after, last = " ORDER BY rowid LIMIT ?", "rowid > ?", (-(2 ** 63),)
    else:  # the queue's rows through the (key, next_fetch_date) index, whose entries end in rowid
        where.append("key = ?")
        order = " ORDER BY next_fetch_date, rowid LIMIT ?"
        after, last = "(next_fetch_date, rowid) > (?, ?)", (-math.inf, -(2 ** 63))
    args = [*names, *(() if key is None else (key,))]
    sql = f"{cols} WHERE {' AND '.join([*where, after])}{order}"
    cur = f.conn.cursor()
    while True:
        cur.execute("BEGIN")  # one read transaction per page: a writer waits a page at most
        try:
            rows = cur.execute(sql, (*args, *last, page)).fetchall()
        finally:
            cur.execute("COMMIT")
        for _, url, status, nfd, k, md, updated in rows:
            yield FrontierRecord(url, Status(status), None if nfd >= NEVER else nfd, k,
                                 orjson.loads(md), updated)
        if len(rows) < page:
            return
        rowid, nfd = rows[-1][0], rows[-1][3]
        last = (rowid,) if key is None else (nfd, rowid)


def _opensearch_records(f: Any, names: list[str], key: str | None, page: int
                        ) -> Iterator[FrontierRecord]:
    from owler.frontier.opensearch import _read_md
    from owler.osclient import OpenSearchError, epoch_of

    filters: list[dict] = []
    if names:
        filters.append({"terms": {"status": names}})
    if key is not None:
        filters.append({"term": {"key": key}})
    f.refresh()  # every write so far in the point in time
    try:
        _, data = f.client.request("POST", f"/{f.index}/_search/point_in_time",
                                   params={"keep_alive": PIT_KEEP_ALIVE})
    except OpenSearchError as exc:
        raise FrontierError(f"cannot open a point in time on {f.index!r}: {exc}") from exc
    pit = data["pit_id"]
    body: dict[str, Any] = {
        "size": page, "track_total_hits": False, "query": {"bool": {"filter": filters}},
        "sort": [{"url": "asc"}], "_source": ["url", "status", "key", "nextFetchDate",
                                              "metadata"]}
    try:
        while True:
            body["pit"] = {"id": pit, "keep_alive": PIT_KEEP_ALIVE}
            try:
                _, data = f.client.request("POST", "/_search", body)
            except OpenSearchError as exc:
                raise FrontierError(f"cannot read {f.index!r}: {exc}") from exc
            pit = data.get("pit_id") or pit
            hits = data["hits"]["hits"]
            for hit in hits:
                src = hit["_source"]
                yield FrontierRecord(src["url"], Status(src["status"]),
                                     epoch_of(src.get("nextFetchDate")),
                                     src.get("key", DEFAULT_KEY), _read_md(src.get("metadata")),
                                     0.0)
            if len(hits) < page:
                return
            body["search_after"] = hits[-1]["sort"]
    finally:  # also when the reader stops early; else the point in time expires by itself
        with contextlib.suppress(OpenSearchError):
            f.client.request("DELETE", "/_search/point_in_time", {"pit_id": [pit]},
                             ok=(200, 404), retries=0)


def _urlfrontier_records(f: Any, names: list[str], key: str | None, page: int
                         ) -> Iterator[FrontierRecord]:
    import grpc

    from owler.frontier.urlfrontier import _record
    from owler.frontier.urlfrontier_api import pb

    wanted = frozenset(names)
    crawl = f.crawl or DEFAULT_CRAWL
    for i, stub in enumerate(f.stubs):
        start = 0
        while True:
            got = 0
            try:
                for item in stub.ListURLs(pb.ListUrlParams(start=start, size=page, key=key or "",
                                                           crawlID=crawl), timeout=f.timeout):
                    got += 1
                    rec = _record(item)
                    if not wanted or rec.status.value in wanted:
                        yield rec
            except grpc.RpcError as exc:
                raise f._fail("ListURLs", i, exc) from exc
            if got < page:
                break
            start += got


# -- dumping ---------------------------------------------------------------------------------------
def dump_crawls(conf: Mapping[str, Any], crawl: str | None = None,
                all_crawls: bool = False) -> list[str]:
    """The crawls a dump reads: every one with ``all_crawls``, else ``crawl`` (else the
    configuration's, :func:`owler.frontier.configured_crawl`). :class:`UnknownCrawl` for a crawl
    the frontier does not have (on a SQLite or OpenSearch frontier: no file or index; on a
    URLFrontier service: not in ListCrawls)."""
    if backend_of(conf) == "urlfrontier":
        known = list_crawls(conf)
    else:
        known = list(crawl_spaces(conf))
    if all_crawls:
        return known
    try:
        wanted = configured_crawl(conf) if crawl is None else crawl_id(crawl)
    except CrawlIDError as exc:
        raise UnknownCrawl(str(exc)) from None
    if wanted not in known:
        raise UnknownCrawl(f"unknown crawl {wanted!r}: the frontier has "
                           + (f"the crawl(s) {', '.join(repr(c) for c in known)}" if known
                              else "no crawl at all"))
    return [wanted]


@dataclass(slots=True)
class Dumped:
    """What :func:`dump` wrote of one crawl: where from, and the URLs per status."""

    crawl: str
    location: str
    counts: Counter = field(default_factory=Counter)


def dump(conf: Mapping[str, Any], crawls: Iterable[str], out: BinaryIO,
         statuses: Iterable[str] | None = None, key: str | None = None,
         progress: "Progress | None" = None, page: int | None = None) -> list[Dumped]:
    """Write the URLs of ``crawls`` (names :func:`dump_crawls` gave) to ``out`` as lines of a
    dump; what was written of each crawl."""
    statuses = list(statuses or ())
    out_crawls: list[Dumped] = []
    for crawl in crawls:
        with contextlib.closing(open_frontier(conf, crawl=crawl)) as frontier:
            done = Dumped(crawl, frontier.location)
            out_crawls.append(done)
            with contextlib.closing(records(frontier, statuses, key, page)) as recs:
                for rec in recs:
                    out.write(record_line(rec, crawl))
                    done.counts[rec.status.value] += 1
                    if progress is not None:
                        progress.add()
    return out_crawls


# -- injecting -------------------------------------------------------------------------------------
@contextlib.contextmanager
def open_dump(name: str, stdin: BinaryIO | None = None) -> Iterator[BinaryIO]:
    """The dump ``name`` (``-``: standard input, kept in a temporary file so that it can be read
    twice) open for reading bytes. :class:`DumpFileError` when it cannot be read."""
    if name == "-":
        with tempfile.TemporaryFile(prefix="owler-inject-") as tmp:
            shutil.copyfileobj(stdin if stdin is not None else sys.stdin.buffer, tmp)
            tmp.seek(0)
            yield tmp  # type: ignore[misc]
        return
    path = Path(name)
    if not path.exists():
        raise DumpFileError(f"dump {path} does not exist")
    if path.is_dir():
        raise DumpFileError(f"dump {path} is a directory, not a file")
    try:
        fh = path.open("rb")
    except PermissionError:
        raise DumpFileError(f"dump {path} is not readable (permission denied)") from None
    except OSError as exc:
        raise DumpFileError(f"dump {path} cannot be read: {exc.strerror or exc}") from None
    with fh:
        yield fh


def read_dump(fh: BinaryIO) -> Iterator[tuple[int, DumpLine]]:
    """``(line number, line)`` of every line of ``fh`` that is not blank; DumpLineError at the
    first broken one."""
    for lineno, raw in enumerate(fh, start=1):
        line = parse_line(raw, lineno)
        if line is not None:
            yield lineno, line


def check_dump(fh: BinaryIO) -> int:
    """Read all of ``fh``; the number of URL lines, or :class:`BadDump` with the broken ones."""
    errors: list[DumpLineError] = []
    count = lines = 0
    for lineno, raw in enumerate(fh, start=1):
        try:
            line = parse_line(raw, lineno)
        except DumpLineError as exc:
            count += 1
            if len(errors) < MAX_REPORTED:
                errors.append(exc)
            continue
        lines += line is not None
    if count:
        raise BadDump(errors, count, lines + count)
    return lines


class Loader:
    """Writes lines of a dump to the frontier ``conf`` names, in batches of :data:`BATCH` per
    crawl (module docstring). ``crawl``: the crawl of every line (``--crawl``); else each line's,
    else the configuration's."""

    def __init__(self, conf: Mapping[str, Any], crawl: str | None = None, batch: int = BATCH,
                 progress: "Progress | None" = None, retry_pause: float = RETRY_PAUSE) -> None:
        # a dumped date is the stored one, already moved by the source's tag priorities
        self.conf = {k: v for k, v in conf.items() if k != TAG_PRIORITY_KEY}
        self.crawl = None if crawl is None else crawl_id(crawl)
        self.default_crawl = configured_crawl(conf)
        self.mode = partition_mode(conf)
        self.batch = max(1, batch)
        self.progress = progress
        self.retry_pause = retry_pause
        self.frontiers: dict[str, Any] = {}
        self.pending: dict[str, list[tuple[int, StatusUpdate]]] = {}
        self.written: dict[str, Counter] = {}
        self.total = 0

    def crawl_of(self, line: DumpLine) -> str:
        return self.crawl or line.crawl or self.default_crawl

    def _key(self, line: DumpLine) -> str:
        if line.key:
            return line.key
        try:
            return partition_key(line.url, self.mode)
        except ValueError:
            return DEFAULT_KEY

    def add(self, lineno: int, line: DumpLine) -> None:
        crawl = self.crawl_of(line)
        pending = self.pending.setdefault(crawl, [])
        pending.append((lineno, StatusUpdate(line.url, line.status, line.metadata,
                                             line.next_fetch_date, self._key(line))))
        if len(pending) >= self.batch:
            self.flush(crawl)

    def frontier(self, crawl: str) -> Any:
        f = self.frontiers.get(crawl)
        if f is None:
            f = self.frontiers[crawl] = open_frontier(self.conf, crawl=crawl)
        return f

    def flush(self, crawl: str | None = None) -> None:
        """Write what is pending (of ``crawl``; of every crawl: ``None``)."""
        for c in [crawl] if crawl is not None else list(self.pending):
            items = self.pending.pop(c, [])
            if items:
                self._write(c, items)

    def _write(self, crawl: str, items: list[tuple[int, StatusUpdate]]) -> None:
        try:
            f = self.frontier(crawl)
        except FrontierError as exc:
            raise InjectError(f"cannot open crawl {crawl!r}: {exc}", self.total) from exc
        todo = items
        for attempt in range(RETRIES + 1):
            try:
                failed = f.apply_updates([u for _, u in todo])
            except FrontierError as exc:
                raise InjectError(f"cannot write to {f.location}: {exc}", self.total) from exc
            if not failed:
                break
            todo = [todo[i] for i in failed]
            if attempt < RETRIES:
                time.sleep(self.retry_pause * 2 ** attempt)
        else:
            lines = ", ".join(str(n) for n, _ in todo[:10]) + (", …" if len(todo) > 10 else "")
            raise InjectError(f"{len(todo)} line(s) could not be written to {f.location} after "
                              f"{RETRIES + 1} attempts (lines {lines})",
                              self.total + len(items) - len(todo))
        counts = self.written.setdefault(crawl, Counter())
        for _, u in items:
            counts[u.status.value] += 1
        self.total += len(items)
        if self.progress is not None:
            self.progress.add(len(items))

    def locations(self) -> dict[str, str]:
        return {c: f.location for c, f in self.frontiers.items()}

    def close(self) -> None:
        """Make the writes visible (OpenSearch: a refresh) and close the frontiers."""
        errors = []
        for f in self.frontiers.values():
            try:
                f.refresh()
            except FrontierError as exc:
                errors.append(exc)
            finally:
                f.close()
        self.frontiers.clear()
        if errors:
            raise InjectError(f"cannot refresh the frontier: {errors[0]}", self.total)

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self.frontiers.values():
            with contextlib.suppress(Exception):
                f.close()
        self.frontiers.clear()


# -- progress ----------------------------------------------------------------------------------------
class Progress:
    """Counts URLs; every ``every`` seconds a line on ``stream`` with the count and the rate
    (``<prefix>: 250,000 URLs (41,000/s)``)."""

    def __init__(self, prefix: str, stream: TextIO | None = None, every: float = 5.0,
                 clock: Any = time.monotonic) -> None:
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.clock = clock
        self.start = self.last = clock()
        self.count = 0
        self._check_at = 1000  # the clock is read every 1,000 URLs, not for each

    def add(self, n: int = 1) -> None:
        self.count += n
        if self.count < self._check_at:
            return
        self._check_at = self.count + 1000
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            print(f"{self.prefix}: {self.count:,} URLs ({self.rate(now):,.0f}/s)",
                  file=self.stream, flush=True)

    def rate(self, now: float | None = None) -> float:
        secs = (self.clock() if now is None else now) - self.start
        return self.count / secs if secs > 0 else 0.0

    def elapsed(self) -> float:
        return self.clock() - self.start


def format_counts(counts: Mapping[str, int]) -> str:
    """``DISCOVERED 600, FETCHED 600, …`` in the order of the statuses, those with URLs."""
    return ", ".join(f"{name} {counts[name]}" for name in STATUS_NAMES if counts.get(name)) \
        or "no URL"
