"""The operating system's scheduling policy of the crawl's processes.

A crawl on Storm is a throughput job: a worker JVM and a Python process per task, all wanting
the CPU, handing tuples to each other through pipes. With the default policy (``SCHED_OTHER``)
every process woken by a tuple preempts the one running on that core, so on a busy machine each
process is switched out several times per page (an explorative crawl on 2 cores: 29 context
switches per page, the parser preempted 3.7 times a page) and comes back to cold caches.
``SCHED_BATCH`` (Linux, any user may ask for it) tells the kernel the process is CPU-bound: a
woken batch process waits for the running one's time slice to end instead of preempting it. The
same crawl then spent 7-13 % less CPU per page in every process, JVM included, and fetched
9-15 % more pages per second (docs/benchmarks-history.md, issue 20, fourteenth session). A tuple
waits at most a time slice (a few milliseconds) longer for its process to run; nothing else
changes.

``owler.sched.batch`` (default true) turns it on. ``owler run`` and ``owler cluster`` start the
worker JVMs so (the launcher, storm/bin/storm, reads :data:`ENV`; the Python components a worker
starts inherit the policy), and every Python component applies it to itself at start
(owler/task/component.py), which covers topologies submitted to a Storm cluster the project did
not start. A system that refuses it is logged and the crawl runs on as it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from owler import conf as C

log = logging.getLogger(__name__)

#: crawler key: run the crawl's processes with SCHED_BATCH
BATCH_KEY = "owler.sched.batch"
#: the environment variable the Storm launcher (storm/bin/storm) reads: "1" = SCHED_BATCH
ENV = "OWLER_SCHED_BATCH"

_BATCH = getattr(os, "SCHED_BATCH", None)  # Linux only


def wants_batch(conf: Mapping[str, Any] | None) -> bool:
    """Whether ``conf`` asks for SCHED_BATCH (``owler.sched.batch``, true by default)."""
    return C.get_bool(conf or {}, BATCH_KEY, True)


def policy_name(policy: int | None = None) -> str:
    """The name of ``policy`` (the calling thread's when None), e.g. ``SCHED_BATCH``."""
    if policy is None:
        if not hasattr(os, "sched_getscheduler"):
            return "unknown"
        policy = os.sched_getscheduler(0)
    for name in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR"):
        if getattr(os, name, None) == policy:
            return name
    return str(policy)


def use_batch() -> str:
    """Put the calling thread (and the threads and processes it starts after) under SCHED_BATCH.
    Returns the policy it runs under after; raises OSError when the system refuses."""
    if _BATCH is None:
        raise OSError("SCHED_BATCH is not available on this system")
    if os.sched_getscheduler(0) != _BATCH:
        os.sched_setscheduler(0, _BATCH, os.sched_param(0))
    return policy_name()


def apply(conf: Mapping[str, Any] | None) -> str:
    """SCHED_BATCH for the calling thread when ``conf`` asks for it (call it before starting
    threads: they inherit the policy). Returns the policy the thread runs under; a refusal is
    logged, not raised."""
    if wants_batch(conf):
        try:
            return use_batch()
        except OSError as exc:
            log.warning("%s: the system refused SCHED_BATCH (%s); running as before",
                        BATCH_KEY, exc)
    return policy_name()
