"""The snapshot of the OpenSearch frontier's figures (owler.frontier.opensearch_stats): the due
count to the minute, how long it holds, and its document."""

from __future__ import annotations

from owler.frontier.opensearch_stats import MINUTES, Snapshot


def snap(**kw) -> Snapshot:
    base = dict(taken=1000.0, seq=42, counts={"DISCOVERED": 5, "FETCHED": 7}, due_before=3,
                minutes=[1, 0, 2] + [0] * (MINUTES - 3), keys=4, top_hosts=[("a", 8), ("b", 4)],
                delayed=[("a", 900.5)], seconds=0.25)
    base.update(kw)
    return Snapshot(**base)


def test_due_counts_the_minutes_that_began_by_now():
    s = snap()
    assert s.due(900.0) == 3 and s.due(1000.0) == 3
    assert s.due(1000.001) == 4  # the first minute after taken began: its URLs are counted
    assert s.due(1059.9) == 4 and s.due(1060.0) == 4  # the second minute holds none
    assert s.due(1120.0) == 6 and s.due(1000 + 60 * MINUTES - 1) == 6
    assert s.total == 12


def test_a_snapshot_covers_its_minutes_only():
    s = snap()
    assert s.covers(1000.0) and s.covers(1000 + 60 * MINUTES - 0.1)
    assert not s.covers(1000 + 60 * MINUTES)


def test_the_document_reads_back_as_written():
    s = snap(writes_since=9)
    doc = s.to_doc()
    assert "writes_since" not in doc and doc["top_hosts"] == [["a", 8], ["b", 4]]
    back = Snapshot.from_doc(doc)
    assert back == snap() and back.writes_since is None


def test_snapshots_come_no_oftener_than_ten_times_their_cost():
    from owler.frontier.opensearch_stats import StatsKeeper

    keeper = StatsKeeper({"frontier.stats.interval": 30}, None, "st", "st_leases", "o",
                         lambda: None)
    assert keeper.period(snap(seconds=0.25)) == 30
    assert keeper.period(snap(seconds=12.0)) == 120
