"""The frontier: where every known URL lives with its status, next fetch date and metadata.

A backend implements :class:`Frontier`: an embedded SQLite file (:mod:`owler.frontier.sqlite`), an
OpenSearch status index compatible with StormCrawler's (:mod:`owler.frontier.opensearch`), or a
URLFrontier service (:mod:`owler.frontier.urlfrontier`). The
record model follows StormCrawler's status index: id = sha256(url), ``url``,
``status``, ``next_fetch_date``, ``key`` (partition key), ``metadata``.

Rules every backend keeps:

- DISCOVERED is create-only: it never overwrites a known URL; any other status replaces the record.
- ``apply_updates`` returns only once the batch is durable, so the status updater may ack then;
  an exception means nothing of the batch may be assumed written (the tuples are failed, replayed).
- "Never fetch again" (a ``None`` next fetch date) is stored as :data:`NEVER` and read back as
  ``None``.

Tags (``frontier.tags``, read by both backends through :class:`Tagger`): a map
``"<metadata key>=<value>": <tag>``; a URL whose metadata has that value is stored with that tag, and
a spout (or a URLFrontier service, ``owler frontier serve --interest``) can serve only some tags:
its *interest* (:class:`Interest`), a signature of tags: every one of
``frontier.interest.required.tags``, at least one of ``frontier.interest.tags`` (when any are
listed) and none of ``frontier.interest.exclude.tags``, the three combinable. Its text form (the
command line) is ``+tag`` required, ``-tag`` excluded, a bare ``tag`` any-of, separated by spaces or
commas: ``"+Sitemap +FamilyFriendly -risk:adult"`` serves the URLs tagged both ``Sitemap`` and
``FamilyFriendly`` and not ``risk:adult`` (OWLer's example of a service's interest).
A value ``*`` matches any value of the key, and a ``*`` in the tag stands for it:
``"lang=*": "lang:*"`` tags a page the language identification found German ``lang:de`` (the
focused sub-crawls of OWLer's interest partitions; with ``lang`` in ``metadata.transfer`` a page's
outlinks carry its language, so a ``lang:de`` spout follows German pages' links). A URL has every
tag its metadata matches. ``frontier.tags.priority`` (a map tag → seconds) moves a tagged URL up
(positive) or down (negative) in its queue: its stored next fetch date is that much earlier or
later (the sum over its tags), so it is served before or after the URLs it would have queued with.

Tags are computed when a URL is written: a changed rule reaches the URLs already stored only
through ``owler frontier retag`` (each backend's ``retag``), which rewrites their tags and nothing
else (status and next fetch date stay; a ``frontier.tags.priority`` shift stays as it was stored
until the URL's next write).

Config keys read here: ``frontier.backend`` (``sqlite`` | ``opensearch`` | ``urlfrontier``: any
URLFrontier service, :mod:`owler.frontier.urlfrontier`), ``frontier.tags``,
``frontier.tags.priority``, ``frontier.interest.required.tags``, ``frontier.interest.tags``,
``frontier.interest.exclude.tags`` (:class:`Interest`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Container, Iterable, Mapping, Protocol

from owler import conf as C
from owler.conf import ConfError
from owler.constants import (EXCLUDE_TAGS_KEY, FRONTIER_BACKEND_KEY, FRONTIER_TAGS_KEY,
                             INTEREST_TAGS_KEY, REQUIRED_TAGS_KEY, SQLITE_PATH_KEY, Status)
from owler.frontier.crawls import (CRAWL_ID_KEY, DEFAULT_CRAWL, URLFRONTIER_CRAWL_KEY,
                                   CrawlIDError, crawl_id, sqlite_path)
from owler.urls import normalize, partition_key

__all__ = [
    "NEVER",
    "RETRY_SECS",
    "DEFAULT_KEY",
    "StatusUpdate",
    "FrontierRecord",
    "Frontier",
    "FrontierError",
    "open_frontier",
    "backend_of",
    "configured_crawl",
    "crawl_spaces",
    "list_crawls",
    "space_exists",
    "delete_crawl",
    "DEFAULT_CRAWL",
    "round_robin",
    "seed_key",
    "tag_rules",
    "Tagger",
    "Interest",
    "WILDCARD",
    "TAG_PRIORITY_KEY",
]

#: a ``frontier.tags`` value matching any value of its key; in the tag, the value found
WILDCARD = "*"
TAG_PRIORITY_KEY = "frontier.tags.priority"

#: Stored next fetch date of a URL that is never to be fetched again: 9999-12-31T23:59:59Z.
#: Chosen far beyond any ``now`` so no due-query ever returns it; reported as ``None``.
NEVER = 253402300799.0

#: Seconds between two attempts to open a frontier that could not be opened (spouts, status
#: updaters: they keep running meanwhile).
RETRY_SECS = 5.0

#: Partition key of a URL whose key cannot be computed (StormCrawler's ``_DEFAULT_``).
DEFAULT_KEY = "_DEFAULT_"


class FrontierError(RuntimeError):
    """The frontier cannot be opened or used (bad file, wrong schema version, …)."""


@dataclass(slots=True)
class StatusUpdate:
    """One write to the frontier.

    ``next_fetch_date``: epoch seconds; ``None`` = never fetch again (stored as :data:`NEVER`).
    ``key``: the partition key (queue) of the URL. ``block_until``: epoch seconds before which no
    URL of the queue may be served (the server throttled: 429/503, Retry-After), as URLFrontier's
    BlockQueueUntil; a block is only ever extended, never shortened. ``crawl_delay``: the
    robots.txt Crawl-delay the fetcher keeps for the queue, for a frontier shared through a
    service (URLFrontier's SetDelay; the other backends keep politeness between crawlers by
    leases and need not store it).
    """

    url: str
    status: Status
    metadata: dict[str, list[str]] = field(default_factory=dict)
    next_fetch_date: float | None = None
    key: str = DEFAULT_KEY
    block_until: float | None = None
    crawl_delay: float | None = None


@dataclass(slots=True)
class FrontierRecord:
    """A URL as stored. ``next_fetch_date`` is ``None`` when the URL is never fetched again."""

    url: str
    status: Status
    next_fetch_date: float | None
    key: str
    metadata: dict[str, list[str]]
    updated: float


class Frontier(Protocol):
    """What the spout, the status updater and the CLI need from a frontier backend."""

    def apply_updates(self, updates: Iterable[StatusUpdate]) -> list[int]:
        """Write a batch; return only after it is durable. Returns the positions of the updates
        that failed (SQLite: always empty, the batch is one transaction). Raises when the batch
        as a whole failed."""

    def inject(self, seeds: Iterable[tuple[str, Mapping[str, list[str]]]], now: float) -> int:
        """Add seeds as DISCOVERED, due ``now``, never overwriting; return how many were new."""

    def due(
        self, now: float, max_buckets: int, per_bucket: int, exclude: Container[str] = ()
    ) -> list[tuple[str, dict[str, list[str]], str]]:
        """Due URLs as ``(url, metadata, key)``, round-robin over at most ``max_buckets`` keys."""

    def counts(self) -> dict[str, int]:
        """Number of URLs per status name; all five names present."""

    def due_count(self, now: float) -> int: ...

    def queue_count(self, now: float | None = None) -> int: ...

    def top_hosts(self, n: int = 10) -> list[tuple[str, int]]: ...

    def get(self, url: str) -> FrontierRecord | None: ...

    def charge(self, counter: str, n: int, limit: int, now: float, period: float) -> int:
        """Take up to ``n`` from ``counter``'s allowance of ``limit`` (``< 0``: none) per window
        of ``period`` seconds, atomically for every task sharing the frontier; the number granted.
        Raises FrontierError when the frontier cannot be reached."""
        ...

    def close(self) -> None: ...

    #: ``True`` when spout tasks take queues under leases (:meth:`release` ends a round)
    leases_queues: bool

    def release(self, key: str, now: float, served: bool = True, defer: bool = False
                ) -> None: ...

    def release_all(self, now: float) -> None: ...

    def refresh(self) -> None:
        """Make all writes so far visible to counts and queries."""

    @property
    def location(self) -> str: ...


def tag_rules(rules: Any) -> list[tuple[str, str, str]]:
    """``frontier.tags`` (a map ``"<metadata key>=<value>": tag``, ordered) as ``(key, value,
    tag)`` triples; :class:`ConfError` for anything else (the OpenSearch frontier's syntax)."""
    if rules is None or rules == "":
        return []
    if not isinstance(rules, Mapping):
        raise ConfError(f"frontier.tags: expected a map 'key=value: tag', got {rules!r}")
    out = []
    for cond, tag in rules.items():
        if "=" not in str(cond):
            raise ConfError(f"frontier.tags: {cond!r} is not 'metadata key=value'")
        k, v = str(cond).split("=", 1)
        out.append((k.strip(), v.strip(), str(tag)))
    return out


class Tagger:
    """The tags of a URL's metadata under ``frontier.tags`` and their priority shift under
    ``frontier.tags.priority`` (the module docstring)."""

    def __init__(self, conf: Mapping[str, Any] | None) -> None:
        conf = conf or {}
        self.rules = tag_rules(conf.get(FRONTIER_TAGS_KEY))
        self.keys = frozenset(k for k, _, _ in self.rules)
        raw = conf.get(TAG_PRIORITY_KEY) or {}
        if not isinstance(raw, Mapping):
            raise ConfError(f"{TAG_PRIORITY_KEY}: expected a map 'tag: seconds', got {raw!r}")
        self.priority: dict[str, float] = {}
        for tag, secs in raw.items():
            try:
                self.priority[str(tag)] = float(secs)
            except (TypeError, ValueError):
                raise ConfError(f"{TAG_PRIORITY_KEY}: {tag}: {secs!r} is not a number of "
                                "seconds") from None

    def __bool__(self) -> bool:
        return bool(self.rules)

    def tags(self, md: Mapping[str, list[str]]) -> list[str]:
        """Every tag ``md`` matches, in rule order, each once."""
        out: list[str] = []
        for k, v, tag in self.rules:
            values = md.get(k)
            if not values:
                continue
            if v == WILDCARD:
                for value in values:
                    value = str(value).strip()
                    t = tag.replace(WILDCARD, value) if WILDCARD in tag else tag
                    if value and t not in out:
                        out.append(t)
            elif v in values and tag not in out:
                out.append(tag)
        return out

    def shift(self, tags: list[str]) -> float:
        """Seconds to take off a URL's next fetch date for its tags (negative: to add)."""
        if not self.priority:
            return 0.0
        return sum(self.priority.get(t, 0.0) for t in tags)


@dataclass(frozen=True)
class Interest:
    """What a spout or a service serves, as a signature of tags (the module docstring): URLs with
    every ``required`` tag, at least one ``any`` tag when there are any, and no ``exclude`` tag.
    Empty: every URL. Build it with :meth:`from_conf` or :meth:`parse` (both check it)."""

    required: tuple[str, ...] = ()
    any: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, required: Iterable[str] = (), any: Iterable[str] = (),  # noqa: A002
           exclude: Iterable[str] = (), where: str = "interest") -> "Interest":
        """The interest of these tags, each list without repeats; :class:`ConfError` (naming
        ``where``) for an empty tag or a tag both wanted (required or any-of) and excluded."""
        lists = []
        for name, tags in (("required", required), ("any-of", any), ("excluded", exclude)):
            out: list[str] = []
            for tag in tags:
                tag = str(tag).strip()
                if not tag:
                    raise ConfError(f"{where}: an empty {name} tag")
                if tag not in out:
                    out.append(tag)
            lists.append(tuple(out))
        for wanted, name in ((lists[0], "required"), (lists[1], "any-of")):
            both = [t for t in wanted if t in lists[2]]
            if both:
                raise ConfError(f"{where}: tag {both[0]!r} is both {name} and excluded")
        return cls(*lists)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any] | None) -> "Interest":
        """``frontier.interest.required.tags``, ``frontier.interest.tags`` (any-of) and
        ``frontier.interest.exclude.tags``."""
        conf = conf or {}
        return cls.of(C.get_list(conf, REQUIRED_TAGS_KEY, []), C.get_list(conf, INTEREST_TAGS_KEY, []),
                      C.get_list(conf, EXCLUDE_TAGS_KEY, []),
                      where=f"{REQUIRED_TAGS_KEY} / {INTEREST_TAGS_KEY} / {EXCLUDE_TAGS_KEY}")

    @classmethod
    def parse(cls, text: str | None) -> "Interest":
        """The text form: ``+tag`` required, ``-tag`` excluded, a bare ``tag`` any-of, separated
        by spaces or commas (``"+Sitemap +FamilyFriendly -risk:adult"``); empty: every URL.
        :class:`ConfError` for an empty tag (a comma with nothing before or after it), a lone
        ``+`` or ``-``, a tag with two signs, or a tag both wanted and excluded."""
        text = "" if text is None else str(text)
        where = f"interest {text!r}"
        if not text.strip():
            return cls()
        required: list[str] = []
        any_: list[str] = []
        exclude: list[str] = []
        for part in text.split(","):
            words = part.split()
            if not words:
                raise ConfError(f"{where}: an empty tag (a comma with no tag before or after it)")
            for word in words:
                sign, tag = (word[0], word[1:]) if word[0] in "+-" else ("", word)
                if not tag:
                    raise ConfError(f"{where}: a lone {sign!r} with no tag after it (write "
                                    f"{sign}tag, without a space)")
                if tag[0] in "+-":
                    raise ConfError(f"{where}: {word!r} has two signs (one of + or - per tag)")
                {"+": required, "-": exclude, "": any_}[sign].append(tag)
        return cls.of(required, any_, exclude, where=where)

    def __bool__(self) -> bool:
        return bool(self.required or self.any or self.exclude)

    def matches(self, tags: Iterable[str]) -> bool:
        """Whether a URL with ``tags`` is of this interest."""
        tags = set(tags)
        return (all(t in tags for t in self.required)
                and (not self.any or not tags.isdisjoint(self.any))
                and tags.isdisjoint(self.exclude))

    def text(self) -> str:
        """The text form :meth:`parse` reads (``""``: every URL)."""
        return " ".join([*(f"+{t}" for t in self.required), *self.any,
                         *(f"-{t}" for t in self.exclude)])

    def as_conf(self) -> dict[str, list[str]]:
        """The three configuration keys that give this interest."""
        return {REQUIRED_TAGS_KEY: list(self.required), INTEREST_TAGS_KEY: list(self.any),
                EXCLUDE_TAGS_KEY: list(self.exclude)}


