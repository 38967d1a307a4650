"""RegexURLFilter: ``+regex`` / ``-regex`` rules, first match decides
(StormCrawler's ``filtering.regex.RegexURLFilter``).

Params: ``urlFilters`` (inline list of rule lines) or ``regexFilterFile`` (a rules file resolved
with :func:`owler.conf.resource_path`; default ``default-regex-filters.txt`` when neither is given).
Rule lines: ``+`` accept / ``-`` reject followed by a Python regular expression searched anywhere
in the URL (Java's ``find()``); lines that are blank, start with ``#`` or with a space are
ignored. The first rule that matches decides; a URL no rule matches is rejected.

Config keys read: none.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from owler.conf import resource_path
from owler.filters import URLFilter

DEFAULT_RULES_FILE = "default-regex-filters.txt"


def parse_rules(lines: Iterable[str], origin: str = "urlFilters") -> list[tuple[bool, re.Pattern[str]]]:
    """Compile rule lines; raises ``ValueError`` naming the origin and line of a bad rule."""
    rules = []
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.startswith("#") or line[0].isspace():
            continue
        sign, pattern = line[0], line[1:]
        if sign not in "+-":
            raise ValueError(f"{origin} line {n}: a rule starts with '+' or '-': {line!r}")
        try:
            rules.append((sign == "+", re.compile(pattern)))
        except re.error as exc:
            raise ValueError(f"{origin} line {n}: invalid regex {pattern!r}: {exc}") from None
    return rules


class RegexURLFilter(URLFilter):
    def __init__(self) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        inline = params.get("urlFilters")
        if inline is not None:
            if isinstance(inline, str):
                inline = [inline]
            if not isinstance(inline, list) or not all(isinstance(x, str) for x in inline):
                raise ValueError(f"param urlFilters must be a list of rule lines, got {inline!r}")
            self.rules = parse_rules(inline)
            return
        name = params.get("regexFilterFile", DEFAULT_RULES_FILE)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"param regexFilterFile must be a file name, got {name!r}")
        path = resource_path(name.strip())
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read regexFilterFile {path}: {exc.strerror or exc}") from None
        self.rules = parse_rules(text.splitlines(), str(path))

    def uses_source(self) -> bool:
        return False

    def filter(self, source_url, source_md, url):
        for accept, pattern in self.rules:
            if pattern.search(url) is not None:
                return url if accept else None
        return None
