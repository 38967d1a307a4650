"""The worker's multilang serializer (storm/multilang/FastJsonSerializer.java) against pystorm.

tests/java/SerializerEcho.java drives the installed serializer class on its standard streams: every
shell message it reads is answered with a bolt message carrying the same tuple and a spout message
listing what ShellMsg got. pystorm's own JSON serializer writes and reads on this side, so both
directions are checked byte for byte as a component would see them. (Every topology test runs the
same class inside Storm: crawler-conf.yaml selects it.)
"""

from __future__ import annotations

import io
import subprocess
import threading
from pathlib import Path

import pytest
from pystorm.serializers.json_serializer import JSONSerializer

from owler.run.runner import storm_home

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
    0, -1, 2**62, -(2**63), 2**63 + 5, 2**80,
    1.5, -0.25, 1e300, 5e-324,
    True, False, None,
    [], {}, [[1, ["deep", {"k": [None]}]]],
    {"url": ["http://x/"], "metadata.with.dots": ["a", "b"], "": [""], "é": ["\ud83d"]},
]


@pytest.fixture(scope="module")
def classpath(tmp_path_factory) -> str:
    """The installed serializer (lib-owler) and the echo harness, compiled against it."""
    home = storm_home(ROOT)
    classes = tmp_path_factory.mktemp("echo")
    cp = f"{home}/lib-owler/*:{home}/lib/*"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", cp,
                    str(ROOT / "tests" / "java" / "SerializerEcho.java")], check=True)
    return f"{classes}:{cp}"


@pytest.fixture(scope="module")
def echo(classpath):
    proc = subprocess.Popen(["java", "-cp", classpath, "SerializerEcho"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    to_java = io.TextIOWrapper(proc.stdin, encoding="utf-8", write_through=True)
    from_java = io.TextIOWrapper(proc.stdout, encoding="utf-8")
    yield proc, JSONSerializer(from_java, to_java, threading.RLock(), threading.RLock())
    if proc.poll() is None:
        proc.stdin.close()
        proc.wait(10)


def roundtrip(echo, msg):
    _, ser = echo
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


@pytest.mark.parametrize("value", TRICKY, ids=lambda v: type(v).__name__ + repr(v)[:24])
def test_every_value_comes_back_unchanged(echo, value):
    bolt, seen = roundtrip(echo, {"command": "emit", "tuple": [value, "after"], "stream": "s"})
    assert same(bolt["tuple"], [value, "after"])
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


def test_a_message_spread_over_lines(echo):
    proc, ser = echo
    proc.stdin.write(b'{\n  "command": "emit",\n  "tuple": [\n    "x", 1\n  ]\n}\nend\n')
    proc.stdin.flush()
    bolt = ser.read_message()
    ser.read_message(), ser.read_message()
    assert bolt["tuple"] == ["x", 1]


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
