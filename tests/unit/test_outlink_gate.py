"""owler.parse.gate.OutlinkGate: the URL filters, then the blacklist, over one page's links."""

from __future__ import annotations

from collections import Counter

from owler.conf import load_conf
from owler.parse.gate import OutlinkGate


def gate(tmp_path) -> OutlinkGate:
    bl = tmp_path / "blacklists"
    bl.mkdir()
    (bl / "spam.txt").write_text("spam.example\n")
    (bl / "optout.txt").write_text("https://optout.example.net/private/\n")
    return OutlinkGate.from_conf({**load_conf(), "blacklist.dir": str(bl)})


def test_links_are_normalised_filtered_blacklisted_and_kept_once(tmp_path):
    counts: Counter = Counter()
    links = [("HTTP://Example.COM:80/a/../b?utm_source=x#f", "first"), ("mailto:x@y.z", "m"),
             ("http://www.spam.example/x", "spam"), ("https://optout.example.net/private/p", ""),
             ("https://optout.example.net/public", "pub"), ("http://example.com/b", "again")]
    kept = gate(tmp_path).keep("http://example.com/", {"depth": ["0"]}, links, counts)
    assert kept == [("http://example.com/b", "first"), ("https://optout.example.net/public", "pub")]
    assert counts["blacklisted/spam"] == 1 and counts["blacklisted/optout"] == 1
    assert counts["accepted"] == 2
    assert sum(n for k, n in counts.items() if k.startswith("rejected/")) == 1  # mailto:


def test_check_names_the_reason(tmp_path):
    g = gate(tmp_path)
    assert g.check("http://example.com/", {}, "http://example.com/x") == ("http://example.com/x", None)
    assert g.check("http://example.com/", {}, "http://spam.example/") == (None, "blacklisted/spam")
    url, reason = g.check("http://example.com/", {}, "javascript:void(0)")
    assert url is None and reason.startswith("rejected/")
