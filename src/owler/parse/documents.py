"""Documents (PDF) for the parser bolt: text, title, declared language and link annotations, read
by PDFium (pypdfium2) in a sandboxed worker process, so that a hostile file costs a bounded amount
of time and memory and never takes the parser down (issue 48; StormCrawler parses documents with
Tika, in a forked JVM with a time limit since its 4.0).

What is read (:func:`extract_pdf`, in the worker):

- the text of each page, up to ``parser.documents.max.pages`` pages and
  ``parser.documents.max.text`` characters (pages in order, a line break between two);
- the title: the document information's ``Title`` (what Tika reports as ``dc:title``), none when
  it is empty;
- the language the document declares: its catalog's ``/Lang`` (the LanguageID parse filter takes
  it when the text is too short to judge, as it takes an HTML page's ``<html lang>``);
- the outlinks: the URI actions of the pages' link annotations (what Tika's PDF parser, and so
  StormCrawler's, reports as links), in page order, at most :data:`MAX_LINKS`. URLs that only
  appear in the text are not taken: neither peer takes them, and the text of a manual is full of
  example URLs nobody meant as links (``http://localhost/``, ``ftp.example.org``). Internal links
  (a page of the same document) are not actions of type URI and are not taken either.

The sandbox (:class:`DocumentPool`): one long-lived worker process per parser task (the bolt
handles one page at a time, so a second worker would only wait), started on the first document,
that reads a document from its standard input and writes what it found to its standard output
(MessagePack frames). Its limits:

``parser.documents.timeout`` (30 s)
    wall-clock time for one document; past it the worker is killed (SIGKILL) and replaced.
``parser.documents.cpu`` (20 s)
    CPU seconds for one document (``RLIMIT_CPU``, its soft limit moved before each document):
    the kernel ends a worker that spends more.
``parser.documents.memory.mb`` (512)
    the worker's address space (``RLIMIT_AS``): an allocation past it fails, the worker reports
    ``memory`` and exits, or dies; either way it is replaced.
``parser.documents.worker.max.documents`` (500)
    documents a worker reads before it is replaced (what a native library may leak stays bounded).

A worker whose parser dies (even by SIGKILL) sees its standard input end and exits after the
document at hand, within its limits. A worker dumps no core (``RLIMIT_CORE`` 0). PDFium aborts when it cannot allocate: a worker
that dies of a signal with at least 40 % of its limit resident is counted as ``document.memory``
(the rest of the limit is the interpreter's and the libraries' mappings).

Errors (:class:`DocumentError`, its ``cause``; the page handler records it as ``error.cause``, the
message as ``error.message``): ``document.unreadable`` (PDFium refuses the file: not a PDF, broken
beyond its repair, encrypted with a password, a page it cannot load, as in a page tree that
loops), ``document.truncated`` (no ``%%EOF`` near its end: the file was cut, by the server or by
``http.content.limit``; what PDFium might rebuild of it is not taken for the document),
``document.timeout``, ``document.cpu``,
``document.memory``, ``document.crashed`` (the worker died otherwise: the signal or exit code is
in the message). A document whose text cannot be read ends ERROR, as an HTML page whose parse
failed does and as StormCrawler's Tika bolt does (``error.source`` parser): nothing of it was read,
so nothing of it may pass for a successful fetch. A document that is read but holds no text (a
scan) is a successful one: FETCHED, its title, links and page count recorded, no language.
"""

from __future__ import annotations

import logging
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from owler import conf as C

log = logging.getLogger(__name__)

ENABLED_KEY = "parser.documents.enabled"
TIMEOUT_KEY = "parser.documents.timeout"
CPU_KEY = "parser.documents.cpu"
MEMORY_KEY = "parser.documents.memory.mb"
MAX_PAGES_KEY = "parser.documents.max.pages"
MAX_TEXT_KEY = "parser.documents.max.text"
MAX_DOCS_KEY = "parser.documents.worker.max.documents"

#: link annotations taken from one document at most (the page handler then applies
#: ``parser.emitOutlinks.max.per.page``)
MAX_LINKS = 10_000

#: a PDF ends with ``%%EOF`` within this many bytes of its end (what follows may be padding)
TAIL_BYTES = 4096

#: characters of a document's title kept (the parser keeps 1,000 of them in ``parse.title``)
MAX_TITLE = 10_000

#: Content-Types read as PDF
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf", "application/acrobat",
                       "applications/vnd.pdf", "text/pdf", "text/x-pdf"})
#: Content-Types that say nothing of the content: a PDF among them is known by its signature
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream",
                            "application/unknown", "unknown/unknown", "application/x-download",
                            "application/force-download", "application/x-unknown-content-type"})