def seed_key(url: str, mode: str) -> tuple[str, str]:
    """A seed as every backend's ``inject`` stores it: ``(normalised URL, partition key)``, the key
    :data:`DEFAULT_KEY` when none can be computed; ``ValueError`` for a URL that does not
    normalise."""
    norm = normalize(url)
    if norm is None:
        raise ValueError(f"cannot inject {url!r}: not a valid http(s) URL")
    try:
        return norm, partition_key(norm, mode)
    except ValueError:
        return norm, DEFAULT_KEY


def round_robin(buckets: list[list], per_bucket: int) -> list:
    """The first of every bucket, then the second of every bucket, … (``per_bucket`` rounds): how
    both frontiers interleave their queues' URLs for the spout."""
    out = []
    for i in range(per_bucket):
        for bucket in buckets:
            if i < len(bucket):
                out.append(bucket[i])
    return out


def backend_of(conf: Mapping[str, Any] | None) -> str:
    """``frontier.backend``: ``sqlite`` (the default), ``opensearch`` or ``urlfrontier``."""
    backend = (C.get_str(conf or {}, FRONTIER_BACKEND_KEY, "sqlite") or "sqlite").strip().lower()
    if backend not in ("sqlite", "opensearch", "urlfrontier"):
        raise ConfError(f"frontier.backend: unknown backend {backend!r}; expected 'sqlite', "
                        "'opensearch' or 'urlfrontier'")
    return backend


