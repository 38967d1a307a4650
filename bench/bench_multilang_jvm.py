"""The worker JVM's end of the MessagePack multilang protocol: CPU per message it reads from a
component and writes to one.

Every tuple between two Python components crosses the worker JVM: it reads the sender's shell
message (``readShellMsg``) and writes the tuple to the receiver (``writeBoltMsg``). The shipped
serializer (storm/multilang/MsgpackSerializer.java) writes strings as their UTF-8 bytes; it is
timed against the same walk over the values written with msgpack-java's ``packString``, in one
JVM, alternated round by round after a warm-up (bench/java/MsgpackStrings.java). Its reading,
msgpack-java's own, is timed alone.

The messages are the parser's, built from real pages nobody on the project wrote (the HTML
responses of the Common Crawl and dolma samples and trafilatura's test pages: those of
bench/bench_parsefilters.py) with the shipped parse (:class:`owler.parse.page.PageHandler`), written by the components'
serializer (:class:`owler.task.serializer.OwlerMsgpackSerializer`):
- ``outlinks``: a page's outlinks tuple (its links are one string, owler/outlinks.py) and its
  status tuple, as the parser emits them towards the status updater;
- ``pages``: the fetcher's tuple of a page (its bytes are a MessagePack ``bin``);
- ``farm outlinks``: the same as ``outlinks`` for 300 pages of `make bench`'s farm
  (bench/farm.py: 100–200 links a page to about 30 distinct targets, the page's outlinks).

Usage: .venv/bin/python bench/bench_multilang_jvm.py [--rounds 15]
Prints a table and, with --json, one JSON object.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.bench_parsefilters import pages as real_pages  # noqa: E402
from bench.farm import Web, host_addr  # noqa: E402
from owler import outlinks as outlink  # noqa: E402
from owler import wire  # noqa: E402
from owler.conf import load_conf  # noqa: E402
from owler.parse.page import PageHandler  # noqa: E402
from owler.run.runner import storm_home  # noqa: E402
from owler.task.serializer import OwlerMsgpackSerializer  # noqa: E402


#: each round reads and writes every message this many times
REPEAT = 20


def farm_pages(n: int = 300) -> list[tuple[str, bytes, dict]]:
    web = Web(60, 6, 1, 8000)
    html = {wire.RAW_HEADERS: wire.encode_headers([("Content-Type", "text/html")])}
    out = []
    for i in range(60):
        for path, resp in web._host(i).items():
            head, _, body = resp.partition(b"\r\n\r\n")
            if b"text/html" in head:
                out.append((f"http://{host_addr(i)}:8000{path.decode()}", body, html))
    return out[:n]


def parser_messages(handler: PageHandler, pages) -> list[dict]:
    """What the parser emits for each page: its outlinks tuple and its status tuple."""
    msgs = []
    for n, (url, body, md) in enumerate(pages):
        out = handler.handle_page(url, body, dict(md))
        anchors = [str(1_000_000 + n)]
        if out.outlinks:
            msgs.append({"command": "emit", "anchors": anchors, "stream": "outlinks",
                         "tuple": [url, out.metadata, outlink.encode(out.outlinks)]})
        msgs.append({"command": "emit", "anchors": anchors, "stream": "status",
                     "tuple": [url, out.metadata, out.status.value]})
    return msgs


def messages() -> dict[str, tuple[bytes, int]]:
    """Each kind's messages as one stream of bytes, and their count."""
    handler = PageHandler(load_conf())
    pages = real_pages()  # the pages of bench/bench_parsefilters.py
    kinds = {"outlinks": parser_messages(handler, pages),
             "pages": [{"command": "emit", "anchors": [str(1_000_000 + n)],
                        "tuple": [url, body, md]} for n, (url, body, md) in enumerate(pages)],
             "farm outlinks": parser_messages(handler, farm_pages())}
    streams = {}
    for kind, msgs in kinds.items():
        buf = io.BytesIO()
        ser = OwlerMsgpackSerializer(io.BytesIO(), buf, threading.RLock(), threading.RLock())
        for m in msgs:
            ser.send_message(m)
        # enough messages per round for the timer, the same ones again
        streams[kind] = (buf.getvalue() * REPEAT, len(msgs) * REPEAT)
    return streams


def compile_harness(work: Path) -> str:
    home = storm_home(ROOT)
    cp = f"{home}/lib-owler/*:{home}/lib/*"
    subprocess.run(["javac", "-nowarn", "-d", str(work), "-cp", cp,
                    str(ROOT / "bench" / "java" / "MsgpackStrings.java")], check=True)
    return f"{work}:{cp}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        cp = compile_harness(Path(tmp))
        for kind, (data, count) in messages().items():
            path = Path(tmp) / f"{kind}.msgpack"
            path.write_bytes(data)
            out = subprocess.run(["java", "-Xmx1g", "-cp", cp, "MsgpackStrings", str(path),
                                  str(args.rounds)], check=True, capture_output=True, text=True)
            r = json.loads(out.stdout)
            r["mean_bytes"] = round(len(data) / count)
            results[kind] = r
    if args.json:
        print(json.dumps(results))
        return
    print(f"ns per message, median of {args.rounds} alternated rounds (min–max)\n")
    print("| messages | mean size | read | write: ours | write: msgpack-java's packString |")
    print("|---|---:|---:|---:|---:|")
    for kind, r in results.items():
        cells = []
        for key in ("read_ours", "write_ours", "write_library"):
            v = r[key]
            cells.append(f"{statistics.median(v):,.0f} ({min(v):,}–{max(v):,})")
        print(f"| {kind} ({r['messages']}) | {r['mean_bytes']:,} B | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
