"""Webmasters' signals read and resolved (owler.signals, issue 47): the examples of the texts that
define them, conflicting and malformed ones."""

from __future__ import annotations

from owler.fetch.robots import parse_robots
from owler.fetch.tdmrep import TdmRepFile
from owler.signals import (AI_INPUT, AI_TRAIN, ALLOWED, HEADER_ROBOTS, HEADER_USAGE, META_ROBOTS,
                           REFUSED, ROBOTS_SIGNAL, ROBOTS_USAGE, SEARCH, TDM, TDMREP_FILE,
                           TDMREP_HEADER, TDMREP_META, UNKNOWN, record, resolve)
from owler.signals.sources import aipref, content_signal, robots_directives, tdm_reservation


def states(statements, image=False):
    return {p: r["state"] for p, r in resolve(statements, image).items()}


def test_aipref_header_labels_of_vocab_08():
    st = aipref("train-ai=n, search=y, ai-use=n", HEADER_USAGE)
    assert states(st) == {SEARCH: ALLOWED, AI_TRAIN: REFUSED, AI_INPUT: REFUSED, TDM: UNKNOWN}
    # several fields are one dictionary; the last of duplicate keys wins
    assert states(aipref([b"train-ai=y", b"train-ai=n"], HEADER_USAGE))[AI_TRAIN] == REFUSED


def test_aipref_values_that_are_not_y_or_n_and_text_that_is_no_dictionary():
    # the vocabulary's own example: every preference unknown
    st = aipref('train-ai=y, train-ai, search=n, search="n"', HEADER_USAGE)
    assert states(st) == {SEARCH: UNKNOWN, AI_TRAIN: UNKNOWN, AI_INPUT: UNKNOWN, TDM: UNKNOWN}
    assert all(s.reason == "not the token y or n" for s in st)
    assert states(aipref("search=yes", HEADER_USAGE))[SEARCH] == UNKNOWN
    # an upper-case key: not a dictionary at all, said with the parser's reason
    (bad,) = aipref("Train-AI=n", HEADER_USAGE)
    assert bad.purpose is None and "not a structured field dictionary" in bad.reason
    # a label of an older draft counts for nothing, and says so
    (old,) = aipref("bots=n", HEADER_USAGE)
    assert old.purpose is None and "draft-ietf-aipref-vocab-08" in old.reason


ROBOTS = b"""Content-Signal: search=yes
User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y   # with a comment
Content-Usage: /both/ train-ai=y
Content-Usage: /both/ train-ai=n
Content-Signal: ai-train=no, ai-input=no, use=reference

User-agent: otherbot
Content-Usage: search=n
"""


def test_robots_content_usage_by_longest_path_as_the_attach_draft_example():
    rules = parse_robots(ROBOTS, ["owler"])

    def usage(path):
        return states([s for pref in rules.usage_for(path) for s in aipref(pref, ROBOTS_USAGE)])

    assert rules.allowed("/test") and usage("/test")[AI_TRAIN] == REFUSED
    assert usage("/ai-ok/test")[AI_TRAIN] == ALLOWED
    assert not rules.allowed("/never/test")
    # two lines for one path that disagree: the most restrictive
    assert usage("/both/x")[AI_TRAIN] == REFUSED
    # another agent's group is not ours
    assert usage("/test")[SEARCH] == UNKNOWN
    assert parse_robots(ROBOTS, ["otherbot"]).usage_for("/x") == ["search=n"]


def test_robots_content_signal_in_the_group_and_before_any():
    rules = parse_robots(ROBOTS, ["owler"])
    assert rules.content_signals == ("search=yes", "ai-train=no, ai-input=no, use=reference")
    st = [s for v in rules.content_signals for s in content_signal(v, ROBOTS_SIGNAL)]
    assert states(st) == {SEARCH: ALLOWED, AI_TRAIN: REFUSED, AI_INPUT: REFUSED, TDM: UNKNOWN}
    (use,) = [s for s in st if s.purpose is None]
    assert use.raw == "use=reference" and "kept as written" in use.reason


def test_content_signal_spellings_and_malformed_items():
    assert states(content_signal("Search=YES,AI-Train=no", ROBOTS_SIGNAL))[AI_TRAIN] == REFUSED
    st = content_signal("ai-train, search=maybe, ai-stuff=no,,", ROBOTS_SIGNAL)
    assert [(s.purpose, s.state, s.reason) for s in st] == [
        (None, UNKNOWN, "not key=value"), (SEARCH, UNKNOWN, "neither yes nor no"),
        (None, UNKNOWN, "unknown signal 'ai-stuff'")]


