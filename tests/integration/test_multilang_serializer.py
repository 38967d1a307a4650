"""The worker's multilang serializers (storm/multilang/MsgpackSerializer.java and
FastJsonSerializer.java) against the Python components' own.

tests/java/SerializerEcho.java drives an installed serializer class on its standard streams: every
shell message it reads is answered with a bolt message carrying the same tuple and a spout message
listing what ShellMsg got. The serializer a component uses writes and reads on this side (pystorm's
JSON one; owler.task.serializer's MessagePack one), so both directions are checked as a component
would see them. (Every topology test runs the default, MessagePack, inside Storm:
crawler-conf.yaml selects it; test_crawl_with_json_serializer runs a crawl on JSON.)
"""

from __future__ import annotations

import io
import re
import subprocess
import threading
from pathlib import Path

import msgpack
import pytest
from pystorm.serializers.json_serializer import JSONSerializer

from owler.run.runner import storm_home
from owler.task.serializer import OwlerMsgpackSerializer

ROOT = Path(__file__).resolve().parents[2]

TRICKY = [
    "",
    "plain ascii",
    'quote " backslash \\ slash / and </script>',
    "controls \x00\x01\x07\x1f tab\t lf\n cr\r bs\b ff\f del\x7f",
    "Zürich Привет 你好 😀 \u2028\u2029",
    "lone \ud800 and \udfff surrogates",
    "".join(map(chr, range(256))),  # a page's bytes mapped to latin-1 (owler.wire)
    ('<p class="x">' + "é\"\\\n" * 3 + "</p>\n") * 20000,  # page-sized, escapes everywhere
    "http://a.test/p\n" * 500,  # a page's outlinks: one long string (owler/outlinks.py)
    "😀é\t" * 400,  # long, with characters beyond the BMP (a surrogate pair in Java)
    0, -1, 2**62, -(2**63), 2**63 + 5, 2**80,
    1.5, -0.25, 1e300, 5e-324,
    True, False, None,
    [], {}, [[1, ["deep", {"k": [None]}]]],
    {"url": ["http://x/"], "metadata.with.dots": ["a", "b"], "": [""], "é": ["\ud83d"]},
]
#: what MessagePack carries as it is and JSON cannot: bytes (a page's, owler/wire.py)
BINARY = [b"", bytes(range(256)), b"<html>\xe9\x00" * 40000,
          {"content": b"\xff\xfe", "url": ["http://x/"]}]


def json_only(value) -> bool:
    """Lone surrogates (MessagePack's strings are UTF-8: they come back replaced, see below) and
    integers beyond 64 bits (MessagePack has none)."""
    text = repr(value)
    return "\\ud8" in text or "\\udf" in text or "\\ud83d" in text or value == 2**80


SERIALIZERS = {
    "json": ("eu.ows.owler.storm.FastJsonSerializer", TRICKY),
    "msgpack": ("eu.ows.owler.storm.MsgpackSerializer",
                [v for v in TRICKY if not json_only(v)] + BINARY),
}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory) -> str:
    """The installed serializer (lib-owler) and the echo harness, compiled against it."""
    home = storm_home(ROOT)
    classes = tmp_path_factory.mktemp("echo")
    cp = f"{home}/lib-owler/*:{home}/lib/*"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", cp,
                    str(ROOT / "tests" / "java" / "SerializerEcho.java")], check=True)
    return f"{classes}:{cp}"


