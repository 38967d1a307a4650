"""Drive a spout or bolt as a real multilang subprocess, speaking Storm's multilang protocol to it.

This is what Storm's ShellBolt/ShellSpout do: handshake (conf, context, pidDir) → pid; then for a
bolt, tuples in and emit/ack/fail/log/sync out; for a spout, next/ack/fail commands answered by
emits and ``sync``. Used by the component tests so every component is exercised through the very
protocol Storm uses, without the JVM.

Either serializer the worker may speak (``streamparse_run -s <name>``):

- ``json``: pystorm's JSON one, each message a JSON text followed by a line ``end``;
- ``msgpack``: the default of a crawl (resources/crawler-conf.yaml), the component's
  :class:`owler.task.serializer.OwlerMsgpackSerializer`: MessagePack maps back to back, nothing
  between them; bytes are ``bin`` both ways (a fetched page's content comes as ``bytes``), text
  is UTF-8 ``str``. The component coalesces its writes, so one read may bring several messages,
  or part of one: an unpacker fed with what arrives splits them.

:data:`default_serializer` is what a :class:`ShellComponent` speaks unless told;
tests/component/conftest.py runs every component test once with each.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import msgpack

from owler import wire

ROOT = Path(__file__).resolve().parents[2]
SERIALIZERS = ("json", "msgpack")
#: seconds a read waits before the component is taken for hung: a guard, not a speed figure
HANG = 60.0
#: what a ShellComponent speaks when it is not told (set per test by tests/component/conftest.py)
default_serializer = "json"


class ShellComponent:
    def __init__(self, target: str, conf: dict, tmp: Path, component: str = "comp", task: int = 1,
                 sources: dict | None = None, tasks: list[int] | None = None,
                 serializer: str | None = None):
        self.serializer = serializer or default_serializer
        assert self.serializer in SERIALIZERS, self.serializer
        self.tmp = Path(tmp)
        piddir = self.tmp / "pids"
        piddir.mkdir(parents=True, exist_ok=True)
        exe = Path(sys.executable).parent / "streamparse_run"
        env = {**os.environ, "OWLER_HOME": str(ROOT)}
        self.proc = subprocess.Popen([str(exe), "-s", self.serializer, target], cwd=ROOT / "src",
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     bufsize=0)
        self._buf = b""
        # MessagePack: what the JVM's serializer writes (bytes as bin, text as UTF-8 str), and an
        # unpacker that splits what arrives into messages (text the component could not encode
        # as UTF-8 is sent with surrogatepass: read back the same way, as the JSON helper would)
        self._packer = msgpack.Packer(use_bin_type=True)
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=0,
                                          unicode_errors="surrogatepass")
        self._ready: deque = deque()  # messages unpacked, not yet read
        context = {"taskid": task, "componentid": component,
                   "task->component": {str(t): component for t in (tasks or [task])},
                   "source->stream->fields": sources or {}}
        self.send({"conf": conf, "context": context, "pidDir": str(piddir)})
        msg = self.read(timeout=30)
        assert "pid" in msg, msg
        self.pid = msg["pid"]
        self.logs: list[str] = []

    def content(self, data: bytes) -> str | bytes:
        """A page's bytes as this component's serializer carries them in a tuple: ``bytes``
        under MessagePack (as a crawl's fetcher emits them), text under JSON
        (:func:`owler.wire.encode_content`)."""
        return wire.encode_content(data, binary=self.serializer == "msgpack")

    def send(self, obj: dict) -> None:
        if self.serializer == "msgpack":
            self.proc.stdin.write(self._packer.pack(obj))
        else:
            self.proc.stdin.write(json.dumps(obj).encode() + b"\nend\n")
        self.proc.stdin.flush()

    def _next_message(self) -> dict | None:
        """A whole message from what was read so far, or None."""
        if self.serializer == "msgpack":
            return self._ready.popleft() if self._ready else None
        idx = self._buf.find(b"\nend\n")
        if idx < 0:
            return None
        msg, self._buf = self._buf[:idx], self._buf[idx + 5:]
        return json.loads(msg)

    def _take(self, chunk: bytes) -> None:
        if self.serializer == "msgpack":
            self._unpacker.feed(chunk)
            self._ready.extend(self._unpacker)  # every whole message; a partial one waits
        else:
            self._buf += chunk

    def read(self, timeout: float = HANG) -> dict:
        """One message (JSON: the text before a line ``end``; MessagePack: the next map)."""
        deadline = time.time() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            msg = self._next_message()
            if msg is not None:
                return msg
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
            if not r:
                raise TimeoutError(f"no message from the component within {timeout} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError(f"component exited with {self.proc.wait()}")
            self._take(chunk)

    def read_until(self, pred, timeout: float = HANG, tick_every: float | None = None
                   ) -> list[dict]:
        """Messages up to and including the first one matching ``pred`` (logs kept aside). With
        ``tick_every``, a tick every so many seconds meanwhile, as Storm sends them: a bolt that
        commits on its interval is not left waiting for one tick a test sent too early for it."""
        out = []
        deadline = time.time() + timeout
        next_tick = time.time() if tick_every else deadline
        while True:
            if tick_every and time.time() >= next_tick:
                self.tick()
                next_tick = time.time() + tick_every
            try:
                msg = self.read(max(0.01, min(next_tick, deadline) - time.time()))
            except TimeoutError:
                if time.time() >= deadline:
                    raise
                continue
            if msg.get("command") == "log":
                self.logs.append(msg.get("msg", ""))
                continue
            out.append(msg)
            if pred(msg):
                return out

    # -- bolts --------------------------------------------------------------------------------
    def process(self, values: list, tid: str = "t1", stream: str = "default", comp: str = "src",
                task: int = 9) -> None:
        self.send({"id": tid, "comp": comp, "stream": stream, "task": task, "tuple": values})

    def tick(self) -> None:
        self.send({"id": "tick", "comp": "__system", "stream": "__tick", "task": -1, "tuple": [1]})

    def until_acked(self, tid: str, timeout: float = HANG) -> list[dict]:
        """Messages up to the ack or fail of ``tid``."""
        return self.read_until(lambda m: m.get("command") in ("ack", "fail") and m.get("id") == tid,
                               timeout)

    # -- spouts -------------------------------------------------------------------------------
    def next(self, timeout: float = HANG) -> list[dict]:
        self.send({"command": "next"})
        return self.read_until(lambda m: m.get("command") == "sync", timeout)

    def spout_ack(self, tid) -> None:
        self.send({"command": "ack", "id": tid})
        self.read_until(lambda m: m.get("command") == "sync")

    def spout_fail(self, tid) -> None:
        self.send({"command": "fail", "id": tid})
        self.read_until(lambda m: m.get("command") == "sync")

    def close(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