def test_tdmrep_file_first_rule_in_sequence_wins():
    f = TdmRepFile.parse(b"""[
        {"location": "/directory-a/", "tdm-reservation": 1},
        {"location": "/directory-a/open/", "tdm-reservation": 0},
        {"location": "/directory-b/images/*.jpg", "tdm-reservation": 0},
        {"location": "/directory-b/", "tdm-reservation": 1,
         "tdm-policy": "https://provider.example/policy.json"},
        {"location": "/exact$", "tdm-reservation": "1"},
        {"location": "/odd/", "tdm-reservation": 2},
        {"tdm-reservation": 1}]""")
    assert "1 rule(s) without a location" in f.problem

    def tdm(path):
        return states(f.statements(path))[TDM]

    assert tdm("/directory-a/open/x") == REFUSED  # the first rule, though another is longer
    assert tdm("/directory-b/images/a.jpg") == ALLOWED and tdm("/directory-b/x.html") == REFUSED
    assert "tdm-policy: https://provider.example/policy.json" in f.statements("/directory-b/")[0].raw
    assert tdm("/exact") == REFUSED and tdm("/exactly") == UNKNOWN
    (odd,) = f.statements("/odd/x")
    assert odd.state == UNKNOWN and "protocol error" in odd.reason
    assert f.statements("/elsewhere") == []


def test_tdmrep_files_that_cannot_be_read():
    for content, why in ((b"{not json", "not JSON"), (b'{"location": "/"}', "not a JSON array")):
        (st,) = TdmRepFile.parse(content).statements("/x")
        assert st.source == TDMREP_FILE and st.state == UNKNOWN and why in st.reason


def test_tdmrep_places_override_in_the_protocols_order_and_absence_resets_nothing():
    file_ = tdm_reservation(1, None, TDMREP_FILE)
    header = tdm_reservation("0", None, TDMREP_HEADER)
    meta = tdm_reservation("1", "https://p.example/", TDMREP_META)
    assert states(file_ + header)[TDM] == ALLOWED  # the header supersedes the file
    assert states(file_ + header + meta)[TDM] == REFUSED  # the meta supersedes both
    assert states(file_ + tdm_reservation(None, None, TDMREP_HEADER))[TDM] == REFUSED
    assert states(file_ + tdm_reservation("yes", None, TDMREP_HEADER))[TDM] == REFUSED
    assert resolve(file_ + header)[TDM]["sources"] == [TDMREP_HEADER]


def test_noai_in_meta_and_x_robots_tag_scoped_to_agents():
    agents = ["owler"]
    meta = robots_directives([("robots", "noindex, NoAI")], agents, META_ROBOTS)
    assert states(meta)[AI_TRAIN] == REFUSED and states(meta)[AI_INPUT] == REFUSED
    assert robots_directives([("otherbot", "noai")], agents, META_ROBOTS) == []
    assert states(robots_directives([("Owler", "noai")], agents, META_ROBOTS))[AI_TRAIN] == REFUSED
    header = [("", "googlebot: noindex, noai"), ("", "owler: noimageai"),
              ("", "unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow")]
    st = robots_directives(header, agents, HEADER_ROBOTS)
    assert [s.raw for s in st] == ["owler: noimageai"] * 2 and all(s.images for s in st)
    assert states(st)[AI_TRAIN] == UNKNOWN  # a page, not an image
    assert states(st, image=True)[AI_TRAIN] == REFUSED
    st = robots_directives([("", "max-snippet:20, noai")], agents, HEADER_ROBOTS)
    assert states(st)[AI_TRAIN] == REFUSED  # a rule with a colon is not an agent


def test_the_most_restrictive_statement_wins_across_signals():
    st = (aipref("train-ai=y, search=y", HEADER_USAGE)
          + content_signal("ai-train=no", ROBOTS_SIGNAL)
          + robots_directives([("robots", "noai")], ["owler"], META_ROBOTS))
    rec = record(st)
    assert rec["purposes"][AI_TRAIN] == {"state": REFUSED,
                                         "sources": [META_ROBOTS, ROBOTS_SIGNAL]}
    assert rec["purposes"][SEARCH] == {"state": ALLOWED, "sources": [HEADER_USAGE]}
    assert rec["vocab"] == "draft-ietf-aipref-vocab-08" and len(rec["statements"]) == 5


