"""The Python end of the MessagePack multilang protocol: CPU to read a message from Storm's pipe.

Every shell component reads each tuple, ack and heartbeat through
:class:`owler.task.serializer.OwlerMsgpackSerializer`; a fetched page crosses it twice (into the
WARC writer, into the parser). The peer is pystorm's own reading loop (``os.read(fd, 1 MiB)``
per read, the rest as ours), run in the same process on the same pipe and messages.

Method: a forked process writes ``--count`` copies of one packed message into an OS pipe (as the
worker JVM does) while this process reads them through the serializer; the reader's CPU per
message, best of ``--rounds`` rounds, the two readers alternated. Message sizes: a status tuple (~0.4 KB), a small
page (~3 KB), a farm page (~60 KB).

Usage: .venv/bin/python bench/bench_multilang.py [--count 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
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


class PystormRead(OwlerMsgpackSerializer):
    """pystorm 5's reading loop (a new ``os.read`` of CHUNK_SIZE bytes per read), ours otherwise."""

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


def cpu_per_message(cls, packed: bytes, count: int) -> float:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer
        os.close(r)
        for _ in range(count):
            os.write(w, packed)
        os._exit(0)
    os.close(w)
    rf = os.fdopen(r, "rb", 0)
    ser = cls(rf, open(os.devnull, "wb"), threading.RLock(), threading.RLock())
    t0 = time.process_time()
    for _ in range(count):
        ser.read_message()
    cpu = time.process_time() - t0
    os.waitpid(pid, 0)
    rf.close()
    ser.output_stream.close()
    return cpu / count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print("| message | pystorm's read, µs CPU | ours, µs CPU | ours ÷ pystorm |")
    print("|---|---:|---:|---:|")
    for size in (300, 3000, 60000):
        packed = message(size)
        best = {PystormRead: float("inf"), OwlerMsgpackSerializer: float("inf")}
        for _ in range(args.rounds):
            for cls in best:
                best[cls] = min(best[cls], cpu_per_message(cls, packed, args.count))
        peer, ours = best[PystormRead], best[OwlerMsgpackSerializer]
        print(f"| {len(packed):,} bytes | {peer:.1f} | {ours:.1f} | {ours / peer:.2f}× |")


if __name__ == "__main__":
    main()
