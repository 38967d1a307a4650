"""Waiting in the integration tests for an event, never for a fixed time (issue 43).

``wait_for`` polls a condition until it holds; ``returns`` runs a call that must not block on a
thread of its own; ``sleep_until`` lets time pass up to an instant a component recorded (a hold's
or a lease's end), for behaviour that is about time itself. The timeouts are hang guards, generous
on purpose (a loaded machine is slow, not wrong): reaching one fails the test with what was
awaited, never passes it."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0,
             every: float = 0.2) -> Any:
    """``check()``'s first truthy value; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s (hang?); "
                                 f"last: {last!r}")
        time.sleep(every)


def returns(what: str, fn: Callable[[], Any], timeout: float = 120.0) -> Any:
    """``fn()``'s result (or its exception), called on a thread: AssertionError naming ``what``
    when it has not returned within ``timeout`` s, the call that should never block did."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            out["error"] = exc

    t = threading.Thread(target=run, name=f"returns: {what}", daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{what} did not return within {timeout:g} s (blocked?)"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def sleep_until(instant: float) -> None:
    """Until ``time.time()`` has reached ``instant`` (a time a component recorded)."""
    while (left := instant - time.time()) > 0:
        time.sleep(left)
