"""WARCWriter: rotated, per-record-gzipped WARC/1.1 files, for the crawl's archiver
(:mod:`owler.warc.crawl.archiver`) and warc2warc's copy (:mod:`owler.warc.warc2warc.output`).

Port of StormCrawler's ``WARCHdfsBolt`` + ``WARCFileNameFormat`` + ``FileTimeSizeRotationPolicy``
(external/warc), writing records with :mod:`owler.warc.format.serialize` (level 6 per record
member, by zlib-ng: several times faster than warcio's level-9 writer, see
``bench/bench_warc.py``).

Files
  ``{prefix}-{yyyyMMddHHmmss}-{partition}-{serial:05d}.warc.gz`` (open time, UTC). StormCrawler
  writes ``{prefix}-{time}-{task %02d-}{rotation %05d}.warc.gz``; the partition here plays the role
  of the task index and is always present, so recovery can tell writers apart. While written the
  file is ``<name>.open``; :meth:`WARCWriter.close` (and every rotation) flushes, fsyncs and renames
  it to ``<name>`` without ever replacing an existing file (``link`` + ``unlink``; a name already
  taken, by an earlier run in the same second, moves the serial on). Each file starts with a
  ``warcinfo`` record; every request/response record names it in ``WARC-Warcinfo-ID``. Files are
  opened lazily on the first write, so an idle writer leaves no empty files.

Rotation
  by size: the file is closed as soon as it reaches ``rotation_size`` bytes (compressed);
  by time: :meth:`WARCWriter.maybe_rotate` (called on tick tuples) closes a file older
  than ``rotation_time`` seconds, even without new writes. ``<= 0`` turns either off.

Durability
  every ``write_*`` call ends with ``flush()`` (the bytes are in the OS when it returns);
  ``fsync=True`` also fsyncs every call, or call :meth:`WARCWriter.sync` before acking a batch.
  A write that fails (e.g. disk full) is cut back to the last complete record and the error is
  raised, so the caller fails the tuple and Storm replays it.

Index
  every file gets its CDXJ index, ``<name>.cdxj``, written as the records are
  (:mod:`owler.warc.storage.index`): each response, revisit or resource record's line goes to a
  companion ``<name>.cdxj.part`` once the record is written; when the file is finished the lines
  are sorted into ``<name>.cdxj`` (temporary file, fsync, rename) before the WARC file gets its
  final name. ``warc.cdxj: false`` writes none.

Recovery (:func:`recover_open_files`)
  At start-up, ``.open`` files left by a crash are scanned member by member; a trailing partial or
  corrupt member (a record half-written when the process died; its tuple was never acked, so it
  will be replayed) is cut off, and the file is renamed to its final name. Files holding no record
  besides ``warcinfo`` are deleted (they archive nothing). A non-empty file without a single valid
  record is not ours to judge: it is renamed ``<name>.corrupt`` and kept. Only files of the given
  prefix and partition are touched, so writers of other partitions that are still running are
  safe; ``partition=None`` recovers every partition and must only be used when no writer runs.
  A recovered file gets its index before its final name: its companion's lines when they name
  exactly the indexed records the scan found, else read off the file; a finished file whose index
  is missing gets it from its records (:func:`owler.warc.storage.index.recover_index`,
  :func:`~owler.warc.storage.index.finish_leftovers`).

Config keys (:meth:`WARCWriter.from_conf`): ``warc.dir``, ``warc.prefix``, ``warc.rotation.size``,
``warc.rotation.time``, ``warc.gzip.level``, ``warc.operator``, ``warc.fsync`` (default false),
``warc.cdxj`` (default true).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from owler import conf as C
from owler import wire
from owler.constants import (CAPTURE_DATE, CAPTURE_DIGEST, WARC_DIR_KEY, WARC_PREFIX_KEY,
                             WARC_ROTATION_SIZE_KEY, WARC_ROTATION_TIME_KEY)
from owler.warc.format import cdxj
from owler.warc.format import serialize as R
from owler.warc.storage import index as X

log = logging.getLogger("owler.warc")

OPEN_SUFFIX = ".open"
CORRUPT_SUFFIX = ".corrupt"
WARC_SUFFIX = ".warc.gz"
_NAME_PART = re.compile(r"^[A-Za-z0-9_.]+$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.\-]+$")
_FILE_NAME = re.compile(
    r"^(?P<prefix>.+)-(?P<ts>\d{14})-(?P<partition>[A-Za-z0-9_.]+)-(?P<serial>\d{5,})\.warc\.gz$")

WARC_GZIP_LEVEL = "warc.gzip.level"
WARC_OPERATOR = "warc.operator"
WARC_FSYNC = "warc.fsync"


@dataclass
class WARCStats:
    """Counters since the writer was created (``bytes`` = compressed bytes written)."""

    records: int = 0
    requests: int = 0
    responses: int = 0
    revisits: int = 0
    raw_records: int = 0
    unindexed: int = 0  # records the CDXJ index could not take (logged)
    bytes: int = 0
    files_opened: int = 0
    files_closed: int = 0


@dataclass(frozen=True)
class WrittenRecord:
    """Where the last response (or raw record) went: for CDX lines / ``warc-filename`` metadata."""

    filename: str  # the final name (without ``.open``)
    offset: int
    length: int
    record_id: str | None


def partition_name(task_id: Any) -> str:
    """The partition of a writer task's files: its Storm task id, two digits at least."""
    return f"{task_id:02d}" if isinstance(task_id, int) else str(task_id)


