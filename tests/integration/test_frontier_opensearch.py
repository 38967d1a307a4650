"""OpenSearchFrontier against a real OpenSearch node: the status index, bulk semantics, the spout
query, queue leases between tasks, statistics and bad input."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

import pytest

from owler.constants import Status
from owler.frontier import FrontierError, StatusUpdate, open_frontier

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def conf(opensearch):
    return {"frontier.backend": "opensearch", "services.opensearch.port": opensearch.port,
            "opensearch.status.index.name": f"st-{uuid.uuid4().hex[:10]}",
            "fetcher.server.delay": 1.0, "frontier.lease.ttl": 60}


def upd(url, status, nfd, key, md=None):
    return StatusUpdate(url, Status(status), md or {}, nfd, key)


def lease(opensearch, conf, key) -> dict:
    """A queue's lease document as the index holds it (``until`` in epoch seconds)."""
    index = conf["opensearch.status.index.name"]
    status, doc = opensearch.request("GET", f"/{index}_leases/_doc/{key}")
    assert status == 200, doc
    return {**doc["_source"], "until": doc["_source"]["until"] / 1000}


# The frontier is told the time (the spout passes its clock to due() and release()). The lease
# tests below ask it at instants around the ends of leases and pauses as the leases index records
# them: the same as sleeping until then and asking, without a window a loaded machine could miss.
BEFORE, AFTER = -0.5, 0.01  # seconds before and after such an end


def test_index_is_created_with_the_stormcrawler_mapping_and_documents(conf, opensearch):
    now = time.time()
    with open_frontier(conf) as f:
        assert f.inject([("http://a.example/x", {"depth": ["0"], "url.path": ["http://s/"]})],
                        now) == 1
        before = time.time()
        f.apply_updates([upd("http://a.example/x", "FETCHED", None, "a.example",
                             {"fetch.statusCode": ["200"]})])
        after = time.time()
        f.refresh()
        index = conf["opensearch.status.index.name"]
        _, mapping = opensearch.request("GET", f"/{index}/_mapping")
        props = mapping[index]["mappings"]["properties"]
        assert {props[k]["type"] for k in ("url", "key", "status")} == {"keyword"}
        assert props["nextFetchDate"]["type"] == "date"
        import hashlib
        doc_id = hashlib.sha256(b"http://a.example/x").hexdigest()
        _, doc = opensearch.request("GET", f"/{index}/_doc/{doc_id}")
        src = doc["_source"]
        # StormCrawler's document: dots in metadata names as %2E; no nextFetchDate = never again;
        # plus the time of the last write (epoch millis)
        assert int(before * 1000) <= src.pop("updated") <= after * 1000
        assert src == {"url": "http://a.example/x", "status": "FETCHED", "key": "a.example",
                       "metadata": {"fetch%2EstatusCode": ["200"]}}
        rec = f.get("http://a.example/x")
        assert rec.status == Status.FETCHED and rec.next_fetch_date is None
        assert rec.metadata == {"fetch.statusCode": ["200"]}


def test_discovered_is_create_only_and_other_statuses_overwrite(conf):
    now = time.time()
    with open_frontier(conf) as f:
        assert f.apply_updates([upd("http://a.example/", "FETCHED", now + 3600, "a.example")]) == []
        # a DISCOVERED of a known URL is a 409 conflict: success, nothing changes
        assert f.apply_updates([upd("http://a.example/", "DISCOVERED", now, "a.example"),
                                upd("http://b.example/", "DISCOVERED", now, "b.example")]) == []
        assert f.get("http://a.example/").status == Status.FETCHED
        assert f.inject([("http://a.example/", {}), ("http://c.example/", {})], now) == 1
        f.refresh()
        assert f.counts()["DISCOVERED"] == 2 and f.counts()["FETCHED"] == 1
        assert f.due_count(now + 1) == 2
        assert f.queue_count() == 3 and f.queue_count(now + 1) == 2
        assert dict(f.top_hosts(10)) == {"a.example": 1, "b.example": 1, "c.example": 1}


@pytest.mark.parametrize("routing", [False, True])
def test_latest_values_walk_a_queue_from_its_latest_next_fetch_dates(conf, routing):
    """What seeds a parser's near-duplicate memory (owler.parse.simhash.FrontierSeeds), as the
    SQLite frontier gives it (tests/unit/test_frontier_sqlite.py): the values of the queue's URLs
    with the latest dates, never-again first; with the key as the routing value too."""
    now = time.time()
    with open_frontier({**conf, "opensearch.status.routing": routing}) as f:
        f.apply_updates([
            upd("http://a.example/1", "FETCHED", now + 100, "a.example", {"simhash": ["01"]}),
            upd("http://a.example/2", "FETCHED", now + 300, "a.example",
                {"simhash": ["02", "x"], "parse.title": ["two"]}),  # (doc values: the smallest)
            upd("http://a.example/3", "REDIRECTION", now + 200, "a.example"),  # no SimHash
            upd("http://a.example/4", "FETCHED", None, "a.example", {"simhash": ["04"]}),
            upd("http://a.example/5", "DISCOVERED", now, "a.example"),
            upd("http://b.example/1", "FETCHED", now + 900, "b.example", {"simhash": ["b1"]})])
        f.refresh()
        assert f.latest_values("a.example", "simhash", 10) == [
            ("http://a.example/4", "04"), ("http://a.example/2", "02"),
            ("http://a.example/1", "01")]
        # n is the URLs looked at: the redirect takes a place, so fewer values come back
        assert f.latest_values("a.example", "simhash", 3) == [
            ("http://a.example/4", "04"), ("http://a.example/2", "02")]
        assert f.latest_values("a.example", "parse.title", 10) == [("http://a.example/2", "two")]
        assert f.latest_values("c.example", "simhash", 10) == []