CAUSE_UNREADABLE = "document.unreadable"
CAUSE_TRUNCATED = "document.truncated"
CAUSE_TIMEOUT = "document.timeout"
CAUSE_CPU = "document.cpu"
CAUSE_MEMORY = "document.memory"
CAUSE_CRASHED = "document.crashed"

#: a worker that dies of a signal having held this share of its address-space limit resident
#: died of the limit (the rest of the limit is libraries and their mappings)
MEMORY_SHARE = 0.4

_HEADER = struct.Struct(">I")
#: a frame larger than this from the worker is a broken worker, not a result
_MAX_FRAME = 256 * 1024 * 1024


def is_pdf(ctype: str | None, content: bytes) -> bool:
    """Whether a response is a PDF: by its Content-Type, or by the ``%PDF-`` signature within its
    first 1,024 bytes (where readers look for it) when the type says nothing."""
    mimetype = (ctype or "").split(";")[0].strip().lower()
    if mimetype in PDF_TYPES:
        return True
    return mimetype in _GENERIC_TYPES and b"%PDF-" in content[:1024]


@dataclass(slots=True)
class DocumentResult:
    """What a document holds: its text (pages joined by line breaks), title, declared language,
    link targets as written (not resolved), page count, and whether the text was cut
    (``max.pages`` or ``max.text``)."""

    text: str = ""
    title: str = ""
    lang: str = ""
    links: list[str] = field(default_factory=list)
    pages: int = 0
    cut: bool = False


