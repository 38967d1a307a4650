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
    writer.join()
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
