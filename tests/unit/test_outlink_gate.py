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


def test_keep_new_sends_a_link_once_and_all_of_a_replay(tmp_path):
    from owler.outlinks import RecentlySent

    g, sent = gate(tmp_path), RecentlySent(100)
    counts: Counter = Counter()
    page1 = [("http://example.com/a?utm_source=x", ""), ("http://example.com/b", ""),
             ("http://spam.example/", "")]
    assert g.keep_new("http://example.com/", {}, page1, sent, False, counts) == [
        ("http://example.com/a", ""), ("http://example.com/b", "")]
    assert counts["accepted"] == 2 and counts["blacklisted/spam"] == 1
    assert counts["outlinks_repeated"] == 0
    # page 2: /b as it was sent skips the gate; /a reaches it again (the raw form differs) and is
    # dropped after it; /c is new
    counts.clear()
    page2 = [("http://example.com/b", ""), ("http://example.com/a?utm_source=y", ""),
             ("http://example.com/c", "")]
    assert g.keep_new("http://example.com/x", {}, page2, sent, False, counts) == [
        ("http://example.com/c", "")]
    assert counts["outlinks_repeated"] == 2 and counts["accepted"] == 2
    # a replayed record sends everything that passes, sent before or not
    counts.clear()
    assert g.keep_new("http://example.com/x", {}, page2, sent, True, counts) == [
        ("http://example.com/b", ""), ("http://example.com/a", ""), ("http://example.com/c", "")]
    assert counts["outlinks_repeated"] == 0
    # a link sent once is not filtered again, even where the filters would reject it
    assert "http://example.com/b" in sent and "http://spam.example/" not in sent
