"""Each webmaster signal read into :class:`owler.signals.Statement`\\ s (issue 47). Nothing here
raises on what a site sends: a value that cannot be read is a statement of ``unknown`` with the
reason.

- **AIPREF** (:func:`aipref`): a Structured Field Dictionary (RFC 9651, parsed by ``http_sf``), the
  labels of draft-ietf-aipref-vocab-08 with the token ``y`` (allowed) or ``n`` (refused). A label
  the vocabulary does not know is ignored, as the draft says, and recorded with that reason (so a
  site still writing ``bots=n`` of an older draft can see why it counts for nothing); any other
  value of a known label (``yes``, ``?1``, a string) is unknown; a text that is not a dictionary
  (an upper-case key, a stray comma) makes every label unknown. Several header fields are one
  dictionary (joined with commas, as RFC 9651 combines them); the last of duplicate keys wins.
- **Content Signals** (:func:`content_signal`): comma-separated ``key=yes|no`` for ``search``,
  ``ai-input`` and ``ai-train``, keys and values read case-insensitively; ``use=`` (how far
  content may be used: immediate, reference, full) is kept as written, not turned into a purpose.
- **TDMRep** (:func:`tdm_reservation`): ``tdm-reservation`` 1 (reserved: refused) or 0 (not
  reserved: allowed); any other value is a protocol error and leaves it unset. ``tdm-policy`` is
  recorded with it. The well-known file is read by :mod:`owler.fetch.tdmrep`.
- **noai / noimageai** (:func:`robots_directives`): in ``<meta name="robots">`` or a meta named
  for the crawler's agent, and in ``X-Robots-Tag``, where a value may begin with an agent
  (``owler: noai``), whose scope runs to the next agent of that value, as Google reads it. ``noai``
  refuses ``ai-train`` and ``ai-input`` ("may not be used as input to AI models", DeviantArt's
  terms); ``noimageai`` the same for images only.
"""

from __future__ import annotations

from typing import Any, Iterable

from owler.signals import (AI_INPUT, AI_TRAIN, AIPREF_VOCAB, ALLOWED, HEADER_ROBOTS,
                           HEADER_USAGE, REFUSED, ROBOTS_SIGNAL, ROBOTS_USAGE, SEARCH, TDM,
                           TDMREP_HEADER, UNKNOWN, Statement)

#: draft-ietf-aipref-vocab-08's labels (section 6.1) and the purposes they speak to
AIPREF_LABELS = {"train-ai": AI_TRAIN, "ai-use": AI_INPUT, "search": SEARCH}
#: Content Signals' keys
SIGNAL_KEYS = {"search": SEARCH, "ai-input": AI_INPUT, "ai-train": AI_TRAIN}
#: robots rules whose name ends with a colon (an X-Robots-Tag segment "name: ..." with one of
#: these names is a rule, not an agent)
_COLON_RULES = frozenset({"max-snippet", "max-image-preview", "max-video-preview",
                          "unavailable_after"})


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else value


def aipref(values: str | bytes | Iterable[str | bytes], source: str) -> list[Statement]:
    """Statements of AIPREF preferences: one header value or robots.txt preference, or several
    header fields (module docstring)."""
    import http_sf  # (RFC 9651, parsed only where a site sends the signal)

    if isinstance(values, (str, bytes, bytearray)):
        values = [values]
    raw = ", ".join(_text(v).strip() for v in values)
    try:
        parsed = http_sf.parse(raw.encode("latin-1", "replace"), tltype="dictionary")
    except http_sf.StructuredFieldError as exc:
        return [Statement(source, None, UNKNOWN, raw,
                          f"not a structured field dictionary ({exc}): every label unknown")]
    out = []
    for label, (value, _params) in parsed.items():
        purpose = AIPREF_LABELS.get(label)
        if purpose is None:
            out.append(Statement(source, None, UNKNOWN, f"{label}",
                                 f"label {label!r} is not in {AIPREF_VOCAB}: ignored"))
            continue
        token = str(value) if isinstance(value, http_sf.Token) else None
        if token == "y":
            out.append(Statement(source, purpose, ALLOWED, f"{label}=y"))
        elif token == "n":
            out.append(Statement(source, purpose, REFUSED, f"{label}=n"))
        else:
            out.append(Statement(source, purpose, UNKNOWN, f"{label}={http_sf.ser(value)}",
                                 "not the token y or n"))
    return out


