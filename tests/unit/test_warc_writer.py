"""WARCWriter / records: everything is read back with warcio (digests checked, ``raise`` mode)."""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import shutil
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from owler import wire
from owler.warc import WARCFormatError, WARCWriter
from owler.warc import recover_open_files, scan_members
from owler.warc.format import serialize as R
from owler.warc.storage.s3_upload import open_output

DATA = Path(__file__).resolve().parents[1] / "data" / "warc"
T0 = 1_714_564_800.25  # 2024-05-01T12:00:00.25Z
REQ = b"GET /page HTTP/1.1\r\nHost: example.com\r\nUser-Agent: OWLer-py/0.1\r\n\r\n"
HTML = b"<!doctype html><html><head><title>t</title></head><body>" + b"<p>hello world</p>" * 200


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def exchange(w: WARCWriter, url: str = "http://example.com/page", payload: bytes = HTML,
             request: bytes | None = REQ, **kw) -> int:
    args = dict(fetch_time=T0, request_line_and_headers=request, status_line="HTTP/1.1 200 OK",
                response_headers=[("Content-Type", "text/html; charset=utf-8")], payload=payload)
    args.update(kw)
    return w.write_exchange(url, **args)


def read_all(path: Path) -> list[dict]:
    """Every record, fully read through warcio with digest checking that raises on mismatch."""
    out = []
    with open(path, "rb") as f:
        it = ArchiveIterator(f, check_digests="raise")
        for rec in it:
            d = {"type": rec.rec_type, "headers": dict(rec.rec_headers.headers),
                 "http": rec.http_headers}
            d["payload"] = rec.content_stream().read()  # reads through the digest checker
            d["digest_passed"] = rec.digest_checker.passed
            d["offset"] = it.get_record_offset()  # (reads to the end of the record)
            out.append(d)
    return out


def finals(d: Path) -> list[Path]:
    return sorted(d.glob("*.warc.gz"))


# -- records.py ---------------------------------------------------------------------------------

