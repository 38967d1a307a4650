"""owler.fetch.politeness.FetchQueues with a fake clock."""

from __future__ import annotations

import random

import pytest

from owler.fetch.politeness import FetchQueues


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(clock=None, **conf) -> FetchQueues:
    base = {"fetcher.server.delay": 1.0, "fetcher.server.min.delay": 0.0,
            "fetcher.threads.per.queue": 1}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return FetchQueues(base, clock=clock or Clock())


def drain_ready(q: FetchQueues, now: float) -> list:
    out = []
    while (nxt := q.next_ready(now)) is not None:
        out.append(nxt)
    return out


def test_round_robin_across_three_queues():
    q = make(fetcher_server_delay=0.0)
    for i in range(3):
        for key in "abc":
            assert q.add(key, f"{key}{i}", now=0.0)
    order = []
    for _ in range(3):
        got = drain_ready(q, 0.0)
        assert len(got) == 3  # one per queue: each is busy until finished
        order += [item for _, item in got]
        for key, _ in got:
            q.finish(key, 0.0)
    assert order == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
    assert q.size == 0 and q.in_flight == 0 and q.num_queues == 0


def test_busy_queue_goes_behind_waiting_queues():
    # two slots per queue: a big queue still alternates with the others instead of hogging
    q = make(fetcher_threads_per_queue=2)
    for i in range(5):
        q.add("big", f"big{i}", now=0.0)
    q.add("x", "x0", now=0.0)
    q.add("y", "y0", now=0.0)
    got = [item for _, item in drain_ready(q, 0.0)]
    assert got == ["big0", "x0", "y0", "big1"]


def test_server_delay_from_end_of_fetch_exactly():
    clock = Clock()
    q = make(clock)
    for i in range(3):
        assert q.add("h", f"u{i}")  # now from the injected clock
    assert q.next_ready(0.0) == ("h", "u0")
    assert q.next_ready(0.0) is None  # one fetch per queue at a time
    assert q.next_wakeup(0.0) is None  # nothing can become ready until a finish
    q.finish("h", 0.3)  # the fetch took 0.3 s: the delay counts from its end
    assert q.next_wakeup(0.3) == pytest.approx(1.3)
    assert q.next_ready(1.2999) is None
    assert q.next_ready(1.3) == ("h", "u1")
    q.finish("h", 2.0)
    assert q.next_allowed("h") == pytest.approx(3.0)
    assert q.next_ready(2.9) is None and q.next_ready(3.0) == ("h", "u2")


def test_crawl_delay_overrides_server_delay_and_asap():
    q = make()
    for i in range(4):
        q.add("h", i, now=0.0)
    q.add("other", "o", now=0.0)
    assert q.next_ready(0.0) == ("h", 0)
    q.set_crawl_delay("h", 5.0)
    q.finish("h", 2.0)
    assert q.next_allowed("h") == 7.0
    assert q.next_ready(0.0) == ("other", "o")  # other queues unaffected
    assert q.next_ready(6.99) is None
    assert q.next_ready(7.0) == ("h", 1)
    q.finish("h", 8.0, delay=0.0)  # asap (robots denial)
    assert q.next_ready(8.0) == ("h", 2)
    q.set_crawl_delay("h", None)  # back to fetcher.server.delay
    q.finish("h", 9.0)
    assert q.next_allowed("h") == 10.0


def test_server_delay_force_raises_short_crawl_delay():
    q = make(fetcher_server_delay_force=True, fetcher_server_delay=2.0)
    q.add("h", 1, now=0.0)
    q.add("h", 2, now=0.0)
    q.next_ready(0.0)
    q.set_crawl_delay("h", 0.5)
    q.finish("h", 1.0)
    assert q.next_allowed("h") == 3.0


