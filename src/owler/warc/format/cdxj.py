"""CDXJ: the index of a WARC file's captures, one line per record, in the format pywb reads, and
the look-ups (:func:`find_captures`) that find every capture of a host or under a URL prefix in
such indices.

A line is ``<SURT key> <14-digit timestamp> <JSON>``::

    com,example)/a?b=1&c=2 20261130120000 {"url": "http://www.example.com/a?c=2&b=1", "mime": "text/html", "status": "200", "digest": "KN3Z…", "length": "2412", "offset": "8312", "filename": "OWLER-20261130120000-00-00000.warc.gz"}

What goes into it is what pywb's own indexer (``cdx-indexer -j`` of pywb 2.10, its rules read in
the package's source) writes for the same record, byte for byte, so that pywb replays the crawl
from these indices and so that the test that runs pywb's indexer on the crawl's files
(``tests/integration/test_cdxj_pywb.py``) can compare lines rather than meanings:

- the key is :func:`surt` of ``WARC-Target-URI``; the timestamp is ``WARC-Date``'s first six
  numbers (the microseconds are cut off, not rounded);
- the JSON object has, in this order and only when they have a value: ``url`` (the target URI as
  written), ``mime`` (a response's HTTP ``Content-Type`` up to its first ``;`` or space, ``unk``
  without one; a revisit's ``warc/revisit``; a resource's WARC ``Content-Type``),
  ``mime-detected`` (``WARC-Identified-Payload-Type``), ``status`` (a response's HTTP status code;
  none for revisits and resources), ``digest`` (``WARC-Payload-Digest`` without its ``sha1:``;
  computed, as pywb does, when a response or resource has none), ``length`` and ``offset`` (the
  record's gzip member in the file, as decimal strings), ``filename``; a ``WARC-JSON-Metadata``
  header's value comes first as ``metadata``. Python's ``json.dumps`` with its default
  separators, as pywb writes it (pywb reads compact JSON as well);
- indexed: ``response``, ``revisit`` and ``resource`` records. Not indexed: ``warcinfo`` and
  ``request`` records (pywb's default too), and ``metadata`` (and ``conversion``) records, which
  pywb's indexer does index (but for ``text/anvl``): the crawl's metadata record of a page (its
  webmasters' signals, JSON) has the page's URL and WARC-Date, so pywb, given both lines, replays
  the signals instead of the page at that moment (tried with pywb 2.10: ``id_`` of the page's
  timestamp answered the metadata record's JSON). An index is sorted by its lines' bytes (pywb
  binary-searches it; :func:`sorted_lines`).

SURT keys (:func:`surt`)
  pywb computes a lookup's key with the ``surt`` package's default canonicalizer (Google's
  canonicalization, then the Internet Archive's), so a key here must be that function's result
  to the byte or pywb finds nothing. The ``surt`` package itself is not used: it is AGPL-3.0
  (this project is Apache-2.0), unreleased since 2019, imports ``tldextract``, and costs twice
  as much per URL as this function (``bench/bench_cdxj.py``, 2026-11-30: 5,000 URLs of a crawl's
  kind, CPU time, best of 5, on the project's 2-core machine: 16.0 µs per URL with ``surt.surt``
  in pywb's virtualenv against 7.5 µs here; docs/benchmarks-history.md, issue 47). The keys are made
  here by the rules that canonicalization follows (surt 0.3.1's, as its output shows them), with
  the same quirks: ``www``, ``www2.`` … stripped from the host's start, the path and query
  lower-cased, the query's arguments sorted, session ids (``jsessionid=…``, ``PHPSESSID``, …)
  dropped, ``.``/``..`` segments resolved, default ports dropped, percent-escapes undone then
  the bytes outside printable ASCII escaped once, numeric hosts made dotted quads (as the C
  library's ``inet_aton`` reads them: ``0x7f.1`` is not numeric, ``2130706433`` and ``0177.0.0.1``
  are), IP addresses reversed like names, the fragment dropped, the scheme left out. The
  integration test compares it with ``surt.surt`` on thousands of generated URLs.

Look-ups (:func:`find_captures`)
  A host target matches the host and its subdomains on label boundaries (``example.com``: also
  ``a.example.com``, not ``badexample.com`` nor ``example.co``), any port unless the target
  names one; a URL prefix (``https://example.com/private/``; the scheme is ignored) matches the
  URLs that start with it once both have a lower-cased, IDNA-encoded host without its scheme's
  default port (the path is compared as written, case and all). Both read only the key ranges
  that can hold a match, found by binary search in each sorted index (a few reads of a file of
  any size), and check every line of them against the URL itself: keys drop ``www.`` and
  lower-case paths, so a range is wider than the match, never narrower. A URL that an index
  holds only in a form SURT moves out of its prefix (``/private/../public`` is ``/public``) is
  not under the prefix.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping
from urllib.parse import quote_from_bytes, unquote_to_bytes

from zlib_ng import zlib_ng

from owler.warc.format import reader as _reader

INDEX_SUFFIX = ".cdxj"
#: the records an index lists (module docstring: why not ``metadata``)
INDEXED_TYPES = frozenset({"response", "revisit", "resource"})
_HTTP_TYPES = ("response", "revisit")
_MIME_SPLIT = re.compile(r"[; ]")
_NOT_DIGIT = re.compile(r"[^\d]")


class CDXJError(ValueError):
    """A record or a line that cannot be indexed or read; the message says which and why."""


# -- SURT -----------------------------------------------------------------------------------------

_HAS_SCHEME = re.compile(rb"^[a-zA-Z][a-zA-Z0-9+\-.]*:")
_REPEATED_HTTP = re.compile(rb"^(https?://)+")
_TABS_NEWLINES = re.compile(rb"[\n\r\t]")
#: scheme, authority, path, query (each None when absent); the fragment is dropped
_SPLIT = re.compile(rb"^(?:([a-zA-Z][a-zA-Z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?"
                    rb"(?:#.*)?$", re.S)
_DECIMAL_IP = re.compile(rb"^[1-9][0-9]*(?:\.[0-9]+){0,3}$")
_OCTAL_IP = re.compile(rb"^0[0-7]*(?:\.[0-7]+){0,3}$")
_LEADING_WWW = re.compile(rb"^www\d*\.")
_PATH_SESSION = (
    re.compile(rb"^(.*/)(\((?:[a-z]\([0-9a-z]{24}\))+\)/)([^?]+\.aspx.*)$", re.I | re.S),
    re.compile(rb"^(.*/)(\([0-9a-z]{24}\)/)([^?]+\.aspx.*)$", re.I | re.S),
)
#: the session arguments a key leaves out of a query, as (name, value) patterns, each removed
#: where it matches last, with the ``&`` after it (ColdFusion's is the pair cfid and cftoken)
_SESSION_ARGS = ((rb"jsessionid", rb"[0-9a-zA-Z]{32}"), (rb"phpsessid", rb"[0-9a-zA-Z]{32}"),
                 (rb"sid", rb"[0-9a-zA-Z]{32}"), (rb"ASPSESSIONID[a-zA-Z]{8}", rb"[a-zA-Z]{24}"),
                 (rb"cfid", rb"[^&]+&cftoken=[^&]+"))
_QUERY_SESSION = tuple(re.compile(rb"^(.*)(?:" + name + rb"=" + value + rb")(?:&(.*))?$",
                                  re.I | re.S) for name, value in _SESSION_ARGS)
#: what is left unescaped besides letters, digits and ``_.-~``: printable ASCII but ``#``, ``%``
_SAFE = b"!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~"
_DEFAULT_PORTS = {b"http": 80, b"https": 443}


def _unescape(s: bytes) -> bytes:
    """Percent-escapes undone until none is left (``%2541`` → ``%41`` → ``A``)."""
    while b"%" in s:
        un = unquote_to_bytes(s)
        if un == s:
            break
        s = un
    return s


_NEEDS_ESCAPE = re.compile(rb"[^!-~]|[#%]").search


def _escape(s: bytes) -> bytes:
    """Bytes outside printable ASCII, and ``#``, ``%``, percent-escaped (a key is ASCII)."""
    if not s or not _NEEDS_ESCAPE(s):
        return s
    return quote_from_bytes(s, safe=_SAFE).encode("ascii")