class DocumentError(Exception):
    """A document could not be read; ``cause`` is one of the ``document.*`` causes (module
    docstring)."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


# --- in the worker ------------------------------------------------------------------------------

def _utf16(buf, n: int) -> str:
    return bytes(buf)[: max(0, n - 2)].decode("utf-16-le", "replace")


def extract_pdf(data: bytes, max_pages: int = 1000, max_text: int = 1_000_000) -> DocumentResult:
    """Read a PDF with PDFium (module docstring). Raises :class:`DocumentError`
    (``document.unreadable``) when PDFium refuses it. Runs in the worker process: called in the
    parser's own process it would have no limit."""
    import ctypes

    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    tail = data[-TAIL_BYTES:]
    if b"%%EOF" not in tail:
        raise DocumentError(CAUSE_TRUNCATED, f"no %%EOF in its last {len(tail)} bytes: the file "
                            f"is cut short ({len(data)} bytes)")
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise DocumentError(CAUSE_UNREADABLE, f"PDFium: {exc}") from exc
    try:
        out = DocumentResult(pages=len(doc))
        title = (doc.get_metadata_value("Title") or "")[:MAX_TITLE].strip()
        out.title = title.replace("\x00", "")
        n = raw.FPDFCatalog_GetLanguage(doc.raw, None, 0)
        if 2 < n < 1024:  # bytes of UTF-16LE with its terminating NUL
            buf = (ctypes.c_ushort * ((n + 1) // 2))()
            raw.FPDFCatalog_GetLanguage(doc.raw, buf, n)
            out.lang = _utf16(buf, n).strip()
        parts, size = [], 0
        pages = out.pages if max_pages < 0 else min(out.pages, max_pages)
        out.cut = pages < out.pages
        seen = set()
        for i in range(pages):
            try:
                page = doc[i]
            except pdfium.PdfiumError as exc:
                raise DocumentError(CAUSE_UNREADABLE, f"page {i + 1} of {out.pages} cannot be "
                                    f"loaded (PDFium: {exc})") from exc
            try:
                _links(raw, doc, page, out.links, seen)
                if max_text < 0 or size < max_text:
                    textpage = page.get_textpage()
                    try:
                        text = textpage.get_text_bounded()
                    finally:
                        textpage.close()
                    text = text.replace("\r\n", "\n").replace("\x00", "")
                    parts.append(text)
                    size += len(text)
            finally:
                page.close()
        text = "\n".join(parts)
        if 0 <= max_text < len(text):
            text, out.cut = text[:max_text], True
        out.text = text
        return out
    finally:
        doc.close()


def _links(raw, doc, page, links: list[str], seen: set) -> None:
    """The URI actions of ``page``'s link annotations, appended to ``links`` once each."""
    import ctypes

    pos, link = ctypes.c_int(0), raw.FPDF_LINK()
    while len(links) < MAX_LINKS and raw.FPDFLink_Enumerate(page.raw, ctypes.byref(pos),
                                                            ctypes.byref(link)):
        action = raw.FPDFLink_GetAction(link)
        if not action or raw.FPDFAction_GetType(action) != raw.PDFACTION_URI:
            continue
        n = raw.FPDFAction_GetURIPath(doc.raw, action, None, 0)
        if not 1 < n <= 8192:
            continue
        buf = ctypes.create_string_buffer(n)
        raw.FPDFAction_GetURIPath(doc.raw, action, buf, n)
        uri = bytes(buf)[: n - 1].decode("utf-8", "replace").strip()
        if uri and uri not in seen:
            seen.add(uri)
            links.append(uri)


def _read_exact(stream, n: int) -> bytes | None:
    data = stream.read(n)
    return data if data is not None and len(data) == n else None


def _write(stream, obj: Any) -> None:
    body = msgpack.packb(obj, use_bin_type=True)
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def worker_main(cpu: int, memory_mb: int) -> None:
    """The worker's loop: limits set once its libraries are loaded, then one document per frame
    (``{"data", "max_pages", "max_text"}``) until its standard input ends. A failure PDFium reports
    leaves it running; running out of memory ends it (what was half-built is not to be trusted)."""
    import pypdfium2  # noqa: F401 - loaded before the address space is limited

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not break the frames
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        head = _read_exact(stdin, _HEADER.size)
        if head is None:
            return
        body = _read_exact(stdin, _HEADER.unpack(head)[0])
        if body is None:
            return
        job = msgpack.unpackb(body, raw=False)
        if cpu > 0:
            used = resource.getrusage(resource.RUSAGE_SELF)
            soft = int(used.ru_utime + used.ru_stime) + 1 + cpu
            resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        try:
            res = extract_pdf(job["data"], job["max_pages"], job["max_text"])
            _write(stdout, {"ok": True, "text": res.text, "title": res.title, "lang": res.lang,
                            "links": res.links, "pages": res.pages, "cut": res.cut})
        except DocumentError as exc:
            _write(stdout, {"ok": False, "cause": exc.cause, "message": str(exc)})
        except MemoryError:
            try:
                _write(stdout, {"ok": False, "cause": CAUSE_MEMORY,
                                "message": f"out of memory (limit {memory_mb} MB)"})
            finally:
                os._exit(3)
        except Exception as exc:  # noqa: BLE001 - PDFium's wrapper failing on a broken file
            _write(stdout, {"ok": False, "cause": CAUSE_UNREADABLE,
                            "message": f"{type(exc).__name__}: {exc}"})


# --- in the parser ------------------------------------------------------------------------------

class DocumentPool:
    """The parser task's document worker (module docstring): started on first use, replaced after
    a timeout, a crash or ``max.documents`` documents. Not thread-safe: one parser, one pool."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.timeout = C.get_duration(conf, TIMEOUT_KEY, 30.0)
        self.cpu = C.get_int(conf, CPU_KEY, 20)
        self.memory_mb = C.get_int(conf, MEMORY_KEY, 512)
        self.max_pages = C.get_int(conf, MAX_PAGES_KEY, 1000)
        self.max_text = C.get_int(conf, MAX_TEXT_KEY, 1_000_000)
        self.max_docs = C.get_int(conf, MAX_DOCS_KEY, 500)
        if self.timeout <= 0:
            raise ValueError(f"{TIMEOUT_KEY} must be positive, got {self.timeout}")
        self._proc: subprocess.Popen | None = None
        self._served = 0
        #: workers started, and replaced after each cause (counters for the bolt's metrics)
        self.started = 0
        self.failures: dict[str, int] = {}

    # the worker --------------------------------------------------------------------------------
    def _start(self) -> subprocess.Popen:
        src = str(Path(__file__).resolve().parents[2])  # the folder that holds owler/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        code = ("import sys; from owler.parse.documents import worker_main; "
                "worker_main(int(sys.argv[1]), int(sys.argv[2]))")
        proc = subprocess.Popen([sys.executable, "-c", code, str(self.cpu), str(self.memory_mb)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                close_fds=True)
        self._proc, self._served = proc, 0
        self.started += 1
        return proc

    def _stop(self) -> int | None:
        """Kill the worker (if still running) and reap it; its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not refused
            return None

    def close(self) -> None:
        self._stop()

    @property
    def counters(self) -> dict[str, int]:
        """``documents/workers_started`` and ``documents/<cause>`` per failure cause (the bolts'
        metrics)."""
        out = {"documents/workers_started": self.started}
        out.update({f"documents/{cause}": n for cause, n in self.failures.items()})
        return out

    def __del__(self) -> None:
        try:
            self._stop()
        except Exception:  # noqa: BLE001 - at interpreter exit
            pass

    # one document ------------------------------------------------------------------------------
    def extract(self, data: bytes) -> DocumentResult:
        """The document read by the worker; raises :class:`DocumentError` with its cause."""
        try:
            return self._extract(data)
        except DocumentError as exc:
            self.failures[exc.cause] = self.failures.get(exc.cause, 0) + 1
            raise

    def _extract(self, data: bytes) -> DocumentResult:
        proc = self._proc
        if proc is None or proc.poll() is not None or self._served >= self.max_docs > 0:
            self._stop()
            proc = self._start()
        self._served += 1
        deadline = time.monotonic() + self.timeout
        frame = msgpack.packb({"data": data, "max_pages": self.max_pages,
                               "max_text": self.max_text}, use_bin_type=True)
        try:
            self._send(proc, _HEADER.pack(len(frame)) + frame, deadline)
            head = self._recv(proc, _HEADER.size, deadline)
            size = _HEADER.unpack(head)[0]
            if size > _MAX_FRAME:
                raise DocumentError(CAUSE_CRASHED, f"the worker sent a frame of {size} bytes")
            reply = msgpack.unpackb(self._recv(proc, size, deadline), raw=False)
        except DocumentError:
            self._stop()
            raise
        if not reply.get("ok"):
            if reply.get("cause") == CAUSE_MEMORY:
                self._stop()
            raise DocumentError(reply.get("cause") or CAUSE_UNREADABLE,
                                reply.get("message") or "unreadable")
        return DocumentResult(text=reply["text"], title=reply["title"], lang=reply["lang"],
                              links=list(reply["links"]), pages=reply["pages"], cut=reply["cut"])

    def _send(self, proc: subprocess.Popen, data: bytes, deadline: float) -> None:
        fd, view, sent = proc.stdin.fileno(), memoryview(data), 0
        while sent < len(data):
            self._wait(proc, fd, select.POLLOUT, deadline)
            try:
                sent += os.write(fd, view[sent: sent + 1024 * 1024])
            except (BrokenPipeError, OSError):
                raise self._died(proc) from None

    def _recv(self, proc: subprocess.Popen, n: int, deadline: float) -> bytes:
        fd, chunks, got = proc.stdout.fileno(), [], 0
        while got < n:
            self._wait(proc, fd, select.POLLIN, deadline)
            chunk = os.read(fd, min(n - got, 1024 * 1024))
            if not chunk:
                raise self._died(proc)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _wait(self, proc: subprocess.Popen, fd: int, event: int, deadline: float) -> None:
        poller = select.poll()
        poller.register(fd, event | select.POLLHUP | select.POLLERR)
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            raise DocumentError(CAUSE_TIMEOUT,
                                f"not read within {self.timeout:g} s (parser.documents.timeout);"
                                " its worker was killed")

    def _died(self, proc: subprocess.Popen) -> DocumentError:
        """The error for a worker that closed its pipe, by its exit status and its peak resident
        memory (a native library that cannot allocate aborts: PDFium does so at ``RLIMIT_AS``)."""
        code, peak_mb = None, 0.0
        end = time.monotonic() + 5
        while code is None and time.monotonic() < end:
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already
                code = proc.returncode
                break
            if pid:
                code = os.waitstatus_to_exitcode(status)
                proc.returncode, peak_mb = code, usage.ru_maxrss / 1024
            else:
                time.sleep(0.01)
        if code == -signal.SIGXCPU:
            return DocumentError(CAUSE_CPU, f"more than {self.cpu} s of CPU "
                                 "(parser.documents.cpu); its worker was ended by the kernel")
        if code == 3:
            return DocumentError(CAUSE_MEMORY, f"out of memory (parser.documents.memory.mb "
                                 f"{self.memory_mb})")
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            if self.memory_mb > 0 and peak_mb >= MEMORY_SHARE * self.memory_mb:
                return DocumentError(CAUSE_MEMORY, f"its worker died of {name} with "
                                     f"{peak_mb:.0f} MB resident, at its limit of "
                                     f"{self.memory_mb} MB (parser.documents.memory.mb)")
            return DocumentError(CAUSE_CRASHED, f"its worker died of {name}")
        return DocumentError(CAUSE_CRASHED, f"its worker exited with status {code}")


def from_conf(conf: Mapping[str, Any]) -> DocumentPool | None:
    """The pool when ``parser.documents.enabled`` (true), else None (documents are recorded by
    their MIME type only, as before)."""
    return DocumentPool(conf) if C.get_bool(conf, ENABLED_KEY, True) else None