def test_check_robots_shows_the_signals_for_each_url(tmp_path):
    import subprocess
    import sys

    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-Agent: *\nDisallow: /never/\nContent-Usage: train-ai=n, bots=n\n"
                       b"Content-Usage: /ai-ok/ train-ai=y\nContent-Signal: search=yes\n")
    out = subprocess.run([sys.executable, "-m", "owler", "check-robots", "--agent", "Owler/1",
                          "--robots-file", str(robots), "http://h/a", "http://h/ai-ok/b",
                          "http://h/never/c"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "ALLOW\thttp://h/a",
        "\tsignals: search=allowed (robots.content-signal); ai-train=refused (robots.content-usage)",
        "\trobots.content-usage: bots: label 'bots' is not in draft-ietf-aipref-vocab-08: ignored",
        "ALLOW\thttp://h/ai-ok/b",
        "\tsignals: search=allowed (robots.content-signal); ai-train=allowed (robots.content-usage)",
        "DENY\thttp://h/never/c"]


def test_check_robots_shows_the_tdmrep_file_rule_for_each_url(tmp_path):
    import subprocess
    import sys

    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-Agent: *\nDisallow: /never/\n")
    tdm = tmp_path / "tdmrep.json"
    tdm.write_bytes(b'[{"location": "/r/", "tdm-reservation": 1}, {"location": "/x/"}]')
    out = subprocess.run([sys.executable, "-m", "owler", "check-robots", "--agent", "owler",
                          "--robots-file", str(robots), "--tdmrep-file", str(tdm),
                          "http://h/r/a", "http://h/b", "http://h/never/r/c"],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["ALLOW\thttp://h/r/a", "\tsignals: tdm=refused (tdmrep.file)",
                                "ALLOW\thttp://h/b", "DENY\thttp://h/never/r/c"]
    tdm.write_bytes(b"<html>not json")
    out = subprocess.run([sys.executable, "-m", "owler", "check-robots", "--agent", "owler",
                          "--robots-file", str(robots), "--tdmrep-file", str(tdm),
                          "http://h/r/a"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[1:] == ["\tsignals: nothing readable",
                                    "\ttdmrep.file: /.well-known/tdmrep.json: not JSON: "
                                    "Expecting value: line 1 column 1 (char 0)"]


def test_response_headers_in_one_pass():
    from owler.signals.sources import from_headers

    st = from_headers([("Content-Type", "text/html"), ("content-usage", "train-ai=n"),
                       ("Content-Usage", "search=y"), ("X-Robots-Tag", "owler: noai"),
                       ("TDM-Reservation", "1"), ("tdm-policy", "https://p.example/")], ["owler"])
    assert states(st) == {SEARCH: ALLOWED, AI_TRAIN: REFUSED, AI_INPUT: REFUSED, TDM: REFUSED}
    assert from_headers([("Content-Type", "text/html")], ["owler"]) == []


def test_the_policy_and_what_a_url_records():
    import pytest

    from owler.conf import ConfError
    from owler.signals import MD_UNREADABLE, SignalPolicy, note, record_json

    policy = SignalPolicy.from_conf({})
    assert policy.purposes == (SEARCH,) and policy.action == "skip"
    said = content_signal("search=no, ai-train=no, bogus", ROBOTS_SIGNAL)
    assert policy.refused(resolve(said)) == SEARCH
    assert SignalPolicy.from_conf({"signals.refused.action": "mark"}).refused(resolve(said)) is None
    # after the response: skip and strip withhold the content of a refused page, mark does not
    assert policy.withheld(resolve(said)) == SEARCH
    strip = SignalPolicy.from_conf({"signals.refused.action": "strip"})
    assert strip.refused(resolve(said)) is None and strip.withheld(resolve(said)) == SEARCH
    assert SignalPolicy.from_conf({"signals.refused.action": "mark"}).withheld(
        resolve(said)) is None
    assert '"withheld":"search"' in record_json(said, withheld=SEARCH)
    assert "withheld" not in record_json(said)
    assert SignalPolicy.from_conf({"signals.purposes": ["ai-train", "tdm"]}).refused(
        resolve(content_signal("ai-input=no", ROBOTS_SIGNAL))) is None
    for bad in ({"signals.purposes": ["crawl"]}, {"signals.refused.action": "later"}):
        with pytest.raises(ConfError):
            SignalPolicy.from_conf(bad)
    md = {}
    note(md, said)
    assert md == {"signals.search": ["refused"], "signals.ai-train": ["refused"],
                  MD_UNREADABLE: ["robots.content-signal: bogus: not key=value"]}
    assert '"search":{"sources":["robots.content-signal"],"state":"refused"}' in record_json(said)


def test_content_signal_in_crawler_commons_robots_files():
    """Real robots.txt files of crawler-commons' tests (read in place): a Content-Signal before
    every group counts for every agent, its comment left out; the plural Content-Signals line of
    another proposal (a path to a JSON file) is not a Content-Signal and says nothing."""
    from tests.material import shared

    folder = shared("robots", "crawler-commons", pattern="extension*.txt")
    merged = (folder / "extensions-group-merging.txt").read_bytes()
    for agent in ("mybot", "yourbot", "owler"):
        rules = parse_robots(merged, [agent])
        assert rules.content_signals == ("search=yes,ai-train=yes,ai-input=yes",)
        st = [s for v in rules.content_signals for s in content_signal(v, ROBOTS_SIGNAL)]
        assert states(st) == {SEARCH: ALLOWED, AI_TRAIN: ALLOWED, AI_INPUT: ALLOWED,
                              TDM: UNKNOWN}
    assert not parse_robots(merged, ["mybot"]).allowed("/private/x")
    other = parse_robots((folder / "extension-robots.txt").read_bytes(), ["owler"])
    assert other.content_signals == () and other.usage_for("/x") == []
    assert other.allowed("/llms.txt")
