"""StormCrawler's multi-valued Metadata as a JSON-safe ``dict[str, list[str]]``.

Metadata travels between components as a plain dict (the multilang JSON serializer needs one), so
these are functions over dicts rather than a class: ``first(md, "depth")``, ``set_value(md, k, v)``.
"""

from __future__ import annotations

from typing import Iterable, Mapping

Metadata = dict[str, list[str]]


def first(md: Mapping[str, list[str]], key: str, default: str | None = None) -> str | None:
    """First value of ``key`` or ``default`` when absent or empty."""
    values = md.get(key)
    if values:
        return values[0]
    return default


def values(md: Mapping[str, list[str]], key: str) -> list[str]:
    return list(md.get(key) or ())


def set_value(md: Metadata, key: str, value: object) -> None:
    """Replace all values of ``key`` with ``str(value)``."""
    md[key] = [str(value)]


def add_value(md: Metadata, key: str, value: object) -> None:
    """Append a value; blank values are ignored like StormCrawler's ``addValue``."""
    text = str(value)
    if not text.strip():
        return
    md.setdefault(key, []).append(text)


def remove(md: Metadata, key: str) -> None:
    md.pop(key, None)


def keys_with_prefix(md: Mapping[str, list[str]], prefix: str) -> list[str]:
    return [k for k in md if k.startswith(prefix)]


def normalize(raw: object) -> Metadata:
    """Coerce anything that arrived on the wire into ``dict[str, list[str]]``.

    Strings become one-element lists; ``None`` and non-mappings become ``{}``. Raises nothing.
    """
    if not isinstance(raw, Mapping):
        return {}
    out: Metadata = {}
    for k, v in raw.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            out[str(k)] = [str(x) for x in v if x is not None]
        else:
            out[str(k)] = [str(v)]
    return out


def copy(md: Mapping[str, list[str]]) -> Metadata:
    return {k: list(v) for k, v in md.items()}


def from_pairs(pairs: Iterable[tuple[str, str]]) -> Metadata:
    md: Metadata = {}
    for k, v in pairs:
        add_value(md, k, v)
    return md
