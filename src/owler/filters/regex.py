"""RegexURLFilter: ``+regex`` / ``-regex`` rules, first match decides
(StormCrawler's ``filtering.regex.RegexURLFilter``).

Params: ``urlFilters`` (inline list of rule lines) or ``regexFilterFile`` (a rules file resolved
with :func:`owler.conf.resource_path`; default ``default-regex-filters.txt`` when neither is given).
Rule lines: ``+`` accept / ``-`` reject followed by a Python regular expression searched anywhere
in the URL (Java's ``find()``); lines that are blank, start with ``#`` or with a space are
ignored. The first rule that matches decides; a URL no rule matches is rejected.

A rule whose only flag is a leading ``(?i)`` is searched case-sensitively in the lower-cased URL
when its text allows it (:func:`lowercase_form`): Python's ignore-case matching costs two to four
times a plain search, and the default file's five extension rules are of this kind.

Config keys read: none.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from owler.conf import resource_path
from owler.filters import URLFilter

DEFAULT_RULES_FILE = "default-regex-filters.txt"


# A rule text lowercase_form() may search in a lower-cased URL: ASCII, no uppercase letter, no
# character class (a range like [@-Z] holds uppercase letters its text does not show), no escape
# of a letter or digit (\D, \x41, \1), and "(?" only to open a non-capturing group or a
# lookaround (no inline flag, no named group, no comment).
_LOWER_SAFE = re.compile(
    r"""(?:\\[^0-9A-Za-z]|\(\?(?:[:=!]|<[=!])|\((?!\?)|[a-z0-9.|)?*+&$^_/~:=!,;%@#{}<> '"-])*""")
_IGNORECASE_ONLY = re.IGNORECASE | re.UNICODE


def lowercase_form(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """The case-sensitive pattern that finds in ``url.lower()`` what ``pattern`` finds in an
    ASCII ``url``, or None when no such pattern is known for this one.

    Given when the only flag is a leading ``(?i)`` and the rest passes ``_LOWER_SAFE``. Then every
    literal of the rest is a lowercase letter, which ignoring case matches to an ASCII character
    exactly when it equals the character lower-cased, or a caseless character, which matches it
    exactly when the lower-cased character does (lower-casing changes letters only); ``.``,
    anchors, groups, alternations, repeats and lookarounds are built of these and do not look at
    case. So the two searches agree on every ASCII URL (tests/unit/test_filters.py checks it).
    """
    source = pattern.pattern
    if pattern.flags != _IGNORECASE_ONLY or not source.startswith("(?i)"):
        return None
    rest = source[4:]
    if not rest.isascii() or _LOWER_SAFE.fullmatch(rest) is None:
        return None
    return re.compile(rest)


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
        # (accept, pattern, lowercase form or None), what filter() walks
        self._compiled: list[tuple[bool, re.Pattern[str], re.Pattern[str] | None]] = []

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        inline = params.get("urlFilters")
        if inline is not None:
            if isinstance(inline, str):
                inline = [inline]
            if not isinstance(inline, list) or not all(isinstance(x, str) for x in inline):
                raise ValueError(f"param urlFilters must be a list of rule lines, got {inline!r}")
            self._use(parse_rules(inline))
            return
        name = params.get("regexFilterFile", DEFAULT_RULES_FILE)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"param regexFilterFile must be a file name, got {name!r}")
        path = resource_path(name.strip())
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read regexFilterFile {path}: {exc.strerror or exc}") from None
        self._use(parse_rules(text.splitlines(), str(path)))

    def _use(self, rules: list[tuple[bool, re.Pattern[str]]]) -> None:
        self.rules = rules
        self._compiled = [(accept, p, lowercase_form(p)) for accept, p in rules]

    def uses_source(self) -> bool:
        return False

    def filter(self, source_url, source_md, url):
        lowered = None  # url.lower() once a lowered rule is reached; "" for a non-ASCII url
        for accept, pattern, lower in self._compiled:
            if lower is not None and lowered is None:
                lowered = url.lower() if url.isascii() else ""
            if lower is not None and lowered:
                found = lower.search(lowered)
            else:
                found = pattern.search(url)
            if found is not None:
                return url if accept else None
        return None
