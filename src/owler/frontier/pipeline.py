"""Frontier writes with one batch on its way while the caller builds the next.

A status updater that writes a batch and waits for the node leaves the node idle while it builds
the next request, and itself idle while the node indexes: with the OpenSearch frontier the
client's CPU per update adds to the time per update almost one for one (docs/benchmarks-history.md,
issue 20).
StormCrawler's status updater hands its batches to a bulk processor with
``opensearch.status.concurrentRequests`` requests in flight (1 by default) and acks a batch's
tuples when its answer comes. :class:`OneInFlight` does the same for a frontier that can build a
request apart from sending it (``prepare_updates`` / ``send_updates``,
:class:`owler.frontier.opensearch.OpenSearchFrontier`): :meth:`OneInFlight.send` builds the
request in the caller's thread, queues it behind the batch before it, and waits for that batch's
answer. A thread of its own sends the queued requests one after the other, each as soon as the
answer to the one before has come, without waiting for the caller to take that answer. At most one
request is in flight, so two writes of one URL reach the index in the order they were made, and
nothing is acknowledged before its write is durable: the caller acks a batch only from its
:class:`Outcome`.

The caller's thread and the sending thread share the interpreter's lock. A thread that takes it
back after a system call waits until the running thread lets go (5 ms at most by default), so
while a request is in flight the request is built in parts of :data:`PART` updates with the lock
offered between them: the sending thread then starts the next request, or reads its answer, within
a fraction of a millisecond. The request's body is joined (``seal()``) in the caller's thread too.
Between the answer to one request and the start of the next, the sending thread only checks the
answer (and writes the batch's refused statuses and queue blocks, when it has any): that gap was
2.3 ms per bulk of 2,000 when the caller took the answer and handed the next request over
(docs/benchmarks-history.md, issue 20, thirteenth session).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable

#: updates built between two offers of the interpreter's lock while a request is in flight
PART = 256


@dataclass(slots=True)
class Outcome:
    """What became of one batch given to :meth:`OneInFlight.send`."""

    tag: Any
    updates: list
    #: positions in ``updates`` whose write failed; ``None`` when the batch failed as a whole
    failed: list[int] | None
    error: BaseException | None = None
    #: seconds from the request's start to its answer
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


class OneInFlight:
    """Writes batches to ``frontier`` with at most one request in flight (module docstring).
    Not thread-safe: one caller thread."""

    def __init__(self, frontier: Any) -> None:
        self.frontier = frontier
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="owler-frontier-write")
        self._flight: tuple[Future, Any, list] | None = None

    @property
    def busy(self) -> bool:
        """A batch is on its way (its outcome not yet taken)."""
        return self._flight is not None

    def send(self, updates: Iterable, tag: Any = None) -> Outcome | None:
        """Build the request of ``updates``, queue it to be sent once the batch before it has its
        answer, and wait for that answer. Returns the outcome of the batch before (``None`` when
        there was none). An error building the request is raised, nothing is queued, and the
        batch before stays in flight."""
        updates = list(updates)
        req = self._prepare(updates)
        queued = self._pool.submit(self._send, req)  # one sending thread: after the one before
        previous = self.wait()
        self._flight = (queued, tag, updates)
        return previous

    def poll(self) -> Outcome | None:
        """The outcome of the batch in flight if its answer came, else ``None`` (no wait)."""
        if self._flight is not None and self._flight[0].done():
            return self.wait()
        return None

    def wait(self) -> Outcome | None:
        """Wait for the batch in flight; its outcome (``None`` when none was in flight)."""
        if self._flight is None:
            return None
        future, tag, updates = self._flight
        self._flight = None
        try:
            failed, seconds = future.result()
        except Exception as exc:  # noqa: BLE001 - the batch failed as a whole: the caller's to tell
            return Outcome(tag, updates, None, exc)
        return Outcome(tag, updates, failed, None, seconds)

    def close(self) -> Outcome | None:
        """Wait for the batch in flight (its outcome) and stop the sending thread."""
        try:
            return self.wait()
        finally:
            self._pool.shutdown(wait=True)

    def _prepare(self, updates: list) -> Any:
        prepare = self.frontier.prepare_updates
        if not self.busy or len(updates) <= PART:
            req = prepare(updates)
        else:
            req = prepare(updates[:PART])
            for start in range(PART, len(updates), PART):
                time.sleep(0)  # offer the lock: the sending thread may be waiting for it
                req.extend(prepare(updates[start:start + PART]))
        req.seal()
        return req

    def _send(self, req: Any) -> tuple[list[int], float]:
        t0 = time.perf_counter()
        failed = self.frontier.send_updates(req)
        return failed, time.perf_counter() - t0