def parse_file_name(name: str) -> dict[str, str] | None:
    """Split a final file name into prefix, ts, partition, serial; None if not ours."""
    if name.endswith(OPEN_SUFFIX):
        name = name[: -len(OPEN_SUFFIX)]
    m = _FILE_NAME.match(name)
    return m.groupdict() if m else None


def _check_exchange_args(truncated: str | None, revisit: str | None) -> None:
    """WARCFormatError for a WARC-Truncated reason or a revisit profile WARC/1.1 does not name."""
    if truncated is not None and truncated not in R.TRUNCATED_REASONS:
        raise R.WARCFormatError(f"WARC-Truncated must be one of {sorted(R.TRUNCATED_REASONS)}, "
                                f"not {truncated!r}")
    if revisit is not None and revisit not in R.REVISIT_PROFILES:
        raise R.WARCFormatError(f"revisit profile must be one of {sorted(R.REVISIT_PROFILES)},"
                                f" not {revisit!r}")


def _response_headers(resp_id: str, req_id: str | None, common: list[tuple[str, str]], uri: str,
                      *, revisit: str | None, refers_to_date: str | None, protocol: str | None,
                      truncated: str | None, payload_digest: str | None, block_digest: str,
                      identified_payload_type: str | None,
                      extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The WARC headers of an exchange's response record, or of its revisit record (WARC/1.1
    §6.7: the profile and the capture it refers to; never WARC-Truncated), in the order written."""
    h = [("WARC-Type", "response" if revisit is None else "revisit"),
         ("WARC-Record-ID", resp_id), *common]
    if req_id:
        h.append(("WARC-Concurrent-To", req_id))
    if revisit is not None:
        h.append(("WARC-Profile", R.REVISIT_PROFILES[revisit]))
        h.append(("WARC-Refers-To-Target-URI", uri))
        if refers_to_date:
            h.append(("WARC-Refers-To-Date", R.warc_value("WARC-Refers-To-Date", refers_to_date)))
    if protocol:
        h.append(("WARC-Protocol", protocol))
    if truncated and revisit is None:
        h.append(("WARC-Truncated", truncated))
    h.append(("Content-Type", R.RESPONSE_CONTENT_TYPE))
    if payload_digest:
        h.append(("WARC-Payload-Digest", R.warc_value("WARC-Payload-Digest", payload_digest)))
    h.append(("WARC-Block-Digest", block_digest))
    if identified_payload_type:
        h.append(("WARC-Identified-Payload-Type",
                  R.warc_value("WARC-Identified-Payload-Type", identified_payload_type)))
    h.extend(extra)
    return h


class WARCWriter:
    """Writes request/response exchanges to rotated WARC files (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike, prefix: str = "OWLER", partition: str = "0",
                 rotation_size: int = 1 << 30, rotation_time: float = 3600.0, gzip_level: int = 6,
                 software: str = "OWLer-py/0.1", operator: str | None = None,
                 extra_info: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.time, fsync: bool = False,
                 date_precision: str = "us",
                 on_close: Callable[[Path], None] | None = None, cdxj: bool = True) -> None:
        if not _PREFIX.match(prefix or ""):
            raise ValueError(f"WARC prefix must match {_PREFIX.pattern}: {prefix!r}")
        partition = str(partition)
        if not _NAME_PART.match(partition):
            raise ValueError(f"WARC partition must match {_NAME_PART.pattern} (no '-'): {partition!r}")
        if not 0 <= int(gzip_level) <= 9:
            raise ValueError(f"gzip level must be 0..9, not {gzip_level}")
        R.warc_date(0, date_precision)  # validates the precision
        self.directory = Path(directory)
        self.prefix = prefix
        self.partition = partition
        self.rotation_size = int(rotation_size)
        self.rotation_time = float(rotation_time)
        self.gzip_level = int(gzip_level)
        self.clock = clock
        self.fsync = fsync
        self.date_precision = date_precision
        self.on_close = on_close  # called with the final path of every file closed
        self.cdxj = cdxj  # each file gets its CDXJ index (storage/index.py)
        self._index: X.LocalIndex | X.MemoryIndex | None = None
        info: dict[str, Any] = {
            "software": software,
            "format": R.FORMAT,
            "conformsTo": R.CONFORMS_TO,
            "hostname": socket.gethostname(),
            "isPartOf": prefix,
            "operator": operator,
        }
        info.update(extra_info or {})
        R.warc_fields(info)  # fail now, not at the first write
        self.info = info
        self.stats = WARCStats()
        self.last_record: WrittenRecord | None = None
        self._serial = 0
        self._fh = None
        self._open_path: Path | None = None
        self._final_name = ""
        self._opened_at = 0.0
        self._size = 0
        self._warcinfo_id = ""
        self._warcinfo_end = 0
        self._closed = False

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], partition: str = "0", **kw: Any) -> "WARCWriter":
        """Build from crawler conf keys (module docstring); ``kw`` overrides any argument."""
        args: dict[str, Any] = dict(
            directory=C.get_str(conf, WARC_DIR_KEY, ".work/warc"),
            prefix=C.get_str(conf, WARC_PREFIX_KEY, "OWLER"),
            partition=partition,
            rotation_size=C.get_int(conf, WARC_ROTATION_SIZE_KEY, 1 << 30),
            rotation_time=C.get_float(conf, WARC_ROTATION_TIME_KEY, 3600.0),
            gzip_level=C.get_int(conf, WARC_GZIP_LEVEL, 6),
            operator=C.get_str(conf, WARC_OPERATOR, None),
            fsync=C.get_bool(conf, WARC_FSYNC, False),
            cdxj=X.indexing(conf),
        )
        args.update(kw)
        return cls(**args)

    # -- state --------------------------------------------------------------------------------
    @property
    def current_path(self) -> Path | None:
        """The ``.open`` file being written, or None."""
        return self._open_path

    @property
    def current_name(self) -> str:
        """The final name of the file being written ("" when none is open)."""
        return self._final_name if self._fh is not None else ""

    @property
    def size(self) -> int:
        """Bytes in the file being written (0 when none is open)."""
        return self._size if self._fh is not None else 0

    @property
    def opened_at(self) -> float:
        """When the file being written was opened (by the writer's clock)."""
        return self._opened_at

    def cut_back(self, length: int) -> None:
        """Cut the file being written back to ``length`` bytes (never below its warcinfo record):
        for a caller that wrote records it then could not record as written."""
        if self._fh is None:
            return
        length = max(int(length), self._warcinfo_end)
        if length >= self._size:
            return
        self._fh.flush()
        self._fh.seek(length)
        self._fh.truncate(length)
        self._fh.flush()
        self._size = length
        if self._index is not None:
            self._index.cut_back(length)

    def __enter__(self) -> "WARCWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------
    def write_page(self, url: str, payload: bytes, md: Mapping[str, list[str]]) -> int:
        """:meth:`write_exchange` for a page the fetcher emitted: the HTTP exchange comes from
        its transient metadata (``_raw.*``, :mod:`owler.wire`)."""
        fetch_time = float((md.get(wire.RAW_FETCH_TIME) or ["0"])[0]) or None
        request = (md.get(wire.RAW_REQUEST) or [None])[0]
        revisit = (md.get(wire.RAW_REVISIT) or [None])[0]
        digest = md.get(wire.RAW_PAYLOAD_DIGEST) or (md.get(CAPTURE_DIGEST) if revisit else None)
        return self.write_exchange(
            url,
            fetch_time=fetch_time,
            request_line_and_headers=request.encode("latin-1") if request else None,
            status_line=(md.get(wire.RAW_STATUS_LINE) or ["HTTP/1.1 200 OK"])[0],
            response_headers=wire.decode_headers(md.get(wire.RAW_HEADERS)),
            payload=payload,
            ip=(md.get(wire.RAW_IP) or [None])[0],
            truncated=(md.get(wire.RAW_TRUNCATED) or [None])[0],
            revisit=revisit,
            refers_to_date=(md.get(CAPTURE_DATE) or [None])[0],
            payload_digest=digest[0] if digest else None,
            metadata=(md.get(wire.RAW_SIGNALS) or [None])[0],
            rendered=(md.get(wire.RAW_RENDERED) or [None])[0],
        )

    def write_exchange(self, url: str, *, fetch_time: float | None,
                       request_line_and_headers: bytes | None, status_line: str,
                       response_headers: list[tuple[str, str]], payload: bytes,
                       ip: str | None = None, truncated: str | None = None,
                       extra_headers: Mapping[str, Any] | None = None,
                       identified_payload_type: str | None = None,
                       payload_decoded: bool = True, revisit: str | None = None,
                       refers_to_date: str | None = None,
                       payload_digest: str | None = None, metadata: str | None = None,
                       rendered: str | None = None) -> int:
        """Write ``request`` (if given) and ``response`` records; return compressed bytes written.

        With ``revisit`` (``server-not-modified`` or ``identical-payload-digest``) the response is
        a ``revisit`` record of that profile instead (WARC 1.1 §6.7): its block is the HTTP
        head alone, and it refers to the earlier capture of the same URI
        (``WARC-Refers-To-Target-URI``, ``WARC-Refers-To-Date`` = ``refers_to_date``, the
        capture's WARC-Date, when known). ``payload_digest`` is the WARC-Payload-Digest when the
        caller has it (the payload's; for a 304 the capture's), else it is computed.
        ``metadata`` (JSON: what the webmasters' signals said, owler.signals.record_json) is
        written after the response as a ``metadata`` record concurrent to it. ``rendered``
        (the page's DOM once the browser ran its scripts, :mod:`owler.fetch.browser`) is written
        after them as a ``conversion`` record referring to the response (:meth:`_conversion_member`).

        ``payload`` is the body after transfer decoding (and after content decoding when
        ``payload_decoded``); headers are fixed up accordingly
        (:mod:`owler.warc.format.serialize`). ``fetch_time`` None means now. ``truncated`` is a
        WARC-Truncated reason (``length``, ``time``, ``disconnect``, ``unspecified``). Raises
        :class:`~owler.warc.format.serialize.WARCFormatError` on bad arguments (nothing written)
        and ``OSError`` on I/O failure (the file is cut back to its last complete record)."""
        _check_exchange_args(truncated, revisit)
        uri = R.target_uri(url)
        extra = R.check_extra_headers(extra_headers)
        line, protocol = R.http_status_line(status_line)
        http_head = R.http_response_head(line, response_headers, len(payload), payload_decoded)
        if payload_digest is None and (revisit is None or payload):
            payload_digest = R.sha1_b32(payload)
        req_head = (R.http_request_head(request_line_and_headers)
                    if request_line_and_headers is not None else None)
        date = R.warc_date(self.clock() if fetch_time is None else fetch_time, self.date_precision)

        self._ensure_open()
        resp_id = R.new_record_id()
        req_id = R.new_record_id() if req_head is not None else None
        common = self._shared_headers(date, ip, uri)
        members = []
        if req_head is not None:
            members.append(self._request_member(req_head, req_id, resp_id, common))
        if revisit is not None:  # the block is the HTTP head; the payload is the capture's
            payload = b""
        h = _response_headers(resp_id, req_id, common, uri, revisit=revisit,
                              refers_to_date=refers_to_date, protocol=protocol,
                              truncated=truncated, payload_digest=payload_digest,
                              block_digest=R.sha1_b32(http_head, payload),
                              identified_payload_type=identified_payload_type, extra=extra)
        block_len = len(http_head) + len(payload)
        members.append(R.gzip_member((R.record_head(h, block_len), http_head, payload, R.RECORD_END),
                                     self.gzip_level))
        resp_index = len(members) - 1
        if metadata is not None:
            members.append(self._metadata_member(metadata.encode("utf-8"), resp_id, date, uri))
        if rendered is not None:
            members.append(self._conversion_member(rendered.encode("utf-8", "surrogatepass"),
                                                   resp_id, date, uri))
        return self._append_exchange(members, resp_id, resp_index, revisit=revisit is not None,
                                     heads=(h, http_head))

    def _metadata_member(self, block: bytes, resp_id: str, date: str, uri: str) -> bytes:
        """A ``metadata`` record about the response ``resp_id`` (JSON), compressed."""
        h = [("WARC-Type", "metadata"), ("WARC-Record-ID", R.new_record_id()), ("WARC-Date", date),
             ("WARC-Warcinfo-ID", self._warcinfo_id), ("WARC-Target-URI", uri),
             ("WARC-Concurrent-To", resp_id), ("Content-Type", "application/json"),
             ("WARC-Block-Digest", R.sha1_b32(block))]
        return R.gzip_member((R.record_head(h, len(block)), block, R.RECORD_END), self.gzip_level)

    def _conversion_member(self, block: bytes, resp_id: str, date: str, uri: str) -> bytes:
        """The rendered DOM of the response ``resp_id`` (HTML, UTF-8), compressed.

        WARC/1.1 §6.9 makes a ``conversion`` record "an alternative version of another record's
        content that was created as the result of an archival process", naming the original
        with ``WARC-Refers-To``: what a browser made of the response is that, and a reader of
        responses (a replay tool, a CDXJ index of responses) keeps seeing the capture as the
        server sent it. A ``resource`` record would present the DOM as if it had been fetched,
        and a ``metadata`` one as if it were about the capture rather than a version of it.
        Same date and target URI as the response; its block is the HTML alone, so its payload
        digest is its block digest."""
        digest = R.sha1_b32(block)
        h = [("WARC-Type", "conversion"), ("WARC-Record-ID", R.new_record_id()),
             ("WARC-Date", date), ("WARC-Warcinfo-ID", self._warcinfo_id),
             ("WARC-Target-URI", uri), ("WARC-Refers-To", resp_id),
             ("Content-Type", "text/html; charset=utf-8"),
             ("WARC-Payload-Digest", digest), ("WARC-Block-Digest", digest)]
        return R.gzip_member((R.record_head(h, len(block)), block, R.RECORD_END), self.gzip_level)

    def _shared_headers(self, date: str, ip: str | None, uri: str) -> list[tuple[str, str]]:
        """The WARC headers the request and response records of one exchange both carry."""
        common = [("WARC-Date", date), ("WARC-Warcinfo-ID", self._warcinfo_id)]
        if ip:
            common.append(("WARC-IP-Address", R.warc_value("WARC-IP-Address", ip)))
        common.append(("WARC-Target-URI", uri))
        return common

    def _request_member(self, req_head: bytes, req_id: str, resp_id: str,
                        common: list[tuple[str, str]]) -> bytes:
        """The request record, compressed: its block is the HTTP request head."""
        h = [("WARC-Type", "request"), ("WARC-Record-ID", req_id), *common,
             ("WARC-Concurrent-To", resp_id), ("Content-Type", R.REQUEST_CONTENT_TYPE),
             ("WARC-Block-Digest", R.sha1_b32(req_head))]
        return R.gzip_member((R.record_head(h, len(req_head)), req_head, R.RECORD_END),
                             self.gzip_level)

    def _append_exchange(self, members: list[bytes], resp_id: str, resp_index: int,
                         revisit: bool, heads: tuple[list, bytes] | None = None) -> int:
        """Append an exchange's records (``members[resp_index]`` the response: a request before
        it, a metadata record after it), note where its response went, index it (from
        ``heads``, its WARC headers and HTTP head, when given: no inflating) and count it;
        return the compressed bytes written."""
        offset = self._append(members)
        resp_offset = offset + sum(len(m) for m in members[:resp_index])
        n = sum(len(m) for m in members)
        self.last_record = WrittenRecord(self._final_name, resp_offset, len(members[resp_index]),
                                         resp_id)
        self._index_members(members[resp_index], resp_offset, heads=heads)
        if revisit:
            self.stats.revisits += 1
        else:
            self.stats.responses += 1
        self.stats.requests += 1 if resp_index else 0
        self.stats.records += len(members)
        self._after_write()
        return n

    def write_record_bytes(self, raw: bytes) -> int:
        """Append one already-serialized record unchanged; return bytes written.

        ``raw`` is either one or more complete gzip members (starting ``1f 8b``), written as is,
        or an uncompressed record (starting ``WARC/``, ending CRLF CRLF), which is compressed as
        one member without changing a byte of it. Anything else raises ``WARCFormatError``.
        The record keeps its own ``WARC-Warcinfo-ID`` (if any) and digests."""
        raw = bytes(raw)
        plain = None
        if raw[:2] == b"\x1f\x8b":
            member = raw
        elif raw.startswith(b"WARC/") and raw.endswith(R.RECORD_END):
            R.parse_record_head(raw)
            member = R.gzip_member((raw,), self.gzip_level)
            plain = raw
        else:
            raise R.WARCFormatError("raw record is neither a gzip member nor a WARC/ record "
                                    "ending in CRLF CRLF")
        self._ensure_open()
        offset = self._append([member])
        self.last_record = WrittenRecord(self._final_name, offset, len(member), None)
        self._index_members(member, offset, plain)
        self.stats.raw_records += 1
        self.stats.records += 1
        self._after_write()
        return len(member)

    # -- files --------------------------------------------------------------------------------
    def maybe_rotate(self, now: float | None = None) -> Path | None:
        """Close the current file if it is older than ``rotation_time``; return its final path."""
        if self._fh is None or self.rotation_time <= 0:
            return None
        now = self.clock() if now is None else now
        if now - self._opened_at >= self.rotation_time:
            return self._close_file()
        return None

    def rotate(self) -> Path | None:
        """Close the current file now (the next write opens a new one); its final path or None."""
        return self._close_file() if self._fh is not None else None

    def sync(self) -> None:
        """Flush and fsync the current file (for callers that batch an fsync before acking)."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close and finalize the current file. Idempotent; the writer cannot be used after."""
        if self._closed:
            return
        self._closed = True
        if self._fh is not None:
            self._close_file()

    # -- internals ----------------------------------------------------------------------------
    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("WARCWriter is closed")
        if self._fh is not None:
            return
        now = self.clock()
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now))
        while True:
            name = f"{self.prefix}-{stamp}-{self.partition}-{self._serial:05d}{WARC_SUFFIX}"
            self._serial += 1
            if self._name_taken(name):
                continue
            try:
                fh, path = self._create(name)
            except FileExistsError:
                continue
            break
        info_id = R.new_record_id()
        block = R.warc_fields(self.info)
        head = R.record_head([("WARC-Type", "warcinfo"), ("WARC-Record-ID", info_id),
                              ("WARC-Date", R.warc_date(now, self.date_precision)),
                              ("WARC-Filename", name),
                              ("Content-Type", R.WARCINFO_CONTENT_TYPE),
                              ("WARC-Block-Digest", R.sha1_b32(block))], len(block))
        member = R.gzip_member((head, block, R.RECORD_END), self.gzip_level)
        try:
            fh.write(member)
            fh.flush()
        except OSError:
            self._discard(fh, path)
            raise
        self._fh, self._open_path, self._final_name = fh, path, name
        self._opened_at, self._size, self._warcinfo_id = now, len(member), info_id
        self._warcinfo_end = len(member)
        self._index = self._open_index(name) if self.cdxj else None
        self.stats.files_opened += 1
        self.stats.records += 1
        self.stats.bytes += len(member)
        log.info("opened WARC file %s", path)

    def _append(self, members: list[bytes]) -> int:
        """Write the members at the end of the file; on failure cut back and re-raise."""
        fh, start = self._fh, self._size
        try:
            for m in members:
                fh.write(m)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        except OSError:
            log.exception("WARC write failed in %s; cutting back to %d bytes", self._open_path, start)
            try:
                fh.seek(start)
                fh.truncate(start)
                fh.flush()
            except OSError:
                # cannot repair in place: leave the .open file for recover_open_files
                log.error("cannot cut back %s; leaving it for recovery", self._open_path)
                try:
                    fh.close()
                except OSError:
                    pass
                self._fh = self._open_path = None
                if self._index is not None:  # its companion too: recovery indexes the file
                    self._index.close()
                    self._index = None
            raise
        n = sum(len(m) for m in members)
        self._size += n
        self.stats.bytes += n
        return start

    # the storage of a file: a local ``.open`` file here (storage/s3_stream.py: an S3 upload)
    def _name_taken(self, name: str) -> bool:
        return any((self.directory / (name + s)).exists()
                   for s in ("", CORRUPT_SUFFIX, cdxj.INDEX_SUFFIX))

    def _create(self, name: str):
        """Open the file ``name`` is written as; FileExistsError if it is taken."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / (name + OPEN_SUFFIX)
        return open(path, "xb"), path

    def _discard(self, fh, path) -> None:
        fh.close()
        path.unlink(missing_ok=True)

    def _finish(self, fh, path):
        """Make the file final, its index written first; its final location (the final
        path)."""
        try:
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fh.close()
        index, self._index = self._index, None
        if index is not None:
            index.finish(path)
        return finalize_open(path)

    # the index of a file: a companion beside a local file (storage/s3_stream.py: in memory)
    def _open_index(self, name: str):
        return X.LocalIndex(self.directory, name)

    def _index_members(self, member: bytes, offset: int, plain: bytes | None = None,
                       heads: tuple[list, bytes] | None = None) -> None:
        """Add the index lines of ``member`` (one or more gzip members, or the compressed form of
        the uncompressed record ``plain``, or the record whose WARC headers and HTTP head are
        ``heads``) written at ``offset`` of the current file. A record the index cannot take is
        logged and left out of it; the file keeps it."""
        if self._index is None:
            return
        try:
            if heads is not None:
                line = cdxj.heads_line(heads[0], heads[1], offset, len(member), self._final_name)
                lines = [line] if line is not None else []
            elif plain is not None:
                line = cdxj.raw_line(plain, offset, len(member), self._final_name)
                lines = [line] if line is not None else []
            else:
                lines = cdxj.member_lines(member, offset, self._final_name)
        except cdxj.CDXJError as exc:
            self.stats.unindexed += 1
            log.warning("record at offset %d of %s not indexed: %s", offset, self._final_name,
                        exc)
            return
        self._index.add(lines)

    def durable(self, name: str, end: int) -> bool:
        """Whether the bytes of file ``name`` up to ``end`` are stored for good. A local file's
        bytes are in the OS once a write returns (``warc.fsync`` for more)."""
        return True

    def lost(self, name: str, end: int) -> bool:
        """Whether the bytes of file ``name`` up to ``end`` were written and will never be
        stored (their tuples must be failed). Never for a local file: a failed write raises."""
        return False

    def _after_write(self) -> None:
        if self.rotation_size > 0 and self._size >= self.rotation_size:
            self._close_file()

    def _close_file(self) -> Path | None:
        fh, path = self._fh, self._open_path
        self._fh = self._open_path = None
        if fh is None or path is None:
            return None
        final = self._finish(fh, path)
        self.stats.files_closed += 1
        log.info("closed WARC file %s (%d bytes)", final, self._size)
        if self.on_close is not None:
            self.on_close(final)
        return final


def finalize_open(open_path: Path, suffix: str = OPEN_SUFFIX, new_suffix: str = "") -> Path:
    """Rename ``x.open`` to ``x`` atomically, never replacing an existing file."""
    final = open_path.with_name(open_path.name[: -len(suffix)] + new_suffix)
    try:
        os.link(open_path, final)
    except FileExistsError:
        if not os.path.samefile(open_path, final):  # an earlier finalize died after link()
            raise FileExistsError(f"cannot finalize {open_path}: {final} already exists") from None
    except OSError:  # no hard links on this filesystem
        if final.exists():
            raise FileExistsError(f"cannot finalize {open_path}: {final} already exists") from None
        os.rename(open_path, final)
        X.fsync_dir(final.parent)
        return final
    os.unlink(open_path)
    X.fsync_dir(final.parent)
    return final


# -- recovery -----------------------------------------------------------------------------------

@dataclass
class ScanResult:
    """What :func:`scan_members` found: bytes of complete records, records by type, first error."""

    valid_end: int
    size: int
    records: int
    types: dict[str, int]
    error: str | None
    #: (offset, length) of the valid members holding a record the CDXJ index lists
    indexed: list[tuple[int, int]] = field(default_factory=list)


def scan_members(path: str | os.PathLike, chunk_size: int = 1 << 20) -> ScanResult:
    """Walk the gzip members of a WARC file; stop at the first incomplete or invalid one.

    A member is valid when it inflates completely (gzip CRC and length checked by zlib) into
    whole WARC records. ``valid_end`` is the offset just after the last valid member."""
    size = os.path.getsize(path)
    valid_end = records = 0
    types: dict[str, int] = {}
    indexed: list[tuple[int, int]] = []
    error = None
    with open(path, "rb") as f:
        pending = b""
        member_start = 0
        consumed = 0  # compressed bytes of the current member fed so far
        d = zlib.decompressobj(31)
        out: list[bytes] = []
        while error is None:
            if not pending:
                pending = f.read(chunk_size)
                if not pending:
                    if consumed:
                        error = f"incomplete gzip member at offset {member_start}"
                    break
            try:
                out.append(d.decompress(pending))
            except zlib.error as e:
                error = f"corrupt gzip member at offset {member_start}: {e}"
                break
            if not d.eof:
                consumed += len(pending)
                pending = b""
                continue
            used = len(pending) - len(d.unused_data)
            pending = d.unused_data
            member_end = member_start + consumed + used
            try:
                found = _count_records(b"".join(out))
            except R.WARCFormatError as e:
                error = f"invalid record in gzip member at offset {member_start}: {e}"
                break
            for t in found:
                types[t] = types.get(t, 0) + 1
            if any(t.lower() in cdxj.INDEXED_TYPES for t in found):
                indexed.append((member_start, member_end - member_start))
            records += len(found)
            valid_end = member_start = member_end
            consumed, out, d = 0, [], zlib.decompressobj(31)
    return ScanResult(valid_end, size, records, types, error, indexed)


def _count_records(data: bytes) -> list[str]:
    types, pos = [], 0
    while pos < len(data):
        headers, start, length = R.parse_record_head(data, pos)
        end = start + length
        if data[end:end + 4] != R.RECORD_END:
            raise R.WARCFormatError("record block shorter than its Content-Length")
        types.append(headers.get("warc-type", "?"))
        pos = end + 4
    if not types:
        raise R.WARCFormatError("empty gzip member")
    return types


def recover_open_files(directory: str | os.PathLike, prefix: str | None = None,
                       partition: str | None = None, cdxj: bool = True) -> list[Path]:
    """Finalize ``*.warc.gz.open`` files left by a crash; return the final paths.

    Only files named ``{prefix}-…-{partition}-…`` are touched (``None`` = any). A trailing partial
    or corrupt member is cut off (logged); files with nothing but a warcinfo record are deleted;
    non-empty files with no valid record are renamed ``*.corrupt`` (kept, not returned). A file that
    cannot be finalized (e.g. its final name exists as another file) is logged and left ``.open``;
    new writers never reuse a name that exists as ``.open``, final or ``.corrupt``. With ``cdxj``
    each file finalized gets its index first, and finished files of the same writers whose index
    is missing get theirs (module docstring); without, only what indexed the files is removed."""
    d = Path(directory)
    if not d.is_dir():
        return []

    def ours(name: str) -> bool:
        parts = parse_file_name(name)
        return parts is not None and (prefix is None or parts["prefix"] == prefix) and (
            partition is None or parts["partition"] == str(partition))

    done: list[Path] = []
    for path in sorted(d.glob("*" + WARC_SUFFIX + OPEN_SUFFIX)):
        if not ours(path.name):
            continue
        try:
            final = _recover_one(path, cdxj)
        except OSError:  # one bad file must not stop the others (nor the bolt's start)
            log.exception("WARC recovery: cannot finalize %s; left as is", path)
            continue
        if final is not None:
            done.append(final)
    if cdxj:
        X.finish_leftovers(d, ours)
    return done


def _recover_one(path: Path, cdxj: bool = True) -> Path | None:
    res = scan_members(path)
    captures = res.records - res.types.get("warcinfo", 0)
    name = path.name[: -len(OPEN_SUFFIX)]
    if res.valid_end == 0 and res.size > 0:
        log.error("WARC recovery: %s has no valid record (%s); kept as %s%s",
                  path, res.error, name, CORRUPT_SUFFIX)
        finalize_open(path, new_suffix=CORRUPT_SUFFIX)
        X.drop(path.parent, name)
        return None
    if captures == 0:
        log.warning("WARC recovery: %s holds no capture (%d bytes); deleted", path, res.size)
        path.unlink()
        X.drop(path.parent, name)
        return None
    if res.valid_end < res.size:
        log.warning("WARC recovery: %s: %s; dropping the last %d bytes after %d valid records",
                    path, res.error, res.size - res.valid_end, res.records)
        with open(path, "r+b") as f:
            f.truncate(res.valid_end)
            f.flush()
            os.fsync(f.fileno())
    taken = path.with_name(name)
    if taken.exists() and not os.path.samefile(path, taken):  # (finalize_open would refuse it)
        raise FileExistsError(f"cannot finalize {path}: {taken} already exists")
    if cdxj:  # before the final name: a finished file always has its index
        X.recover_index(path, name, res.valid_end, res.indexed)
    else:
        X.drop(path.parent, name)
    final = finalize_open(path)
    log.warning("WARC recovery: finalized %s (%d records)", final, res.records)
    return final
