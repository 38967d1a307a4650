"""SQLite frontier schema 3: tags, interest queries, the sitemap refresh, migration from schema 2."""

from __future__ import annotations

import sqlite3

import pytest

from owler.conf import ConfError, load_conf
from owler.constants import Status
from owler.frontier import StatusUpdate
from owler.frontier.sqlite import SQLiteFrontier

NOW = 1_750_000_000.0
TAGS = {"isSitemap=true": "Sitemap", "isFeed=true": "Feed", "isDiscoveredOnSitemap=true": "OnSitemap"}
INTEREST = {"frontier.tags": TAGS, "frontier.interest.tags": ["Sitemap", "OnSitemap"]}
SEEDS = {"frontier.tags": TAGS, "frontier.interest.exclude.tags": ["Sitemap", "OnSitemap", "Feed"]}


def upd(url, status=Status.DISCOVERED, nfd=NOW, md=None, key=None):
    return StatusUpdate(url, status, md or {}, nfd, key or url.split("/")[2])


SM = {"isSitemap": ["true"]}


def on_sitemap(lastmod=None, **extra):
    md = {"isDiscoveredOnSitemap": ["true"], "isSitemap": ["false"]}
    if lastmod:
        md["sitemap.lastModified"] = [lastmod]
    md.update({k: [v] for k, v in extra.items()})
    return md


@pytest.fixture
def path(tmp_path):
    return tmp_path / "f.sqlite"


def test_tags_from_rules_first_by_name(path):
    with SQLiteFrontier(path, {"frontier.tags": TAGS}) as f:
        f.apply_updates([upd("http://a.com/s.xml", md=SM), upd("http://a.com/p", md=on_sitemap()),
                         upd("http://a.com/both", md={**SM, "isDiscoveredOnSitemap": ["true"]}),
                         upd("http://a.com/plain", md={"depth": ["1"]})])
        assert f.tag("http://a.com/s.xml") == "Sitemap"
        assert f.tag("http://a.com/p") == "OnSitemap"
        assert f.tag("http://a.com/both") == "OnSitemap"  # OnSitemap < Sitemap
        assert f.tag("http://a.com/plain") is None
    with pytest.raises(ConfError):
        SQLiteFrontier(path, {"frontier.tags": ["isSitemap"]})
    with pytest.raises(ConfError):
        SQLiteFrontier(path, {"frontier.tags": {"isSitemap": "Sitemap"}})


def test_interest_spout_is_never_starved_by_untagged_urls(path):
    with SQLiteFrontier(path, {"frontier.tags": TAGS}) as w:
        # 2,000 untagged due URLs in 400 queues, all due before the one sitemap
        w.apply_updates([upd(f"http://h{i % 400}.com/{i}", nfd=NOW - 1000) for i in range(2000)])
        w.apply_updates([upd("http://z.com/sitemap.xml", md=SM, nfd=NOW),
                         upd("http://z.com/later.xml", md=SM, nfd=NOW + 50),
                         upd("http://h1.com/p", md=on_sitemap(), nfd=NOW - 5)])
    with SQLiteFrontier(path, INTEREST) as f:
        got = f.due(NOW, max_buckets=10, per_bucket=10)
        assert sorted(u for u, _, _ in got) == ["http://h1.com/p", "http://z.com/sitemap.xml"]
        assert f.due_count(NOW) == 2 and f.queue_count(NOW) == 2 and f.queue_count() == 2
        assert f.due(NOW, 10, 10, exclude={"http://h1.com/p"}) == [
            ("http://z.com/sitemap.xml", SM, "z.com")]
    with SQLiteFrontier(path, {**INTEREST, "frontier.interest.tags": ["Sitemap"]}) as f:
        assert [u for u, _, _ in f.due(NOW, 10, 10)] == ["http://z.com/sitemap.xml"]
    with SQLiteFrontier(path, {"frontier.tags": TAGS}) as f:  # no interest: everything
        assert f.due_count(NOW) == 2002


