"""``owler frontier serve``'s service, on both frontiers (a SQLite file, a real OpenSearch node),
through a real gRPC channel: the behaviours crawler-commons' URLFrontier test suite checks (never
refetched, order by date, holds and delay_requestable, queue names, crawl IDs, dump and re-import),
the rest of the API the service implements, and this project's client (``frontier.backend:
urlfrontier``) on it.

The official suite (the ``tests`` module of crawler-commons/url-frontier: URLFrontierServiceTest,
DumpURLsTest) is not published on Maven Central and CI reaches nothing else, so it runs beside the
project by hand (docs/ARCHITECTURE.md, "The frontier contract", says how); here the project's own
tests stand in for it, each naming the official test whose behaviour it checks
(``official: Class.method``)."""

from __future__ import annotations

import json
import logging
import subprocess
import time
import uuid
from pathlib import Path

import grpc
import pytest

from owler.constants import Status
from owler.frontier import FrontierError, StatusUpdate, open_frontier
from owler.frontier.urlfrontier_api import DUE_COUNT, STATUS_KEY, Stub, pb
from owler.status import transfer_metadata
from owler.urlfrontier.service import serve
from tests.integration.waiting import sleep_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

OK, SKIPPED, FAIL = (pb.AckMessage.Status.Value(n) for n in ("OK", "SKIPPED", "FAIL"))


@pytest.fixture(params=["sqlite", "opensearch"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return {"frontier.backend": "sqlite", "frontier.sqlite.path": str(tmp_path / "f.sqlite")}
    node = request.getfixturevalue("opensearch")
    return {"frontier.backend": "opensearch", "services.opensearch.port": node.port,
            "opensearch.status.index.name": f"uf-{uuid.uuid4().hex[:10]}",
            "fetcher.server.delay": 0.0, "frontier.lease.ttl": 60}


class Running:
    def __init__(self, conf):
        self.conf = {"partition.url.mode": "byHost", "urlfrontier.default.delay": 0, **conf}
        self.server, self.service, self.port = serve(self.conf, port=0)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = Stub(self.channel)

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def put(self, *items):
        return [(a.ID, a.status) for a in self.stub.PutURLs(iter(items))]

    def get(self, **params):
        params.setdefault("delay_requestable", 30)
        return [u.url for u in self.stub.GetURLs(pb.GetParams(**params))]

    def stats(self, key=""):
        return self.stub.GetStats(pb.QueueWithinCrawlParams(key=key))

    @property
    def over_opensearch(self) -> bool:
        return self.conf["frontier.backend"] == "opensearch"

    def holds(self) -> dict:
        """The service's holds, url -> (until, key), read on its frontier thread."""
        return self.service._run(lambda: dict(self.service.state().holds))

    def lease_until(self, key: str) -> float:
        """When the queue's lease (OpenSearch) lets anyone serve it again, as recorded in the
        leases index; 0 without leases (SQLite)."""
        f = self.service.frontier
        if not getattr(f, "leases_queues", False):
            return 0.0
        _, doc = f.client.request("GET", f"/{f.leases_index}/_doc/{key}")
        return doc["_source"]["until"] / 1000

    def close(self):
        self.channel.close()
        self.server.stop(0).wait()
        self.service.close()


@pytest.fixture
def svc(backend):
    running = Running(backend)
    yield running
    running.close()


def discovered(url, key="", crawl="", md=None, item_id=""):
    info = pb.URLInfo(url=url, key=key, crawlID=crawl)
    for k, v in (md or {}).items():
        info.metadata[k].values.extend(v)
    return pb.URLItem(ID=item_id, discovered=pb.DiscoveredURLItem(info=info))


def known(url, due, key="", status=None, md=None, crawl="", item_id=""):
    info = pb.URLInfo(url=url, key=key, crawlID=crawl)
    for k, v in {**(md or {}), **({STATUS_KEY: [status]} if status else {})}.items():
        info.metadata[k].values.extend(v)
    return pb.URLItem(ID=item_id, known=pb.KnownURLItem(info=info, refetchable_from_date=int(due)))


def eventually(fn, timeout=120.0):
    """``fn()`` once it is truthy (a queue paused after a round on OpenSearch), else the last
    (the assert on it fails: ``timeout`` is a hang guard)."""
    deadline = time.time() + timeout
    while True:
        value = fn()
        if value or time.time() > deadline:
            return value
        time.sleep(0.25)


def test_a_url_never_to_be_refetched_is_never_given_out(svc):
    """official: URLFrontierServiceTest.NeverRefetched"""
    assert svc.put(known("http://key1.com/", 0, "key1.com")) == [("http://key1.com/", OK)]
    assert svc.get(key="key1.com", max_urls_per_queue=1, crawlID="DEFAULT") == []
    item = svc.stub.GetURLStatus(pb.URLStatusRequest(url="http://key1.com/"))
    assert item.known.refetchable_from_date == 0
    assert item.known.info.metadata[STATUS_KEY].values == ["FETCHED"]
    assert svc.stats().counts["completed"] == 1 and svc.stats().size == 0


def test_urls_come_earliest_date_first(svc):
    """official: URLFrontierServiceTest.RightOrder"""
    now = int(time.time())
    assert len(svc.put(known("http://key1.com/late", now, "key1.com"),
                       known("http://key1.com/early", now - 10000, "key1.com"))) == 2
    assert svc.get(key="key1.com", max_urls_per_queue=2) == ["http://key1.com/early",
                                                             "http://key1.com/late"]


def test_a_url_given_out_is_held_for_delay_requestable(svc):
    """official: URLFrontierServiceTest.testUpdates"""
    url = "http://key1.com/page"
    acks = svc.put(discovered(url, "key1.com", item_id="a"), discovered(url, "key1.com"))
    assert acks == [("a", OK), (url, SKIPPED)]  # the second: known, not to be sent again
    assert svc.stub.ListQueues(pb.Pagination()).values == ["key1.com"]
    # held for 10 s: the checks of the hold below are done well within it on a loaded machine
    before = time.time()
    assert svc.get(key="key1.com", max_urls_per_queue=1, delay_requestable=10) == [url]
    after = time.time()
    until, key = svc.holds()[url]
    assert before + 10 <= until <= after + 10 and key == "key1.com"
    stats = svc.stats("key1.com")
    assert (stats.numberOfQueues, stats.inProcess, stats.size) == (1, 1, 1)
    assert svc.get(max_urls_per_queue=5) == []  # held
    svc.put(discovered(url, "key1.com"))  # an outlink to it: still held (not an update)
    assert svc.get(max_urls_per_queue=5) == [] and svc.stats("key1.com").inProcess == 1
    assert svc.holds() == {url: (until, "key1.com")}, "the outlink changed the hold"
    sleep_until(until)  # the hold's end as the service recorded it: time itself is tested
    assert svc.stats("key1.com").inProcess == 0
    assert eventually(lambda: svc.get(max_urls_per_queue=5)) == [url]
    assert svc.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="key1.com")).value == 1
    assert svc.stats().numberOfQueues == 0 and svc.stats().size == 0


