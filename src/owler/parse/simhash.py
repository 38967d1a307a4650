"""Near-duplicate pages: a 64-bit SimHash of the page text (Charikar 2002; Manku, Jain and Das
Sarma 2007 for its use on web pages), and a per-host memory of the SimHashes seen.

The SimHash (:func:`simhash64`): the features are the 8-byte shingles of the UTF-8 text (ASCII
letters lower-cased, whitespace runs made one space) that start at each word (a word and the start
of the next), or, in a text with few spaces (Chinese, Japanese, Thai), at every fourth byte; each
shingle is hashed to 64 bits (SplitMix64's finaliser), and bit *i* of the SimHash is set when it is
set in more than half of the feature hashes (a feature counts as often as it occurs). Only the
first :data:`MAX_BYTES` of a text are read, and a text of more than :data:`MAX_FEATURES` features
is represented by a sample of about that many, chosen by a hash of the first three bytes of each
word (so two versions of a page keep the same ones): a long page costs what a short one does. Pages
that share most of their text get SimHashes a few bits apart; Manku et al. found 3 bits of 64 right
for 8 billion pages. The work is done in one pass by a compiled loop (``_simhash.pyx``, built by
``make setup``), or, where it is not built, by numpy on whole arrays at five times the cost
(:data:`IMPLEMENTATION` says which; the two give the same values: ``tests/unit/test_simhash.py``;
figures in BENCHMARKS.md).
A text with fewer than :data:`MIN_FEATURES` features gets no SimHash: short pages (an error
page, a redirect notice) are all "near-duplicates" of each other and say nothing.

:class:`NearDuplicates` remembers, per host, the SimHashes of the last ``simhash.host.memory``
pages (100) of at most ``simhash.hosts.max`` hosts (2,000; the least recently seen go first)
and names, for a new page, the first remembered page of its host whose SimHash is at most
``simhash.max.distance`` bits (3) away. The memory lives in the parser task, and two things make
it hold across tasks and restarts:

- Routing: every page reaches its parser with its queue's partition key (the fetcher's, the
  WARC spout's; ``constants.FETCHED_FIELDS``), and the topologies group the parser's input on
  it (``parser.grouping: key``, the default), so all the pages of a queue, and so of each of its
  hosts, meet one parser task. With ``parser.grouping: local`` (a page stays in its fetcher's
  worker when a parser task runs there) a host's pages may be spread over several tasks, and a
  near-duplicate whose original another task parsed in this run is missed (docs/explorative.md
  says what each costs).
- Seeding (:class:`FrontierSeeds`, ``simhash.seed.from.frontier``, true): when a task meets a
  host it has no memory of (its first page in a new task, after a restart, or once the host
  was forgotten for ``simhash.hosts.max``), the memory is first filled from what the frontier
  holds: the ``simhash`` (persisted by ``metadata.persist``) of the host's most recently
  fetched URLs in its queue, at most ``simhash.host.memory`` of them, read in one query. A
  page of a new run is thus compared with the pages of the runs before it. The query's result
  is what the frontier had written when it ran: a page fetched in this run but whose status
  the status updater has not yet committed (a batch, a second or so; with OpenSearch, also the
  index's refresh) is not in it. Not on a URLFrontier service (the API lists a queue's URLs in
  the service's own order, not by date: finding the newest would read the whole queue), where
  a host's memory starts empty as before.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, OrderedDict
from typing import Any, Callable, Mapping

import numpy as np
from numpy.lib.stride_tricks import as_strided

from owler import conf as C
from owler.constants import PARTITION_MODE_HOST, SIMHASH
from owler.frontier import DEFAULT_KEY, RETRY_SECS, Frontier, backend_of, open_frontier
from owler.urls import host_of, partition_key, partition_mode

log = logging.getLogger("owler.parse.simhash")

#: whether a host's memory is seeded from the frontier (:class:`FrontierSeeds`)
SEED_KEY = "simhash.seed.from.frontier"
#: the SimHashes remembered per host, and read per host from the frontier at most
HOST_MEMORY_KEY = "simhash.host.memory"
#: a seeding reads this many times ``simhash.host.memory`` of the queue's latest URLs: the
#: queue's other hosts (``byDomain``, ``byIP``) and its URLs without a SimHash (a redirect, an
#: error) take their share of them
SEED_SCAN = 4

#: features a text needs for a SimHash
MIN_FEATURES = 16
SHINGLE = 8
_PAD = b" " * SHINGLE
_SPACE = 32
_WS_TO_SPACE = bytes.maketrans(b"\t\n\r\x0b\x0c", b"     ")
_PAD_ARRAY = np.frombuffer(_PAD, dtype=np.uint8)
#: bytes of text read at most (the start of a longer text), and features hashed at most (a
#: sample of a text with more, chosen by content): they bound the cost of a long page
MAX_BYTES = 16384
MAX_FEATURES = 1024
_BYTE_OFFSETS = np.arange(SHINGLE, dtype=np.intp) * 256
#: row v: the 8 bits of byte value v, least significant first
_BITS_OF_BYTE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1,
                              bitorder="little").astype(np.int64)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over a uint64 array (wrapping arithmetic), in place."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _utf8_start(text: str) -> bytes:
    """The text's first MAX_BYTES as UTF-8, cut at a space when the encoding is longer."""
    if len(text) > MAX_BYTES:  # a long text: its start (a character is one byte or more)
        text = text[:MAX_BYTES]
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > MAX_BYTES:
        cut = data.rfind(b" ", 0, MAX_BYTES)
        data = data[:cut if cut > 0 else MAX_BYTES]
    return data


