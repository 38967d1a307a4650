"""Frontier writes with one batch in flight (owler.frontier.pipeline) and the status updater's use
of them (FrontierWriter.send, CommitBatch.take/settle), against frontiers that answer when told."""

from __future__ import annotations

import threading
import time

import pytest

from owler.conf import ConfError
from owler.constants import Status
from owler.frontier import FrontierError, StatusUpdate
from owler.frontier import opensearch as osf
from owler.frontier import pipeline as P
from owler.frontier.pipeline import OneInFlight
from owler.scheduler import DefaultScheduler
from owler.status import FrontierWriter, StatusUpdater
from owler.task.batch import CommitBatch


#: seconds after which something awaited counts as never happening (a hang), not a speed bound
HANG = 60.0
#: a window that lets a wrong send show up; the checks after it hold whatever the machine's speed
WINDOW = 0.1


def wait_until(cond, what: str):
    deadline = time.monotonic() + HANG
    while not (got := cond()):
        assert time.monotonic() < deadline, f"{what} did not happen within {HANG:g} s (hang?)"
        time.sleep(0.001)
    return got


class Gated:
    """A frontier whose sends wait for :meth:`answer`; records what happened in which order."""

    def __init__(self):
        self.events: list[str] = []
        self.gates: list[threading.Event] = []
        self.fail_with: dict[int, object] = {}  # send number -> failed positions or an exception
        self.sends = 0

    def prepare_updates(self, updates):
        req = osf.BulkRequest()
        req.lines = [u.url.encode() for u in updates]
        req.count = len(updates)
        self.events.append(f"prepare {req.count}")
        return req

    def send_updates(self, req):
        n = self.sends
        self.sends += 1
        gate = threading.Event()
        self.gates.append(gate)
        self.events.append(f"send {n} start")
        assert gate.wait(HANG), f"send {n} was never answered"
        self.events.append(f"send {n} end")
        what = self.fail_with.get(n, [])
        if isinstance(what, Exception):
            raise what
        return what

    def answer(self, n):
        wait_until(lambda: len(self.gates) > n, f"send {n}")
        self.gates[n].set()

    def close(self):
        pass


def ups(*names):
    return [StatusUpdate(f"http://a.org/{n}", Status.DISCOVERED) for n in names]


def test_one_batch_in_flight_the_next_built_before_the_one_before_is_waited_for():
    fr = Gated()
    p = OneInFlight(fr)
    assert p.send(ups(1, 2), "A") is None and p.busy
    fr.answer(0)
    # B is built while A may still be on its way, then A's outcome comes back with B's send
    out = p.send(ups(3), "B")
    assert out.tag == "A" and out.ok and out.failed == []
    assert [u.url for u in out.updates] == ["http://a.org/1", "http://a.org/2"]
    assert fr.events[:4] == ["prepare 2", "send 0 start", "send 0 end", "prepare 1"] or \
        fr.events[:4] == ["prepare 2", "send 0 start", "prepare 1", "send 0 end"]
    assert p.poll() is None  # B not answered yet
    fr.answer(1)
    out = wait_until(p.poll, "B's outcome")
    assert out.tag == "B" and not p.busy
    assert p.wait() is None and p.close() is None


def test_the_next_request_is_not_sent_before_the_answer_to_the_one_before():
    fr = Gated()
    p = OneInFlight(fr)
    p.send(ups(1), "A")
    sent, waits = threading.Event(), threading.Event()
    wait = p.wait
    p.wait = lambda: (waits.set(), wait())[1]  # B's send waits for A's answer: B is queued
    t = threading.Thread(target=lambda: (p.send(ups(2), "B"), sent.set()))
    t.start()
    assert waits.wait(HANG), "B's send never came to wait for A"
    time.sleep(WINDOW)  # a B sent before A's answer would show meanwhile
    assert not sent.is_set() and fr.events == ["prepare 1", "send 0 start", "prepare 1"]
    fr.answer(0)
    t.join(HANG)
    assert sent.is_set()
    fr.answer(1)
    assert p.close().tag == "B"


def test_the_next_request_starts_at_the_answer_before_the_caller_takes_that_answer():
    """The sending thread does not wait for the caller between two requests: the answer to A
    starts B even while the caller has not yet taken A's outcome."""
    fr = Gated()
    p = OneInFlight(fr)
    p.send(ups(1), "A")
    let_caller, waits = threading.Event(), threading.Event()
    wait = p.wait
    # a caller slow to take the answer; its wait begins once B is queued
    p.wait = lambda: (waits.set(), let_caller.wait(HANG), wait())[2]
    outcome = []
    t = threading.Thread(target=lambda: outcome.append(p.send(ups(2, 3), "B")))
    t.start()
    assert waits.wait(HANG), "B's send never came to wait for A"
    time.sleep(WINDOW)  # a B sent before A's answer would show meanwhile
    assert "send 1 start" not in fr.events  # B waits for A's answer
    fr.answer(0)
    wait_until(lambda: "send 1 start" in fr.events, "B's send after A's answer")
    assert not let_caller.is_set() and t.is_alive()
    assert fr.events == ["prepare 1", "send 0 start", "prepare 2", "send 0 end", "send 1 start"]
    let_caller.set()
    t.join(HANG)
    assert outcome[0].tag == "A" and outcome[0].ok
    fr.answer(1)
    assert p.close().tag == "B"


def test_a_request_is_sealed_by_the_thread_that_built_it():
    fr = Gated()
    p = OneInFlight(fr)
    req = p._prepare(ups(1, 2))
    assert req.body == b"http://a.org/1\nhttp://a.org/2\n"
    p.close()


