"""Reading WARC files as a stream of records that keep their exact input bytes, for copying them
unchanged (the warc2warc pipeline) and parsing their HTTP responses.

:func:`iter_records` reads a binary stream (a local file, an S3 body) once, front to back, with
bounded memory, and yields :class:`InputRecord` objects and, for damage it can step over,
:class:`InputProblem` objects. Layouts:

- one gzip member per record (WARC/1.1 Annex D, Common Crawl): ``raw`` is the member exactly as in
  the file, so the archive copy costs no recompression;
- a gzip member holding several records (a "non-chunked" ``.warc.gz``, one gzip stream for the
  whole file): each record is yielded with ``raw`` = its uncompressed bytes (the writer compresses
  it as a member of its own; the record's bytes are unchanged), and an :class:`InputProblem` says
  the file is not per-record compressed;
- an uncompressed ``.warc``: ``raw`` = the record's bytes.

Positions. ``key`` identifies a record within its file across runs: the member's (or, in an
uncompressed file, the record's) byte offset, with ``+n`` for the n-th further record of a
multi-record member. ``resume_offset`` is a position :func:`iter_records` can restart from (a
member boundary), so a reader can resume a file at the first record not yet done.

Damage. A stream that ends inside a member or a record (a truncated file) ends with
:class:`WARCReadError`; a corrupt gzip member or a block that is not a WARC record is reported as
an :class:`InputProblem` and reading goes on at the next gzip member (found by its magic bytes).
Digests: a ``WARC-Block-Digest`` (over the block) and, for ``application/http`` records, a
``WARC-Payload-Digest`` (over what follows the HTTP head, as warcio checks it) are verified
(sha1, sha256, sha512, md5; base32, hex or base64); a mismatch is recorded in
``InputRecord.problem`` and the record is still yielded (the archive keeps it as it was).
A record bigger than ``max_record`` bytes (decompressed) is skipped with a problem.

Versions: ``WARC/1.1``, ``WARC/1.0``, ``WARC/0.18`` and ``WARC/0.17`` heads are read alike.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

GZIP_MAGIC = b"\x1f\x8b\x08"
HEAD_END = b"\r\n\r\n"
MAX_HEAD = 256 * 1024
DEFAULT_MAX_RECORD = 256 * 1024 * 1024
CHUNK = 1 << 20

_DIGESTS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512,
            "md5": hashlib.md5}


class WARCReadError(Exception):
    """The stream cannot be read further (truncated, not WARC at all). ``offset`` is where."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (offset {offset})")
        self.offset = offset


@dataclass(slots=True)
class InputProblem:
    """Damage that was stepped over; reading went on."""

    offset: int
    message: str


@dataclass(slots=True)
class InputRecord:
    key: str
    offset: int  # where its bytes (its member) start in the file
    resume_offset: int  # a member boundary at or before it, to restart reading from
    raw: bytes  # the member as in the file, or the uncompressed record
    compressed: bool  # raw is a gzip member
    version: str
    headers: dict[str, str]  # lower-case names, first value
    block: bytes
    problem: str | None = None
    next_resume: int = 0  # where reading may restart once this record is done

    @property
    def type(self) -> str:
        return self.headers.get("warc-type", "").lower()

    @property
    def target_uri(self) -> str:
        uri = self.headers.get("warc-target-uri", "").strip()
        if uri.startswith("<") and uri.endswith(">"):  # WARC/1.0 writers that bracketed it
            uri = uri[1:-1]
        return uri

    @property
    def date(self) -> str:
        return self.headers.get("warc-date", "")

    @property
    def is_http_response(self) -> bool:
        ctype = self.headers.get("content-type", "").replace(" ", "").lower()
        return self.type == "response" and ctype.startswith("application/http")


# -- heads and digests --------------------------------------------------------------------------

def parse_head(data: bytes, start: int = 0) -> tuple[str, dict[str, str], int, int] | None:
    """``(version, headers, block start, block length)`` of the record head at ``start``; ``None``
    when the head is not complete in ``data`` yet. Raises ``ValueError`` when it is not a WARC
    record head."""
    if len(data) - start < 5:
        return None
    if data[start:start + 5] != b"WARC/":
        raise ValueError("not a WARC record")
    end = data.find(HEAD_END, start, start + MAX_HEAD)
    if end < 0:
        if len(data) - start >= MAX_HEAD:
            raise ValueError("WARC head longer than 256 KiB")
        return None
    lines = data[start:end].split(b"\r\n")
    version = lines[0].decode("ascii", "replace").strip()
    headers: dict[str, str] = {}
    last = None
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and last:  # a folded continuation line
            headers[last] += " " + line.strip().decode("utf-8", "replace")
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            raise ValueError(f"malformed WARC header line {line[:60]!r}")
        last = name.strip().decode("utf-8", "replace").lower()
        headers.setdefault(last, value.strip().decode("utf-8", "replace"))
    try:
        length = int(headers["content-length"])
    except (KeyError, ValueError):
        raise ValueError("WARC record without a valid Content-Length") from None
    if length < 0:
        raise ValueError("negative Content-Length")
    return version, headers, end + 4, length