def test_dates_are_compared_as_epoch_millis_whatever_their_size(conf, opensearch):
    """A clock of a few seconds after 1970 (tests, replays) is not read as a year by the date
    field's first format (10,000 ms would be the year 10000, every URL due before it)."""
    with open_frontier(conf) as f:
        f.apply_updates([upd("http://a.example/", "FETCHED", 1e10, "a.example")])
        f.refresh()
        assert (f.due_count(10.0), f.due_count(1e10 - 1), f.due_count(1e10)) == (0, 0, 1)


def test_a_status_the_index_refuses_is_written_as_an_error_and_alone(conf, opensearch):
    now = time.time()
    with open_frontier(conf) as f:
        f.apply_updates([upd("http://a.example/1", "FETCHED", now, "a.example", {"x": ["1"]})])
        # metadata.x is a keyword now: an object there is refused, for this item only; written
        # again as ERROR it is durable, so its tuple is acked rather than replayed without end
        bad = StatusUpdate("http://a.example/2", Status.FETCHED, {"x": [{"y": "z"}]}, now, "a.example")
        before = time.time()
        failed = f.apply_updates([upd("http://a.example/3", "FETCHED", now, "a.example"), bad,
                                  upd("http://a.example/4", "DISCOVERED", now, "a.example")])
        after = time.time()
        assert failed == []
        assert f.get("http://a.example/3").status == Status.FETCHED
        assert f.get("http://a.example/4").status == Status.DISCOVERED
        rec = f.get("http://a.example/2")
        assert rec.status == Status.ERROR and rec.metadata["error.cause"] == ["status.refused"]
        assert "status FETCHED" in rec.metadata["error.message"][0]
        assert "mapper_parsing_exception" in rec.metadata["error.message"][0]
        # due when the scheduler says an ERROR is (fetchInterval.error: 31 days) after it was
        # refused, not now (the index keeps the date to the second)
        assert int(before) + 44640 * 60 <= rec.next_fetch_date <= after + 44640 * 60, \
            rec.next_fetch_date
        # a DISCOVERED refused for a URL already known leaves the URL as it was
        known = StatusUpdate("http://a.example/3", Status.DISCOVERED, {"x": [{"y": "z"}]}, now,
                             "a.example")
        assert f.apply_updates([known]) == []
        assert f.get("http://a.example/3").status == Status.FETCHED
        # a closed index answers 400 too: that status is failed (Storm replays it), not an error
        index = conf["opensearch.status.index.name"]
        opensearch.request("POST", f"/{index}/_close")
        try:
            assert f.apply_updates([upd("http://a.example/5", "FETCHED", now, "a.example")]) == [0]
        finally:
            opensearch.request("POST", f"/{index}/_open")


def test_a_date_like_metadata_value_does_not_make_its_field_a_date(conf, opensearch):
    """Real archives carry WARC-Dates no date parser takes (one of warcio's test files has year
    5088968). With OpenSearch's date detection on, the first date-like value made the field a date
    and every later status with such a value was refused, and replayed by Storm without end."""
    now = time.time()
    odd = [upd("http://a.example/2", "FETCHED", now, "a.example",
               {"warc.record.date": ["5088968-11-06T12:31:23Z"], "last-modified": ["yesterday"]})]
    with open_frontier(conf) as f:  # a new index
        assert f.apply_updates([upd("http://a.example/1", "FETCHED", now, "a.example",
                                    {"warc.record.date": ["2014-08-02T09:52:13Z"],
                                     "last-modified": ["2014-08-01"]})]) == []
        assert f.apply_updates(odd) == []
        assert f.get("http://a.example/2").metadata["warc.record.date"] == ["5088968-11-06T12:31:23Z"]
    # an index made before, without the setting: opening it turns date detection off
    old = conf["opensearch.status.index.name"] + "-old"
    body = json.loads((ROOT / "resources" / "opensearch" / "status.json").read_text())
    del body["mappings"]["date_detection"], body["_comment"]
    opensearch.request("PUT", f"/{old}", body)
    with open_frontier({**conf, "opensearch.status.index.name": old}) as f:
        _, mapping = opensearch.request("GET", f"/{old}/_mapping")
        assert mapping[old]["mappings"]["date_detection"] is False
        assert f.apply_updates([upd("http://a.example/1", "FETCHED", now, "a.example",
                                    {"warc.record.date": ["2014-08-02T09:52:13Z"]})]) == []
        assert f.apply_updates(odd) == []


def test_due_round_robin_by_queue_with_interest_tags(conf):
    now = time.time()
    conf = {**conf, "frontier.tags": {"isSitemap=true": "Sitemap"}}
    with open_frontier(conf, owner="t1") as f:
        f.apply_updates([upd(f"http://a.example/{i}", "DISCOVERED", now - 100 + i, "a.example")
                         for i in range(5)]
                        + [upd(f"http://b.example/{i}", "DISCOVERED", now - 50 + i, "b.example")
                           for i in range(3)]
                        + [upd("http://c.example/sitemap.xml", "DISCOVERED", now - 10, "c.example",
                               {"isSitemap": ["true"]}),
                           upd("http://d.example/later", "DISCOVERED", now + 3600, "d.example")])
        f.refresh()
        rows = f.due(now, 10, 2)
        assert [u for u, _, _ in rows] == [
            "http://a.example/0", "http://b.example/0", "http://c.example/sitemap.xml",
            "http://a.example/1", "http://b.example/1"]
        assert rows[2][1] == {"isSitemap": ["true"]}
        f.release("c.example", now, served=False)  # given back unserved: free at once
    # a spout interested in sitemaps only
    with open_frontier({**conf, "frontier.interest.tags": ["Sitemap"]}, owner="t2") as g:
        assert [u for u, _, _ in g.due(now, 10, 2)] == ["http://c.example/sitemap.xml"]
    with open_frontier({**conf, "frontier.interest.exclude.tags": ["Sitemap"]}, owner="t3") as h:
        assert h.due(now, 10, 2) == []  # a and b are leased by t1, c is excluded


