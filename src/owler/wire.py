"""How page content and raw HTTP data travel between multilang components.

Storm's multilang protocol is JSON only, so bytes must become text. base64 costs ~250 µs per 60 KB
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
#: set on a tuple its spout emits again after a failure: bolts that skip repeats must not skip
#: what it carries, since its first emission may not have reached its end
RAW_REPLAYED = "_raw.replayed"


def encode_content(content: bytes) -> str:
    if not content:
        return LATIN1
    sample = content if len(content) <= 65536 else content[:65536]
    high = len(sample) - len(sample.translate(None, _HIGH_BYTES))
    if high <= LATIN1_MAX_HIGH_SHARE * len(sample):
        return LATIN1 + content.decode("latin-1")
    return BASE64 + base64.b64encode(content).decode("ascii")


def decode_content(text: str | None) -> bytes:
    """Inverse of :func:`encode_content`. Raises ``ValueError`` on an unknown or corrupt encoding."""
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