def test_exclude_only_serves_untagged(path):
    with SQLiteFrontier(path, {"frontier.tags": TAGS}) as w:
        w.apply_updates([upd("http://a.com/", nfd=NOW - 10), upd("http://a.com/s.xml", md=SM,
                                                                   nfd=NOW - 20),
                         upd("http://b.com/", nfd=NOW - 5)])
    with SQLiteFrontier(path, SEEDS) as f:
        assert sorted(u for u, _, _ in f.due(NOW, 10, 10)) == ["http://a.com/", "http://b.com/"]
        assert f.due_count(NOW) == 2


def test_tag_queue_follows_reschedules_and_repairs_itself(path):
    with SQLiteFrontier(path, INTEREST) as f:
        f.apply_updates([upd("http://a.com/s.xml", md=SM)])
        f.apply_updates([upd("http://a.com/s.xml", Status.FETCHED, NOW + 86400, SM)])
        assert f.due(NOW, 10, 10) == [] and f.due_count(NOW) == 0
        f.apply_updates([upd("http://a.com/s.xml", md=SM)])  # known: no-op, queue lowered early
        assert f.due(NOW, 10, 10) == []  # the stale queue is repaired, nothing served
        assert f.conn.execute("SELECT next_due FROM tag_queues").fetchone()[0] == NOW + 86400
        # the URL loses its tag (FETCH_ERROR without isSitemap): its old tag queue is dropped
        # when it comes due and has nothing to serve
        f.apply_updates([upd("http://a.com/s.xml", Status.FETCH_ERROR, NOW - 1, {})])
        assert f.due(NOW, 10, 10) == [] and f.tag("http://a.com/s.xml") is None
        assert f.due(NOW + 86401, 10, 10) == []
        assert f.conn.execute("SELECT COUNT(*) FROM tag_queues").fetchone()[0] == 0


# ---- the sitemap refresh -------------------------------------------------------------------

def record(f, url):
    return f.get(url)


def test_refresh_of_an_unknown_url_is_a_discovery(path):
    with SQLiteFrontier(path, INTEREST) as f:
        f.apply_updates([upd("http://a.com/p", nfd=NOW - 30, md=on_sitemap("2024-01-01T00:00:00Z"))])
        r = record(f, "http://a.com/p")
        assert r.status == Status.DISCOVERED and r.next_fetch_date == NOW - 30
        assert f.due(NOW, 10, 10)[0][0] == "http://a.com/p"


def fetched(f, url, when, md):
    """A FETCHED written at ``when`` (its updated time), due a day later."""
    f.apply_updates([upd(url, Status.FETCHED, when + 86400, md)])
    f.conn.execute("UPDATE urls SET updated = ? WHERE url = ?", (when, url))


def test_a_newer_lastmod_makes_a_fetched_url_due_without_touching_its_status(path):
    with SQLiteFrontier(path, INTEREST) as f:
        md = {**on_sitemap("2024-01-01T00:00:00Z", **{"IMAGE.loc": "http://i/1"}),
              "signature": ["abc"]}
        fetched(f, "http://a.com/p", NOW - 100, md)
        # same lastmod, an older one, and a newer one that predates the fetch: nothing changes
        for lm in ("2024-01-01T00:00:00Z", "2023-01-01T00:00:00Z", "2025-06-15T15:00:00Z"):
            f.apply_updates([upd("http://a.com/p", nfd=NOW, md=on_sitemap(lm))])
            r = record(f, "http://a.com/p")
            assert r.next_fetch_date == NOW - 100 + 86400, lm
        # changed after the fetch (NOW - 100 = 2025-06-15T15:05:00Z)
        f.apply_updates([upd("http://a.com/p", nfd=NOW, md=on_sitemap("2025-06-15T15:06:00Z",
                                                                     **{"NEWS.title": "t"}))])
        r = record(f, "http://a.com/p")
        assert r.status == Status.FETCHED and r.next_fetch_date == NOW
        assert r.metadata["sitemap.lastModified"] == ["2025-06-15T15:06:00Z"]
        assert r.metadata["signature"] == ["abc"]  # not a sitemap key: kept
        assert "IMAGE.loc" not in r.metadata and r.metadata["NEWS.title"] == ["t"]  # replaced
        assert [u for u, _, _ in f.due(NOW, 10, 10)] == ["http://a.com/p"]