def test_queue_leases_split_queues_and_keep_the_delay(conf, opensearch):
    now = time.time()
    with open_frontier(conf, owner="t1") as f, open_frontier(conf, owner="t2") as g:
        f.apply_updates([upd(f"http://{h}.example/{i}", "DISCOVERED", now - 10, f"{h}.example")
                         for h in "ab" for i in range(3)])
        f.refresh()
        first = f.due(now, 1, 10)  # t1 takes one queue
        assert {k for _, _, k in first} == {"a.example"} and len(first) == 3
        second = g.due(now, 10, 10)  # t2 gets only the other one
        assert {k for _, _, k in second} == {"b.example"}
        assert f.due(now, 10, 10) == []  # t1's round on a is going on, b is t2's
        # round done: a pauses max(fetcher.server.delay, refresh interval 1 s + 1 s)
        released = time.time()
        f.release("a.example", released)
        assert f.min_hold == 2.0
        ends = released + 2.0
        pause = lease(opensearch, conf, "a.example")
        assert (pause["owner"], pause["active"]) == ("t1", False)
        assert pause["until"] == pytest.approx(ends, abs=0.001)
        assert g.due(released, 10, 10) == []
        assert g.due(ends + BEFORE, 10, 10) == []
        assert {k for _, _, k in g.due(ends + AFTER, 10, 10)} == {"a.example"}


def test_a_queue_taken_over_is_read_after_the_previous_rounds_writes(conf, opensearch):
    """A task lets go of a queue once its round's statuses are durable and the refresh interval
    has passed, but a loaded node may not have refreshed yet (CI saw a second crawler fetch the
    last two URLs of the first one's round again). The task taking the queue over refreshes and
    searches it again. Here the index never refreshes by itself."""
    c = {**conf, "opensearch.status.refresh.interval": "-1"}
    index = c["opensearch.status.index.name"]
    now = time.time()
    with open_frontier(c, owner="t1") as f, open_frontier(c, owner="t2") as g:
        f.apply_updates([upd(f"http://a.example/{i}", "DISCOVERED", now - 10, "a.example")
                         for i in range(2)])
        f.refresh()
        assert len(f.due(now, 1, 10)) == 2
        f.apply_updates([upd(f"http://a.example/{i}", "FETCH_ERROR", now + 7200, "a.example")
                         for i in range(2)])
        f.release("a.example", now)
        # not searchable yet: a search still finds both URLs due
        _, data = opensearch.request("POST", f"/{index}/_count", {"query": {"term": {
            "status": "DISCOVERED"}}})
        assert data["count"] == 2
        later = now + f.min_hold + 1
        assert g.due(later, 10, 10) == []
        assert "a.example" in g.leases  # taken, with nothing to fetch


def test_a_blocked_queue_is_served_by_no_task_before_its_block_ends(conf, opensearch):
    """A throttling server's hold (StatusUpdate.block_until) reaches every task, outlives the
    round of the task that had the queue, and is never shortened."""
    now = time.time()
    with open_frontier(conf, owner="t1") as f, open_frontier(conf, owner="t2") as g:
        f.apply_updates([upd(f"http://a.example/{i}", "DISCOVERED", now - 20, "a.example")
                         for i in range(3)]
                        + [upd(f"http://b.example/{i}", "DISCOVERED", now - 10, "b.example")
                           for i in range(3)])
        f.refresh()
        assert {k for _, _, k in f.due(now, 1, 10)} == {"a.example"}  # t1's round on a
        until = time.time() + 600
        blocked = StatusUpdate("http://a.example/0", Status.FETCH_ERROR, {}, until,
                               "a.example", block_until=until)
        assert g.apply_updates([blocked]) == []
        assert g.apply_updates([StatusUpdate("http://a.example/0", Status.FETCH_ERROR, {},
                                             until, "a.example", block_until=until - 300)]) == []
        released = time.time()
        f.release("a.example", released)  # the round ends: the block stays
        g.refresh()
        block = lease(opensearch, conf, "a.example")
        assert (block["owner"], block["active"]) == ("_blocked_", False)
        assert block["until"] == pytest.approx(until, abs=0.001)  # the shorter block changed nothing
        # the pause after a round (2 s) is over, the block is not: no task serves the queue
        for task in (f, g):
            assert "a.example" not in {k for _, _, k in task.due(released + 2 + AFTER, 10, 10)}
            assert "a.example" not in {k for _, _, k in task.due(until + BEFORE, 10, 10)}
        assert "a.example" in {k for _, _, k in g.due(until + AFTER, 10, 10)}


def test_a_task_lets_the_others_have_the_queue_it_released_first(conf, opensearch):
    conf = {**conf, "fetcher.server.delay": 0.5, "spout.min.delay.queries": 1000}
    now = time.time()
    with open_frontier(conf, owner="alone") as f:
        f.apply_updates([upd(f"http://a.example/{i}", "DISCOVERED", now - 10, "a.example")
                         for i in range(3)])
        f.refresh()
        assert f.due(now, 10, 1) and not f.peers
        f.release("a.example", now)
        pause = now + f.min_hold
        assert lease(opensearch, conf, "a.example")["until"] == pytest.approx(pause, abs=0.001)
        assert f.due(pause + BEFORE, 10, 1) == [], "taken back within the pause"
        assert f.due(pause + AFTER, 10, 1), "alone, a task takes its queue back after the pause"
        given_back = pause + AFTER
        f.release("a.example", given_back, served=False)
    # the closed task left: a newcomer does not count it as a peer
    with open_frontier(conf, owner="t1") as f, open_frontier(conf, owner="t2") as g:
        now = max(time.time(), given_back)  # the instants go on from the last one
        assert f.due(now, 10, 1) and not f.peers
        assert g.due(now, 10, 1) == [] and g.peers  # t2 sees t1 (and announces itself)
        f.next_beat = 0.0
        f.release("a.example", now)
        pause = now + f.min_hold
        assert lease(opensearch, conf, "a.example")["until"] == pytest.approx(pause, abs=0.001)
        assert f.due(pause + AFTER, 10, 1) == [] and f.peers  # t2's turn first
        assert f.handover == 1.5
        assert f.due(pause + f.handover + BEFORE, 10, 1) == []
        # t2 did not take it (busy): t1 takes it back after the handover
        back = pause + f.handover + AFTER
        assert f.due(back, 10, 1)
        f.release("a.example", back)
        pause = back + f.min_hold
        assert lease(opensearch, conf, "a.example")["until"] == pytest.approx(pause, abs=0.001)
        assert g.due(pause + BEFORE, 10, 1) == []
        assert g.due(pause + AFTER, 10, 1)  # and t2 gets it as soon as the pause ends