def _digest_matches(spec: str, data: bytes | memoryview) -> bool | None:
    """``True``/``False`` for a ``algo:value`` digest over ``data``; ``None`` when not checkable."""
    algo, sep, value = spec.strip().partition(":")
    fn = _DIGESTS.get(algo.strip().lower().replace("-", ""))
    if not sep or fn is None or not value:
        return None
    digest = fn(data).digest()
    value = value.strip()
    candidates = []
    try:
        candidates.append(base64.b32decode(value.upper() + "=" * (-len(value) % 8)))
    except (binascii.Error, ValueError):
        pass
    try:
        candidates.append(bytes.fromhex(value))
    except ValueError:
        pass
    try:
        candidates.append(base64.b64decode(value + "=" * (-len(value) % 4), validate=True))
    except (binascii.Error, ValueError):
        pass
    if not candidates:
        return None
    return digest in candidates


def check_digests(headers: dict[str, str], block: bytes) -> str | None:
    """A mismatch of the record's block or payload digest, as a message; ``None`` when fine."""
    spec = headers.get("warc-block-digest")
    if spec and _digest_matches(spec, block) is False:
        return f"block digest mismatch ({spec[:80]})"
    spec = headers.get("warc-payload-digest")
    # a revisit's payload digest names the payload of the record it revisits, not its own
    if spec and headers.get("warc-type", "").lower() != "revisit" and headers.get(
            "content-type", "").replace(" ", "").lower().startswith("application/http"):
        end = block.find(HEAD_END)
        if end >= 0 and _digest_matches(spec, memoryview(block)[end + 4:]) is False:
            return f"payload digest mismatch ({spec[:80]})"
    return None


def _records_in(data: bytes, base: int, *, partial: bool
                ) -> tuple[list[tuple[int, str, dict, bytes, bytes]], int]:
    """Complete records at the front of ``data``: ``(start, version, headers, block, raw)``, and
    where the unparsed rest starts. With ``partial`` an incomplete last record is left for later;
    without, it raises ``ValueError``."""
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        # tolerate stray CR/LF between records (some writers add an extra CRLF)
        while pos < n and data[pos] in (13, 10):
            pos += 1
        if pos >= n:
            break
        head = parse_head(data, pos)
        if head is None:
            if partial:
                break
            raise ValueError(f"incomplete WARC head at offset {base + pos}")
        version, headers, bstart, length = head
        end = bstart + length
        if end + 4 > n:
            if partial:
                break
            raise ValueError(f"WARC record block cut short at offset {base + pos}")
        if data[end:end + 4] != HEAD_END:
            raise ValueError(f"WARC record at offset {base + pos} does not end with CRLF CRLF")
        out.append((pos, version, headers, data[bstart:end], data[pos:end + 4]))
        pos = end + 4
    return out, pos


# -- the reader ---------------------------------------------------------------------------------

class _Buffer:
    """Bytes read from a stream, addressed by absolute file offset. Consumed bytes are only
    skipped (``drop_to``) and compacted away at the next read, so walking a 1 MiB chunk of small
    members copies nothing per member."""

    def __init__(self, stream: BinaryIO, start: int, chunk: int) -> None:
        self.stream, self.chunk = stream, chunk
        self.data = b""
        self.pos = 0  # consumed bytes at the front of data
        self.base = start  # file offset of data[pos]
        self.eof = False

    def fill(self) -> bool:
        if self.eof:
            return False
        more = self.stream.read(self.chunk)
        if not more:
            self.eof = True
            return False
        rest = self.data[self.pos:] if self.pos else self.data
        self.data = rest + more if rest else bytes(more)
        self.pos = 0
        return True

    def drop_to(self, offset: int) -> None:
        cut = offset - self.base
        if cut > 0:
            self.pos = min(self.pos + cut, len(self.data))
            self.base = offset

    def view(self, start: int, end: int | None = None) -> memoryview:
        """The bytes from file offset ``start`` (to ``end``) without copying."""
        lo = self.pos + start - self.base
        hi = len(self.data) if end is None else self.pos + end - self.base
        return memoryview(self.data)[lo:hi]

    def bytes(self, start: int, end: int) -> bytes:
        lo = self.pos + start - self.base
        return self.data[lo:lo + end - start]

    def find(self, needle: bytes, start: int) -> int:
        i = self.data.find(needle, self.pos + start - self.base)
        return -1 if i < 0 else self.base + i - self.pos

    @property
    def size(self) -> int:
        return len(self.data) - self.pos

    @property
    def end(self) -> int:
        return self.base + self.size


