"""What webmasters say about the uses of their content, as one record per URL (issue 47).

Several signals, from several places, speak to overlapping purposes in different vocabularies:

- IETF AI preferences (the ``Content-Usage`` line of robots.txt, scoped to a path, and the
  ``Content-Usage`` response header): labels of draft-ietf-aipref-vocab-08 (:data:`AIPREF_VOCAB`),
  values ``y``/``n`` (:mod:`owler.signals.sources`);
- Content Signals (``Content-Signal: search=yes, ai-input=no, ai-train=no`` in robots.txt);
- TDMRep (the W3C community group's TDM Reservation Protocol: the ``tdm-reservation`` header and
  ``<meta>``, ``/.well-known/tdmrep.json``);
- ``noai`` / ``noimageai`` in ``<meta name="robots">`` and ``X-Robots-Tag`` (DeviantArt's).

Each parser turns what it reads into :class:`Statement`\\ s: one purpose (:data:`PURPOSES`), a
state (:data:`ALLOWED`, :data:`REFUSED` or :data:`UNKNOWN`), the source it came from and the raw
text; a malformed signal is a statement of :data:`UNKNOWN` with the reason, never an exception.
:func:`resolve` combines them per purpose: within TDMRep the later place overrides the earlier
(file, then header, then meta, as the protocol orders them); across signals the most restrictive
wins (AIPREF's rule for combining statements, and Google's for robots rules): refused if any
statement refuses, else allowed if any allows, else unknown.

Purposes are those of the signals, not of one vocabulary: ``search`` (a search index that links to
the page: AIPREF's and Content Signals' ``search``), ``ai-train`` (training AI models: AIPREF's
``train-ai``, Content Signals' ``ai-train``, ``noai``), ``ai-input`` (content given to a model as
input when answering: AIPREF-08's ``ai-use``, Content Signals' ``ai-input``, ``noai``) and ``tdm``
(text and data mining in the sense of the EU copyright directive's article 4: TDMRep). No purpose is
inferred from another: TDMRep's reservation is recorded for ``tdm`` only, and what a crawl does with
it is its policy's business.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from owler import conf as C

#: the vocabulary the AIPREF labels are read with (its labels changed between drafts: -07 had
#: train-ai and search; -08 added ai-use)
AIPREF_VOCAB = "draft-ietf-aipref-vocab-08"
#: the attachment (robots.txt line and header) they are read from
AIPREF_ATTACH = "draft-ietf-aipref-attach-05"

SEARCH, AI_TRAIN, AI_INPUT, TDM = "search", "ai-train", "ai-input", "tdm"
PURPOSES = (SEARCH, AI_TRAIN, AI_INPUT, TDM)
ALLOWED, REFUSED, UNKNOWN = "allowed", "refused", "unknown"

# where a statement came from
ROBOTS_USAGE = "robots.content-usage"
ROBOTS_SIGNAL = "robots.content-signal"
HEADER_USAGE = "header.content-usage"
TDMREP_FILE = "tdmrep.file"
TDMREP_HEADER = "tdmrep.header"
TDMREP_META = "tdmrep.meta"
META_ROBOTS = "meta.robots"
HEADER_ROBOTS = "header.x-robots-tag"
#: TDMRep's own order: a later place overrides an earlier one ("Processing priority")
TDMREP_ORDER = (TDMREP_FILE, TDMREP_HEADER, TDMREP_META)

#: metadata of a URL whose content or host said something: ``signals.<purpose>`` = its state
#: (purposes left unknown are not written), ``signals.unreadable`` = each signal read as unknown
#: with its reason (``source: raw: reason``), ``signals.withheld`` = the purpose of the crawl
#: whose refusal kept the page's content out of the archive and away from the parser
MD_PREFIX = "signals."
MD_UNREADABLE = "signals.unreadable"
MD_WITHHELD = "signals.withheld"
#: the policy: what the crawl is for, and what to do with a URL whose signals refuse one of
#: those purposes
PURPOSES_KEY = "signals.purposes"
ACTION_KEY = "signals.refused.action"
MARK, STRIP, SKIP = "mark", "strip", "skip"
ACTIONS = (MARK, STRIP, SKIP)


@dataclass(frozen=True)
class Statement:
    """One source's word on one purpose. ``purpose`` is None for a signal that could not be read
    at all (``reason`` says why); ``images`` marks one that applies to images only
    (``noimageai``)."""

    source: str
    purpose: str | None
    state: str
    raw: str
    reason: str = ""
    images: bool = False

    def to_json(self) -> dict:
        out = {"source": self.source, "raw": self.raw}
        if self.purpose is not None:
            out["purpose"] = self.purpose
            out["state"] = self.state
        if self.reason:
            out["reason"] = self.reason
        if self.images:
            out["images"] = True
        return out


def resolve(statements: Iterable[Statement], image: bool = False) -> dict[str, dict]:
    """Per purpose of :data:`PURPOSES`: ``{"state", "sources"}`` (the sources that decided it),
    from every statement about the content (module docstring). Statements for images only count
    when the content is one (``image``)."""
    by_purpose: dict[str, list[Statement]] = {p: [] for p in PURPOSES}
    for st in statements:
        if st.purpose in by_purpose and (image or not st.images):
            by_purpose[st.purpose].append(st)
    out: dict[str, dict] = {}
    for purpose, found in by_purpose.items():
        tdm = [s for s in found if s.source in TDMREP_ORDER and s.state != UNKNOWN]
        if tdm:  # TDMRep first, within itself: the last place that says something
            last = max(TDMREP_ORDER.index(s.source) for s in tdm)
            found = [s for s in found if s.source not in TDMREP_ORDER] + [
                s for s in tdm if TDMREP_ORDER.index(s.source) == last]
        for state in (REFUSED, ALLOWED):
            deciding = sorted({s.source for s in found if s.state == state})
            if deciding:
                out[purpose] = {"state": state, "sources": deciding}
                break
        else:
            out[purpose] = {"state": UNKNOWN, "sources": []}
    return out


def record(statements: Iterable[Statement], image: bool = False,
           withheld: str | None = None) -> dict:
    """The normalised record of a URL's signals: ``purposes`` (:func:`resolve`), ``statements``
    (every one, in order, the unreadable ones with their reason) and the vocabulary read; with
    ``withheld`` (a purpose of the crawl they refuse), ``withheld``: the archive holds the
    response's head and not its content (:class:`SignalPolicy`, ``strip``)."""
    statements = list(statements)
    out = {"purposes": resolve(statements, image),
           "statements": [s.to_json() for s in statements], "vocab": AIPREF_VOCAB}
    if withheld:
        out["withheld"] = withheld
    return out


