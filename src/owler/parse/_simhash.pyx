# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The SimHash of :mod:`owler.parse.simhash` in one pass of compiled code.

The same function as ``simhash.simhash_numpy`` (the tests compare the two on real text): numpy
needs about twenty whole-array steps for it, ~90 µs for 16 KiB of text; this loop reads the text
once and costs a tenth of that (BENCHMARKS.md). Built by ``make setup`` (``setup.py``); when it is
not built, :mod:`owler.parse.simhash` uses numpy.
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

cdef enum:
    SHINGLE = 8
    SPACE = 32
# the low bit of every byte: eight 8-bit counters in one word
cdef uint64_t LANES = 0x0101010101010101ULL


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    x ^= x >> 30
    x *= 0xBF58476D1CE4E5B9ULL
    x ^= x >> 27
    x *= 0x94D049BB133111EBULL
    x ^= x >> 31
    return x


cdef inline uint64_t _shingle(const uint8_t* p) noexcept nogil:
    # the 8 bytes at p as a little-endian number, whatever the machine's byte order
    return (<uint64_t>p[0] | (<uint64_t>p[1] << 8) | (<uint64_t>p[2] << 16)
            | (<uint64_t>p[3] << 24) | (<uint64_t>p[4] << 32) | (<uint64_t>p[5] << 40)
            | (<uint64_t>p[6] << 48) | (<uint64_t>p[7] << 56))


cdef inline bint _picked(const uint8_t* p, uint32_t below) noexcept nogil:
    return ((p[0] * <uint32_t>0x9E37 + p[1] * <uint32_t>0x7F4B + p[2] * <uint32_t>0x1F1D)
            & 0xFFFF) < below


cdef inline void _flush(uint64_t* acc, Py_ssize_t* ones) noexcept nogil:
    # acc[j] holds, in byte lane L, how many hashes had bit 8L + j set since the last flush
    cdef int j, lane
    for j in range(8):
        for lane in range(8):
            ones[8 * lane + j] += (acc[j] >> (8 * lane)) & 0xFF
        acc[j] = 0


# each byte as the features read it: ASCII letters lower-cased, every whitespace a space
cdef uint8_t FOLD[256]
for _c in range(256):
    FOLD[_c] = (_c + 32 if 65 <= _c <= 90 else SPACE if 9 <= _c <= 13 else _c)


def simhash_utf8(bytes data, Py_ssize_t min_features, Py_ssize_t max_features):
    """The SimHash of UTF-8 text already cut to at most MAX_BYTES, or None (too few features).

    The loops have no branch that depends on the text (a text is new to the branch predictor
    every time: a mispredicted branch per word tripled the cost): bytes and feature positions are
    kept or dropped by moving an index, not by an ``if``."""
    cdef Py_ssize_t size = len(data)
    cdef const uint8_t* src = <const uint8_t*>data
    # the folded text, then the feature positions (at most one per byte), in one allocation
    cdef Py_ssize_t text_room = (size + SHINGLE + 3) & ~3  # the positions 4-byte aligned
    cdef uint8_t* b = <uint8_t*>malloc(text_room + (size + 1) * sizeof(uint32_t))
    if b == NULL:
        raise MemoryError()
    cdef uint32_t* starts = <uint32_t*>(b + text_room)
    cdef Py_ssize_t n = 0, i, k, m, count
    cdef uint8_t c
    cdef int after_space = 1  # leading spaces go too
    cdef int space
    cdef uint32_t below
    cdef uint64_t acc[8]
    cdef Py_ssize_t ones[64]
    cdef uint64_t h, result = 0
    cdef int j, pending = 0
    try:
        with nogil:
            # one space between words: a space after a space is written but not kept
            for i in range(size):
                c = FOLD[src[i]]
                space = c == SPACE
                b[n] = c
                n += 1 - (space & after_space)
                after_space = space
            for i in range(SHINGLE):
                b[n + i] = SPACE
            # a feature starts at 0 and at each byte after a space (but the last byte's)
            starts[0] = 0
            count = 1
            for i in range(1, n):
                starts[count] = <uint32_t>i
                count += b[i - 1] == SPACE
            if count - 1 < n // 32:  # few spaces: a script written without them, every 4th byte
                count = 1
                i = 4
                while i < n:
                    starts[count] = <uint32_t>i
                    count += 1
                    i += 4
        if n <= 0 or count < min_features:
            return None
        with nogil:
            if count > max_features:  # a sample of about max_features, chosen by content
                below = <uint32_t>((max_features << 16) // count)
                m = 0
                for k in range(count):
                    starts[m] = starts[k]
                    m += _picked(b + starts[k], below)
                count = m
            for j in range(8):
                acc[j] = 0
            for j in range(64):
                ones[j] = 0
            for k in range(count):
                h = _mix(_shingle(b + starts[k]))
                for j in range(8):
                    acc[j] += (h >> j) & LANES
                pending += 1
                if pending == 255:  # before a byte lane can overflow
                    _flush(acc, ones)
                    pending = 0
            _flush(acc, ones)
            for j in range(64):
                if ones[j] * 2 > count:
                    result |= (<uint64_t>1) << j
        return result
    finally:
        free(b)