def simhash_numpy(data: bytes) -> int | None:
    """The SimHash of UTF-8 ``data`` (at most MAX_BYTES) with numpy: the reference for the
    compiled loop, and what runs where it is not built."""
    raw = np.frombuffer(data.lower().translate(_WS_TO_SPACE), dtype=np.uint8)
    # one space between words, whatever the markup left: the features do not depend on it
    space = raw == _SPACE
    drop = space.copy()
    drop[1:] &= space[:-1]  # a space after a space (or leading)
    b = np.concatenate((raw[~drop], _PAD_ARRAY))
    n = len(b) - SHINGLE
    if n <= 0:
        return None
    starts = np.flatnonzero(b[:n - 1] == _SPACE) + 1  # where a word starts (but the first)
    if len(starts) < n // 32:  # few spaces: a script written without them
        starts = np.arange(4, n, 4)
    starts = np.concatenate(([0], starts))
    if len(starts) < MIN_FEATURES:
        return None
    if len(starts) > MAX_FEATURES:  # a long text: a sample chosen by the words' first bytes
        pick = ((b[starts].astype(np.uint32) * 0x9E37 + b[starts + 1].astype(np.uint32) * 0x7F4B
                 + b[starts + 2].astype(np.uint32) * 0x1F1D) & 0xFFFF)
        starts = starts[pick < (MAX_FEATURES << 16) // len(starts)]
    windows = as_strided(b, shape=(n, SHINGLE), strides=(1, 1))  # a view: no copy
    shingles = windows[starts].view("<u8").ravel().astype(np.uint64)
    with np.errstate(over="ignore"):
        hashes = _mix(shingles)
    # bit counts per position: one histogram of the bytes of every hash, by byte position
    counts = np.bincount((hashes.view(np.uint8).reshape(-1, 8) + _BYTE_OFFSETS).ravel(),
                         minlength=8 * 256).reshape(8, 256)
    ones = (counts @ _BITS_OF_BYTE).ravel()
    packed = np.packbits(ones * 2 > len(hashes), bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def simhash_compiled(data: bytes) -> int | None:
    """The same SimHash by the compiled loop of ``_simhash.pyx``."""
    return _compiled(data, MIN_FEATURES, MAX_FEATURES)


try:
    from owler.parse._simhash import simhash_utf8 as _compiled
except ImportError:  # not built (setup.py), or built for another Python
    IMPLEMENTATION = "numpy"
    _simhash_utf8 = simhash_numpy
else:
    IMPLEMENTATION = "compiled"
    _simhash_utf8 = simhash_compiled


def simhash64(text: str) -> int | None:
    """The 64-bit SimHash of ``text`` (module docstring), None for a text too short."""
    if not text:
        return None
    return _simhash_utf8(_utf8_start(text))


def to_hex(value: int) -> str:
    return f"{value:016x}"


def distance(a: int, b: int) -> int:
    """Hamming distance of two SimHashes."""
    return (a ^ b).bit_count()


#: the counters of :class:`FrontierSeeds`
COUNTERS = ("simhash/seeded_hosts", "simhash/seeded", "simhash/seed_us", "simhash/seed_failed",
            "simhash/seed_skipped", "simhash/seed_bad")

#: what seeds a host's memory: ``(host, key, url)`` → ``(url, SimHash)`` of its pages, latest
#: first (``key``: the page's partition key, None when the page came without it)
Seeds = Callable[[str, str | None, str], list[tuple[str, int]]]


class NearDuplicates:
    """The per-host memory of SimHashes (module docstring), a host's memory seeded by ``seeds``
    when it has none (None: it starts empty). Not thread-safe."""

    def __init__(self, conf: Mapping[str, Any] | None = None, seeds: Seeds | None = None) -> None:
        conf = conf or {}
        self.max_distance = C.get_int(conf, "simhash.max.distance", 3)
        self.per_host = max(1, C.get_int(conf, HOST_MEMORY_KEY, 100))
        self.max_hosts = max(1, C.get_int(conf, "simhash.hosts.max", 2000))
        self.seeds = seeds
        self._hosts: OrderedDict[str, OrderedDict[str, int]] = OrderedDict()

    def check(self, host: str, url: str, value: int, key: str | None = None) -> str | None:
        """The remembered page of ``host`` (not ``url`` itself) whose SimHash is within
        ``simhash.max.distance`` of ``value``, else None; then ``url`` is remembered. ``key``:
        the page's partition key, which a new host's seeding reads the frontier by."""
        seen = self._hosts.get(host)
        if seen is None:
            seen = self._new_host(host, key, url)
        else:
            self._hosts.move_to_end(host)
        found = None
        limit = self.max_distance
        for other_url, other in seen.items():
            if (other ^ value).bit_count() <= limit and other_url != url:
                found = other_url
                break
        seen[url] = value
        seen.move_to_end(url)
        if len(seen) > self.per_host:
            seen.popitem(last=False)
        return found

    def _new_host(self, host: str, key: str | None, url: str) -> OrderedDict[str, int]:
        """A memory for ``host``, with what ``seeds`` gives (the oldest first, so that they are
        forgotten first); the least recently seen host forgotten beyond ``simhash.hosts.max``."""
        seen: OrderedDict[str, int] = OrderedDict()
        if self.seeds is not None:
            for other_url, other in reversed(self.seeds(host, key, url)[:self.per_host]):
                seen[other_url] = other
        self._hosts[host] = seen
        if len(self._hosts) > self.max_hosts:
            self._hosts.popitem(last=False)
        return seen

    def __len__(self) -> int:
        return sum(len(v) for v in self._hosts.values())


class FrontierSeeds:
    """A host's remembered SimHashes read from the frontier (the module docstring, "Seeding"):
    :meth:`__call__` is :class:`NearDuplicates`' ``seeds``.

    One query per host a task meets without a memory of it (:meth:`latest_values` of the SQLite
    and OpenSearch frontiers): the ``simhash`` of the ``SEED_SCAN`` × ``simhash.host.memory``
    URLs of the page's queue with the latest next fetch dates, those of the page's host, at most
    ``simhash.host.memory`` of them. A URL's next fetch date is the date of its last status
    write plus its interval, so within a queue the latest dates are those of the URLs fetched
    last, as long as they share an interval (``fetchInterval.default``; the adaptive scheduler's
    intervals move them within a factor of its bounds). Two kinds of URL come before them: those
    never to be fetched again (stored with the latest date of all, ``NEVER``: pages fetched
    some time, their SimHash as good as any) and errors with a longer interval
    (``fetchInterval.error``: no SimHash, they only take places of the scan). SQLite walks the ``(key, next_fetch_date)`` index backwards,
    so the query's cost does not grow with the queue; a "fetched at" order would need an index
    of its own on every write for this one read.

    The frontier is opened the first time it is needed, as the other components open it
    (:func:`owler.frontier.open_frontier`), and only read. Nothing here may fail a parse: a
    frontier that cannot be opened or read is logged and counted (``simhash/seed_failed``), the
    host starts with an empty memory, and the frontier is opened again no sooner than
    ``RETRY_SECS`` later (hosts met meanwhile start empty too: ``simhash/seed_skipped``). A page
    without its partition key (a tuple of an older topology) gets it from ``partition.url.mode``.
    Counters: ``simhash/seeded_hosts`` (queries answered), ``simhash/seeded`` (SimHashes
    remembered from them), ``simhash/seed_us`` (their time), ``simhash/seed_failed``,
    ``simhash/seed_skipped``, ``simhash/seed_bad`` (a stored value that is not a SimHash).
    """

    def __init__(self, conf: Mapping[str, Any],
                 opener: Callable[[Mapping[str, Any]], Frontier] = open_frontier,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.conf = conf
        self.per_host = max(1, C.get_int(conf, HOST_MEMORY_KEY, 100))
        self.scan = SEED_SCAN * self.per_host
        self.mode = partition_mode(conf)
        self._opener = opener
        self._clock = clock
        self.frontier: Any = None
        self._retry_at = 0.0
        #: every name there from the start: a metrics thread may read them while a parse counts
        self.counters: Counter = Counter(dict.fromkeys(COUNTERS, 0))

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "FrontierSeeds | None":
        """Seeds for the crawl's frontier; None with ``simhash.seed.from.frontier: false`` or a
        URLFrontier service (the module docstring says why)."""
        if not C.get_bool(conf, SEED_KEY, True):
            return None
        if backend_of(conf) == "urlfrontier":
            log.info("near-duplicates: a URLFrontier service cannot give a queue's latest URLs; "
                     "host memories start empty")
            return None
        return cls(conf)

    def __call__(self, host: str, key: str | None, url: str) -> list[tuple[str, int]]:
        """``(url, SimHash)`` of ``host``'s latest fetched pages in the frontier, latest first,
        at most ``simhash.host.memory``; ``[]`` when the frontier cannot say."""
        frontier = self.frontier
        if frontier is None:
            if self._clock() < self._retry_at:
                self.counters["simhash/seed_skipped"] += 1
                return []
            frontier = self._open()
            if frontier is None:
                return []
        if not key:
            key = self._key_of(url)
        started = time.perf_counter()
        try:
            rows = frontier.latest_values(key, SIMHASH, self.scan)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the parse goes on
            log.warning("near-duplicates: cannot read the SimHashes of %s from the frontier "
                        "(the host's memory starts empty; again in %.0f s): %s: %s", host,
                        RETRY_SECS, type(exc).__name__, exc)
            self.counters["simhash/seed_failed"] += 1
            self._drop()
            return []
        out = []
        # a byHost queue holds its host's URLs only: no need to look at each (a third of the time)
        every = self.mode == PARTITION_MODE_HOST and key == host
        for other_url, value in rows:
            if not every and host_of(other_url) != host:
                continue
            try:
                out.append((other_url, int(value, 16)))
            except (TypeError, ValueError):
                self.counters["simhash/seed_bad"] += 1
                continue
            if len(out) >= self.per_host:
                break
        self.counters["simhash/seed_us"] += int((time.perf_counter() - started) * 1e6)
        self.counters["simhash/seeded_hosts"] += 1
        self.counters["simhash/seeded"] += len(out)
        return out

    def _open(self) -> Any:
        try:
            self.frontier = self._opener(self.conf)
        except Exception as exc:  # noqa: BLE001 - a bad file, a node away: no seeding
            log.warning("near-duplicates: cannot open the frontier to seed host memories "
                        "(again in %.0f s): %s: %s", RETRY_SECS, type(exc).__name__, exc)
            self.counters["simhash/seed_failed"] += 1
            self._retry_at = self._clock() + RETRY_SECS
        return self.frontier

    def _drop(self) -> None:
        frontier, self.frontier = self.frontier, None
        self._retry_at = self._clock() + RETRY_SECS
        try:
            frontier.close()
        except Exception:  # noqa: BLE001 - it failed already
            pass

    def _key_of(self, url: str) -> str:
        try:
            return partition_key(url, self.mode) or DEFAULT_KEY
        except ValueError:
            return DEFAULT_KEY

    def close(self) -> None:
        if self.frontier is not None:
            self._drop()
