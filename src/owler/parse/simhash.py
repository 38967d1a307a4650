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
``simhash.max.distance`` bits (3) away. The memory lives in the parser task: a host's pages that
reach another parser task (more parser tasks than fetcher tasks, or pages parsed after a restart)
are compared with that task's memory only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping

import numpy as np
from numpy.lib.stride_tricks import as_strided

from owler import conf as C

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


class NearDuplicates:
    """The per-host memory of SimHashes (module docstring). Not thread-safe."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.max_distance = C.get_int(conf, "simhash.max.distance", 3)
        self.per_host = max(1, C.get_int(conf, "simhash.host.memory", 100))
        self.max_hosts = max(1, C.get_int(conf, "simhash.hosts.max", 2000))
        self._hosts: OrderedDict[str, OrderedDict[str, int]] = OrderedDict()

    def check(self, host: str, url: str, value: int) -> str | None:
        """The remembered page of ``host`` (not ``url`` itself) whose SimHash is within
        ``simhash.max.distance`` of ``value``, else None; then ``url`` is remembered."""
        seen = self._hosts.get(host)
        if seen is None:
            seen = self._hosts[host] = OrderedDict()
            if len(self._hosts) > self.max_hosts:
                self._hosts.popitem(last=False)
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

    def __len__(self) -> int:
        return sum(len(v) for v in self._hosts.values())
