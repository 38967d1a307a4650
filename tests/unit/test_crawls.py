"""owler.frontier.crawls and the SQLite frontier's crawl spaces: each crawl a file of its own
beside ``frontier.sqlite.path``, the file of before being the crawl DEFAULT."""

from __future__ import annotations

import pytest

from owler.conf import ConfError, load_conf
from owler.constants import Status
from owler.frontier import (DEFAULT_CRAWL, FrontierError, StatusUpdate, configured_crawl,
                            crawl_spaces, delete_crawl, list_crawls, open_frontier)
from owler.frontier.crawls import CrawlIDError, crawl_id, index_name, slug, sqlite_path


def test_crawl_ids_as_the_api_normalises_them():
    assert crawl_id("") == crawl_id("  ") == crawl_id(None) == DEFAULT_CRAWL
    assert crawl_id("BESPOKE") == "BESPOKE" and crawl_id(" a b ") == " a b "
    with pytest.raises(CrawlIDError, match="control character"):
        crawl_id("a\nb")
    with pytest.raises(CrawlIDError, match="at most 255"):
        crawl_id("x" * 256)


def test_slugs_are_readable_lower_case_and_tell_apart_what_case_alone_separates():
    assert slug("BESPOKE").startswith("bespoke-") and slug("bespoke").startswith("bespoke-")
    assert slug("BESPOKE") != slug("bespoke")
    assert slug("Crawl 2026/A").startswith("crawl-2026-a-")
    assert slug("日本").isalnum()  # nothing readable: the digest alone
    assert "--" not in slug("a -- b")
    assert index_name("status", DEFAULT_CRAWL) == "status"
    assert index_name("status", "News") == f"status--{slug('News')}"
    assert sqlite_path("/x/frontier.sqlite", DEFAULT_CRAWL).name == "frontier.sqlite"
    assert sqlite_path("/x/frontier.sqlite", "News").name == f"frontier--{slug('News')}.sqlite"


def conf_of(tmp_path, *extra):
    return load_conf(None, [f"frontier.sqlite.path={tmp_path / 'frontier.sqlite'}", *extra])


def put(f, url, status=Status.FETCHED):
    f.apply_updates([StatusUpdate(url, status, {}, 1000.0, "a.example")])


def test_one_url_two_crawls_two_statuses(tmp_path):
    conf = conf_of(tmp_path)
    with open_frontier(conf) as d, open_frontier(conf, crawl="BESPOKE") as b:
        put(d, "http://a.example/", Status.FETCHED)
        put(b, "http://a.example/", Status.ERROR)
        assert d.get("http://a.example/").status is Status.FETCHED
        assert b.get("http://a.example/").status is Status.ERROR
    assert (tmp_path / "frontier.sqlite").is_file()  # the crawl of before: the same file
    assert list(crawl_spaces(conf)) == [DEFAULT_CRAWL, "BESPOKE"]
    assert list_crawls(conf) == [DEFAULT_CRAWL, "BESPOKE"]


def test_the_configuration_names_the_crawl(tmp_path):
    conf = conf_of(tmp_path, "frontier.crawl.id=news")
    assert configured_crawl(conf) == "news"
    with open_frontier(conf) as f:
        put(f, "http://a.example/")
        assert f.crawl == "news" and f.path == sqlite_path(tmp_path / "frontier.sqlite", "news")
    assert list_crawls(conf) == ["news"]  # DEFAULT's file was never made
    with pytest.raises(ConfError, match="frontier.crawl.id"):
        configured_crawl(conf_of(tmp_path, "frontier.crawl.id=a\tb"))


def test_delete_a_crawl_counts_its_urls_and_removes_its_file(tmp_path):
    conf = conf_of(tmp_path)
    with open_frontier(conf) as d, open_frontier(conf, crawl="B") as b:
        put(d, "http://a.example/1")
        put(b, "http://a.example/1")
        put(b, "http://a.example/2")
    path = sqlite_path(tmp_path / "frontier.sqlite", "B")
    assert delete_crawl(conf, "B") == 2 and not path.exists()
    assert not list(tmp_path.glob("frontier--*"))  # its -wal and -shm files too
    assert delete_crawl(conf, "B") == 0 and delete_crawl(conf, "never") == 0
    assert list_crawls(conf) == [DEFAULT_CRAWL]
    assert delete_crawl(conf, "") == 1  # DEFAULT: emptied, its file stays
    assert (tmp_path / "frontier.sqlite").is_file() and list_crawls(conf) == []


def test_a_file_holds_the_crawl_it_was_made_for(tmp_path):
    conf = conf_of(tmp_path)
    with open_frontier(conf, crawl="B") as b:
        put(b, "http://a.example/")
    wrong = tmp_path / "frontier.sqlite"
    sqlite_path(wrong, "B").rename(wrong)  # B's file where DEFAULT's should be
    with pytest.raises(FrontierError, match="holds the crawl 'B', not 'DEFAULT'"):
        open_frontier(conf)