def _numeric_host(host: bytes) -> bytes | None:
    """A host written as a number, as a dotted quad (as the C library reads one), else None."""
    if host.isdigit():
        return socket.inet_ntoa((int(host) & 0xFFFFFFFF).to_bytes(4, "big")).encode("ascii")
    if _DECIMAL_IP.match(host) or _OCTAL_IP.match(host):
        try:
            return socket.inet_ntoa(socket.inet_aton(host.decode("ascii"))).encode("ascii")
        except OSError:
            return None
    return None


def _normalize_path(path: bytes) -> bytes:
    """``.`` and ``..`` segments resolved, empty segments but the last dropped; a ``..`` with
    nothing left to remove stays."""
    if not path:
        return b"/"
    kept: list[bytes] = []
    for seg in path.split(b"/")[1:]:
        if seg == b".":
            continue
        if seg == b"..":
            if kept:
                kept.pop()
            else:
                kept.append(seg)
            continue
        kept.append(seg)
    if not kept:
        return b"/"
    return b"/" + b"".join(s + b"/" for s in kept[:-1] if s) + kept[-1]


def _sort_query(query: bytes) -> bytes:
    """The arguments sorted as (name, value) pairs, an argument without ``=`` before one with."""
    if len(query) <= 1:
        return query
    pairs = sorted(tuple(arg.split(b"=", 1)) for arg in query.split(b"&"))
    return b"&".join(b"=".join(p) for p in pairs)


