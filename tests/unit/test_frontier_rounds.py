"""Rounds (``frontier.queue.round.delay``, OWLer's at least five minutes between two rounds on a
queue) on the SQLite frontier — on every query path, across spout processes sharing the file and
across restarts, for the tasks of a split spout — and in the URLFrontier service itself. The
frontier and the service are told the time (a clock the test moves), so the rounds are checked at
the instants around their ends, not slept through."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading

import grpc
import pytest

from owler.constants import Status
from owler.frontier import StatusUpdate
from owler.frontier.feed import FrontierFeed
from owler.frontier.sqlite import SQLiteFrontier
from owler.frontier.urlfrontier_api import STATUS_KEY, pb
from owler.task.shard import Shard
from owler.urlfrontier.service import FrontierService

NOW = 1_750_000_000.0
DELAY = 300.0
RULES = {"frontier.tags": {"s=1": "Sitemap", "f=1": "FamilyFriendly"}}
PATHS = {  # the three queries of SQLiteFrontier.due(): no interest, any-of tags, required tags
    "plain": {},
    "any-of": {"frontier.interest.tags": ["Sitemap"]},
    "required": {"frontier.interest.required.tags": ["Sitemap", "FamilyFriendly"]},
}


def upd(url, nfd=NOW - 10, md=None, status=Status.DISCOVERED):
    return StatusUpdate(url, status, md if md is not None else {"s": ["1"], "f": ["1"]}, nfd,
                        url.split("/")[2])


def keys_of(rows):
    return sorted({k for _, _, k in rows})


@pytest.fixture
def path(tmp_path):
    return tmp_path / "f.sqlite"


@pytest.mark.parametrize("query", PATHS)
def test_a_queue_is_not_served_again_before_the_delay_since_its_round_began(path, query):
    conf = {**RULES, **PATHS[query], "frontier.queue.round.delay": DELAY}
    with SQLiteFrontier(path, conf) as f:
        f.apply_updates([upd(f"http://q{k}.example/{i}", NOW - 10 - i) for k in range(3)
                         for i in range(5)])
        first = f.due(NOW, 10, 2)  # a round of 2 URLs on each queue
        assert keys_of(first) == ["q0.example", "q1.example", "q2.example"] and len(first) == 6
        rounds = f.conn.execute("SELECT key, began, until FROM rounds ORDER BY key").fetchall()
        assert rounds == [(f"q{k}.example", NOW, NOW + DELAY) for k in range(3)]
        served = {u for u, _, _ in first}  # in flight from here on
        assert f.due(NOW + 1, 10, 2, exclude=served) == []
        assert f.due(NOW + DELAY - 0.001, 10, 2, exclude=served) == []
        assert f.due_count(NOW + 1) == 15  # (due, only not served: the count says so)
        # a URL written to a queue in its round waits with the others
        f.apply_updates([upd("http://q0.example/new", NOW)])
        assert f.due(NOW + 2, 10, 2, exclude=served) == []
        second = f.due(NOW + DELAY, 10, 2, exclude=served)
        assert keys_of(second) == keys_of(first) and len(second) == 6
        assert not served & {u for u, _, _ in second}
        assert f.conn.execute("SELECT DISTINCT began FROM rounds").fetchall() == [(NOW + DELAY,)]
        # one queue asked for (the service's way): its round begins; the rounds that ended are
        # dropped
        assert keys_of(f.due(NOW + 2 * DELAY - 1, 10, 2, key="q1.example")) == []
        assert keys_of(f.due(NOW + 2 * DELAY, 10, 2, key="q1.example")) == ["q1.example"]
        assert f.conn.execute("SELECT key, began, until FROM rounds").fetchall() == [
            ("q1.example", NOW + 2 * DELAY, NOW + 3 * DELAY)]


def test_rounds_are_kept_in_the_file_for_every_process_and_across_restarts(path):
    conf = {**RULES, "frontier.queue.round.delay": DELAY}
    with SQLiteFrontier(path, conf) as f:
        f.apply_updates([upd(f"http://a.example/{i}") for i in range(4)])
        assert len(f.due(NOW, 10, 2)) == 2
    # the spout restarted (nothing in flight any more): still the same round
    with SQLiteFrontier(path, conf) as again:
        assert again.due(NOW + DELAY - 0.001, 10, 2) == []
        # another process on the file, without rounds of its own, honours this one's
        with SQLiteFrontier(path, RULES) as other:
            assert other.due(NOW + 1, 10, 2) == []
            assert len(other.due(NOW + DELAY, 10, 2)) == 2
            # and begins none: the queue is free for the next query, its own or another's
            assert other.conn.execute("SELECT began FROM rounds").fetchall() == [(NOW,)]
        assert len(again.due(NOW + DELAY, 10, 2)) == 2
        assert again.conn.execute("SELECT began FROM rounds").fetchall() == [(NOW + DELAY,)]
        # a queue deleted (DeleteQueue, DeleteCrawl) leaves no round behind
        again.delete("a.example")
        assert again.conn.execute("SELECT COUNT(*) FROM rounds").fetchone()[0] == 0


def _serve_rounds(path: str, conf: dict, start, out) -> None:
    """A spout process: queries until three queries in a row give nothing, all at one instant
    (no round ever ends); the queues it was given."""
    try:
        f = SQLiteFrontier(path, conf)
        got, empty = [], 0
        start.wait(300)  # every process open, then all at once
        while empty < 3:
            rows = f.due(NOW, 3, 1, exclude={u for u, _ in got})
            got += [(u, k) for u, _, k in rows]
            empty = 0 if rows else empty + 1
        f.close()
        out.put(got)
    except BaseException as exc:  # the test says what went wrong, at once
        out.put(repr(exc))


def test_spout_processes_sharing_the_file_never_begin_a_round_on_one_queue_together(path):
    """Four processes query the file at once, each three queues per query at the same instant:
    each of the 200 queues is served in exactly one round, by one of them."""
    conf = {**RULES, "frontier.queue.round.delay": DELAY, "frontier.sqlite.busy.timeout": 120}
    with SQLiteFrontier(path, conf) as f:
        f.apply_updates([upd(f"http://q{k}.example/{i}") for k in range(200) for i in range(3)])
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_serve_rounds, args=(str(path), conf, start, out))
             for _ in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]  # a hang guard, not a duration
    assert all(isinstance(got, list) for got in results), results
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    served = [k for got in results for _, k in got]
    assert sorted(served) == sorted(f"q{k}.example" for k in range(200)), \
        [len(got) for got in results]


def test_a_query_that_begins_rounds_keeps_every_other_query_out_until_it_is_done(path):
    """What makes the test above hold, shown step by step: while one query has chosen its queues
    and not yet recorded their rounds, another process's query cannot read the file's queues (it
    waits for the lock, here until its busy timeout); once the first is done, the second gets the
    other queues only."""
    conf = {**RULES, "frontier.queue.round.delay": DELAY}
    with SQLiteFrontier(path, conf) as f:
        f.apply_updates([upd(f"http://q{k}.example/0") for k in range(4)])
    second = SQLiteFrontier(path, {**conf, "frontier.sqlite.busy.timeout": 0.5})
    chosen, go_on = threading.Event(), threading.Event()
    got: dict = {}

    def first_query() -> None:  # (a connection of its own, on its own thread)
        try:
            with SQLiteFrontier(path, conf) as first:
                begin = first._begin_rounds

                def paused(cur, keys, now):
                    got["chosen"] = sorted(keys)
                    chosen.set()
                    assert go_on.wait(300)
                    begin(cur, keys, now)

                first._begin_rounds = paused
                got["rows"] = first.due(NOW, 2, 1)
        finally:
            chosen.set()

    worker = threading.Thread(target=first_query)
    worker.start()
    try:
        assert chosen.wait(300), "the first query did not get to its rounds (hang?)"
        assert got["chosen"] == ["q0.example", "q1.example"]
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            second.due(NOW, 10, 1)
    finally:
        go_on.set()
        worker.join(300)
    assert keys_of(got["rows"]) == ["q0.example", "q1.example"]
    assert keys_of(second.due(NOW, 10, 1)) == ["q2.example", "q3.example"]
    second.close()


def test_the_tasks_of_a_split_spout_begin_rounds_on_their_own_queues_only(path):
    """A task's query leaves the other tasks' queues out (the feed's skip_keys): were they
    served and dropped, their rounds would begin and the owner would get nothing for the delay."""
    conf = {"frontier.sqlite.path": str(path), "partition.url.mode": "byHost",
            "frontier.queue.round.delay": DELAY, "spout.max.urls.per.bucket": 2}
    urls = [f"http://h{k}.example.org/{i}" for k in range(20) for i in range(3)]
    with SQLiteFrontier(path, conf) as f:
        f.inject([(u, {}) for u in urls], NOW - 10)
    feeds = [FrontierFeed(conf, f"t{i}", Shard(i, 2)) for i in range(2)]
    try:
        got = []
        for feed in feeds:
            out = []
            while (nxt := feed.next(NOW)) is not None:
                out.append(nxt[0])
            got.append(out)
        keys = [{u.split("/")[2] for u in out} for out in got]
        assert keys[0] and keys[1] and not keys[0] & keys[1]
        assert keys[0] | keys[1] == {f"h{k}.example.org" for k in range(20)}
        assert all(feeds[i].shard.owns(k) for i in (0, 1) for k in keys[i])
        assert len(got[0]) + len(got[1]) == 40  # a round of 2 on each of the 20 queues
        with SQLiteFrontier(path, conf) as f:
            assert {k for (k,) in f.conn.execute("SELECT key FROM rounds")} == keys[0] | keys[1]
    finally:
        for feed in feeds:
            feed.close()


# ---- the URLFrontier service's own rule --------------------------------------------------------

class Context:
    """What the service's methods use of a gRPC call's context."""

    def peer(self):
        return "ipv4:127.0.0.1:50000"

    def is_active(self):
        return True

    def abort(self, code, details):
        raise grpc.RpcError(f"{code}: {details}")


@pytest.mark.parametrize("frontier_rounds", [False, True], ids=["service-alone", "both"])
def test_the_service_serves_a_queue_again_only_a_round_delay_after_its_round_began(
        tmp_path, frontier_rounds):
    """``frontier.queue.round.delay`` on top of the service's own rounds (not again while a URL
    of the round is held, nor before the queue's delay since it ended). ``service-alone``: the
    frontier under the service keeps no rounds of its own, the service's rule alone holds."""
    clock = [NOW]
    conf = {"frontier.sqlite.path": str(tmp_path / "f.sqlite"), "partition.url.mode": "byHost",
            "urlfrontier.default.delay": 1.0, "frontier.queue.round.delay": 60.0}
    svc = FrontierService(conf, clock=lambda: clock[0])
    ctx = Context()
    try:
        if not frontier_rounds:
            svc._run(lambda: setattr(svc.frontier, "round_delay", 0.0))
        svc._run(lambda: svc.frontier.inject([(f"http://a.example/{i}", {}) for i in range(6)],
                                             NOW - 10))

        def get(at):
            clock[0] = at
            return [u.url for u in svc.GetURLs(pb.GetParams(max_urls_per_queue=2,
                                                            delay_requestable=30), ctx)]

        def done(urls, at):  # the crawler's statuses: the round ends
            clock[0] = at
            items = []
            for u in urls:
                info = pb.URLInfo(url=u, key="a.example")
                info.metadata[STATUS_KEY].values.append("FETCHED")
                items.append(pb.URLItem(known=pb.KnownURLItem(info=info, refetchable_from_date=0)))
            acks = list(svc.PutURLs(iter(items), ctx))
            assert [a.status for a in acks] == [pb.AckMessage.Status.Value("OK")] * len(urls)

        first = get(NOW)
        assert len(first) == 2
        assert svc.state().round_began == {"a.example": NOW}
        done(first, NOW + 5)  # the round ended; the queue's delay (1 s) passes long before 60 s
        assert get(NOW + 6) == [] and get(NOW + 60 - 0.001) == []
        second = get(NOW + 60)
        assert len(second) == 2 and not set(second) & set(first)
        assert svc.state().round_began == {"a.example": NOW + 60}
        # rounds do not end the older rules: the round's URLs are held until their statuses come
        assert get(NOW + 121) == []
        done(second, NOW + 121)
        assert get(NOW + 121.5) == []  # the queue's own delay (1 s) since the round ended
        assert len(get(NOW + 122)) == 2
        if frontier_rounds:
            with SQLiteFrontier(conf["frontier.sqlite.path"], conf) as f:
                assert f.conn.execute("SELECT began, until FROM rounds").fetchall() == [
                    (NOW + 122, NOW + 182)]
    finally:
        svc.close()
