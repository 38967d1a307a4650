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
230 (the CPU per message moved less than the bench's noise: docs/benchmarks-history.md, issue 20,
fourth session).

And input is read into one reusable buffer (``os.readv``), where pystorm's ``os.read(fd, 1 MiB)``
allocates a 1 MiB object for every read, whatever arrives: a little less CPU per message
(``bench/bench_multilang.py``: 0.58-0.98x for 3 KB, 0.67-1.02x for 60 KB; BENCHMARKS.md).

**Writes are coalesced per input.** pystorm writes and flushes every message: a bolt that emits
a page's status, then its outlinks, then acks the page makes three writes, and the JVM's reader
thread for the bolt wakes up three times. Here the emits, acks and fails of the thread that reads
from the JVM wait in :attr:`OwlerMsgpackSerializer._pending` and go out in one write when that
thread takes its next message, or is about to read the pipe (where it may block), or when they
reach :data:`COALESCE_MAX` bytes. Any other message (a sync, a log line, an error) and any write
from another thread (the fetch engine's, the WARC archiver's) goes out at once, with what waits
before it: the pipe carries the messages in the order they were sent, and nothing waits while
the component waits for the JVM. An ack, sent once its effect is durable, goes out when the
component is done with the input that caused it (docs/benchmarks-history.md, issue 20, fifteenth
session).

:func:`register` puts this class under ``msgpack`` in pystorm's table of serializers;
``owler.task.component`` calls it on import, before any component is built.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import stat
import threading

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
#: the commands the reading thread holds back until it takes its next message
COALESCED = frozenset(("emit", "ack", "fail"))
#: the bytes held back at most: a write goes out when they reach it
COALESCE_MAX = 1 << 18

log = logging.getLogger(__name__)


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
        #: packed messages of the reading thread not yet written, and their bytes
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        #: the thread that last took a message from the JVM (None: none has yet)
        self._reader: int | None = None
        widen_pipe(self.input_stream)
        widen_pipe(self.output_stream)

    def send_message(self, msg_dict):
        with self._writer_lock:
            try:
                data = self.serialize_dict(msg_dict)
            except Exception:  # as pystorm does: the message cannot be sent, the component goes on
                log.exception("Failed to send message: %r", msg_dict)
                return
            self._pending.append(data)
            self._pending_bytes += len(data)
            if (threading.get_ident() != self._reader or msg_dict.get("command") not in COALESCED
                    or self._pending_bytes >= COALESCE_MAX):
                self._write_pending()

    def flush_pending(self) -> None:
        """Write what waits in :attr:`_pending` (nothing when nothing does)."""
        if self._pending:
            with self._writer_lock:
                self._write_pending()

    def _write_pending(self) -> None:
        """Write what waits in one write; StormWentAwayError when the pipe broke."""
        pending = self._pending
        if not pending:  # another thread wrote it meanwhile
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self._pending_bytes = 0
        try:
            self.output_stream.write(data)
            self.output_stream.flush()
        except (IOError, ValueError):  # a broken pipe, or the stream closed
            raise StormWentAwayError() from None

    def _messages_generator(self):
        # text the JVM could not encode comes as "?" already; anything else malformed is replaced,
        # as the JVM's unpacker does
        unpacker = msgpack.Unpacker(max_buffer_size=NO_LIMIT, raw=False, unicode_errors="replace")
        buf = bytearray(self.CHUNK_SIZE)
        view = memoryview(buf)
        while True:
            self.flush_pending()  # the read may block: nothing may wait while it does
            with self._reader_lock:
                try:  # as much as is there (a read of n bytes would wait for all n)
                    n = os.readv(self.input_stream.fileno(), [buf])
                    chunk = view[:n]
                except io.UnsupportedOperation:
                    chunk = self.input_stream.read(self.CHUNK_SIZE)
            if not chunk:
                raise StormWentAwayError()
            unpacker.feed(chunk)  # copied into the unpacker's own buffer: buf may be reused
            for msg in unpacker:
                self.flush_pending()  # what the previous message caused: before the next one
                self._reader = threading.get_ident()
                yield msg

    def serialize_dict(self, msg_dict):
        return self._packer.pack(msg_dict)


def register() -> None:
    pystorm_component._SERIALIZERS["msgpack"] = OwlerMsgpackSerializer