def _split(url: bytes) -> tuple[bytes, bytes | None, int | None, bytes | None, bytes | None]:
    """scheme, host, port, path, query of ``url`` (a scheme added when it has none)."""
    url = url.strip()
    if b"\t" in url or b"\n" in url or b"\r" in url:
        url = _TABS_NEWLINES.sub(b"", url)
    if not _HAS_SCHEME.match(url):
        url = b"http://" + url
    if url.startswith((b"http://http", b"https://http")):
        url = _REPEATED_HTTP.sub(lambda m: m.group(1), url)
    m = _SPLIT.match(url)
    scheme, netloc, path, query = m.group(1) or b"", m.group(2) or b"", m.group(3), m.group(4)
    netloc = netloc.rstrip(b":")
    hostinfo = netloc.rpartition(b"@")[2]
    if b"[" in hostinfo:
        host, _, rest = hostinfo.partition(b"[")[2].partition(b"]")
        port_text = rest.partition(b":")[2]
    else:
        host, _, port_text = hostinfo.partition(b":")
    port = None
    if port_text:
        if not (port_text.isdigit() and port_text.isascii()) or int(port_text) > 65535:
            raise CDXJError(f"not a port: {port_text[:20]!r} in {url[:200]!r}")
        port = int(port_text) or None
    host = host.lower() or None
    path = path or None
    if host is None and path is not None and scheme.startswith(b"http"):
        # "http:////www.example.com/a": the host is the first segment of the path
        host, _, rest = path.lstrip(b"/").partition(b"/")
        path = b"/" + rest
    return scheme, host, port, path, query or None


@functools.lru_cache(maxsize=4096)
def _canonical_host(host: bytes) -> bytes:
    """The host as the key writes it, before its labels are reversed (a crawl's records come
    from a few hosts at a time: cached)."""
    host = _unescape(host)
    if not host.isascii():
        try:
            host = host.decode("utf-8", "ignore").encode("idna")
        except UnicodeError:
            pass
    host = host.replace(b"..", b".").strip(b".")
    numeric = _numeric_host(host)
    host = numeric if numeric else _escape(host.lower())
    host = host.lower()
    m = _LEADING_WWW.match(host)
    return host[m.end():] if m else host