def test_lease_of_a_dead_task_expires_and_its_owner_takes_it_back(conf, opensearch):
    conf = {**conf, "frontier.lease.ttl": 2}
    now = time.time()
    with open_frontier(conf, owner="dead") as f:
        f.apply_updates([upd("http://a.example/", "DISCOVERED", now - 10, "a.example")])
        f.refresh()
        assert f.due(now, 10, 10)
    # the same task restarted (same owner): its unreleased lease is its own
    with open_frontier(conf, owner="dead") as again:
        taken = time.time()
        assert again.due(taken, 10, 10)
    expires = taken + 2  # frontier.lease.ttl
    held = lease(opensearch, conf, "a.example")
    assert (held["owner"], held["active"]) == ("dead", True)
    assert held["until"] == pytest.approx(expires, abs=0.001)
    with open_frontier(conf, owner="other") as g:
        assert g.due(taken, 10, 10) == []
        assert g.due(expires + BEFORE, 10, 10) == []
        assert g.due(expires + AFTER, 10, 10)


def test_documents_without_url_are_skipped(conf, opensearch):
    now = time.time()
    index = conf["opensearch.status.index.name"]
    with open_frontier(conf, owner="t1") as f:
        opensearch.request("PUT", f"/{index}/_doc/foreign?refresh=true",
                           {"key": "a.example", "status": "DISCOVERED",
                            "nextFetchDate": "2020-01-01T00:00:00Z"})
        f.apply_updates([upd("http://a.example/ok", "DISCOVERED", now - 10, "a.example")])
        f.refresh()
        assert [u for u, _, _ in f.due(now, 10, 10)] == ["http://a.example/ok"]


def test_foreign_index_and_unreachable_node_are_clear_errors(conf, opensearch):
    opensearch.request("PUT", "/foreign-idx", {"mappings": {"properties": {"url": {"type": "text"}}}})
    with pytest.raises(FrontierError, match="is not a status index: url is text"):
        open_frontier({**conf, "opensearch.status.index.name": "foreign-idx"})
    with pytest.raises(FrontierError, match="cannot reach OpenSearch at http://127.0.0.1:9"):
        open_frontier({**conf, "opensearch.addresses": ["127.0.0.1:9"], "opensearch.max.retries": 0})


def test_sitemap_refresh_of_known_urls(conf):
    """A DISCOVERED from a sitemap updates a known URL as the SQLite frontier does: status kept,
    sitemap facts merged, due again on a later lastmod, a listed seed due, an unlisted seed moved
    to its next look-up; untouched otherwise (noop)."""

    c = {**conf, "frontier.tags": {"isSitemap=true": "Sitemap",
                                   "isDiscoveredOnSitemap=true": "OnSitemap"}}
    f = open_frontier(c, owner="t")
    now = time.time()
    later = now + 86400
    page, seed, lone = "http://sm.example/p", "http://sm.example/", "http://other.example/"
    f.apply_updates([StatusUpdate(page, Status.FETCHED, {"sitemap.lastModified": ["2020-01-01T00:00:00Z"],
                                                         "isDiscoveredOnSitemap": ["true"]},
                                  later, "sm.example"),
                     StatusUpdate(seed, Status.DISCOVERED, {}, later, "sm.example"),
                     StatusUpdate(lone, Status.DISCOVERED, {}, now - 10, "other.example")])
    listing = {"isDiscoveredOnSitemap": ["true"], "sitemap.lastModified": ["2030-01-01T00:00:00Z"],
               "IMAGE.loc": ["http://sm.example/i.jpg"]}
    assert f.apply_updates([
        StatusUpdate(page, Status.DISCOVERED, listing, now - 5, "sm.example"),  # changed: due
        StatusUpdate(seed, Status.DISCOVERED, {"isDiscoveredOnSitemap": ["true"]}, now - 5,
                     "sm.example"),  # a seed a sitemap lists: due
        StatusUpdate(lone, Status.DISCOVERED, {"sitemap.seeded": ["2026-01-01T00:00:00Z"]},
                     later, "other.example"),  # on no sitemap: next look-up
        StatusUpdate("http://sm.example/new", Status.DISCOVERED, listing, now - 5, "sm.example"),
    ]) == []
    got = {u: f.get(u) for u in (page, seed, lone, "http://sm.example/new")}
    assert got[page].status == Status.FETCHED and got[page].next_fetch_date <= now
    assert got[page].metadata["sitemap.lastModified"] == ["2030-01-01T00:00:00Z"]
    assert got[page].metadata["IMAGE.loc"] == ["http://sm.example/i.jpg"]
    assert got[seed].status == Status.DISCOVERED and got[seed].next_fetch_date <= now
    assert got[lone].next_fetch_date == pytest.approx(later, abs=2)
    assert got["http://sm.example/new"].status == Status.DISCOVERED
    f.refresh()
    tagged = {u for u, _, _ in f.due(now + 1, 10, 10)}
    assert {page, seed} <= tagged
    # the same listing again changes nothing (a noop)
    assert f.apply_updates([StatusUpdate(page, Status.DISCOVERED, listing, now - 5, "sm.example")]) == []
    f.close()