def test_an_update_ends_the_hold_and_stores_status_date_and_metadata(svc):
    url = "http://key1.com/page"
    svc.put(discovered(url, "key1.com", md={"depth": ["0"]}))
    assert svc.get(max_urls_per_queue=5) == [url]
    later = time.time() + 3600
    before = time.time()
    assert svc.put(known(url, later, "key1.com", "FETCH_ERROR", {"fetch.error.count": ["1"]})) \
        == [(url, OK)]
    after = time.time()
    if svc.over_opensearch:  # held on until the write is searchable (refresh interval + 1 s)
        visible_in = svc.service.frontier.min_hold
        until, _ = svc.holds()[url]
        assert before + visible_in <= until <= after + visible_in
        sleep_until(until)
    else:  # the update ends the hold at once
        assert svc.holds() == {}
    assert svc.stats().inProcess == 0
    item = svc.stub.GetURLStatus(pb.URLStatusRequest(url=url, key="key1.com")).known
    assert item.refetchable_from_date == int(later)
    assert dict((k, list(v.values)) for k, v in item.info.metadata.items()) == {
        "fetch.error.count": ["1"], STATUS_KEY: ["FETCH_ERROR"]}
    assert svc.stats().counts["FETCH_ERROR"] == 1 and svc.stats().counts[DUE_COUNT] == 0
    # a DISCOVERED of a known URL changes nothing: SKIPPED (the reference service's answer)
    assert svc.put(discovered(url, "key1.com")) == [(url, SKIPPED)]
    assert svc.stub.GetURLStatus(pb.URLStatusRequest(url=url)).known.refetchable_from_date \
        == int(later)
    with pytest.raises(grpc.RpcError) as err:
        svc.stub.GetURLStatus(pb.URLStatusRequest(url="http://key1.com/unknown"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_queue_of_a_url_sent_without_key_is_its_host(backend):
    """official: URLFrontierServiceTest.testQueueNames. The host, whatever partition mode the
    crawlers use (here their pay-level domain)."""
    svc = Running({**backend, "partition.url.mode": "byDomain"})
    try:
        assert svc.put(discovered("http://gac.icann.org?language_id=9"),
                       discovered("http://www.icann.org/")) == [
            ("http://gac.icann.org?language_id=9", OK), ("http://www.icann.org/", OK)]
        assert svc.stats("gac.icann.org").size == 1 and svc.stats("www.icann.org").size == 1
        assert svc.stats("icann.org").size == 0
        # no host: nothing to queue it under, skipped (not to be sent again)
        assert svc.put(discovered("not a url")) == [("not a url", SKIPPED)]
        assert svc.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="gac.icann.org")).value == 1
    finally:
        svc.close()


