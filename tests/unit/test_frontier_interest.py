"""Interests as signatures of tags (owler.frontier.Interest: required, any-of and excluded tags;
the text form of ``owler frontier serve --interest``) and how the SQLite frontier serves them; and
``retag``, which re-applies changed tag rules to the URLs already stored, batch by batch."""

from __future__ import annotations

import itertools
import math

import pytest

from owler.conf import ConfError
from owler.constants import Status
from owler.frontier import Interest, StatusUpdate
from owler.frontier import sqlite as sqlite_module
from owler.frontier.sqlite import REQUIRED_SCAN, SQLiteFrontier

NOW = 1_750_000_000.0
S, F, A = "Sitemap", "FamilyFriendly", "risk:adult"
RULES = {"frontier.tags": {"s=1": S, "f=1": F, "a=1": A}}


def md_of(tags):
    return {name: ["1"] for name, tag in (("s", S), ("f", F), ("a", A)) if tag in tags}


def upd(url, tags=(), nfd=NOW - 10, status=Status.DISCOVERED, md=None):
    return StatusUpdate(url, status, md if md is not None else md_of(tags), nfd,
                        url.split("/")[2])


# ---- the Interest object --------------------------------------------------------------------

def test_the_text_form_and_the_configuration_keys_give_one_interest():
    owler = Interest.parse("+Sitemap +FamilyFriendly -risk:adult")
    assert owler == Interest((S, F), (), (A,))
    assert owler.text() == "+Sitemap +FamilyFriendly -risk:adult"
    assert Interest.parse(owler.text()) == owler
    # spaces or commas, in any order, each tag once
    assert Interest.parse(" lang:de, lang:fr +Sitemap,-risk:adult  +Sitemap") == Interest(
        (S,), ("lang:de", "lang:fr"), (A,))
    assert Interest.from_conf(owler.as_conf()) == owler
    assert owler.as_conf() == {"frontier.interest.required.tags": [S, F],
                               "frontier.interest.tags": [],
                               "frontier.interest.exclude.tags": [A]}
    # the keys as comma-separated strings (StormCrawler's list form) read the same
    assert Interest.from_conf({"frontier.interest.required.tags": "Sitemap, FamilyFriendly",
                               "frontier.interest.exclude.tags": "risk:adult"}) == owler
    for empty in ("", "   ", None):
        assert Interest.parse(empty) == Interest() and not Interest.parse(empty)
    assert Interest.from_conf({}) == Interest() and Interest().text() == ""


@pytest.mark.parametrize("text, problem", [
    ("+", "a lone '+' with no tag after it"),
    ("+Sitemap -", "a lone '-' with no tag after it"),
    ("+ Sitemap", "a lone '+' with no tag after it"),
    ("Sitemap,,Feed", "an empty tag"),
    ("Sitemap,", "an empty tag"),
    (",Sitemap", "an empty tag"),
    ("++Sitemap", "'++Sitemap' has two signs"),
    ("+-Sitemap", "'+-Sitemap' has two signs"),
    ("+Sitemap -Sitemap", "tag 'Sitemap' is both required and excluded"),
    ("Feed -Feed", "tag 'Feed' is both any-of and excluded"),
])
def test_a_malformed_interest_is_a_conf_error_naming_the_problem(text, problem):
    with pytest.raises(ConfError) as err:
        Interest.parse(text)
    assert problem in str(err.value) and repr(text) in str(err.value)


def test_malformed_interest_keys_are_conf_errors_naming_the_keys():
    with pytest.raises(ConfError, match="an empty required tag"):
        Interest.from_conf({"frontier.interest.required.tags": [S, " "]})
    with pytest.raises(ConfError, match=r"frontier.interest.required.tags .*'Feed' is both "
                                        "any-of and excluded"):
        Interest.from_conf({"frontier.interest.tags": ["Feed"],
                            "frontier.interest.exclude.tags": ["Feed"]})
    with pytest.raises(ConfError, match="frontier.interest"):  # a frontier refuses it too
        SQLiteFrontier(":memory:", {"frontier.interest.required.tags": [S],
                                    "frontier.interest.exclude.tags": [S]})


def test_matches_is_all_required_one_of_any_none_excluded():
    want = Interest((S, F), ("lang:de", "lang:fr"), (A,))
    assert want.matches([S, F, "lang:de"]) and want.matches([F, S, "lang:fr", "x"])
    assert not want.matches([S, "lang:de"])  # a required tag missing
    assert not want.matches([S, F])  # none of the any-of tags
    assert not want.matches([S, F, "lang:de", A])  # an excluded tag
    assert Interest().matches([]) and Interest().matches([A])
    assert Interest(exclude=(A,)).matches([]) and not Interest(exclude=(A,)).matches([A])