def test_charge_shares_one_allowance_between_tasks_exactly(conf, opensearch):
    # the sitemap host budgets: tasks of several nodes charge the same counter at once
    from concurrent.futures import ThreadPoolExecutor

    tasks = [open_frontier(conf) for _ in range(4)]
    try:
        now = time.time()
        with ThreadPoolExecutor(8) as pool:
            granted = list(pool.map(
                lambda i: tasks[i % 4].charge("urls:a.example", 3, 100, now, 3600), range(48)))
        assert sum(granted) == 100 and sorted(set(granted)) == [0, 1, 3]
        assert tasks[0].charge("urls:a.example", 5, 100, now + 3600, 3600) == 5  # a new window
        assert tasks[1].charge("urls:b.example", 5, -1, now, 3600) == 5
        _, doc = opensearch.request("GET", f"/{conf['opensearch.status.index.name']}_budgets/"
                                           "_doc/urls:a.example")
        assert doc["_source"]["used"] == 5
    finally:
        for t in tasks:
            t.close()


def test_wildcard_tags_priorities_and_the_parse_filters_mapping(conf, opensearch):
    """Issue 18 on the OpenSearch frontier: ``lang=*`` / ``risk=*`` rules give every tag, a spout
    serves one language minus adult pages, a tag's priority moves a URL in its queue, a sitemap
    refresh keeps the wildcard tags, and the parse filters' counts are numbers in the index."""
    c = {**conf, "frontier.tags": {"lang=*": "lang:*", "risk=*": "risk:*",
                                   "isDiscoveredOnSitemap=true": "OnSitemap"},
         "frontier.tags.priority": {"lang:de": 3600}}
    now = time.time()
    with open_frontier(c, owner="w") as f:
        f.apply_updates([
            upd("http://a.example/de", "FETCHED", now - 10, "a.example",
                {"lang": ["de"], "risk": ["benign"], "parse.text.length": ["5300"],
                 "lang.confidence": ["0.970"]}),
            upd("http://a.example/adult", "DISCOVERED", now - 20, "a.example",
                {"lang": ["de"], "risk": ["adult"]}),
            upd("http://b.example/fr", "DISCOVERED", now - 30, "b.example",
                {"lang": ["fr"], "parse.text.length": ["120"]}),
            upd("http://c.example/", "DISCOVERED", now - 40, "c.example")])
        f.refresh()
        rec = f.get("http://a.example/de")
        assert rec.next_fetch_date == pytest.approx(now - 10 - 3600, abs=1)  # whole seconds
        index = conf["opensearch.status.index.name"]
        _, hits = opensearch.request("POST", f"/{index}/_search", {
            "query": {"range": {"metadata.parse%2Etext%2Elength": {"gte": 1000}}}})
        assert [h["_source"]["url"] for h in hits["hits"]["hits"]] == ["http://a.example/de"]
        _, mapping = opensearch.request("GET", f"/{index}/_mapping")
        md = mapping[index]["mappings"]["properties"]["metadata"]["properties"]
        assert md["parse%2Etext%2Elength"]["type"] == "long"
        assert md["lang%2Econfidence"]["type"] == "float" and md["lang"]["type"] == "keyword"
        _, doc = opensearch.request("POST", f"/{index}/_search", {
            "query": {"term": {"url": "http://a.example/adult"}}})
        assert doc["hits"]["hits"][0]["_source"]["tags"] == ["lang:de", "risk:adult"]
        # a sitemap listing of the adult page keeps its wildcard tags and adds OnSitemap
        f.apply_updates([upd("http://a.example/adult", "DISCOVERED", now - 20, "a.example",
                             {"isDiscoveredOnSitemap": ["true"]})])
        f.refresh()
        _, doc = opensearch.request("POST", f"/{index}/_search", {
            "query": {"term": {"url": "http://a.example/adult"}}})
        assert sorted(doc["hits"]["hits"][0]["_source"]["tags"]) == [
            "OnSitemap", "lang:de", "risk:adult"]
    german = {**c, "frontier.interest.tags": ["lang:de"],
              "frontier.interest.exclude.tags": ["risk:adult"]}
    with open_frontier(german, owner="g") as g:
        assert [u for u, _, _ in g.due(now, 10, 10)] == ["http://a.example/de"]


def test_status_updater_acks_a_batch_once_it_is_in_the_index_with_the_next_on_its_way(
        conf, opensearch, tmp_path):
    """The bolt with one bulk in flight (opensearch.status.concurrentRequests, default 1): every
    tuple acked is in the index at that moment; a batch the node refuses fails its tuples, and
    the batches after it go through."""
    from owler.conf import load_conf
    from tests.component.multilang import ShellComponent

    full = load_conf()
    full.update(conf)
    full.update({"owler.run.dir": str(tmp_path / "run"), "opensearch.status.bulkActions": 3,
                 "opensearch.status.flushInterval": "0.2s"})
    index = conf["opensearch.status.index.name"]
    bolt = ShellComponent("bolts.status_updater.StatusUpdaterBolt", full, tmp_path, "status")

    def crawl(tids, status="FETCHED", urls=None):
        for tid, url in zip(tids, urls or tids):
            bolt.process([f"http://p.example/{url}", {}, status], tid=tid, stream="status")
        done: dict[str, str] = {}

        def seen(m):
            if m.get("command") in ("ack", "fail") and m.get("id") in tids:
                done[m["id"]] = m["command"]
                if m["command"] == "ack":  # durable when acked: a GET by id reads it at once
                    url = dict(zip(tids, urls or tids))[m["id"]]
                    doc_id = hashlib.sha256(f"http://p.example/{url}".encode()).hexdigest()
                    status, _ = opensearch.request("GET", f"/{index}/_doc/{doc_id}")
                    assert status == 200, m["id"]
            return len(done) == len(tids)

        bolt.read_until(seen, timeout=30, tick_every=0.3)
        return done

    try:
        assert crawl([f"s{i}" for i in range(10)]) == {f"s{i}": "ack" for i in range(10)}
        # DISCOVERED of URLs just written: nothing to write (the cache), acked all the same
        assert crawl(["d0", "d1", "d2"], "DISCOVERED", ["s0", "s1", "s2"]) == {
            "d0": "ack", "d1": "ack", "d2": "ack"}
        opensearch.request("POST", f"/{index}/_close")
        assert crawl(["c0", "c1", "c2"]) == {"c0": "fail", "c1": "fail", "c2": "fail"}
        opensearch.request("POST", f"/{index}/_open")
        opensearch.request("GET", f"/_cluster/health/{index}?wait_for_status=yellow&timeout=30s")
        assert crawl([f"t{i}" for i in range(4)]) == {f"t{i}": "ack" for i in range(4)}
    finally:
        assert bolt.close() == 0
    counters = json.loads((tmp_path / "run" / "status-1.json").read_text())["counters"]
    assert counters["committed"] == 14 and counters["update_failed"] == 3


