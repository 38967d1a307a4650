"""A farm of documents for the parser's PDF reading (issue 48): the real PDFs of two Debian manuals
in their translations (the Debian FAQ and the New Maintainers' Guide, thirteen languages, 21 PDFs
nobody on the project wrote; ``tests/testdata.sh`` takes them from the packages of
``tests/manuals.versions`` into ``.work/testdata/debian-documents``), and hostile PDFs this module
makes: a decompression bomb, a page tree and a cross-reference chain that loop, a cut file.

One site on :data:`ADDR`:

``/``
    an HTML page linking to every document.
``/pdf/<file>.pdf``
    a real PDF (``application/pdf``), with one link annotation added on its first page to
    ``/after/<file>.html`` (an incremental update: the original bytes stay as they are, the new
    objects are appended, as a PDF editor saves a change), so that a crawl can show it follows a
    document's links: the manuals' own links go to the Debian web site, which is not on loopback.
``/after/<file>.html``
    a small HTML page, reached only from that PDF.
``/bin/<file>``
    the same PDF as ``application/octet-stream`` (the parser knows it by its signature) for the
    first real PDF only.
``/hostile/bomb.pdf``, ``/hostile/loop.pdf``, ``/hostile/truncated.pdf``
    :func:`bomb_pdf`, :func:`loop_pdf`, :func:`truncated_pdf`.

Run: ``python -m tests.farm.documents --log FILE`` → prints ``READY <port>``; every request is
logged as a JSON line (time, host, path, status).
"""

from __future__ import annotations

import io
import zlib
from functools import lru_cache
from pathlib import Path

from aiohttp import web

from tests.farm import aiosites
from tests.material import fetched

ADDR = "127.0.76.1"
NETWORK = "127.0.76.0/24"
#: decompressed size of the bomb's content stream, MiB (about 2 MiB compressed: under the
#: crawler's http.content.limit)
BOMB_MIB = 700
HOSTILE = ("bomb", "loop", "truncated")


def root() -> Path:
    return fetched("debian-documents", pattern="*/*.pdf").resolve()


def language(name: str) -> str:
    """The language of a real PDF by its name (``maint-guide.zh-cn.pdf`` → ``zh``)."""
    return name.split(".")[1].split("-")[0]


@lru_cache(maxsize=None)
def real() -> dict[str, Path]:
    """File name → path of every real PDF."""
    found = {p.name: p for p in sorted(root().glob("*/*.pdf"))}
    if len(found) < 21:
        raise FileNotFoundError(f"{len(found)} PDFs in {root()}: run `make setup`")
    return found


def full() -> dict[str, Path]:
    """The real PDFs that hold a manual (the Debian FAQ's Japanese, Korean and Chinese packages
    ship a one-page placeholder of 10 KB instead)."""
    return {n: p for n, p in real().items() if p.stat().st_size > 100_000}


# --- PDFs made here ---------------------------------------------------------------------------

def make_pdf(objects: list[bytes], trailer: bytes = b"", prev_self: bool = False) -> bytes:
    """A PDF of ``objects`` (numbered from 1; object 1 is the catalog) with a correct
    cross-reference table; ``prev_self``: its trailer's ``/Prev`` names that very table, a chain
    that loops."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    prev = b"/Prev %d " % xref if prev_self else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R %s%s>>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, prev, trailer, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n%s\nendstream" % (len(data), extra, data)


@lru_cache(maxsize=4)
def bomb_pdf(mib: int = BOMB_MIB) -> bytes:
    """A one-page PDF whose content stream inflates from about 2 MiB to ``mib`` MiB of drawing
    operators (a decompression bomb: reading its page needs the whole stream in memory)."""
    comp = zlib.compressobj(9)
    chunk = b"0 0 m 1 1 l S\n" * 65536
    parts, size = [], 0
    while size < mib << 20:
        parts.append(comp.compress(chunk))
        size += len(chunk)
    parts.append(comp.flush())
    return make_pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                     b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                     b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
                     _stream(b"".join(parts), b"/Filter /FlateDecode ")])


def loop_pdf() -> bytes:
    """A PDF whose page tree holds itself (the root's kids are the root and a node whose kids are
    the root again) and whose cross-reference chain loops (``/Prev`` names its own table)."""
    return make_pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                     b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
                     b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>"],
                    prev_self=True)


def truncated_pdf() -> bytes:
    """The first half of a real manual (a transfer cut short)."""
    data = real()["maint-guide.de.pdf"].read_bytes()
    return data[: len(data) // 2]


def hostile(name: str) -> bytes:
    return {"bomb": bomb_pdf, "loop": loop_pdf, "truncated": truncated_pdf}[name]()


def with_link(data: bytes, uri: str) -> bytes:
    """``data`` with a link annotation to ``uri`` on its first page, appended as an incremental
    update by PDFium (the original bytes unchanged)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    doc = pdfium.PdfDocument(data)
    try:
        page = doc[0]
        annot = raw.FPDFPage_CreateAnnot(page.raw, raw.FPDF_ANNOT_LINK)
        raw.FPDFAnnot_SetRect(annot, raw.FS_RECTF(40, 40, 240, 60))
        if not raw.FPDFAnnot_SetURI(annot, uri.encode("ascii")):
            raise RuntimeError(f"PDFium did not set the link to {uri}")
        raw.FPDFPage_CloseAnnot(annot)
        page.close()
        buf = io.BytesIO()
        doc.save(buf, flags=raw.FPDF_INCREMENTAL)
        return buf.getvalue()
    finally:
        doc.close()


def after_path(name: str) -> str:
    return f"/after/{Path(name).stem}.html"


# --- the site ---------------------------------------------------------------------------------

def index(port: int) -> str:
    links = [f'<li><a href="/pdf/{n}">{n}</a></li>' for n in real()]
    links.append(f'<li><a href="/bin/{next(iter(real()))}">as octet-stream</a></li>')
    links += [f'<li><a href="/hostile/{h}.pdf">{h}</a></li>' for h in HOSTILE]
    return ("<!doctype html><html><head><title>Documents</title></head><body><ul>"
            + "".join(links) + "</ul></body></html>")


@lru_cache(maxsize=64)
def _linked(name: str, port: int) -> bytes:
    return with_link(real()[name].read_bytes(), f"http://{ADDR}:{port}{after_path(name)}")


def make_answer(port: int):
    def answer(addr: str, path: str) -> web.Response:
        if addr != ADDR:
            return web.Response(status=404)
        if path == "/":
            return web.Response(text=index(port), content_type="text/html")
        kind, _, name = path.lstrip("/").partition("/")
        if kind == "pdf" and name in real():
            return web.Response(body=_linked(name, port), content_type="application/pdf")
        if kind == "bin" and name == next(iter(real())):
            return web.Response(body=_linked(name, port),
                                content_type="application/octet-stream")
        if kind == "after" and name.endswith(".html") and f"{name[:-5]}.pdf" in real():
            return web.Response(text=f"<html><head><title>After {name}</title></head><body>"
                                     f"<p>Reached from {name[:-5]}.pdf.</p></body></html>",
                                content_type="text/html")
        if kind == "hostile" and name.endswith(".pdf") and name[:-4] in HOSTILE:
            return web.Response(body=hostile(name[:-4]), content_type="application/pdf")
        return web.Response(status=404)
    return answer


def main() -> None:
    bomb_pdf()  # made before READY: the first request must not wait for it
    aiosites.main(aiosites.answering(make_answer), [ADDR])


if __name__ == "__main__":
    main()
