"""The crawl's processes under SCHED_BATCH (owler/sched.py). Each check runs in a thread of its
own: the policy is a thread's, and the test process keeps its own."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from owler import conf as C
from owler import sched

_set_policy = os.sched_setscheduler  # the real one, for in_thread while a test replaces it


def in_thread(fn):
    """``fn()``'s result, run in a new thread that starts under SCHED_OTHER."""
    out: dict = {}

    def body():
        try:
            _set_policy(0, os.SCHED_OTHER, os.sched_param(0))
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_on_by_default_the_calling_thread_runs_under_batch():
    before = os.sched_getscheduler(0)

    def check():
        assert sched.apply({}) == "SCHED_BATCH"
        return os.sched_getscheduler(0)

    assert in_thread(check) == os.SCHED_BATCH
    assert os.sched_getscheduler(0) == before  # another thread's policy is its own


def test_threads_started_after_inherit_it():
    def check():
        sched.apply({sched.BATCH_KEY: "true"})
        seen = []
        t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
        t.start()
        t.join()
        return seen

    assert in_thread(check) == [os.SCHED_BATCH]


def test_off_leaves_the_policy_as_it_is():
    def check():
        return sched.apply({sched.BATCH_KEY: False}), os.sched_getscheduler(0)

    assert in_thread(check) == ("SCHED_OTHER", os.SCHED_OTHER)


def test_a_refusal_is_logged_and_the_component_runs_on(monkeypatch, caplog):
    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with caplog.at_level(logging.WARNING, logger="owler.sched"):
        assert in_thread(lambda: sched.apply({})) == "SCHED_OTHER"
    assert "refused SCHED_BATCH" in caplog.text and "not permitted" in caplog.text


def test_a_bad_value_is_a_conf_error():
    with pytest.raises(C.ConfError, match="owler.sched.batch"):
        sched.wants_batch({sched.BATCH_KEY: "sometimes"})


def test_policy_names():
    assert sched.policy_name(os.SCHED_BATCH) == "SCHED_BATCH"
    assert sched.policy_name(os.SCHED_OTHER) == "SCHED_OTHER"
    assert sched.policy_name(99) == "99"
