"""Seed files (StormCrawler's ``StringTabScheme`` format).

One URL per line, optionally followed by TAB-separated ``key=value`` metadata::

    https://example.com/	isSitemap=false	tag=news	tag=eu
    # a comment

- leading/trailing whitespace is stripped; blank lines and lines starting with ``#`` are skipped;
- a value may contain ``=`` (split at the first one); a repeated key gives several values; an empty
  value is kept as ``""``;
- the URL must be an absolute ``http``/``https`` URL with a host; it is returned normalised
  (:func:`owler.urls.normalize`);
- a bad line is reported, with its 1-based number and the reason, and never stops the others.

Unlike StormCrawler (which drops them silently), a metadata field without ``=`` is an error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit

from owler.metadata import Metadata

__all__ = ["SeedFileError", "parse_seeds", "read_seed_file", "check_url"]

SeedErrors = list[tuple[int, str, str]]


class SeedFileError(Exception):
    """The seed file cannot be read at all (missing, a directory, no permission, not text)."""


def check_url(raw: str) -> tuple[str | None, str]:
    """``(normalised URL, "")`` or ``(None, reason)`` for a seed URL."""
    from owler.urls import normalize

    if not raw:
        return None, "empty URL"
    if any(c.isspace() for c in raw):
        return None, "URL contains whitespace (separate metadata with a TAB)"
    try:
        parts = urlsplit(raw)
    except ValueError as exc:
        return None, f"unparsable URL ({exc})"
    scheme = parts.scheme.lower()
    after = raw[len(parts.scheme) + 1:] if scheme else ""
    if not scheme or (scheme not in ("http", "https") and "://" not in raw and after[:1].isdigit()):
        # "example.com/x", or "localhost:8080/x" (a host and port, not a scheme)
        return None, "no scheme (expected http:// or https://)"
    if scheme not in ("http", "https"):
        return None, f"unsupported scheme {scheme!r} (only http and https)"
    try:
        host = parts.hostname
    except ValueError as exc:
        return None, f"unparsable URL ({exc})"
    if not host:
        return None, "empty host"
    norm = normalize(raw)
    if norm is None:
        return None, "unparsable URL"
    return norm, ""


def parse_seeds(lines: Iterable[str]) -> tuple[list[tuple[str, Metadata]], SeedErrors]:
    """Parse seed lines → (valid ``(url, metadata)`` pairs, errors ``(line number, line, reason)``)."""
    seeds: list[tuple[str, Metadata]] = []
    errors: SeedErrors = []
    for lineno, line in enumerate(lines, start=1):
        if lineno == 1:
            line = line.lstrip("\ufeff")
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split("\t")
        url, reason = check_url(fields[0].strip())
        if url is None:
            errors.append((lineno, text, reason))
            continue
        md: Metadata = {}
        bad = None
        for fld in fields[1:]:
            fld = fld.strip()
            if not fld:
                continue
            key, eq, value = fld.partition("=")
            key = key.strip()
            if not eq:
                bad = f"metadata field {fld!r} is not key=value"
                break
            if not key:
                bad = f"metadata field {fld!r} has an empty key"
                break
            md.setdefault(key, []).append(value.strip())
        if bad:
            errors.append((lineno, text, bad))
            continue
        seeds.append((url, md))
    return seeds, errors


def read_seed_file(path_or_dash: str | os.PathLike) -> tuple[list[tuple[str, Metadata]], SeedErrors]:
    """Read and parse a seed file (UTF-8), or standard input for ``"-"``.

    Raises :class:`SeedFileError` saying why a file cannot be read: it does not exist, is a
    directory, is not readable, or is not UTF-8 text (binary).
    """
    name = str(path_or_dash)
    if name == "-":
        data = sys.stdin.buffer.read()
        label = "standard input"
    else:
        p = Path(name)
        label = f"seed file {p}"
        if not p.exists():
            raise SeedFileError(f"{label} does not exist")
        if p.is_dir():
            raise SeedFileError(f"{label} is a directory, not a file")
        try:
            data = p.read_bytes()
        except PermissionError as exc:
            raise SeedFileError(f"{label} is not readable (permission denied)") from exc
        except OSError as exc:
            raise SeedFileError(f"{label} cannot be read: {exc.strerror or exc}") from exc
    if b"\x00" in data:
        raise SeedFileError(f"{label} is binary (contains NUL bytes), expected UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SeedFileError(
            f"{label} is not UTF-8 text (undecodable byte at offset {exc.start}); binary file?"
        ) from exc
    # split on \n only: other Unicode line breaks inside a line would shift the line numbers
    return parse_seeds(text.split("\n"))
