"""The Python end of the MessagePack multilang protocol: CPU to move a message through Storm's pipe.

Every shell component reads each tuple, ack and heartbeat through
:class:`owler.task.serializer.OwlerMsgpackSerializer`; a fetched page crosses it twice (out of
the fetcher, into the parser). The peer is pystorm's own
reading loop (``os.read(fd, 1 MiB)`` per read) on a pipe of the default size (64 KiB), as pystorm
leaves it; then ours on the default pipe (the read loop alone), and ours as shipped (the pipe
widened to 1 MiB, :func:`owler.task.serializer.widen_pipe`). All in the same run, alternated.

Method: a forked process writes ``--count`` copies of one packed message into an OS pipe (as the
worker JVM does) while this process reads them through the serializer; the reader's CPU and the
writer's (its rusage) per message, best of ``--rounds`` rounds. Message sizes: a status tuple
(~0.4 KB), a small page (~3 KB), a farm page (~60 KB).

Usage: .venv/bin/python bench/bench_multilang.py [--count 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import msgpack  # noqa: E402
from pystorm.exceptions import StormWentAwayError  # noqa: E402

from owler.task.serializer import NO_LIMIT, OwlerMsgpackSerializer  # noqa: E402

DEFAULT_PIPE = 1 << 16


class OursDefaultPipe(OwlerMsgpackSerializer):
    """Ours with the pipe left at Linux's default size."""

    def __init__(self, *args):
        super().__init__(*args)
        fcntl.fcntl(self.input_stream.fileno(), fcntl.F_SETPIPE_SZ, DEFAULT_PIPE)


class PystormRead(OursDefaultPipe):
    """pystorm 5's reading loop (a new ``os.read`` of CHUNK_SIZE bytes per read) on the default
    pipe, ours otherwise."""

    def _messages_generator(self):
        unpacker = msgpack.Unpacker(max_buffer_size=NO_LIMIT, raw=False, unicode_errors="replace")
        while True:
            with self._reader_lock:
                chunk = os.read(self.input_stream.fileno(), self.CHUNK_SIZE)
            if not chunk:
                raise StormWentAwayError()
            unpacker.feed(chunk)
            yield from unpacker


def message(size: int) -> bytes:
    body = (b"<p>some text of a page</p>" * (size // 26 + 1))[:size]
    return msgpack.packb({"command": "emit", "tuple": ["https://www.example.com/a/page.html", body,
                                                      {"depth": ["1"]}], "anchors": ["123"]},
                         use_bin_type=True)


def cpu_per_message(cls, packed: bytes, count: int) -> tuple[float, float]:
    """(reader's, writer's) CPU µs per message."""
    r, w = os.pipe()
    rf = os.fdopen(r, "rb", 0)
    ser = cls(rf, open(os.devnull, "wb"), threading.RLock(), threading.RLock())  # sizes the pipe
    pid = os.fork()
    if pid == 0:  # the writer
        os.close(r)
        for _ in range(count):
            os.write(w, packed)
        os._exit(0)
    os.close(w)
    t0 = time.process_time()
    for _ in range(count):
        ser.read_message()
    cpu = time.process_time() - t0
    _, _, usage = os.wait4(pid, 0)
    rf.close()
    ser.output_stream.close()
    return cpu / count * 1e6, (usage.ru_utime + usage.ru_stime) / count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print("| message | pystorm, 64 KiB pipe: reader / writer µs | ours, 64 KiB pipe | "
          "ours, 1 MiB pipe (shipped) | shipped ÷ pystorm, reader / writer |")
    print("|---|---:|---:|---:|---:|")
    readers = (PystormRead, OursDefaultPipe, OwlerMsgpackSerializer)
    for size in (300, 3000, 60000):
        packed = message(size)
        best = {cls: [float("inf"), float("inf")] for cls in readers}
        for _ in range(args.rounds):
            for cls in readers:
                rd, wr = cpu_per_message(cls, packed, args.count)
                best[cls] = [min(best[cls][0], rd), min(best[cls][1], wr)]
        (pr, pw), (dr, dw), (sr, sw) = (best[cls] for cls in readers)
        print(f"| {len(packed):,} bytes | {pr:.1f} / {pw:.1f} | {dr:.1f} / {dw:.1f} | "
              f"{sr:.1f} / {sw:.1f} | {sr / pr:.2f}× / {sw / pw:.2f}× |")

if __name__ == "__main__":
    main()