def configured_crawl(conf: Mapping[str, Any] | None) -> str:
    """The crawl a crawler works on: ``frontier.crawl.id`` (``urlfrontier.crawlid`` on a
    URLFrontier service); ``DEFAULT`` when unset. ConfError for an ID that names no crawl."""
    conf = conf or {}
    key = URLFRONTIER_CRAWL_KEY if backend_of(conf) == "urlfrontier" else CRAWL_ID_KEY
    try:
        return crawl_id(C.get_str(conf, key, "") or "")
    except CrawlIDError as exc:
        raise ConfError(f"{key}: {exc}") from None


def open_frontier(conf: Mapping[str, Any] | None, owner: str | None = None,
                  crawl: str | None = None) -> Frontier:
    """The frontier backend chosen by ``frontier.backend`` (default ``sqlite``), for ``crawl``
    (else the crawl the configuration names: :func:`configured_crawl`); its space is created if
    missing. ``owner`` names the spout task for the queue leases of a shared frontier
    (OpenSearch)."""
    conf = conf or {}
    backend = backend_of(conf)
    if backend == "urlfrontier":  # (no crawl named: the spout takes any crawl's URLs)
        from owler.frontier.urlfrontier import URLFrontierClient

        configured_crawl(conf)  # a bad urlfrontier.crawlid is a ConfError here
        return URLFrontierClient(conf, owner=owner,
                                 crawl=None if crawl is None else crawl_id(crawl))
    crawl = configured_crawl(conf) if crawl is None else crawl_id(crawl)
    if backend == "sqlite":
        from owler.frontier.sqlite import SQLiteFrontier

        path = C.get_str(conf, SQLITE_PATH_KEY, ".work/frontier.sqlite")
        return SQLiteFrontier(sqlite_path(path, crawl), conf, crawl=crawl)
    from owler.frontier.opensearch import OpenSearchFrontier

    return OpenSearchFrontier(conf, owner=owner, crawl=crawl)


