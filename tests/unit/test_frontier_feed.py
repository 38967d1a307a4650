"""FrontierFeed (the frontier spout without Storm) and FrontierWriter (the status updater's writes)."""

from __future__ import annotations

import time

import pytest

from owler.constants import Status
from owler.frontier import RETRY_SECS, FrontierError, StatusUpdate, tag_rules
from owler.frontier.feed import FrontierFeed, lease_owner
from owler.frontier.sqlite import SQLiteFrontier
from owler.scheduler import DefaultScheduler
from owler.status import FrontierUnavailable, FrontierWriter, StatusUpdater, commit_settings
from owler.task.shard import Shard

NOW = 1_700_000_000.0


@pytest.fixture
def conf(tmp_path):
    return {"frontier.sqlite.path": str(tmp_path / "f.sqlite"), "partition.url.mode": "byHost",
            "spout.min.delay.queries": 2000, "spout.ttl.purgatory": 30,
            "topology.message.timeout.secs": 120}


def seeded(conf, urls):
    f = SQLiteFrontier(conf["frontier.sqlite.path"], conf)
    f.inject([(u, {}) for u in urls], NOW - 10)
    f.close()


def drain(feed, now):
    out = []
    while (nxt := feed.next(now)) is not None:
        out.append(nxt[0])
    return out


def test_the_feed_gives_each_due_url_once_until_it_is_acked_or_failed(conf):
    urls = [f"http://h{i}.example.org/" for i in range(5)]
    seeded(conf, urls)
    feed = FrontierFeed(conf, "me")
    try:
        got = drain(feed, NOW)
        assert sorted(got) == sorted(urls) and feed.counters["queries"] == 1
        assert feed.gauges()["in_flight"] == 5 and feed.gauges()["due_last_query"] == 5
        # the next query (2 s later) excludes what is in flight
        assert drain(feed, NOW + 2.5) == [] and feed.counters["queries"] == 2
        feed.fail(got[0], NOW + 3)
        feed.ack(got[1], NOW + 3)
        assert feed.counters["acked"] == 1 and feed.counters["failed"] == 1
        # failed: still due, given out again; acked: still due too (nothing rewrote it here),
        # a status updater would have moved it on: the feed does not keep it back
        assert sorted(drain(feed, NOW + 5)) == sorted(got[:2])
    finally:
        feed.close()


def test_an_entry_whose_ack_never_came_leaves_the_in_flight_set_after_the_purgatory(conf):
    seeded(conf, ["http://a.example.org/"])
    feed = FrontierFeed(conf, "me")
    try:
        assert drain(feed, NOW) == ["http://a.example.org/"]
        assert drain(feed, NOW + 100) == []  # within message timeout + purgatory (150 s)
        assert drain(feed, NOW + 151) == ["http://a.example.org/"]
        assert feed.counters["purgatory_expired"] == 1
    finally:
        feed.close()


def test_tasks_of_an_embedded_frontier_split_the_queues_by_shard(conf):
    urls = [f"http://h{i}.example.org/" for i in range(40)]
    seeded(conf, urls)
    feeds = [FrontierFeed(conf, f"t{i}", Shard(i, 2)) for i in range(2)]
    try:
        got = [drain(f, NOW) for f in feeds]
        assert sorted(got[0] + got[1]) == sorted(urls) and not set(got[0]) & set(got[1])
        assert len(got[0]) > 5 and len(got[1]) > 5
    finally:
        for f in feeds:
            f.close()


def test_an_unreachable_frontier_is_reported_and_tried_again_later(conf):
    seeded(conf, ["http://a.example.org/"])
    problems, calls = [], []

    def opener(c, owner=None):
        calls.append(owner)
        if len(calls) == 1:
            raise FrontierError("cannot reach it")
        return SQLiteFrontier(c["frontier.sqlite.path"], c)

    feed = FrontierFeed(conf, "me", on_problem=problems.append, opener=opener)
    try:
        assert feed.frontier is None and "cannot reach it" in problems[0]
        assert feed.counters["frontier_unavailable"] == 1
        assert feed.next(NOW) is None and len(calls) == 1  # not before RETRY_SECS
        assert drain(feed, time.time() + RETRY_SECS + 1) == ["http://a.example.org/"]
        assert calls == ["me", "me"]
    finally:
        feed.close()


class LeasedFrontier:
    """A shared frontier's queue leases, as the OpenSearch frontier offers them."""

    leases_queues = True

    def __init__(self, rows):
        self.rows = rows  # (url, md, key)
        self.leases = {}
        self.released = []

    def due(self, now, max_buckets, per_bucket, exclude=()):
        out = [r for r in self.rows if r[0] not in exclude]
        for _, _, key in out:
            self.leases[key] = now
        return out

    def release(self, key, now, served=True, defer=False):
        self.leases.pop(key, None)
        self.released.append((key, served))
        self.deferred = defer

    def release_all(self, now):
        self.released.extend((k, False) for k in self.leases)
        self.leases.clear()

    def close(self):
        pass


