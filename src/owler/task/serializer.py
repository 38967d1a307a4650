"""The Python end of the MessagePack multilang protocol (``streamparse_run -s msgpack``; the JVM end
is storm/multilang/MsgpackSerializer.java).

pystorm's own MessagePack serializer is used with two changes that matter for a crawler:

- **No size limit on a message.** pystorm's unpacker keeps msgpack's default of 100 MiB waiting
  to be unpacked, and a larger message (warc2warc copies records of up to
  ``warc2warc.max.record.size``, 256 MiB) would stop the component. Here the limit is msgpack's
  largest (4 GiB), as with JSON, which has none.
- **A string Python cannot encode as UTF-8 is still sent.** A lone surrogate (``\\ud800``; text
  decoded with ``surrogateescape`` somewhere upstream) makes msgpack's strict encoder raise, and
  pystorm logs and drops a message it cannot serialize: the tuple would never be acked. Such
  strings are packed with ``surrogatepass``; the JVM reads the bytes it cannot decode as U+FFFD.

For speed, the pipes to the JVM are widened to :data:`PIPE_SIZE` (1 MiB, Linux's default most
for an unprivileged process) when the component starts (:func:`widen_pipe`): through the
default 64 KiB pipe, 4,000 pages of 60 KB switched the writing process out 3,700 times against
230 (the CPU per message moved less than the bench's noise: BENCHMARKS.md, issue 20, fourth
session).

And input is read into one reusable buffer (``os.readv``), where pystorm's ``os.read(fd, 1 MiB)``
allocates a 1 MiB object for every read, whatever arrives: a little less CPU per message
(``bench/bench_multilang.py``: 0.58-0.98x for 3 KB, 0.67-1.02x for 60 KB; BENCHMARKS.md).

:func:`register` puts this class under ``msgpack`` in pystorm's table of serializers;
``owler.task.component`` calls it on import, before any component is built.
"""

from __future__ import annotations

import fcntl
import io
import os
import stat

import msgpack
from pystorm import component as pystorm_component
from pystorm.exceptions import StormWentAwayError
from pystorm.serializers.msgpack_serializer import MsgpackSerializer

#: msgpack's largest buffer (0 means 2**32 - 1)
NO_LIMIT = 0
#: the size the pipes to the JVM are given (/proc/sys/fs/pipe-max-size is 1 MiB by default)
PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", None)


def widen_pipe(stream, size: int = PIPE_SIZE) -> int | None:
    """Give the pipe under ``stream`` a buffer of ``size`` bytes; its size after, or None when
    ``stream`` is no pipe or the system refused (a lower ``pipe-max-size``, another OS): the
    component then works with the pipe as it is."""
    if _F_SETPIPE_SZ is None:
        return None
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        if fcntl.fcntl(fd, _F_GETPIPE_SZ) < size:
            try:
                fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
            except PermissionError:  # above pipe-max-size: as wide as allowed
                fcntl.fcntl(fd, _F_SETPIPE_SZ, min(size, _pipe_max_size()))
        return fcntl.fcntl(fd, _F_GETPIPE_SZ)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def _pipe_max_size() -> int:
    with open("/proc/sys/fs/pipe-max-size", encoding="ascii") as fh:
        return int(fh.read())


class OwlerMsgpackSerializer(MsgpackSerializer):
    def __init__(self, input_stream, output_stream, reader_lock, writer_lock):
        super().__init__(input_stream, output_stream, reader_lock, writer_lock)
        self._packer = msgpack.Packer(use_bin_type=True, unicode_errors="surrogatepass")
        widen_pipe(self.input_stream)
        widen_pipe(self.output_stream)

    def _messages_generator(self):
        # text the JVM could not encode comes as "?" already; anything else malformed is replaced,
        # as the JVM's unpacker does
        unpacker = msgpack.Unpacker(max_buffer_size=NO_LIMIT, raw=False, unicode_errors="replace")
        buf = bytearray(self.CHUNK_SIZE)
        view = memoryview(buf)
        while True:
            with self._reader_lock:
                try:  # as much as is there (a read of n bytes would wait for all n)
                    n = os.readv(self.input_stream.fileno(), [buf])
                    chunk = view[:n]
                except io.UnsupportedOperation:
                    chunk = self.input_stream.read(self.CHUNK_SIZE)
            if not chunk:
                raise StormWentAwayError()
            unpacker.feed(chunk)  # copied into the unpacker's own buffer: buf may be reused
            yield from unpacker

    def serialize_dict(self, msg_dict):
        return self._packer.pack(msg_dict)


def register() -> None:
    pystorm_component._SERIALIZERS["msgpack"] = OwlerMsgpackSerializer
