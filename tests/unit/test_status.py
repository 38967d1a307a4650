"""StatusUpdater (AbstractStatusUpdaterBolt logic) and metadata transfer to outlinks."""

from __future__ import annotations

import pytest

from owler.conf import ConfError
from owler.constants import Status
from owler.frontier import DEFAULT_KEY
from owler.frontier.sqlite import SQLiteFrontier
from owler.scheduler import DefaultScheduler
from owler.status import MetadataTransfer, StatusUpdater, transfer_metadata

NOW = 1_700_000_000.0
CONF = {
    "fetchInterval.default": 1440, "fetchInterval.fetch.error": 120, "fetchInterval.error": -1,
    "max.fetch.errors": 3,
    "metadata.persist": ["_redirTo", "error.cause", "error.source", "isSitemap", "parse.*"],
    "metadata.transfer": ["tag"],
    "metadata.track.path": True, "metadata.track.depth": True,
    "status.updater.cache.size": 3,
}


def updater(**over):
    conf = {**CONF, **over}
    return StatusUpdater(conf, DefaultScheduler(conf), "byDomain")


def test_fetch_errors_count_up_then_error():
    u = updater()
    md = {}
    statuses = []
    for _ in range(3):
        up = u.to_update("http://www.a.com/x", md, Status.FETCH_ERROR, NOW)
        statuses.append(up.status)
        md = up.metadata  # what the frontier stored comes back with the next fetch
    assert statuses == [Status.FETCH_ERROR, Status.FETCH_ERROR, Status.ERROR]
    assert md["fetch.error.count"] == ["3"]
    assert md["error.cause"] == ["maxFetchErrors"]
    assert up.next_fetch_date is None  # fetchInterval.error = -1
    first = updater().to_update("http://a.com/", {}, Status.FETCH_ERROR, NOW)
    assert first.next_fetch_date == NOW + 120 * 60


def test_a_throttled_fetch_is_retried_after_the_hold_and_blocks_its_queue():
    u = updater()
    md = {"fetch.statusCode": ["429"], "scheduler.delay.mins": ["0.5"],
          "_queue.block.until": ["1700000030.0"]}
    w = u.to_update("http://a.example/x", md, Status.FETCH_ERROR, 1_700_000_000.0)
    assert w.next_fetch_date == 1_700_000_030.0  # when the hold ends, not fetchInterval.fetch.error
    assert w.block_until == 1_700_000_030.0 and w.key == "a.example"
    assert "_queue.block.until" not in w.metadata and "scheduler.delay.mins" not in w.metadata
    assert u.to_update("http://a.example/y", {}, Status.FETCHED, 0.0).block_until is None


def test_max_fetch_errors_one():
    up = updater(**{"max.fetch.errors": 1}).to_update("http://a.com/", {}, "FETCH_ERROR", NOW)
    assert up.status == Status.ERROR


def test_fetched_clears_errors_and_count():
    md = {"fetch.error.count": ["2"], "error.cause": ["x"], "error.source": ["y"],
          "error.message": ["z"], "isSitemap": ["false"]}
    up = updater().to_update("http://a.com/", md, Status.FETCHED, NOW)
    assert up.metadata == {"isSitemap": ["false"]}
    assert up.next_fetch_date == NOW + 1440 * 60
    assert md["fetch.error.count"] == ["2"]  # the caller's dict is untouched


def test_error_keeps_cause():
    up = updater().to_update("http://a.com/", {"error.cause": ["robots.txt"]}, Status.ERROR, NOW)
    assert up.metadata == {"error.cause": ["robots.txt"]} and up.next_fetch_date is None


def test_only_persisted_keys_are_stored():
    md = {"tag": ["t"], "parse.title": ["T"], "parse.lang": ["de"], "protocol.server": ["x"],
          "depth": ["1"], "url.path": ["http://p/"], "max.depth": ["4"], "_redirTo": ["http://b/"],
          "random": ["r"]}
    up = updater().to_update("http://a.com/", md, Status.REDIRECTION, NOW)
    assert set(up.metadata) == {"tag", "parse.title", "parse.lang", "depth", "url.path",
                                "max.depth", "_redirTo"}


