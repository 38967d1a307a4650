"""The bulk lines of the OpenSearch frontier, without a node: dates, actions and metadata field
names as StormCrawler's status index has them, whatever the caches behind them remember."""

from __future__ import annotations

import random
import time

import orjson

from owler.frontier import opensearch as osf


def test_iso_is_strftime_of_the_second_for_any_time():
    rnd = random.Random(5)
    values = [rnd.uniform(-3e9, 2.5e11) for _ in range(20000)]
    values += [0, -0.5, -1, 86399.999, 86400, -86400.2, 1e9 + 0.9999999, 253402300799.9]
    for v in values:
        assert osf._iso(v) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(v // 1)), v
    assert len(osf._ISO_OF_SECOND) <= 4096  # bounded


class Lines(osf.OpenSearchFrontier):
    def __init__(self, routing: bool):  # noqa: no node: only what the lines need
        self.index, self.routing, self.write_updated, self.tag_rules = "st", routing, True, ()
        self._md_names, self._md_key_sets, self._action_heads = {}, {}, {}


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
