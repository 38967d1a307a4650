"""Documents (issue 48): the real PDFs of two Debian manuals in thirteen languages (tests/farm/
documents.py, taken from Debian packages by tests/testdata.sh), read by the sandboxed worker of
owler.parse.documents and through the page handler (title, language, outlinks, signature), and
hostile PDFs made by the test (a decompression bomb, a page tree and xref chain that loop, a cut
file, a document past its time and CPU limits): each ends with its cause, and the next document is
read by a new worker."""

from __future__ import annotations

import pytest

from owler import wire
from owler.constants import Status
from owler.parse.documents import (CAUSE_CPU, CAUSE_MEMORY, CAUSE_TIMEOUT, CAUSE_TRUNCATED,
                                   CAUSE_UNREADABLE, DocumentError, DocumentPool, is_pdf)
from owler.parse.filters import ParseFilter, ParseFilters
from owler.parse.page import PageHandler
from tests.farm import documents as D

SHIPPED = {"parsefilters.config.file": "parsefilters.json"}


def headers(ctype: str) -> dict:
    return {wire.RAW_HEADERS: wire.encode_headers([("Content-Type", ctype)])}


@pytest.fixture(scope="module")
def pool():
    p = DocumentPool({})
    yield p
    p.close()


@pytest.fixture(scope="module")
def handler():
    h = PageHandler(SHIPPED)
    yield h
    h.close()


def test_is_pdf():
    assert is_pdf("application/pdf", b"")
    assert is_pdf("application/x-pdf; charset=binary", b"junk")
    assert is_pdf("application/octet-stream", b"\n\n%PDF-1.5\n")
    assert is_pdf(None, b"%PDF-1.7")
    assert not is_pdf("text/plain; charset=utf-8", b"%PDF-1.7")  # a text about PDFs, as served
    assert not is_pdf("application/octet-stream", b"\x00" * 2000 + b"%PDF-1.7")
    assert not is_pdf("image/png", b"%PDF-1.7")


def test_every_real_pdf_is_read(pool):
    """Every one of the 21 PDFs: pages, text, title and the manuals' link annotations."""
    full = D.full()
    assert len(D.real()) == 21 and len(full) == 18
    for name, path in D.real().items():
        doc = pool.extract(path.read_bytes())
        assert doc.pages >= 1 and not doc.cut, name
        if name not in full:  # the FAQ's placeholder for ja, ko, zh-cn: one page, a sentence
            assert doc.pages == 1 and 10 < len(doc.text) < 200 and not doc.links, name
            continue
        assert doc.pages > 60 and len(doc.text) > 90_000, (name, doc.pages, len(doc.text))
        assert "Debian" in doc.title or "Guida" in doc.title, (name, doc.title)
        # web links mostly, some mailto: and ftp:, and a relative path or two (as written)
        assert sum(u.startswith(("http://", "https://")) for u in doc.links) > 90, name
        assert any(u.startswith("https://www.debian.org/") for u in doc.links), name
    assert pool.failures == {}


def test_max_pages_and_max_text_cut_the_text():
    data = D.real()["maint-guide.en.pdf"].read_bytes()
    small = DocumentPool({"parser.documents.max.pages": 3, "parser.documents.max.text": -1})
    try:
        doc = small.extract(data)
        assert doc.cut and doc.pages == 63 and 500 < len(doc.text) < 20_000
    finally:
        small.close()
    short = DocumentPool({"parser.documents.max.text": 5_000})
    try:
        doc = short.extract(data)
        assert doc.cut and len(doc.text) == 5_000
    finally:
        short.close()