def test_crawl_ids_are_crawl_spaces_of_their_own(svc):
    """official: URLFrontierServiceTest.testCrawlIDs"""
    assert svc.stub.ListCrawls(pb.Local()).values == []
    url = "http://urlfrontier.net/"
    for crawl, ack in (("BESPOKE", OK), ("", OK), ("DEFAULT", SKIPPED)):  # DEFAULT twice
        assert svc.put(discovered(url, crawl=crawl)) == [(url, ack)]
    assert svc.stub.ListCrawls(pb.Local()).values == ["DEFAULT", "BESPOKE"]
    for crawl in ("", "BESPOKE"):
        stats = svc.stub.GetStats(pb.QueueWithinCrawlParams(crawlID=crawl))
        assert (stats.size, stats.crawlID, stats.numberOfQueues) == (1, crawl or "DEFAULT", 1)
    # the same URL, two statuses
    svc.put(known(url, 0, crawl="BESPOKE", status="ERROR"))
    assert svc.stub.GetURLStatus(pb.URLStatusRequest(url=url, crawlID="BESPOKE")) \
        .known.info.metadata[STATUS_KEY].values == ["ERROR"]
    assert svc.stub.GetURLStatus(pb.URLStatusRequest(url=url)).WhichOneof("item") == "known"
    assert svc.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="BESPOKE")).value == 1
    stats = svc.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="BESPOKE"))
    assert (stats.crawlID, stats.size, stats.numberOfQueues) == ("BESPOKE", 0, 0)
    assert svc.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="BESPOKE")).value == 0
    assert svc.stub.DeleteCrawl(pb.DeleteCrawlMessage()).value == 1
    assert svc.stats().size == 0 and svc.stub.ListCrawls(pb.Local()).values == []


def test_get_urls_of_one_crawl_or_of_any(svc):
    """official: DumpURLsTest.parallelDump (URLs of a second crawl acked and served)"""
    acks = svc.put(*[discovered(f"http://site{i % 3}.com/p{i}") for i in range(6)],
                   discovered("http://bespoke.com/", crawl="BESPOKE"))
    assert [a for _, a in acks] == [OK] * 7
    assert svc.get(crawlID="BESPOKE") == ["http://bespoke.com/"]
    assert sorted(svc.get(anyCrawlID=pb.AnyCrawlID())) == sorted(
        f"http://site{i % 3}.com/p{i}" for i in range(6))  # BESPOKE's one is held
    infos = list(svc.stub.GetURLs(pb.GetParams(anyCrawlID=pb.AnyCrawlID())))
    assert infos == []  # everything held
    svc.put(discovered("http://other.com/", crawl="OTHER"))
    (info,) = svc.stub.GetURLs(pb.GetParams(anyCrawlID=pb.AnyCrawlID(), delay_requestable=30))
    assert (info.url, info.crawlID, info.key) == ("http://other.com/", "OTHER", "other.com")


