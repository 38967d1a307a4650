"""warc2warc without Storm: what the pipeline makes of one archived record.

The WARCSpout reads records (:mod:`owler.warc.format.reader`), appends each one's exact input bytes
unchanged to its output (:mod:`owler.warc.warc2warc.output`) and emits the HTTP responses with
those bytes; the parser bolt turns an HTTP response into what a fetch would have given, with
:func:`record_outcome`, following StormCrawler's WARCSpout:

- a 200 response is a fetched page: payload de-chunked and decoded (gzip, deflate, br, zstd) and
  cut to ``http.content.limit`` (``http.trimmed``), then parsed as the explorative crawl parses
  pages (its status FETCHED and its outlinks go through the same URL filters and blacklist). Real
  archives often store the body already de-chunked or decoded while the headers still name the
  coding; such a body is read as it is (as warcio and pywb read it) and ``warc.lenient`` says so;
- 304 → FETCHED; another 3xx → REDIRECTION with ``_redirTo`` (the target is an outlink when
  ``redirections.allowed``); anything else → FETCH_ERROR (``fetch.statusCode``);
- a record whose digest does not match, a response whose HTTP head cannot be read, or whose body
  is neither in its Content-Encoding (corrupt, or compress, …) nor readable as it is → ERROR
  with ``error.cause`` (``warc.digest``, ``warc.http``, ``content_encoding``,
  ``too_large_decompressed``) and ``error.message``: the record is still archived as it was;
- every other record (request, metadata, revisit, resource, warcinfo, a response that is not HTTP)
  is archived and not parsed.

The record's metadata: ``warc.file.name``, ``warc.record.offset`` (byte offset of its member),
``warc.record.length``, ``warc.record.date`` (its WARC-Date) and ``fetch.time`` (the same instant in
epoch seconds: the status updater schedules from it, so the URL is stored with the date it was
fetched, not the date it was read), ``fetch.statusCode``; with ``http.store.headers`` also the HTTP
response headers under ``protocol.md.prefix``.

Config keys: ``http.content.limit``, ``http.max.decompressed.size``, ``redirections.allowed``,
``http.store.headers``, ``protocol.md.prefix``.
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urljoin

from owler import conf as C
from owler import wire
from owler.constants import (CONTENT_LIMIT_KEY, ERROR_CAUSE, ERROR_MESSAGE, FETCH_STATUS_CODE,
                             FETCH_TIME, MD_PREFIX_KEY, REDIRECT_TO, REDIRECTIONS_KEY,
                             STORE_HEADERS_KEY, VERIFY_DIGESTS_KEY, Status)
from owler.fetch.http import DecodeError, TooLarge, decode_body, max_decompressed_size
from owler.metadata import set_value
from owler.warc.format.reader import HEAD_END, InputRecord, check_digests, parse_head

WARC_FILE = "warc.file.name"
WARC_OFFSET = "warc.record.offset"
WARC_LENGTH = "warc.record.length"
WARC_DATE = "warc.record.date"
WARC_KEY = "warc.record.key"  # position of a record inside a multi-record member ("off+n")
FILE_ID = "warc.file.id"  # the input file's id in the progress file (owler.warc.warc2warc.progress)
HTTP_TRIMMED = "http.trimmed"
HTTP_TRIMMED_REASON = "http.trimmed.reason"
#: how a record's body was read against what its HTTP headers say (``not-chunked``: said chunked,
#: stored de-chunked; ``chunks-broken``: chunked up to a break, the rest kept as it is;
#: ``not-encoded:gzip``: said compressed, stored decoded)
LENIENT = "warc.lenient"


class RecordError(ValueError):
    """A record's bytes cannot be read back (they were read once already: a bug or corruption)."""


@dataclass(slots=True)
class RecordOutcome:
    kind: str  # "page" (parse content), "status" (status only), "archive" (nothing to parse)
    metadata: dict
    status: Status | None = None
    content: bytes = b""
    outlinks: list = field(default_factory=list)