# --- the queues index (issue 45): the spout picks queues there, not from every due URL ---------
def queue_doc(opensearch, conf, key) -> dict | None:
    """A queue's document in the queues index (``due`` and ``w`` in epoch seconds), or None."""
    index = conf["opensearch.status.index.name"]
    status, doc = opensearch.request("GET", f"/{index}_queues/_doc/{key}")
    if status == 404:
        return None
    return {k: v / 1000 for k, v in doc["_source"].items()}


@pytest.mark.parametrize("path", ["queues index", "due URLs"])
def test_queues_paused_after_their_round_do_not_starve_the_others(conf, path):
    """OWLer pauses a queue five minutes after its round (frontier.queue.round.delay). The
    queues with the oldest URLs, paused, must not fill every answer: each query gives queues
    not served yet until every queue had its round. Both ways of picking queues: the queues
    index, and the aggregation of due URLs that an interest uses."""
    c = {**conf, "frontier.queue.round.delay": 300}
    if path == "due URLs":  # (an interest the queues' dates do not know: every URL matches)
        c["frontier.interest.exclude.tags"] = ["NoSuchTag"]
    now = time.time()
    with open_frontier(c, owner="t1") as f:
        f.apply_updates([upd(f"http://q{q:02d}.example/{i}", "DISCOVERED", now - 1000 + q,
                             f"q{q:02d}.example") for q in range(60) for i in range(5)])
        f.refresh()
        served = []
        for n in range(6):
            rows = f.due(now + n, 10, 2)
            keys = sorted({k for _, _, k in rows})
            assert len(rows) == 20 and len(keys) == 10, (n, keys)
            served += keys
            for k in keys:
                f.release(k, now + n, defer=True)
        # the oldest first, each queue once
        assert served == [f"q{q:02d}.example" for q in range(60)]
        assert f.due(now + 6, 10, 2) == []  # every queue paused for its round delay
        # (the rounds began when due() handed their URLs out: a little after now + n)
        f.refresh()
        assert {k for _, _, k in f.due(now + 330, 10, 2)} == {
            f"q{q:02d}.example" for q in range(10)}


def test_the_queues_index_follows_the_status_writes(conf, opensearch):
    """A queue's date: lowered by every URL written (a known URL sent as DISCOVERED again is
    not written: no change), raised to the end of its pause when its round ends, and set to its
    earliest URL's date once a spout found nothing due in it (the document goes when no URL
    of it will ever be fetched again)."""
    c = {**conf, "fetcher.server.delay": 0.5}
    now = time.time()
    with open_frontier(c, owner="t1") as f:
        f.apply_updates([upd("http://a.example/1", "DISCOVERED", now - 50, "a.example"),
                         upd("http://a.example/2", "DISCOVERED", now - 20, "a.example"),
                         upd("http://b.example/1", "FETCHED", now + 3600, "b.example"),
                         upd("http://n.example/1", "ERROR", None, "n.example")])
        assert queue_doc(opensearch, c, "a.example")["due"] == int(now - 50)  # whole seconds
        assert queue_doc(opensearch, c, "b.example")["due"] == int(now + 3600)
        assert queue_doc(opensearch, c, "n.example") is None  # nothing to fetch, ever
        written = queue_doc(opensearch, c, "a.example")["w"]
        assert written == pytest.approx(time.time(), abs=5)
        # known: not written, the queue keeps its date
        f.apply_updates([upd("http://b.example/1", "DISCOVERED", now - 100, "b.example")])
        assert queue_doc(opensearch, c, "b.example")["due"] == int(now + 3600)
        f.refresh()
        assert {k for _, _, k in f.due(now, 10, 10)} == {"a.example"}
        # the round: both URLs fetched (the status updater's results of a round lower nothing),
        # then the queue released (its pause: 2 s)
        f.round_results = True
        f.apply_updates([upd(f"http://a.example/{i}", "FETCHED", now + 7200, "a.example")
                         for i in (1, 2)])
        assert queue_doc(opensearch, c, "a.example")["w"] == written
        released = time.time()
        f.release("a.example", released)
        assert queue_doc(opensearch, c, "a.example")["due"] == pytest.approx(released + 2,
                                                                             abs=0.002)
        # the spout picks it, finds nothing due: dated by its earliest URL (once no URL of it
        # was written for the refresh interval + 2 s, w being kept to the second)
        f.refresh()
        later = max(released + 2.01, written + 3.01)
        assert f.due(later, 10, 10) == []
        assert queue_doc(opensearch, c, "a.example")["due"] == int(now + 7200)
        assert f.due(later, 10, 10) == []  # (not picked again)
        f.release("a.example", later, served=False)  # (as the spout gives it back)
        # the URLs of a queue dropped (ERROR, never again): its document goes
        f.apply_updates([upd("http://b.example/1", "ERROR", None, "b.example")])
        f.refresh()
        assert f.due(now + 3601, 10, 10) == []
        f.release("b.example", now + 3601, served=False)
        assert queue_doc(opensearch, c, "b.example") is None
        # a new URL brings it back at once
        f.apply_updates([upd("http://b.example/2", "DISCOVERED", now, "b.example")])
        f.refresh()
        assert [u for u, _, _ in f.due(now + 3602, 10, 10)] == ["http://b.example/2"]
        # a queue with a URL written less than the refresh interval + 2 s ago is not
        # dated again (that URL may not be searchable yet), and given back it keeps its date
        f.apply_updates([upd("http://c.example/1", "DISCOVERED", now - 5, "c.example")])
        f.apply_updates([upd("http://c.example/1", "FETCHED", now + 600, "c.example"),
                         upd("http://c.example/2", "DISCOVERED", now + 30, "c.example")])
        f.refresh()
        t = queue_doc(opensearch, c, "c.example")["w"]
        assert f.due(t + 2.9, 10, 10) == []
        f.release("c.example", t + 2.9, served=False)
        assert queue_doc(opensearch, c, "c.example")["due"] == int(now - 5)
        assert f.due(t + 3.1, 10, 10) == []
        assert queue_doc(opensearch, c, "c.example")["due"] == int(now + 30)


