"""The OpenSearch frontier's monitoring figures at any size: a snapshot the writers keep.

``owler status``, the dashboard's recorder, ``owler run``'s progress line and the URLFrontier
service's GetStats ask for the URLs per status, the due count, the number of queues, the busiest
and the most delayed queues. On a status index each is an aggregation over every URL (47 ms at
3 M URLs and growing with them: docs/benchmarks-history.md, issue 45, fourth session), asked every
few seconds by every reader. A status write does not know the status it replaces (an ``index``
overwrites without reading), so counters cannot follow the writes exactly; instead one process at
a time computes them all every ``frontier.stats.interval`` seconds and stores them as one document
(:data:`STATS_ID` in the leases index), and every reader answers from it with the bound it holds
to:

- the document records the sum over the status index's primaries of their ``max_seq_no``, read
  *before* the index is refreshed for the aggregations, so that every write the aggregations do not
  see comes after it. Every write to the index takes a sequence number of its shard, persisted with
  the shard (a node's restart keeps it, unlike ``_stats/indexing``'s counters), so a reader's
  ``writes_since`` (the sum now less the sum then) bounds how far each figure may be from the
  index's own: one write moves a URL from one status (and one due date) to another, so no count is
  off by more than that. With no write since, the figures are the index's;
- the due count at a later ``now`` comes from the URLs due when the snapshot was taken plus those
  whose date falls in each of the following :data:`MINUTES` minutes, counted one by one: to the
  minute, as the embedded frontier counts (``due_resolution``);
- a writer (:meth:`StatsKeeper.tick`, from each status bulk) looks every half interval whether the
  snapshot is older than the interval and, if so, claims it (a conditional write, ``if_seq_no``:
  of all the writers of every crawler on the index one wins) and computes it on a thread of its
  own, so the status updater's batches never wait for it. A claim expires after
  :attr:`StatsKeeper.claim_secs` (or three times the last computation's time), so a writer killed
  while computing holds nobody up for long. On a very large index, where one computation takes
  seconds, the interval grows to ten times that time (:meth:`StatsKeeper.period`);
- a reader computes the snapshot itself only when there is none, when its minutes are used up,
  when the sequence numbers went back (the index was re-created), or when writes happened and no
  writer renewed it for three intervals (a frontier written by a process that is gone). Readers in
  one process share what they read for a second.

Up to ``frontier.stats.exact.max`` URLs the readers ask the index itself (live aggregations, exact
and cheap at that size); the snapshot serves above it. Figures for an interest (tags) are always
live for the due count and the delayed queues, which the snapshot does not split by tag.

Config keys: ``frontier.stats.interval`` (seconds, 30), ``frontier.stats.exact.max`` (URLs,
100,000).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping
from urllib.parse import quote

from owler import conf as C
from owler.constants import STATUS_NAMES
from owler.osclient import OpenSearchError, OSClient

log = logging.getLogger("owler.frontier.opensearch")

#: the snapshot's document in the leases index (no partition key has this form: a host has no
#: letters after a colon)
STATS_ID = "stats:frontier"
INTERVAL_KEY = "frontier.stats.interval"
EXACT_MAX_KEY = "frontier.stats.exact.max"
#: minutes after a snapshot whose due URLs it counts one by one (its due counts hold this long)
MINUTES = 60
#: the most delayed queues and the busiest queues a snapshot keeps
DELAYED = 20
TOP = 10
#: seconds readers of one process share what they read
SHARED_FOR = 1.0


@dataclasses.dataclass
class Snapshot:
    """The frontier's figures as one computation found them (epoch seconds)."""

    taken: float  # when the sequence numbers were read, before the aggregations
    seq: int  # sum of the primaries' max_seq_no + 1 (writes ever applied) then
    counts: dict[str, int]
    due_before: int  # URLs with a next fetch date up to ``taken``
    minutes: list[int]  # URLs whose date falls in each minute after ``taken``
    keys: int  # distinct keys (cardinality aggregation: approximate above 40,000)
    top_hosts: list[tuple[str, int]]
    delayed: list[tuple[str, float]]  # (key, its earliest due date), earliest first
    seconds: float  # how long the computation took
    writes_since: int | None = None  # set when read: None = unknown

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def due(self, now: float) -> int:
        """URLs due at ``now``: those due at ``taken`` and those of every minute after it that
        began by ``now`` (so also the URLs due later in ``now``'s own minute)."""
        if now <= self.taken:
            return self.due_before
        began = int((now - self.taken) // 60) + 1
        return self.due_before + sum(self.minutes[:began])

    def covers(self, now: float) -> bool:
        """Whether its minutes reach ``now``."""
        return now < self.taken + 60 * len(self.minutes)

    def to_doc(self) -> dict:
        doc = dataclasses.asdict(self)
        doc.pop("writes_since")
        doc["top_hosts"] = [list(t) for t in self.top_hosts]
        doc["delayed"] = [list(t) for t in self.delayed]
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> "Snapshot":
        return cls(taken=float(doc["taken"]), seq=int(doc["seq"]),
                   counts={str(k): int(v) for k, v in doc["counts"].items()},
                   due_before=int(doc["due_before"]), minutes=[int(n) for n in doc["minutes"]],
                   keys=int(doc["keys"]),
                   top_hosts=[(str(k), int(n)) for k, n in doc["top_hosts"]],
                   delayed=[(str(k), float(d)) for k, d in doc["delayed"]],
                   seconds=float(doc.get("seconds", 0.0)))


def write_count(client: OSClient, index: str) -> int | None:
    """Writes ever applied to ``index``: the sum over its primaries of ``max_seq_no`` + 1. None
    when a primary is not assigned (a node is down) or the index cannot be read."""
    try:
        _, data = client.request("GET", f"/{index}/_stats/docs", params={
            "level": "shards",
            "filter_path": "indices.*.shards.*.seq_no.max_seq_no,indices.*.shards.*.routing.primary"})
    except OpenSearchError:
        return None
    total = 0
    for idx in (data or {}).get("indices", {}).values():
        for copies in idx.get("shards", {}).values():
            primary = [c for c in copies if c.get("routing", {}).get("primary")]
            if not primary:
                return None
            total += int(primary[0]["seq_no"]["max_seq_no"]) + 1
    return total


def delayed_queues(client: OSClient, index: str, queues_index: str | None, query: dict,
                   now: float, n: int) -> list[tuple[str, float]]:
    """The ``n`` queues whose earliest URL matching ``query`` (due URLs) is the oldest, as ``(key,
    that URL's date)``, oldest first. With ``queues_index`` the candidates are its earliest
    ``4 n`` due documents (their dates are lower bounds), and only their URLs are read (a
    candidate with no due URL is left out, so fewer than ``n`` may come back); without it, an
    aggregation of every URL ``query`` matches."""
    if queues_index is not None:
        _, found = client.request("POST", f"/{queues_index}/_search", {
            "size": 4 * n, "track_total_hits": False, "_source": False, "sort": [{"due": "asc"}],
            "query": {"range": {"due": {"lte": int(now * 1000)}}}})
        keys = [h["_id"] for h in found["hits"]["hits"]]
        if not keys:
            return []
        query = {"bool": {**query["bool"], "filter": [*query["bool"].get("filter", []),
                                                      {"terms": {"key": keys}}]}}
    _, data = client.request("POST", f"/{index}/_search", {
        "size": 0, "track_total_hits": False, "query": query,
        "aggs": {"k": {"terms": {"field": "key", "size": n, "order": {"first": "asc"}},
                       "aggs": {"first": {"min": {"field": "nextFetchDate"}}}}}})
    return [(b["key"], b["first"]["value"] / 1000.0)
            for b in data["aggregations"]["k"]["buckets"] if b["first"]["value"] is not None]


def due_query(now: float) -> dict:
    """URLs due at ``now`` (every status: the frontier's own filter without an interest)."""
    return {"bool": {"filter": [{"range": {"nextFetchDate": {
        "lte": int(now * 1000), "format": "epoch_millis"}}}]}}


def compute(client: OSClient, index: str, queues_index: str | None) -> Snapshot:
    """Every figure of a snapshot, from the index as it is now (one refresh, one search with all
    the aggregations, and the delayed queues)."""
    began = time.monotonic()
    taken = time.time()
    seq = write_count(client, index)
    if seq is None:
        raise OpenSearchError(f"cannot read the sequence numbers of {index!r} (a primary is "
                              "not assigned)")
    client.request("POST", f"/{index}/_refresh")
    t_ms = int(taken * 1000)
    ranges = [{"from": t_ms + 1 + 60_000 * i, "to": t_ms + 1 + 60_000 * (i + 1)}
              for i in range(MINUTES)]
    _, data = client.request("POST", f"/{index}/_search", {
        "size": 0, "track_total_hits": False, "aggs": {
            "s": {"terms": {"field": "status", "size": 20}},
            "k": {"cardinality": {"field": "key", "precision_threshold": 40000}},
            "top": {"terms": {"field": "key", "size": TOP}},
            "due": {"filter": due_query(taken)},
            "m": {"range": {"field": "nextFetchDate", "format": "epoch_millis",
                            "ranges": ranges, "keyed": False}}}})
    aggs = data["aggregations"]
    counts = {name: 0 for name in STATUS_NAMES}
    for b in aggs["s"]["buckets"]:
        counts[b["key"]] = b["doc_count"]
    minutes = [int(b["doc_count"]) for b in sorted(aggs["m"]["buckets"], key=lambda b: b["from"])]
    delayed = delayed_queues(client, index, queues_index, due_query(taken), taken, DELAYED)
    return Snapshot(taken=taken, seq=seq, counts=counts, due_before=int(aggs["due"]["doc_count"]),
                    minutes=minutes, keys=int(aggs["k"]["value"]),
                    top_hosts=[(b["key"], b["doc_count"]) for b in aggs["top"]["buckets"]],
                    delayed=delayed, seconds=round(time.monotonic() - began, 3))


class StatsKeeper:
    """Reads, renews and claims the snapshot of one status index (module docstring).

    ``queues_index`` is called for the queues index to read the delayed queues' candidates from
    (None while it is being built)."""

    def __init__(self, conf: Mapping[str, Any], client: OSClient, index: str, leases_index: str,
                 owner: str, queues_index: Callable[[], str | None]) -> None:
        self.client = client
        self.index = index
        self.leases_index = leases_index
        # who claims: this keeper alone (the tasks of one topology may share a lease owner)
        self.owner = f"{owner}/{os.getpid()}/{id(self):x}"
        self.queues_index = queues_index
        self.interval = max(1.0, C.get_float(conf, INTERVAL_KEY, 30.0))
        self.exact_max = C.get_int(conf, EXACT_MAX_KEY, 100_000)
        self.claim_secs = max(60.0, 4 * self.interval)
        self._shared: tuple[float, Snapshot | None] | None = None  # (when read, what)
        self._next_tick = 0.0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one computation at a time in this process

    # -- the document ---------------------------------------------------------------------------
    def _doc_path(self) -> str:
        return f"/{self.leases_index}/_doc/{quote(STATS_ID, safe='')}"

    def read(self) -> tuple[Snapshot | None, dict]:
        """The stored snapshot (None: none yet) and the document's state: ``seq``/``term`` for a
        conditional write (absent: no document), ``owner`` and ``until`` of a claim."""
        status, data = self.client.request("GET", self._doc_path(), ok=(200, 404))
        if status == 404 or not data.get("found"):
            return None, {}
        src = data["_source"]
        state = {"seq": data["_seq_no"], "term": data["_primary_term"],
                 "owner": src.get("owner"), "until": (src.get("until") or 0) / 1000.0}
        try:
            snap = Snapshot.from_doc(src["stats"]) if src.get("stats") else None
        except (KeyError, TypeError, ValueError) as exc:  # written by another version
            log.warning("the frontier's stored figures cannot be read (%s): computed again", exc)
            snap = None
        return snap, state

    def _write(self, state: dict, body: dict) -> dict | None:
        """Write the document if it is still as ``state`` saw it: its new state, or None when
        another process wrote it first."""
        if state:
            params = {"if_seq_no": state["seq"], "if_primary_term": state["term"]}
        else:
            params = {"op_type": "create"}
        status, data = self.client.request("PUT", self._doc_path(), body, params=params,
                                           ok=(200, 201, 409))
        if status == 409:
            return None
        return {"seq": data["_seq_no"], "term": data["_primary_term"], "owner": body["owner"],
                "until": body["until"] / 1000.0}

    def renew(self, now: float, old: Snapshot | None, state: dict) -> Snapshot | None:
        """Claim the document, compute a snapshot and store it. None when another process holds
        a live claim or won the race for it."""
        if state.get("until", 0) > now and state.get("owner") != self.owner:
            return None
        with self._lock:
            stats = old.to_doc() if old else None
            hold = max(self.claim_secs, 3 * old.seconds) if old else self.claim_secs
            claim = self._write(state, {"owner": self.owner, "stats": stats,
                                        "until": int((now + hold) * 1000)})
            if claim is None:
                return None
            try:
                snap = compute(self.client, self.index, self.queues_index())
            except BaseException:
                try:  # give the claim up at once rather than when it expires
                    self._write(claim, {"owner": self.owner, "stats": stats, "until": 0})
                except OpenSearchError:
                    pass
                raise
            if self._write(claim, {"owner": self.owner, "stats": snap.to_doc(), "until": 0}) is None:
                log.info("the frontier's figures were renewed by another process meanwhile")
            return snap

    def period(self, snap: Snapshot) -> float:
        """Seconds between two snapshots: ``frontier.stats.interval``, or ten times what the last
        one took to compute if longer, so that the figures never cost the cluster more than a
        tenth of one search thread (on a very large index)."""
        return max(self.interval, 10 * snap.seconds)

    # -- writers ---------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """From each status bulk of a writer: every half interval, renew the snapshot on a
        thread of its own if it is older than the interval (one writer of all wins the claim)."""
        if now < self._next_tick:
            return
        self._next_tick = now + self.interval / 2
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._renew_if_old, name="frontier-stats",
                                        daemon=True)
        self._thread.start()

    def _renew_if_old(self) -> None:
        try:
            now = time.time()
            snap, state = self.read()
            if snap is None or now - snap.taken >= self.period(snap):
                self.renew(now, snap, state)
        except (OpenSearchError, KeyError, TypeError) as exc:  # tried again at the next tick
            log.warning("cannot renew the frontier's figures: %s", exc)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a renewal in progress (a writer closing)."""
        if self._thread is not None:
            self._thread.join(timeout)

    # -- readers ---------------------------------------------------------------------------------
    def current(self, now: float) -> Snapshot | None:
        """The snapshot to answer from, with its ``writes_since``; None when the index is small
        enough for live aggregations (up to ``frontier.stats.exact.max`` URLs)."""
        shared = self._shared
        if shared is not None and time.monotonic() - shared[0] < SHARED_FOR \
                and (shared[1] is None or shared[1].covers(now)):
            return shared[1]
        snap, state = self.read()
        seq: int | None = None
        if snap is None or not snap.covers(now):
            snap = self._renewed(now, snap, state)
        elif snap.total > self.exact_max or now - snap.taken >= 3 * self.period(snap):
            seq = write_count(self.client, self.index)
            if seq is not None and (seq < snap.seq or (
                    seq > snap.seq and now - snap.taken >= 3 * self.period(snap))):
                # the index re-created, or written with nobody renewing the figures
                snap = self._renewed(now, snap, state)
                seq = None
        out = None
        if snap.total > self.exact_max:
            seq = write_count(self.client, self.index) if seq is None else seq
            out = dataclasses.replace(
                snap, writes_since=None if seq is None or seq < snap.seq else seq - snap.seq)
        self._shared = (time.monotonic(), out)
        return out

    def _renewed(self, now: float, snap: Snapshot | None, state: dict) -> Snapshot:
        """A new snapshot, stored; while another process computes one, the old one if it still
        covers ``now``, else one computed here and not stored."""
        fresh = self.renew(now, snap, state)
        if fresh is not None:
            return fresh
        if snap is not None and snap.covers(now):
            return snap
        return compute(self.client, self.index, self.queues_index())