def test_track_keys_not_persisted_when_off():
    up = updater(**{"metadata.track.path": False, "metadata.track.depth": False}).to_update(
        "http://a.com/", {"depth": ["1"], "url.path": ["x"]}, Status.FETCHED, NOW)
    assert up.metadata == {}


def test_discovery_date_only_when_persisted():
    u = updater(**{"metadata.persist": ["discoveryDate", "lastProcessedDate"]})
    d = u.to_update("http://a.com/", {}, Status.DISCOVERED, NOW)
    assert d.metadata == {"discoveryDate": ["2023-11-14T22:13:20Z"]}
    f = u.to_update("http://a.com/", {}, Status.FETCHED, NOW)
    assert f.metadata == {"lastProcessedDate": ["2023-11-14T22:13:20Z"]}
    assert "discoveryDate" not in updater().to_update("http://a.com/", {}, "DISCOVERED", NOW).metadata


def test_key_and_discovered_now():
    up = updater().to_update("http://www.bbc.co.uk/news", {}, Status.DISCOVERED, NOW)
    assert up.key == "bbc.co.uk" and up.next_fetch_date == NOW
    host = StatusUpdater(CONF, DefaultScheduler(CONF), "byHost")
    assert host.to_update("http://www.bbc.co.uk/", {}, Status.DISCOVERED, NOW).key == "www.bbc.co.uk"
    assert updater().to_update("not a url", {}, Status.ERROR, NOW).key == DEFAULT_KEY
    with pytest.raises(ConfError, match="partition"):
        StatusUpdater(CONF, DefaultScheduler(CONF), "byMoon").to_update("http://a.com/", {}, "ERROR", NOW)
    with pytest.raises(ValueError):
        updater().to_update("http://a.com/", {}, "SLEEPING", NOW)


def test_date_rounding():
    up = updater().to_update("http://a.com/", {}, Status.FETCHED, NOW + 0.7)
    assert up.next_fetch_date == NOW + 1 + 1440 * 60
    up = updater(**{"status.updater.unit.round.date": "HOUR"}).to_update(
        "http://a.com/", {}, Status.FETCHED, NOW)
    assert up.next_fetch_date % 3600 == 0
    with pytest.raises(ConfError):
        updater(**{"status.updater.unit.round.date": "WEEK"})


def test_cache_only_after_commit_and_lru_bound():
    u = updater()
    a = u.to_update("http://a.com/", {}, Status.DISCOVERED, NOW)
    assert a is not None
    # not committed yet: a second DISCOVERED must still be written
    assert u.to_update("http://a.com/", {}, Status.DISCOVERED, NOW) is not None
    u.committed([a])
    assert u.to_update("http://a.com/", {}, Status.DISCOVERED, NOW) is None
    assert u.cache_hits == 1
    # other statuses are never skipped
    assert u.to_update("http://a.com/", {}, Status.FETCHED, NOW) is not None
    # LRU of 3: a.com was used last, so b.com is evicted first
    u.committed([u.to_update(f"http://{h}.com/", {}, "DISCOVERED", NOW) for h in ("b", "c")])
    u.known("http://a.com/")
    u.committed([u.to_update("http://d.com/", {}, "DISCOVERED", NOW), None])
    assert u.cache_len == 3
    assert u.to_update("http://b.com/", {}, "DISCOVERED", NOW) is not None
    assert u.to_update("http://a.com/", {}, "DISCOVERED", NOW) is None


def test_cache_off():
    u = updater(**{"status.updater.use.cache": False})
    a = u.to_update("http://a.com/", {}, Status.DISCOVERED, NOW)
    u.committed([a])
    assert u.to_update("http://a.com/", {}, Status.DISCOVERED, NOW) is not None


