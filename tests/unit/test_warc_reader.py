"""owler.warc.format.reader: records with their exact input bytes, from every layout and through
damage; and owler.warc.warc2warc.record_as_page: what the pipeline makes of an archived
response."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler import wire
from owler.constants import Status
from owler.warc.format.reader import InputProblem, InputRecord, WARCReadError, iter_records
from owler.warc.warc2warc.record_as_page import RecordParser, parse_raw, warc_date_epoch
from tests import warcgen as G

DATA = Path(__file__).resolve().parents[1] / "data" / "warc"


def read(data: bytes, start: int = 0, chunk: int = 1 << 20, **kw):
    recs, probs = [], []
    for item in iter_records(io.BytesIO(data[start:]), start, chunk=chunk, **kw):
        (probs if isinstance(item, InputProblem) else recs).append(item)
    return recs, probs


def decompressed(rec: InputRecord) -> bytes:
    return gzip.decompress(rec.raw) if rec.compressed else rec.raw


@pytest.mark.parametrize("chunk", [7, 4096, 1 << 20])
def test_per_record_gzip_gives_each_member_as_it_is(chunk):
    records = G.site_records("a.example", 4)
    data = G.per_record_gzip(records)
    recs, probs = read(data, chunk=chunk)
    assert not probs
    assert [r.raw for r in recs] == G.members(data)
    assert all(r.compressed for r in recs)
    assert [decompressed(r) for r in recs] == records
    offsets = [r.offset for r in recs]
    assert offsets[0] == 0 and offsets == sorted(offsets)
    for r in recs:  # a reader started at a record's offset sees that record first
        again, _ = read(data, r.offset)
        assert again[0].raw == r.raw and again[0].key == r.key
    assert recs[2].type == "response" and recs[2].target_uri == "http://a.example/page0.html"
    assert recs[2].is_http_response and recs[2].problem is None


def test_uncompressed_file_gives_each_record(tmp_path):
    records = G.site_records("b.example", 3)
    recs, probs = read(b"".join(records), chunk=100)
    assert not probs and [r.raw for r in recs] == records
    assert not any(r.compressed for r in recs)
    assert recs[-1].next_resume == len(b"".join(records))


def test_one_gzip_stream_for_the_whole_file_is_split_into_records():
    records = G.site_records("c.example", 5)
    recs, probs = read(G.one_gzip_stream(records), chunk=512)
    assert [r.raw for r in recs] == records
    assert len({r.key for r in recs}) == len(records)
    assert all(r.resume_offset == 0 for r in recs)
    assert len(probs) == 1 and "several records in one gzip member" in probs[0].message


def test_truncated_file_gives_the_complete_records_then_an_error():
    data = G.per_record_gzip(G.site_records("d.example", 3))
    cut = data[: len(data) - 40]
    seen = []
    with pytest.raises(WARCReadError, match="truncated gzip member"):
        for item in iter_records(io.BytesIO(cut)):
            seen.append(item)
    assert len(seen) == 6  # the 7th (last) member is cut
    plain = b"".join(G.site_records("d.example", 2))
    with pytest.raises(WARCReadError, match="truncated"):
        list(iter_records(io.BytesIO(plain[:-10])))


def test_corrupt_member_in_the_middle_is_skipped_and_reported():
    ms = G.members(G.per_record_gzip(G.site_records("e.example", 3)))
    broken = bytearray(ms[3])
    broken[len(broken) // 2] ^= 0xFF
    broken[len(broken) // 2 + 1] ^= 0xFF
    data = b"".join(ms[:3]) + bytes(broken) + b"".join(ms[4:])
    recs, probs = read(data)
    assert len(recs) == len(ms) - 1
    assert probs and "corrupt gzip member" in probs[0].message or "crc" in probs[0].message.lower()


def test_garbage_between_members_and_padding_at_the_end():
    ms = G.members(G.per_record_gzip(G.site_records("f.example", 2)))
    data = ms[0] + b"GARBAGE" * 10 + b"".join(ms[1:]) + b"\x00" * 64
    recs, probs = read(data, chunk=50)
    assert len(recs) == len(ms)
    assert len(probs) == 1 and "garbage" in probs[0].message


def test_warc_018_heads_are_read_and_digests_checked():
    records = G.site_records("g.example", 2, version="WARC/0.18")
    recs, _ = read(G.per_record_gzip(records))
    assert [r.version for r in recs] == ["WARC/0.18"] * len(records)
    bad = G.record("response", "http://g.example/x", G.http_response(b"<p>x</p>"),
                   bad_payload_digest=True)
    recs, _ = read(bad)
    assert "payload digest mismatch" in recs[0].problem
    tampered = bytearray(G.record("response", "http://g.example/y", G.http_response(b"<p>y</p>")))
    tampered[-10] = ord("Z")
    recs, _ = read(bytes(tampered))
    assert "block digest mismatch" in recs[0].problem


def test_sloppy_record_ends_are_read_by_the_content_length():
    """Writers that end a record with one CRLF, or with an extra LF (pywb's example-extra.warc):
    the record is whole by its Content-Length; the copy gets the standard CRLF CRLF."""
    recs = [G.record("response", f"http://x.example/{i}", G.http_response(b"<p>%d</p>" % i))
            for i in range(3)]
    data = recs[0][:-4] + b"\r\n" + recs[1][:-4] + b"\n\r\n\r\n" + recs[2][:-4] + b"\r\n"
    got, probs = read(data)
    assert [decompressed(r) for r in got] == recs
    assert len(probs) == 3 and all("line-end" in p.message for p in probs)
    # stray bytes that are not line ends: the record is skipped, as before
    got, probs = read(recs[0][:-4] + b"m\r\n" + recs[1])
    assert [decompressed(r) for r in got] == [recs[1]] and "does not end" in probs[0].message


def test_a_record_over_the_size_limit_is_skipped():
    big = G.record("resource", "http://h.example/big", b"x" * 300_000)
    small = G.record("resource", "http://h.example/small", b"y")
    recs, probs = read(G.per_record_gzip([big, small]), max_record=100_000, chunk=4096)
    assert [r.target_uri for r in recs] == ["http://h.example/small"]
    assert "over 100000 bytes" in probs[0].message


def test_not_a_warc_file():
    with pytest.raises(WARCReadError, match="neither a gzip member nor a WARC record"):
        list(iter_records(io.BytesIO(b"<html>not a warc</html>")))


@pytest.mark.parametrize("name", ["fb.warc.gz", "example.com.warc", "test-crawl_0.warc.gz"])
def test_real_files_agree_with_warcio(name):
    data = (DATA / name).read_bytes()
    recs, probs = read(data)
    assert not probs
    with open(DATA / name, "rb") as fh:
        theirs = [(r.rec_headers.get_header("WARC-Type"),
                   (r.rec_headers.get_header("WARC-Target-URI") or ""))
                  for r in ArchiveIterator(fh)]
    assert [(r.type, r.target_uri) for r in recs] == theirs
    if name.endswith(".gz"):
        assert b"".join(r.raw for r in recs) == data  # every byte of the file, in order


# -- what the pipeline makes of a response ---------------------------------------------------------

def outcome(block: bytes, url: str = "http://x.example/p", conf=None, **kw):
    raw = gzip.compress(G.record("response", url, block, **kw))
    return RecordParser(conf or {}).outcome(url, raw, {"warc.file.name": ["f"]})


def test_a_200_response_is_a_page_with_its_decoded_body():
    body = G.page("hello", ["/a"])
    out = outcome(G.http_response(gzip.compress(body), headers=[
        ("Content-Type", "text/html"), ("Content-Encoding", "gzip")], chunked=True))
    assert out.kind == "page" and out.status == Status.FETCHED
    assert out.content == body
    assert out.metadata["fetch.statusCode"] == ["200"]


def test_redirects_errors_and_304():
    out = outcome(G.http_response(b"", "301 Moved", [("Location", "/new")]))
    assert out.status == Status.REDIRECTION and out.outlinks == ["http://x.example/new"]
    assert out.metadata["_redirTo"] == ["http://x.example/new"]
    assert outcome(G.http_response(b"nope", "404 Not Found")).status == Status.FETCH_ERROR
    assert outcome(G.http_response(b"", "304 Not Modified")).status == Status.FETCHED


def test_damaged_records_get_an_error_with_its_cause():
    out = outcome(G.http_response(b"\x1b\x00br", headers=[("Content-Encoding", "br")]))
    assert out.status == Status.ERROR and out.metadata["error.cause"] == ["content_encoding"]
    assert "br" in out.metadata["error.message"][0]
    out = outcome(G.http_response(b"<p>x</p>"), bad_payload_digest=True)
    assert out.status == Status.ERROR and out.metadata["error.cause"] == ["warc.digest"]
    out = outcome(b"this is not HTTP\r\n\r\n")
    assert out.status == Status.ERROR and out.metadata["error.cause"] == ["warc.http"]
    out = outcome(G.http_response(b"x" * 1000), conf={"http.content.limit": 10})
    assert out.kind == "page" and len(out.content) == 10 and out.metadata["http.trimmed"]



def test_digests_the_spouts_reader_checked_are_not_hashed_again():
    """The spout's reader checks the digests of what it reads and says what it found
    (``_raw.digests``); the parser takes that instead of hashing the record a second time."""
    url = "http://x.example/p"
    bad = gzip.compress(G.record("response", url, G.http_response(b"<p>x</p>"),
                                 bad_payload_digest=True))
    good = gzip.compress(G.record("response", url, G.http_response(b"<p>x</p>")))
    md = {"warc.file.name": ["f"]}
    parser = RecordParser({})
    assert parser.outcome(url, bad, {**md, wire.RAW_DIGESTS: [""]}).status == Status.FETCHED
    out = parser.outcome(url, good, {**md, wire.RAW_DIGESTS: ["payload digest mismatch (x)"]})
    assert out.status == Status.ERROR and out.metadata["error.cause"] == ["warc.digest"]
    assert out.metadata["error.message"] == ["payload digest mismatch (x)"]
    assert parser.outcome(url, bad, md).status == Status.ERROR  # not checked before: checked now
    off = RecordParser({"warc2warc.verify.digests": False})  # not checked at all
    assert off.outcome(url, bad, md).status == Status.FETCHED
    # what the reader finds is what the feed passes on
    recs = [r for r in iter_records(io.BytesIO(bad)) if isinstance(r, InputRecord)]
    assert recs[0].problem.startswith("payload digest mismatch")

def stored(body: bytes, *headers: tuple[str, str]) -> bytes:
    """An HTTP response block whose headers are kept as the server sent them while the body is
    stored as given (de-chunked, decoded), as wget, pywb and Common Crawl stored them."""
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + body


def test_a_body_stored_de_chunked_is_read_as_it_is():
    body = G.page("hello", ["/a", "/b"])
    out = outcome(stored(body, ("Transfer-Encoding", "chunked")))
    assert out.status == Status.FETCHED and out.content == body
    assert out.metadata["warc.lenient"] == ["not-chunked"]
    # a body that starts like a chunk size but is not chunked further on
    text = b"abc\r\n<html><a href='/x'>x</a>" + b"<p>text</p>" * 300 + b"</html>"
    out = outcome(stored(text, ("Transfer-Encoding", "chunked")))
    assert out.content == text and out.metadata["warc.lenient"] == ["not-chunked"]
    # really chunked: de-chunked, nothing noted; extensions, bare LF and a cut last chunk
    for block in (b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"5\nhello\n6\n world\n0\n\n",
                  b"5\r\nhello\r\n6\r\n wor"):
        out = outcome(stored(block, ("Transfer-Encoding", "chunked")))
        assert out.content.startswith(b"hello wor") and "warc.lenient" not in out.metadata
    # chunked up to a break: the chunks, then the rest as it is
    out = outcome(stored(b"2\r\nab\r\n2\r\ncd\r\nzz rest", ("Transfer-Encoding", "chunked")))
    assert out.content == b"abcdzz rest" and out.metadata["warc.lenient"] == ["chunks-broken"]


def test_a_body_stored_decoded_is_read_as_it_is():
    body = G.page("hello", ["/a"])
    for coding in ("gzip", "x-gzip", "deflate", "br", "gzip, br", "zstd"):
        out = outcome(stored(body, ("Content-Encoding", coding)))
        assert out.status == Status.FETCHED and out.content == body, coding
        assert out.metadata["warc.lenient"] == ["not-encoded:" + coding.replace(" ", "")], coding
    # both at once, as Common Crawl stored many records
    out = outcome(stored(body, ("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")))
    assert out.content == body
    assert out.metadata["warc.lenient"] == ["not-chunked", "not-encoded:gzip"]
    # UTF-16 text has NUL bytes and is still text
    utf16 = "\ufeff<html>héllo</html>".encode("utf-16")
    assert outcome(stored(utf16, ("Content-Encoding", "gzip"))).content == utf16
    # corrupt compressed data is not text: still an error, never a page of garbage
    junk = gzip.compress(body)[:10] + bytes(range(256))
    out = outcome(stored(b"\x00" + junk, ("Content-Encoding", "gzip")))
    assert out.status == Status.ERROR and out.metadata["error.cause"] == ["content_encoding"]


def test_brotli_bodies_are_decoded_within_the_limit():
    import brotli

    body = G.page("hello", ["/a"])
    out = outcome(stored(brotli.compress(body), ("Content-Encoding", "br")))
    assert out.status == Status.FETCHED and out.content == body
    assert "warc.lenient" not in out.metadata
    bomb = brotli.compress(b"\0" * 5_000_000)
    out = outcome(stored(bomb, ("Content-Encoding", "br")),
                  conf={"http.max.decompressed.size": 1_000_000})
    assert out.status == Status.ERROR and out.metadata["error.cause"] == ["too_large_decompressed"]
    cut = brotli.compress(bytes(range(256)) * 400)[:-40]  # a truncated stream: what decodes
    out = outcome(stored(cut, ("Content-Encoding", "br")))
    assert out.status == Status.FETCHED and 0 < len(out.content) < 256 * 400


def test_other_records_are_only_archived():
    raw = G.record("request", "http://x.example/", b"GET / HTTP/1.1\r\n\r\n")
    assert RecordParser({}).outcome("http://x.example/", raw, {}).kind == "archive"
    assert parse_raw(gzip.compress(raw))[1]["warc-type"] == "request"


def test_warc_dates():
    assert warc_date_epoch("2024-05-01T12:00:00Z") == 1714564800.0
    assert warc_date_epoch("2024-05-01T12:00:00.5Z") == 1714564800.5
    assert warc_date_epoch("garbage") is None