def test_an_index_of_an_older_version_gets_its_queues_index(conf, opensearch, caplog):
    """A status index written before the queues index existed (a user's crawl of yesterday)
    is read as it is: the first frontier to open it builds the queues index from it. While
    another process builds it, a frontier picks queues from the due URLs; a build left
    unfinished for 15 minutes is done again."""
    index = conf["opensearch.status.index.name"]
    now = time.time()
    with open_frontier(conf, owner="old") as f:
        f.apply_updates([upd(f"http://h{h}.example/{i}", "DISCOVERED", now - 100 * h - i,
                             f"h{h}.example") for h in range(30) for i in range(3)]
                        + [upd("http://z.example/", "FETCHED", now + 600, "z.example"),
                           upd("http://x.example/", "ERROR", None, "x.example")])
    opensearch.request("DELETE", f"/{index}_queues")
    with caplog.at_level("INFO", logger="owler.frontier.opensearch"):
        with open_frontier(conf, owner="new") as f:
            assert f.queues_ready
            assert f"building {index}_queues" in caplog.text and "31 queues" in caplog.text
            f.refresh()
            assert queue_doc(opensearch, conf, "h7.example")["due"] == int(now - 702)
            assert queue_doc(opensearch, conf, "z.example")["due"] == int(now + 600)
            assert queue_doc(opensearch, conf, "x.example") is None
            assert {k for _, _, k in f.due(now, 3, 10)} == {f"h{h}.example" for h in (27, 28, 29)}
            for k in list(f.leases):
                f.release(k, now, served=False)
    # another process is building it (since a moment ago): the due URLs are aggregated
    opensearch.request("PUT", f"/{index}_queues/_mapping", {"_meta": {
        "built": False, "since": int(time.time() * 1000)}})
    with open_frontier(conf, owner="meanwhile") as f:
        assert not f.queues_ready
        assert {k for _, _, k in f.due(now, 2, 10)} == {"h28.example", "h29.example"}
    # its build died 16 minutes ago: done again
    opensearch.request("PUT", f"/{index}_queues/_mapping", {"_meta": {
        "built": False, "since": int((time.time() - 960) * 1000)}})
    with open_frontier(conf, owner="later") as f:
        assert f.queues_ready
        _, data = opensearch.request("GET", f"/{index}_queues/_mapping")
        assert data[f"{index}_queues"]["mappings"]["_meta"]["built"] is True


def test_a_deleted_queue_is_served_again_at_once_when_it_comes_back(conf):
    """Deleting a queue (or the whole crawl, as URLFrontier's DeleteCrawl) also forgets what the
    task knew of it: its pause after a round, a release not written yet. (URLFrontier's own
    suite found it: RightOrder, after NeverRefetched served the same key.)"""
    now = time.time()
    with open_frontier({**conf, "frontier.queue.round.delay": 300}, owner="t1") as f:
        for scope in ("a.example", None):
            f.apply_updates([upd("http://a.example/1", "DISCOVERED", now - 10, "a.example")])
            f.refresh()
            assert [u for u, _, _ in f.due(now, 10, 10)] == ["http://a.example/1"]
            f.release("a.example", now, defer=True)  # paused for 300 s
            assert "a.example" in f.held
            f.delete(scope)
            f.apply_updates([upd("http://a.example/2", "DISCOVERED", now - 5, "a.example")])
            f.refresh()
            assert [u for u, _, _ in f.due(now, 10, 10)] == ["http://a.example/2"], scope
            f.release("a.example", now, served=False)
            f.delete(None)


def test_monitoring_reads_answer_from_the_queues_index(conf, opensearch):
    """queue_count and most_delayed read the queues index (one document per queue), not the
    URLs: queue_count(now) is an upper bound (a queue whose round emptied it counts until a spout
    picks it again), most_delayed reads the due URLs of its earliest candidates only and leaves
    out one with nothing due."""
    now = time.time()
    index = conf["opensearch.status.index.name"]
    with open_frontier(conf, owner="m") as f:
        assert f.apply_updates(
            [upd(f"http://q{i}.example/{j}", "DISCOVERED", now - 100 * (i + 1) + j,
                 f"q{i}.example") for i in range(4) for j in range(3)]
            + [upd("http://later.example/", "DISCOVERED", now + 3600, "later.example")]) == []
        f.refresh()
        assert f.queue_count() == 5 and f.queue_count(now) == 4
        delayed = f.most_delayed(now, 3)
        assert [k for k, _ in delayed] == ["q3.example", "q2.example", "q1.example"]
        assert delayed[0][1] == pytest.approx(400, abs=1)
        # q3's URLs all fetched, its queue's date left in the past (as the end of a round
        # leaves it): counted as due, not listed as delayed
        assert f.apply_updates([upd(f"http://q3.example/{j}", "FETCHED", now + 86400,
                                    "q3.example") for j in range(3)]) == []
        opensearch.request("POST", f"/{index}_queues/_update/q3.example",
                           {"doc": {"due": int((now - 400) * 1000)}})
        f.refresh()
        assert f.queue_count(now) == 4
        assert [k for k, _ in f.most_delayed(now, 3)] == ["q2.example", "q1.example",
                                                            "q0.example"]
    # an interest (which the queues' dates do not know): from the URLs, exact
    with open_frontier({**conf, "frontier.interest.exclude.tags": "none"}, owner="i") as f:
        assert f.queue_count(now) == 3 and f.queue_count() == 5


