"""Benchmark: owler.fetch.robots (parse once per host, ``allowed()`` per URL) against protego.

Corpus: the 4,231 real robots.txt files of protego 0.7.0 (``shared/testdata``), or the 500-file
sample in ``tests/data/robots`` when the shared data is absent, plus one 396 KB file with 12,375
rules when present. Prints µs per parse and per ``allowed()`` call, and how often the two
libraries disagree on the probe URLs (see ``tests/unit/test_robots.py`` for why they may).

Run: ``.venv/bin/python bench/bench_robots.py``.
"""

from __future__ import annotations

import gc
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from protego import Protego  # noqa: E402

from owler.fetch.robots import parse_robots  # noqa: E402

SHARED = ROOT.parent / "shared" / "testdata" / "robots"
FULL = SHARED / "protego" / "real_world_robots_txt_4231.tar.gz"
SAMPLE = ROOT / "tests" / "data" / "robots" / "real_world_robots_txt_sample500.tar.gz"
BIG = SHARED / "misc" / "npm-robots-txt-guard-1.0.2_big-robots.txt"
PATHS = ["/", "/index.html", "/search?q=1", "/admin/", "/wp-admin/admin-ajax.php", "/a/b/c.html",
         "/%7Euser/", "/cgi-bin/x", "/api/v1/items?id=3&sort=asc", "/" + "x" * 300]


def load(path: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(path) as tf:
        return [(m.name.rsplit("/", 1)[-1], tf.extractfile(m).read())
                for m in tf.getmembers() if m.isfile()]


def bench(name: str, files: list[tuple[str, bytes]]) -> None:
    texts = [b.decode("utf-8", "replace") for _, b in files]
    gc.collect()
    t = time.perf_counter()
    ours = [parse_robots(b, ["owler"]) for _, b in files]
    t_parse = (time.perf_counter() - t) / len(files)
    t = time.perf_counter()
    theirs = [Protego.parse(x) for x in texts]
    t_pparse = (time.perf_counter() - t) / len(files)
    urls = [[f"https://{host}{p}" for p in PATHS] for host, _ in files]
    n = sum(len(u) for u in urls)
    t = time.perf_counter()
    a = [[r.allowed(u) for u in us] for r, us in zip(ours, urls)]
    t_ok = (time.perf_counter() - t) / n
    t = time.perf_counter()
    b = [[p.can_fetch(u, "owler") for u in us] for p, us in zip(theirs, urls)]
    t_pok = (time.perf_counter() - t) / n
    differ = sum(x != y for xs, ys in zip(a, b) for x, y in zip(xs, ys))
    size = sum(len(b) for _, b in files) / len(files)
    print(f"{name}: {len(files)} files, mean {size / 1024:.1f} KiB")
    print(f"  parse     owler {t_parse * 1e6:8.1f} µs   protego {t_pparse * 1e6:8.1f} µs")
    print(f"  allowed() owler {t_ok * 1e6:8.2f} µs   protego {t_pok * 1e6:8.2f} µs   "
          f"(disagree on {differ} of {n} URLs)")


def main() -> None:
    if BIG.is_file():
        bench(BIG.name, [("big.example", BIG.read_bytes())])
    corpus = FULL if FULL.is_file() else SAMPLE
    bench(corpus.name, load(corpus))


if __name__ == "__main__":
    main()