def crawl_spaces(conf: Mapping[str, Any] | None) -> dict[str, str]:
    """Crawl ID -> where its URLs are (a file, an index), for every crawl whose space exists on
    the SQLite or OpenSearch frontier (:mod:`owler.frontier.crawls`); ``DEFAULT`` first."""
    conf = conf or {}
    backend = backend_of(conf)
    if backend == "sqlite":
        from owler.frontier.sqlite import crawl_files

        found = {c: str(p) for c, p in
                 crawl_files(C.get_str(conf, SQLITE_PATH_KEY, ".work/frontier.sqlite")).items()}
    elif backend == "opensearch":
        from owler.frontier.opensearch import crawl_indices

        found = crawl_indices(conf)
    else:
        raise FrontierError("a URLFrontier service lists its own crawls (ListCrawls)")
    return dict(sorted(found.items(), key=lambda kv: (kv[0] != DEFAULT_CRAWL, kv[0])))


def space_exists(conf: Mapping[str, Any] | None, crawl: str) -> bool:
    """Whether crawl ``crawl`` has its file or index on the SQLite or OpenSearch frontier."""
    conf = conf or {}
    backend = backend_of(conf)
    if backend == "sqlite":
        return sqlite_path(C.get_str(conf, SQLITE_PATH_KEY, ".work/frontier.sqlite"),
                           crawl).is_file()
    if backend == "opensearch":
        from owler.frontier.opensearch import index_exists

        return index_exists(conf, crawl)
    raise FrontierError("a URLFrontier service keeps its own crawls")