def iter_records(stream: BinaryIO, start: int = 0, *, max_record: int = DEFAULT_MAX_RECORD,
                 verify: bool = True, chunk: int = CHUNK
                 ) -> Iterator[InputRecord | InputProblem]:
    """Records of the WARC file in ``stream``, positioned at byte ``start`` of the file (a member
    boundary; ``0`` for the whole file). See the module docstring."""
    buf = _Buffer(stream, start, chunk)
    while buf.size < 5 and buf.fill():
        pass
    if not buf.size:
        return
    first = buf.bytes(start, start + 5)
    if first[:2] == GZIP_MAGIC[:2]:
        yield from _gzip_records(buf, max_record, verify)
    elif first == b"WARC/" or first[:1] in (b"\r", b"\n"):
        yield from _plain_records(buf, max_record, verify)
    else:
        raise WARCReadError("neither a gzip member nor a WARC record", start)


def _make(key: str, offset: int, resume: int, raw: bytes, compressed: bool, version: str,
          headers: dict, block: bytes, verify: bool, next_resume: int) -> InputRecord:
    problem = check_digests(headers, block) if verify else None
    return InputRecord(key, offset, resume, raw, compressed, version, headers, block, problem,
                       next_resume)


def _plain_records(buf: _Buffer, max_record: int, verify: bool
                   ) -> Iterator[InputRecord | InputProblem]:
    while True:
        if not buf.size and not buf.fill():
            return
        lead = buf.bytes(buf.base, buf.base + 2)
        if lead[:1] in (b"\r", b"\n"):  # stray line ends between records
            buf.drop_to(buf.base + 1)
            continue
        offset = buf.base
        try:
            head = parse_head(buf.bytes(offset, min(buf.end, offset + MAX_HEAD)))
        except ValueError as exc:
            raise WARCReadError(str(exc), offset) from None
        if head is None:
            if not buf.fill():
                raise WARCReadError("truncated WARC head", offset)
            continue
        version, headers, bstart, length = head
        if length > max_record:
            raise WARCReadError(f"record of {length} bytes over the limit of {max_record}", offset)
        end = offset + bstart + length + 4
        while buf.end < end and buf.fill():
            pass
        if buf.end < end - 4:
            raise WARCReadError("truncated WARC record", offset)
        raw = buf.bytes(offset, end)
        if raw[-4:] != HEAD_END:
            after = _line_ends_then_head(buf, end - 4)
            if after is not None:  # a sloppy writer's record end: the record is whole
                yield InputProblem(offset, f"WARC record ends with {after - end + 4} line-end "
                                   "byte(s) instead of CRLF CRLF; read by its Content-Length")
                fixed = buf.bytes(offset, end - 4) + HEAD_END
                yield _make(str(offset), offset, offset, fixed, False, version, headers,
                            fixed[bstart:-4], verify, after)
                buf.drop_to(after)
                continue
            if buf.end < end:
                raise WARCReadError("truncated WARC record", offset)
            # a wrong Content-Length or a cut record: find the next one
            nxt = _next_plain_head(buf, offset + 1)
            yield InputProblem(offset, "WARC record does not end with CRLF CRLF (wrong "
                               "Content-Length or a cut record); skipped to "
                               + (f"offset {nxt}" if nxt is not None else "the end"))
            if nxt is None:
                return
            continue
        yield _make(str(offset), offset, offset, raw, False, version, headers,
                    raw[bstart:-4], verify, end)
        buf.drop_to(end)


def _line_ends_then_head(buf: _Buffer, pos: int) -> int | None:
    """Where a run of 1 to 8 CR/LF bytes at ``pos`` ends, when a WARC head or the end of the
    stream follows it (some writers end a record with one CRLF, or three); None otherwise."""
    while buf.end < pos + 16 and buf.fill():
        pass
    tail = buf.bytes(pos, min(buf.end, pos + 16))
    run = len(tail) - len(tail.lstrip(b"\r\n"))
    if not 1 <= run <= 8:
        return None
    rest = tail[run:]
    if rest.startswith(b"WARC/") or (not rest and buf.end == pos + run):
        return pos + run
    return None


def _next_plain_head(buf: _Buffer, after: int) -> int | None:
    """Move to the next ``WARC/`` at the start of a line at or after ``after``."""
    buf.drop_to(max(after, buf.base))
    while True:
        i = buf.find(b"\nWARC/", buf.base)
        if i >= 0:
            buf.drop_to(i + 1)
            return i + 1
        buf.drop_to(max(buf.base, buf.end - 6))
        if not buf.fill():
            return None


