"""WARC/1.1 record serialization: headers, HTTP blocks, digests, one gzip member per record.

A record is ``WARC/1.1 CRLF`` + ``Name: value CRLF``… + ``CRLF`` + block + ``CRLF CRLF``
(WARC/1.1 §4). Each record is compressed as its own gzip member (zlib-ng's deflate, ``wbits=31``),
so a file is a valid multi-member gzip stream that warcio, jwarc and Common Crawl tooling read
record by record.

Rules applied here (and tested in ``tests/unit/test_warc_writer.py``):

* ``WARC-Date`` is UTC in W3C-DTF with microsecond precision (``2024-05-01T12:00:00.123456Z``,
  allowed by WARC/1.1 §5.4) or whole seconds (``precision="s"``).
* ``WARC-Target-URI`` must be a URI (RFC 3986, no angle brackets in WARC/1.1): a URL made only of
  URI characters is written unchanged; otherwise spaces, controls, non-ASCII (as UTF-8) and other
  characters outside RFC 3986 are percent-encoded, a ``%`` not followed by two hex digits becomes
  ``%25``, and a non-ASCII host is IDNA-encoded (percent-encoded if IDNA refuses it). Nothing else
  is normalized, so the URI still matches the frontier's URL.
* HTTP header text is written as latin-1 (a header decoded as latin-1 by the client round-trips
  byte for byte); text that latin-1 cannot hold is written as UTF-8 (``surrogateescape``, so bytes
  decoded with that handler come back unchanged). CR and LF inside names or values become spaces.
* HTTP response fix-up (the payload given is the body *after* transfer decoding):
  ``Transfer-Encoding`` is always renamed ``X-Crawler-Transfer-Encoding``; ``Content-Encoding`` is
  renamed ``X-Crawler-Content-Encoding`` when the client decoded the body (``payload_decoded``,
  the default: aiohttp decompresses); a ``Content-Length`` that differs from the payload length
  (or a second one) is renamed ``X-Crawler-Content-Length`` and a correct ``Content-Length`` is
  appended when none is left. A status line that is not ``HTTP/1.0``/``HTTP/1.1`` (e.g. ``HTTP/2
  200``) is rewritten ``HTTP/1.1 <code> <reason>`` and the protocol recorded as ``WARC-Protocol``
  (StormCrawler's WARCRecordFormat does the same rewrite).
* Digests are ``sha1:`` + Base32 (``WARC-Block-Digest`` over the whole block,
  ``WARC-Payload-Digest`` over the entity body of a response).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Iterable, Mapping, Sequence
from urllib.parse import quote

from zlib_ng import zlib_ng

from owler import wire

WARC_VERSION = "WARC/1.1"
CRLF = b"\r\n"
RECORD_END = b"\r\n\r\n"
RESPONSE_CONTENT_TYPE = "application/http;msgtype=response"
REQUEST_CONTENT_TYPE = "application/http;msgtype=request"
WARCINFO_CONTENT_TYPE = "application/warc-fields"
FORMAT = "WARC File Format 1.1"
CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"

#: WARC/1.1 §5.13 reasons for ``WARC-Truncated``.
TRUNCATED_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})

#: WARC/1.1 §6.7 revisit profiles, by the short names the fetcher uses (:mod:`owler.wire`)
REVISIT_PROFILES = {
    "identical-payload-digest":
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
    "server-not-modified": "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
}

#: Headers the writer sets itself; ``extra_headers`` may not override them.
RESERVED_HEADERS = frozenset(h.lower() for h in (
    "WARC-Type", "WARC-Record-ID", "WARC-Date", "Content-Length", "Content-Type",
    "WARC-Block-Digest", "WARC-Payload-Digest", "WARC-Target-URI", "WARC-Concurrent-To",
    "WARC-Warcinfo-ID", "WARC-IP-Address", "WARC-Truncated", "WARC-Filename", "WARC-Profile",
    "WARC-Refers-To-Target-URI", "WARC-Refers-To-Date",
))

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_URI_CHARS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")
_BAD_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_URI_SAFE = "-._~:/?#[]@!$&'()*+,;=%"
_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)(.*)$", re.S)
_STATUS = re.compile(r"^HTTP/(\d+(?:\.\d+)?)[ \t]+(\d{3})(?:[ \t]+(.*))?$", re.S)
_BARE_STATUS = re.compile(r"^(\d{3})(?:[ \t]+(.*))?$", re.S)
_CTL = str.maketrans({"\r": " ", "\n": " "})


class WARCFormatError(ValueError):
    """An argument cannot be turned into a valid WARC record. The message names it."""


# -- small helpers ------------------------------------------------------------------------------

def new_record_id() -> str:
    """A fresh ``<urn:uuid:…>`` record id."""
    return f"<urn:uuid:{uuid.uuid4()}>"


def warc_date(ts: float, precision: str = "us") -> str:
    """``ts`` (epoch seconds) as a WARC-Date: UTC, ``…T…Z``, microseconds or whole seconds."""
    if precision == "us":
        return wire.warc_date(ts)
    if precision == "s":
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts // 1)))
    raise WARCFormatError(f"date precision must be 's' or 'us', not {precision!r}")


#: ``sha1:`` + Base32 digest of the concatenated parts
sha1_b32 = wire.payload_digest


def _idna_host(authority: str) -> str:
    userinfo, at, hostport = authority.rpartition("@")
    host, port = hostport, ""
    if not hostport.startswith("["):
        h, colon, p = hostport.rpartition(":")
        if colon and p.isdigit():
            host, port = h, ":" + p
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        host = quote(host, safe=_URI_SAFE, errors="surrogateescape")
    if at:
        userinfo = quote(userinfo, safe=_URI_SAFE, errors="surrogateescape") + "@"
    return userinfo + host + port


def target_uri(url: str) -> str:
    """``url`` as a valid RFC 3986 URI for ``WARC-Target-URI`` (see the module rules)."""
    if not url:
        raise WARCFormatError("empty target URL")
    if _URI_CHARS.match(url) and not _BAD_PCT.search(url):
        return url
    url = _BAD_PCT.sub("%25", url)
    m = _AUTHORITY.match(url)
    if m and not m.group(2).isascii():
        return m.group(1) + _idna_host(m.group(2)) + quote(m.group(3), safe=_URI_SAFE,
                                                            errors="surrogateescape")
    return quote(url, safe=_URI_SAFE, errors="surrogateescape")


def header_bytes(text: str) -> bytes:
    """HTTP header text as bytes: latin-1, else UTF-8 with ``surrogateescape``."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def warc_value(name: str, value: object) -> str:
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    value = str(value)
    if "\r" in value or "\n" in value:
        raise WARCFormatError(f"WARC header {name!r}: value contains CR or LF")
    return value