def surt(url: str) -> str:
    """The SURT key pywb looks ``url`` up by (module docstring). :class:`CDXJError` for a URL
    whose port is not a number up to 65535 (pywb cannot look such a URL up either)."""
    if not url:
        return "-"
    raw = url.encode("utf-8", "surrogateescape")
    if raw.startswith(b"filedesc"):
        return url
    if not raw.strip():
        raise CDXJError(f"a blank URL: {url!r}")
    scheme, host, port, path, query = _split(raw)
    if host:
        host = _canonical_host(host)
    path = _unescape(path) if path is not None else None
    if host:
        path = _normalize_path(path)
    path = _escape(path) if path else path
    if port is not None and port == _DEFAULT_PORTS.get(scheme.lower(), 0):
        port = None
    if path:
        path = path.lower()
        if b".aspx" in path:  # what both path patterns need
            for pattern in _PATH_SESSION:
                m = pattern.match(path)
                if m:
                    path = m.group(1) + m.group(3)
        if len(path) > 1 and path.endswith(b"/"):
            path = path[:-1]
    if query:
        query = _escape(_unescape(query))
        lower = query.lower()
        if b"sid" in lower or b"sessionid" in lower or b"cfid" in lower:  # one of them is needed
            for pattern in _QUERY_SESSION:
                m = pattern.match(query)
                if m:
                    query = m.group(1) + m.group(2) if m.group(2) else m.group(1)
            lower = query.lower()
        query = _sort_query(lower) or None
    if host:
        key = b",".join(reversed(host.split(b".")))
        if port is not None:
            key += b":%d" % port
        key += b")"
    else:
        key = scheme + b":"
    if path:
        key += path
    elif query is not None:
        key += b"/"
    if query is not None:
        key += b"?" + query
    return key.decode("utf-8", "surrogateescape")


def surt_host(host: str) -> str:
    """The host part of the SURT keys of ``host``'s URLs (``www.Example.com`` → ``com,example``),
    without a port."""
    key = surt("http://" + host.split("/")[0].rsplit("@", 1)[-1] + "/")
    return key.partition(")")[0].partition(":")[0]


# -- lines ----------------------------------------------------------------------------------------

def timestamp14(warc_date: str) -> str:
    """A WARC-Date as the 14 digits of a CDXJ line (UTC; fractions of a second cut off, as
    warcio's ``iso_date_to_timestamp`` does). :class:`CDXJError` when it is not a date."""
    d = warc_date.strip()
    if len(d) >= 19 and d[4] == "-" and d[7] == "-" and d[10] == "T" and d[13] == ":" \
            and d[16] == ":":  # the common shape
        ts = d[0:4] + d[5:7] + d[8:10] + d[11:13] + d[14:16] + d[17:19]
    else:
        nums = [n for n in _NOT_DIGIT.split(d) if n][:6]
        if len(nums) < 3 or len(nums[0]) != 4 or any(len(n) > 2 for n in nums[1:]):
            raise CDXJError(f"not a WARC-Date: {warc_date[:60]!r}")
        ts = nums[0] + "".join(n.zfill(2) for n in nums[1:]) + "00" * (6 - len(nums))
    if not (ts.isdigit() and ts.isascii() and "01" <= ts[4:6] <= "12" and "01" <= ts[6:8] <= "31"
            and ts[8:10] <= "23" and ts[10:12] <= "59" and ts[12:14] <= "60"):
        raise CDXJError(f"not a WARC-Date: {warc_date[:60]!r}")
    return ts


