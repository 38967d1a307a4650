"""Crawl spaces and deep listings on both frontiers (a SQLite file, a real OpenSearch node): the
same URL in two crawls with two statuses, the crawls listed and deleted (an OpenSearch crawl's
index and its side indices with it), and ``iter_urls`` reading a crawl to its end a page at a time
beyond OpenSearch's result window of 10,000 (what ListURLs, and so URLFrontier's DumpURLs, needs).
"""

from __future__ import annotations

import time
import uuid

import pytest

from owler.constants import Status
from owler.frontier import (DEFAULT_CRAWL, StatusUpdate, crawl_spaces, delete_crawl, list_crawls,
                            open_frontier, space_exists)
from owler.run.report import StatusError, crawl_status

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "opensearch"])
def conf(request, tmp_path):
    if request.param == "sqlite":
        return {"frontier.backend": "sqlite", "frontier.sqlite.path": str(tmp_path / "f.sqlite")}
    node = request.getfixturevalue("opensearch")
    return {"frontier.backend": "opensearch", "services.opensearch.port": node.port,
            "opensearch.status.index.name": f"cr-{uuid.uuid4().hex[:10]}",
            "frontier.lease.ttl": 60}


def test_two_crawls_two_statuses_listed_and_deleted(conf):
    url = "http://a.example/"
    with open_frontier(conf) as d, open_frontier(conf, crawl="Bespoke 2") as b:
        d.apply_updates([StatusUpdate(url, Status.FETCHED, {}, 100.0, "a.example")])
        b.apply_updates([StatusUpdate(url, Status.ERROR, {"x": ["1"]}, 200.0, "a.example"),
                         StatusUpdate("http://b.example/", Status.DISCOVERED, {}, 1.0,
                                      "b.example")])
        assert (d.get(url).status, b.get(url).status) == (Status.FETCHED, Status.ERROR)
        d.refresh()
        b.refresh()
        assert (d.count_urls(), b.count_urls()) == (1, 2)
    assert list(crawl_spaces(conf)) == [DEFAULT_CRAWL, "Bespoke 2"]
    assert list_crawls(conf) == [DEFAULT_CRAWL, "Bespoke 2"]
    assert not space_exists(conf, "nosuch") and space_exists(conf, "Bespoke 2")
    assert delete_crawl(conf, "Bespoke 2") == 2
    assert not space_exists(conf, "Bespoke 2") and list(crawl_spaces(conf)) == [DEFAULT_CRAWL]
    if conf["frontier.backend"] == "opensearch":  # its leases index went with it
        f = open_frontier(conf)
        try:
            index = f.index + "--"
            status, _ = f.client.request("GET", f"/{index}*/_mapping", ok=(200,),
                                         params={"allow_no_indices": "true"})
            assert status == 200 and not _
        finally:
            f.close()
    assert delete_crawl(conf, DEFAULT_CRAWL) == 1 and list_crawls(conf) == []


def test_owler_status_reports_each_crawl_and_refuses_one_that_is_not_there(conf):
    """``owler status`` (crawl_status): the configured crawl's figures, and every crawl of the
    frontier under ``crawls``; a crawl that is not there is an error that creates nothing."""
    now = time.time()
    with open_frontier(conf) as d, open_frontier(conf, crawl="news") as n:
        d.apply_updates([StatusUpdate("http://a.example/", Status.FETCHED, {}, now + 86400,
                                      "a.example")])
        n.apply_updates([StatusUpdate("http://a.example/", Status.DISCOVERED, {}, now - 60,
                                      "a.example"),
                         StatusUpdate("http://b.example/", Status.ERROR, {}, None, "b.example")])
    doc = crawl_status({**conf, "frontier.crawl.id": "news"}, now=now, with_metrics=False)
    assert doc["crawl"] == "news" and (doc["DISCOVERED"], doc["ERROR"], doc["total"]) == (1, 1, 2)
    assert doc["due_now"] == 1 and doc["queues"] == 2
    assert list(doc["crawls"]) == ["news", DEFAULT_CRAWL]
    assert {k: doc["crawls"][DEFAULT_CRAWL][k] for k in ("FETCHED", "total", "due_now", "queues")} \
        == {"FETCHED": 1, "total": 1, "due_now": 0, "queues": 1}
    assert doc["crawls"]["news"]["total"] == 2
    with pytest.raises(StatusError) as err:
        crawl_status({**conf, "frontier.crawl.id": "nwes"}, with_metrics=False)
    assert err.value.exit_code == 1 and "'nwes'" in str(err.value)
    if conf["frontier.backend"] == "opensearch":
        assert str(err.value) == ("no crawl 'nwes' in the OpenSearch frontier; crawls: "
                                  "DEFAULT, news")
    assert list(crawl_spaces(conf)) == [DEFAULT_CRAWL, "news"]  # nothing made for the typo


def test_iter_urls_reads_a_crawl_to_its_end_in_order(conf):
    n = 10_350  # past OpenSearch's result window (10,000)
    with open_frontier(conf, crawl="deep") as f:
        updates = [StatusUpdate(f"http://h{i % 7}.example/{i:05d}", Status.DISCOVERED, {},
                                float(i % 13), f"h{i % 7}.example") for i in range(n)]
        for i in range(0, n, 2000):
            assert f.apply_updates(updates[i:i + 2000]) == []
        f.refresh()
        expected = sorted(((u.key, u.next_fetch_date, u.url) for u in updates))
        pages = list(f.iter_urls(None, page=1000))
        assert [len(p) for p in pages] == [1000] * 10 + [350]
        got = [(r.key, r.next_fetch_date, r.url) for p in pages for r in p]
        assert got == expected
        # from deep in: beyond the window, and one queue only
        deep = [r.url for p in f.iter_urls(None, start=10_200, page=100) for r in p]
        assert deep == [u for _, _, u in expected[10_200:]]
        one = [r.url for p in f.iter_urls("h3.example", start=5) for r in p]
        assert one == [u for k, _, u in expected if k == "h3.example"][5:]
        assert [r.url for r in f.list_urls(None, 9_990, 20)] == [u for _, _, u in
                                                                  expected[9_990:10_010]]
