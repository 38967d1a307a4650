"""The frontier in an OpenSearch status index, compatible with StormCrawler's.

Documents (``_id`` = sha256 hex of the URL, as StormCrawler's StatusUpdaterBolt)::

    {"url": "...", "status": "FETCHED", "key": "example.com",
     "nextFetchDate": "2026-11-22T10:00:00Z",            # absent: never fetch again
     "metadata": {"fetch%2EstatusCode": ["200"], ...},   # '.' in names stored as %2E
     "tags": ["Sitemap"],                                # OWLer-style interest (frontier.tags)
     "updated": 1795400000000}                           # last write (not into a strict index)

Writes: one ``_bulk`` per batch; DISCOVERED is ``create`` (a 409 conflict means "already known" and
counts as success), every other status is ``index`` (overwrite). A DISCOVERED from a sitemap is an
``update`` with a script and the discovery as upsert: for a known URL it is the sitemap refresh of
:mod:`owler.frontier.refresh` (status kept, sitemap facts merged, due again on a later lastmod…),
the same rules as the SQLite frontier's. :meth:`apply_updates` returns the
positions of the updates whose bulk item failed, so the status updater fails only their tuples.
A status the index refuses as a document (a 400 such as ``mapper_parsing_exception``) would be
refused again on every replay: it is written once more as ERROR with ``error.cause``
``status.refused`` and the index's reason (:meth:`_write_refused`), and fails only if that fails.
The index uses ``translog.durability: request``: a bulk response means the writes are on disk.

The spout's query (:meth:`due`), in two searches. The first picks the queues: the earliest
``due`` of the queues index (``<index>_queues``, one document per key, below) up to now, a sorted
search over queues whose cost does not grow with the URLs (an aggregation of every due URL by key,
as StormCrawler's AggregationSpout does, took 0.54 s at 2 M URLs). The task takes the leases of
those queues, and the second search reads the first URLs by (nextFetchDate, url) of the queues it
got, and of those only (a ``top_hits`` per queue, the costly part of an aggregation). With an
interest (a ``term`` filter per required tag, a ``terms`` filter of the any-of tags, the excluded
ones in ``must_not``: the queues' dates do not know tags), for one ``key``, and while the queues
index is being built, the first search is the terms aggregation of the due URLs on ``key``
ordered by each queue's earliest date, with nothing else below it. Either way, queues that may
not be taken are left out by the first search: this task's rounds in progress, and the queues it
knows are paused or blocked until a later time (its own pauses after a round, the pauses and
blocks of others its lease requests met; remembered up to :data:`_HELD_HORIZON` seconds).
Without that, the queues with the oldest URLs, paused after their round, would fill every answer
and the task would serve nothing until their pause ended (``frontier.queue.round.delay`` is five
minutes in OWLer).

The queues index: a queue's ``due`` is a lower bound of the earliest next fetch date of its URLs.
:meth:`send_updates` lowers it after each bulk from the items written (a DISCOVERED already known
is not: it would make a queue due whose URLs are not), with ``w`` = when. The status updater's
frontier (``carry_queues``) sends that lowering as the last actions of its next bulk instead of a
request of its own, or alone once no bulk followed within half a second
(:meth:`flush_queues`, from its tick; and at :meth:`close`): a second request a bulk, sent
after the first's answer, held one node at 0.70x the bare bulk's updates/s on the crawl's
stream and 0.50x on the uniform one; carried, 0.78x and 0.65x (docs/benchmarks-history.md,
issue 45, twelfth session). For the status updater
(``round_results``) only from the DISCOVERED, its other statuses being the results of rounds, whose
queues are dated when the rounds end (a document neither date nor ``w``, kept to the second,
changes is not written again). Taking a lease raises it
to the lease's end (no other task picks the queue meanwhile); a round's end sets it to the end of
the pause; a queue given back unserved gets its date before the lease back; and a spout that
leased a queue and found nothing due in it (:meth:`_settle_queues`) sets it to the queue's
earliest date or deletes the document. A writer killed between its bulk and the queues' request
would leave a queue's date later than a DISCOVERED it created, or no document for a new host's
queue, and the replay cannot tell (it is a conflict, as for any URL already known): the URL would
wait until the queue's date, or for ever. So every bulk that lowers queues carries, after its
updates, the writer's intent (``intent:<owner>`` in the leases index: the dates it will lower the
queues to, those it still owes from the bulk before included), durable with the statuses; a
lowering the node refused is owed again, for the next bulk. Each writer, at its first write and
every :data:`INTENT_SCAN` seconds, lowers the queues of the intents other writers left more than
:data:`INTENT_AGE` seconds ago and deletes them (a writer that finished its lowering meanwhile costs
a queue picked too early, which the spout settles). A writer deletes its own when it closes. An
index of an older version gets its queues index built once (:meth:`_build_queues`).

Queues are served in rounds under a lease (:data:`LEASES` index, ``_id`` = key): before a spout task
serves a queue it takes the queue's lease (create, or overwrite an expired one, with optimistic
concurrency control: ``if_seq_no``/``if_primary_term``); when the round's URLs are all acked it
releases the lease with ``until`` = when the queue may be served again (``fetcher.server.delay``
after the last ack, but not before the index refresh shows the round's new statuses, and at
least ``frontier.queue.round.delay`` after the round began: when :meth:`OpenSearchFrontier.due`
handed its URLs out). Several
spout tasks and several crawlers on one index therefore never serve one queue at the same time,
and the per-queue delay holds across all of them. A task that takes over a queue another task
served last refreshes the index and searches that queue again before it reads its URLs: the round's
writes were durable when the other task let go, but a loaded node may refresh later than the
pause allowed for (two crawlers once fetched the same two URLs). A lease not released (a dead task) expires
after ``frontier.lease.ttl`` seconds; with ``frontier.crawler.id`` set, the owner name is stable
across restarts and a restarted task takes its own unreleased leases back at once.
A queue the server asked to leave alone (429/503 with Retry-After, or the fetcher's back-off:
:attr:`StatusUpdate.block_until`) gets a lease under :data:`BLOCK_OWNER` until then, only ever
extended, which no task can take before it ends (a task's round on it loses its lease).

Sharing: every task announces itself in the leases index (a ``task`` document renewed every few
seconds, valid for ``frontier.lease.ttl``). While other tasks are present, a task that ended a
round on a queue lets them have the first go at it: it takes the queue back itself only
``1.5 × spout.min.delay.queries`` after the queue's pause ended. Without this, the task that
released a queue, whose polls are in step with its own releases, wins the race for it nearly
every time, and a crawler that joins a running one may get no queue at all. Alone, a task takes
its queues back as soon as their pause ends.

Config keys: ``opensearch.status.index.name`` (status), ``opensearch.status.routing`` (false: when
true the partition key is the routing value), ``opensearch.status.shards`` / ``.replicas`` /
``.refresh.interval`` (used when the index is created; ``.replicas`` also for the leases, queues
and budgets indices beside it, which a lost node must not take away either), ``frontier.tags``
(a map ``"<metadata key>=<value>": <tag>``), ``frontier.interest.required.tags`` /
``frontier.interest.tags`` / ``frontier.interest.exclude.tags`` (:class:`owler.frontier.Interest`),
``frontier.lease.ttl``, ``frontier.queue.round.delay``, ``fetcher.server.delay``,
``partition.url.mode``, and the connection keys of :mod:`owler.osclient`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Container, Iterable, Iterator, Mapping, Sequence
from urllib.parse import quote

import orjson

from owler import conf as C
from owler.constants import (DEPTH, ERROR_CAUSE, ERROR_MESSAGE, IS_SITEMAP, MESSAGE_TIMEOUT_KEY,
                             MIN_DELAY_QUERIES_KEY, ON_SITEMAP, ROUND_DELAY_KEY, SERVER_DELAY_KEY,
                             SITEMAP_LAST_MODIFIED, SITEMAP_SEEDED, STATUS_NAMES, Status)
from owler.frontier import (DEFAULT_KEY, FrontierError, FrontierRecord, Interest, StatusUpdate,
                            round_robin, seed_key, Tagger)
from owler.frontier.crawls import DEFAULT_CRAWL, SEPARATOR, index_name
from owler.frontier.opensearch_stats import (DELAYED, TOP, Snapshot, StatsKeeper,
                                             delayed_queues)
from owler.frontier.refresh import EXT_PREFIXES, REFRESH_KEYS, TRUE, is_refresh, is_sitemap_key
from owler.osclient import INDEX_NAME, OpenSearchError, OSClient, conn_key, epoch_of
from owler.scheduler import load_scheduler
from owler.urls import partition_key, partition_mode

log = logging.getLogger("owler.frontier.opensearch")

#: fields a status index must map this way (a StormCrawler status index does)
REQUIRED_FIELDS = {"url": ("keyword",), "key": ("keyword",), "status": ("keyword",),
                   "nextFetchDate": ("date", "date_nanos")}

#: owner of the lease document of a queue held for a throttling server (no task has this name)
BLOCK_OWNER = "_blocked_"
#: a writer looks for the intents other writers left every this many seconds (and at its first
#: write) ...
INTENT_SCAN = 60.0
#: ... and applies those older than this many seconds (younger ones may be in flight)
INTENT_AGE = 30.0
_MAX_TERMS = 60_000  # keys in one terms query (an index allows 65,536: index.max_terms_count)
#: seconds a task trusts what it learnt of a queue's pause or block (OpenSearchFrontier.held): a
#: block may be lifted early by another process (URLFrontier's BlockQueueUntil)
_HELD_HORIZON = 60.0
_FILTER_BULK = "errors,items.*.status,items.*.error.type,items.*.error.reason"
#: an item's status in a ``_bulk`` answer filtered by _FILTER_BULK (the only "status" key there)
_ITEM_STATUS = re.compile(rb'"status":(\d+)')
#: error.cause of a status the index refused, written again as ERROR (send_updates)
REFUSED_CAUSE = "status.refused"
#: the errors of a _bulk item that say the document itself cannot be indexed (not the index:
#: a closed index answers 400 too, with index_closed_exception)
_DOCUMENT_ERRORS = frozenset({"mapper_parsing_exception", "document_parsing_exception",
                              "strict_dynamic_mapping_exception", "illegal_argument_exception",
                              "mapper_exception"})


def _status_name(u: StatusUpdate) -> str:
    return u.status.value if isinstance(u.status, Status) else str(u.status)


def _sha256(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


_ISO_OF_SECOND: dict[int, str] = {}


def _iso(ts: float) -> str:
    """``ts`` (epoch seconds) as ``YYYY-MM-DDTHH:MM:SSZ``, the fraction dropped. Remembered per
    second: most updates of a batch are discoveries due now, the same second."""
    sec = int(ts // 1)
    text = _ISO_OF_SECOND.get(sec)
    if text is None:
        if len(_ISO_OF_SECOND) >= 4096:
            _ISO_OF_SECOND.clear()
        text = _ISO_OF_SECOND[sec] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec))
    return text


@dataclass(slots=True)
class BulkRequest:
    """A batch of status updates as ``_bulk`` lines (:meth:`OpenSearchFrontier.prepare_updates`):
    ``count`` updates, and the queues to block until a time once they are written."""

    lines: list[bytes] = dataclasses.field(default_factory=list)
    count: int = 0
    blocks: dict[str, float] = dataclasses.field(default_factory=dict)
    #: the updates, by position (what a refused document is rewritten from)
    updates: list = dataclasses.field(default_factory=list)
    #: by position: the next fetch date written (epoch ms, the tags' shift taken off; None: no
    #: date) for the queues index (OpenSearchFrontier._lower_queues)
    dues: list = dataclasses.field(default_factory=list)
    #: the lines joined, once the request is complete (:meth:`seal`)
    body: bytes | None = None
    #: each queue's earliest date the updates may lower it to (:meth:`seal`): the writer's
    #: intent, written last in the same request (OpenSearchFrontier.send_updates)
    first: dict[str, int] = dataclasses.field(default_factory=dict)

    def block(self, key: str, until: float) -> None:
        """Block queue ``key`` until ``until`` once written (the latest time asked wins)."""
        self.blocks[key] = max(until, self.blocks.get(key, 0.0))

    def extend(self, other: "BulkRequest") -> None:
        """Append ``other``'s updates (positions after this one's)."""
        self.body = None
        self.lines += other.lines
        self.count += other.count
        self.updates += other.updates
        self.dues += other.dues
        for key, until in other.blocks.items():
            self.block(key, until)

    def seal(self) -> bytes:
        """The updates' lines joined once, and the queues they may lower (:attr:`first`).
        :class:`owler.frontier.pipeline.OneInFlight` seals a request in the thread that built it,
        so that the sending thread has little to do between the answer to one request and the
        start of the next."""
        if self.body is None:
            self.body = _ndjson(self.lines)
            self.first = _earliest(self.dues)
        return self.body


class QueueDebt:
    """The queues a writer owes a lowering (``OpenSearchFrontier.carry_queues``): each queue's
    earliest date owed (epoch ms), when their URLs were written (the latest), and since when
    any is owed. Shared by the thread that sends the bulks and the one that flushes between
    them."""

    def __init__(self) -> None:
        self.dues: dict[str, int] = {}
        self.w = 0
        self.since = 0.0
        self._lock = threading.Lock()

    def add(self, first: Mapping[str, int], w: int) -> None:
        if not first:
            return
        with self._lock:
            if not self.dues:
                self.since = time.time()
            self.dues = _earliest([*self.dues.items(), *first.items()])
            self.w = max(self.w, w)

    def take(self, older_than: float = 0.0) -> tuple[dict[str, int], int]:
        """What is owed, now no longer (nothing while the oldest is younger than
        ``older_than`` seconds), and when it was written."""
        with self._lock:
            if not self.dues or time.time() - self.since < older_than:
                return {}, self.w
            dues, self.dues = self.dues, {}
            return dues, self.w


def _earliest(dues: Iterable[tuple[str, int | None]]) -> dict[str, int]:
    """Each key's earliest date of ``dues`` ((key, epoch ms or None) pairs)."""
    first: dict[str, int] = {}
    for key, due in dues:
        if due is not None and (key not in first or due < first[key]):
            first[key] = due
    return first


