"""Rebuilds the URLFrontier API's file descriptor (``urlfrontier.proto`` as protoc compiled it) from
the ``urlfrontier-API`` sources jar published on Maven Central, which carries no ``.proto`` file.

protoc's Java output keeps the serialized ``FileDescriptorProto`` in ``Urlfrontier.java`` as Java
string literals (``descriptorData``), one character per byte. This reads them back, checks that
they parse as the ``urlfrontier`` package with its ``URLFrontier`` service, and writes the bytes
to ``OUT``; :mod:`owler.frontier.urlfrontier_api` builds the Python messages and the gRPC stubs from them.

Usage: python extract_descriptor.py SOURCES_JAR OUT
"""

from __future__ import annotations

import re
import sys
import zipfile

from google.protobuf import descriptor_pb2

SOURCE = "crawlercommons/urlfrontier/Urlfrontier.java"
_ARRAY = re.compile(r"java\.lang\.String\[\]\s+descriptorData\s*=\s*\{(.*?)\};", re.S)
_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_ESCAPE = re.compile(r"\\(u+[0-9a-fA-F]{4}|[0-7]{1,3}|.)")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "s": " ", '"': '"', "'": "'",
           "\\": "\\"}


def _unescape(match: re.Match) -> str:
    esc = match.group(1)
    if esc[0] == "u":
        return chr(int(esc.lstrip("u"), 16))
    if esc[0] in "01234567":
        return chr(int(esc, 8))
    if esc in _SIMPLE:
        return _SIMPLE[esc]
    raise ValueError(f"unknown Java escape \\{esc}")


def descriptor_bytes(java_source: str) -> bytes:
    """The serialized descriptor held by protoc's Java output ``java_source``."""
    array = _ARRAY.search(java_source)
    if array is None:
        raise ValueError("no descriptorData array: not a protoc-generated outer class")
    text = "".join(_ESCAPE.sub(_unescape, lit) for lit in _LITERAL.findall(array.group(1)))
    return text.encode("latin-1")  # one char per byte; a char above 255 raises


def check(data: bytes) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto.FromString(data)
    if fdp.package != "urlfrontier" or "URLFrontier" not in [s.name for s in fdp.service]:
        raise ValueError(f"{fdp.name}: not the URLFrontier API (package {fdp.package!r})")
    if fdp.SerializeToString() != data:
        raise ValueError("the descriptor does not serialize back to the same bytes")
    return fdp


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with zipfile.ZipFile(argv[1]) as jar:
        source = jar.read(SOURCE).decode("utf-8")
    data = descriptor_bytes(source)
    fdp = check(data)
    with open(argv[2], "wb") as out:
        out.write(data)
    methods = len(fdp.service[0].method)
    print(f"URLFrontier API descriptor: {len(data)} bytes, {len(fdp.message_type)} messages, "
          f"{methods} methods -> {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