def content_signal(value: str | bytes, source: str) -> list[Statement]:
    """Statements of one ``Content-Signal`` value (module docstring)."""
    text = _text(value)
    out = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, val = (x.strip() for x in item.partition("="))
        key, val = key.lower(), val.lower()
        if not sep or not key:
            out.append(Statement(source, None, UNKNOWN, item, "not key=value"))
        elif key == "use":
            out.append(Statement(source, None, UNKNOWN, item,
                                 "use= says how far content may be used, kept as written"))
        elif key not in SIGNAL_KEYS:
            out.append(Statement(source, None, UNKNOWN, item, f"unknown signal {key!r}"))
        elif val in ("yes", "no"):
            out.append(Statement(source, SIGNAL_KEYS[key], ALLOWED if val == "yes" else REFUSED,
                                 f"{key}={val}"))
        else:
            out.append(Statement(source, SIGNAL_KEYS[key], UNKNOWN, item, "neither yes nor no"))
    return out


def tdm_reservation(reservation: Any, policy: Any, source: str) -> list[Statement]:
    """The statement of a ``tdm-reservation`` (and its ``tdm-policy``) found in ``source``;
    none when there is no reservation there (its absence sets nothing)."""
    if reservation is None:
        return []
    value = reservation.strip() if isinstance(reservation, str) else reservation
    raw = f"tdm-reservation: {reservation}"
    if value in (1, "1") and not isinstance(value, bool):
        if policy:
            raw += f"; tdm-policy: {policy}"
        return [Statement(source, TDM, REFUSED, raw)]
    if value in (0, "0") and not isinstance(value, bool):
        return [Statement(source, TDM, ALLOWED, raw)]
    return [Statement(source, TDM, UNKNOWN, raw, "neither 1 nor 0: a protocol error, unset")]


def robots_directives(values: Iterable[tuple[str, str]], agents: Iterable[str],
                      source: str) -> list[Statement]:
    """Statements of ``noai``/``noimageai`` among robots directives: ``values`` are ``(name,
    content)`` of ``<meta>`` elements (``name`` robots or an agent), or ``("", value)`` of
    ``X-Robots-Tag`` fields (module docstring); ``agents`` are the crawler's product tokens."""
    mine = {a.strip().lower() for a in agents}
    out = []
    for name, content in values:
        scope = name.strip().lower() or None  # None: for every crawler
        if scope == "robots":
            scope = None
        for segment in _text(content).split(","):
            word = segment.strip()
            head, sep, rest = word.partition(":")
            if sep and head.strip().lower() not in _COLON_RULES and " " not in head.strip():
                scope, word = head.strip().lower(), rest.strip()
            if scope is not None and scope not in mine:
                continue
            directive = word.lower()
            if directive in ("noai", "noimageai"):
                images = directive == "noimageai"
                shown = f"{scope}: {directive}" if scope else directive
                out.extend(Statement(source, purpose, REFUSED, shown, images=images)
                           for purpose in (AI_TRAIN, AI_INPUT))
    return out


def from_robots(usage: Iterable[str], content_signals: Iterable[str]) -> list[Statement]:
    """The statements of a robots.txt for one URL: the preferences of its Content-Usage lines
    that apply (``RobotRules.usage_for``) and its Content-Signal values."""
    out = [s for pref in usage for s in aipref(pref, ROBOTS_USAGE)]
    out.extend(s for value in content_signals for s in content_signal(value, ROBOTS_SIGNAL))
    return out


def from_headers(headers: Iterable[tuple[str, str]], agents: Iterable[str]) -> list[Statement]:
    """The statements of a response's headers: ``Content-Usage`` (all fields, one dictionary),
    ``X-Robots-Tag`` (``noai``, ``noimageai``), ``tdm-reservation`` and ``tdm-policy`` (the last
    field of each). One pass over the headers; nothing else is read when none is there."""
    usage: list[str] = []
    robots: list[tuple[str, str]] = []
    reservation = policy = None
    for name, value in headers:
        n = name.lower()
        if n == "content-usage":
            usage.append(value)
        elif n == "x-robots-tag":
            robots.append(("", value))
        elif n == "tdm-reservation":
            reservation = value
        elif n == "tdm-policy":
            policy = value
    out = aipref(usage, HEADER_USAGE) if usage else []
    if robots:
        out.extend(robots_directives(robots, agents, HEADER_ROBOTS))
    out.extend(tdm_reservation(reservation, policy, TDMREP_HEADER))
    return out