def test_a_crawl_that_is_not_there_and_one_that_cannot_be(svc):
    svc.put(discovered("http://a.com/"))
    stats = svc.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="NOSUCH"))
    assert (stats.crawlID, stats.size, stats.counts["FETCHED"]) == ("NOSUCH", 0, 0)
    assert svc.stub.CountURLs(pb.CountUrlParams(crawlID="NOSUCH")).value == 0
    assert svc.get(crawlID="NOSUCH") == []
    for call in (lambda: list(svc.stub.ListURLs(pb.ListUrlParams(crawlID="NOSUCH"))),
                 lambda: svc.stub.GetURLStatus(pb.URLStatusRequest(url="http://a.com/",
                                                                   crawlID="NOSUCH"))):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert err.value.details() == "unknown crawl 'NOSUCH'; crawls: DEFAULT"
    assert svc.stub.ListCrawls(pb.Local()).values == ["DEFAULT"]  # reads created nothing
    # a crawl ID that names none: refused, and in PutURLs skipped (not to be sent again)
    with pytest.raises(grpc.RpcError) as err:
        svc.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="a\nb"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "control character" in err.value.details()
    assert svc.put(discovered("http://a.com/x", crawl="x" * 256),
                   discovered("http://a.com/y")) == [("http://a.com/x", SKIPPED),
                                                      ("http://a.com/y", OK)]


def test_a_dump_round_trips_through_list_urls_and_put_urls(svc):
    """official: DumpURLsTest.roundTrip (the client's DumpURLs lists each crawl's URLs with
    ListURLs and puts them back with PutURLs)"""
    later = int(time.time()) + 3600
    svc.put(discovered("http://example.com/discovered", "example.com", md={"source": ["seed"]}),
            known("http://example.com/done", 0, "example.com"),
            known("http://example.com/later", later, "example.com"),
            discovered("http://bespoke.com/", "bespoke.com", crawl="BESPOKE"))
    dump = [item for crawl in svc.stub.ListCrawls(pb.Local(local=True)).values
            for item in svc.stub.ListURLs(pb.ListUrlParams(crawlID=crawl, size=2**31 - 1))]
    assert len(dump) == 4 and all(i.WhichOneof("item") == "known" for i in dump)
    for crawl in svc.stub.ListCrawls(pb.Local(local=True)).values:
        svc.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=crawl))
    assert svc.stub.ListCrawls(pb.Local()).values == []
    assert [a for _, a in svc.put(*dump)] == [OK] * 4
    status = {u: svc.stub.GetURLStatus(pb.URLStatusRequest(url=u, key="example.com")).known
              for u in ("http://example.com/done", "http://example.com/later",
                        "http://example.com/discovered")}
    assert status["http://example.com/done"].refetchable_from_date == 0
    assert status["http://example.com/later"].refetchable_from_date == later
    assert status["http://example.com/discovered"].info.metadata["source"].values == ["seed"]
    assert svc.stub.CountURLs(pb.CountUrlParams(crawlID="BESPOKE")).value == 1


def test_max_queues_max_urls_per_queue_and_round_robin(svc):
    svc.put(*[discovered(f"http://h{h}.com/{i}") for h in range(4) for i in range(3)])
    got = svc.get(max_queues=2, max_urls_per_queue=2)
    hosts = {u.split("/")[2] for u in got}
    assert len(got) == 4 and len(hosts) == 2
    assert got[0].split("/")[2] != got[1].split("/")[2]  # the first of each queue first
    rest = svc.get()  # no limits: everything not held
    everything = {f"http://h{h}.com/{i}" for h in range(4) for i in range(3)}
    # a queue is served in rounds: not again while a URL of its round is held
    assert sorted(rest) == sorted(u for u in everything if u.split("/")[2] not in hosts)


def test_without_rounds_a_queue_gives_up_to_max_urls_per_queue_in_process(tmp_path):
    """urlfrontier.service.rounds: false, as crawler-commons' reference service."""
    svc = Running({"frontier.sqlite.path": str(tmp_path / "f.sqlite"),
                   "urlfrontier.service.rounds": False})
    try:
        svc.put(*[discovered(f"http://h.com/{i}") for i in range(5)])
        assert len(svc.get(max_urls_per_queue=2)) == 2
        assert len(svc.get(max_urls_per_queue=3)) == 1  # 2 of 3 in process
        assert len(svc.get(max_urls_per_queue=5)) == 2
        assert svc.get(max_urls_per_queue=5) == []
    finally:
        svc.close()