def test_a_listed_seed_becomes_due_and_tagged(path):
    with SQLiteFrontier(path, {"frontier.tags": TAGS}) as w:
        w.inject([("http://a.com/", {})], NOW - 500)
        # the seed spout looked the host up: the seed moves to the next look-up
        w.apply_updates([upd("http://a.com/", nfd=NOW + 86400,
                             md={"sitemap.seeded": ["2025-06-15T15:00:00Z"]})])
        r = record(w, "http://a.com/")
        assert r.status == Status.DISCOVERED and r.next_fetch_date == NOW + 86400
        assert w.tag("http://a.com/") is None
    with SQLiteFrontier(path, SEEDS) as seeds:
        assert seeds.due(NOW, 10, 10) == []
    with SQLiteFrontier(path, INTEREST) as f:
        f.apply_updates([upd("http://a.com/", nfd=NOW, md=on_sitemap())])  # a sitemap lists it
        r = record(f, "http://a.com/")
        assert r.status == Status.DISCOVERED and r.next_fetch_date == NOW
        assert f.tag("http://a.com/") == "OnSitemap"
        assert [u for u, _, _ in f.due(NOW, 10, 10)] == ["http://a.com/"]
        # a second look-up does not push a listed URL away
        f.apply_updates([upd("http://a.com/", nfd=NOW + 86400,
                             md={"sitemap.seeded": ["2025-06-16T15:00:00Z"]})])
        assert record(f, "http://a.com/").next_fetch_date == NOW


def test_is_sitemap_is_never_downgraded_and_batch_order_is_kept(path):
    with SQLiteFrontier(path, INTEREST) as f:
        f.apply_updates([upd("http://a.com/s.xml", md=SM)])
        f.apply_updates([upd("http://a.com/s.xml", md=on_sitemap())])  # also listed as a page
        assert record(f, "http://a.com/s.xml").metadata["isSitemap"] == ["true"]
        # one batch: a sitemap lists itself with lastmod = now, then its own FETCHED: no loop
        lm = "2025-06-15T15:06:30Z"
        f.apply_updates([upd("http://a.com/s.xml", nfd=NOW, md={**SM, "sitemap.lastModified": [lm]}),
                         upd("http://a.com/s.xml", Status.FETCHED, NOW + 86400, SM)])
        r = record(f, "http://a.com/s.xml")
        assert r.status == Status.FETCHED and r.next_fetch_date == NOW + 86400


