"""The bulk lines of the OpenSearch frontier, without a node: dates, actions and metadata field
names as StormCrawler's status index has them, whatever the caches behind them remember."""

from __future__ import annotations

import random
import time

import orjson
import pytest

from owler.frontier import opensearch as osf


def test_iso_is_strftime_of_the_second_for_any_time():
    rnd = random.Random(5)
    values = [rnd.uniform(-3e9, 2.5e11) for _ in range(20000)]
    values += [0, -0.5, -1, 86399.999, 86400, -86400.2, 1e9 + 0.9999999, 253402300799.9]
    for v in values:
        assert osf._iso(v) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(v // 1)), v
    assert len(osf._ISO_OF_SECOND) <= 4096  # bounded


class Lines(osf.OpenSearchFrontier):
    _intent_head = None  # (the lines of the updates alone: WithIntent below has it)

    def __init__(self, routing: bool):  # noqa: no node: only what the lines need
        self.index, self.routing, self.write_updated, self.tag_rules = "st", routing, True, ()
        self.queues_index, self.round_results = "st_queues", False
        self.carry_queues, self._owed = False, osf.QueueDebt()
        self.leases_index, self.owner, self._next_intents = "st_leases", "t", float("inf")
        self._md_names, self._md_key_sets, self._action_heads = {}, {}, {}
        self.conf, self._scheduler, self.crawl = {}, None, osf.DEFAULT_CRAWL
        self.stats = Unrenewed()


class Unrenewed:
    """No node, so no snapshot of the figures to renew (owler.frontier.opensearch_stats)."""

    def tick(self, now: float) -> None:
        pass


def test_actions_with_and_without_routing():
    assert orjson.loads(Lines(False)._action("create", "ab", "k")) == {
        "create": {"_index": "st", "_id": "ab"}}
    f = Lines(True)
    for _ in range(2):  # the head is remembered: the second one is the same
        assert orjson.loads(f._action("index", "cd", 'k"1')) == {
            "index": {"_index": "st", "_id": "cd", "routing": 'k"1'}}


def test_metadata_keys_with_dots_are_stored_as_stormcrawler_names_them():
    f = Lines(False)
    for _ in range(2):
        doc = orjson.loads(f._doc("http://a/", "FETCHED", {"depth": ["1"], "url.path": ["x"]},
                                  0.0, "a", 1.5))
        assert doc == {"url": "http://a/", "status": "FETCHED", "key": "a", "updated": 1500,
                       "metadata": {"depth": ["1"], "url%2Epath": ["x"]},
                       "nextFetchDate": "1970-01-01T00:00:00Z"}
    plain = {"depth": ["0"]}
    assert orjson.loads(f._doc("http://b/", "DISCOVERED", plain, None, "b", 0))["metadata"] == plain
    assert plain == {"depth": ["0"]}  # never changed in place


class Recorder:
    """A client that keeps the body of each request and answers with ``answer`` (bytes), or
    with the next of ``answer`` when it is a list (once they are used up: no errors)."""

    def __init__(self, answer):
        self.answers = list(answer) if isinstance(answer, list) else None
        self.answer, self.bodies = answer, []

    def request(self, method, path, body=None, params=None, raw=False, **kw):
        self.bodies.append(body)
        answer = (self.answers.pop(0) if self.answers else b'{"errors":false}'
                  ) if self.answers is not None else self.answer
        return 200, (answer if raw else orjson.loads(answer))


def _updates():
    from owler.constants import Status
    from owler.frontier import StatusUpdate
    md = {"depth": ["1"], "url.path": ["http://a/"]}
    return [StatusUpdate("http://a/1", Status.DISCOVERED, md, 1e9, "a"),
            StatusUpdate("http://a/2", Status.FETCHED, {"signature": ["x"]}, 2e9 + 0.5, "a"),
            StatusUpdate("http://b/é", Status.ERROR, {}, None, 'b"q'),
            StatusUpdate("http://c/", "REDIRECTION", md, 1e9, "c", block_until=None)]


def _lines_one_by_one(f, updates, now):
    out = []
    for u in updates:
        status = u.status.value if hasattr(u.status, "value") else str(u.status)
        op = "create" if status == "DISCOVERED" else "index"
        out.append(f._action(op, osf._sha256(u.url), u.key))
        out.append(f._doc(u.url, status, u.metadata, u.next_fetch_date, u.key, now))
    return b"\n".join(out) + b"\n"


def test_apply_updates_sends_the_lines_of_action_and_doc(monkeypatch):
    monkeypatch.setattr(osf.time, "time", lambda: 1_700_000_000.25)
    for routing in (False, True):
        f = Lines(routing)
        f.client = Recorder(b'{"errors":false}')
        assert f.apply_updates(_updates()) == []
        assert f.client.bodies[0] == _lines_one_by_one(Lines(routing), _updates(),
                                                       1_700_000_000.25)


def _queue_lines(body: bytes) -> dict[str, tuple[int, int]]:
    """The queues a lowering request writes: key -> (date, written at)."""
    lines = [orjson.loads(x) for x in body.splitlines()]
    out = {}
    for action, doc in zip(lines[0::2], lines[1::2]):
        assert action["update"]["_index"] == "st_queues"
        assert doc["upsert"] == {"due": doc["script"]["params"]["d"],
                                 "w": doc["script"]["params"]["w"]}
        out[action["update"]["_id"]] = (doc["upsert"]["due"], doc["upsert"]["w"])
    return out


def test_the_queues_learn_the_dates_of_the_urls_written_and_only_those(monkeypatch):
    """After the statuses, one request lowers each queue's date to the earliest date written
    in it; a DISCOVERED already known (409), a failed item or a status
    without a date changes no queue."""
    monkeypatch.setattr(osf.time, "time", lambda: 1_700_000_000.25)
    from owler.constants import Status
    from owler.frontier import StatusUpdate
    ups = [StatusUpdate("http://a/1", Status.DISCOVERED, {}, 1e9 + 5, "a"),
           StatusUpdate("http://a/2", Status.FETCHED, {}, 1e9 + 0.5, "a"),
           StatusUpdate("http://b/1", Status.DISCOVERED, {}, 1e9, "b"),   # known: 409
           StatusUpdate("http://c/1", Status.ERROR, {}, None, "c"),       # never again
           StatusUpdate("http://d/1", Status.FETCHED, {}, 1e9, "d"),      # failed: 503
           StatusUpdate("http://e/1", Status.DISCOVERED, {}, 2e9, "e")]
    f = Lines(False)
    f.client = Recorder([_answer([201, 200, 409, 200, 503, 201]), b'{"errors":false}'])
    assert f.apply_updates(ups) == [4]
    # (dates to the second, as the documents have them)
    assert _queue_lines(f.client.bodies[1]) == {"a": (1_000_000_000_000, 1_700_000_000_250),
                                                "e": (2_000_000_000_000, 1_700_000_000_250)}
    # nothing written: no second request
    f.client = Recorder([_answer([409, 409, 409, 200, 503, 409])])
    assert f.apply_updates(ups) == [4] and len(f.client.bodies) == 1
    # a queue the node refuses fails the whole batch (its tuples are replayed)
    f = Lines(False)
    f.client = Recorder([_answer([201] * 6), orjson.dumps({"errors": True, "items": [
        {"update": {"status": 429, "error": {"reason": "busy"}}}]})])
    with pytest.raises(osf.FrontierError, match="cannot write 1 queue"):
        f.apply_updates(ups)


def test_the_status_updaters_rounds_results_lower_no_queue():
    """The status updater's statuses other than DISCOVERED are its spouts' rounds' results,
    which date their queues when the rounds end: they lower nothing. Another writer's (a
    service's PutURLs, an import) do."""
    from owler.constants import Status
    from owler.frontier import StatusUpdate
    ups = [StatusUpdate("http://c/1", Status.FETCHED, {}, 1e9, "c"),
           StatusUpdate("http://d/1", Status.DISCOVERED, {}, 1e9, "d")]
    f = Lines(False)
    f.client = Recorder([_answer([200, 201])])
    f.apply_updates(ups)
    assert set(_queue_lines(f.client.bodies[1])) == {"c", "d"}
    f.round_results = True
    f.client = Recorder([_answer([200, 201])])
    f.apply_updates(ups)
    assert set(_queue_lines(f.client.bodies[1])) == {"d"}


def _answer(statuses, error="x"):
    items = [{"create": {"status": s, **({"error": {"type": error, "reason": 'a "status":200'}}
                                          if s >= 300 else {})}} for s in statuses]
    return orjson.dumps({"errors": any(s >= 300 for s in statuses), "items": items})


def test_bulk_answer_conflicts_are_success_and_failures_are_positions():
    f = Lines(False)
    f.client = Recorder([_answer([201, 409, 200, 409])])
    assert f.apply_updates(_updates()) == []
    f.client = Recorder([_answer([201, 404, 409, 503])])
    assert f.apply_updates(_updates()) == [1, 3]
    f.client = Recorder(_answer([201, 409]))  # fewer items than actions: a clear error
    try:
        f.apply_updates(_updates())
    except osf.FrontierError as exc:
        assert "2 items for 4 actions" in str(exc)
    else:
        raise AssertionError("a short answer was accepted")


def test_a_request_is_sent_as_its_sealed_body():
    f = Lines(False)
    req = f.prepare_updates(_updates()[:2])
    assert req.body is None
    body = req.seal()
    assert body == b"\n".join(req.lines) + b"\n" and req.seal() is body
    req.extend(f.prepare_updates(_updates()[2:]))  # more lines: joined again
    assert req.body is None and req.seal() == b"\n".join(req.lines) + b"\n"
    assert len(req.lines) == 8
    f.client = Recorder(b'{"errors":false}')
    assert f.send_updates(req) == [] and f.client.bodies[0] == req.body
    assert set(_queue_lines(f.client.bodies[1])) == {"a", "c"}  # (b's ERROR has no date)


def test_statuses_are_counted_only_when_every_item_succeeded_or_conflicted():
    """The status updater only needs the failures (a conflict is a success): when every item is
    a 2xx or a 409 the answer's statuses are counted, not listed; a seed's count still tells new
    from known."""
    f = Lines(False)
    n = 4
    body = b"x\n"
    for statuses, exact, expected in [
            ([201, 409, 200, 409], False, None),
            ([201, 409, 200, 409], True, [201, 409, 200, 409]),
            ([201, 404, 409, 201], False, [201, 404, 409, 201]),
            ([201, 201, 201, 201], False, None)]:
        f.client = Recorder(_answer(statuses))
        assert f._bulk(body, n, exact=exact) == expected
    f.client = Recorder(b'{"errors":false}')
    assert f._bulk(body, n) == [200] * 4 and f._bulk(body, n, exact=False) is None
    # three items in the answer (one item's status counted twice would be four): not counted
    f.client = Recorder(orjson.dumps({"errors": True, "items": [
        {"create": {"status": 201}}, {"create": {"status": 409}}, {"create": {"status": 201}}]}))
    with pytest.raises(osf.FrontierError, match="3 items for 4 actions"):
        f._bulk(body, n, exact=False)


def test_a_refused_status_is_written_again_as_an_error_with_the_reason(monkeypatch):
    """A 400 is a document the index cannot take: sent again as it was it would be refused
    again (Storm replays it without end), so it is rewritten as ERROR, status.refused."""
    monkeypatch.setattr(osf.time, "time", lambda: 1_700_000_000.0)
    f = Lines(False)
    bad = "mapper_parsing_exception"
    f.client = Recorder([_answer([400, 400, 409, 503], bad), _answer([201, 400], bad)])
    assert f.apply_updates(_updates()) == [1, 3]  # the second is refused even as ERROR
    again = [orjson.loads(line) for line in f.client.bodies[1].splitlines()]
    # the queue learns the date the ERROR was written with, not the refused status's
    assert _queue_lines(f.client.bodies[2]) == {
        "a": ((1_700_000_000 + 44640 * 60) * 1000, 1_700_000_000_000)}
    # the DISCOVERED stays create-only (a known URL is never overwritten); the FETCHED overwrites
    assert [list(a) for a in again[0::2]] == [["create"], ["index"]]
    assert again[0]["create"]["_id"] == osf._sha256("http://a/1")
    first = again[1]
    assert first["status"] == "ERROR" and first["url"] == "http://a/1" and first["key"] == "a"
    # due when the scheduler says an ERROR is (fetchInterval.error: 31 days), not as refused
    assert first["nextFetchDate"] == osf._iso(1_700_000_000.0 + 44640 * 60)
    assert again[3]["nextFetchDate"] == first["nextFetchDate"]
    assert first["metadata"]["error%2Ecause"] == ["status.refused"]
    assert first["metadata"]["error%2Emessage"] == [
        'the status index refused the status DISCOVERED: mapper_parsing_exception: a "status":200']
    assert set(first["metadata"]) == {"error%2Ecause", "error%2Emessage", "depth"}
    assert first["metadata"]["depth"] == ["1"]
    assert set(again[3]["metadata"]) == {"error%2Ecause", "error%2Emessage"}
    assert again[3]["status"] == "ERROR" and again[3]["url"] == "http://a/2"
    # a 400 that is not about the document (a closed index) is failed, not rewritten
    f.client = Recorder([_answer([400, 201, 201, 201], "index_closed_exception")])
    assert f.apply_updates(_updates()) == [0] and len(f.client.bodies) == 2
    assert set(_queue_lines(f.client.bodies[1])) == {"a", "c"}  # the statuses written


class MappingClient:
    """GET _mapping answers ``mappings``; a PUT is recorded, or refused when ``refuse``."""

    address = "http://127.0.0.1:1"

    def __init__(self, mappings, refuse=False):
        self.mappings, self.refuse, self.puts = mappings, refuse, []

    def request(self, method, path, body=None, **kw):
        if method == "PUT":
            if self.refuse:
                raise osf.OpenSearchError("403 security_exception: no mapping rights")
            self.puts.append((path, body))
            return 200, {"acknowledged": True}
        return 200, {"st": {"mappings": self.mappings}}


def test_opening_an_index_turns_date_detection_off_where_it_can(caplog):
    props = {"url": {"type": "keyword"}, "key": {"type": "keyword"},
             "status": {"type": "keyword"}, "nextFetchDate": {"type": "date"}}
    f = Lines(False)
    f.client = MappingClient({"properties": props})  # an index of an older version
    f._check_mapping()
    assert f.client.puts == [("/st/_mapping", {"date_detection": False})]
    for mappings in ({"properties": props, "date_detection": False},  # ours
                     {"properties": props, "dynamic": "strict"}):  # no new fields at all
        f.client = MappingClient(mappings)
        f._check_mapping()
        assert f.client.puts == []
    # an index that is not a status index is refused, its mapping left as it was
    f.client = MappingClient({"properties": {"title": {"type": "text"}}})
    try:
        f._check_mapping()
    except osf.FrontierError as exc:
        assert "is not a status index" in str(exc)
    else:
        raise AssertionError("a foreign index was taken")
    assert f.client.puts == []
    # a user that may not change mappings still opens the index, with a warning
    f.client = MappingClient({"properties": props}, refuse=True)
    f._check_mapping()
    assert "could not turn off date detection" in caplog.text


class WithIntent(Lines):
    _intent_head = osf.OpenSearchFrontier._intent_head


def test_a_bulk_that_lowers_queues_carries_the_writers_intent_last(monkeypatch, caplog):
    """The intent (the queues the updates will lower, and to when) is the bulk's last action, in
    the leases index; its answer is not one of the updates'; a failed intent is only logged (the
    writer lowers the queues itself right after)."""
    monkeypatch.setattr(osf.time, "time", lambda: 1_700_000_000.25)
    f = WithIntent(False)
    f.client = Recorder([_answer([201, 409, 200, 409, 201])])
    assert f.apply_updates(_updates()) == []
    lines = f.client.bodies[0].splitlines()
    assert len(lines) == 10
    assert orjson.loads(lines[8]) == {"index": {"_index": "st_leases", "_id": "intent:t"}}
    assert orjson.loads(lines[9]) == {"owner": "t", "until": 1_700_000_000_250, "active": False,
                                      "intent": True,
                                      "dues": {"a": 1_000_000_000_000, "c": 1_000_000_000_000}}
    f.client = Recorder([_answer([201, 404, 409, 503, 503])])
    with caplog.at_level("WARNING", logger="owler.frontier.opensearch"):
        assert f.apply_updates(_updates()) == [1, 3]
    assert "cannot write the intent of t" in caplog.text
    assert set(_queue_lines(f.client.bodies[1])) == {"a"}  # lowered all the same (c failed)
    # nothing to lower: no intent
    from owler.constants import Status
    from owler.frontier import StatusUpdate
    f.client = Recorder(b'{"errors":false}')
    f.apply_updates([StatusUpdate("http://b/", Status.ERROR, {}, None, "b")])
    assert len(f.client.bodies) == 1 and len(f.client.bodies[0].splitlines()) == 2


def test_a_carrying_writer_lowers_the_queues_of_a_bulk_with_the_next_one(monkeypatch, caplog):
    """The status updater's frontier (carry_queues) sends one request per batch: the queues of a
    bulk's new URLs are lowered by the next bulk's last actions, after the intent, which names
    them too (a writer killed before they go leaves them to the others); a lowering the node
    refuses, or a request that fails, leaves them owed for the next one; with no next bulk,
    flush_queues sends them alone once the oldest has waited long enough."""
    from owler.constants import Status
    from owler.frontier import StatusUpdate
    monkeypatch.setattr(osf.time, "time", lambda: 1_700_000_000.25)
    w = 1_700_000_000_250

    def new(host: str, date: float) -> list:
        return [StatusUpdate(f"http://{host}/1", Status.DISCOVERED, {}, date, host)]

    def sent(f) -> list:
        return [orjson.loads(x) for x in f.client.bodies[0].splitlines()]

    f = WithIntent(False)
    f.round_results = f.carry_queues = True
    f.client = Recorder([_answer([201, 200, 200, 200])])
    assert f.apply_updates(_updates()) == []
    lines = sent(f)
    assert len(f.client.bodies) == 1 and len(lines) == 10  # no request of the queues' own
    assert lines[9]["dues"] == {"a": 1_000_000_000_000}
    # the next bulk: its update, the intent (its queue and the one owed), the owed lowering
    f.client = Recorder([_answer([201, 200, 200])])
    assert f.apply_updates(new("d", 1.5e9)) == []
    lines = sent(f)
    assert len(f.client.bodies) == 1 and len(lines) == 6
    assert lines[2] == {"index": {"_index": "st_leases", "_id": "intent:t"}}
    assert lines[3]["dues"] == {"a": 1_000_000_000_000, "d": 1_500_000_000_000}
    assert _queue_lines(f.client.bodies[0].split(b"\n", 4)[4]) == {"a": (1_000_000_000_000, w)}
    # no bulk follows: flushed alone, once old enough
    f.client = Recorder([])
    assert f.flush_queues(older_than=5.0) == 0 and not f.client.bodies
    assert f.flush_queues() == 1
    assert _queue_lines(f.client.bodies[0]) == {"d": (1_500_000_000_000, w)}
    assert f.flush_queues() == 0 and len(f.client.bodies) == 1
    # refused: owed again, with the next bulk
    f.client = Recorder([_answer([201])])
    f.apply_updates(new("e", 1e9))
    f.client = Recorder([_answer([201, 200, 429])])
    with caplog.at_level("WARNING", logger="owler.frontier.opensearch"):
        assert f.apply_updates(new("g", 1e9)) == []
    assert "cannot lower 1 queue(s) of st_queues" in caplog.text

    class Down:
        def request(self, *a, **kw):
            raise osf.OpenSearchError("node away")

    f.client = Down()
    with pytest.raises(osf.FrontierError, match="node away"):
        f.apply_updates(new("h", 1e9))
    f.client = Recorder([_answer([201, 200, 200, 200])])
    f.apply_updates(new("i", 1e9))
    lines = sent(f)
    assert set(lines[3]["dues"]) == {"e", "g", "i"}  # (h was not written)
    assert set(_queue_lines(f.client.bodies[0].split(b"\n", 4)[4])) == {"e", "g"}
    # a flush the node refuses: owed still
    f.client = Down()
    with pytest.raises(osf.OpenSearchError):
        f.flush_queues()
    f.client = Recorder([])
    assert f.flush_queues() == 1 and set(_queue_lines(f.client.bodies[0])) == {"i"}


def test_a_writer_that_does_not_carry_lowers_its_queues_at_once():
    """Every other writer (a service's PutURLs, an import, a test) has its queues lowered
    before apply_updates returns: a reader right after finds them."""
    f = WithIntent(False)
    f.client = Recorder([_answer([201, 200, 200, 200, 200])])
    f.apply_updates(_updates())
    assert len(f.client.bodies) == 2 and set(_queue_lines(f.client.bodies[1])) == {"a", "c"}
    assert f.flush_queues() == 0