def test_set_delay_spaces_the_servings_of_a_queue(svc):
    svc.put(*[discovered(f"http://slow.com/{i}") for i in range(3)])
    # 5 s: longer than the pause a queue's lease imposes after a round over OpenSearch (2 s)
    svc.stub.SetDelay(pb.QueueDelayParams(key="slow.com", delay_requestable=5))
    first = svc.get(max_urls_per_queue=1)
    assert len(first) == 1
    assert svc.get(max_urls_per_queue=1) == []  # its round is going on (held 30 s)
    # the first URL done: its hold ends, the queue's delay still applies
    svc.put(known(first[0], time.time() + 3600, "slow.com", "FETCHED"))
    # the round ends once the update is visible: at once on SQLite, over OpenSearch once the
    # write is searchable (the service lets the URL go at the first call after that)
    assert eventually(lambda: svc.stats().inProcess == 0)
    ended = svc.service._run(lambda: svc.service.state().last_served["slow.com"])
    calls = []

    def ask():
        got = svc.get(max_urls_per_queue=1)
        calls.append((got, time.time()))
        return got

    assert len(eventually(ask)) == 1
    # served again only once the delay since the round's end (as the service recorded it) had
    # passed: a lower bound on the service's own clock, which a slower machine only makes
    # later, not a claim about speed
    assert calls[-1][1] >= ended + 5, (ended, calls)


def test_a_queue_whose_round_ended_goes_to_another_client_first(backend):
    # the other client's turn lasts 600 s after the round (urlfrontier.service.handover): the
    # checks within it cannot be outrun by a slow machine
    svc = Running({**backend, "urlfrontier.service.handover": 600})
    try:
        svc.put(*[discovered(f"http://q.com/{i}") for i in range(4)])
        # a second client: a connection of its own (grpc shares one between the channels of a
        # process unless told not to; crawlers are processes of their own)
        other = Stub(grpc.insecure_channel(svc.address,
                                           options=[("grpc.use_local_subchannel_pool", 1)]))

        def get_other(key=""):
            return [u.url for u in other.GetURLs(pb.GetParams(max_urls_per_queue=1, key=key,
                                                              delay_requestable=30))]

        first = svc.get(max_urls_per_queue=1)
        assert len(first) == 1
        assert get_other() == []  # the other client asks too: the queue's round is going on
        svc.put(known(first[0], time.time() + 3600, "q.com", "FETCHED"))  # the round ends
        # ... once the write is visible: at once on SQLite, over OpenSearch when its hold until
        # the write is searchable is over (the service releases the queue at the next call)
        assert eventually(lambda: svc.stats().inProcess == 0)
        # over OpenSearch the queue's lease pauses it for everyone until the write is
        # searchable: past that pause, only the handover keeps it from this client
        sleep_until(svc.lease_until("q.com"))
        # the other client asks again (for a queue it cannot have): it still shares the service
        assert get_other(key="none.example") == []
        assert svc.get(max_urls_per_queue=1) == []  # the other client's turn first
        assert len(eventually(get_other)) == 1
    finally:
        svc.close()


def test_block_queue_until_and_unblock(svc):
    svc.put(discovered("http://b.com/1"), discovered("http://c.com/1"))
    svc.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.com", time=int(time.time()) + 3600))
    assert svc.get() == ["http://c.com/1"]
    assert svc.stub.ListQueues(pb.Pagination()).values == ["c.com"]
    assert svc.stub.ListQueues(pb.Pagination(include_inactive=True)).values == ["b.com", "c.com"]
    svc.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.com", time=0))
    assert svc.get() == ["http://b.com/1"]


def test_acks_ok_skipped_and_fail(svc):
    """The API's acks: OK once written, SKIPPED for what must not be sent again (a discovered
    URL known already, or twice in one batch; a key over 255 characters), FAIL for what may (the
    write failed; nothing of it stored)."""
    svc.put(known("http://a.com/done", 0, "a.com"))
    assert svc.put(discovered("http://a.com/new", "a.com"),
                   discovered("http://a.com/done", "a.com"),
                   discovered("http://a.com/new", "a.com", item_id="again"),
                   known("http://a.com/new", 0, "a.com", item_id="update"),
                   discovered("http://a.com/x", "k" * 256)) == [
        ("http://a.com/new", OK), ("http://a.com/done", SKIPPED), ("again", SKIPPED),
        ("update", OK), ("http://a.com/x", SKIPPED)]
    assert svc.stub.CountURLs(pb.CountUrlParams()).value == 2
    real = svc.service.frontier.apply_updates

    def broken(updates):
        raise FrontierError("the disk is full")
    svc.service.frontier.apply_updates = broken
    try:
        assert svc.put(discovered("http://b.com/", "b.com"), known("http://a.com/x", 0, "a.com"),
                       discovered("http://a.com/done", "a.com")) == [
            ("http://b.com/", FAIL), ("http://a.com/x", FAIL), ("http://a.com/done", SKIPPED)]
    finally:
        svc.service.frontier.apply_updates = real
    assert svc.stub.CountURLs(pb.CountUrlParams()).value == 2
    assert svc.put(discovered("http://b.com/", "b.com")) == [("http://b.com/", OK)]