def warc_date_epoch(value: str) -> float | None:
    """A WARC-Date (W3C-DTF, e.g. ``2024-05-01T12:00:00Z`` or with fractions) in epoch seconds."""
    text = (value or "").strip()
    if not text:
        return None
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        try:  # a date only, or a form fromisoformat does not know
            when = dt.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
        except ValueError:
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def record_metadata(rec: InputRecord, file_name: str) -> dict[str, list[str]]:
    md: dict[str, list[str]] = {WARC_FILE: [file_name], WARC_OFFSET: [str(rec.offset)],
                                WARC_LENGTH: [str(len(rec.raw) if rec.compressed else 0)]}
    if rec.key != str(rec.offset):
        md[WARC_KEY] = [rec.key]
    if rec.date:
        md[WARC_DATE] = [rec.date]
        when = warc_date_epoch(rec.date)
        if when is not None:
            md[FETCH_TIME] = [repr(when)]
    return md


def parse_raw(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    """``(version, headers, block)`` of a record from its bytes as emitted by the spout (one gzip
    member or the uncompressed record)."""
    data = raw
    if raw[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(31)
            data = d.decompress(raw) + d.flush()
        except zlib.error as exc:
            raise RecordError(f"record member does not inflate: {exc}") from None
    try:  # a member may begin with the CRLFs that end the record before it (misaligned members)
        head = parse_head(data, len(data) - len(data.lstrip(b"\r\n")))
    except ValueError as exc:
        raise RecordError(str(exc)) from None
    if head is None:
        raise RecordError("incomplete record head")
    version, headers, start, length = head
    return version, headers, data[start:start + length]


def parse_http_response(block: bytes) -> tuple[int, str, str, list[tuple[str, str]], bytes]:
    """``(code, reason, version, headers, body)`` of an HTTP/1.x response block. Header text is
    latin-1 (byte-preserving). Raises ``ValueError`` when there is no valid status line."""
    end = block.find(HEAD_END)
    if end < 0:
        end = block.find(b"\n\n")
        if end < 0:
            raise ValueError("no end of the HTTP head")
        head, body = block[:end], block[end + 2:]
    else:
        head, body = block[:end], block[end + 4:]
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    status = lines[0].decode("latin-1").strip()
    parts = status.split(None, 2)
    if len(parts) < 2 or not parts[0].upper().startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP status line: {status[:80]!r}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip():
            headers.append((name.strip().decode("latin-1"), value.strip().decode("latin-1")))
    return int(parts[1]), parts[2] if len(parts) > 2 else "", parts[0][5:], headers, body


#: a chunk-size line: hex digits, optional extensions, CRLF (a bare LF is tolerated)
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?\n")


def dechunk(body: bytes) -> tuple[bytes, int, bool]:
    """Undo chunked transfer coding as far as the chunk structure holds.

    Returns ``(data, chunks, whole)``: the data of the ``chunks`` chunks read, and whether the
    structure held to its end (the last chunk or the end of a cut body). When it breaks, ``data``
    is what came before the break followed by the rest of the body as it is (warcio's reading)."""
    out: list[bytes] = []
    pos, n, chunks = 0, len(body), 0
    while pos < n:
        m = _CHUNK_LINE.match(body, pos)
        if m is None:
            out.append(body[pos:])
            return b"".join(out), chunks, False
        size = int(m.group(1), 16)
        if size == 0:
            break
        start = m.end()
        end = start + size
        out.append(body[start:end])
        chunks += 1
        if body.startswith(b"\r\n", end):
            pos = end + 2
        elif body.startswith(b"\n", end):
            pos = end + 1
        elif end >= n:  # a cut last chunk: keep what is there
            break
        else:
            out.append(body[end:])
            return b"".join(out), chunks, False
    return b"".join(out), chunks, True


def _looks_decoded(data: bytes) -> bool:
    """Whether ``data`` reads as text rather than as compressed bytes: no NUL and at most 1% control
    bytes in its first 2 KiB (compressed data has about 11%); a UTF-16 BOM counts as text."""
    head = data[:2048]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    if b"\x00" in head:
        return False
    controls = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    return controls * 100 <= len(head)


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


class RecordParser:
    """:func:`record_outcome` with its configuration read once."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.content_limit = C.get_int(conf, CONTENT_LIMIT_KEY, -1)
        self.max_decompressed = max_decompressed_size(conf)
        self.allow_redirs = C.get_bool(conf, REDIRECTIONS_KEY, True)
        self.store_headers = C.get_bool(conf, STORE_HEADERS_KEY, False)
        self.md_prefix = C.get_str(conf, MD_PREFIX_KEY, "protocol.") or ""
        self.verify = C.get_bool(conf, VERIFY_DIGESTS_KEY, True)

    def outcome(self, url: str, raw: bytes, md: Mapping[str, list[str]]) -> RecordOutcome:
        """What the crawl makes of the record ``raw`` (emitted for ``url`` with metadata ``md``).
        Its digests are checked (``warc2warc.verify.digests``) unless the spout's reader checked
        them already (``_raw.digests`` in ``md``: what it found)."""
        md = dict(md)
        try:
            _, headers, block = parse_raw(raw)
        except RecordError as exc:
            return self._error(md, "warc.record", str(exc))
        ctype = headers.get("content-type", "").replace(" ", "").lower()
        if headers.get("warc-type", "").lower() != "response" or not ctype.startswith(
                "application/http"):
            return RecordOutcome("archive", md)
        if self.verify:
            checked = md.get(wire.RAW_DIGESTS)
            problem = checked[0] if checked else check_digests(headers, block)
            if problem:
                return self._error(md, "warc.digest", problem)
        try:
            code, reason, version, http_headers, body = parse_http_response(block)
        except ValueError as exc:
            return self._error(md, "warc.http", str(exc))
        set_value(md, FETCH_STATUS_CODE, code)
        if self.store_headers:
            for name, value in http_headers:
                md.setdefault(self.md_prefix + name, []).append(value)
        status = Status.from_http_code(code)
        if status is Status.REDIRECTION:
            outlinks = []
            loc = _header(http_headers, "location")
            if loc and loc.strip():
                try:
                    target = urljoin(url, loc.strip())
                except ValueError:
                    target = None
                if target:
                    set_value(md, REDIRECT_TO, target)
                    if self.allow_redirs and target != url:
                        outlinks.append(target)
            return RecordOutcome("status", md, status, outlinks=outlinks)
        if status is Status.FETCH_ERROR or code == 304:
            return RecordOutcome("status", md, status)
        # a page: the body as the client would have had it. Archives often hold it already
        # de-chunked or decoded while the headers still name the coding (wget, pywb and Common
        # Crawl stored it so): then the body is used as it is, noted under warc.lenient.
        lenient: list[str] = []
        if "chunked" in (_header(http_headers, "transfer-encoding") or "").lower():
            data, chunks, whole = dechunk(body)
            if whole:
                body = data
            elif chunks <= 1:
                lenient.append("not-chunked")
            else:
                body = data
                lenient.append("chunks-broken")
        encoding = _header(http_headers, "content-encoding")
        try:
            content, still, _ = decode_body(body, encoding, self.max_decompressed)
            problem = f"unsupported Content-Encoding {still}" if still else ""
        except TooLarge:
            return self._error(md, "too_large_decompressed",
                               f"decoded body over {self.max_decompressed} bytes")
        except DecodeError as exc:
            problem = f"corrupt compressed body: {exc}"
        if problem:
            if not _looks_decoded(body):
                return self._error(md, "content_encoding", problem)
            content = body
            lenient.append("not-encoded:" + ",".join(
                c.strip() for c in encoding.lower().split(",") if c.strip()))
        if lenient:
            md[LENIENT] = lenient
        if 0 <= self.content_limit < len(content):
            content = content[: self.content_limit]
            md[HTTP_TRIMMED] = ["true"]
            md[HTTP_TRIMMED_REASON] = ["length"]
        md[wire.RAW_HEADERS] = wire.encode_headers(http_headers)
        md[wire.RAW_STATUS_LINE] = [f"HTTP/{version} {code} {reason}".rstrip()]
        return RecordOutcome("page", md, Status.FETCHED, content)

    @staticmethod
    def _error(md: dict, cause: str, message: str) -> RecordOutcome:
        set_value(md, ERROR_CAUSE, cause)
        set_value(md, ERROR_MESSAGE, message[:500])
        return RecordOutcome("status", md, Status.ERROR)