def test_failed_positions_and_failed_requests_come_back_in_the_outcome():
    fr = Gated()
    fr.fail_with = {0: [1], 1: FrontierError("node gone")}
    p = OneInFlight(fr)
    p.send(ups(1, 2), "A")
    fr.answer(0)
    out = p.send(ups(3), "B")
    assert out.tag == "A" and out.ok and out.failed == [1]
    fr.answer(1)
    out = p.wait()
    assert out.tag == "B" and not out.ok and out.failed is None
    assert isinstance(out.error, FrontierError)
    p.send(ups(4), "C")  # the next batch goes as before
    fr.answer(2)
    out = p.close()
    assert out.tag == "C" and out.ok


def test_a_request_built_in_parts_while_one_is_in_flight_is_the_same_request(monkeypatch):
    monkeypatch.setattr(osf.time, "time", lambda: 1_700_000_000.25)
    monkeypatch.setattr(P, "PART", 3)
    from tests.unit.test_opensearch_lines import Lines
    updates = [StatusUpdate(f"http://a.org/{i}", Status.FETCHED if i % 3 else Status.DISCOVERED,
                            {"depth": ["1"], "url.path": ["x"]}, 1e9 + i, f"k{i % 2}",
                            block_until=2e9 + i if i in (2, 4) else None)
               for i in range(10)]
    whole = Lines(False).prepare_updates(updates)

    class Busy:
        def __init__(self):
            self.f = Lines(False)
            self.prepared = []

        def prepare_updates(self, part):
            self.prepared.append(len(part))
            return self.f.prepare_updates(part)

    fr = Busy()
    p = OneInFlight(fr)
    p._flight = (None, None, [])  # as if a request were in flight: the next is built in parts
    parts = p._prepare(updates)
    assert fr.prepared == [3, 3, 3, 1]
    assert parts.lines == whole.lines and parts.count == 10
    assert parts.blocks == whole.blocks == {"k0": 2e9 + 4}


# --- the status updater's writer -----------------------------------------------------------------
@pytest.fixture
def updater():
    return StatusUpdater({}, DefaultScheduler({}))


def test_the_writer_sends_one_batch_in_flight_and_remembers_only_what_was_written(updater):
    fr = Gated()
    fr.fail_with = {0: [1]}
    w = FrontierWriter({}, updater, opener=lambda c: fr)
    assert w.pipelined
    assert w.send(ups(1, 2), "A") is None
    assert not updater.known("http://a.org/1")  # not before its answer
    fr.answer(0)
    out = w.send(ups(3), "B")
    assert out.tag == "A" and out.failed == [1]
    assert updater.known("http://a.org/1") and not updater.known("http://a.org/2")
    fr.answer(1)
    out = w.drain()
    assert out.tag == "B" and updater.known("http://a.org/3")
    assert w.drain() is None and w.poll() is None
    w.close()


def test_the_writer_waits_for_each_write_without_concurrent_requests(updater):
    fr = Gated()
    w = FrontierWriter({"opensearch.status.concurrentRequests": 0}, updater, opener=lambda c: fr)
    assert not w.pipelined and w.poll() is None

    class Plain:  # a frontier that cannot build a request apart from sending it (SQLite)
        def apply_updates(self, updates):
            return []

        def close(self):
            pass

    assert not FrontierWriter({}, updater, opener=lambda c: Plain()).pipelined
    # StormCrawler's top-level key is read too; more than one request still means one in flight
    assert FrontierWriter({"opensearch.concurrentRequests": 2}, updater,
                          opener=lambda c: fr).pipelined


@pytest.mark.parametrize("value", ["many", -1, [1]])
def test_a_bad_number_of_concurrent_requests_is_a_clear_error(updater, value):
    with pytest.raises(ConfError, match="opensearch.status.concurrentRequests"):
        FrontierWriter({"opensearch.status.concurrentRequests": value}, updater,
                       opener=lambda c: Gated())


# --- CommitBatch.take / settle -------------------------------------------------------------------
def test_a_taken_batch_is_acked_or_failed_when_it_is_settled():
    acked, failed = [], []
    b = CommitBatch(10, 1.0, acked.append, failed.append)
    b.add("a", ["a1", "a2"], 0.0)
    b.add("b", [], 0.0)
    b.add("c", ["c1"], 0.0)
    taken = b.take()
    assert len(b) == 0 and b.pending == 0 and taken.items == ["a1", "a2", "c1"]
    b.add("d", ["d1"], 1.0)  # the next batch fills while the first is on its way
    assert acked == [] and failed == []
    done = b.settle(taken, [1])
    assert done.ok and done.failed == frozenset({1}) and acked == ["b", "c"] and failed == ["a"]
    done = b.settle(b.take(), error=FrontierError("x"))
    assert not done.ok and done.failed is None and failed == ["a", "d"]


def test_the_writer_sends_what_the_frontier_owes_only_between_batches(updater):
    """FrontierWriter.idle (the bolt's tick): the frontier's debt of the last batch (OpenSearch:
    the queues its new URLs lower) is flushed when no batch is on its way to carry it, after
    CARRY_SECS; a failure is logged and left for the next batch or tick."""
    from owler import status

    fr = Gated()
    flushed: list[float] = []
    fr.flush_queues = lambda older_than=0.0: flushed.append(older_than)
    w = FrontierWriter({}, updater, opener=lambda c: fr)
    w.idle()
    assert flushed == [status.CARRY_SECS]
    w.send(ups(1), "A")  # on its way: it carries the debt
    w.idle()
    assert flushed == [status.CARRY_SECS]
    fr.answer(0)
    w.drain()
    w.idle()
    assert flushed == [status.CARRY_SECS] * 2

    def refused(older_than=0.0):
        raise osf.OpenSearchError("node away")

    fr.flush_queues = refused
    w.idle()  # logged, not raised
    w.close()
