"""What the CDXJ index costs the crawl's WARC writer (issue 47), and SURT keys against the ``surt``
package pywb uses.

1. The writer A/B: the same exchanges (``--records`` responses of ~``--size`` bytes of synthetic
   HTML, ``bench/bench_warc.py``'s pages; request, response and every other one a signals
   metadata record) written by ``WARCWriter`` with ``cdxj=True`` and ``cdxj=False``, in
   alternating rounds of 200 exchanges (a file each) so both see the same machine; µs per
   exchange written (median of the rounds) and, apart, ms to close a file (fsyncs: a crawl's
   file holds tens of thousands of exchanges, so that cost is spread over them).
2. The index line alone: ``cdxj.heads_line`` from a response's WARC headers and HTTP head (what
   the crawl's writer does per exchange: the key, the head's status and type, the JSON), and
   ``cdxj.member_line`` on the response members written (what warc2warc's copy and a rebuild do
   per record: the first 3 KiB inflated and the heads read first).
3. SURT keys per URL: ``cdxj.surt`` here against ``surt.surt`` in pywb's own virtualenv
   (``.services/pywb-<version>``, ``make setup``), on the same URLs (the crawl's kind: hosts with
   ports and ``www``, paths, queries), best of 5 runs each.

    .venv/bin/python bench/bench_cdxj.py [--records 2000] [--size 45000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.bench_warc import REQUEST, make_page, make_vocabulary  # noqa: E402
from owler.warc import WARCWriter  # noqa: E402
from owler.warc.format import cdxj  # noqa: E402
from owler.warc.format.reader import InputRecord, iter_records  # noqa: E402

SIGNALS = json.dumps({"vocab": "draft-ietf-aipref-vocab-08", "purposes": {
    "ai-train": {"state": "refused", "sources": ["header.content-usage"]}}})


def urls(n: int, rnd: random.Random) -> list[str]:
    out = []
    for i in range(n):
        host = f"{rnd.choice(['www.', '', 'blog.'])}site{rnd.randrange(300)}.example.org"
        port = rnd.choice(["", "", ":8080"])
        path = "/".join(rnd.choice(["news", "a", "2026", "item", "docs", "index.html"])
                        for _ in range(rnd.randrange(1, 4)))
        query = rnd.choice(["", "", f"?id={i}&lang=en", f"?page={i % 9}"])
        out.append(f"{rnd.choice(['http', 'https'])}://{host}{port}/{path}{query}")
    return out


def write_round(directory: Path, pages: list[tuple[str, bytes]], cdxj_on: bool
                ) -> tuple[float, float]:
    """CPU µs per exchange written, and CPU ms to close the file (with the index: the index
    sorted and written too)."""
    w = WARCWriter(directory, prefix="B", partition="00", rotation_size=0, cdxj=cdxj_on)
    t0 = time.process_time()
    for i, (url, page) in enumerate(pages):
        w.write_exchange(url, fetch_time=1_764_504_000 + i, request_line_and_headers=REQUEST,
                         status_line="HTTP/1.1 200 OK",
                         response_headers=[("Content-Type", "text/html; charset=utf-8"),
                                           ("Server", "farm"), ("Content-Length", str(len(page)))],
                         payload=page, metadata=SIGNALS if i % 2 else None)
    t1 = time.process_time()
    w.close()
    return (t1 - t0) / len(pages) * 1e6, (time.process_time() - t1) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--size", type=int, default=45_000)
    args = ap.parse_args()
    rnd = random.Random(47)
    vocab = make_vocabulary(rnd)
    pages = [(u, make_page(rnd, args.size, vocab)) for u in urls(args.records, rnd)]
    rounds = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(0, len(pages), 200):
            chunk = pages[r:r + 200]
            for on in ((True, False) if (r // 200) % 2 == 0 else (False, True)):
                d = Path(tmp) / f"{r}-{on}"
                rounds[on].append(write_round(d, chunk, on))
        d = Path(tmp) / "0-True"
        [warc] = sorted(d.glob("*.warc.gz"))
        with open(warc, "rb") as f:
            recs = [r for r in iter_records(f, verify=False)
                    if isinstance(r, InputRecord) and r.type == "response"]
    members = [(r.raw, r.offset) for r in recs]
    heads = [(list(r.headers.items()), r.block[:r.block.find(b"\r\n\r\n") + 4], r.offset,
              len(r.raw)) for r in recs]
    with_ = statistics.median(r[0] for r in rounds[True])
    without = statistics.median(r[0] for r in rounds[False])
    close_with = statistics.median(r[1] for r in rounds[True])
    close_without = statistics.median(r[1] for r in rounds[False])
    line = min(timeit.repeat(lambda: [cdxj.member_line(m, o, "B.warc.gz") for m, o in members],
                             number=1, repeat=5, timer=time.process_time)) / len(members) * 1e6
    head_line = min(timeit.repeat(lambda: [cdxj.heads_line(h, b, o, n, "B.warc.gz")
                                           for h, b, o, n in heads], number=1, repeat=5,
                                  timer=time.process_time)) / len(heads) * 1e6
    print(f"| writer, µs per exchange (median of {len(rounds[True])} rounds) | with the index "
          f"{with_:.1f} | without {without:.1f} | difference {with_ - without:.1f} |")
    print(f"| closing a file of 200 exchanges, ms | with the index {close_with:.1f} | "
          f"without {close_without:.1f} |")
    print(f"| index line alone ({len(members)} responses) | heads_line {head_line:.1f} µs | "
          f"member_line {line:.1f} µs |")
    sample = urls(5000, random.Random(7))
    ours = min(timeit.repeat(lambda: [cdxj.surt(u) for u in sample], number=1, repeat=5,
                             timer=time.process_time)) / len(sample) * 1e6
    pywb = sorted((ROOT / ".services").glob("pywb-*/bin/python"))
    theirs = "not installed (make setup)"
    if pywb:
        code = ("import json, sys, timeit, surt; u = json.load(sys.stdin); "
                "import time; print(min(timeit.repeat(lambda: [surt.surt(x) for x in u], number=1, "
                "repeat=5, timer=time.process_time)) / len(u) * 1e6)")
        run = subprocess.run([str(pywb[-1]), "-c", code], input=json.dumps(sample),
                             capture_output=True, text=True, check=True)
        theirs = f"{float(run.stdout):.1f} µs"
    print(f"| SURT key per URL ({len(sample)} URLs) | cdxj.surt {ours:.1f} µs | surt.surt "
          f"{theirs} |")


if __name__ == "__main__":
    main()