def test_a_sitemaps_discovery_of_a_known_url_is_written_not_skipped(svc):
    """A discovered item that a sitemap lists refreshes what the frontier keeps of a known URL
    (owler.frontier.refresh): acked OK and merged, not SKIPPED as a plain known discovery."""
    url = "http://a.com/p"
    svc.put(known(url, time.time() + 86400, "a.com", "FETCHED", {"depth": ["0"]}))
    listed = {"isDiscoveredOnSitemap": ["true"], "sitemap.changefreq": ["daily"]}
    assert svc.put(discovered(url, "a.com", md=listed), discovered(url, "a.com")) == [
        (url, OK), (url, SKIPPED)]
    md = svc.stub.GetURLStatus(pb.URLStatusRequest(url=url)).known.info.metadata
    assert {k: list(v.values) for k, v in md.items()} == {
        "depth": ["0"], **listed, STATUS_KEY: ["FETCHED"]}


def test_inactive_service_gives_nothing_but_takes_updates(svc):
    svc.stub.SetActive(pb.Active(state=False))
    assert svc.stub.GetActive(pb.Local()).state is False
    assert svc.put(discovered("http://a.com/")) == [("http://a.com/", OK)]
    assert svc.get() == []
    svc.stub.SetActive(pb.Active(state=True))
    assert svc.get() == ["http://a.com/"]


def test_list_and_count_urls_with_filters_and_pages(svc):
    svc.put(*[discovered(f"http://A.com/Page{i}") for i in range(5)],
            known("http://b.com/x", 0, "b.com"))
    count = svc.stub.CountURLs
    assert count(pb.CountUrlParams()).value == 6
    assert count(pb.CountUrlParams(key="a.com")).value == 5
    assert count(pb.CountUrlParams(filter="page")).value == 0
    assert count(pb.CountUrlParams(filter="page", ignoreCase=True)).value == 5
    urls = [i.known.info.url for i in svc.stub.ListURLs(pb.ListUrlParams(key="a.com", start=1,
                                                                          size=2))]
    assert len(urls) == 2 and set(urls) < {f"http://A.com/Page{i}" for i in range(5)}
    all_urls = [i.known.info.url for i in svc.stub.ListURLs(pb.ListUrlParams(size=100))]
    assert len(all_urls) == 6
    queues = svc.stub.ListQueues(pb.Pagination(start=0, size=1, include_inactive=True))
    assert list(queues.values) == ["a.com"] and queues.total == 2
    # b.com holds only a URL never to fetch again: not an active queue
    assert svc.stub.ListQueues(pb.Pagination(start=1, size=5)).values == []


def test_a_crawl_limit_stops_a_queue_once_as_many_urls_are_completed(svc):
    svc.put(*[discovered(f"http://a.com/{i}") for i in range(4)])
    svc.stub.SetCrawlLimit(pb.CrawlLimitParams(key="a.com", limit=1))
    (first,) = svc.get(max_urls_per_queue=1)
    svc.put(known(first, 0, "a.com"))  # completed: the limit is reached
    assert eventually(lambda: svc.stats().inProcess == 0)
    assert svc.get(max_urls_per_queue=1) == []
    svc.stub.SetCrawlLimit(pb.CrawlLimitParams(key="a.com", limit=0))  # lifted
    assert len(eventually(lambda: svc.get(max_urls_per_queue=1))) == 1
    with pytest.raises(grpc.RpcError) as err:
        svc.stub.SetCrawlLimit(pb.CrawlLimitParams(key="nosuch.com", limit=3))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "nosuch.com" in err.value.details()


def test_nodes_and_log_levels(svc):
    assert svc.stub.ListNodes(pb.Empty()).values == [svc.address]
    svc.stub.SetLogLevel(pb.LogLevelParams(package="owler.urlfrontier", level=1))


# -- the project's client on the service -----------------------------------------------------------
def client_conf(svc, **extra):
    return {"frontier.backend": "urlfrontier", "urlfrontier.address": svc.address,
            "partition.url.mode": "byHost", "urlfrontier.delay.requestable": 60, **extra}


