"""Basic URL filters: BasicURLNormalizer, BasicURLFilter and SelfURLFilter (StormCrawler's
``filtering.basic`` package, same params).

Config keys read: none (only the entries' ``params``).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from owler import urls
from owler.filters import URLFilter

_HASH32 = re.compile(r"[0-9a-fA-F]{32}")


def _bool(params: Mapping[str, Any], key: str, default: bool) -> bool:
    value = params.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"param {key} must be true or false, got {value!r}")


def _int(params: Mapping[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool):
        raise ValueError(f"param {key} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"param {key} must be an integer, got {value!r}") from None


class BasicURLNormalizer(URLFilter):
    """Normalises URLs with :func:`owler.urls.normalize` (WHATWG), plus StormCrawler's options.

    Params (StormCrawler names and defaults):

    - ``removeAnchorPart`` (true): drop the ``#fragment``;
    - ``unmangleQueryString`` (true): ``/page&a=1`` (no ``?``, ``&`` and ``=`` in the last path
      segment) becomes ``/page?a=1``;
    - ``queryElementsToRemove`` ([]): query parameter names to drop (session ids…), also from
      ``;name=value`` parameters of any path segment (``;jsessionid=…``);
    - ``removeHashes`` (false): drop query parameters whose value is a 32-hex-digit hash;
    - ``checkValidURI`` (true), ``hostIDNtoASCII``: accepted for compatibility; WHATWG parsing always
      validates and always converts IDN hosts to punycode.

    Remaining query parameters keep their order and encoding (StormCrawler sorts them when it
    rebuilds the query; we do not reorder).
    """

    normalizes = True

    def __init__(self) -> None:
        self.remove_anchor = True
        self.unmangle = True
        self.check_valid_uri = True
        self.remove_hashes = False
        self.query_elements_to_remove: frozenset[str] = frozenset()

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.remove_anchor = _bool(params, "removeAnchorPart", self.remove_anchor)
        self.unmangle = _bool(params, "unmangleQueryString", self.unmangle)
        self.check_valid_uri = _bool(params, "checkValidURI", self.check_valid_uri)
        self.remove_hashes = _bool(params, "removeHashes", self.remove_hashes)
        _bool(params, "hostIDNtoASCII", True)
        q = params.get("queryElementsToRemove", [])
        if isinstance(q, str):
            q = [q]
        if not isinstance(q, list) or not all(isinstance(x, str) for x in q):
            raise ValueError(f"param queryElementsToRemove must be a list of names, got {q!r}")
        self.query_elements_to_remove = frozenset(x.strip() for x in q if x.strip())

    def uses_source(self) -> bool:
        return False

    def filter(self, source_url, source_md, url):
        if self.unmangle and "&" in url and "?" not in url:
            url = self._unmangle(url)
        out = urls.normalize(url, keep_fragment=not self.remove_anchor)
        if out is None:
            return None
        if self.query_elements_to_remove or self.remove_hashes:
            out = self._clean_query(out)
        return out

    @staticmethod
    def _unmangle(url: str) -> str:
        frag = url.find("#")
        body = url if frag < 0 else url[:frag]
        last = body.rfind("/")
        if last < 0:
            return url
        segment = body[last + 1:]
        amp = segment.find("&")
        if amp < 0 or "=" not in segment:
            return url
        pos = last + 1 + amp
        return url[:pos] + "?" + url[pos + 1:]

    def _drop(self, param: str) -> bool:
        name, eq, value = param.partition("=")
        if name in self.query_elements_to_remove:
            return True
        return self.remove_hashes and bool(eq) and _HASH32.fullmatch(value) is not None

    def _clean_query(self, url: str) -> str:
        frag = ""
        i = url.find("#")
        if i >= 0:
            url, frag = url[:i], url[i:]
        base, q, query = url.partition("?")
        # ;name=value parameters of any path segment (e.g. /app;jsessionid=.../page)
        sep = base.find("//")
        start = base.find("/", sep + 2) if sep >= 0 else 0
        if start >= 0 and base.find(";", start) >= 0 and self.query_elements_to_remove:
            drop = self.query_elements_to_remove
            segments = base[start:].split("/")
            for k, seg in enumerate(segments):
                if ";" in seg:
                    head, *params = seg.split(";")
                    segments[k] = ";".join([head] + [p for p in params
                                                     if p.partition("=")[0] not in drop])
            base = base[:start] + "/".join(segments)
        if q:
            params = [p for p in query.split("&") if p and not self._drop(p)]
            query = "&".join(params)
        return base + ("?" + query if query else "") + frag


class BasicURLFilter(URLFilter):
    """Rejects over-long URLs and URLs with repeated path segments (crawler traps).

    Params: ``maxLength`` (-1 = off) rejects URLs longer than that; ``maxPathRepetition`` (3,
    active when > 1): the URL is split on ``/``; with more than 4 parts, any non-empty part that
    occurs ``maxPathRepetition`` times or more rejects it.
    """

    def __init__(self) -> None:
        self.max_length = -1
        self.max_path_repetition = 3

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.max_length = _int(params, "maxLength", self.max_length)
        self.max_path_repetition = _int(params, "maxPathRepetition", self.max_path_repetition)

    def uses_source(self) -> bool:
        return False

    def filter(self, source_url, source_md, url):
        if self.max_length > 0 and len(url) > self.max_length:
            return None
        n = self.max_path_repetition
        if n > 1 and url.count("/") > 3:
            parts = url.split("/")
            if len(parts) > 4:
                counts: dict[str, int] = {}
                for part in parts:
                    if part:
                        c = counts.get(part, 0) + 1
                        if c >= n:
                            return None
                        counts[part] = c
        return url


class SelfURLFilter(URLFilter):
    """Rejects a link to the page it was found on (case-insensitive, fragment ignored)."""

    def filter(self, source_url, source_md, url):
        if source_url is None:
            return url
        a = url.partition("#")[0]
        b = source_url.partition("#")[0]
        if len(a) == len(b) and a.lower() == b.lower():
            return None
        return url
