"""A host's ``/.well-known/tdmrep.json`` (TDMRep, the W3C community group's TDM Reservation
Protocol; issue 47): a JSON array of rules (``location``, ``tdm-reservation``, ``tdm-policy``) of
which the first whose ``location`` matches the URL's path applies (the protocol's "first in
sequence", not the longest match), patterns with ``*`` and ``$`` matched as robots.txt's
(:class:`owler.fetch.robots.PathPattern`). A rule without a location or a reservation is left out
and counted; a file that is not such an array is one statement of ``unknown`` with the reason."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from owler.fetch.robots import PathPattern
from owler.signals import TDMREP_FILE, UNKNOWN, Statement
from owler.signals.sources import tdm_reservation

#: the most rules read from one file
MAX_TDM_RULES = 10_000


class TdmRepFile:
    """A host's ``/.well-known/tdmrep.json``: its rules, or the reason it could not be read."""

    def __init__(self, rules: list[tuple[PathPattern, Any, Any]], problem: str = "") -> None:
        self.rules = rules
        self.problem = problem

    @classmethod
    def parse(cls, content: bytes) -> "TdmRepFile":
        try:
            data = json.loads(content)
        except (ValueError, UnicodeDecodeError) as exc:
            return cls([], f"not JSON: {exc}")
        if not isinstance(data, list):
            return cls([], "not a JSON array of rules")
        rules = []
        skipped = 0
        for item in data[:MAX_TDM_RULES]:
            if not isinstance(item, dict) or not isinstance(item.get("location"), str) \
                    or "tdm-reservation" not in item:
                skipped += 1
                continue
            rules.append((PathPattern(item["location"]), item["tdm-reservation"],
                          item.get("tdm-policy")))
        problem = f"{skipped} rule(s) without a location or a tdm-reservation" if skipped else ""
        return cls(rules, problem)

    def statements(self, url: str) -> list[Statement]:
        """What the file says of ``url``: its first matching rule; a file that could not be read
        is one statement of ``unknown`` with the reason."""
        if self.problem and not self.rules:
            return [Statement(TDMREP_FILE, None, UNKNOWN, "/.well-known/tdmrep.json",
                              self.problem)]
        for pattern, reservation, policy in self.rules:
            if pattern.matches(url):
                return [dataclasses.replace(st, raw=f"{pattern.raw}: {st.raw}")
                        for st in tdm_reservation(reservation, policy, TDMREP_FILE)]
        return []