def test_client_is_a_frontier_over_the_service(svc):
    now = time.time()
    with open_frontier(client_conf(svc)) as f:
        assert f.inject([("http://A.com/x", {"depth": ["0"]}), ("http://b.com/", {})], now) == 2
        rows = f.due(now, 10, 10)
        assert sorted((u, k) for u, _, k in rows) == [("http://a.com/x", "a.com"),
                                                       ("http://b.com/", "b.com")]
        assert dict((u, md) for u, md, _ in rows)["http://a.com/x"] == {"depth": ["0"]}
        assert f.due(now, 10, 10) == []  # held for the spout
        assert f.apply_updates([
            StatusUpdate("http://a.com/x", Status.FETCHED, {"depth": ["0"]}, now + 3600, "a.com"),
            StatusUpdate("http://b.com/", Status.ERROR, {"error.cause": ["x"]}, None, "b.com"),
            StatusUpdate("http://a.com/new", Status.DISCOVERED, {}, now, "a.com",
                         block_until=now + 3600),
        ]) == []
        assert eventually(lambda: f.counts() == {"DISCOVERED": 1, "FETCHED": 1, "ERROR": 1,
                                                 "FETCH_ERROR": 0, "REDIRECTION": 0})
        rec = f.get("http://b.com/")
        assert rec.status is Status.ERROR and rec.next_fetch_date is None
        assert rec.metadata == {"error.cause": ["x"]}
        assert f.get("http://a.com/x").next_fetch_date == int(now + 3600)
        assert f.get("http://nowhere.com/") is None
        assert f.due(time.time(), 10, 10) == []  # a.com blocked (the Retry-After)
        assert f.due_count(time.time()) == 1 and f.queue_count() == 2
        assert f.top_hosts(1) == [("a.com", 2)]
        # a robots.txt Crawl-delay met by the fetcher: the service's delay for the queue
        f.apply_updates([StatusUpdate("http://c.com/", Status.FETCHED, {}, now + 60, "c.com",
                                      crawl_delay=4.0)])
        assert svc.service.state().delays == {"c.com": 4.0}
        f.set_delay("a.com", 5)
        assert svc.service.state().delays == {"c.com": 4.0, "a.com": 5.0}
        with pytest.raises(FrontierError, match="shared counters"):
            f.charge("sitemap", 1, 10, now, 60)


def test_a_client_of_any_crawl_writes_each_url_back_to_its_crawl(svc):
    """Without urlfrontier.crawlid the spout serves every crawl; a URL's statuses, its outlinks,
    its queue's block and delay go to the crawl it came from (not DEFAULT: there the URL would
    stay DISCOVERED in its own crawl and be served again once its hold ended)."""
    svc.put(discovered("http://news.com/x", "news.com", crawl="news"),
            discovered("http://plain.com/", "plain.com"))
    now = time.time()
    with open_frontier(client_conf(svc)) as f:
        rows = {u: md for u, md, _ in f.due(now, 10, 10)}
        assert rows == {"http://news.com/x": {"crawl.id": ["news"]}, "http://plain.com/": {}}
        parent = {**rows["http://news.com/x"], "depth": ["0"]}
        outlink = transfer_metadata("http://news.com/x", parent, {})
        assert outlink["crawl.id"] == ["news"]
        assert f.apply_updates([
            StatusUpdate("http://news.com/x", Status.FETCHED, parent, now + 3600, "news.com",
                         block_until=now + 600, crawl_delay=7.0),
            StatusUpdate("http://news.com/y", Status.DISCOVERED, outlink, now, "news.com"),
            StatusUpdate("http://plain.com/", Status.FETCHED, {}, now + 3600, "plain.com"),
        ]) == []
    news = svc.stub.GetURLStatus(pb.URLStatusRequest(url="http://news.com/x", crawlID="news"))
    assert news.known.refetchable_from_date == int(now + 3600)
    assert dict((k, list(v.values)) for k, v in news.known.info.metadata.items()) == {
        "depth": ["0"], STATUS_KEY: ["FETCHED"]}  # the crawl is the space, not metadata
    assert svc.stub.CountURLs(pb.CountUrlParams(crawlID="news")).value == 2
    assert svc.stub.CountURLs(pb.CountUrlParams()).value == 1  # DEFAULT: plain.com alone
    with pytest.raises(grpc.RpcError) as err:
        svc.stub.GetURLStatus(pb.URLStatusRequest(url="http://news.com/x"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    news_state = svc.service.state("news")
    assert news_state.delays == {"news.com": 7.0}
    assert svc.service.state().delays == {}


def test_two_clients_never_get_the_same_url(svc):
    urls = [f"http://h{h}.com/{i}" for h in range(20) for i in range(10)]
    svc.put(*[discovered(u) for u in urls])
    got: list[list[str]] = [[], []]
    clients = [open_frontier(client_conf(svc)) for _ in got]
    for _ in range(15):  # in turn, each asking for a few queues
        for f, mine in zip(clients, got):
            mine.extend(u for u, _, _ in f.due(time.time(), 3, 3))
    for f in clients:
        f.close()
    both = got[0] + got[1]
    # no URL twice; each queue gave its 3 (then it was full: its URLs are held, none updated)
    assert len(both) == len(set(both)) == 20 * 3
    assert got[0] and got[1]


def test_a_client_given_a_round_delay_says_it_is_the_services(svc, caplog):
    with caplog.at_level(logging.WARNING, logger="owler.frontier.urlfrontier"):
        open_frontier(client_conf(svc, **{"frontier.queue.round.delay": 300})).close()
    assert "frontier.queue.round.delay is the URLFrontier service's to keep" in caplog.text


def test_client_on_no_service_is_a_clear_error(tmp_path):
    with pytest.raises(FrontierError, match="cannot reach the URLFrontier service at 127.0.0.1:9"):
        open_frontier({"frontier.backend": "urlfrontier", "urlfrontier.address": "127.0.0.1:9",
                       "urlfrontier.timeout": 2})


# -- a foreign client: the API's published Java stubs (as StormCrawler uses them) -----------------
@pytest.fixture(scope="module")
def java_client(tmp_path_factory):
    version = (ROOT / "services" / "urlfrontier" / "VERSION").read_text().strip()
    lib = ROOT / ".services" / f"urlfrontier-api-{version}" / "java-lib"
    jars = sorted(lib.glob("*.jar"))
    assert any(j.name == f"urlfrontier-API-{version}.jar" for j in jars), \
        f"no URLFrontier Java API in {lib}: run make setup"
    out = tmp_path_factory.mktemp("java-client")
    classpath = ":".join(map(str, jars))
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", classpath,
                    str(ROOT / "tests" / "java" / "urlfrontier" / "JavaClient.java")], check=True)
    return f"{classpath}:{out}"