def _gzip_records(buf: _Buffer, max_record: int, verify: bool
                  ) -> Iterator[InputRecord | InputProblem]:
    while True:
        if buf.size < 3 and not buf.fill() and not buf.size:
            return
        member_start = buf.base
        if buf.bytes(member_start, member_start + 3) != GZIP_MAGIC:
            if buf.size < 3 and buf.fill():
                continue
            rest = buf.bytes(member_start, buf.end)
            if not rest.strip(b"\x00\r\n"):  # padding at the end of a file
                buf.drop_to(buf.end)
                if not buf.fill():
                    return
                continue
            nxt = _resync(buf, member_start)
            yield InputProblem(member_start, "garbage between gzip members; skipped to "
                               + (f"offset {nxt}" if nxt is not None else "the end"))
            if nxt is None:
                return
            continue
        try:
            yield from _one_member(buf, member_start, max_record, verify)
        except _CorruptMember as exc:
            nxt = _resync(buf, member_start + 1)
            yield InputProblem(member_start, f"{exc}; skipped to "
                               + (f"offset {nxt}" if nxt is not None else "the end"))
            if nxt is None:
                return


class _CorruptMember(Exception):
    pass


def _resync(buf: _Buffer, after: int) -> int | None:
    """Move to the next gzip magic at or after ``after``; its offset, or None at the end."""
    buf.drop_to(max(after, buf.base))
    while True:
        i = buf.find(GZIP_MAGIC, buf.base)
        if i >= 0:
            buf.drop_to(i)
            return i
        buf.drop_to(max(buf.base, buf.end - 2))
        if not buf.fill():
            return None


def _too_big(out: bytes, max_record: int) -> bool:
    """The record starting ``out`` (a head parsed, or too much data without one) is over the limit."""
    try:
        head = parse_head(out.lstrip(b"\r\n"))
    except ValueError:
        return False  # _records_in reports it
    if head is None:
        return len(out) > max_record + MAX_HEAD
    return head[3] > max_record


FEED = 32 * 1024  # compressed bytes per decompress call: bounds zlib's copy of the unused input


def _one_member(buf: _Buffer, member_start: int, max_record: int, verify: bool
                ) -> Iterator[InputRecord | InputProblem]:
    """Decompress the member at ``member_start`` and yield its record(s).

    A member is per-record when it inflates to exactly one record: then ``raw`` is the member.
    As soon as a second record (or bytes after a complete one) shows, the member holds several:
    its records are yielded uncompressed as they complete, and the compressed bytes already
    inflated are released, so a whole-file gzip stream is read with bounded memory."""
    d = zlib.decompressobj(31)
    fed = member_start  # file offset of the next compressed byte to feed
    out = b""  # inflated bytes not yet turned into records
    out_base = 0
    records: list = []  # complete records not yet yielded
    multi = False
    index = 0
    skipping = False
    dropped = 0
    while not d.eof:
        if fed >= buf.end and not buf.fill():
            raise WARCReadError("truncated gzip member", member_start)
        piece = buf.view(fed, min(buf.end, fed + FEED))
        try:
            got = d.decompress(piece)
        except zlib.error as exc:
            raise _CorruptMember(f"corrupt gzip member: {exc}") from None
        fed += len(piece) - len(d.unused_data) if d.eof else len(piece)
        if skipping:
            continue
        out = out + got if out else got
        try:
            recs, used = _records_in(out, out_base, partial=not d.eof)
        except ValueError as exc:
            raise _CorruptMember(str(exc)) from None
        if recs:
            for rec in recs:
                if len(rec[3]) > max_record:  # complete already (it compressed well): drop it
                    dropped += 1
                    yield InputProblem(member_start, f"record over {max_record} bytes skipped")
                else:
                    records.append(rec)
            out = out[used:]
            out_base += used
        elif _too_big(out, max_record):
            skipping = True
            out, records = b"", []
            yield InputProblem(member_start, f"record over {max_record} bytes skipped")
            continue
        if not multi and (len(records) > 1 or (records and out.strip(b"\r\n"))):
            multi = True
            yield InputProblem(member_start, "several records in one gzip member (not "
                               "per-record compressed): records recompressed one by one")
        if multi:
            for _, version, headers, block, raw in records:
                key = str(member_start) if index == 0 else f"{member_start}+{index}"
                yield _make(key, member_start, member_start, raw, False, version, headers,
                            block, verify, member_start)
                index += 1
            records = []
            if not d.eof:
                buf.drop_to(fed)  # never needed again: the copy is of the records, not the member
    if not skipping and out.strip(b"\r\n"):
        raise _CorruptMember("gzip member ends inside a WARC record")
    if not multi and len(records) == 1:
        _, version, headers, block, _ = records[0]
        raw = buf.bytes(member_start, fed)
        yield _make(str(member_start), member_start, member_start, raw, True, version, headers,
                    block, verify, fed)
    elif not multi and not skipping and not dropped:
        yield InputProblem(member_start, "empty gzip member")
    buf.drop_to(fed)
