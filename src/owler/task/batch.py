"""Tuples acked only after the write they asked for is durable (at-least-once, nothing lost).

The status updater (frontier writes) works this way: collect tuples, write their effects in one
batch when ``size`` items are pending or the oldest tuple has waited ``interval`` seconds, then
ack each tuple whose effects were written and fail (Storm replays it) each one whose write failed.
(The WARC spout's copy releases record by record instead, as each one's bytes are stored:
``src/owler/warc/warc2warc/copying_feed.py``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence


@dataclass(slots=True)
class Committed:
    """What one :meth:`CommitBatch.commit` did."""

    items: list
    #: positions in ``items`` whose write failed; ``None`` when the batch failed as a whole
    failed: frozenset[int] | None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class Taken:
    """Tuples and items of a batch whose write has begun (:meth:`CommitBatch.take`)."""

    tokens: list[tuple[Any, int, int]]
    items: list


class CommitBatch:
    """Tuples waiting for their batch's write. ``ack(token)`` and ``fail(token)`` are the caller's
    (the bolt's ``ack``/``fail``); not thread-safe."""

    def __init__(self, size: int, interval: float, ack: Callable[[Any], None],
                 fail: Callable[[Any], None]) -> None:
        self.size = size
        self.interval = interval
        self._ack = ack
        self._fail = fail
        self._tokens: list[tuple[Any, int, int]] = []  # (token, first item, end of its items)
        self._items: list = []
        self.oldest = 0.0

    def __len__(self) -> int:
        """Tuples waiting."""
        return len(self._tokens)

    @property
    def pending(self) -> int:
        """Items waiting to be written."""
        return len(self._items)

    def add(self, token: Any, items: Sequence = (), now: float = 0.0) -> None:
        """Wait for the write of ``items`` (none: the tuple is acked at the next commit)."""
        if not self._tokens:
            self.oldest = now
        start = len(self._items)
        self._items.extend(items)
        self._tokens.append((token, start, len(self._items)))

    def due(self, now: float) -> bool:
        """Time to commit: ``size`` items pending, or the oldest tuple waited ``interval`` s."""
        return bool(self._tokens) and (len(self._items) >= self.size
                                       or now - self.oldest >= self.interval)

    def commit(self, write: Callable[[list], Iterable[int] | None]) -> Committed:
        """Write the pending items with ``write(items)`` (returning the positions that failed, or
        nothing) and ack or fail every waiting tuple. An exception from ``write`` fails them all
        and is returned in :attr:`Committed.error`, not raised."""
        taken = self.take()
        try:
            failed = write(taken.items)
        except Exception as exc:  # noqa: BLE001 - the caller reports it; Storm replays the tuples
            return self.settle(taken, error=exc)
        return self.settle(taken, failed)

    def take(self) -> Taken:
        """Hand the waiting tuples and their items over to a write that ends later
        (:meth:`settle` acks or fails them then); the batch starts empty."""
        taken = Taken(self._tokens, self._items)
        self._tokens, self._items = [], []
        return taken

    def settle(self, taken: Taken, failed: Iterable[int] | None = None,
               error: BaseException | None = None) -> Committed:
        """The write of ``taken`` ended: with ``error`` every tuple is failed, else each tuple
        with an item among the ``failed`` positions is failed and the others are acked."""
        if error is not None:
            for token, _, _ in taken.tokens:
                self._fail(token)
            return Committed(taken.items, None, error)
        failed = frozenset(failed or ())
        for token, start, end in taken.tokens:
            if failed and any(i in failed for i in range(start, end)):
                self._fail(token)
            else:
                self._ack(token)
        return Committed(taken.items, failed)

    def fail_all(self) -> int:
        """Fail every waiting tuple (their effects are undone or never happened); how many."""
        tokens = self._tokens
        self._tokens, self._items = [], []
        for token, _, _ in tokens:
            self._fail(token)
        return len(tokens)