def _ndjson(lines: list[bytes]) -> bytes:
    return b"\n".join([*lines, b""])


class OpenSearchFrontier:
    """:class:`owler.frontier.Frontier` over an OpenSearch status index (module docstring)."""

    leases_queues = True  # the spout serves queues in leased rounds (see release())
    #: the most URLs per queue due() gives: its top_hits asks 1.5 x + 2, and an index allows 100
    #: (index.max_inner_result_window)
    max_per_bucket = 64

    def __init__(self, conf: Mapping[str, Any] | None = None, owner: str | None = None,
                 crawl: str = DEFAULT_CRAWL) -> None:
        conf = conf or {}
        self.conf = conf
        self.client = OSClient(conf, "status")
        self.crawl = crawl
        self.index = index_name(str(conn_key(conf, "status", INDEX_NAME, "status")), crawl)
        self.leases_index = f"{self.index}_leases"
        self.queues_index = f"{self.index}_queues"
        self.queues_ready = False  # the queues index holds every queue (_ensure_queues)
        self._queues_checked = 0.0  # when queues_ready was last read from the index
        #: the queues of the last pick: key -> (its date then, in epoch ms: w, when a URL of it
        #: was last written, None when picked from the due URLs) (_pick_queues)
        self._picked: dict[str, tuple[int, int | None]] = {}
        #: key -> (seq, term, date) of the queue's document as this task's lease raised it
        #: (_acquire; None: no document), for _settle_queues and release
        self._raised: dict[str, tuple[int, int, int] | None] = {}
        #: releases not written yet (release(defer=True)): served -> key -> (lease, until,
        #: the queue's script and its params or None)
        self._releasing: dict[bool, dict[str, tuple[dict, float, tuple | None]]] = {}
        self._releasing_since = 0.0
        self._written_due: int | None = None  # (_doc_dict)
        #: when this writer next looks for the intents of others (0: it has written nothing)
        self._next_intents = 0.0
        #: the statuses written other than DISCOVERED are the results of the spouts' rounds (the
        #: status updater says so): their queues are dated when the rounds end, not by the writes
        self.round_results = False
        #: the queues' lowering of one bulk is sent with the next bulk (module docstring): the
        #: status updater's frontier, whose batches follow each other (owler.status.FrontierWriter)
        self.carry_queues = False
        self._owed = QueueDebt()
        self._budgets_ready = False  # <index>_budgets checked (charge())
        self.routing = C.get_bool(conf, "opensearch.status.routing", False)
        self.partition_mode = partition_mode(conf)
        self.tagger = Tagger(conf)
        self.tag_rules = self.tagger.rules
        self.want = Interest.from_conf(conf)
        self.required = list(self.want.required)
        self.interest = list(self.want.any)
        self.not_interest = list(self.want.exclude)
        self.lease_ttl = C.get_float(conf, "frontier.lease.ttl", 0.0) or (
            C.get_float(conf, MESSAGE_TIMEOUT_KEY, 120) + 60)
        self.round_delay = C.get_float(conf, ROUND_DELAY_KEY, 0.0)
        self.server_delay = C.get_float(conf, SERVER_DELAY_KEY, 1.0)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.leases: dict[str, dict] = {}  # key -> {"seq", "term", "until", "start"} held by me
        #: key -> until when (epoch s) no task may take the queue, as this task last learnt it
        #: (its own pauses, others' pauses and blocks): left out of the spout's first search
        self.held: dict[str, float] = {}
        # sharing with other tasks (module docstring)
        self.handover = 1.5 * C.get_float(conf, MIN_DELAY_QUERIES_KEY, 2000) / 1000.0
        self.beat_every = min(10.0, self.lease_ttl / 3)
        self.next_beat = 0.0
        self.peers = False  # other tasks were present at the last heartbeat
        self._md_names: dict[str, str] = {}
        self._md_key_sets: dict[tuple[str, ...], tuple[str, ...] | None] = {}
        self._action_heads: dict[str, bytes] = {}  # op -> the action's bytes up to its _id
        self.write_updated = True
        self._scheduler = None  # the next fetch date of a refused status (_write_refused)
        self._replicas = conn_key(conf, "status", "replicas")  # of every index created here
        try:
            self._ensure_indices(conf)
            self.refresh_secs = self._refresh_interval()
        except OpenSearchError as exc:
            raise FrontierError(f"status index {self.index!r}: {exc}") from exc
        # a released queue pauses at least until the round's status writes are searchable, or
        # the next task to take it (of any crawler) would see its URLs still due
        self.min_hold = self.refresh_secs + 1.0
        #: the monitoring figures above frontier.stats.exact.max URLs (opensearch_stats)
        self.stats = StatsKeeper(conf, self.client, self.index, self.leases_index, self.owner,
                                 lambda: self.queues_index if self.queues_ready else None)

    @property
    def location(self) -> str:
        """Where the frontier is, for messages."""
        return f"OpenSearch index {self.index!r} at {self.client.address}"

    # -- set-up ------------------------------------------------------------------------------------
    def _ensure_indices(self, conf: Mapping[str, Any]) -> None:
        status, _ = self.client.request("HEAD", f"/{self.index}", ok=(200, 404))
        if status == 404:
            body = _load_template("status.json")
            idx = body["settings"]["index"]
            for key, name in (("shards", "number_of_shards"), ("replicas", "number_of_replicas"),
                              ("refresh.interval", "refresh_interval")):
                value = conn_key(conf, "status", key)
                if value is not None:
                    idx[name] = value
            if self.crawl != DEFAULT_CRAWL:  # the crawl the index holds (list_crawls reads it)
                body.setdefault("mappings", {}).setdefault("_meta", {})["crawl_id"] = self.crawl
            self._create_index(self.index, body)
        status_created = status == 404
        self._check_mapping()
        status, _ = self.client.request("HEAD", f"/{self.leases_index}", ok=(200, 404))
        template = _load_template("leases.json")
        if status == 404:
            self._create_index(self.leases_index, template)
        else:  # an index of an older version: add the fields it lacks (a no-op otherwise)
            self.client.request("PUT", f"/{self.leases_index}/_mapping",
                                {"properties": template["mappings"]["properties"]})
        self._ensure_queues(conf, status_created)

    def _create_index(self, name: str, body: dict) -> bool:
        """Create index ``name`` (with the status index's replicas); False when another process
        created it first."""
        if self._replicas is not None:
            body["settings"]["index"]["number_of_replicas"] = self._replicas
        status, data = self.client.request("PUT", f"/{name}", body, ok=(200, 201, 400))
        if status == 400:
            err = (data or {}).get("error") or {}
            if not (isinstance(err, dict) and err.get("type") == "resource_already_exists_exception"):
                raise FrontierError(f"cannot create index {name!r}: {err}")  # created meanwhile: fine
            return False
        return True

    # -- the queues index --------------------------------------------------------------------------
    def _ensure_queues(self, conf: Mapping[str, Any], empty: bool) -> None:
        """Create the queues index if missing: at once complete when the status index was
        ``empty`` (just created), else filled from the status index by this process
        (:meth:`_build_queues`); another process's build is waited for by :meth:`_queues_usable`."""
        status, _ = self.client.request("HEAD", f"/{self.queues_index}", ok=(200, 404))
        if status == 404:
            body = _load_template("queues.json")
            body["mappings"]["_meta"] = {"built": empty, "since": int(time.time() * 1000)}
            if self._create_index(self.queues_index, body) and not empty:
                self._build_queues()
        self._queues_usable(time.time())

    def _queues_usable(self, now: float) -> bool:
        """Whether the spout may pick queues from the queues index (it holds them all), read
        again every 30 s while it does not. A build that has not finished within 15 minutes (its
        process died) is done again by this process."""
        if self.queues_ready or now - self._queues_checked < 30:
            return self.queues_ready
        self._queues_checked = now
        _, data = self.client.request("GET", f"/{self.queues_index}/_mapping")
        meta = (next(iter((data or {}).values()), {}).get("mappings") or {}).get("_meta") or {}
        if not meta.get("built") and now * 1000 - int(meta.get("since") or 0) > 900_000:
            self.client.request("PUT", f"/{self.queues_index}/_mapping",
                                {"_meta": {"built": False, "since": int(now * 1000)}})
            self._build_queues()
            meta = {"built": True}
        self.queues_ready = bool(meta.get("built"))
        return self.queues_ready

    def _build_queues(self) -> None:
        """Fill the queues index from the status index (one of an older version): the earliest
        next fetch date of each key, a composite aggregation page by page. Status writes meanwhile
        lower the queues they touch as usual; both take the earlier date."""
        log.info("building %s from %s (once, for an index of an older version)",
                 self.queues_index, self.index)
        started, after, n = time.monotonic(), None, 0
        self.client.request("POST", f"/{self.index}/_refresh")  # (every URL written so far)
        while True:
            comp: dict[str, Any] = {"size": 20_000, "sources": [{"k": {"terms": {"field": "key"}}}]}
            if after:
                comp["after"] = after
            _, data = self.client.request("POST", f"/{self.index}/_search", {
                "size": 0, "query": {"exists": {"field": "nextFetchDate"}},
                "aggs": {"q": {"composite": comp, "aggs": {"m": {"min": {
                    "field": "nextFetchDate"}}}}}})
            agg = data["aggregations"]["q"]
            if not agg["buckets"]:
                break
            self._lower_queues([(b["key"]["k"], int(b["m"]["value"])) for b in agg["buckets"]],
                               written=0)
            n += len(agg["buckets"])
            after = agg.get("after_key")
            if not after:
                break
        self.client.request("PUT", f"/{self.queues_index}/_mapping", {"_meta": {"built": True}})
        log.info("%s: %d queues in %.1f s", self.queues_index, n, time.monotonic() - started)

    #: a status write's date into its queue's document: the earlier date wins; ``w`` moves when
    #: it is a second old (nothing is written when neither changes)
    _LOWER_SCRIPT = orjson.dumps(
        "boolean lower = ctx._source.due == null || ctx._source.due > params.d;"
        " boolean later = ctx._source.w == null || ctx._source.w < params.w - 1000;"
        " if (lower) { ctx._source.due = params.d }"
        " if (later) { ctx._source.w = params.w }"
        " if (!lower && !later) { ctx.op = 'none' }")

    def _lower_queues(self, dues: Iterable[tuple[str, int | None]], written: int | None = None
                      ) -> None:
        """Give each queue of ``dues`` (key, next fetch date written in epoch ms or None) the
        earliest of those dates if it is earlier than its own, and ``w`` = ``written`` (epoch
        ms; now by default), kept to the second: a document neither changes is not written
        again (most URLs a page links to are of its own host). Raises OpenSearchError when the
        node refused one. (A process does not skip a queue it lowered a moment ago: another
        process may have deleted the document since, as URLFrontier's DeleteQueue does.)"""
        first = _earliest(dues)
        if not first:
            return
        w = int(time.time() * 1000) if written is None else written
        _, res = self.client.request("POST", "/_bulk", _ndjson(self._queue_lines(first, w)),
                                     params={"filter_path": "errors,items.*.status,"
                                                            "items.*.error.reason"})
        if res and res.get("errors"):
            bad = [next(iter(i.values())) for i in res.get("items", [])
                   if next(iter(i.values())).get("status", 500) >= 300]
            if bad:
                raise OpenSearchError(f"cannot write {len(bad)} queue(s) of {self.queues_index}: "
                                      f"{bad[0]}")

    def _queue_lines(self, first: Mapping[str, int], w: int) -> list[bytes]:
        """The ``_bulk`` actions of :meth:`_lower_queues`: two lines per queue of ``first``."""
        head = b'{"update":{"_index":%s,"_id":' % orjson.dumps(self.queues_index)
        lines = []
        for key, due in first.items():
            lines.append(head + orjson.dumps(key) + b',"retry_on_conflict":5}}')
            lines.append(b'{"script":{"source":%s,"params":{"d":%d,"w":%d}},'
                         b'"upsert":{"due":%d,"w":%d}}' % (self._LOWER_SCRIPT, due, w, due, w))
        return lines

    def flush_queues(self, older_than: float = 0.0) -> int:
        """Lower now the queues owed (:attr:`carry_queues`) when no bulk came to carry them (the
        status updater's tick, :meth:`close`), if the oldest has waited ``older_than`` seconds.
        Returns how many were lowered; when the node refuses, they stay owed and
        :class:`OpenSearchError` is raised."""
        owed, w = self._owed.take(older_than)
        if not owed:
            return 0
        try:
            self._lower_queues(owed.items(), written=w)
        except BaseException:
            self._owed.add(owed, w)
            raise
        return len(owed)

    def _settle_queues(self, keys: list[str], now: float) -> None:
        """Queues the spout leased and found nothing due in: their date becomes the earliest
        next fetch date of their URLs (the document is deleted when none has one), written under
        the sequence number the lease's raise left, so a status write since (which lowers the
        date) wins.
        A queue with a URL written within the refresh interval + 2 s (``w`` is kept to the
        second) is left as it is: that URL may not be searchable yet."""
        searchable = int((now - self.refresh_secs - 2.0) * 1000)
        def quiet(k: str) -> bool:  # leased with its document raised, picked from the index
            w = self._picked[k][1] if k in self._picked else None
            return bool(self._raised.get(k)) and w is not None and w <= searchable
        keys = [k for k in keys if quiet(k)]
        if not keys:
            return
        _, data = self.client.request("POST", f"/{self.index}/_search", {
            "size": 0, "track_total_hits": False, "query": {"bool": {"filter": [
                {"terms": {"key": keys}}, {"exists": {"field": "nextFetchDate"}}]}},
            "aggs": {"q": {"terms": {"field": "key", "size": len(keys)},
                           "aggs": {"m": {"min": {"field": "nextFetchDate"}}}}}})
        first = {b["key"]: int(b["m"]["value"]) for b in data["aggregations"]["q"]["buckets"]}
        lines = []
        for key in keys:
            seq, term, _ = self._raised.pop(key)
            action = {"_index": self.queues_index, "_id": key, "if_seq_no": seq,
                      "if_primary_term": term}
            if key in first:
                lines += [orjson.dumps({"index": action}), orjson.dumps(
                    {"due": max(first[key], int(now * 1000)), "w": self._picked[key][1]})]
            else:
                lines.append(orjson.dumps({"delete": action}))
        self.client.request("POST", "/_bulk", _ndjson(lines), params={"filter_path": "errors"})

    def _refresh_interval(self) -> float:
        _, data = self.client.request("GET", f"/{self.index}/_settings/index.refresh_interval")
        value = None
        if isinstance(data, dict) and data:
            value = (next(iter(data.values())).get("settings", {}).get("index", {})
                     .get("refresh_interval"))
        secs = _duration(value, 1.0)
        if secs < 0:
            log.warning("index %s has refresh disabled: released queues pause 30 s", self.index)
            return 30.0
        return secs

    def _check_mapping(self) -> None:
        _, data = self.client.request("GET", f"/{self.index}/_mapping")
        if not isinstance(data, dict) or not data:
            raise FrontierError(f"status index {self.index!r}: no mapping returned")
        mappings = next(iter(data.values())).get("mappings", {})
        holds = (mappings.get("_meta") or {}).get("crawl_id", DEFAULT_CRAWL)
        if holds != self.crawl:
            raise FrontierError(f"index {self.index!r} holds the crawl {holds!r}, not "
                                f"{self.crawl!r}")
        props = mappings.get("properties", {})
        strict = str(mappings.get("dynamic", "true")) == "strict"  # no new fields at all
        # our own "updated" (last write, for the sitemap refresh): not into a strict foreign index
        self.write_updated = "updated" in props or not strict
        wrong = []
        for field, types in REQUIRED_FIELDS.items():
            got = (props.get(field) or {}).get("type")
            if got is None and field == "nextFetchDate" and props:
                continue  # an index where no document has a date yet (all "never")
            if got not in types:
                wrong.append(f"{field} is {got or 'missing'} (expected {' or '.join(types)})")
        if wrong:
            raise FrontierError(
                f"index {self.index!r} at {self.client.address} is not a status index: "
                + "; ".join(wrong) + " — choose another opensearch.status.index.name")
        # only once it is known to be a status index: never change another index's mapping
        if not strict and mappings.get("date_detection", True) not in (False, "false"):
            # an index of an older version or of another crawler: a metadata value that looked
            # like a date made its field a date, and the next value that is not one was refused
            # (see _write_refused). Fields mapped so far keep their type.
            try:
                self.client.request("PUT", f"/{self.index}/_mapping", {"date_detection": False})
                log.info("status index %s: date detection turned off for new metadata fields",
                         self.index)
            except OpenSearchError as exc:  # e.g. a user that may write documents, not mappings
                log.warning("status index %s: could not turn off date detection (%s); a "
                            "metadata value that is not a date, in a field mapped as one, will "
                            "be stored as an ERROR status", self.index, exc)

    # -- writes ------------------------------------------------------------------------------------
    def _md_name(self, key: str) -> str:
        name = self._md_names.get(key)
        if name is None:
            name = self._md_names[key] = key.replace(".", "%2E")
        return name

    def _md_doc(self, md: Mapping[str, list[str]]) -> Mapping[str, list[str]]:
        """``md`` with its keys as stored (a dot as ``%2E``: StormCrawler's field names), its
        keys' new names worked out once per set of keys."""
        keys = tuple(md)
        names = self._md_key_sets.get(keys, False)
        if names is False:
            if len(self._md_key_sets) >= 1024:
                self._md_key_sets.clear()
            renamed = tuple(self._md_name(k) for k in keys)
            names = self._md_key_sets[keys] = None if renamed == keys else renamed
        if names is None:
            return md if type(md) is dict else dict(md)
        return dict(zip(names, md.values()))

    def _doc_dict(self, url: str, status: str, md: Mapping[str, list[str]], nfd: float | None,
                  key: str, now: float) -> dict[str, Any]:
        doc: dict[str, Any] = {"url": url, "status": status, "key": key,
                               "metadata": self._md_doc(md)}
        if self.write_updated:
            doc["updated"] = int(now * 1000)
        tags = self.tagger.tags(md) if self.tag_rules else ()
        if tags:
            doc["tags"] = tags
            if nfd is not None:
                nfd -= self.tagger.shift(tags)
        if nfd is not None:
            doc["nextFetchDate"] = _iso(nfd)
        # (the date as written, for the queues index: prepare_updates reads it at once)
        self._written_due = None if nfd is None else int(nfd // 1) * 1000  # (as _iso has it)
        return doc

    def _doc(self, url: str, status: str, md: Mapping[str, list[str]], nfd: float | None,
             key: str, now: float | None = None) -> bytes:
        return orjson.dumps(self._doc_dict(url, status, md, nfd, key,
                                           time.time() if now is None else now))

    def _refresh_lines(self, u: StatusUpdate, now: float) -> list[bytes]:
        """A sitemap refresh (owler.frontier.refresh): an ``update`` whose script merges the
        sitemap facts into a known URL and may make it due, with the plain discovery as upsert."""
        md = u.metadata or {}
        lm = (md.get(SITEMAP_LAST_MODIFIED) or [None])[0]
        lm_epoch = epoch_of(lm) if lm else None
        params = {
            "md": {self._md_name(k): v for k, v in md.items()
                   if k == IS_SITEMAP or is_sitemap_key(k)},
            "replaceExt": md.get(ON_SITEMAP) == TRUE and any(k.startswith(EXT_PREFIXES)
                                                             for k in md),
            "ext": [self._md_name(p) for p in EXT_PREFIXES],
            "seeded": SITEMAP_SEEDED in md,
            "nfd": _iso(u.next_fetch_date) if u.next_fetch_date is not None else None,
            "lm": lm, "lmMillis": int(lm_epoch * 1000) if lm_epoch is not None else None,
            "rules": [[self._md_name(k), v, t] for k, v, t in self.tag_rules],
        }
        action = {"_index": self.index, "_id": _sha256(u.url), "retry_on_conflict": 3}
        if self.routing:
            action["routing"] = u.key
        body = {"script": {"source": _REFRESH_SCRIPT, "lang": "painless", "params": params},
                "upsert": self._doc_dict(u.url, Status.DISCOVERED.value, md, u.next_fetch_date,
                                         u.key, now)}
        return [orjson.dumps({"update": action}), orjson.dumps(body)]

    def _action(self, op: str, doc_id: str, key: str) -> bytes:
        head = self._action_heads.get(op)
        if head is None:
            head = self._action_heads[op] = b'{"%s":{"_index":%s,"_id":"' % (
                op.encode(), orjson.dumps(self.index))
        if self.routing:
            return b'%s%s","routing":%s}}' % (head, doc_id.encode(), orjson.dumps(key))
        return head + doc_id.encode() + b'"}}'

    def _bulk(self, body: bytes, n: int, errors: dict[int, Any] | None = None,
              exact: bool = True) -> list[int] | None:
        """Send ``n`` actions (``body``: their NDJSON lines); return each action's HTTP status (409
        kept as is). The error of each failed action goes into ``errors`` by position, when given.
        With ``exact`` false, ``None`` when every item succeeded or was a conflict.

        The answer is read without building it: most batches have conflicts (a DISCOVERED
        already known), so ``errors`` is true and every item is there. Its statuses are found
        in the bytes (:data:`_ITEM_STATUS`: a JSON key, never inside a string, where quotes are
        escaped); when they are all successes or conflicts, the JSON is not parsed at all (it
        cost as much as serializing the batch), and without ``exact`` the statuses are only
        counted. Anything else is parsed in full."""
        _, raw = self.client.request("POST", "/_bulk", body,
                                     params={"filter_path": _FILTER_BULK}, raw=True)
        if not raw or b'"errors":false' in raw[:64]:
            return [200] * n if exact else None
        if not exact and raw.count(b'"status":') == n and (
                raw.count(b'"status":2') + raw.count(b'"status":409') == n):
            return None
        found = _ITEM_STATUS.findall(raw)
        if len(found) == n and all(s[:1] == b"2" or s == b"409" for s in set(found)):
            return [int(s) for s in found]
        data = orjson.loads(raw)
        items = data.get("items") or []
        if len(items) != n:
            raise FrontierError(f"bulk answered {len(items)} items for {n} actions")
        out = []
        for pos, item in enumerate(items):
            res = next(iter(item.values()))
            out.append(int(res.get("status", 500)))
            if res.get("status", 500) >= 300 and res.get("status") != 409:
                log.warning("bulk item failed: %s", res.get("error"))
                if errors is not None:
                    errors[pos] = res.get("error")
        return out

    def apply_updates(self, updates: Iterable[StatusUpdate]) -> list[int]:
        """Write a batch; returns the positions of updates whose write failed (empty: all
        durable). Raises :class:`FrontierError` when the request as a whole failed."""
        return self.send_updates(self.prepare_updates(updates))

    def prepare_updates(self, updates: Iterable[StatusUpdate]) -> BulkRequest:
        """The request that writes ``updates``, built but not sent (:meth:`send_updates` sends
        it): a caller may build the next batch's while the node indexes the one before
        (:class:`owler.frontier.pipeline.OneInFlight`)."""
        req = BulkRequest(updates=list(updates))
        lines, dues = req.lines, req.dues
        now = time.time()
        n = 0
        for u in req.updates:
            n += 1
            if u.block_until is not None:
                req.block(u.key, u.block_until)
            st = u.status
            status = st._value_ if type(st) is Status else str(st)  # not the enum's property
            md = u.metadata or {}
            if status == "DISCOVERED" and not REFRESH_KEYS.isdisjoint(md) and is_refresh(status, md):
                # (its upsert's date: the script may give a known URL that date or keep its own,
                # which the queue's date already counts)
                lines += self._refresh_lines(u, now)
            else:
                op = "create" if status == "DISCOVERED" else "index"
                lines.append(self._action(op, _sha256(u.url), u.key))
                lines.append(self._doc(u.url, status, md, u.next_fetch_date, u.key, now))
            dues.append((u.key, self._written_due if status == "DISCOVERED"
                         or not self.round_results else None))
        req.count = n
        return req

    def send_updates(self, req: BulkRequest) -> list[int]:
        """Send a request of :meth:`prepare_updates` and wait for the node: the positions of the
        updates whose write failed, as :meth:`apply_updates`."""
        if not req.count:
            return []
        errors: dict[int, Any] = {}
        owed, owed_w = self._owed.take()
        try:
            now = time.time()
            if now >= self._next_intents:
                self._next_intents = now + INTENT_SCAN
                try:  # (another writer's leftovers do not fail this batch: tried again later)
                    self._recover_intents(now)
                except OpenSearchError as exc:
                    log.warning("cannot apply the intents other writers left: %s", exc)
            # (each item's status: the queues index learns the dates of the URLs written, not
            # those of the DISCOVERED already known)
            body = req.seal()
            # after the updates: the writer's intent (the queues they may lower, and those still
            # owed), then the lowering the bulk before owes (carry_queues; module docstring)
            intent = self._intent_head is not None and bool(req.first or owed)
            tail = []
            if intent:
                tail += [self._intent_head, orjson.dumps({
                    "owner": self.owner, "until": int(now * 1000), "active": False,
                    "intent": True, "dues": _earliest([*owed.items(), *req.first.items()])})]
            tail += self._queue_lines(owed, owed_w)
            statuses = self._bulk(body + _ndjson(tail) if tail else body,
                                  req.count + len(tail) // 2, errors)
            extra = statuses[req.count:]  # (the intent's, then the lowering's)
            extra_errors = [errors.pop(i, None) for i in range(req.count, len(statuses))]
            del statuses[req.count:]
            if intent and extra[0] >= 300:  # only logged
                log.warning("cannot write the intent of %s: %s", self.owner, extra_errors[0])
            unlowered = {k: d for (k, d), st in zip(owed.items(), extra[1 if intent else 0:])
                         if st >= 300}
            if unlowered:
                log.warning("cannot lower %d queue(s) of %s (again with the next bulk)",
                            len(unlowered), self.queues_index)
            self._owed.add(unlowered, owed_w)
            owed = {}
            refused = [i for i, e in errors.items() if statuses[i] == 400
                       and i < len(req.updates) and isinstance(e, dict)
                       and e.get("type") in _DOCUMENT_ERRORS]
            if refused:
                self._write_refused(req, refused, errors, statuses)
            failed = [i for i, s in enumerate(statuses) if s >= 300 and s != 409]
            written = [req.dues[i] for i, s in enumerate(statuses) if s < 300]
            if self.carry_queues:
                self._owed.add(_earliest(written), int(time.time() * 1000))
            else:
                self._lower_queues(written)
            if req.blocks:
                self._block(req.blocks)
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        finally:
            self._owed.add(owed, owed_w)  # not sent (the request failed): with the next one
        self.stats.tick(now)
        return failed

    @property
    def _intent_head(self) -> bytes:
        return b'{"index":{"_index":%s,"_id":%s}}' % (orjson.dumps(self.leases_index),
                                                     orjson.dumps(f"intent:{self.owner}"))

    def _recover_intents(self, now: float) -> int:
        """Lower the queues of the intents other writers left (module docstring): every intent
        document older than :data:`INTENT_AGE` but this writer's own, each then deleted unless
        its writer wrote it again meanwhile. Returns how many were applied."""
        _, data = self.client.request("POST", f"/{self.leases_index}/_search", {
            "size": 200, "seq_no_primary_term": True, "query": {"bool": {
                "filter": [{"term": {"intent": True}},
                           {"range": {"until": {"lt": int((now - INTENT_AGE) * 1000)}}}],
                "must_not": [{"term": {"owner": self.owner}}]}}})
        hits = (data or {}).get("hits", {}).get("hits", [])
        for hit in hits:
            src = hit["_source"]
            self._lower_queues(list((src.get("dues") or {}).items()), written=src.get("until"))
            self.client.request("DELETE", f"/{self.leases_index}/_doc/{quote(hit['_id'], safe='')}",
                                params={"if_seq_no": hit["_seq_no"],
                                        "if_primary_term": hit["_primary_term"]},
                                ok=(200, 404, 409))
        if hits:
            log.info("lowered the queues of %d intent(s) that writers left", len(hits))
        return len(hits)

    def _write_refused(self, req: BulkRequest, refused: list[int], errors: dict[int, Any],
                       statuses: list[int]) -> None:
        """Statuses the index refused (400 with a :data:`_DOCUMENT_ERRORS` type: a document it
        cannot take, e.g. a metadata value of a type its field does not have) are written again
        as ERROR with ``error.cause`` ``status.refused`` and the index's reason, their metadata
        left out but for ``depth``. Sent as they were, Storm would replay them, to be refused again,
        without end. A DISCOVERED stays create-only, so a known URL is never overwritten. The
        next fetch date is the one the crawl's scheduler gives an ERROR (``scheduler.class``;
        ``fetchInterval.error``, 31 days by default), not the refused status's own.
        ``statuses`` is updated in place."""
        now = time.time()
        if self._scheduler is None:
            self._scheduler = load_scheduler(self.conf)
        lines: list[bytes] = []
        for i in refused:
            u = req.updates[i]
            error = errors.get(i)
            reason = (f"{error.get('type')}: {error.get('reason')}" if isinstance(error, dict)
                      else str(error))
            name = _status_name(u)
            md = {ERROR_CAUSE: [REFUSED_CAUSE],
                  ERROR_MESSAGE: [f"the status index refused the status {name}: "
                                  f"{reason}"[:2000]]}
            depth = (u.metadata or {}).get(DEPTH)  # the max-depth filter reads it on re-fetch
            if isinstance(depth, list) and depth and all(isinstance(d, str) and d.isdigit()
                                                         for d in depth):
                md[DEPTH] = depth
            op = "create" if name == "DISCOVERED" else "index"
            lines.append(self._action(op, _sha256(u.url), u.key))
            nfd = self._scheduler.schedule(Status.ERROR, md, now)
            lines.append(self._doc(u.url, Status.ERROR.value, md, nfd, u.key, now))
            if i < len(req.dues) and req.dues[i][1] is not None:
                req.dues[i] = (u.key, self._written_due)
        again = self._bulk(_ndjson(lines), len(refused))
        for i, s in zip(refused, again):
            statuses[i] = s

    def _block(self, blocks: dict[str, float]) -> None:
        """Hold queues until a time (a throttling server): the queue's lease document says
        ``until`` (only ever later) under an owner no task has, so no task leases it before."""
        lines = []
        for key, until in blocks.items():
            ms = int(until * 1000)
            lines.append(b'{"update":{"_index":%s,"_id":%s,"retry_on_conflict":3}}' % (
                orjson.dumps(self.leases_index), orjson.dumps(key)))
            lines.append(orjson.dumps({
                # a later block or pause stays; an active round's lease (its until is a TTL,
                # not a pause) is taken over: the task loses it, its release changes nothing
                "script": {"lang": "painless", "params": {"u": ms, "o": BLOCK_OWNER}, "source": (
                    "def until = ctx._source.until; boolean active = ctx._source.active == true;"
                    " if (!active && until != null && until >= params.u) {"
                    " if (ctx._source.owner == params.o) { ctx.op = 'none' }"
                    " else { ctx._source.owner = params.o } }"
                    " else { ctx._source.until = params.u; ctx._source.owner = params.o;"
                    " ctx._source.active = false }")},
                "upsert": {"owner": BLOCK_OWNER, "until": ms, "active": False}}))
        _, res = self.client.request("POST", "/_bulk", _ndjson(lines),
                                     params={"filter_path": "errors,items.*.status"})
        bad = [next(iter(i.values())).get("status") for i in (res or {}).get("items", [])
               if next(iter(i.values())).get("status", 500) >= 300]
        if bad:
            raise OpenSearchError(f"cannot block {len(bad)} queue(s): status {bad[0]}")

    def charge(self, counter: str, n: int, limit: int, now: float, period: float) -> int:
        """Take up to ``n`` from ``counter``'s allowance of ``limit`` per ``period`` seconds (as
        the SQLite frontier's): one scripted update of the counter's document in
        ``<index>_budgets``, atomic in OpenSearch, so every task of every node shares it."""
        index = f"{self.index}_budgets"
        body = {
            "scripted_upsert": True, "upsert": {},
            "script": {"lang": "painless", "params": {
                "now": int(now * 1000), "period": int(period * 1000), "n": n, "limit": limit},
                "source": (
                    "if (ctx._source.start == null || params.now - ctx._source.start >= params.period)"
                    " { ctx._source.start = params.now; ctx._source.used = 0L }"
                    " long n = params.n;"
                    " long left = params.limit < 0 ? n : params.limit - ctx._source.used;"
                    " long g = left < 0 ? 0L : (n < left ? n : left);"  # (Painless's Math is double)
                    " ctx._source.used += g; ctx._source.granted = g")}}
        path = f"/{index}/_update/{quote(counter, safe='')}"
        params = {"retry_on_conflict": 20, "_source": "granted"}
        try:
            if not self._budgets_ready:
                status, _ = self.client.request("HEAD", f"/{index}", ok=(200, 404))
                if status == 404:
                    self._create_index(index, _load_template("budgets.json"))
                self._budgets_ready = True
            for attempt in range(6):  # many tasks on one counter at once: conflicts, retried
                status, data = self.client.request("POST", path, body, params=params,
                                                   ok=(200, 201, 409))
                if status != 409:
                    break
                time.sleep(0.02 * (attempt + 1) * (1 + random.random()))
            else:
                raise OpenSearchError(f"POST {path}: version conflicts after 6 attempts")
        except OpenSearchError as exc:
            raise FrontierError(f"cannot charge {counter!r} in {index}: {exc}") from exc
        return int(((data or {}).get("get") or {}).get("_source", {}).get("granted", 0))

    def inject(self, seeds: Iterable[tuple[str, Mapping[str, list[str]]]], now: float) -> int:
        """Seeds as DISCOVERED, due ``now``, never overwriting; returns how many were new."""

        lines: list[bytes] = []
        dues: list[tuple[str, int | None]] = []
        n = 0
        for url, md in seeds:
            norm, key = seed_key(url, self.partition_mode)
            lines.append(self._action("create", _sha256(norm), key))
            lines.append(self._doc(norm, Status.DISCOVERED.value, dict(md or {}), now, key))
            dues.append((key, self._written_due))
            n += 1
        if not n:
            return 0
        try:
            statuses = self._bulk(_ndjson(lines), n)
            self._lower_queues([d for d, s in zip(dues, statuses) if s < 300])
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        failed = [s for s in statuses if s >= 300 and s != 409]
        if failed:
            raise FrontierError(f"{len(failed)} of {n} seeds could not be written (status {failed[0]})")
        return sum(1 for s in statuses if s < 300)

    def retag(self, batch: int = 1000) -> Iterator[tuple[int, int]]:
        """Recompute the ``tags`` of every document with the current rules (``frontier.tags``)
        and write those that changed, ``batch`` documents at a time: a scroll over the index as
        a refresh before it shows it (sorted by ``_doc``, never the whole index at once; a
        document the crawl writes afterwards was tagged by the crawl), and per page one
        ``_bulk`` of
        scripted updates of ``tags`` alone, each under the document's sequence number, so a
        write of the crawl in between is never overwritten: such a document is read again and
        retagged from what it holds now (three times at most; then it is left as the crawl
        wrote it). Yields ``(documents looked at, documents retagged)`` per page. Statuses,
        next fetch dates and metadata stay as they are; so does a ``frontier.tags.priority``
        shift (a URL gets the shift of its new tags at its next write)."""
        body = {"size": max(1, int(batch)), "sort": ["_doc"], "seq_no_primary_term": True,
                "_source": {"includes": ["metadata", "tags"]}, "query": {"match_all": {}}}
        self.refresh()  # every document written so far in the scroll's view
        try:
            _, data = self.client.request("POST", f"/{self.index}/_search", body,
                                          params={"scroll": "5m"})
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        scroll = data.get("_scroll_id")
        try:
            while True:
                hits = data["hits"]["hits"]
                if not hits:
                    break
                yield len(hits), self._retag_hits(hits)
                try:
                    _, data = self.client.request("POST", "/_search/scroll",
                                                  {"scroll": "5m", "scroll_id": scroll})
                except OpenSearchError as exc:
                    raise FrontierError(str(exc)) from exc
                scroll = data.get("_scroll_id", scroll)
        finally:
            if scroll:
                try:
                    self.client.request("DELETE", "/_search/scroll", {"scroll_id": scroll},
                                        ok=(200, 404))
                except OpenSearchError as exc:
                    log.warning("cannot clear the retag scroll: %s", exc)
        self.refresh()

    _RETAG_SCRIPT = ("if (params.t.isEmpty()) { ctx._source.remove('tags') } "
                     "else { ctx._source.tags = params.t }")

    def _retag_hits(self, hits: list[dict]) -> int:
        """Write the tags that changed among ``hits`` (``_source`` with metadata and tags,
        ``_seq_no``, ``_primary_term``); how many were written."""
        done = 0
        for _ in range(4):  # the first write, then up to three after a conflict
            lines: list[bytes] = []
            sent: list[dict] = []
            for hit in hits:
                src = hit.get("_source") or {}
                tags = self.tagger.tags(_read_md(src.get("metadata")))
                old = src.get("tags") or []
                if tags == (old if isinstance(old, list) else [old]):
                    continue
                action = {"_index": self.index, "_id": hit["_id"],
                          "if_seq_no": hit["_seq_no"], "if_primary_term": hit["_primary_term"]}
                if hit.get("_routing") is not None:
                    action["routing"] = hit["_routing"]
                lines.append(orjson.dumps({"update": action}))
                lines.append(orjson.dumps({"script": {"lang": "painless", "params": {"t": tags},
                                                      "source": self._RETAG_SCRIPT}}))
                sent.append(hit)
            if not sent:
                return done
            try:
                statuses = self._bulk(_ndjson(lines), len(sent))
            except OpenSearchError as exc:
                raise FrontierError(str(exc)) from exc
            done += sum(1 for st in statuses if st < 300)
            failed = [st for st in statuses if st >= 300 and st != 409]
            if failed:
                raise FrontierError(f"{len(failed)} of {len(sent)} tag updates failed "
                                    f"(status {failed[0]})")
            again = [hit for hit, st in zip(sent, statuses) if st == 409]
            if not again:
                return done
            hits = self._reread(again)  # written meanwhile: retagged from what it holds now
        return done

    def _reread(self, hits: list[dict]) -> list[dict]:
        """``hits`` as the index holds them now (with their sequence numbers); the documents
        deleted meanwhile left out."""
        docs = [{"_id": h["_id"], **({"routing": h["_routing"]} if h.get("_routing") else {})}
                for h in hits]
        try:
            _, data = self.client.request(
                "POST", f"/{self.index}/_mget", {"docs": docs},
                params={"_source_includes": "metadata,tags"})
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        return [d for d in data.get("docs", []) if d.get("found")]

    def refresh(self) -> None:
        """Make every write so far visible to searches (counts, due)."""
        try:
            self.client.request("POST", f"/{self.index},{self.queues_index}/_refresh")
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc

    # -- the spout's query ---------------------------------------------------------------------------
    def _filters(self, now: float | None) -> dict:
        filters: list[dict] = []
        if now is not None:
            # epoch_millis said: the mapping's first format would read a small number (a clock
            # before 1970-01-12) as a year (10000: the year 10000, every date before it due)
            filters.append({"range": {"nextFetchDate": {"lte": int(now * 1000),
                                                        "format": "epoch_millis"}}})
        # the interest (owler.frontier.Interest): every required tag, one of the any-of tags,
        # none of the excluded ones
        filters.extend({"term": {"tags": tag}} for tag in self.required)
        if self.interest:
            filters.append({"terms": {"tags": self.interest}})
        query: dict[str, Any] = {"filter": filters}
        if self.not_interest:
            query["must_not"] = [{"terms": {"tags": self.not_interest}}]
        return {"bool": query}

    def due(self, now: float, max_buckets: int, per_bucket: int, exclude: Container[str] = (),
            key: str | None = None, skip_keys: Container[str] = ()
            ) -> list[tuple[str, dict[str, list[str]], str]]:
        """Due URLs of queues this task could lease now, round-robin, as ``(url, md, key)``
        (``key``: only that queue; ``skip_keys``: not these queues).

        Queues whose round is still going on (leased by this task) are skipped; so are queues
        leased by others. Raises :class:`FrontierError` when the node cannot be queried.
        """
        if max_buckets <= 0 or per_bucket <= 0:
            return []
        entered = time.monotonic()
        per_bucket = min(per_bucket, self.max_per_bucket)
        query = self._filters(now)
        try:
            self.flush_releases()
            self._heartbeat(now)
            self._renew(now)
            keys = self._pick_queues(query, now, max_buckets, skip_keys, key)
            got, taken_over = self._acquire(keys, now)
            if taken_over:
                # another task served these last: it let go once its round's writes were
                # durable and the refresh interval had passed, but a loaded node may refresh
                # later than that (two crawlers once fetched the same two URLs): refreshed now,
                # the second search reads the queues after those writes
                self.client.request("POST", f"/{self.index}/_refresh")
            hits = self._first_urls(query, [k for k in keys if k in got], per_bucket)
            # picked from the queues index and found empty: dated again
            self._settle_queues([k for k in keys if k in got and not hits.get(k)], now)
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        # the rounds begin as their URLs are handed out: the time the query took (a heartbeat, a
        # refresh, a loaded node) is not taken off frontier.queue.round.delay
        handed = now + (time.monotonic() - entered)
        for k in got:
            self.leases[k]["start"] = handed
        queues: list[list[tuple[str, dict, str]]] = []
        for k in keys:
            if k not in got:
                continue
            rows = []
            for hit in hits.get(k, ()):
                src = hit.get("_source") or {}
                url = src.get("url")
                if not isinstance(url, str) or url in exclude:
                    continue
                rows.append((url, _read_md(src.get("metadata")), k))
                if len(rows) >= per_bucket:
                    break
            queues.append(rows)
        return round_robin(queues, per_bucket)

    def _pick_queues(self, query: dict, now: float, max_buckets: int,
                     skip_keys: Container[str], key: str | None) -> list[str]:
        """The first search of :meth:`due`: up to ``max_buckets`` queues with due URLs, the
        earliest first, but those this task holds, knows to be held (:attr:`held`) or is told to
        skip. From the queues index (module docstring), or, for an interest (which the queues'
        dates do not know) and while the queues index is being built, from the due URLs."""
        for k in [k for k, until in self.held.items() if until <= now]:
            del self.held[k]
        skipped = set(self.leases).union(self.held)
        if skip_keys:
            skipped.update(skip_keys)
        self._picked = {}
        query = {"bool": dict(query["bool"])}
        if key is not None:  # (one queue: whether it has a URL due, from its URLs)
            query["bool"]["filter"] = [*query["bool"]["filter"], {"term": {"key": key}}]
        elif not (self.required or self.interest or self.not_interest) and self._queues_usable(now):
            return self._pick_from_queues(now, max_buckets, skipped)
        size = _leave_out(query, {"terms": {"key": sorted(skipped)}}, len(skipped),
                          max_buckets, 65_536)
        _, data = self.client.request("POST", f"/{self.index}/_search", {
            "size": 0, "track_total_hits": False, "query": query,
            "aggs": {"queues": {
                "terms": {"field": "key", "size": size, "order": {"first": "asc"}},
                "aggs": {"first": {"min": {"field": "nextFetchDate"}}}}}})
        for b in data["aggregations"]["queues"]["buckets"]:
            if b["key"] not in skipped and len(self._picked) < max_buckets:
                self._picked[b["key"]] = (int(b["first"]["value"]), None)
        return list(self._picked)

    def _pick_from_queues(self, now: float, max_buckets: int, skipped: set[str]) -> list[str]:
        """The queues index's queues due by ``now``, the earliest first, but ``skipped``; what
        each document held is kept for :meth:`_settle_queues`."""
        query: dict[str, Any] = {"bool": {"filter": [
            {"range": {"due": {"lte": int(now * 1000)}}}]}}
        size = _leave_out(query, {"ids": {"values": sorted(skipped)}}, len(skipped),
                          max_buckets, 10_000)  # (index.max_result_window: 10,000)
        _, data = self.client.request("POST", f"/{self.queues_index}/_search", {
            "size": size, "track_total_hits": False,
            "_source": ["due", "w"], "sort": [{"due": "asc"}], "query": query})
        for hit in data["hits"]["hits"]:
            if hit["_id"] not in skipped and len(self._picked) < max_buckets:
                src = hit.get("_source") or {}
                self._picked[hit["_id"]] = (int(src.get("due") or 0), int(src.get("w") or 0))
        return list(self._picked)

    def _first_urls(self, query: dict, keys: list[str], per_bucket: int
                    ) -> dict[str, list[dict]]:
        """The second search of :meth:`due`: the first URLs of each of ``keys`` by
        (nextFetchDate, url), a few more than ``per_bucket`` (the caller's ``exclude`` may drop
        some); key -> hits."""
        if not keys:
            return {}
        query = {"bool": {**query["bool"], "filter": [*query["bool"]["filter"],
                                                      {"terms": {"key": keys}}]}}
        _, data = self.client.request("POST", f"/{self.index}/_search", {
            "size": 0, "track_total_hits": False, "query": query,
            "aggs": {"queues": {
                "terms": {"field": "key", "size": len(keys)},
                "aggs": {"docs": {"top_hits": {
                    "size": per_bucket + per_bucket // 2 + 2,
                    "sort": [{"nextFetchDate": "asc"}, {"url": "asc"}],
                    "_source": {"includes": ["url", "metadata"]}}}}}}})
        return {b["key"]: b["docs"]["hits"]["hits"]
                for b in data["aggregations"]["queues"]["buckets"]}

    # -- queue leases ------------------------------------------------------------------------------
    def _lease_doc(self, until: float, active: bool) -> bytes:
        return orjson.dumps({"owner": self.owner, "until": int(until * 1000), "active": active})

    def _acquire(self, keys: list[str], now: float) -> tuple[set[str], set[str]]:
        """The leases of ``keys`` this task could take, and those of them another task held
        last (its round's statuses may not be searchable yet: :meth:`due` refreshes first). The
        pauses and blocks met are remembered in :attr:`held`."""
        if not keys:
            return set(), set()
        _, data = self.client.request("POST", f"/{self.leases_index}/_mget", {"ids": keys})
        lines: list[bytes] = []
        tried: list[str] = []
        now_ms = int(now * 1000)
        handover_ms = int(self.handover * 1000) if self.peers else 0
        others: set[str] = set()
        for doc in data.get("docs", []):
            key = doc["_id"]
            if not doc.get("found"):
                lines.append(b'{"create":{"_index":%s,"_id":%s}}' % (
                    orjson.dumps(self.leases_index), orjson.dumps(key)))
            else:
                src = doc.get("_source") or {}
                mine = src.get("owner") == self.owner
                # my own round not released (I was restarted): mine at once; my own pause
                # after a round: the others' turn first
                free_at = (0 if src.get("active") else int(src.get("until", 0)) + handover_ms
                           ) if mine else int(src.get("until", 0))
                if free_at > now_ms:  # another task's round, or the queue's pause or block
                    if not src.get("active"):  # a pause or a block ends then (or later)
                        self.held[key] = min(free_at / 1000, now + _HELD_HORIZON)
                    continue
                if not mine:
                    others.add(key)
                lines.append(b'{"index":{"_index":%s,"_id":%s,"if_seq_no":%d,"if_primary_term":%d}}'
                             % (orjson.dumps(self.leases_index), orjson.dumps(key),
                                doc["_seq_no"], doc["_primary_term"]))
            lines.append(self._lease_doc(now + self.lease_ttl, True))
            tried.append(key)
        if not tried:
            return set(), set()
        # the queues' dates raised to the leases' end in the same request: the other tasks do
        # not pick them while they are served (a lease lost to another task at the same moment
        # is raised by that task as well)
        until_ms = int((now + self.lease_ttl) * 1000)
        for key in tried:
            lines.append(b'{"update":{"_index":%s,"_id":%s,"retry_on_conflict":5}}' % (
                orjson.dumps(self.queues_index), orjson.dumps(key)))
            lines.append(b'{"script":{"source":%s,"params":{"u":%d}}}' % (
                self._RAISE_SCRIPT, until_ms))
        _, res = self.client.request("POST", "/_bulk", _ndjson(lines),
                                     params={"filter_path": "items.*.status,items.*._seq_no,"
                                                            "items.*._primary_term"})
        items = [next(iter(item.values())) for item in res.get("items", [])]
        got = set()
        for key, r, q in zip(tried, items, items[len(tried):]):
            if r.get("status") in (200, 201):
                self.leases[key] = {"seq": r["_seq_no"], "term": r["_primary_term"],
                                    "until": now + self.lease_ttl, "start": now}
                got.add(key)
                self._raised[key] = ((q["_seq_no"], q["_primary_term"], until_ms)
                                     if q.get("status") == 200 and "_seq_no" in q else None)
        return got, got & others

    def _task_id(self) -> str:
        return f"task:{self.owner}"

    def _heartbeat(self, now: float) -> None:
        """Announce this task and learn whether others share the index (every few seconds)."""
        if now < self.next_beat:
            return
        self.next_beat = now + self.beat_every
        self.client.request("PUT", f"/{self.leases_index}/_doc/{quote(self._task_id(), safe='')}",
                            {"owner": self.owner, "until": int((now + self.lease_ttl) * 1000),
                             "active": True, "task": True}, params={"refresh": "true"})
        _, data = self.client.request("POST", f"/{self.leases_index}/_count", {"query": {"bool": {
            "filter": [{"term": {"task": True}}, {"range": {"until": {"gt": int(now * 1000)}}}],
            "must_not": [{"term": {"owner": self.owner}}]}}})
        self.peers = int((data or {}).get("count", 0)) > 0

    def _renew(self, now: float) -> None:
        keys = [k for k, v in self.leases.items() if v["until"] - now < self.lease_ttl / 2]
        if not keys:
            return
        results = self._write_leases(keys, now + self.lease_ttl, True)
        for key, res in zip(keys, results):
            if res is None:  # lost (expired and taken): the round goes on, the next one waits
                log.warning("lease of queue %s lost", key)
                self.leases.pop(key, None)
                self._raised.pop(key, None)
            else:
                self.leases[key].update(seq=res[0], term=res[1], until=now + self.lease_ttl)

    #: a queue's date raised to the end of a lease (_acquire): no other task picks it meanwhile
    _RAISE_SCRIPT = orjson.dumps("if (ctx._source.due == null || ctx._source.due < params.u) "
                                 "{ ctx._source.due = params.u } else { ctx.op = 'none' }")
    #: a round ended: the queue's date is the end of its pause (an earlier date a status write
    #: gave it meanwhile would not be served before then either)
    _PAUSE_SCRIPT = "ctx._source.due = params.u"
    #: a queue given back unserved: its date before the lease, unless a write changed it since
    _GIVE_BACK_SCRIPT = ("if (ctx._source.due == params.r) { ctx._source.due = params.u } "
                         "else { ctx.op = 'none' }")

    def _lease_action(self, key: str, lease: dict) -> bytes:
        """The ``_bulk`` action that overwrites ``key``'s lease held by this task (under the
        sequence number it wrote)."""
        return b'{"index":{"_index":%s,"_id":%s,"if_seq_no":%d,"if_primary_term":%d}}' % (
            orjson.dumps(self.leases_index), orjson.dumps(key), lease["seq"], lease["term"])

    def _write_leases(self, keys: list[str], until: float, active: bool
                      ) -> list[tuple[int, int] | None]:
        lines = []
        for key in keys:
            lines.append(self._lease_action(key, self.leases[key]))
            lines.append(self._lease_doc(until, active))
        _, res = self.client.request("POST", "/_bulk", _ndjson(lines),
                                     params={"filter_path": "items.*.status,items.*._seq_no,"
                                                            "items.*._primary_term"})
        out: list[tuple[int, int] | None] = []
        for item in res.get("items", []):
            r = next(iter(item.values()))
            out.append((r["_seq_no"], r["_primary_term"]) if r.get("status") in (200, 201) else None)
        return out

    def release(self, key: str, now: float, served: bool = True, defer: bool = False) -> None:
        """End this task's round on ``key``: the queue may be served again (by anyone)
        ``fetcher.server.delay`` from now, but not before the index refresh has made the round's
        status writes searchable (refresh interval + 1 s), and no earlier than
        ``frontier.queue.round.delay`` after the round began; at once when nothing was
        ``served``. Errors are logged: the lease then expires after ``frontier.lease.ttl``.

        With ``defer`` (the spout, as its rounds end one ack after another) the lease is written
        with the next releases, in one request: at the next :meth:`due`, or with a release half a
        second after the first one waiting, or by :meth:`flush_releases`. Meanwhile the queue is
        leased for the other tasks, and this one knows it paused (:attr:`held`)."""
        lease = self.leases.pop(key, None)
        if lease is None:
            return
        until = max(now + max(self.server_delay, self.min_hold),
                    lease["start"] + self.round_delay) if served else now
        if until > now:
            self.held[key] = min(until, now + _HELD_HORIZON)
        if not self._releasing:
            self._releasing_since = now
        raised = self._raised.pop(key, None)
        if served:
            script = (self._PAUSE_SCRIPT, {"u": int(until * 1000)})
        elif raised is not None and key in self._picked:  # (what the pick read)
            script = (self._GIVE_BACK_SCRIPT, {"r": raised[2], "u": self._picked[key][0]})
        else:
            script = None
        self._releasing.setdefault(served, {})[key] = (lease, until, script)
        if not defer or now - self._releasing_since >= 0.5:
            self.flush_releases()

    def flush_releases(self) -> None:
        """Write the releases :meth:`release` keeps (one request)."""
        if not self._releasing:
            return
        waiting, self._releasing = self._releasing, {}
        lines: list[bytes] = []
        for leases in waiting.values():
            for key, (lease, until, script) in leases.items():
                lines.append(self._lease_action(key, lease))
                lines.append(self._lease_doc(until, False))
                if script is not None:  # (a queue without a document: 404)
                    lines.append(b'{"update":{"_index":%s,"_id":%s,"retry_on_conflict":5}}' % (
                        orjson.dumps(self.queues_index), orjson.dumps(key)))
                    lines.append(orjson.dumps({"script": {"source": script[0],
                                                          "params": script[1]}}))
        try:
            self.client.request("POST", "/_bulk", _ndjson(lines),
                                params={"filter_path": "errors"})
        except OpenSearchError as exc:
            log.warning("cannot release the leases of %d queue(s): %s",
                        sum(len(x) for x in waiting.values()), exc)

    def release_all(self, now: float) -> None:
        for key in list(self.leases):
            self.release(key, now, defer=True)
        self.flush_releases()

    # -- what a URLFrontier service needs beyond the spout (owler.urlfrontier.service) -------------
    def list_queues(self, start: int, size: int, now: float, include_inactive: bool = False
                    ) -> list[str]:
        """Partition keys by name, ``size`` from position ``start`` (a terms aggregation: start +
        size at most 65,536); without ``include_inactive`` only queues with a URL to fetch some
        day that are not blocked."""
        query = {"exists": {"field": "nextFetchDate"}} if not include_inactive else {
            "match_all": {}}
        data = self._search({"size": 0, "track_total_hits": False, "query": query, "aggs": {
            "k": {"terms": {"field": "key", "size": max(1, start + size),
                            "order": {"_key": "asc"}}}}})
        keys = [b["key"] for b in data["aggregations"]["k"]["buckets"]]
        if include_inactive:
            return keys[start:start + size]
        blocked = self._blocked(keys, now)
        return [k for k in keys if k not in blocked][start:start + size]

    def _blocked(self, keys: list[str], now: float) -> set[str]:
        if not keys:
            return set()
        try:
            _, data = self.client.request("POST", f"/{self.leases_index}/_mget", {"ids": keys})
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        now_ms = int(now * 1000)
        return {d["_id"] for d in data.get("docs", []) if d.get("found")
                and d["_source"].get("owner") == BLOCK_OWNER
                and int(d["_source"].get("until", 0)) > now_ms}

    def _url_query(self, key: str | None, text: str | None, ignore_case: bool,
                   active: bool | None) -> dict:
        filters: list[dict] = []
        if key is not None:
            filters.append({"term": {"key": key}})
        if text:
            pattern = "*" + "".join("\\" + c if c in "*?\\" else c for c in text) + "*"
            filters.append({"wildcard": {"url": {"value": pattern,
                                                 "case_insensitive": ignore_case}}})
        query: dict[str, Any] = {"filter": filters}
        if active is not None:
            (query.setdefault("filter" if active else "must_not", [])
             .append({"exists": {"field": "nextFetchDate"}}))
        return {"bool": query}

    def count_urls(self, key: str | None = None, text: str | None = None,
                   ignore_case: bool = False, active: bool | None = None) -> int:
        """URLs of queue ``key`` (all: ``None``) whose URL contains ``text``; ``active``
        True/False: only those to be fetched again some day / never (what the last refresh
        made searchable: :meth:`refresh` first to count a URL put a moment ago)."""
        try:
            _, data = self.client.request("POST", f"/{self.index}/_count", {
                "query": self._url_query(key, text, ignore_case, active)})
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        return int(data["count"])

    _URL_ORDER = [{"key": "asc"}, {"nextFetchDate": {"order": "asc", "missing": "_first"}},
                  {"url": "asc"}]

    def list_urls(self, key: str | None, start: int, size: int, text: str | None = None,
                  ignore_case: bool = False) -> list[FrontierRecord]:
        """The records of :meth:`count_urls` by key, next fetch date, URL, ``size`` from
        ``start`` (any depth: :meth:`iter_urls`)."""
        out: list[FrontierRecord] = []
        for page in self.iter_urls(key, start, text, ignore_case, page=min(max(size, 1), 1000)):
            out.extend(page[:size - len(out)])
            if len(out) >= size:
                break
        return out

    def iter_urls(self, key: str | None, start: int = 0, text: str | None = None,
                  ignore_case: bool = False, page: int = 1000) -> Iterator[list[FrontierRecord]]:
        """The records of :meth:`list_urls` from ``start`` to the end, a page at a time: a
        ``search_after`` on (key, next fetch date, URL), as deep as the index goes (``from`` is
        used only for a first page within the index's result window, 10,000)."""
        body: dict[str, Any] = {"size": page, "track_total_hits": False,
                                "query": self._url_query(key, text, ignore_case, None),
                                "sort": self._URL_ORDER}
        skip = start
        if start + page <= 10_000:
            body["from"], skip = start, 0
        while True:
            hits = self._search(body)["hits"]["hits"]
            if not hits:
                return
            body.pop("from", None)
            body["search_after"] = hits[-1]["sort"]
            if skip >= len(hits):
                skip -= len(hits)
                continue
            hits, skip = hits[skip:], 0
            yield [FrontierRecord(h["_source"]["url"], Status(h["_source"]["status"]),
                                  epoch_of(h["_source"].get("nextFetchDate")),
                                  h["_source"].get("key", DEFAULT_KEY),
                                  _read_md(h["_source"].get("metadata")), 0.0) for h in hits]

    def delete(self, key: str | None = None) -> int:
        """Remove queue ``key`` (every queue: ``None``) with all its URLs; how many URLs. The
        index is refreshed first: ``_delete_by_query`` finds only what searches can see, and a URL
        written a moment ago would otherwise outlive its queue."""
        query = {"match_all": {}} if key is None else {"term": {"key": key}}
        try:
            self.client.request("POST", f"/{self.index}/_refresh")
            _, data = self.client.request("POST", f"/{self.index}/_delete_by_query",
                                          {"query": query},
                                          params={"refresh": "true", "conflicts": "proceed"})
            if key is None:
                self.client.request("POST", f"/{self.leases_index}/_delete_by_query",
                                    {"query": {"bool": {"must_not": [{"term": {"task": True}}]}}},
                                    params={"refresh": "true", "conflicts": "proceed"})
                self.client.request("POST", f"/{self.queues_index}/_delete_by_query",
                                    {"query": {"match_all": {}}},
                                    params={"refresh": "true", "conflicts": "proceed"})
            else:
                for index in (self.leases_index, self.queues_index):
                    self.client.request("DELETE", f"/{index}/_doc/{quote(key, safe='')}",
                                        ok=(200, 404))
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        # what this task knew of the queues (their pauses, its releases) went with them
        if key is None:
            self.leases.clear()
            self.held.clear()
            self._raised.clear()
            self._releasing.clear()
        else:
            self.leases.pop(key, None)
            self.held.pop(key, None)
            self._raised.pop(key, None)
            for waiting in self._releasing.values():
                waiting.pop(key, None)
        return int(data.get("deleted", 0))

    def block_queue(self, key: str, until: float, now: float) -> None:
        """Serve no URL of ``key`` before ``until`` (a past time lifts the block), as
        URLFrontier's BlockQueueUntil: unlike a status update's block this may shorten one, and
        a round in progress is taken over (the lease document names the block)."""
        doc = {"owner": BLOCK_OWNER, "until": int(max(until, now) * 1000), "active": False}
        try:
            self.client.request("PUT", f"/{self.leases_index}/_doc/{quote(key, safe='')}", doc,
                                params={"refresh": "true"})
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        self.leases.pop(key, None)
        self.held.pop(key, None)
        self._raised.pop(key, None)
        for waiting in self._releasing.values():  # (the block is the queue's document now)
            waiting.pop(key, None)

    # -- statistics ----------------------------------------------------------------------------------
    def _search(self, body: dict) -> dict:
        try:
            return self.client.request("POST", f"/{self.index}/_search", body)[1]
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc

    def _snapshot(self) -> Snapshot | None:
        """The stored figures to answer from (:mod:`owler.frontier.opensearch_stats`); None: ask
        the index (a small one, or the snapshot cannot be had: said in the log)."""
        try:
            return self.stats.current(time.time())
        except (OpenSearchError, KeyError, TypeError, ValueError) as exc:
            log.warning("the frontier's figures are read from the index itself: %s", exc)
            return None

    def _has_interest(self) -> bool:
        return bool(self.required or self.interest or self.not_interest)

    def estimate(self, now: float) -> dict[str, Any] | None:
        """How the monitoring figures are known: None when they are the index's own (a live
        aggregation), else ``as_of`` (epoch s), ``age_s`` and ``writes_since`` (status writes to
        the index since: no figure is off by more; None when unknown, e.g. a node is down)."""
        snap = self._snapshot()
        if snap is None:
            return None
        return {"as_of": snap.taken, "age_s": round(now - snap.taken, 1),
                "writes_since": snap.writes_since, "interval_s": self.stats.interval}

    def counts(self) -> dict[str, int]:
        snap = self._snapshot()
        if snap is not None:
            return {name: snap.counts.get(name, 0) for name in STATUS_NAMES}
        data = self._search({"size": 0, "track_total_hits": False, "aggs": {
            "s": {"terms": {"field": "status", "size": 20}}}})
        out = {name: 0 for name in STATUS_NAMES}
        for b in data["aggregations"]["s"]["buckets"]:
            out[b["key"]] = b["doc_count"]
        return out

    def due_count(self, now: float) -> int:
        """URLs due at ``now``: from the snapshot to the minute (:attr:`due_resolution`), but 0
        only when none is (asked of the index when the snapshot's bound allows 0)."""
        snap = None if self._has_interest() else self._snapshot()
        if snap is not None:
            due = snap.due(now)
            if snap.writes_since is not None and due > snap.writes_since:
                return due
            return max(due, 1) if self.has_due(now) else 0
        return self._count(self._filters(now))

    def has_due(self, now: float) -> bool:
        """Whether any URL is due at ``now`` (exact, at the cost of finding one)."""
        return self._count(self._filters(now), first=True) > 0

    @property
    def due_resolution(self) -> int:
        """Seconds within which :meth:`due_count` counts (60 when it answers from a snapshot:
        also the URLs due later in the current minute)."""
        return 60 if self._snapshot() is not None and not self._has_interest() else 0

    def _count(self, query: dict, first: bool = False) -> int:
        """Documents of the status index matching ``query``; with ``first``, 1 as soon as one is
        found (``terminate_after``: the cost of finding one, not of counting all)."""
        try:
            _, data = self.client.request("POST", f"/{self.index}/_count", {"query": query},
                                          params={"terminate_after": 1} if first else None)
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        return int(data["count"])

    def _monitor_queues(self) -> bool:
        """Whether the monitoring reads may answer from the queues index (its dates know no
        tags: not for an interest)."""
        return not self._has_interest() and self._queues_usable(time.time())

    def queue_count(self, now: float | None = None) -> int:
        """Distinct keys: from the snapshot, or a cardinality aggregation of the URLs
        (approximate above 40,000). With ``now``, the keys with a URL due: from the queues index
        (a ``_count`` of its documents due, its cost growing with the queues, not the URLs), an
        upper bound (a queue in a round or its pause is left out; one whose round emptied it
        counts until a spout picks it again and finds nothing due); for an interest, or while
        the queues index is being built, from the due URLs. (Every key: not from the queues
        index, which has no document for a key whose URLs are never to be fetched again.)"""
        if now is not None and self._monitor_queues():
            try:
                _, data = self.client.request("POST", f"/{self.queues_index}/_count", {
                    "query": {"range": {"due": {"lte": int(now * 1000)}}}})
            except OpenSearchError as exc:
                raise FrontierError(str(exc)) from exc
            return int(data["count"])
        if now is None:
            snap = self._snapshot()
            if snap is not None:
                return snap.keys
        query = self._filters(now) if now is not None else {"match_all": {}}
        data = self._search({"size": 0, "track_total_hits": False, "query": query, "aggs": {
            "q": {"cardinality": {"field": "key", "precision_threshold": 40000}}}})
        return int(data["aggregations"]["q"]["value"])

    def top_hosts(self, n: int = 10) -> list[tuple[str, int]]:
        snap = self._snapshot() if n <= TOP else None
        if snap is not None:
            return snap.top_hosts[:n]
        data = self._search({"size": 0, "track_total_hits": False, "aggs": {
            "k": {"terms": {"field": "key", "size": n}}}})
        return [(b["key"], b["doc_count"]) for b in data["aggregations"]["k"]["buckets"]]

    def most_delayed(self, now: float, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` queues due the longest, as ``(key, seconds since their earliest due URL's
        date)``, longest first: from the snapshot, or the queues index's earliest candidates
        whose due URLs are then read (:func:`~owler.frontier.opensearch_stats.delayed_queues`);
        for an interest, or while the queues index is being built, from an aggregation of every
        due URL."""
        snap = None if self._has_interest() or n > DELAYED else self._snapshot()
        if snap is not None:
            return [(k, round(now - d, 3)) for k, d in snap.delayed[:n] if d <= now]
        queues = self.queues_index if self._monitor_queues() else None
        try:
            found = delayed_queues(self.client, self.index, queues, self._filters(now), now, n)
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        return [(k, round(now - d, 3)) for k, d in found]

    def known(self, urls: Sequence[tuple[str, str]]) -> set[str]:
        """The URLs of ``urls`` (url, key: the routing) that are stored, read in real time
        (``_mget`` sees a write before the refresh makes it searchable)."""
        by_id: dict[str, str] = {}
        docs = []
        for u, k in urls:
            doc_id = _sha256(u)
            by_id[doc_id] = u
            docs.append({"_id": doc_id, **({"routing": k} if self.routing else {})})
        found: set[str] = set()
        for i in range(0, len(docs), 1000):
            try:  # the ids alone: no source read
                _, data = self.client.request("POST", f"/{self.index}/_mget",
                                              {"docs": docs[i:i + 1000]},
                                              params={"_source": "false"})
            except OpenSearchError as exc:
                raise FrontierError(str(exc)) from exc
            found.update(by_id[d["_id"]] for d in data.get("docs", []) if d.get("found"))
        return found

    def get(self, url: str) -> FrontierRecord | None:
        params = None
        if self.routing:
            try:
                params = {"routing": partition_key(url, self.partition_mode)}
            except ValueError:
                params = {"routing": DEFAULT_KEY}
        try:
            status, data = self.client.request("GET", f"/{self.index}/_doc/{_sha256(url)}",
                                               params=params, ok=(200, 404))
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        if status == 404 or not data.get("found"):
            return None
        src = data["_source"]
        return FrontierRecord(src["url"], Status(src["status"]), epoch_of(src.get("nextFetchDate")),
                              src.get("key", DEFAULT_KEY), _read_md(src.get("metadata")), 0.0)

    def latest_values(self, key: str, name: str, n: int) -> list[tuple[str, str]]:
        """``(url, value)``: the first value of metadata ``name`` of the ``n`` URLs of queue
        ``key`` with the latest next fetch dates (never-again first: no ``nextFetchDate``),
        latest first, those without ``name`` left out; the SQLite frontier's
        :meth:`~owler.frontier.sqlite.SQLiteFrontier.latest_values`. One search: a ``term`` on
        ``key`` (routed to the queue's shard with ``opensearch.status.routing``), sorted on
        ``nextFetchDate``, ``size`` n, the URL and the field read from their doc values, not from
        ``_source`` (a third less time per search on a node here: the stored documents are not
        read and decompressed); no retry (the parser asks, and goes on without an answer). What
        the last refresh made searchable. A field of several values gives its smallest (doc
        values are sorted), one longer than the mapping's ``ignore_above`` none."""
        field = "metadata." + self._md_name(name)
        body = {"size": max(int(n), 0), "track_total_hits": False, "query": {"term": {"key": key}},
                "sort": [{"nextFetchDate": {"order": "desc", "missing": "_first"}}],
                "_source": False, "docvalue_fields": ["url", field]}
        try:
            _, data = self.client.request("POST", f"/{self.index}/_search", body,
                                          params={"routing": quote(key, safe="")}
                                          if self.routing else None, retries=0)
        except OpenSearchError as exc:
            raise FrontierError(str(exc)) from exc
        out = []
        for hit in data["hits"]["hits"]:
            fields = hit.get("fields") or {}
            url, value = fields.get("url"), fields.get(field)
            if url and value:
                out.append((str(url[0]), str(value[0])))
        return out

    def close(self) -> None:
        self.flush_releases()
        self.stats.join(10.0)  # a renewal of the figures in progress (on the same client)
        lowered = True
        try:
            self.flush_queues()
        except OpenSearchError as exc:  # (its intent stays, for another writer to apply)
            lowered = False
            log.warning("cannot lower the queues %s owes: %s", self.owner, exc)
        if self._next_intents and lowered:  # a writer: its last intent's queues were lowered
            try:
                self.client.request("DELETE", f"/{self.leases_index}/_doc/"
                                    f"{quote(f'intent:{self.owner}', safe='')}", ok=(200, 404),
                                    retries=0)
            except OpenSearchError as exc:
                log.warning("cannot remove the intent document of %s: %s", self.owner, exc)
        if self.next_beat:  # announced: leave (else the others wait until it expires)
            try:
                self.client.request("DELETE", f"/{self.leases_index}/_doc/"
                                    f"{quote(self._task_id(), safe='')}", params={"refresh": "true"},
                                    ok=(200, 404), retries=0)
            except OpenSearchError as exc:
                log.warning("cannot remove the task document of %s: %s", self.owner, exc)
        self.client.close()

    def __enter__(self) -> "OpenSearchFrontier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The sitemap refresh of a known URL (owler.frontier.refresh; the SQLite frontier applies the same
# rules in Python). Dates are compared as text: both sides are written by _iso ("…T…Z", UTC,
# seconds), so text order is time order; a missing nextFetchDate means never.
_REFRESH_SCRIPT = """
boolean isTrue(def v) {
  if (v == null) { return false; }
  if (v instanceof List) { return v.size() == 1 && 'true'.equals(v.get(0)); }
  return 'true'.equals(v.toString());
}
String firstOf(def v) {
  if (v == null) { return null; }
  if (v instanceof List) { return v.isEmpty() ? null : v.get(0).toString(); }
  return v.toString();
}
String earlier(String a, String b) {
  if (a == null) { return b; }
  if (b == null) { return a; }
  return a.compareTo(b) <= 0 ? a : b;
}
Map md = ctx._source.metadata;
if (md == null) { md = new HashMap(); ctx._source.metadata = md; }
boolean storedListed = isTrue(md.get('isDiscoveredOnSitemap')) || isTrue(md.get('isSitemap'));
String oldLm = firstOf(md.get('sitemap%2ElastModified'));
boolean changed = false;
if (params.replaceExt) {
  List drop = new ArrayList();
  for (String k : md.keySet()) {
    for (String p : params.ext) { if (k.startsWith(p)) { drop.add(k); break; } }
  }
  for (def k : drop) { md.remove(k); changed = true; }
}
for (def e : params.md.entrySet()) {
  String k = e.getKey();
  if (k == 'isSitemap' && isTrue(md.get(k))) { continue; }
  if (!e.getValue().equals(md.get(k))) { md.put(k, e.getValue()); changed = true; }
}
String oldNfd = ctx._source.nextFetchDate;
String newNfd = oldNfd;
if (params.seeded) {
  if (!storedListed) { newNfd = params.nfd; }
} else if ('DISCOVERED'.equals(ctx._source.status) && !storedListed) {
  newNfd = earlier(oldNfd, params.nfd);
} else if (params.lm != null && (oldLm == null || params.lm.compareTo(oldLm) > 0)) {
  long updated = ctx._source.updated == null ? 0L : ((Number) ctx._source.updated).longValue();
  if (params.lmMillis != null && params.lmMillis > updated) { newNfd = earlier(oldNfd, params.nfd); }
}
List tags = new ArrayList();
for (def r : params.rules) {
  def v = md.get(r[0]);
  if (v == null) { continue; }
  List vs = v instanceof List ? v : [v.toString()];
  if (r[1] == '*') {
    for (def x : vs) {
      String val = x.toString().trim();
      String t = r[2].replace('*', val);
      if (!val.isEmpty() && !tags.contains(t)) { tags.add(t); }
    }
  } else if (vs.contains(r[1]) && !tags.contains(r[2])) { tags.add(r[2]); }
}
def oldTags = ctx._source.tags;
boolean sameTags = (oldTags == null && tags.isEmpty()) || (oldTags != null && oldTags.equals(tags));
boolean sameNfd = oldNfd == null ? newNfd == null : oldNfd.equals(newNfd);
if (!changed && sameNfd && sameTags) {
  ctx.op = 'noop';
} else {
  if (newNfd == null) { ctx._source.remove('nextFetchDate'); } else { ctx._source.nextFetchDate = newNfd; }
  if (tags.isEmpty()) { ctx._source.remove('tags'); } else { ctx._source.tags = tags; }
}
"""


def crawl_indices(conf: Mapping[str, Any]) -> dict[str, str]:
    """Crawl ID -> status index of every crawl whose index exists: ``DEFAULT``'s
    (``opensearch.status.index.name``) and the others (:func:`owler.frontier.crawls.index_name`),
    each known by the crawl ID its mapping records. FrontierError when no node answers."""
    base = str(conn_key(conf, "status", INDEX_NAME, "status"))
    client = OSClient(conf, "status")
    try:
        _, data = client.request(
            "GET", f"/{base},{base}{SEPARATOR}*/_mapping",
            params={"ignore_unavailable": "true", "allow_no_indices": "true",
                    # (every status index maps url: it answers even without a _meta)
                    "filter_path": "*.mappings._meta.crawl_id,*.mappings.properties.url.type"})
    except OpenSearchError as exc:
        raise FrontierError(f"cannot list the crawls of {base!r}: {exc}") from exc
    finally:
        client.close()
    out: dict[str, str] = {}
    for name, doc in (data or {}).items():
        meta = ((doc or {}).get("mappings") or {}).get("_meta") or {}
        crawl = meta.get("crawl_id", DEFAULT_CRAWL) if name != base else DEFAULT_CRAWL
        if index_name(base, crawl) == name:  # a leases or budgets index records no crawl
            out[crawl] = name
    return out


def index_exists(conf: Mapping[str, Any], crawl: str) -> bool:
    """Whether crawl ``crawl``'s status index exists."""
    name = index_name(str(conn_key(conf, "status", INDEX_NAME, "status")), crawl)
    client = OSClient(conf, "status")
    try:
        status, _ = client.request("HEAD", f"/{name}", ok=(200, 404))
    except OpenSearchError as exc:
        raise FrontierError(f"cannot look for the index {name!r}: {exc}") from exc
    finally:
        client.close()
    return status == 200


def index_counts(conf: Mapping[str, Any], indices: Iterable[str]) -> dict[str, int]:
    """Documents per index, refreshed first (one count request per index)."""
    client = OSClient(conf, "status")
    out = {}
    try:
        for name in indices:
            client.request("POST", f"/{name}/_refresh", ok=(200, 404))
            status, data = client.request("GET", f"/{name}/_count", ok=(200, 404))
            out[name] = int((data or {}).get("count", 0)) if status == 200 else 0
    except OpenSearchError as exc:
        raise FrontierError(f"cannot count the URLs of {list(indices)}: {exc}") from exc
    finally:
        client.close()
    return out


def drop_crawl_indices(conf: Mapping[str, Any], index: str) -> None:
    """Delete a crawl's status index with its leases, budgets and queues indices."""
    client = OSClient(conf, "status")
    try:
        for name in (index, f"{index}_leases", f"{index}_budgets", f"{index}_queues"):
            client.request("DELETE", f"/{name}", ok=(200, 404))
    except OpenSearchError as exc:
        raise FrontierError(f"cannot delete the index {index!r}: {exc}") from exc
    finally:
        client.close()


def _leave_out(query: dict, clause: dict, n: int, wanted: int, most: int) -> int:
    """Leave ``n`` queues out of the bool ``query`` with ``clause`` (a terms or ids query of
    them); beyond a terms query's limit (:data:`_MAX_TERMS`) ask for that many more answers
    instead, at most ``most``, and let the caller drop them. The number of answers to ask for."""
    if n > _MAX_TERMS:
        return min(wanted + n, most)
    if n:
        query["bool"]["must_not"] = [*query["bool"].get("must_not", ()), clause]
    return wanted


def _duration(value: Any, default: float) -> float:
    """An OpenSearch time value (an index's ``refresh_interval``: "1s", "500ms", a bare number of
    milliseconds, "-1" = disabled) in seconds; ``default`` when there is none or it is garbage."""
    if value is None:
        return default
    if str(value).strip() == "-1":
        return -1.0
    try:
        return C.parse_duration(value, bare_unit=0.001)
    except ValueError:
        return default


def _read_md(md: Any) -> dict[str, list[str]]:
    """Stored metadata → ``dict[str, list[str]]`` (%2E back to '.', scalars to lists)."""
    if not isinstance(md, Mapping):
        return {}
    out = {}
    for k, v in md.items():
        name = k.replace("%2E", ".")
        if isinstance(v, list):
            out[name] = [str(x) for x in v]
        elif v is not None:
            out[name] = [str(v)]
    return out


def _load_template(name: str) -> dict:
    path = C.resource_path(Path("opensearch") / name)
    body = json.loads(path.read_text())
    body.pop("_comment", None)
    return body
