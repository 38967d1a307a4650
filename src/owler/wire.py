"""How page content and raw HTTP data travel between multilang components.

With the MessagePack multilang serializer (``topology.multilang.serializer:
eu.ows.owler.storm.MsgpackSerializer``, the default) a page's bytes travel as they are: a
MessagePack ``bin`` on both pipes and a ``byte[]`` in the JVM. With a JSON serializer bytes must
become text (``encode_content(content, binary=False)``). base64 costs ~250 µs per 60 KB
page and hop and grows the tuple by a third; most HTML is (nearly) ASCII, for which a latin-1
mapping is byte-for-byte and nearly free. ``encode_content`` picks latin-1 when at most
``LATIN1_MAX_HIGH_SHARE`` of the bytes are ≥ 0x80 (each of those becomes a 6-byte ``\\u00XX`` JSON
escape) and base64 otherwise; the first character says which, so decoding needs no side channel.

Raw HTTP data the WARC writer needs (request, status line, response headers, peer address) rides in
the page metadata under keys starting with ``_raw.``; :func:`strip_transient` removes them (and the
outlinks of a page) before metadata goes to the status stream, so they never reach the frontier.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Mapping

LATIN1 = "L"
BASE64 = "B"
LATIN1_MAX_HIGH_SHARE = 0.05
_HIGH_BYTES = bytes(range(0x80, 0x100))  # deleted by bytes.translate to count them (fast)

RAW_PREFIX = "_raw."
RAW_REQUEST = "_raw.request"
RAW_STATUS_LINE = "_raw.status_line"
RAW_HEADERS = "_raw.headers"
RAW_IP = "_raw.ip"
RAW_FETCH_TIME = "_raw.fetch_time"
RAW_TRUNCATED = "_raw.truncated"
#: what the webmasters' signals said of a page (owler.signals.record_json): the block of the
#: WARC metadata record written beside its response
RAW_SIGNALS = "_raw.signals"
#: the page is archived as a revisit record (:mod:`owler.fetch.revisit`): ``server-not-modified``
#: (a 304) or ``identical-payload-digest`` (the payload of the last capture, not written again)
RAW_REVISIT = "_raw.revisit"
#: WARC-Payload-Digest of the content, worked out once by the fetcher for the WARC writer
RAW_PAYLOAD_DIGEST = "_raw.payload_digest"
#: set on a tuple its spout emits again after a failure: bolts that skip repeats must not skip
#: what it carries, since its first emission may not have reached its end
RAW_REPLAYED = "_raw.replayed"
#: set by the WARC spout on a response whose digests its reader checked: the mismatch found, or
#: empty; the parser does not hash the record again
#: (owler.warc.warc2warc.record_as_page.RecordParser)
RAW_DIGESTS = "_raw.digests"
#: the DOM of a page rendered by the browser (owler.fetch.browser), serialised as HTML: written by
#: the fetcher's archiver as a ``conversion`` record referring to the response, then handed to
#: the parser as the page's content (owler.fetch.browser.for_parser)
RAW_RENDERED = "_raw.rendered"


def encode_content(content: bytes, binary: bool = False) -> str | bytes:
    """A page's bytes as a tuple value: themselves when the component's serializer is binary
    (MessagePack), else text (latin-1 mapped or base64, the first character says which)."""
    if binary:
        return bytes(content)
    if not content:
        return LATIN1
    sample = content if len(content) <= 65536 else content[:65536]
    high = len(sample) - len(sample.translate(None, _HIGH_BYTES))
    if high <= LATIN1_MAX_HIGH_SHARE * len(sample):
        return LATIN1 + content.decode("latin-1")
    return BASE64 + base64.b64encode(content).decode("ascii")


def decode_content(text: str | bytes | None) -> bytes:
    """Inverse of :func:`encode_content`. Raises ``ValueError`` on an unknown or corrupt encoding."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    if not text:
        return b""
    kind, body = text[0], text[1:]
    if kind == LATIN1:
        return body.encode("latin-1")
    if kind == BASE64:
        return base64.b64decode(body, validate=True)
    raise ValueError(f"unknown content encoding marker {kind!r}")


def encode_headers(headers: list[tuple[str, str]]) -> list[str]:
    """Headers as ``name: value`` strings (metadata values are lists of strings)."""
    return [f"{k}: {v}" for k, v in headers]


def decode_headers(lines: list[str] | None) -> list[tuple[str, str]]:
    out = []
    for line in lines or ():
        name, _, value = line.partition(":")
        out.append((name, value[1:] if value.startswith(" ") else value))
    return out


def strip_transient(md: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """A copy of ``md`` without the ``_raw.*`` keys."""
    return {k: v for k, v in md.items() if not k.startswith(RAW_PREFIX)}


def payload_digest(*parts: bytes) -> str:
    """``sha1:`` + Base32 SHA-1 of the concatenated ``parts``: WARC's digest format (the WARC
    writer's ``WARC-Payload-Digest`` and ``WARC-Block-Digest``, the fetcher's revisit check)."""
    h = hashlib.sha1()
    for p in parts:
        h.update(p)
    return "sha1:" + base64.b32encode(h.digest()).decode("ascii")


def warc_date(ts: float) -> str:
    """``ts`` (epoch seconds) as the WARC writer writes WARC-Date: UTC, microseconds, ``…Z``.
    The fetcher records a capture's date with it, so that a revisit's WARC-Refers-To-Date is
    the capture's WARC-Date to the character."""
    secs = int(ts // 1)
    micros = int(round((ts - secs) * 1_000_000))
    if micros >= 1_000_000:  # rounding carried into the next second
        secs, micros = secs + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{micros:06d}Z"