def test_migration_from_schema_2_tags_stored_urls(path):
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '2');
        CREATE TABLE urls (id BLOB PRIMARY KEY, url TEXT NOT NULL, status TEXT NOT NULL,
            next_fetch_date REAL NOT NULL, key TEXT NOT NULL, metadata TEXT NOT NULL,
            updated REAL NOT NULL);
        CREATE INDEX urls_key_next_fetch_date ON urls (key, next_fetch_date);
        CREATE TABLE queues (key TEXT PRIMARY KEY, next_due REAL NOT NULL);
        CREATE INDEX queues_next_due ON queues (next_due);
    """)
    from owler.frontier.sqlite import _url_id

    for u, md in (("http://a.com/s.xml", '{"isSitemap":["true"]}'), ("http://a.com/p", '{}'),
                  ("http://a.com/f", '{"isSitemap":["false"],"isFeed":["true"]}')):
        conn.execute("INSERT INTO urls VALUES (?, ?, 'DISCOVERED', ?, 'a.com', ?, ?)",
                     (_url_id(u), u, NOW - 1, md, NOW - 1))
    conn.execute("INSERT INTO queues VALUES ('a.com', ?)", (NOW - 1,))
    conn.commit()
    conn.close()
    with SQLiteFrontier(path, {**INTEREST, "frontier.interest.tags": ["Sitemap", "Feed"]}) as f:
        assert f.tag("http://a.com/s.xml") == "Sitemap" and f.tag("http://a.com/f") == "Feed"
        assert f.tag("http://a.com/p") is None
        assert sorted(u for u, _, _ in f.due(NOW, 10, 10)) == ["http://a.com/f", "http://a.com/s.xml"]
        assert f.counts()["DISCOVERED"] == 3
        assert f.conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()[0] == "7"


def test_default_configuration_tags(path):
    conf = load_conf()
    with SQLiteFrontier(path, conf) as f:
        f.apply_updates([upd("http://a.com/p", md=on_sitemap())])
        assert f.tag("http://a.com/p") == "OnSitemap"


# ---- schema 4: several tags per URL, wildcard rules, priorities (issue 18) ----------------------

FOCUS = {"frontier.tags": {"lang=*": "lang:*", "risk=*": "risk:*", "isSitemap=true": "Sitemap"}}


def page(lang=None, risk=None, **extra):
    md = {k: [v] for k, v in extra.items()}
    if lang:
        md["lang"] = [lang]
    if risk:
        md["risk"] = [risk]
    return md


def test_wildcard_rules_give_every_tag(path):
    with SQLiteFrontier(path, FOCUS) as f:
        f.apply_updates([upd("http://a.com/de", md=page("de", "benign")),
                         upd("http://a.com/x", md=page("de", "adult", isSitemap="true")),
                         upd("http://a.com/none", md=page())])
        assert f.tags("http://a.com/de") == ["lang:de", "risk:benign"]
        assert f.tags("http://a.com/x") == ["lang:de", "risk:adult", "Sitemap"]
        assert f.tags("http://a.com/none") == [] and f.tag("http://a.com/none") is None
        assert f.tag("http://a.com/x") == "Sitemap"  # the first by name
        # url_tags follows every write: one row per tag
        assert f.conn.execute("SELECT COUNT(*) FROM url_tags").fetchone()[0] == 5
        # a re-fetch found another language: the old tag rows go
        f.apply_updates([upd("http://a.com/de", Status.FETCHED, NOW + 100, page("fr", "benign"))])
        assert f.tags("http://a.com/de") == ["lang:fr", "risk:benign"]
        rows = f.conn.execute("SELECT tag, next_fetch_date FROM url_tags WHERE tag LIKE 'lang:%' "
                              "ORDER BY tag").fetchall()
        assert rows == [("lang:de", NOW), ("lang:fr", NOW + 100)]
        f.delete("a.com")
        assert f.conn.execute("SELECT COUNT(*) FROM url_tags").fetchone()[0] == 0


def test_interest_and_exclusion_across_several_tags(path):
    with SQLiteFrontier(path, FOCUS) as w:
        w.apply_updates([upd("http://a.com/1", md=page("de", "benign"), nfd=NOW - 3),
                         upd("http://a.com/2", md=page("de", "adult"), nfd=NOW - 2),
                         upd("http://b.com/1", md=page("fr", "benign"), nfd=NOW - 1),
                         upd("http://c.com/1", md=page("de"), nfd=NOW - 1),
                         upd("http://d.com/1", nfd=NOW - 5)])
    german = {**FOCUS, "frontier.interest.tags": ["lang:de"]}
    with SQLiteFrontier(path, german) as f:
        assert sorted(u for u, _, _ in f.due(NOW, 10, 10)) == [
            "http://a.com/1", "http://a.com/2", "http://c.com/1"]
        assert f.due_count(NOW) == 3 and f.queue_count(NOW) == 2
    clean = {**german, "frontier.interest.exclude.tags": ["risk:adult"]}
    with SQLiteFrontier(path, clean) as f:
        assert sorted(u for u, _, _ in f.due(NOW, 10, 10)) == ["http://a.com/1", "http://c.com/1"]
    both = {**FOCUS, "frontier.interest.tags": ["lang:de", "risk:benign"]}
    with SQLiteFrontier(path, both) as f:  # a URL with two interest tags is served once
        got = [u for u, _, _ in f.due(NOW, 10, 10)]
        assert sorted(got) == ["http://a.com/1", "http://a.com/2", "http://b.com/1",
                               "http://c.com/1"]
        assert f.due_count(NOW) == 4
    no_adult = {**FOCUS, "frontier.interest.exclude.tags": ["risk:adult"]}
    with SQLiteFrontier(path, no_adult) as f:  # exclusion alone: every URL but the adult one
        assert sorted(u for u, _, _ in f.due(NOW, 10, 10)) == [
            "http://a.com/1", "http://b.com/1", "http://c.com/1", "http://d.com/1"]
        assert f.due_count(NOW) == 4


def test_tag_priority_moves_urls_in_their_queue(path):
    conf = {**FOCUS, "frontier.tags.priority": {"lang:de": 3600, "risk:adult": -86400}}
    with SQLiteFrontier(path, conf) as f:
        f.apply_updates([upd("http://a.com/en", md=page("en"), nfd=NOW - 60),
                         upd("http://a.com/de", md=page("de"), nfd=NOW),
                         upd("http://a.com/adult", md=page("de", "adult"), nfd=NOW - 600),
                         upd("http://a.com/gone", Status.FETCHED, None, page("de"))])
        assert [u for u, _, _ in f.due(NOW, 1, 10)] == ["http://a.com/de", "http://a.com/en"]
        assert record(f, "http://a.com/de").next_fetch_date == NOW - 3600
        assert record(f, "http://a.com/adult").next_fetch_date == NOW - 600 - 3600 + 86400
        assert record(f, "http://a.com/gone").next_fetch_date is None  # never stays never
    with pytest.raises(ConfError, match="frontier.tags.priority"):
        SQLiteFrontier(path, {**FOCUS, "frontier.tags.priority": {"lang:de": "soon"}})


def test_migration_from_schema_3_keeps_tags(path):
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '3');
        CREATE TABLE urls (id BLOB PRIMARY KEY, url TEXT NOT NULL, status TEXT NOT NULL,
            next_fetch_date REAL NOT NULL, key TEXT NOT NULL, metadata TEXT NOT NULL,
            updated REAL NOT NULL, tag TEXT);
        CREATE INDEX urls_key_next_fetch_date ON urls (key, next_fetch_date);
        CREATE TABLE queues (key TEXT PRIMARY KEY, next_due REAL NOT NULL);
        CREATE INDEX urls_tag_key_next_fetch_date ON urls (tag, key, next_fetch_date)
            WHERE tag IS NOT NULL;
        CREATE TABLE tag_queues (tag TEXT NOT NULL, key TEXT NOT NULL, next_due REAL NOT NULL,
            PRIMARY KEY (tag, key));
    """)
    from owler.frontier.sqlite import _url_id

    for u, md, tag in (("http://a.com/s.xml", '{"isSitemap":["true"]}', "Sitemap"),
                       ("http://a.com/p", '{}', None)):
        conn.execute("INSERT INTO urls VALUES (?, ?, 'DISCOVERED', ?, 'a.com', ?, ?, ?)",
                     (_url_id(u), u, NOW - 1, md, NOW - 1, tag))
    conn.execute("INSERT INTO queues VALUES ('a.com', ?)", (NOW - 1,))
    conn.execute("INSERT INTO tag_queues VALUES ('Sitemap', 'a.com', ?)", (NOW - 1,))
    conn.commit()
    conn.close()
    with SQLiteFrontier(path, INTEREST) as f:
        assert f.tags("http://a.com/s.xml") == ["Sitemap"] and f.tags("http://a.com/p") == []
        assert [u for u, _, _ in f.due(NOW, 10, 10)] == ["http://a.com/s.xml"]
        indexes = {r[0] for r in f.conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "urls_tag_key_next_fetch_date" not in indexes
        f.apply_updates([upd("http://a.com/s.xml", Status.FETCHED, NOW + 50, SM)])
        assert f.conn.execute("SELECT next_fetch_date FROM url_tags").fetchall() == [(NOW + 50,)]


def test_tagger_rules():
    from owler.frontier import Tagger

    t = Tagger({"frontier.tags": {"lang=*": "lang:*", "risk=adult": "Adult", "k=*": "Any"}})
    assert t.tags({"lang": ["de", "fr", " "], "risk": ["adult"], "k": ["x", "y"]}) == [
        "lang:de", "lang:fr", "Adult", "Any"]
    assert t.tags({"risk": ["benign"]}) == [] and t.keys == {"lang", "risk", "k"}
    assert t.shift(["lang:de"]) == 0.0
    t = Tagger({"frontier.tags.priority": {"a": 10, "b": -4.5}})
    assert t.shift(["a", "b", "c"]) == 5.5 and not t
    with pytest.raises(ConfError):
        Tagger({"frontier.tags.priority": ["a"]})