def test_threads_per_queue_two_with_min_delay():
    q = make(fetcher_threads_per_queue=2, fetcher_server_min_delay=0.5,
             fetcher_server_delay=10.0)
    for i in range(4):
        q.add("h", i, now=0.0)
    assert [i for _, i in drain_ready(q, 0.0)] == [0, 1]
    assert q.queue_in_progress("h") == 2 and q.in_flight == 2
    q.finish("h", 1.0)  # min delay, not server delay, with 2 threads per queue
    assert q.next_wakeup(1.0) == 1.5
    assert q.next_ready(1.49) is None
    assert q.next_ready(1.5) == ("h", 2)
    assert q.next_ready(1.5) is None  # both slots busy again
    q.finish("h", 2.0)
    q.finish("h", 2.2)  # the later end wins
    assert q.next_ready(2.6) is None
    assert q.next_ready(2.7) == ("h", 3)


def test_max_urls_in_queues_back_pressure():
    q = make(fetcher_max_urls_in_queues=3, fetcher_server_delay=0.0)
    assert all(q.add(k, k, now=0.0) for k in ("a", "b", "c"))
    assert q.add("d", "d", now=0.0) is False
    assert q.size == 3
    assert q.next_ready(0.0) == ("a", "a")
    assert q.add("d", "d", now=0.0) is False  # in-flight URLs count too (StormCrawler)
    q.finish("a", 0.1)
    assert q.add("d", "d", now=0.1) is True
    assert q.size == 3 and q.in_flight == 0


def test_max_queue_size_per_queue():
    q = make(fetcher_max_queue_size=2)
    assert q.add("a", 1, now=0) and q.add("a", 2, now=0)
    assert q.add("a", 3, now=0) is False
    assert q.add("b", 1, now=0) is True


@pytest.mark.parametrize("indexed", [True, False])
def test_expire_items_waiting_too_long(indexed):
    q = make(fetcher_timeout_queue=10 if indexed else -1)
    q.add("a", "a1", now=0.0)
    q.add("a", "a2", now=1.0)
    q.add("c", "c1", now=2.0)
    q.add("b", "b1", now=5.0)
    assert q.next_ready(2.0) == ("a", "a1")  # in flight: never expired
    assert q.expire(11.5, 10) == ["a2"]
    assert q.queue_length("a") == 0 and q.size == 2
    assert q.expire(12.5, 10) == ["c1"]
    assert q.num_queues == 2  # c removed; a still has a fetch in flight
    assert q.expire(100, -1) == []
    q.finish("a", 13.0)
    assert q.num_queues == 1 and q.next_ready(13.0) == ("b", "b1")
    assert q.size == 0


def test_empty_queue_removed_but_delay_remembered():
    q = make()
    q.add("h", 1, now=0.0)
    assert q.next_ready(0.0) == ("h", 1)
    q.finish("h", 1.0)
    assert q.num_queues == 0
    q.add("h", 2, now=1.5)  # arrives before the delay has passed
    assert q.next_ready(1.5) is None
    assert q.next_wakeup(1.5) == 2.0
    assert q.next_ready(2.0) == ("h", 2)


def test_unknown_finish_and_empty_queues():
    q = make()
    assert q.next_ready(0.0) is None and q.next_wakeup(0.0) is None
    q.finish("nope", 1.0)  # ignored
    q.set_crawl_delay("nope", 3)
    assert q.in_flight == 0 and len(q) == 0


def test_simulation_respects_delays_and_slots():
    rng = random.Random(7)
    delays = {"a": 1.0, "b": 3.0}
    q = make(fetcher_server_delay=1.0)
    q.add("b", "seed", now=0.0)
    q.set_crawl_delay("b", 3.0)
    now, pending, starts, ends = 0.0, [], {}, {}
    fetched = 0
    for step in range(3000):
        now += rng.choice([0.01, 0.05, 0.2])
        for _ in range(rng.randint(0, 2)):
            q.add(rng.choice("abcde"), step, now=now)
        for key, end in [p for p in pending if p[1] <= now]:
            pending.remove((key, end))
            q.finish(key, end)
            ends[key] = end
        while (nxt := q.next_ready(now)) is not None:
            key, _ = nxt
            assert all(k != key for k, _ in pending)  # one fetch per queue
            if key in ends:
                assert now >= ends[key] + delays.get(key, 1.0) - 1e-9
            starts.setdefault(key, []).append(now)
            pending.append((key, now + rng.uniform(0.05, 0.8)))
            fetched += 1
            if key == "b":
                q.set_crawl_delay("b", 3.0)
        wake = q.next_wakeup(now)
        assert wake is None or wake > now  # everything ready was taken
    assert fetched > 200 and set(starts) == set("abcde")