def test_transfer_metadata_for_outlinks():
    parent = {"tag": ["t1", "t2"], "depth": ["2"], "url.path": ["http://root/"],
              "parse.title": ["not transferred"], "max.depth": ["5"]}
    md = transfer_metadata("http://parent/", parent, CONF)
    assert md == {"tag": ["t1", "t2"], "depth": ["3"], "url.path": ["http://root/", "http://parent/"],
                  "max.depth": ["5"]}
    assert parent["url.path"] == ["http://root/"]  # parent untouched
    assert transfer_metadata("http://p/", {}, CONF) == {"depth": ["1"], "url.path": ["http://p/"]}
    assert transfer_metadata("http://p/", {"depth": ["x"]}, CONF)["depth"] == ["1"]
    # the target of a redirect counts the redirects that led to it; a page's own links start again
    hop1 = transfer_metadata("http://p/", {"_redirTo": ["http://q/"]}, CONF)
    assert hop1["redirect.hops"] == ["1"]
    hop3 = transfer_metadata("http://q/", {"_redirTo": ["http://r/"], "redirect.hops": ["2"]}, CONF)
    assert hop3["redirect.hops"] == ["3"]
    assert "redirect.hops" not in transfer_metadata("http://r/", {"redirect.hops": ["3"]}, CONF)
    assert MetadataTransfer(CONF).filter(hop3)["redirect.hops"] == ["3"]  # stored with the URL
    off = {**CONF, "metadata.track.path": False, "metadata.track.depth": False, "metadata.transfer": []}
    assert transfer_metadata("http://p/", parent, off) == {}


def test_transfer_wildcards():
    mt = MetadataTransfer({"metadata.transfer": "a.*, b", "metadata.track.path": False,
                           "metadata.track.depth": False})
    assert mt.for_outlink("http://p/", {"a.x": ["1"], "a.y": ["2"], "b": ["3"], "bb": ["4"]}) == {
        "a.x": ["1"], "a.y": ["2"], "b": ["3"]}
    assert mt.filter({"fetch.error.count": ["1"], "c": ["2"]}) == {"fetch.error.count": ["1"]}


def test_updater_with_frontier_end_to_end(tmp_path):
    """DISCOVERED never overwrites FETCHED through the whole path."""
    u = updater()
    fr = SQLiteFrontier(tmp_path / "f.sqlite")
    fetched = u.to_update("http://a.com/", {"parse.title": ["T"]}, Status.FETCHED, NOW)
    fr.apply_updates([fetched])
    u.committed([fetched])
    disc = updater().to_update("http://a.com/", {}, Status.DISCOVERED, NOW)  # fresh cache
    fr.apply_updates([disc])
    rec = fr.get("http://a.com/")
    assert rec.status == Status.FETCHED and rec.metadata == {"parse.title": ["T"]}
    assert rec.next_fetch_date == NOW + 86400
    fr.close()


def test_one_tuple_of_either_stream_becomes_writes_and_counts():
    u = updater()
    ups, counts = u.for_tuple("status", ["http://a.com/", {"fetch.time": [str(NOW - 3600)]},
                                         "FETCHED"], NOW)
    assert counts == {"FETCHED": 1} and ups[0].next_fetch_date == NOW - 3600 + 1440 * 60
    u.committed(ups)
    ups, counts = u.for_tuple("status", ["http://a.com/", {}, "DISCOVERED"], NOW)
    assert ups == [] and counts == {"DISCOVERED": 1, "cached": 1}
    ups, counts = u.for_tuple("outlinks", ["http://a.com/", {"depth": ["0"]},
                                           "http://a.com/\nhttp://b.com/x\tB"], NOW)
    assert [x.url for x in ups] == ["http://b.com/x"] and ups[0].metadata["depth"] == ["1"]
    assert counts == {"discovered": 2, "cached": 1}
    for bad in (["http://a.com/", {}, "GONE"], ["http://a.com/", {}]):
        with pytest.raises((ValueError, TypeError)):
            u.for_tuple("status", bad, NOW)
    with pytest.raises(TypeError):
        u.for_tuple("outlinks", ["http://a.com/", {}, 42], NOW)
