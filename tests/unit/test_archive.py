"""owler.warc.crawl.archiver.Archiver: the fetcher's WARC output on a thread of its own, on real
files: pages handed back in order once written, a page that cannot be written handed back as lost,
rotation on ticks, a close that writes what is queued. (Streamed to S3: tests/integration/test_s3.py.)"""

from __future__ import annotations

import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler import wire
from owler.constants import CAPTURE_DATE, CAPTURE_DIGEST
from owler.warc.crawl.archiver import Archiver, Page
from tests.component.test_crawl_bolts import PAGE, page_md


#: seconds after which something awaited counts as never happening (a hang), not a speed bound
HANG = 60.0


class _Counter(Counter):
    def update_one(self, name: str, n: int) -> None:
        self[name] += n


class Handed:
    """What an Archiver hands back: the tokens of stored and lost pages, in order."""

    def __init__(self) -> None:
        self.stored: list = []
        self.lost: list = []
        self.counts = _Counter()
        self.reports: list[str] = []
        self._cond = threading.Condition()

    def archiver(self, conf: dict, partition: str = "00") -> Archiver:
        return Archiver(conf, partition, self._on_stored, self._on_lost,
                        self.counts.update_one, self.reports.append)

    def _on_stored(self, page: Page) -> None:
        with self._cond:
            self.stored.append(page.token)
            self._cond.notify_all()

    def _on_lost(self, page: Page, reason: str) -> None:
        with self._cond:
            self.lost.append((page.token, reason))
            self._cond.notify_all()

    def wait(self, n: int, timeout: float = HANG) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.stored) + len(self.lost) >= n, timeout), \
                f"{n} pages not handed back within {timeout:g} s: {self.stored}, {self.lost}"


@pytest.fixture
def handed():
    return Handed()


def page(i: int, md: dict | None = None) -> Page:
    return Page(f"http://example.com/p{i}", PAGE + b"%d" % i, md or page_md(), i)


def records(directory) -> list[tuple[str, str | None]]:
    out = []
    for f in sorted(directory.glob("*.warc.gz")):
        with open(f, "rb") as fh:
            out += [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"))
                    for r in ArchiveIterator(fh, check_digests="raise")]
    return out


def test_pages_are_handed_back_in_order_once_written(handed, tmp_path):
    a = handed.archiver({"warc.dir": str(tmp_path)})
    for i in range(5):
        a.submit(page(i))
    handed.wait(5)
    assert handed.stored == [0, 1, 2, 3, 4] and not handed.lost
    assert list(tmp_path.glob("*.open"))  # written (flushed), the file still open
    assert handed.counts["records"] == 5 and handed.counts["bytes"] > 5 * len(PAGE) // 10
    assert a.pending == 0
    a.close()
    assert not list(tmp_path.glob("*.open"))
    got = records(tmp_path)
    assert got[0][0] == "warcinfo"
    assert got[1:] == [(t, f"http://example.com/p{i}") for i in range(5)
                       for t in ("request", "response")]


def test_a_page_that_cannot_be_written_is_lost_and_the_next_goes_on(handed, tmp_path):
    a = handed.archiver({"warc.dir": str(tmp_path)})
    a.submit(page(0, {**page_md(), wire.RAW_FETCH_TIME: ["yesterday"]}))
    a.submit(page(1))
    handed.wait(2)
    a.close()
    assert handed.stored == [1]
    (token, reason), = handed.lost
    assert token == 0
    assert reason.startswith("cannot write WARC records for http://example.com/p0: ValueError")
    assert handed.counts["write_failed"] == 1 and handed.counts["records"] == 1
    assert [u for t, u in records(tmp_path) if t == "response"] == ["http://example.com/p1"]


def test_a_revisit_is_counted_as_one(handed, tmp_path):
    a = handed.archiver({"warc.dir": str(tmp_path)})
    md = {**page_md(), wire.RAW_REVISIT: ["server-not-modified"],
          CAPTURE_DIGEST: ["sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
          CAPTURE_DATE: ["2026-11-20T10:00:00Z"]}
    a.submit(page(0, md))
    handed.wait(1)
    a.close()
    assert handed.stored == [0] and handed.counts["revisits"] == 1
    assert [t for t, _ in records(tmp_path)] == ["warcinfo", "request", "revisit"]


def test_a_tick_closes_a_file_older_than_the_rotation_time(handed, tmp_path, monkeypatch):
    from owler.warc.crawl import archiver as archive

    now = [time.time()]  # the clock of the archiver and of its writer, moved by the test
    monkeypatch.setattr(archive, "time", SimpleNamespace(time=lambda: now[0]))
    a = handed.archiver({"warc.dir": str(tmp_path), "warc.rotation.time": 10})
    a.writer.clock = lambda: now[0]
    try:
        a.submit(page(0))
        handed.wait(1)
        now[0] += 9.5
        a.tick()  # too young
        a.submit(page(1))  # handed back once the tick before it was handled (one queue)
        handed.wait(2)
        assert len(list(tmp_path.glob("*.open"))) == 1 and not list(tmp_path.glob("*.warc.gz"))
        now[0] += 0.5
        a.tick()  # ten seconds old: closed
        deadline = time.monotonic() + HANG
        while list(tmp_path.glob("*.open")):
            assert time.monotonic() < deadline, f"the file was not closed within {HANG:g} s"
            time.sleep(0.05)
        assert len(list(tmp_path.glob("*.warc.gz"))) == 1
        assert [u for t, u in records(tmp_path) if t == "response"] == [
            "http://example.com/p0", "http://example.com/p1"]
    finally:
        a.close()


def test_close_writes_what_is_queued_then_refuses_more(handed, tmp_path):
    a = handed.archiver({"warc.dir": str(tmp_path)})
    for i in range(20):
        a.submit(page(i))
    a.close()
    assert handed.stored == list(range(20))
    assert len([t for t, _ in records(tmp_path) if t == "response"]) == 20
    with pytest.raises(RuntimeError, match="closed"):
        a.submit(page(21))
    a.tick()  # nothing happens
    a.close()  # twice is fine


def test_real_pages_come_out_of_the_archive_as_they_went_in(handed, tmp_path):
    # HTML responses of the Common Crawl and dolma samples (tests/data/warc/NOTICE), with the
    # headers their servers sent, archived and read back with warcio, digests checked
    from tests.realpages import CRAWL_WARCS, warc_html

    pages = [p for name in CRAWL_WARCS for p in warc_html(name)]
    assert len(pages) >= 20
    a = handed.archiver({"warc.dir": str(tmp_path)})
    for i, (url, headers, body) in enumerate(pages):
        a.submit(Page(url, body, {**page_md(), wire.RAW_HEADERS: wire.encode_headers(headers)}, i))
    handed.wait(len(pages))
    a.close()
    assert handed.stored == list(range(len(pages))) and not handed.lost
    got = []
    for f in sorted(tmp_path.glob("*.warc.gz")):
        with open(f, "rb") as fh:
            got += [(r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
                    for r in ArchiveIterator(fh, check_digests="raise") if r.rec_type == "response"]
    assert got == [(url, body) for url, _, body in pages]