def list_crawls(conf: Mapping[str, Any] | None) -> list[str]:
    """The crawls that hold at least one URL, ``DEFAULT`` first (on a URLFrontier service: what
    its ListCrawls answers)."""
    conf = conf or {}
    backend = backend_of(conf)
    if backend == "urlfrontier":
        from owler.frontier.urlfrontier import list_crawls as remote

        return remote(conf)
    spaces = crawl_spaces(conf)
    if backend == "sqlite":
        from owler.frontier.sqlite import holds_urls

        return [c for c, path in spaces.items() if holds_urls(Path(path))]
    from owler.frontier.opensearch import index_counts

    counts = index_counts(conf, spaces.values())
    return [c for c, index in spaces.items() if counts.get(index)]


def delete_crawl(conf: Mapping[str, Any] | None, crawl: str) -> int:
    """Remove crawl ``crawl`` with all its URLs; how many URLs it held (0: an unknown crawl).
    The ``DEFAULT`` crawl's file or index stays, emptied; another crawl's is removed."""
    conf = conf or {}
    backend = backend_of(conf)
    crawl = crawl_id(crawl)
    if backend == "urlfrontier":
        from owler.frontier.urlfrontier import delete_crawl as remote

        return remote(conf, crawl)
    where = crawl_spaces(conf).get(crawl)
    if where is None:
        return 0
    with contextlib.closing(open_frontier(conf, crawl=crawl)) as f:
        n = f.delete(None)
    if crawl != DEFAULT_CRAWL:
        if backend == "sqlite":
            from owler.frontier.sqlite import remove_crawl_file

            remove_crawl_file(Path(where))
        else:
            from owler.frontier.opensearch import drop_crawl_indices

            drop_crawl_indices(conf, where)
    return n