def test_drain_takes_the_waiting_items_and_keeps_the_hold():
    from owler.fetch.politeness import FetchQueues

    q = FetchQueues({"fetcher.server.delay": 1.0})
    for i in range(3):
        q.add("h", i, now=0.0)
    q.add("other", "x", now=0.0)
    assert q.next_ready(0.0)[0] == "h"
    q.finish("h", 1.0, delay=100.0)
    assert q.drain("h", 1.0) == [1, 2] and q.size == 1
    q.add("h", 9, now=2.0)  # a URL arriving during the hold waits for it
    assert q.next_ready(2.0) == ("other", "x") and q.next_ready(50.0) is None
    assert q.next_ready(101.0) == ("h", 9)


def test_backoff_honours_retry_after_and_grows_without_it():
    from owler.fetch.politeness import Backoff, retry_after_seconds

    now = 1_700_000_000.0
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds("Tue, 14 Nov 2023 22:46:40 GMT", now) == 2000.0
    assert retry_after_seconds("Tue, 14 Nov 2000 22:15:20 GMT", now) == 0.0
    assert retry_after_seconds("soon", now) is None and retry_after_seconds(None, now) is None
    b = Backoff({"fetcher.backoff.base.secs": 10, "fetcher.max.retry.after": 3600})
    assert b.hold("h", 200, None, now) is None and b.hold("h", 404, None, now) is None
    assert [b.hold("h", 503, None, now) for _ in range(3)] == [10.0, 20.0, 40.0]
    assert b.hold("h", 429, "5", now) == 5.0  # the server's word first
    assert b.hold("h", 429, "999999", now) == 3600.0  # capped
    b.hold("h", 200, None, now)  # an answer starts the count again
    assert b.hold("h", 503, None, now) == 10.0
    assert Backoff({"fetcher.backoff.base.secs": 10, "fetcher.backoff.max.secs": 15}).hold(
        "k", 503, None, now) == 10.0


def test_per_site_delays_from_a_file_replace_the_queue_delay_and_are_reloaded(tmp_path, caplog):
    import os

    from owler.fetch.politeness import DelayOverrides

    path = tmp_path / "politeness.txt"
    path.write_text("# sites that asked\nslow.example 30\nfast.slow.example 2  # agreed\n"
                    "10.0.0.1 5\nbroken line\nneg.example -1\n")
    ov = DelayOverrides(path, reload_interval=10)
    assert len(ov) == 3 and "broken line" in caplog.text and "neg.example" in caplog.text
    assert ov.delay("slow.example") == 30 and ov.delay("www.slow.example") == 30
    assert ov.delay("fast.slow.example") == 2 and ov.delay("a.fast.slow.example") == 2
    assert ov.delay("example") is None and ov.delay("10.0.0.1") == 5
    assert ov.delay("0.0.1") is None and ov.delay("other.example") is None
    q = FetchQueues({"fetcher.server.delay": 1.0}, overrides=ov)
    for key in ("www.slow.example", "other.example"):
        q.add(key, key, now=0.0)
    assert q.next_ready(0.0)[0] == "www.slow.example"
    q.finish("www.slow.example", 1.0)
    assert q.next_allowed("www.slow.example") == 31.0  # the site's 30 s, not the server delay
    q.set_crawl_delay("other.example", 7)
    assert q.default_delay("other.example") == 7
    path.write_text("other.example 12\n")
    os.utime(path, (1, 1))  # a changed file, whatever the clock's resolution
    assert not ov.maybe_reload(5.0) and ov.delay("slow.example") == 30  # not yet
    assert ov.maybe_reload(20.0)
    assert ov.delay("slow.example") is None and q.default_delay("other.example") == 12
    path.unlink()
    assert ov.maybe_reload(40.0) and len(ov) == 0
    assert DelayOverrides.from_conf({"fetcher.politeness.file": ""}).delay("x") is None
