"""Schedulers: intervals per status, -1 = never, custom intervals, per-URL overrides, loading."""

from __future__ import annotations

import pytest

from owler.conf import ConfError
from owler.constants import Status
from owler.scheduler import AdaptiveScheduler, DefaultScheduler, load_scheduler

NOW = 1_700_000_000.0
CONF = {"fetchInterval.default": 1440, "fetchInterval.fetch.error": 120, "fetchInterval.error": -1}


def mins(date):
    return None if date is None else (date - NOW) / 60


def test_default_intervals_per_status():
    s = DefaultScheduler(CONF)
    assert mins(s.schedule(Status.FETCHED, {}, NOW)) == 1440
    assert mins(s.schedule(Status.REDIRECTION, {}, NOW)) == 1440
    assert mins(s.schedule(Status.FETCH_ERROR, {}, NOW)) == 120
    assert s.schedule(Status.ERROR, {}, NOW) is None  # -1 = never
    assert s.schedule(Status.DISCOVERED, {}, NOW) == NOW


def test_code_defaults_when_keys_missing():
    s = DefaultScheduler({})
    assert mins(s.schedule(Status.ERROR, {}, NOW)) == 44640
    assert mins(s.schedule(Status.FETCHED, {}, NOW)) == 1440


def test_minus_one_for_fetched_means_never():
    s = DefaultScheduler({"fetchInterval.default": -1})
    assert s.schedule(Status.FETCHED, {}, NOW) is None


def test_metadata_fetch_interval_overrides_fetched_only():
    s = DefaultScheduler(CONF)
    md = {"fetchInterval": ["30"]}
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == 30
    assert mins(s.schedule(Status.FETCH_ERROR, md, NOW)) == 120
    assert s.schedule(Status.FETCHED, {"fetchInterval": ["-1"]}, NOW) is None
    # garbage is ignored, not fatal
    assert mins(s.schedule(Status.FETCHED, {"fetchInterval": ["soon"]}, NOW)) == 1440


def test_scheduler_delay_mins_beats_everything():
    s = DefaultScheduler({**CONF, "fetchInterval.isFeed=true": 10})
    md = {"scheduler.delay.mins": ["5"], "isFeed": ["true"], "fetchInterval": ["30"]}
    assert mins(s.schedule(Status.DISCOVERED, md, NOW)) == 5
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == 5


def test_custom_intervals_generic_and_per_status():
    conf = {**CONF, "fetchInterval.isFeed=true": 10, "fetchInterval.FETCH_ERROR.isFeed=true": 3,
            "fetchInterval.parse.lang=de": 7}
    s = DefaultScheduler(conf)
    feed = {"isFeed": ["true"]}
    assert mins(s.schedule(Status.FETCHED, feed, NOW)) == 10
    assert mins(s.schedule(Status.FETCH_ERROR, feed, NOW)) == 3
    assert mins(s.schedule(Status.FETCHED, {"isFeed": ["false"]}, NOW)) == 1440
    # a multi-valued key matches any of its values; a dotted key without status is a key
    assert mins(s.schedule(Status.FETCHED, {"parse.lang": ["en", "de"]}, NOW)) == 7
    # generic rules apply to DISCOVERED too, as in StormCrawler
    assert mins(s.schedule(Status.DISCOVERED, feed, NOW)) == 10
    # custom rules beat the per-URL fetchInterval
    assert mins(s.schedule(Status.FETCHED, {"isFeed": ["true"], "fetchInterval": ["99"]}, NOW)) == 10


def test_custom_interval_minus_one_and_status_only_rule():
    s = DefaultScheduler({**CONF, "fetchInterval.ERROR.isSitemap=true": 60,
                          "fetchInterval.FETCHED.frozen=yes": -1})
    assert mins(s.schedule(Status.ERROR, {"isSitemap": ["true"]}, NOW)) == 60
    assert mins(s.schedule(Status.FETCHED, {"isSitemap": ["true"]}, NOW)) == 1440
    assert s.schedule(Status.FETCHED, {"frozen": ["yes"]}, NOW) is None


def test_custom_interval_bad_value_is_conf_error():
    with pytest.raises(ConfError, match="isFeed=true"):
        DefaultScheduler({"fetchInterval.isFeed=true": "often"})


def test_load_scheduler_names():
    assert type(load_scheduler({})) is DefaultScheduler
    assert type(load_scheduler({"scheduler.class": "owler.scheduler.AdaptiveScheduler"})) is AdaptiveScheduler
    sc = "org.apache.stormcrawler.persistence.DefaultScheduler"
    assert type(load_scheduler({"scheduler.class": sc})) is DefaultScheduler
    old = "com.digitalpebble.stormcrawler.persistence.AdaptiveScheduler"
    assert type(load_scheduler({"scheduler.class": old})) is AdaptiveScheduler
    with pytest.raises(ConfError, match="cannot load"):
        load_scheduler({"scheduler.class": "owler.scheduler.NoSuchScheduler"})
    with pytest.raises(ConfError, match="cannot load"):
        load_scheduler({"scheduler.class": "no.such.module.Scheduler"})
    with pytest.raises(ConfError, match="schedule"):
        load_scheduler({"scheduler.class": "collections.OrderedDict"})


def test_adaptive_shortens_on_change_and_grows_when_unchanged():
    s = AdaptiveScheduler({**CONF, "scheduler.adaptive.fetchInterval.min": 60,
                           "scheduler.adaptive.fetchInterval.max": 2000})
    # first fetch: a signature but no previous one → treated as a change
    md = {"signature": ["a"]}
    d = s.schedule(Status.FETCHED, md, NOW)
    assert mins(d) == pytest.approx(0.5 * 1440 + 0.5 * 60)  # 750
    assert md["fetchInterval"] == ["750"] and "signatureChangeDate" in md
    # unchanged → grows by 50 %
    md = {"signature": ["a"], "signatureOld": ["a"], "fetchInterval": ["750"]}
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == pytest.approx(1125)
    assert "signatureOld" not in md
    # capped at max
    md = {"signature": ["a"], "signatureOld": ["a"], "fetchInterval": ["1800"]}
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == 2000
    # changed → shorter
    md = {"signature": ["b"], "signatureOld": ["a"], "fetchInterval": ["1000"]}
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == pytest.approx(530)
    # 304 counts as unchanged even if the signatures differ
    md = {"signature": ["b"], "signatureOld": ["a"], "fetchInterval": ["100"],
          "fetch.statusCode": ["304"]}
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == pytest.approx(150)


def test_adaptive_other_statuses_delegate_and_clean():
    s = AdaptiveScheduler(CONF)
    md = {"fetchInterval": ["10"], "signatureChangeDate": ["x"]}
    assert mins(s.schedule(Status.FETCH_ERROR, md, NOW)) == 120
    assert "fetchInterval" not in md and "signatureChangeDate" not in md
    md = {}
    assert mins(s.schedule(Status.FETCHED, md, NOW)) == 1440  # no signature: default, recorded
    assert md["fetchInterval"] == ["1440"]