def test_the_page_handler_records_a_real_pdf(handler):
    """Title, MIME type, pages, signature, SimHash, the language by the text (the shipped parse
    filters), the outlinks resolved and normalised; the filters that read markup do not run."""
    for name, path in D.full().items():
        url = f"http://{D.ADDR}/pdf/{name}"
        out = handler.handle_page(url, path.read_bytes(), headers("application/pdf"))
        md = out.metadata
        assert out.status == Status.FETCHED, (name, md)
        assert md["parse.mimetype"] == ["application/pdf"] and md["parse.title"]
        assert int(md["parse.document.pages"][0]) > 60 and "parse.document.cut" not in md
        assert len(md["signature"][0]) == 32 and len(md["simhash"][0]) == 16
        assert md["lang"] == [D.language(name)], (name, md.get("lang"), md.get("lang.confidence"))
        assert md["lang.source"] == ["text"]
        assert int(md["parse.text.length"][0]) > 50_000
        assert md["parse.outlinks.count"] == [str(len(out.outlinks))]
        assert len(out.outlinks) > 90 and "parse.filters.failed" not in md
        assert "https://www.debian.org/doc/devel-manuals#debmake-doc" not in out.outlinks
        assert "https://www.debian.org/doc/devel-manuals" in out.outlinks  # fragment dropped
        assert all(link.startswith(("http://", "https://")) for link in out.outlinks)  # no mailto
        assert "risk" in md and md["risk"] == ["benign"]
    assert handler.documents.started == 1  # one worker read them all


def test_a_placeholder_pdf_is_fetched_without_a_language(handler):
    out = handler.handle_page(f"http://{D.ADDR}/pdf/ja", D.real()["debian-faq.ja.pdf"].read_bytes(),
                              headers("application/pdf"))
    assert out.status == Status.FETCHED and out.outlinks == []
    assert out.metadata["parse.document.pages"] == ["1"] and "lang" not in out.metadata


def test_outlinks_follow_the_parser_keys():
    data = D.with_link(D.real()["debian-faq.fr.pdf"].read_bytes(), "../after/x.html")
    url = f"http://{D.ADDR}/pdf/debian-faq.fr.pdf"
    capped = PageHandler({"parser.emitOutlinks.max.per.page": 5})
    none = PageHandler({"parser.emitOutlinks": False})
    try:
        out = capped.handle_page(url, data, headers("application/pdf"))
        # the added link comes first (first page), resolved against the document's URL
        assert out.outlinks[0] == f"http://{D.ADDR}/after/x.html" and len(out.outlinks) == 5
        out = none.handle_page(url, data, headers("application/pdf"))
        assert out.status == Status.FETCHED and out.outlinks == []
    finally:
        capped.close()
        none.close()


def test_a_pdf_served_as_octet_stream_is_known_by_its_signature(handler):
    data = D.real()["maint-guide.it.pdf"].read_bytes()
    out = handler.handle_page("http://h.example/file", data, headers("application/octet-stream"))
    assert out.status == Status.FETCHED and out.metadata["lang"] == ["it"]


def test_documents_disabled_are_recorded_as_before():
    off = PageHandler({"parser.documents.enabled": False, **SHIPPED})
    data = D.real()["maint-guide.it.pdf"].read_bytes()
    out = off.handle_page("http://h.example/g.pdf", data, headers("application/pdf"))
    assert out.status == Status.FETCHED and off.documents is None
    assert out.metadata["parse.mimetype"] == ["application/pdf"]
    assert "parse.title" not in out.metadata and "lang" not in out.metadata and not out.outlinks


def test_only_filters_that_read_no_markup_run_on_a_document():
    class Markup(ParseFilter):
        name, keys = "markup", ("markup",)

        def filter(self, page):
            page.metadata["markup"] = ["ran"]

    class Text(Markup):
        name, keys, documents = "text", ("text",), True

        def filter(self, page):
            page.metadata["text"] = [str(len(page.text))]

    handler = PageHandler({})
    handler.filters = ParseFilters([Markup(), Text()])
    try:
        out = handler.handle_page("http://h.example/g.pdf",
                                  D.real()["maint-guide.ca.pdf"].read_bytes(),
                                  headers("application/pdf"))
        assert "markup" not in out.metadata and int(out.metadata["text"][0]) > 90_000
        html = handler.handle_page("http://h.example/", b"<title>t</title><p>x",
                                   headers("text/html"))
        assert html.metadata["markup"] == ["ran"] and html.metadata["text"] == ["1"]
    finally:
        handler.close()