@pytest.mark.parametrize("url,expected", [
    ("http://example.com/a?b=c&d=%20e#f", "http://example.com/a?b=c&d=%20e#f"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/caf\u00e9?q=\u00fc", "http://example.com/caf%C3%A9?q=%C3%BC"),
    ("http://b\u00fccher.de/\u00e4", "http://xn--bcher-kva.de/%C3%A4"),
    ("http://user@b\u00fccher.de:8080/x", "http://user@xn--bcher-kva.de:8080/x"),
    ("http://example.com/100%", "http://example.com/100%25"),
    ("http://example.com/%zz%41", "http://example.com/%25zz%41"),
    ("http://example.com/a|b{c}\"d\"<e>", "http://example.com/a%7Cb%7Bc%7D%22d%22%3Ce%3E"),
    ("http://example.com/x\r\nWARC-Type: evil", "http://example.com/x%0D%0AWARC-Type:%20evil"),
])
def test_target_uri(url, expected):
    assert R.target_uri(url) == expected


def test_target_uri_empty_raises():
    with pytest.raises(WARCFormatError):
        R.target_uri("")


def test_warc_date_precisions():
    assert R.warc_date(T0) == "2024-05-01T12:00:00.250000Z"
    assert R.warc_date(T0, "s") == "2024-05-01T12:00:00Z"
    assert R.warc_date(1.9999999) == "1970-01-01T00:00:02.000000Z"
    with pytest.raises(WARCFormatError):
        R.warc_date(T0, "ms")


@pytest.mark.parametrize("line,expected,proto", [
    ("HTTP/1.1 200 OK", "HTTP/1.1 200 OK", None),
    ("HTTP/1.0 404 Not Found\r\n", "HTTP/1.0 404 Not Found", None),
    ("HTTP/2 200", "HTTP/1.1 200", "h2"),
    ("HTTP/2.0 301 Moved", "HTTP/1.1 301 Moved", "h2"),
    ("200 OK", "HTTP/1.1 200 OK", None),
])
def test_status_line(line, expected, proto):
    assert R.http_status_line(line) == (expected, proto)


def test_status_line_garbage_raises():
    with pytest.raises(WARCFormatError):
        R.http_status_line("<html>")


def test_header_fixup_rules():
    head = R.http_response_head("HTTP/1.1 200 OK", [
        ("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip"),
        ("Content-Length", "999"), ("X-Evil", "a\r\nb")], 5)
    assert head == (b"HTTP/1.1 200 OK\r\nX-Crawler-Transfer-Encoding: chunked\r\n"
                    b"X-Crawler-Content-Encoding: gzip\r\nX-Crawler-Content-Length: 999\r\n"
                    b"X-Evil: a  b\r\nContent-Length: 5\r\n\r\n")
    kept = R.http_response_head("HTTP/1.1 200 OK", [("Content-Encoding", "br"),
                                                    ("Content-Length", "5"), ("Content-Length", "5")],
                                5, payload_decoded=False)
    assert kept == (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 5\r\n"
                    b"X-Crawler-Content-Length: 5\r\n\r\n")


def test_request_head_termination():
    assert R.http_request_head(b"GET / HTTP/1.1\r\nHost: a") == b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert R.http_request_head(b"GET / HTTP/1.1\r\n") == b"GET / HTTP/1.1\r\n\r\n"
    assert R.http_request_head(REQ) == REQ
    with pytest.raises(WARCFormatError):
        R.http_request_head(b"  ")


# -- writing and reading back -------------------------------------------------------------------

def test_exchange_roundtrip_types_order_linking(tmp_path):
    clock = Clock()
    with WARCWriter(tmp_path, partition="00", clock=clock, operator="OWS", extra_info={"robots": "obey"}) as w:
        n = exchange(w, ip="192.0.2.7", extra_headers={"OWS.URL-ID": "abc", "OWS.ROBOTS": ["NOAI", "NOINDEX"]},
                     identified_payload_type="text/html")
        assert n > 0 and w.current_path.name.endswith(".warc.gz.open")
        assert w.last_record.filename == w.current_path.name[:-5]
    files = finals(tmp_path)
    assert [f.name for f in files] == ["OWLER-20240501120000-00-00000.warc.gz"]
    assert not list(tmp_path.glob("*.open"))
    recs = read_all(files[0])
    assert [r["type"] for r in recs] == ["warcinfo", "request", "response"]
    assert all(r["digest_passed"] is not False for r in recs)
    info, req, resp = (r["headers"] for r in recs)
    assert info["WARC-Filename"] == files[0].name
    assert b"operator: OWS\r\n" in recs[0]["payload"] and b"isPartOf: OWLER\r\n" in recs[0]["payload"]
    assert b"robots: obey\r\n" in recs[0]["payload"]
    assert req["WARC-Concurrent-To"] == resp["WARC-Record-ID"]
    assert resp["WARC-Concurrent-To"] == req["WARC-Record-ID"]
    assert req["WARC-Warcinfo-ID"] == resp["WARC-Warcinfo-ID"] == info["WARC-Record-ID"]
    assert resp["WARC-Record-ID"].startswith("<urn:uuid:") and resp["WARC-Record-ID"].endswith(">")
    assert resp["WARC-Date"] == req["WARC-Date"] == "2024-05-01T12:00:00.250000Z"
    assert resp["WARC-IP-Address"] == "192.0.2.7"
    assert resp["Content-Type"] == "application/http;msgtype=response"
    assert resp["OWS.URL-ID"] == "abc" and resp["OWS.ROBOTS"] == "NOAI, NOINDEX"
    assert resp["WARC-Identified-Payload-Type"] == "text/html"
    assert "WARC-Truncated" not in resp
    # digests are the ones we expect, not merely self-consistent
    assert resp["WARC-Payload-Digest"] == R.sha1_b32(HTML)
    assert recs[2]["payload"] == HTML
    assert recs[2]["http"].get_statuscode() == "200"
    assert recs[1]["http"].protocol == "GET"
    assert recs[2]["offset"] == w.last_record.offset
    assert w.stats.records == 3 and w.stats.responses == 1 and w.stats.files_closed == 1
    assert w.stats.bytes == files[0].stat().st_size
    # one gzip member per record; plain gzip reads the whole file
    data = files[0].read_bytes()
    members = 0
    while data:
        d = zlib.decompressobj(31)
        d.decompress(data)
        assert d.eof
        data, members = d.unused_data, members + 1
    assert members == 3
    assert gzip.decompress(files[0].read_bytes()).count(b"WARC/1.1\r\n") == 3


def test_signals_go_in_a_metadata_record_concurrent_to_the_response(tmp_path):
    """What the webmasters' signals said of a page (owler.signals): a metadata record after its
    response, linked to it; the response stays the record the writer points at."""
    import json

    block = '{"purposes":{"ai-train":{"sources":["header.content-usage"],"state":"refused"}}}'
    with WARCWriter(tmp_path, clock=Clock()) as w:
        exchange(w, metadata=block)
        where = w.last_record
        exchange(w, request=None, metadata=block)
        alone = w.last_record
    recs = read_all(finals(tmp_path)[0])
    assert [r["type"] for r in recs] == ["warcinfo", "request", "response", "metadata",
                                         "response", "metadata"]
    assert all(r["digest_passed"] is not False for r in recs)
    for resp, meta in ((recs[2], recs[3]), (recs[4], recs[5])):
        assert meta["headers"]["WARC-Concurrent-To"] == resp["headers"]["WARC-Record-ID"]
        assert meta["headers"]["WARC-Target-URI"] == resp["headers"]["WARC-Target-URI"]
        assert meta["headers"]["WARC-Date"] == resp["headers"]["WARC-Date"]
        assert meta["headers"]["Content-Type"] == "application/json"
        assert json.loads(meta["payload"]) == json.loads(block)
    assert (where.offset, alone.offset) == (recs[2]["offset"], recs[4]["offset"])
    assert where.length == recs[3]["offset"] - recs[2]["offset"]
    assert w.stats.records == 6 and w.stats.responses == 2 and w.stats.requests == 1


def test_digest_check_can_fail(tmp_path):
    """The read-back helper really catches a wrong payload (the tests above can fail)."""
    with WARCWriter(tmp_path) as w:
        exchange(w, request=None)
    path = finals(tmp_path)[0]
    raw = gzip.decompress(path.read_bytes())
    bad = raw.replace(b"hello world", b"hello WORLD", 1)
    path.write_bytes(gzip.compress(bad))
    with pytest.raises(ArchiveLoadFailed):
        read_all(path)


def test_no_request_record_when_none(tmp_path):
    with WARCWriter(tmp_path) as w:
        exchange(w, request=None)
    recs = read_all(finals(tmp_path)[0])
    assert [r["type"] for r in recs] == ["warcinfo", "response"]
    assert "WARC-Concurrent-To" not in recs[1]["headers"]


def test_chunked_and_encoded_headers_renamed_so_readers_do_not_decode(tmp_path):
    payload = b"0\r\n\r\nnot chunked, not gzip"
    with WARCWriter(tmp_path) as w:
        exchange(w, payload=payload, status_line="HTTP/2 200",
                 response_headers=[("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip"),
                                   ("Content-Length", "12")])
    resp = read_all(finals(tmp_path)[0])[2]
    assert resp["payload"] == payload  # warcio would dechunk / gunzip if the headers said so
    h = resp["http"]
    assert h.get_header("X-Crawler-Transfer-Encoding") == "chunked"
    assert h.get_header("X-Crawler-Content-Encoding") == "gzip"
    assert h.get_header("X-Crawler-Content-Length") == "12"
    assert h.get_header("Content-Length") == str(len(payload))
    assert h.get_header("Transfer-Encoding") is None and h.get_header("Content-Encoding") is None
    assert h.protocol == "HTTP/1.1" and resp["headers"]["WARC-Protocol"] == "h2"


def test_odd_urls_written_as_uris(tmp_path):
    urls = {"http://example.com/a b/c": "http://example.com/a%20b/c",
            "https://b\u00fccher.de/stra\u00dfe?x=\u00e9": "https://xn--bcher-kva.de/stra%C3%9Fe?x=%C3%A9"}
    with WARCWriter(tmp_path) as w:
        for u in urls:
            exchange(w, url=u)
    got = [r["headers"]["WARC-Target-URI"] for r in read_all(finals(tmp_path)[0]) if r["type"] == "response"]
    assert got == list(urls.values())


def test_empty_payload(tmp_path):
    with WARCWriter(tmp_path) as w:
        exchange(w, payload=b"", status_line="HTTP/1.1 204 No Content", response_headers=[])
    resp = read_all(finals(tmp_path)[0])[2]
    assert resp["payload"] == b""
    assert resp["headers"]["WARC-Payload-Digest"] == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    assert resp["http"].get_header("Content-Length") == "0"


def test_five_megabyte_payload(tmp_path):
    payload = random.Random(5).randbytes(5 * 1024 * 1024)
    with WARCWriter(tmp_path) as w:
        exchange(w, payload=payload, response_headers=[("Content-Type", "application/octet-stream")])
    resp = read_all(finals(tmp_path)[0])[2]
    assert hashlib.sha1(resp["payload"]).digest() == hashlib.sha1(payload).digest()
    assert resp["digest_passed"] is True


def test_non_ascii_header_bytes_round_trip(tmp_path):
    with WARCWriter(tmp_path) as w:
        exchange(w, request=b"GET / HTTP/1.1\r\nX-Raw: \xe9\xff\r\n\r\n",
                 response_headers=[("X-Latin", "caf\u00e9 \u00ff"), ("X-Wide", "\u20ac"),
                                   ("X-Escaped", b"\xc3\x28".decode("utf-8", "surrogateescape"))])
    raw = gzip.decompress(finals(tmp_path)[0].read_bytes())
    assert b"X-Latin: caf\xe9 \xff\r\n" in raw
    assert b"X-Wide: \xe2\x82\xac\r\n" in raw
    assert b"X-Escaped: \xc3\x28\r\n" in raw
    assert b"X-Raw: \xe9\xff\r\n" in raw
    assert all(r["digest_passed"] is not False for r in read_all(finals(tmp_path)[0]))


def test_truncated_flag(tmp_path):
    with WARCWriter(tmp_path) as w:
        exchange(w, truncated="length", response_headers=[("Content-Length", "9999999")])
    resp = read_all(finals(tmp_path)[0])[2]
    assert resp["headers"]["WARC-Truncated"] == "length"
    assert resp["http"].get_header("X-Crawler-Content-Length") == "9999999"


def test_bad_arguments_write_nothing(tmp_path):
    with WARCWriter(tmp_path) as w:
        with pytest.raises(WARCFormatError):
            exchange(w, truncated="content-limit")
        with pytest.raises(WARCFormatError):
            exchange(w, extra_headers={"WARC-Type": "resource"})
        with pytest.raises(WARCFormatError):
            exchange(w, extra_headers={"X-A": "a\nb"})
        with pytest.raises(WARCFormatError):
            exchange(w, extra_headers={"bad name": "x"})
        with pytest.raises(WARCFormatError):
            exchange(w, status_line="garbage")
        assert w.current_path is None and w.stats.records == 0
    assert list(tmp_path.iterdir()) == []


def test_constructor_validation(tmp_path):
    for kw in ({"partition": "a-b"}, {"prefix": "a/b"}, {"gzip_level": 10},
               {"extra_info": {"bad key": "x"}}, {"date_precision": "ns"}):
        with pytest.raises(ValueError):
            WARCWriter(tmp_path, **kw)


def test_fetch_time_none_uses_clock_and_second_precision(tmp_path):
    with WARCWriter(tmp_path, clock=Clock(T0 + 60), date_precision="s") as w:
        exchange(w, fetch_time=None)
    assert read_all(finals(tmp_path)[0])[2]["headers"]["WARC-Date"] == "2024-05-01T12:01:00Z"


# -- files: naming, rotation, durability --------------------------------------------------------

def test_rotation_by_size(tmp_path):
    rnd = random.Random(1)
    with WARCWriter(tmp_path, partition="3", rotation_size=30_000, clock=Clock()) as w:
        for i in range(10):
            exchange(w, url=f"http://example.com/{i}", payload=rnd.randbytes(12_000))
            if w.current_path is not None:
                assert w.current_path.stat().st_size < 30_000
    files = finals(tmp_path)
    # ~12.3 KB per record: the third record of a file crosses 30,000 bytes -> 3 + 3 + 3 + 1
    assert len(files) == 4 and w.stats.files_closed == 4
    assert [f.name for f in files] == [f"OWLER-20240501120000-3-{i:05d}.warc.gz" for i in range(4)]
    urls = []
    for f in files:
        recs = read_all(f)
        assert recs[0]["type"] == "warcinfo" and recs[0]["headers"]["WARC-Filename"] == f.name
        assert f.stat().st_size >= 30_000 or f == files[-1]
        urls += [r["headers"]["WARC-Target-URI"] for r in recs if r["type"] == "response"]
    assert urls == [f"http://example.com/{i}" for i in range(10)]


def test_rotation_by_time_and_open_suffix(tmp_path):
    clock = Clock()
    w = WARCWriter(tmp_path, rotation_time=600, clock=clock)
    assert w.maybe_rotate() is None  # nothing open yet: no empty file
    exchange(w)
    first = w.current_path
    assert first.name == "OWLER-20240501120000-0-00000.warc.gz.open" and first.exists()
    assert finals(tmp_path) == []
    clock.t += 599
    assert w.maybe_rotate() is None and first.exists()
    closed = w.maybe_rotate(T0 + 600)
    assert closed == tmp_path / "OWLER-20240501120000-0-00000.warc.gz" and closed.exists()
    assert not first.exists() and w.current_path is None
    clock.t = T0 + 3600
    assert w.maybe_rotate() is None
    exchange(w)
    assert w.current_path.name == "OWLER-20240501130000-0-00001.warc.gz.open"
    w.close()
    w.close()  # idempotent
    assert len(finals(tmp_path)) == 2 and not list(tmp_path.glob("*.open"))
    with pytest.raises(ValueError):
        exchange(w)


def test_never_overwrites_existing_files(tmp_path):
    clock = Clock()
    taken = tmp_path / "OWLER-20240501120000-0-00000.warc.gz"
    taken.write_bytes(b"precious")
    (tmp_path / "OWLER-20240501120000-0-00001.warc.gz.open").write_bytes(b"someone's")
    with WARCWriter(tmp_path, clock=clock) as w:
        exchange(w)
    with WARCWriter(tmp_path, clock=clock) as w2:  # a restart within the same second
        exchange(w2)
    assert taken.read_bytes() == b"precious"
    names = [f.name for f in finals(tmp_path)]
    assert names == [f"OWLER-20240501120000-0-{i:05d}.warc.gz" for i in (0, 2, 3)]


def test_flush_each_write_and_fsync_options(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    w = WARCWriter(tmp_path, fsync=True)
    exchange(w)
    assert len(calls) == 1
    # flushed: another reader sees the complete records while the file is still open
    assert [r["type"] for r in read_all(w.current_path)] == ["warcinfo", "request", "response"]
    w.sync()
    assert len(calls) == 2
    w.close()
    assert len(calls) >= 3  # close fsyncs before the rename


class FailingFile:
    """Writes half of the next member, then fails like a full disk."""

    def __init__(self, fh):
        self.fh, self.fail = fh, True

    def write(self, b):
        if self.fail:
            self.fail = False
            self.fh.write(b[: len(b) // 2])
            raise OSError(28, "No space left on device")
        return self.fh.write(b)

    def __getattr__(self, name):
        return getattr(self.fh, name)


def test_failed_write_is_cut_back_and_raised(tmp_path):
    w = WARCWriter(tmp_path)
    exchange(w, url="http://example.com/1")
    size = w.current_path.stat().st_size
    w._fh = FailingFile(w._fh)
    with pytest.raises(OSError):
        exchange(w, url="http://example.com/2")
    assert w.current_path.stat().st_size == size
    exchange(w, url="http://example.com/3")
    w.close()
    recs = read_all(finals(tmp_path)[0])
    assert [r["headers"].get("WARC-Target-URI") for r in recs if r["type"] == "response"] == [
        "http://example.com/1", "http://example.com/3"]


def test_from_conf(tmp_path):
    conf = {"warc.dir": str(tmp_path), "warc.prefix": "CC", "warc.rotation.size": "1000",
            "warc.rotation.time": 60, "warc.gzip.level": 1, "warc.operator": "op"}
    w = WARCWriter.from_conf(conf, partition="07")
    assert (w.directory, w.prefix, w.partition, w.rotation_size, w.rotation_time, w.gzip_level) == (
        tmp_path, "CC", "07", 1000, 60.0, 1)
    assert w.info["operator"] == "op" and w.fsync is False


# -- raw records (warc2warc) --------------------------------------------------------------------

def split_members(data: bytes) -> list[bytes]:
    out = []
    while data:
        d = zlib.decompressobj(31)
        d.decompress(data)
        out.append(data[: len(data) - len(d.unused_data)])
        data = d.unused_data
    return out


def test_write_record_bytes_gzip_members_unchanged(tmp_path):
    src = (DATA / "fb.warc.gz").read_bytes()
    members = split_members(src)
    assert len(members) == 10
    with WARCWriter(tmp_path) as w:
        for m in members:
            assert w.write_record_bytes(m) == len(m)
    out = finals(tmp_path)[0].read_bytes()
    assert out.endswith(src)  # after our warcinfo member, byte for byte
    recs = read_all(finals(tmp_path)[0])
    assert [r["type"] for r in recs][:4] == ["warcinfo", "warcinfo", "request", "response"]
    assert len(recs) == 11 and w.stats.raw_records == 10


def test_write_record_bytes_uncompressed_records_unchanged(tmp_path):
    src = (DATA / "example.com.warc").read_bytes()
    with open(DATA / "example.com.warc", "rb") as f:
        it = ArchiveIterator(f)
        offsets = [it.get_record_offset() for _ in it]
    assert len(offsets) == 9
    spans = [(a, b - a) for a, b in zip(offsets, offsets[1:] + [len(src)])]
    with WARCWriter(tmp_path) as w:
        for off, length in spans:
            w.write_record_bytes(src[off:off + length])
    out = gzip.decompress(finals(tmp_path)[0].read_bytes())
    assert out.endswith(src)  # the source's (wrong) sha256 payload digests travel unchanged
    with pytest.raises(WARCFormatError):
        w.write_record_bytes(b"not a record")


# -- recovery -----------------------------------------------------------------------------------

def crashed_file(tmp_path: Path, n: int = 10, partition: str = "00") -> tuple[Path, list[int]]:
    """Write n exchanges and leave the file .open (as after a kill); return it and member starts."""
    w = WARCWriter(tmp_path, partition=partition, clock=Clock())
    starts = []
    for i in range(n):
        exchange(w, url=f"http://example.com/{i}", request=None,
                 payload=HTML + random.Random(i).randbytes(2000))
        starts.append(w.last_record.offset)
    path = w.current_path
    w._fh.close()  # the process dies: no close(), no rename
    return path, starts


@pytest.mark.parametrize("where", ["random1", "random2", "random3", "first_byte", "in_trailer", "header"])
def test_recover_file_cut_inside_last_member(tmp_path, where):
    path, starts = crashed_file(tmp_path)
    size = path.stat().st_size
    last = starts[-1]
    cut = {"random1": random.Random(1).randrange(last + 1, size),
           "random2": random.Random(2).randrange(last + 1, size),
           "random3": random.Random(3).randrange(last + 1, size),
           "first_byte": last + 1, "in_trailer": size - 3, "header": last + 5}[where]
    with open(path, "r+b") as f:
        f.truncate(cut)
    recovered = recover_open_files(tmp_path, prefix="OWLER", partition="00")
    assert recovered == [tmp_path / path.name[:-5]]
    assert not path.exists()
    recs = read_all(recovered[0])
    assert [r["headers"]["WARC-Target-URI"] for r in recs if r["type"] == "response"] == [
        f"http://example.com/{i}" for i in range(9)]
    assert recovered[0].stat().st_size == last


def test_recover_complete_file_and_garbage_tail(tmp_path):
    path, starts = crashed_file(tmp_path, n=3)
    with open(path, "ab") as f:
        f.write(b"\x1f\x8b\x08garbage")
    [final] = recover_open_files(tmp_path)
    assert len([r for r in read_all(final) if r["type"] == "response"]) == 3


def test_recover_stops_at_corrupt_middle_member(tmp_path):
    path, starts = crashed_file(tmp_path, n=5)
    data = bytearray(path.read_bytes())
    data[starts[2] + 30] ^= 0xFF  # damage record 3's deflate data
    path.write_bytes(bytes(data))
    res = scan_members(path)
    assert res.valid_end == starts[2] and res.error and res.types == {"warcinfo": 1, "response": 2}
    [final] = recover_open_files(tmp_path)
    assert len(read_all(final)) == 3


def test_recover_only_own_prefix_and_partition(tmp_path):
    mine, _ = crashed_file(tmp_path, n=2, partition="00")
    other, _ = crashed_file(tmp_path, n=2, partition="01")
    foreign = tmp_path / "OTHER-20240501120000-00-00000.warc.gz.open"
    shutil.copy(other, foreign)
    unrelated = tmp_path / "notes.txt.open"
    unrelated.write_text("x")
    assert recover_open_files(tmp_path, prefix="OWLER", partition="00") == [tmp_path / mine.name[:-5]]
    assert other.exists() and foreign.exists() and unrelated.exists()
    assert recover_open_files(tmp_path, prefix="OWLER") == [tmp_path / other.name[:-5]]
    assert foreign.exists()
    assert recover_open_files(tmp_path / "missing") == []


def test_recover_warcinfo_only_empty_and_foreign_content(tmp_path):
    w = WARCWriter(tmp_path, partition="00", clock=Clock())
    exchange(w, request=None)
    info_end = w.last_record.offset
    path = w.current_path
    w._fh.close()
    with open(path, "r+b") as f:
        f.truncate(info_end + 40)  # warcinfo + a partial response: nothing captured
    empty = tmp_path / "OWLER-20240501120000-00-00007.warc.gz.open"
    empty.write_bytes(b"")
    junk = tmp_path / "OWLER-20240501120000-00-00008.warc.gz.open"
    junk.write_bytes(b"this is not gzip at all")
    assert recover_open_files(tmp_path, partition="00") == []
    assert not path.exists() and not empty.exists() and not junk.exists()
    corrupt = tmp_path / "OWLER-20240501120000-00-00008.warc.gz.corrupt"
    assert corrupt.read_bytes() == b"this is not gzip at all"
    assert finals(tmp_path) == []


def test_recover_after_link_before_unlink(tmp_path):
    path, _ = crashed_file(tmp_path, n=1)
    final = tmp_path / path.name[:-5]
    os.link(path, final)  # a finalize that died between link() and unlink()
    assert recover_open_files(tmp_path) == [final]
    assert not path.exists() and len(read_all(final)) == 2


def test_recover_keeps_going_when_final_name_is_taken(tmp_path, caplog):
    blocked, _ = crashed_file(tmp_path, n=1, partition="00")
    other, _ = crashed_file(tmp_path, n=1, partition="01")
    (tmp_path / blocked.name[:-5]).write_bytes(b"someone else's file")
    assert recover_open_files(tmp_path) == [tmp_path / other.name[:-5]]
    assert blocked.exists() and "cannot finalize" in caplog.text
    assert (tmp_path / blocked.name[:-5]).read_bytes() == b"someone else's file"


def test_recovered_file_name_is_not_reused(tmp_path):
    path, _ = crashed_file(tmp_path, n=1)
    recover_open_files(tmp_path)
    with WARCWriter(tmp_path, partition="00", clock=Clock()) as w:
        exchange(w)
    assert [f.name for f in finals(tmp_path)] == [
        "OWLER-20240501120000-00-00000.warc.gz", "OWLER-20240501120000-00-00001.warc.gz"]


def test_scan_members_reads_in_small_chunks(tmp_path):
    path, starts = crashed_file(tmp_path, n=4)
    res = scan_members(path, chunk_size=777)
    assert res.error is None and res.valid_end == res.size and res.records == 5


def test_a_fetched_page_is_archived_from_its_transient_metadata(tmp_path):
    w = WARCWriter(tmp_path, clock=Clock())
    md = {wire.RAW_REQUEST: [REQ.decode("latin-1")], wire.RAW_STATUS_LINE: ["HTTP/1.1 200 OK"],
          wire.RAW_HEADERS: ["Content-Type: text/html", "X-A: 1"], wire.RAW_IP: ["192.0.2.7"],
          wire.RAW_FETCH_TIME: [repr(T0)], wire.RAW_TRUNCATED: ["length"]}
    assert w.write_page("http://example.com/page", HTML, md) > 0
    w.close()
    recs = read_all(finals(tmp_path)[0])
    assert [r["type"] for r in recs] == ["warcinfo", "request", "response"]
    resp = recs[2]
    assert resp["payload"] == HTML and resp["http"].get_header("X-A") == "1"
    assert resp["headers"]["WARC-IP-Address"] == "192.0.2.7"
    assert resp["headers"]["WARC-Truncated"] == "length"
    assert resp["headers"]["WARC-Date"].startswith("2024-05-01T12:00:00")


def test_a_writer_task_opens_its_output_after_finishing_what_it_left_open(tmp_path):
    mine, _ = crashed_file(tmp_path, n=2, partition="00")
    other, _ = crashed_file(tmp_path, n=2, partition="01")
    writer, uploader = open_output({"warc.dir": str(tmp_path)}, "00", {"note": "x"})
    assert uploader is None  # no warc.s3.bucket
    assert (tmp_path / mine.name[:-5]).exists() and not mine.exists()
    assert other.exists()  # another task's file: not touched while that task may run
    assert writer.partition == "00" and writer.info["note"] == "x"
    writer.close()