def check_extra_headers(extra: Mapping[str, object] | None) -> list[tuple[str, str]]:
    """Validate caller-supplied WARC headers: token names, no CR/LF, no reserved names."""
    out: list[tuple[str, str]] = []
    for name, value in (extra or {}).items():
        if not _TOKEN.match(name):
            raise WARCFormatError(f"invalid WARC header name {name!r}")
        if name.lower() in RESERVED_HEADERS:
            raise WARCFormatError(f"WARC header {name!r} is set by the writer and cannot be overridden")
        out.append((name, warc_value(name, value)))
    return out


# -- HTTP blocks --------------------------------------------------------------------------------

def http_status_line(status_line: str) -> tuple[str, str | None]:
    """A status line fit for a WARC response block, and the ``WARC-Protocol`` when rewritten.

    ``HTTP/1.0``/``HTTP/1.1`` lines are kept; ``HTTP/2 200`` becomes ``HTTP/1.1 200`` with
    protocol ``h2``; a bare ``200 OK`` gets ``HTTP/1.1`` prepended. Anything else raises.
    """
    line = status_line.translate(_CTL).strip()
    m = _STATUS.match(line)
    if m:
        version, code, reason = m.groups()
        if version in ("1.0", "1.1"):
            return line, None
        proto = {"2": "h2", "2.0": "h2", "3": "h3", "3.0": "h3"}.get(version, f"http/{version}")
        return f"HTTP/1.1 {code} {reason or ''}".rstrip(), proto
    m = _BARE_STATUS.match(line)
    if m:
        return f"HTTP/1.1 {m.group(1)} {m.group(2) or ''}".rstrip(), None
    raise WARCFormatError(f"not an HTTP status line: {status_line!r}")


