"""The ``<meta>`` signals of an HTML response, read from its bytes at fetch time (issue 47).

What a page's ``<meta>`` elements say about the uses of its content must be known before its WARC
records are written (the metadata record carries it, and ``signals.refused.action: strip`` keeps
the content of a refused page out of the archive), so the fetcher cannot wait for the parser:
:func:`meta_statements` reads them from the response's bytes, cheaply, without building a
document:

- only an HTML response (:func:`is_html`: a ``Content-Type`` naming HTML, or none and bytes
  that start with ``<``) and only its head: the first :data:`HEAD_LIMIT` bytes
  (``signals.meta.scan.bytes``), up to ``</head`` or the first ``<body`` outside comments and
  raw text. A meta past that limit (a head swollen by inline styles and scripts) is not read;
- the elements named ``robots`` or for one of the crawler's agents (``noai``, ``noimageai``:
  :func:`owler.signals.sources.robots_directives`, source ``meta.robots``) and ``tdm-reservation``
  / ``tdm-policy`` (TDMRep's meta, source ``tdmrep.meta``: the first of each, as HTML takes the
  first of a repeated meta). Names are compared case-insensitively, attributes come in any
  order, values in double, single or no quotes, character references in values are decoded
  (``&amp;``, ``&#44;``); a ``<meta`` inside a comment or a ``<script>``, ``<style>``,
  ``<template>``, ``<title>`` or ``<textarea>`` is text, not an element;
- the scan jumps from one place that matters to the next (a ``<`` that opens a comment, a
  raw-text element, a meta or the end of the head; the end of a comment or raw text is found by
  a search of its own), and a meta's attributes are read only when one of the names is among
  them (most metas: ``viewport``, ``og:*``). Every step consumes what it started (an unclosed
  tag, comment or script ends the scan), so it is linear in the bytes read whatever a site
  sends. Measured: docs/benchmarks-history.md (issue 47, the ``<meta>`` signals).

Bytes are read as ASCII-compatible (UTF-8, latin-1, ...): a page in UTF-16 has no meta found here.
What cannot be read (a ``tdm-reservation`` that is neither 1 nor 0) is a statement of unknown with
the reason, as everywhere in :mod:`owler.signals`; nothing here raises on what a site sends.
"""

from __future__ import annotations

import functools
import html
import re
from typing import Iterable

from owler.signals import META_ROBOTS, TDMREP_META, Statement
from owler.signals.sources import robots_directives, tdm_reservation

#: the most bytes of a response read for its head (``signals.meta.scan.bytes``)
HEAD_LIMIT = 65536
SCAN_BYTES_KEY = "signals.meta.scan.bytes"

_TDM_NAMES = (b"tdm-reservation", b"tdm-policy")
_RAW_TEXT = (b"script", b"style", b"template", b"title", b"textarea")

# Where something starts that the scan must look at, case-insensitively: a comment, an element
# whose content is raw text (no tags inside: its end is looked for apart), a meta element with
# its attributes (up to the first ">", or the end of the scan), the end of the head. Every
# alternative begins with "<", which the search finds with a fast literal scan.
_START = re.compile(
    rb"<(?:(!--)|(" + b"|".join(_RAW_TEXT) + rb")(?=[\s/>])|meta(?=[\s/>])([^>]*)(?:>|\Z)"
    rb"|/head(?=[\s>])|body(?=[\s/>]))", re.S | re.I)
_RAW_END = {tag: re.compile(rb"</" + tag + rb"(?=[\s/>])", re.I) for tag in _RAW_TEXT}
_ATTR = re.compile(rb"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s"'>]+)))?""")


@functools.lru_cache(maxsize=64)
def _names_pattern(names: frozenset[bytes]) -> re.Pattern:
    """One search for any of ``names`` in a meta's lower-cased attributes (most metas name none
    of them and are not read further)."""
    return re.compile(b"|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))


def is_html(content_type: str | None, content: bytes) -> bool:
    """Whether a response is an HTML document to look into: its ``Content-Type`` says HTML
    (``text/html``, ``application/xhtml+xml``), or it has none and its bytes start with ``<``."""
    if content_type:
        return "html" in content_type.lower()
    return content.lstrip()[:1] == b"<"


def _attributes(attrs: bytes) -> dict[bytes, bytes]:
    """A tag's attributes (the bytes after its name) as lower-cased name -> value as written;
    the first of a repeated attribute wins, as in HTML."""
    out: dict[bytes, bytes] = {}
    for a in _ATTR.finditer(attrs):
        key = a.group(1).lower()
        if key not in out:
            value = a.group(2)
            if value is None:
                value = a.group(3) if a.group(3) is not None else (a.group(4) or b"")
            out[key] = value
    return out


def _text(value: bytes) -> str:
    text = value.decode("utf-8", "replace")
    return html.unescape(text) if "&" in text else text


def head_metas(content: bytes, names: Iterable[bytes],
               limit: int = HEAD_LIMIT) -> list[tuple[str, str]]:
    """``(name, content)`` of each ``<meta>`` in the head of ``content`` whose name (lower-cased,
    stripped) is one of ``names`` (lower-case bytes), in document order; contents as written,
    character references decoded, ``""`` for a meta without one."""
    raw = content[:limit] if 0 <= limit < len(content) else content
    wanted = frozenset(names)
    interesting = _names_pattern(wanted).search
    search = _START.search
    out = []
    pos = 0
    while (m := search(raw, pos)) is not None:
        if m.start(3) >= 0:  # a meta
            pos = m.end()
            attrs = m.group(3)
            if interesting(attrs.lower()) is None:
                continue
            found = _attributes(attrs)
            name = found.get(b"name", b"").strip().lower()
            if name in wanted:
                out.append((name.decode("ascii", "replace"), _text(found.get(b"content", b""))))
        elif m.start(1) >= 0:  # a comment: to its end
            end = raw.find(b"-->", m.end())
            if end < 0:
                break
            pos = end + 3
        elif m.start(2) >= 0:  # raw text: to its end tag
            end = _RAW_END[m.group(2).lower()].search(raw, m.end())
            if end is None:
                break
            pos = end.end()
        else:  # </head or <body
            break
    return out


@functools.lru_cache(maxsize=64)
def _names_for(agents: tuple[str, ...]) -> frozenset[bytes]:
    return frozenset([b"robots", *(a.encode("ascii", "ignore") for a in agents), *_TDM_NAMES])


def meta_statements(content: bytes, agents: Iterable[str],
                    limit: int = HEAD_LIMIT) -> list[Statement]:
    """The statements of the ``<meta>`` signals in the head of an HTML document's bytes (module
    docstring); ``agents`` are the crawler's product tokens (a meta named for one is ours)."""
    agents = tuple(a.strip().lower() for a in agents)
    metas = head_metas(content, _names_for(agents), limit)
    if not metas:
        return []
    out = robots_directives([(n, c) for n, c in metas if n not in ("tdm-reservation",
                                                                     "tdm-policy")],
                            agents, META_ROBOTS)
    reservation = next((c for n, c in metas if n == "tdm-reservation"), None)
    policy = next((c for n, c in metas if n == "tdm-policy"), None)
    out.extend(tdm_reservation(reservation, policy, TDMREP_META))
    return out