def _text(raw: bytes) -> str:
    """A header's bytes as warcio decodes them: UTF-8, else latin-1."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


#: the WARC headers a line is made of (and the block's length)
_WANTED = frozenset({b"warc-type", b"warc-target-uri", b"warc-date", b"warc-payload-digest",
                     b"content-type", b"warc-identified-payload-type", b"warc-json-metadata",
                     b"content-length"})


def _warc_head(data: bytes) -> tuple[dict[str, str], int, int] | None:
    """The headers a line needs (lower-case names, first value, folded lines joined as warcio
    joins them), where the block starts and its length; None when the head does not end in
    ``data``. :class:`CDXJError` when ``data`` is not a WARC record."""
    if not data.startswith(b"WARC/"):
        if len(data) < 5 and b"WARC/".startswith(data):
            return None
        raise CDXJError("not a WARC record")
    end = data.find(b"\r\n\r\n", 0, _reader.MAX_HEAD)
    if end < 0:
        if len(data) >= _reader.MAX_HEAD:
            raise CDXJError("WARC head longer than 256 KiB")
        return None
    headers: dict[str, str] = {}
    last = None
    for line in data[:end].split(b"\r\n")[1:]:
        if line[:1] in (b" ", b"\t"):
            if last is not None:
                headers[last] += _text(line.rstrip())
            continue
        name, sep, value = line.partition(b":")
        key = name.rstrip(b" \t").lower()
        last = None
        if sep and key in _WANTED:
            name_s = key.decode("ascii")
            if name_s not in headers:
                headers[name_s] = _text(value.strip())
                last = name_s
    try:
        length = int(headers["content-length"])
    except (KeyError, ValueError):
        raise CDXJError("WARC record without a valid Content-Length") from None
    if length < 0:
        raise CDXJError("WARC record with a negative Content-Length")
    return headers, end + 4, length


_CONTENT_TYPE = b"content-type"


def _http_head(block: bytes | memoryview, complete: bool) -> tuple[str, str | None, int] | None:
    """An HTTP block's status code, its first Content-Type and where its payload starts, read as
    warcio reads them for pywb (lines split at LF, right-stripped, decoded as UTF-8 else latin-1;
    folded lines joined to their header); None when ``block`` is the block's beginning only and
    the head does not end in it."""
    if not isinstance(block, bytes):
        # a head is short: copy a few KiB of a page's block, not all of it
        cut = bytes(block[:8192])
        if b"\n\n" in cut or b"\n\r\n" in cut or len(block) <= 8192:
            block = cut
        else:
            block = bytes(block[:_reader.MAX_HEAD])
    data = block
    n = len(data)
    lines: list[bytes] = []
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            if not complete:
                return None
            nl = n - 1
        line = data[pos:nl + 1].rstrip()
        pos = nl + 1
        if not line:
            break
        lines.append(line)
        if pos >= n:
            if not complete:
                return None
            break
    if not lines:  # no status line: no headers either
        return "", None, pos
    parts = _text(lines[0]).split(" ", 1)
    status = parts[1].strip() if len(parts) > 1 else ""
    code = status.split(" ", 1)[0]
    if code == "204" and "Error" in status:
        code = "-"
    ctype = None
    for i in range(1, len(lines)):
        line = lines[i]
        if line[:1] in (b" ", b"\t"):
            continue
        name, sep, value = line.partition(b":")
        if sep and name.rstrip(b" \t").lower() == _CONTENT_TYPE:
            raw = value.lstrip()
            for more in lines[i + 1:]:
                if more[:1] not in (b" ", b"\t"):
                    break
                raw += more
            ctype = _text(raw)
            break
    return code, ctype, pos


def _mime(content_type: str | None, default: str) -> str:
    return _MIME_SPLIT.split(content_type, 1)[0] if content_type else default


_json_str = json.encoder.encode_basestring_ascii  # what json.dumps writes for a str


def record_line(headers: Mapping[str, str], block: bytes | memoryview, offset: int, length: int,
                filename: str, *, complete: bool = True) -> str | None:
    """The index line of a record (``headers`` with lower-case names, its ``block``), whose
    bytes in ``filename`` (its gzip member, or the record in an uncompressed file) are
    ``length`` bytes at ``offset``; None for a record that is not indexed. With ``complete``
    false, ``block`` may be the block's beginning only: :class:`_Incomplete` when the line needs
    more of it. :class:`CDXJError` when the record has no target URI or no usable WARC-Date."""
    rec_type = headers.get("warc-type", "").strip().lower()
    if rec_type not in INDEXED_TYPES:
        return None
    if headers.get("content-type") == "application/warc-fields":
        return None
    url = headers.get("warc-target-uri", "").strip()
    if url.startswith("<") and url.endswith(">"):
        url = url[1:-1]
    if not url:
        raise CDXJError(f"{rec_type} record at offset {offset} of {filename} has no "
                        "WARC-Target-URI")
    date = headers.get("warc-date")
    if not date:
        raise CDXJError(f"{rec_type} record at offset {offset} of {filename} has no WARC-Date")
    status = None
    payload_start = 0
    if rec_type == "revisit":
        mime = "warc/revisit"
    elif rec_type == "response" and len(block) > 0 and url.startswith(("http:", "https:")):
        head = _http_head(block, complete)
        if head is None:
            raise _Incomplete
        status, ctype, payload_start = head
        mime = _mime(ctype, "unk")
    else:  # warcio gives such a record the head "200 OK" with the WARC Content-Type
        mime = _mime(headers.get("content-type"), "unk")
        status = "200"
    digest = headers.get("warc-payload-digest")
    if digest and digest.startswith("sha1:"):
        digest = digest[5:]
    elif not digest and rec_type != "revisit":
        if not complete:
            raise _Incomplete
        digest = base64.b32encode(hashlib.sha1(block[payload_start:]).digest()).decode("ascii")
    fields = [("metadata", headers.get("warc-json-metadata")), ("url", url), ("mime", mime)]
    if rec_type != "revisit":
        fields.append(("mime-detected", headers.get("warc-identified-payload-type")))
    if rec_type == "response":
        fields.append(("status", status))
    fields += [("digest", digest), ("length", str(length)), ("offset", str(offset)),
               ("filename", filename)]
    js = ", ".join(f'"{k}": {_json_str(v)}' for k, v in fields if v and v != "-")
    return f"{surt(url)} {timestamp14(date)} {{{js}}}"


def heads_line(warc_headers: Iterable[tuple[str, str]], http_head: bytes, offset: int,
               length: int, filename: str) -> str | None:
    """:func:`record_line` of a response or revisit record the writer has just made, from its
    WARC headers as written (``(name, value)`` pairs) and the HTTP head its block starts with,
    without inflating the member (what the crawl's writer indexes each exchange with; the line
    is the one :func:`member_line` reads off the member, as the writer's tests check). The
    record carries its WARC-Payload-Digest when it has a payload (the writer always writes
    one)."""
    headers: dict[str, str] = {}
    for name, value in warc_headers:
        key = name.lower()
        if key not in headers:
            headers[key] = value
    return record_line(headers, http_head, offset, length, filename, complete=False)


class _Incomplete(Exception):
    """The beginning of a block is not enough for the line (internal to :func:`member_line`)."""


#: what :func:`member_line` inflates first: a crawl record's WARC and HTTP heads fit in it
_FIRST_INFLATE = 3072


def member_line(member: bytes | memoryview, offset: int, filename: str) -> str | None:
    """The index line of the record in one gzip ``member`` of ``filename`` at ``offset`` (None
    when not indexed). Inflates only the heads when they say all the line needs (the crawl's
    records: 3 KiB of a page's member), else the whole member. :class:`CDXJError` for a member
    that is not one whole WARC record, or a record the index cannot take."""
    return _member_line(member, offset, filename)[0]


def _member_line(member: bytes | memoryview, offset: int, filename: str
                 ) -> tuple[str | None, int]:
    """:func:`member_line` and the size of the record (head, block, CRLF CRLF) it found."""
    d = zlib_ng.decompressobj(31)
    try:
        data = d.decompress(member, _FIRST_INFLATE)
        while True:
            head = _warc_head(data)
            if head is not None or not d.unconsumed_tail:
                break
            data += d.decompress(d.unconsumed_tail, max(len(data), _FIRST_INFLATE))
        if head is None:
            raise CDXJError(f"no WARC record head in the gzip member at offset {offset} of "
                            f"{filename}")
        headers, bstart, blen = head
        size = bstart + blen + 4
        if len(data) - bstart < blen:
            try:
                return record_line(headers, memoryview(data)[bstart:], offset, len(member),
                                   filename, complete=False), size
            except _Incomplete:
                data += d.decompress(d.unconsumed_tail)
        if len(data) - bstart < blen:
            raise CDXJError(f"the gzip member at offset {offset} of {filename} ends inside its "
                            "record")
        return record_line(headers, memoryview(data)[bstart:bstart + blen], offset, len(member),
                           filename), size
    except zlib_ng.error as exc:
        raise CDXJError(f"corrupt gzip member at offset {offset} of {filename}: {exc}") from exc


def raw_line(record: bytes, offset: int, length: int, filename: str) -> str | None:
    """The index line of one uncompressed WARC ``record`` (its bytes, head to the CRLF CRLF
    that ends it) stored as ``length`` bytes at ``offset`` of ``filename``."""
    head = _warc_head(record)
    if head is None:
        raise CDXJError(f"no complete WARC head in the record at offset {offset} of {filename}")
    headers, bstart, blen = head
    return record_line(headers, memoryview(record)[bstart:bstart + blen], offset, length,
                       filename)


def member_lines(data: bytes, offset: int, filename: str) -> list[str]:
    """The index lines of ``data``, one or more whole gzip members of ``filename`` starting at
    ``offset``, one record each. One member (its gzip trailer's size is its record's: what
    every per-record compressed file holds) costs :func:`member_line`; several are inflated
    whole to find where each ends."""
    line, size = _member_line(data, offset, filename)
    if int.from_bytes(data[-4:], "little") == size & 0xFFFFFFFF:  # the trailer's ISIZE
        return [line] if line is not None else []
    lines = []
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        d = zlib_ng.decompressobj(31)
        try:
            d.decompress(view[pos:])
        except zlib_ng.error as exc:
            raise CDXJError(f"corrupt gzip member at offset {offset + pos} of {filename}: "
                            f"{exc}") from exc
        if not d.eof:
            raise CDXJError(f"the gzip member at offset {offset + pos} of {filename} is cut")
        end = len(data) - len(d.unused_data)
        line = member_line(view[pos:end], offset + pos, filename)
        if line is not None:
            lines.append(line)
        pos = end
    return lines


def file_lines(stream, filename: str) -> Iterator[str]:
    """The index lines of a WARC file read from ``stream`` front to back (unsorted): for an index
    rebuilt from the file itself. :class:`CDXJError` at a record that cannot be indexed, at
    damage the reader steps over (an index must not leave a capture out silently) and for a file
    that ends inside a record."""
    try:
        for rec in _reader.iter_records(stream, verify=False):
            if isinstance(rec, _reader.InputProblem):
                raise CDXJError(f"{filename}: {rec.message} (offset {rec.offset})")
            # pywb's length of a record in an uncompressed file leaves out its closing CRLF CRLF
            length = len(rec.raw) if rec.compressed else len(rec.raw) - 4
            line = record_line(rec.headers, rec.block, rec.offset, length, filename)
            if line is not None:
                yield line
    except _reader.WARCReadError as exc:
        raise CDXJError(f"{filename}: {exc}") from exc


def sorted_lines(lines: Iterable[str]) -> bytes:
    """An index's bytes: the lines sorted by their UTF-8 bytes (pywb's binary search compares
    bytes), each ending with a newline."""
    data = sorted(line.encode("utf-8") for line in lines)
    return b"".join(line + b"\n" for line in data)


def index_name(warc_name: str) -> str:
    """The index beside a WARC file: ``<its name>.cdxj``."""
    return warc_name + INDEX_SUFFIX


def line_fields(line: str | bytes) -> tuple[str, str, dict]:
    """``(key, timestamp, fields)`` of an index line; :class:`CDXJError` when it is not one."""
    if isinstance(line, bytes):
        line = line.decode("utf-8")
    key, sep1, rest = line.partition(" ")
    ts, sep2, js = rest.partition(" ")
    try:
        fields = json.loads(js) if sep1 and sep2 else None
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or not key:
        raise CDXJError(f"not a CDXJ line: {line[:200]!r}")
    return key, ts, fields


# -- look-ups -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capture:
    """One line of an index: a record that holds a capture of ``url``. ``status`` is None for a
    revisit or a resource (pywb's lines carry none), ``mime`` and ``digest`` None when the line
    has none."""

    file: str  # the WARC file's name, as in the line (``filename``)
    offset: int
    length: int
    url: str
    timestamp: str  # 14 digits, UTC
    status: str | None
    mime: str | None
    digest: str | None
    index: Path  # the .cdxj file the line was read from


def cdxj_files(directory: str | os.PathLike) -> list[Path]:
    """The finished indices (``*.cdxj``) in a local WARC folder, by name; not those of files
    still being written (``*.cdxj.part``). ``[]`` for a folder that does not exist."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("*" + INDEX_SUFFIX) if p.is_file())


_AUTHORITY = re.compile(r"^([^/?#]*)(.*)$", re.S)


def _host_port(authority: str, scheme: str | None) -> tuple[str, int | None]:
    """A URL's authority as (lower-case IDNA host, port; None for its scheme's default)."""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = hostport.partition(":")
    host = host.strip().rstrip(".").lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise CDXJError(f"not a host name: {host!r}") from None
    port = int(port_text) if port_text.isdigit() else None
    if port is not None and scheme and port == {"http": 80, "https": 443}.get(scheme.lower()):
        port = None
    return host, port


def _split_url(url: str) -> tuple[str, int | None, str]:
    """(host, port, the rest from the path on) of a URL, without its scheme."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = None, url
    m = _AUTHORITY.match(rest)
    host, port = _host_port(m.group(1), scheme)
    return host, port, m.group(2) or "/"


class _Target:
    """What :func:`find_captures` looks for: the key ranges to read and the test of a URL."""

    def __init__(self, target: str) -> None:
        target = target.strip()
        if not target or any(c.isspace() for c in target):
            raise CDXJError(f"a take-down target is a host or a URL prefix, not {target!r}")
        self.prefix = "/" in target
        host, self.port, rest = _split_url(target)
        if not host:
            raise CDXJError(f"no host in {target!r}")
        self.host = host
        if self.prefix:
            # the rest as the writer writes a target URI (percent-encoded, IDNA host)
            from owler.warc.format.serialize import target_uri
            self.rest = _split_url(target_uri("http://" + host + rest))[2]
        try:
            self.key_host = surt_host(host)
        except CDXJError as exc:
            raise CDXJError(f"not a host: {target!r} ({exc})") from None

    def ranges(self) -> list[str]:
        """Key prefixes whose lines may match, each read as a range of a sorted index."""
        h = self.key_host
        if not self.prefix:
            return [h + ")", h + ",", h + ":"]
        path = self.rest.split("?", 1)[0]
        segments = path.split("/")
        plain = (re.fullmatch(r"[A-Za-z0-9_~./\-]*", path) is not None and "//" not in path
                 and not any(s in (".", "..") for s in segments))
        return [h + ")" + (path.lower().rstrip("/") if plain else ""), h + ":"]

    def matches(self, url: str) -> bool:
        try:
            host, port, rest = _split_url(url)
        except (CDXJError, ValueError):
            return False
        if self.prefix:
            return host == self.host and port == self.port and rest.startswith(self.rest)
        if self.port is not None and port != self.port:
            return False
        return host == self.host or host.endswith("." + self.host)


def find_captures(paths: Iterable[str | os.PathLike], target: str) -> Iterator[Capture]:
    """Every capture the indices ``paths`` (sorted ``.cdxj`` files) list of ``target``: a host
    (with its subdomains; ``host:port`` for one port) or a URL prefix (``https://example.com/
    private/``, scheme ignored); module docstring. Each index is searched in its key order, so
    the captures of one index come sorted by key and time. :class:`CDXJError` for a target that
    is neither, or an index line in a searched range that is not a CDXJ line (an index that is
    not sorted finds less, silently: write indices with :func:`sorted_lines`)."""
    t = _Target(target)
    ranges = t.ranges()
    for path in paths:
        path = Path(path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            seen = set()
            for prefix in ranges:
                for pos, line in _range(f, size, prefix.encode("utf-8")):
                    if pos in seen:  # ranges may overlap (a path prefix inside the host's)
                        continue
                    seen.add(pos)
                    cap = _capture(line, path)
                    if t.matches(cap.url):
                        yield cap


def _capture(line: bytes, path: Path) -> Capture:
    _, ts, f = line_fields(line.rstrip(b"\n"))
    try:
        return Capture(file=str(f["filename"]), offset=int(f["offset"]), length=int(f["length"]),
                       url=str(f["url"]), timestamp=ts, status=f.get("status"),
                       mime=f.get("mime"), digest=f.get("digest"), index=path)
    except (KeyError, ValueError) as exc:
        raise CDXJError(f"{path}: a line without {exc}: {line[:200]!r}") from None


_SCAN = 1 << 16


def _range(f, size: int, prefix: bytes) -> Iterator[tuple[int, bytes]]:
    """``(position, line)`` of the lines starting with ``prefix`` in the sorted file ``f``."""
    lo, hi = 0, size
    # invariant: every line before ``lo`` (a line start) is below ``prefix``; the first line at
    # or above it starts at or before ``hi``
    while hi - lo > _SCAN:
        mid = (lo + hi) // 2
        f.seek(mid - 1)
        f.readline()  # to the first line start at or after mid
        start = f.tell()
        if start >= hi:  # one line longer than half the range: read the range through
            break
        line = f.readline()
        if line < prefix:
            lo = start + len(line)
        else:
            hi = start
    f.seek(lo)
    pos = lo
    for line in f:
        if line.startswith(prefix):
            yield pos, line
        elif line > prefix:
            return
        pos += len(line)