# ---- SQLite: every combination --------------------------------------------------------------

SUBSETS = [frozenset(c) for n in range(4) for c in itertools.combinations((S, F, A), n)]
INTERESTS = [Interest(req, any_, exc)
             for req in ((), (S,), (F,), (S, F))
             for any_ in ((), (F,), (A, F), (S,))
             for exc in ((), (A,))
             if not set(exc) & (set(req) | set(any_))]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Three URLs of every set of the three tags (none, each, each pair, all three) spread over
    four queues, all due."""
    path = tmp_path_factory.mktemp("matrix") / "f.sqlite"
    urls = {}
    with SQLiteFrontier(path, RULES) as w:
        updates = []
        for i, tags in enumerate(SUBSETS):
            for j in range(3):
                url = f"http://q{(i + j) % 4}.example/{'-'.join(sorted(tags)) or 'none'}/{j}"
                urls[url] = tags
                updates.append(upd(url, tags, NOW - 100 + i + j))
        w.apply_updates(updates)
    return path, urls


@pytest.mark.parametrize("want", INTERESTS, ids=lambda w: w.text() or "everything")
def test_every_combination_serves_exactly_the_urls_of_its_signature(matrix, want):
    path, urls = matrix
    expected = {u for u, tags in urls.items() if want.matches(tags)}
    assert len(INTERESTS) == 28  # (the combinations above but those with A wanted and excluded)
    with SQLiteFrontier(path, {**RULES, **want.as_conf()}) as f:
        got = [u for u, _, _ in f.due(NOW, 100, 100)]
        assert sorted(got) == sorted(expected)  # each once
        assert f.due_count(NOW) == len(expected)
        queues = {u.split("/")[2] for u in expected}
        assert f.queue_count(NOW) == len(queues) and f.queue_count() == len(queues)
        assert f.due(NOW - 1000, 100, 100) == [] and f.due_count(NOW - 1000) == 0


def test_a_signature_is_served_though_most_urls_of_each_required_tag_lack_the_other(tmp_path):
    """OWLer's example: Sitemap AND FamilyFriendly. Thousands of due URLs carry one of the two
    tags (and are more overdue), thousands are untagged; the few with both are all served, in one
    query, also those behind hundreds of URLs of their queue that have one tag only."""
    path = tmp_path / "f.sqlite"
    both = []
    with SQLiteFrontier(path, RULES) as w:
        # 60 queues of 80 Sitemap-only URLs, 70 queues of 60 FamilyFriendly-only URLs,
        # 400 queues of 5 untagged URLs: all due long before the URLs of the signature
        w.apply_updates([upd(f"http://s{i % 60}.example/{i}", [S], NOW - 5000 + i % 7)
                         for i in range(60 * 80)])
        w.apply_updates([upd(f"http://f{i % 70}.example/{i}", [F], NOW - 5000 + i % 5)
                         for i in range(70 * 60)])
        w.apply_updates([upd(f"http://u{i % 400}.example/{i}", [], NOW - 6000)
                         for i in range(2000)])
        # the signature: in queues of their own, and in busy queues behind their one-tag URLs
        both = ([f"http://both{i}.example/" for i in range(4)]
                + [f"http://s{i}.example/both" for i in (3, 17)]
                + [f"http://f{i}.example/both" for i in (5, 69)])
        w.apply_updates([upd(u, [S, F], NOW - 1) for u in both])
        w.apply_updates([upd("http://both0.example/adult", [S, F, A], NOW - 1),
                         upd("http://both9.example/later", [S, F], NOW + 60)])
    want = {**RULES, "frontier.interest.required.tags": [S, F],
            "frontier.interest.exclude.tags": [A]}
    with SQLiteFrontier(path, want) as f:
        got = f.due(NOW, 100, 10)
        assert sorted(u for u, _, _ in got) == sorted(both)
        assert f.due_count(NOW) == len(both)
        assert f.queue_count(NOW) == len({u.split("/")[2] for u in both}) == 8
        # the URLs a spout has in flight are left out and nothing else comes instead
        assert f.due(NOW, 100, 10, exclude=set(both)) == []
        assert [u for u, _, _ in f.due(NOW + 60, 100, 10, exclude=set(both))] == [
            "http://both9.example/later"]
    # the busy queue's URL of the signature sat behind 80 (resp. 60) URLs of the driving tag: the
    # bound on the rows looked at per queue is well beyond that
    assert REQUIRED_SCAN > 80


def test_queues_without_the_signature_never_starve_the_others(tmp_path, monkeypatch):
    """When the rows of the driving tag that lack the rest of the signature exceed a query's
    budget, each query goes on where the one before stopped: within ceil(rows / budget) queries
    every URL of the signature has been served, and no other URL ever."""
    path = tmp_path / "f.sqlite"
    with SQLiteFrontier(path, RULES) as w:
        # 40 queues of 30 Sitemap URLs that are adult (excluded), the most overdue; behind them
        # 6 queues with a URL of the signature each
        w.apply_updates([upd(f"http://a{i % 40}.example/{i}", [S, A], NOW - 900)
                         for i in range(40 * 30)])
        good = [f"http://g{i}.example/" for i in range(6)]
        w.apply_updates([upd(u, [S], NOW - 10 + i) for i, u in enumerate(good)])
    budget = 100
    monkeypatch.setattr(sqlite_module, "REQUIRED_BUDGET", budget)
    rows = 40 * 30 + len(good)
    served: list[str] = []
    queries = 0
    with SQLiteFrontier(path, {**RULES, "frontier.interest.required.tags": [S],
                               "frontier.interest.exclude.tags": [A]}) as f:
        while set(served) != set(good):
            queries += 1
            assert queries <= math.ceil(rows / budget), f"starved: {served} after {queries - 1}"
            served += [u for u, _, _ in f.due(NOW, 10, 10, exclude=set(served))]
        assert sorted(served) == sorted(good)  # each once, nothing else
        # a whole round of the queues more: nothing else is ever served
        for _ in range(math.ceil(rows / budget)):
            assert f.due(NOW, 10, 10, exclude=set(served)) == []


# ---- retag ------------------------------------------------------------------------------------

def test_retag_rewrites_the_tags_of_stored_urls_in_batches_and_nothing_else(tmp_path):
    """30,000 URLs tagged under old rules; retag with new ones walks them 1,000 at a time (the
    statements say so: keyset pages by id, never the whole table), rewrites the tags that
    changed (the url_tags rows and tag queues follow: an interest spout of a new tag is served
    at once) and leaves statuses, dates and metadata as they were, a priority shift included."""
    path = tmp_path / "f.sqlite"
    n, batch = 30_000, 1000
    old_rules = {"frontier.tags": {"lang=de": "German"}}
    langs = ("de", "fr", None)
    with SQLiteFrontier(path, old_rules) as w:
        w.apply_updates([
            StatusUpdate(f"http://h{i % 300}.example/{i}",
                         Status.FETCHED if i % 5 == 0 else Status.DISCOVERED,
                         {"lang": [langs[i % 3]]} if langs[i % 3] else {"depth": ["1"]},
                         NOW + 86400 if i % 5 == 0 else NOW - i % 50, f"h{i % 300}.example")
            for i in range(n)])
        before = {r[0]: r for r in w.conn.execute(
            "SELECT url, status, next_fetch_date, key, metadata, updated FROM urls")}
        assert w.conn.execute("SELECT COUNT(*) FROM url_tags").fetchone()[0] == 10_000
    new_rules = {"frontier.tags": {"lang=*": "lang:*"}, "frontier.tags.priority": {"lang:fr": 3600}}
    with SQLiteFrontier(path, new_rules) as f:
        statements: list[str] = []
        f.conn.set_trace_callback(statements.append)
        batches = list(f.retag(batch))
        f.conn.set_trace_callback(None)
        assert [seen for seen, _ in batches] == [batch] * (n // batch)
        assert sum(changed for _, changed in batches) == 20_000  # de: German -> lang:de; fr: new
        pages = [s for s in statements if s.startswith("SELECT id, key, metadata, tag FROM urls")]
        assert len(pages) == n // batch + 1  # and one more that found the end
        assert all("WHERE id > " in s and s.endswith(f"ORDER BY id LIMIT {batch}") for s in pages)
        after = {r[0]: r for r in f.conn.execute(
            "SELECT url, status, next_fetch_date, key, metadata, updated FROM urls")}
        assert after == before  # statuses, dates (no shift), keys, metadata, write times
        assert f.tags("http://h0.example/0") == ["lang:de"]
        assert f.tags("http://h1.example/1") == ["lang:fr"] and f.tags("http://h2.example/2") == []
        assert dict(f.conn.execute("SELECT tag, COUNT(*) FROM url_tags GROUP BY tag")) == {
            "lang:de": 10_000, "lang:fr": 10_000}
        assert {t for (t,) in f.conn.execute("SELECT DISTINCT tag FROM tag_queues")} == {
            "lang:de", "lang:fr"}
        assert list(f.retag(batch)) == [(batch, 0)] * (n // batch)  # nothing left to change
    due_fr = sum(1 for i in range(n) if i % 3 == 1 and i % 5 != 0)
    with SQLiteFrontier(path, {**new_rules, "frontier.interest.tags": ["lang:fr"]}) as f:
        assert f.due_count(NOW) == due_fr
        assert {u for u, _, _ in f.due(NOW, 1000, 1)} <= {u for u, r in before.items()
                                                            if "fr" in r[4]}