def http_response_head(status_line: str, headers: Iterable[tuple[str, str]], payload_length: int,
                       payload_decoded: bool = True) -> bytes:
    """Status line + fixed-up headers + blank line, as bytes (see the module rules)."""
    lines = [status_line]
    length = str(payload_length)
    have_length = False
    for name, value in headers:
        name = name.translate(_CTL).strip() or "X-Crawler-Empty-Header-Name"
        value = value.translate(_CTL)
        lname = name.lower()
        if lname == "transfer-encoding":
            name = "X-Crawler-Transfer-Encoding"
        elif lname == "content-encoding" and payload_decoded:
            name = "X-Crawler-Content-Encoding"
        elif lname == "content-length":
            if not have_length and value.strip() == length:
                have_length = True
            else:
                name = "X-Crawler-Content-Length"
        lines.append(f"{name}: {value}")
    if not have_length:
        lines.append(f"Content-Length: {length}")
    text = "\r\n".join(lines)
    try:
        return text.encode("latin-1") + RECORD_END
    except UnicodeEncodeError:  # encode line by line so latin-1 lines stay latin-1
        return b"\r\n".join(header_bytes(line) for line in lines) + RECORD_END


def http_request_head(raw: bytes) -> bytes:
    """The request line and headers as sent, terminated by exactly one blank line."""
    if not raw.strip():
        raise WARCFormatError("empty request line and headers")
    if raw.endswith(RECORD_END):
        return raw
    if raw.endswith(CRLF):
        return raw + CRLF
    return raw + RECORD_END


# -- records ------------------------------------------------------------------------------------

def record_head(headers: Sequence[tuple[str, str]], block_length: int) -> bytes:
    """The WARC header block (version line … blank line) with ``Content-Length`` last."""
    text = WARC_VERSION + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    return (text + f"Content-Length: {block_length}\r\n\r\n").encode("utf-8")


def gzip_member(parts: Iterable[bytes], level: int) -> bytes:
    """``parts`` concatenated and compressed as one gzip member.

    zlib-ng rather than zlib: the same gzip format and levels, 2.5x faster at level 6 on HTML with
    the same ratio (bench/bench_warc.py; BENCHMARKS.md), and gzip is most of what the WARC writer
    spends per page."""
    c = zlib_ng.compressobj(level, zlib_ng.DEFLATED, 31)
    out = [c.compress(p) for p in parts]
    out.append(c.flush())
    return b"".join(out)


def warc_fields(fields: Mapping[str, object]) -> bytes:
    """An ``application/warc-fields`` block; keys must be tokens, values one line."""
    lines = []
    for k, v in fields.items():
        if v is None or v == "":
            continue
        if not _TOKEN.match(k):
            raise WARCFormatError(f"invalid warc-fields name {k!r}")
        lines.append(f"{k}: {warc_value(k, v)}\r\n")
    return "".join(lines).encode("utf-8")


def parse_record_head(data: bytes | memoryview, start: int = 0) -> tuple[dict[str, str], int, int]:
    """Parse the WARC head at ``start``: (headers lower-cased, block start, block length).

    Raises :class:`WARCFormatError` when the head is incomplete or malformed."""
    mv = bytes(data[start:start + 65536]) if isinstance(data, memoryview) else data[start:start + 65536]
    end = mv.find(b"\r\n\r\n")
    if not mv.startswith(b"WARC/") or end < 0:
        raise WARCFormatError("no WARC record head")
    headers: dict[str, str] = {}
    for line in mv[:end].split(b"\r\n")[1:]:
        k, sep, v = line.partition(b":")
        if not sep:
            raise WARCFormatError(f"malformed WARC header line {line[:60]!r}")
        headers[k.strip().decode("utf-8", "replace").lower()] = v.strip().decode("utf-8", "replace")
    try:
        length = int(headers["content-length"])
    except (KeyError, ValueError):
        raise WARCFormatError("WARC record without a valid Content-Length") from None
    return headers, start + end + 4, length