def start_echo(classpath, kind):
    proc = subprocess.Popen(["java", "-cp", classpath, "SerializerEcho", SERIALIZERS[kind][0]],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if kind == "msgpack":
        return proc, OwlerMsgpackSerializer(proc.stdout, proc.stdin, threading.RLock(),
                                            threading.RLock())
    to_java = io.TextIOWrapper(proc.stdin, encoding="utf-8", write_through=True)
    from_java = io.TextIOWrapper(proc.stdout, encoding="utf-8")
    proc.wrappers = (to_java, from_java)  # pystorm wraps their buffers; a collected one closes them
    return proc, JSONSerializer(from_java, to_java, threading.RLock(), threading.RLock())


@pytest.fixture(scope="module", params=list(SERIALIZERS))
def echo(classpath, request):
    proc, ser = start_echo(classpath, request.param)
    yield proc, ser, request.param
    if proc.poll() is None:
        proc.stdin.close()
        proc.wait(10)


def roundtrip(echo, msg):
    ser = echo[1]
    ser.send_message(msg)
    bolt, seen, ids = ser.read_message(), ser.read_message(), ser.read_message()
    assert bolt["comp"] == "echo" and isinstance(ids, list) and isinstance(ids[0], int)
    return bolt, seen["id"]


def same(a, b):
    """Equal, and of the same JSON types all the way down (1 is not 1.0, nor True)."""
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_every_value_comes_back_unchanged(echo):
    for value in SERIALIZERS[echo[2]][1]:
        bolt, seen = roundtrip(echo, {"command": "emit", "tuple": [value, "after"], "stream": "s"})
        assert same(bolt["tuple"], [value, "after"]), repr(value)[:80]
        assert bolt["stream"] == "s" and seen["command"] == "emit"


def test_the_shell_message_fields_as_storm_reads_them(echo):
    _, seen = roundtrip(echo, {"command": "emit", "id": 77, "anchors": ["a1", "a2"], "task": 9,
                               "need_task_ids": False, "tuple": [1]})
    assert seen["id"] == 77 and seen["anchors"] == ["a1", "a2"] and seen["task"] == 9
    assert seen["need_task_ids"] is False and seen["stream"] == "default"
    _, seen = roundtrip(echo, {"command": "emit", "id": "sid", "anchors": "one", "tuple": []})
    assert seen["id"] == "sid" and seen["anchors"] == ["one"] and seen["need_task_ids"] is True
    assert seen["task"] == 0
    _, seen = roundtrip(echo, {"command": "log", "msg": "hé \"x\"\n", "level": 3})
    assert seen["msg"] == "hé \"x\"\n" and seen["level"] == "WARN"
    _, seen = roundtrip(echo, {"command": "metrics", "name": "m", "params": {"n": [1.5, "x"]}})
    assert seen["name"] == "m" and seen["params"] == {"n": [1.5, "x"]}


def test_a_json_message_spread_over_lines(classpath):
    proc, ser = start_echo(classpath, "json")
    proc.stdin.write(b'{\n  "command": "emit",\n  "tuple": [\n    "x", 1\n  ]\n}\nend\n')
    proc.stdin.flush()
    bolt = ser.read_message()
    ser.read_message(), ser.read_message()
    assert bolt["tuple"] == ["x", 1]
    proc.stdin.close()
    proc.wait(10)


@pytest.mark.parametrize("bad", ['{"command": "emit", "tuple": [1,]}', '{"tuple": [1]}',
                                 '["not", "an", "object"]', '{"command": "emit", "x": "\\q"}',
                                 '{"command": "emit"} trailing', '{"command": "emit", "x": "open'])
def test_bad_json_is_an_error_that_names_the_place(classpath, bad):
    out = subprocess.run(["java", "-cp", classpath, "SerializerEcho"],
                         input=(bad + "\nend\n").encode(), capture_output=True, timeout=60)
    assert out.returncode != 0
    err = out.stderr.decode()
    assert "IOException" in err and ("bad JSON" in err or "must be a JSON object" in err
                                     or "without a command" in err), err


def test_msgpack_sends_a_lone_surrogate_replaced_instead_of_dropping_the_message(classpath):
    """A str Python cannot encode as UTF-8 would make a strict packer raise, and pystorm drop the
    message (a tuple never acked): it goes, and the JVM reads what it cannot decode as U+FFFD."""
    proc, ser = start_echo(classpath, "msgpack")
    try:
        bolt, _ = roundtrip((proc, ser), {"command": "emit", "tuple": ["a\ud800b", {"k": "\udfff"}]})
        text, md = bolt["tuple"]
        assert text.startswith("a") and text.endswith("b") and "\ufffd" in text
        assert "\ufffd" in md["k"]
    finally:
        proc.stdin.close()
        proc.wait(10)


def test_msgpack_carries_a_message_larger_than_pystorms_limit(classpath):
    """warc2warc copies records up to 256 MiB; pystorm's unpacker stops at 100 MiB."""
    proc, ser = start_echo(classpath, "msgpack")
    try:
        record = bytes(range(256)) * (101 * 4096)  # 101 MiB
        bolt, _ = roundtrip((proc, ser), {"command": "emit", "tuple": ["u", record]})
        assert bolt["tuple"][1] == record
    finally:
        proc.stdin.close()
        proc.wait(30)


@pytest.mark.parametrize("bad,message", [
    (msgpack.packb(["not", "a", "map"]), "IOException: a multilang message must be a map"),
    (msgpack.packb({"tuple": [1]}), "IOException: a multilang message without a command"),
    (b"\xc1", "IOException: bad MessagePack from the subprocess at byte 0"),  # never used
    # Storm takes this one for the subprocess gone (ShellBolt dies and the worker restarts it)
    (msgpack.packb({"command": "emit", "tuple": [b"x" * 100]})[:-20],
     "NoOutputException: Pipe to subprocess seems to be broken! A message was cut short"),
])
def test_bad_msgpack_is_an_error(classpath, bad, message):
    out = subprocess.run(["java", "-cp", classpath, "SerializerEcho",
                          SERIALIZERS["msgpack"][0]], input=bad, capture_output=True, timeout=60)
    err = out.stderr.decode()
    assert message in err, err[-2000:]
    assert out.returncode != 0 or message.startswith("NoOutputException")
