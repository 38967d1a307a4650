"""Which task of a component owns a key: the split of queues (frontier spout) and input files
(WARC spout) between the tasks of one spout component.

A key belongs to task ``index`` of ``total`` when a 64-bit blake2b hash of it is ``index`` modulo
``total``. Not crc32: it is linear, so keys that differ in one character often share its parity and
two tasks would get uneven shares.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class Shard:
    index: int = 0
    total: int = 1

    @classmethod
    def of_task(cls, context: Mapping[str, Any], component: str, task_id: int) -> "Shard":
        """This task's share among the tasks of ``component``, from Storm's topology context
        (``task->component``); the whole when the context does not list the task."""
        tasks = sorted(int(t) for t, c in context.get("task->component", {}).items()
                       if c == component)
        if task_id not in tasks:
            return cls()
        return cls(tasks.index(task_id), len(tasks))

    def owns(self, key: str) -> bool:
        if self.total <= 1:
            return True
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.total == self.index