_CARRIES_THEN_DIES = """
import json, os, signal, sys
from owler.constants import Status
from owler.frontier import StatusUpdate, open_frontier
conf, now = json.loads(sys.argv[1]), float(sys.argv[2])
f = open_frontier(conf, owner="dies")
f.round_results = f.carry_queues = True  # as the status updater's (owler.status.FrontierWriter)
f._recover_intents(now)
f._next_intents = now + 3600
for host in ("a.example", "b.example"):
    assert f.apply_updates([StatusUpdate(f"http://{host}/1", Status.DISCOVERED, {}, now - 5,
                                         host)]) == []
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_carrying_writer_lowers_queues_with_its_next_bulk_and_loses_none_when_killed(
        conf, opensearch, monkeypatch):
    """The status updater's frontier lowers the queues of a bulk's new URLs with its next bulk.
    Killed -9 after its second bulk: the first's queue was lowered by the second, the second's
    is owed, and the intent written with the second names both; the next writer applies it and
    every URL is served. A carrying writer that closes lowers what it owes first."""
    import subprocess
    import sys

    from owler.frontier import opensearch as osf

    index = conf["opensearch.status.index.name"]
    now = time.time()
    r = subprocess.run([sys.executable, "-c", _CARRIES_THEN_DIES, json.dumps(conf), str(now)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    assert queue_doc(opensearch, conf, "a.example")["due"] == int(now - 5)
    assert queue_doc(opensearch, conf, "b.example") is None
    status, intent = opensearch.request("GET", f"/{index}_leases/_doc/intent:dies")
    assert status == 200 and intent["_source"]["dues"] == {
        "a.example": int(now - 5) * 1000, "b.example": int(now - 5) * 1000}
    with open_frontier(conf, owner="spout") as spout:
        spout.refresh()
        assert [u for u, _, _ in spout.due(now, 10, 10)] == ["http://a.example/1"]
        monkeypatch.setattr(osf, "INTENT_AGE", 0.0)  # (else the next writer waits 30 s)
        with open_frontier(conf, owner="next") as f:
            f.round_results = f.carry_queues = True
            f.apply_updates([upd("http://c.example/1", "DISCOVERED", now - 5, "c.example")])
            # applied (the owed queue of the writer that died), its own not yet
            assert queue_doc(opensearch, conf, "b.example")["due"] == int(now - 5)
            assert queue_doc(opensearch, conf, "c.example") is None
        # closed: its own lowered, its intent removed
        assert queue_doc(opensearch, conf, "c.example")["due"] == int(now - 5)
        status, _ = opensearch.request("GET", f"/{index}_leases/_doc/intent:next")
        assert status == 404
        spout.refresh()
        assert sorted(u for u, _, _ in spout.due(now, 10, 10)) == [
            "http://b.example/1", "http://c.example/1"]


_DIES_AFTER_ITS_BULK = """
import json, os, signal, sys
from owler.constants import Status
from owler.frontier import StatusUpdate, open_frontier
conf, now = json.loads(sys.argv[1]), float(sys.argv[2])
f = open_frontier(conf, owner="dies")
f._recover_intents(now)  # (its first write's look at others' intents, before the kill is armed)
f._next_intents = now + 3600
f._lower_queues = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
f.apply_updates([StatusUpdate(u, Status.DISCOVERED, {}, now - 5, k) for u, k in (
    ("http://new.example/1", "new.example"), ("http://new.example/2", "new.example"),
    ("http://old.example/new", "old.example"))])
"""


def test_a_writer_killed_between_its_bulk_and_the_queues_loses_no_url(conf, opensearch,
                                                                    monkeypatch):
    """A writer killed -9 after its statuses are durable and before it lowered their queues: a
    new host's queue would have no document (its URLs never served) and a known host's would
    keep its date a month away. Its intent, written in the same bulk, is applied by the next
    writer: both queues are served at once."""
    import subprocess
    import sys

    from owler.frontier import opensearch as osf

    index = conf["opensearch.status.index.name"]
    now = time.time()
    month = now + 30 * 86400
    with open_frontier(conf, owner="before") as f:
        f.apply_updates([upd("http://old.example/", "FETCHED", month, "old.example")])
    r = subprocess.run([sys.executable, "-c", _DIES_AFTER_ITS_BULK, json.dumps(conf), str(now)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    status, intent = opensearch.request("GET", f"/{index}_leases/_doc/intent:dies")
    assert status == 200 and intent["_source"]["dues"] == {
        "new.example": int(now - 5) * 1000, "old.example": int(now - 5) * 1000}
    # what the writer left: the URLs are stored, their queues do not know them
    assert queue_doc(opensearch, conf, "new.example") is None
    assert queue_doc(opensearch, conf, "old.example")["due"] == int(month)
    with open_frontier(conf, owner="spout") as spout:
        spout.refresh()
        assert spout.due(now, 10, 10) == []
        monkeypatch.setattr(osf, "INTENT_AGE", 0.0)  # (else the next writer waits 30 s)
        with open_frontier(conf, owner="next") as f:
            f.apply_updates([upd("http://other.example/", "DISCOVERED", month, "other.example")])
            f.refresh()
            status, _ = opensearch.request("GET", f"/{index}_leases/_doc/intent:dies")
            assert status == 404  # applied, then deleted
            status, mine = opensearch.request("GET", f"/{index}_leases/_doc/intent:next")
            assert status == 200 and mine["_source"]["dues"] == {"other.example": int(month) * 1000}
        assert queue_doc(opensearch, conf, "new.example")["due"] == int(now - 5)
        assert queue_doc(opensearch, conf, "old.example")["due"] == int(now - 5)
        assert sorted(u for u, _, _ in spout.due(now, 10, 10)) == [
            "http://new.example/1", "http://new.example/2", "http://old.example/new"]
    # a writer that closes removes its own intent: its queues were lowered
    status, _ = opensearch.request("GET", f"/{index}_leases/_doc/intent:next")
    assert status == 404