@pytest.mark.parametrize("name, cause, words", [
    ("bomb", CAUSE_MEMORY, "parser.documents.memory.mb"),
    ("loop", CAUSE_UNREADABLE, "cannot be loaded"),
    ("truncated", CAUSE_TRUNCATED, "cut short"),
])
def test_a_hostile_pdf_ends_with_its_cause_and_the_next_one_is_read(name, cause, words):
    handler = PageHandler(SHIPPED)
    try:
        md = {**headers("application/pdf"), "depth": ["2"]}
        out = handler.handle_page(f"http://{D.ADDR}/hostile/{name}.pdf", D.hostile(name), md)
        assert out.status == Status.ERROR and out.outlinks == []
        assert out.metadata["error.cause"] == [cause], out.metadata
        assert out.metadata["error.source"] == ["parser"] and out.metadata["depth"] == ["2"]
        assert words in out.metadata["error.message"][0]
        assert out.metadata["parse.mimetype"] == ["application/pdf"]
        good = handler.handle_page(f"http://{D.ADDR}/pdf/ok.pdf",
                                   D.real()["maint-guide.ru.pdf"].read_bytes(),
                                   headers("application/pdf"))
        assert good.status == Status.FETCHED and good.metadata["lang"] == ["ru"]
        assert handler.documents.failures == {cause: 1}
        # a worker that ran out of memory is replaced; one that refused a file goes on
        assert handler.documents.started == (2 if cause == CAUSE_MEMORY else 1)
    finally:
        handler.close()


def test_a_cut_transfer_says_so():
    handler = PageHandler({})
    try:
        md = {**headers("application/pdf"), wire.RAW_TRUNCATED: ["length"]}
        out = handler.handle_page("http://h.example/cut.pdf", D.truncated_pdf(), md)
        assert out.status == Status.ERROR
        assert "http.content.limit" in out.metadata["error.message"][0]
    finally:
        handler.close()


def test_a_document_past_its_time_is_killed_and_the_worker_replaced():
    """A wall-clock limit far below what a manual takes (the worker is started within it)."""
    pool = DocumentPool({"parser.documents.timeout": 0.005})
    try:
        with pytest.raises(DocumentError) as err:
            pool.extract(D.real()["maint-guide.ja.pdf"].read_bytes())
        assert err.value.cause == CAUSE_TIMEOUT and "parser.documents.timeout" in str(err.value)
        assert pool._proc is None  # killed
        pool.timeout = 60.0
        assert pool.extract(D.real()["maint-guide.ja.pdf"].read_bytes()).pages == 69
        assert pool.started == 2 and pool.failures == {CAUSE_TIMEOUT: 1}
    finally:
        pool.close()


def test_a_document_past_its_cpu_is_ended_by_the_kernel():
    """One CPU second for a bomb of drawing operators that fits in memory (400 MiB inflated, a
    4 GiB address space): the kernel's SIGXCPU ends the worker, not the parser's clock."""
    pool = DocumentPool({"parser.documents.cpu": 1, "parser.documents.memory.mb": 4096,
                         "parser.documents.timeout": 600})
    try:
        with pytest.raises(DocumentError) as err:
            pool.extract(D.bomb_pdf(400))
        assert err.value.cause == CAUSE_CPU and "parser.documents.cpu" in str(err.value)
        assert pool.extract(D.real()["maint-guide.vi.pdf"].read_bytes()).pages == 64
    finally:
        pool.close()


def test_bad_limits_are_refused():
    with pytest.raises(ValueError):
        DocumentPool({"parser.documents.timeout": 0})


def test_a_short_pdf_takes_its_declared_language_and_title(handler):
    """Too little text to judge: the catalog's /Lang (``parse.lang``), as an HTML page's
    ``<html lang>``; the title from the document information."""
    content = b"BT /F1 12 Tf 72 700 Td (Guten Tag) Tj ET"
    data = D.make_pdf([b"<< /Type /Catalog /Pages 2 0 R /Lang (de-AT) >>",
                       b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                       b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                       b"/Resources << /Font << /F1 5 0 R >> >> >>",
                       b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
                       b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
                       b"<< /Title (Ein  kurzes\nDokument) >>"],
                      trailer=b"/Info 6 0 R ")
    out = handler.handle_page("http://h.example/kurz.pdf", data, headers("application/pdf"))
    md = out.metadata
    assert out.status == Status.FETCHED and md["parse.title"] == ["Ein kurzes Dokument"]
    assert md["parse.lang"] == ["de-AT"] and md["lang"] == ["de"] and md["lang.source"] == ["html"]
    assert md["parse.text.length"] == ["8"] and md["parse.document.pages"] == ["1"]