class SignalPolicy:
    """``signals.purposes`` (what the crawl is for: OWLer's is ``search``) and
    ``signals.refused.action``, what to do with a URL whose signals refuse one of them:

    - ``mark``: fetched and archived as any other; its signals are recorded (as for every page:
      ``signals.*``, the WARC metadata record) for whoever uses the archive to honour them;
    - ``strip``: fetched, its WARC response record keeps the HTTP exchange's head and not its
      payload, the parser gets no content (no text, no outlinks: FETCHED with what an earlier
      fetch found, as a 304), ``signals.withheld`` names the purpose refused. A host's robots.txt
      and tdmrep.json are known before the request, a response's headers and ``<meta>`` only
      after it: one rule for all of them;
    - ``skip`` (the default): a URL whose host-level signals (robots.txt, tdmrep.json, known
      before the request) refuse is not requested: ERROR with ``error.cause`` ``signals``. A
      refusal known only once the response is there (its headers, its ``<meta>``) cannot
      un-request it; the nearest thing is not to keep what came: its content is withheld as with
      ``strip``.

    Within TDMRep a page's header or meta may lift a reservation of the host's file (the
    protocol's order); ``skip`` decides on the file alone, before the request, so such a page is
    not requested: the restrictive reading of what can be known then."""

    def __init__(self, purposes: Iterable[str], action: str) -> None:
        self.purposes = tuple(purposes)
        self.action = action

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "SignalPolicy":
        purposes = C.get_list(conf, PURPOSES_KEY, [SEARCH])
        unknown = [p for p in purposes if p not in PURPOSES]
        if unknown:
            raise C.ConfError(f"{PURPOSES_KEY}: {unknown[0]!r} is not one of {', '.join(PURPOSES)}")
        action = C.get_str(conf, ACTION_KEY, SKIP)
        if action not in ACTIONS:
            raise C.ConfError(f"{ACTION_KEY}: {action!r} is not one of {', '.join(ACTIONS)}")
        return cls(purposes, action)

    def first_refused(self, resolved: Mapping[str, dict]) -> str | None:
        """The first purpose of the crawl that ``resolved`` refuses, else None."""
        return next((p for p in self.purposes if resolved[p]["state"] == REFUSED), None)

    def refused(self, resolved: Mapping[str, dict]) -> str | None:
        """Before the request (the host's signals): with ``skip``, the first purpose of the
        crawl that ``resolved`` refuses (the URL is not fetched), else None."""
        return self.first_refused(resolved) if self.action == SKIP else None

    def withheld(self, resolved: Mapping[str, dict]) -> str | None:
        """After the response (every signal): with ``strip`` or ``skip``, the first purpose of
        the crawl that ``resolved`` refuses (the page's content is withheld), else None."""
        return self.first_refused(resolved) if self.action != MARK else None


def forget(md: dict) -> None:
    """Drop what an earlier fetch recorded (a site may have withdrawn its signals since)."""
    for key in [k for k in md if k.startswith(MD_PREFIX)]:
        del md[key]


def note(md: dict, statements: list[Statement], image: bool = False) -> dict[str, dict]:
    """Write what ``statements`` resolve to into a URL's metadata (``md``: :data:`MD_PREFIX`
    keys) and return it (:func:`resolve`)."""
    resolved = resolve(statements, image)
    for purpose, r in resolved.items():
        if r["state"] != UNKNOWN:
            md[MD_PREFIX + purpose] = [r["state"]]
    unreadable = [f"{s.source}: {s.raw}: {s.reason}" for s in statements if s.reason]
    if unreadable:
        md[MD_UNREADABLE] = unreadable
    return resolved


def record_json(statements: list[Statement], image: bool = False,
                withheld: str | None = None) -> str:
    """:func:`record` as compact JSON (the WARC metadata record's block)."""
    return json.dumps(record(statements, image, withheld), separators=(",", ":"),
                      sort_keys=True)
