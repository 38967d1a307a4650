"""PDF libraries for the parser's documents (issue 48): what each costs per document and per page,
its peak memory, and what it reads (characters of text, link annotations), on the real PDFs that
``make setup`` takes from Debian's manuals (tests/testdata.sh: .work/testdata/debian-documents).

Each library runs in a process of its own (so that its peak RSS is its own), reading every PDF
``--rounds`` times: text of every page, the document's title and the URI actions of its link
annotations, as :func:`owler.parse.documents.extract_pdf` does with PDFium.

- ``pypdfium2``: PDFium (Chromium's PDF engine, C++), through :func:`extract_pdf` itself;
- ``sandboxed``: the same through :class:`owler.parse.documents.DocumentPool`, as the parser reads
  them (the worker process, its limits, the document and its text over pipes); its peak is the
  parser's side only;
- ``pypdf``: pure Python; ``page.extract_text()`` and each page's ``/Annots``;
- ``pdfminer``: pdfminer.six, pure Python; ``extract_text`` and each page's ``annots``;
- ``tika``: Apache Tika 2.9.2 (tika-app: PDFBox), as StormCrawler's Tika bolt reads documents, in
  one warm JVM (``bench/TikaBench.java``: text and links teed as StormCrawler's ParserBolt does;
  the jar is fetched from Maven Central by ``mvn dependency:copy`` into .work/bench/ on first use).

The figures and the decision are in BENCHMARKS.md (appendix, "Libraries and formats").

    py bench/bench_documents.py [--rounds 1] [--only pypdfium2,sandboxed,pypdf,pdfminer,tika]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / ".work" / "testdata" / "debian-documents"
LIBRARIES = ("pypdfium2", "sandboxed", "pypdf", "pdfminer", "tika")
TIKA = "org.apache.tika:tika-app:2.9.2"
TIKA_JAR = ROOT / ".work" / "bench" / "tika-app-2.9.2.jar"


def _pypdfium2(data: bytes):
    sys.path.insert(0, str(ROOT / "src"))
    from owler.parse.documents import extract_pdf

    res = extract_pdf(data, -1, -1)
    return res.pages, len(res.text), len(res.links), res.title


_POOL = []


def _sandboxed(data: bytes):
    sys.path.insert(0, str(ROOT / "src"))
    from owler.parse.documents import DocumentPool

    if not _POOL:
        _POOL.append(DocumentPool({"parser.documents.max.pages": -1,
                                   "parser.documents.max.text": -1}))
    res = _POOL[0].extract(data)
    return res.pages, len(res.text), len(res.links), res.title


def _pypdf(data: bytes):
    import io

    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    chars, links = 0, set()
    for page in reader.pages:
        chars += len(page.extract_text() or "")
        for annot in page.get("/Annots") or []:
            obj = annot.get_object()
            action = obj.get("/A")
            if action is not None:
                uri = action.get_object().get("/URI")
                if uri:
                    links.add(str(uri))
    title = (reader.metadata or {}).get("/Title") or ""
    return len(reader.pages), chars, len(links), str(title)


def _pdfminer(data: bytes):
    import io

    from pdfminer.high_level import extract_text
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import resolve1

    text = extract_text(io.BytesIO(data))
    doc = PDFDocument(PDFParser(io.BytesIO(data)))
    links, pages = set(), 0
    for page in PDFPage.create_pages(doc):
        pages += 1
        for annot in resolve1(page.annots) or []:
            action = resolve1(resolve1(annot).get("A"))
            if action and action.get("URI"):
                uri = resolve1(action["URI"])
                links.add(uri.decode("latin-1") if isinstance(uri, bytes) else str(uri))
    info = resolve1(doc.info[0]) if doc.info else {}
    title = resolve1(info.get("Title", b"")) if info else b""
    return pages, len(text), len(links), title


def child(library: str, rounds: int) -> None:
    """One library over every PDF, ``rounds`` times; prints its figures as JSON."""
    files = sorted(DOCS.rglob("*.pdf"))
    datas = [f.read_bytes() for f in files]
    fn = {"pypdfium2": _pypdfium2, "sandboxed": _sandboxed, "pypdf": _pypdf,
          "pdfminer": _pdfminer}[library]
    fn(datas[0])  # imports and first-call costs out of the figures
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pages = chars = links = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        pages = chars = links = 0
        for data in datas:
            p, c, n, _ = fn(data)
            pages, chars, links = pages + p, chars + c, links + n
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"library": library, "docs": len(datas) * rounds, "pages": pages * rounds,
                      "wall": wall, "cpu": cpu, "chars": chars, "links": links,
                      "peak_mb": peak / 1024, "growth_mb": (peak - base) / 1024}))


def tika_jar() -> Path:
    """tika-app's jar, fetched by Maven (checksums verified) on first use."""
    if not TIKA_JAR.is_file():
        plugin = "org.apache.maven.plugins:maven-dependency-plugin:2.10:copy"
        subprocess.run(["mvn", "-B", "-q", plugin, f"-Dartifact={TIKA}",
                        f"-DoutputDirectory={TIKA_JAR.parent}"], check=True)
    return TIKA_JAR


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default=",".join(LIBRARIES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.rounds)
        return
    if not any(DOCS.rglob("*.pdf")):
        sys.exit(f"no PDF under {DOCS}: run make setup (tests/testdata.sh)")
    print(f"{'library':10} {'ms/doc':>8} {'ms/page':>8} {'CPU ms/page':>11} {'peak MB':>8} "
          f"{'+MB':>6} {'chars':>10} {'links':>6}")
    for lib in args.only.split(","):
        cmd = [sys.executable, __file__, "--child", lib, "--rounds", str(args.rounds)]
        if lib == "tika":
            cmd = ["java", "-Xmx1g", "-cp", str(tika_jar()), str(ROOT / "bench" / "TikaBench.java"),
                   str(DOCS), str(args.rounds)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{lib:10} {1000 * r['wall'] / r['docs']:8.1f} {1000 * r['wall'] / r['pages']:8.2f} "
              f"{1000 * r['cpu'] / r['pages']:11.2f} {r['peak_mb']:8.1f} {r['growth_mb']:6.1f} "
              f"{r['chars']:10,} {r['links']:6}")


if __name__ == "__main__":
    main()