def test_the_published_java_client_works_with_the_service(svc, java_client):
    run = subprocess.run(["java", "-cp", java_client, "JavaClient", svc.address],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    steps = {d.pop("step"): d for d in map(json.loads, run.stdout.splitlines())}
    assert steps["put"]["acks"] == {"a1": "OK", "a2": "OK", "b1": "OK", "c1": "OK"}
    got = steps["get"]["urls"]
    assert sorted(u["url"] for u in got) == ["http://java-a.example/1", "http://java-a.example/2",
                                             "http://java-b.example/1"]
    assert {u["url"]: (u["key"], u["crawlID"], u["depth"]) for u in got}[
        "http://java-a.example/1"] == ("java-a.example", "DEFAULT", "0")
    assert {u["url"]: u["key"] for u in got}["http://java-b.example/1"] == "java-b.example"
    assert steps["update"]["acks"] == {"a1": "OK"}
    stats = steps["stats"]
    assert (stats["size"], stats["numberOfQueues"], stats["crawlID"]) == (3, 3, "DEFAULT")
    assert stats["counts"]["completed"] == 1 and stats["counts"]["FETCHED"] == 2
    # java-a/2 and java-b/1 are held; a1, updated, is held on over OpenSearch until its write is
    # searchable (refresh interval + 1 s), and the service lets it go at the first GetStats or
    # GetURLs after that: the Java client's GetStats was its last such call, so the service's
    # holds are what it counted
    held = set(svc.holds())
    expected = {"http://java-a.example/2", "http://java-b.example/1"}
    if svc.over_opensearch and "http://java-a.example/1" in held:
        expected.add("http://java-a.example/1")
    assert held == expected and stats["inProcess"] == len(held)
    queues = steps["queues"]
    assert queues["queues"] == ["java-a.example", "java-b.example", "java-c.example"]
    assert queues["refetch"] > time.time() + 3000 and queues["count"] == 2
    assert queues["crawls"] == "DEFAULT"
    assert steps["unknown"]["code"] == "NOT_FOUND"
    # what the Java client left: java-a blocked for an hour (BlockQueueUntil), java-c done for
    # good: the one active queue is java-b
    assert svc.stub.ListQueues(pb.Pagination()).values == ["java-b.example"]