def test_a_leased_queue_is_released_when_every_url_of_its_round_is_done(conf):
    rows = [("http://a.org/1", {}, "a.org"), ("http://a.org/2", {}, "a.org"),
            ("http://b.org/1", {}, "b.org")]
    fr = LeasedFrontier(rows)
    feed = FrontierFeed({**conf, "spout.buffer.size": 2}, "me", Shard(1, 2),
                        opener=lambda c, owner=None: fr)
    got = drain(feed, NOW)
    # leases, not the shard, decide; b.org did not fit in the buffer: given back unserved
    assert got == ["http://a.org/1", "http://a.org/2"] and fr.released == [("b.org", False)]
    assert feed.gauges()["queues_leased"] == 1
    feed.ack("http://a.org/1", NOW + 1)
    assert fr.released == [("b.org", False)]
    feed.fail("http://a.org/2", NOW + 1)
    assert fr.released[-1] == ("a.org", True)
    assert fr.deferred  # the round's end is written with the next ones (one request)
    # an acked URL stays out of queries for spout.ttl.purgatory (the index refreshes later)
    assert "http://a.org/1" not in drain(feed, NOW + 5)
    feed.close()
    assert fr.leases == {}


def test_lease_owner_is_unique_per_task_and_stable_on_a_cluster():
    cluster = {"storm.cluster.mode": "distributed", "storm.id": "explorative-1-1700000000"}
    assert lease_owner(cluster, "spout", 3) == "explorative-1-1700000000/spout/3"
    assert lease_owner({**cluster, "frontier.crawler.id": "dc1"}, "spout", 3) == "dc1/spout/3"
    local = lease_owner({"storm.id": "x"}, "spout", 3)
    assert local.endswith("/spout/3") and local.split("/")[0].count(":") == 1  # host:pid


# --- the status updater's side -------------------------------------------------------------------
def test_the_status_updater_tells_the_frontier_its_statuses_are_the_rounds_results(conf):
    """The OpenSearch frontier dates a queue from the new URLs the status updater writes and
    from the end of each round, not from every result of a round (owler.frontier.opensearch)."""
    class Shared:
        round_results = False

        def apply_updates(self, updates):
            return []

    opened = Shared()
    writer = FrontierWriter(conf, StatusUpdater(conf, DefaultScheduler(conf)),
                            opener=lambda c: opened)
    assert writer.frontier is opened and opened.round_results is True
    assert opened.carry_queues is True  # its bulks carry the queues' lowering (FrontierWriter.idle)


def test_the_frontier_writer_remembers_only_what_was_written(conf):
    updater = StatusUpdater(conf, DefaultScheduler(conf))

    class Partial:
        def apply_updates(self, updates):
            return [1]

    writer = FrontierWriter(conf, updater, opener=lambda c: Partial())
    ups = [StatusUpdate(f"http://a.org/{i}", Status.DISCOVERED) for i in range(3)]
    assert writer.write(ups) == [1]
    assert updater.known("http://a.org/0") and not updater.known("http://a.org/1")


def test_the_frontier_writer_reopens_an_unavailable_frontier_at_most_every_few_seconds(conf):
    told, calls = [], []

    def opener(c):
        calls.append(1)
        raise FrontierError("locked")

    writer = FrontierWriter(conf, StatusUpdater(conf, DefaultScheduler(conf)),
                            on_unavailable=told.append, opener=opener)
    assert len(told) == 1 and writer.frontier is None
    with pytest.raises(FrontierUnavailable):
        writer.write([])
    assert len(calls) == 1  # within RETRY_SECS: not tried again
    writer.retry_at = 0
    with pytest.raises(FrontierUnavailable):
        writer.write([])
    assert len(calls) == 2 and len(told) == 2


def test_commit_settings_take_stormcrawler_bulk_keys_for_opensearch():
    assert commit_settings({}) == (5000, 0.5)
    sq = {"status.updater.batch.size": 10, "status.updater.commit.interval": 2,
          "opensearch.status.bulkActions": 99, "opensearch.status.flushInterval": "5s"}
    assert commit_settings(sq) == (10, 2.0)
    assert commit_settings({**sq, "frontier.backend": "opensearch"}) == (99, 5.0)
    assert commit_settings({"frontier.backend": "opensearch",
                            "opensearch.status.flushInterval": "250ms"}) == (5000, 0.25)


def test_tag_rules_are_one_reading_of_frontier_tags():
    assert tag_rules({"isSitemap=true": "Sitemap", " a = b ": "T"}) == [
        ("isSitemap", "true", "Sitemap"), ("a", "b", "T")]
    assert tag_rules(None) == [] and tag_rules("") == []
    for bad in (["isSitemap=true"], {"isSitemap": "Sitemap"}):
        with pytest.raises(ValueError, match="frontier.tags"):
            tag_rules(bad)
