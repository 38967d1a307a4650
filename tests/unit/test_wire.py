"""How pages travel between components (owler/wire.py) under each multilang serializer, and which
serializer the Python side speaks (owler.conf.multilang_serializer, owler.task.serializer)."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest
from pystorm.serializers.json_serializer import JSONSerializer

from owler import wire
from owler.conf import ConfError, multilang_serializer
from owler.task.component import is_binary
from owler.task.serializer import OwlerMsgpackSerializer

ASCII = b"<html><body>" + b"plain text " * 500 + b"</body></html>"
UTF8 = ("<p>Zürich, Köln, Œuvre – “quoted” 😀</p>" * 50).encode("utf-8")  # many high bytes
BINARY = bytes(range(256)) * 20


@pytest.mark.parametrize("content", [b"", ASCII, UTF8, BINARY])
def test_content_comes_back_as_it_went_under_both_protocols(content):
    text = wire.encode_content(content)
    assert isinstance(text, str) and wire.decode_content(text) == content
    raw = wire.encode_content(content, binary=True)
    assert isinstance(raw, bytes) and raw == content and wire.decode_content(raw) == content
    assert wire.decode_content(bytearray(content)) == content


def test_text_form_picks_latin1_for_ascii_and_base64_for_binary():
    assert wire.encode_content(ASCII)[0] == wire.LATIN1
    assert wire.encode_content(BINARY)[0] == wire.BASE64
    with pytest.raises(ValueError):
        wire.decode_content("Xnot an encoding")


@pytest.mark.parametrize("cls,speaks", [
    ("eu.ows.owler.storm.MsgpackSerializer", "msgpack"),
    ("eu.ows.owler.storm.FastJsonSerializer", "json"),
    ("org.apache.storm.multilang.JsonSerializer", "json"),
])
def test_the_python_side_speaks_what_the_jvm_side_speaks(cls, speaks):
    assert multilang_serializer({"topology.multilang.serializer": cls}) == speaks


def test_an_unknown_jvm_serializer_is_a_clear_error():
    with pytest.raises(ConfError, match="not a serializer the Python components can speak"):
        multilang_serializer({"topology.multilang.serializer": "com.example.Thrift"})


def pipe_pair():
    r, w = os.pipe()
    return os.fdopen(r, "rb", 0), os.fdopen(w, "wb", 0)


def test_only_the_msgpack_serializer_carries_bytes():
    r, w = pipe_pair()
    with r, w:
        lock = threading.RLock()
        assert is_binary(OwlerMsgpackSerializer(r, w, lock, lock))
        assert not is_binary(JSONSerializer(io.TextIOWrapper(r), io.TextIOWrapper(w), lock, lock))
        assert not is_binary(None)


def round_trip(msgs: list) -> list:
    """``msgs`` sent by a thread through a pipe and read back by one serializer."""
    r, w = pipe_pair()
    ser = OwlerMsgpackSerializer(r, w, threading.RLock(), threading.RLock())
    writer = threading.Thread(target=lambda: [ser.send_message(m) for m in msgs])
    writer.start()
    got = [ser.read_message() for _ in msgs]
    joined(writer)
    r.close()
    w.close()
    return got


def test_msgpack_messages_are_framed_across_reads():
    """Messages written back to back (and one larger than a read) come out whole and in order."""
    big = {"tuple": ["u", BINARY * 300]}  # ~1.5 MB: more than one read of 1 MiB
    msgs = [{"command": "sync"}, big, {"tuple": ["a\ud800", 1, 2.5, None, True]}]
    got = round_trip(msgs)
    assert got[:2] == msgs[:2]
    text, *rest = got[2]["tuple"]
    assert rest == [1, 2.5, None, True]
    assert text.startswith("a") and "\ufffd" in text  # sent, not dropped; read back replaced


def test_msgpack_reads_reuse_one_buffer_without_mixing_messages():
    """Hundreds of messages of every size through one reused read buffer: each comes out as it
    went, though a later read overwrites the buffer an earlier message was read into."""
    import random

    rnd = random.Random(5)
    msgs = [{"tuple": [f"u{i}", rnd.randbytes(rnd.choice((10, 5000, 70000, 300000)))]}
            for i in range(300)]
    assert round_trip(msgs) == msgs


def test_the_pipes_to_the_jvm_are_widened_and_other_streams_left_alone(tmp_path):
    import fcntl

    from owler.task.serializer import PIPE_SIZE, widen_pipe

    limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    r, w = pipe_pair()
    with r, w:
        assert fcntl.fcntl(r.fileno(), fcntl.F_GETPIPE_SZ) < PIPE_SIZE  # the default 64 KiB
        OwlerMsgpackSerializer(r, w, threading.RLock(), threading.RLock())
        size = fcntl.fcntl(r.fileno(), fcntl.F_GETPIPE_SZ)
        assert size == fcntl.fcntl(w.fileno(), fcntl.F_GETPIPE_SZ)  # one pipe, both ends
        assert min(PIPE_SIZE, limit) <= size <= PIPE_SIZE  # root may pass pipe-max-size
    with open(tmp_path / "f", "wb") as fh:
        assert widen_pipe(fh) is None  # a file: nothing to widen, nothing raised
    assert widen_pipe(io.BytesIO()) is None


# --- writes coalesced per input (owler.task.serializer.OwlerMsgpackSerializer.send_message) ---

class Recorder:
    """An output stream that keeps every write apart."""

    def __init__(self, fail: bool = False):
        self.writes: list[bytes] = []
        self.fail = fail

    def write(self, data) -> None:
        if self.fail:
            raise BrokenPipeError(32, "Broken pipe")
        self.writes.append(bytes(data))

    def flush(self) -> None:
        pass


def unpacked(data: bytes) -> list:
    import msgpack

    return list(msgpack.Unpacker(io.BytesIO(data), raw=False))


@pytest.fixture
def wired():
    """A serializer reading from a pipe (its write end: the JVM's) and writing to a Recorder."""
    r, w = pipe_pair()
    out = Recorder()
    ser = OwlerMsgpackSerializer(r, out, threading.RLock(), threading.RLock())
    yield ser, w, out
    r.close()
    w.close()


def feed(w, *msgs) -> None:
    import msgpack

    w.write(b"".join(msgpack.packb(m, use_bin_type=True) for m in msgs))


#: seconds after which something awaited counts as never happening (a hang), not a speed bound
HANG = 60.0


def joined(thread: threading.Thread) -> None:
    thread.join(HANG)
    assert not thread.is_alive(), f"{thread.name} did not end within {HANG:g} s (hang?)"


class WatchedPipe:
    """The read end of a pipe that tells when the serializer takes its descriptor to read
    (``reading``: set by ``fileno()``, called just before each ``os.readv``)."""

    def __init__(self, fh):
        self.fh = fh
        self.reading = threading.Event()

    def fileno(self):
        self.reading.set()
        return self.fh.fileno()

    def __getattr__(self, name):
        return getattr(self.fh, name)


EMIT_S = {"command": "emit", "stream": "status", "tuple": ["u", "FETCHED"]}
EMIT_O = {"command": "emit", "stream": "outlinks", "tuple": ["u", ["a", "b"]]}


def test_the_reading_threads_emits_and_ack_go_out_in_one_write_before_it_blocks_in_a_read():
    r, w = pipe_pair()
    watched, out = WatchedPipe(r), Recorder()
    with r, w:
        ser = OwlerMsgpackSerializer(watched, out, threading.RLock(), threading.RLock())
        feed(w, {"id": "t1", "tuple": ["u"]})
        assert ser.read_message()["id"] == "t1"
        for msg in (EMIT_S, EMIT_O, {"command": "ack", "id": "t1"}):
            ser.send_message(msg)
        assert out.writes == []  # held back while the thread works on t1
        watched.reading.clear()
        got = []
        reader = threading.Thread(target=lambda: got.append(ser.read_message()))
        reader.start()  # flushes, then blocks in a read: nothing is on the pipe
        assert watched.reading.wait(HANG), "the reader never went to read"
        # by the read, what t1 caused is out, in one write, and nothing else
        assert [unpacked(x) for x in out.writes] == [[EMIT_S, EMIT_O, {"command": "ack", "id": "t1"}]]
        assert got == []  # waiting for the JVM, with nothing held back
        feed(w, {"id": "t2", "tuple": ["v"]})
        joined(reader)
        assert got[0]["id"] == "t2" and len(out.writes) == 1


def test_what_an_input_caused_goes_out_when_the_next_is_taken_and_before_any_other_command(wired):
    ser, w, out = wired
    feed(w, {"id": "t1"}, {"id": "t2"})  # one read brings both
    assert ser.read_message()["id"] == "t1"
    ser.send_message(EMIT_S)
    ser.send_message({"command": "ack", "id": "t1"})
    assert out.writes == []
    assert ser.read_message()["id"] == "t2"  # from the unpacker, no read: t1's writes go first
    assert [unpacked(x) for x in out.writes] == [[EMIT_S, {"command": "ack", "id": "t1"}]]
    ser.send_message({"command": "fail", "id": "t2"})
    assert len(out.writes) == 1
    ser.send_message({"command": "sync"})  # not held back: sends what waits before it
    assert unpacked(out.writes[1]) == [{"command": "fail", "id": "t2"}, {"command": "sync"}]
    ser.send_message({"command": "log", "msg": "m", "level": 2})  # nothing waits: alone
    assert len(out.writes) == 3 and unpacked(out.writes[2])[0]["command"] == "log"


def test_another_threads_write_goes_out_at_once_after_what_waits(wired):
    ser, w, out = wired
    feed(w, {"id": "t1"})
    ser.read_message()
    ser.send_message(EMIT_S)
    other = threading.Thread(target=ser.send_message, args=({"command": "ack", "id": "t0"},))
    other.start()
    joined(other)
    assert [unpacked(x) for x in out.writes] == [[EMIT_S, {"command": "ack", "id": "t0"}]]
    # before any read, no thread holds writes back
    r, w2 = pipe_pair()
    with r, w2:
        fresh = OwlerMsgpackSerializer(r, Recorder(), threading.RLock(), threading.RLock())
        fresh.send_message(EMIT_S)
        assert len(fresh.output_stream.writes) == 1


def test_what_waits_is_written_when_it_reaches_the_bound(wired, monkeypatch):
    from owler.task import serializer as S

    ser, w, out = wired
    feed(w, {"id": "t1"})
    ser.read_message()
    one = len(ser.serialize_dict(EMIT_O))
    monkeypatch.setattr(S, "COALESCE_MAX", 3 * one)
    ser.send_message(EMIT_O)
    ser.send_message(EMIT_O)
    assert out.writes == []
    ser.send_message(EMIT_O)  # three: the bound
    assert [unpacked(x) for x in out.writes] == [[EMIT_O] * 3]
    ser.send_message(EMIT_O)
    assert len(out.writes) == 1


def test_a_broken_pipe_is_storm_gone_and_an_unpackable_message_is_logged(wired, caplog):
    from pystorm.exceptions import StormWentAwayError

    ser, w, out = wired
    ser.send_message({"command": "emit", "tuple": [object()]})  # msgpack cannot pack it
    assert out.writes == [] and "Failed to send message" in caplog.text
    ser.output_stream = Recorder(fail=True)
    with pytest.raises(StormWentAwayError):
        ser.send_message({"command": "sync"})
