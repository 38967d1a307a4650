"""owler.warc.storage.s3 and owler.warc.storage.s3_upload against a real S3 API server (moto) on
127.0.0.1: listing, reads that survive cut connections, verified single-part and multipart uploads,
uploads retried while the server is away, the fetcher's WARC archiver uploading the files it closes,
and WARC files streamed to S3 (owler.warc.storage.s3_stream): parts of whole records, pages held
until their part is stored, the uploads of a crashed writer completed by the next one, and replays
of pages it stored not archived again."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest

from owler.conf import load_conf
from owler.warc.crawl.archiver import Page
from owler.warc.storage import s3 as S3
from owler.warc.storage.s3_upload import UPLOADED_SUFFIX, Uploader
from owler.warc.warc2warc.inputs import InputSource
from tests.component.test_crawl_bolts import PAGE, page_md
from tests.integration.waiting import returns, wait_for
from tests.netproxy import Proxy
from tests.unit.test_archive import Handed


@pytest.fixture
def env(s3_server, monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    return s3_server


def conf_for(port: int, **kw):
    return {"s3.endpoint": f"http://127.0.0.1:{port}", "s3.max.attempts": 4, **kw}


def test_listing_picks_warc_files_under_the_prefix(env):
    b = env.bucket("list-test")
    for key in ("crawl/a.warc.gz", "crawl/sub/b.warc", "crawl/c.txt", "other/d.warc.gz"):
        env.client.put_object(Bucket=b, Key=key, Body=b"x" * 10)
    src = InputSource.from_conf({"warc2warc.input": f"s3://{b}/crawl/", **conf_for(env.port)})
    names = [n for n, _, _ in src.list()]
    assert names == [f"s3://{b}/crawl/a.warc.gz", f"s3://{b}/crawl/sub/b.warc"]
    missing = InputSource.from_conf({"warc2warc.input": "s3://no-such-bucket/x",
                                     **conf_for(env.port)})
    with pytest.raises(S3.S3Error, match="cannot list s3://no-such-bucket"):
        missing.list()


def test_a_read_survives_connections_cut_mid_body(env):
    b = env.bucket("read-test")
    body = os.urandom(3 << 20)
    env.client.put_object(Bucket=b, Key="big.warc.gz", Body=body)
    proxy = Proxy(env.port, cut_after=200_000, cut_connections=3)
    src = InputSource(f"s3://{b}/", conf_for(proxy.port))
    stream = src.open(f"s3://{b}/big.warc.gz", start=1000)
    got = b""
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            break
        got += chunk
    assert got == body[1000:]
    assert proxy.cuts == 3 and stream.reopened == 3  # each cut connection reopened once
    proxy.cut()


def test_a_read_gives_up_with_a_clear_error(env):
    b = env.bucket("gone-test")
    env.client.put_object(Bucket=b, Key="f.warc", Body=b"WARC/1.1\r\n")
    src = InputSource(f"s3://{b}/", conf_for(env.port))
    with pytest.raises(S3.S3Error, match="NoSuchKey"):
        src.open(f"s3://{b}/missing.warc").read(10)
    proxy = Proxy(env.port)
    proxy.cut()  # nothing listens there any more
    dead = InputSource(f"s3://{b}/", conf_for(proxy.port, **{"s3.max.attempts": 2}))
    with pytest.raises(S3.S3Error, match="after 2 attempts"):
        returns("a read from a server that is gone", lambda: dead.open(f"s3://{b}/f.warc").read(10))


def test_uploads_are_verified_single_and_multipart(env, tmp_path):
    b = env.bucket("up-test")
    s3 = S3.client(conf_for(env.port))
    small = tmp_path / "small.warc.gz"
    small.write_bytes(os.urandom(100_000))
    big = tmp_path / "big.warc.gz"
    big.write_bytes(os.urandom(11 << 20))
    S3.upload_verified(s3, small, b, "out/small.warc.gz", 5 << 20)
    S3.upload_verified(s3, big, b, "out/big.warc.gz", 5 << 20)
    head = s3.head_object(Bucket=b, Key="out/big.warc.gz")
    assert head["ETag"].strip('"').endswith("-3")  # three parts, and it verified
    assert env.objects(b, "out/")["out/big.warc.gz"] == big.read_bytes()
    S3.upload_verified(s3, big, b, "out/big.warc.gz", 5 << 20)  # already there: kept


def test_an_upload_that_does_not_verify_is_removed(env, tmp_path, monkeypatch):
    b = env.bucket("bad-up-test")
    f = tmp_path / "f.warc.gz"
    f.write_bytes(b"data")
    monkeypatch.setattr(S3, "expected_etag", lambda path, part: "0" * 32)
    with pytest.raises(S3.S3Error, match="does not verify"):
        S3.upload_verified(S3.client(conf_for(env.port)), f, b, "f.warc.gz")
    assert "f.warc.gz" not in env.objects(b)


def test_the_uploader_retries_while_s3_is_away(env, tmp_path):
    b = env.bucket("retry-test")
    proxy = Proxy(env.port)
    port = proxy.port
    proxy.cut()  # S3 is away when the files are closed
    d = tmp_path / "warc"
    d.mkdir()
    files = []
    for i in range(2):
        p = d / f"OWLER-20260101000000-00-0000{i}.warc.gz"
        p.write_bytes(os.urandom(1000))
        files.append(p)
    (d / "OWLER-20260101000000-00-00009.warc.gz.open").write_bytes(b"being written")
    up = Uploader(conf_for(port, **{"warc.s3.bucket": b, "warc.s3.prefix": "crawl/x",
                                    "warc.s3.keep.local": True, "s3.max.attempts": 1}))
    assert up.submit_leftovers(d, "OWLER", "00") == 2  # never the .open one
    # each file tried and failed once (the second failure is the second file's)
    wait_for("two failed uploads while S3 is away", lambda: up.failures >= 2)
    assert up.uploaded == 0 and up.last_error
    proxy = Proxy(env.port, port=port)  # S3 is back
    wait_for("both uploads once S3 is back", lambda: up.uploaded == 2)
    up.close()
    proxy.cut()
    assert sorted(env.objects(b, "crawl/x/")) == [f"crawl/x/{p.name}" for p in files]
    assert all(Path(str(p) + UPLOADED_SUFFIX).exists() for p in files)


def test_the_fetchers_archiver_uploads_the_files_it_closes(s3_server, tmp_path, monkeypatch):
    c = load_conf()
    c.update({"warc.dir": str(tmp_path / "warc"), "warc.s3.bucket": s3_server.bucket("expl-out"),
              "warc.s3.prefix": "crawl", "s3.endpoint": s3_server.endpoint,
              "warc.rotation.size": 1, "warc.s3.stream": False})
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    handed = Handed()
    a = handed.archiver(c)
    try:
        for i in range(2):
            a.submit(Page(f"http://e.example/{i}", PAGE, page_md(), i))
        handed.wait(2, 120)
        wait_for("both files in S3", lambda: len(s3_server.objects("expl-out", "crawl/")) == 2)
    finally:
        a.close()
    assert handed.stored == [0, 1]
    objects = s3_server.objects("expl-out", "crawl/")
    assert len(objects) == 2 and not list((tmp_path / "warc").glob("*.warc.gz"))
    assert all(b"http://e.example/" in gzip.decompress(v) for v in objects.values())


# --- WARC files streamed to S3 (owler.warc.storage.s3_stream) ------------------------------------
MiB = 1 << 20


def stream_writer(env, bucket: str, partition: str = "00", **kw):
    from owler.warc.storage.s3_stream import S3StreamWriter

    return S3StreamWriter.from_conf(
        conf_for(env.port, **{"warc.s3.bucket": bucket, "warc.s3.prefix": "crawl",
                              "warc.s3.stream.part.size": 5 * MiB}), partition, **kw)


def write_pages(w, first: int, n: int, size: int = MiB) -> list[tuple[str, str, int]]:
    """``n`` pages of incompressible ``size``-byte bodies: (url, file, end offset) of each."""
    out = []
    for i in range(first, first + n):
        url = f"http://big.example/{i}"
        w.write_exchange(url, fetch_time=time.time(), request_line_and_headers=None,
                         status_line="HTTP/1.1 200 OK",
                         response_headers=[("Content-Type", "application/octet-stream")],
                         payload=os.urandom(size))
        rec = w.last_record
        out.append((url, rec.filename, rec.offset + rec.length))
    return out


def stored_records(env, bucket: str, key: str) -> list[str]:
    """Target URIs of the responses in an object, every record read whole with its digests."""
    from warcio.archiveiterator import ArchiveIterator
    import io

    body = env.client.get_object(Bucket=bucket, Key=key)["Body"].read()
    uris = []
    for rec in ArchiveIterator(io.BytesIO(body), check_digests="raise"):
        rec.content_stream().read()
        if rec.rec_type == "response":
            uris.append(rec.rec_headers.get_header("WARC-Target-URI"))
    return uris


def test_streamed_parts_hold_whole_records_and_pages_wait_for_their_part(env):
    from owler.warc.format.reader import InputRecord, iter_records

    b = env.bucket("stream-parts")
    w = stream_writer(env, b)
    pages = write_pages(w, 0, 4)
    assert not any(w.durable(name, end) for _, name, end in pages)  # 4 MiB: still in memory
    assert not env.objects(b)
    pages += write_pages(w, 4, 2)  # past 5 MiB: the part is stored, between two records
    key = w.key(pages[0][1])
    uploads = env.client.list_multipart_uploads(Bucket=b)["Uploads"]
    parts = env.client.list_parts(Bucket=b, Key=key, UploadId=uploads[0]["UploadId"])["Parts"]
    assert len(parts) == 1 and parts[0]["Size"] >= 5 * MiB
    assert all(w.durable(name, end) for _, name, end in pages[:5])
    assert not w.durable(*pages[5][1:])  # the sixth page is in the next part
    w.make_durable()  # under 5 MiB buffered: the file is completed, last part smaller
    assert w.durable(*pages[5][1:]) and not env.client.list_multipart_uploads(Bucket=b).get("Uploads")
    assert stored_records(env, b, key) == [u for u, _, _ in pages]
    # the first part alone is a run of whole records too
    body = env.client.get_object(Bucket=b, Key=key,
                                 Range=f"bytes=0-{parts[0]['Size'] - 1}")["Body"].read()
    import io
    recs = [r for r in iter_records(io.BytesIO(body)) if isinstance(r, InputRecord)]
    assert [r.type for r in recs] == ["warcinfo"] + ["response"] * 5
    assert all(r.problem is None for r in recs)
    w.close()


def test_a_crashed_writers_uploads_are_completed_and_its_stored_pages_not_archived_twice(env):
    b = env.bucket("stream-crash")
    dead = stream_writer(env, b, "07")
    stored = write_pages(dead, 0, 6)  # one part stored (pages 0-4), page 5 buffered
    other = stream_writer(env, b, "08")
    write_pages(other, 100, 6)  # another partition, still being written: not touched
    empty = env.client.create_multipart_upload(Bucket=b, Key="crawl/OWLER-20260101000000-07-00000"
                                                          ".warc.gz")["UploadId"]
    # the node dies: no close. The task starts again elsewhere.
    again = stream_writer(env, b, "07")
    done = again.recover()
    key = dead.key(stored[0][1])
    assert done == [key]
    assert stored_records(env, b, key) == [u for u, _, _ in stored[:5]]  # page 5 is lost (replayed)
    left = env.client.list_multipart_uploads(Bucket=b).get("Uploads", [])
    assert [u["Key"] for u in left] == [other.key(other.current_name)]  # empty one aborted
    assert all(u["UploadId"] != empty for u in left)
    now = time.time()
    assert all(again.recently_archived(u, now) for u, _, _ in stored[:5])
    assert not again.recently_archived(stored[5][0], now)  # never stored: archived on replay
    assert not again.recently_archived(stored[0][0], now + 601)  # outside the window
    other.close()


def test_a_part_s3_refuses_loses_only_the_unstored_pages(env, monkeypatch):
    from botocore.exceptions import ClientError

    b = env.bucket("stream-refused")
    w = stream_writer(env, b)
    first = write_pages(w, 0, 6)  # part 1 stored
    name = first[0][1]
    refuse = ClientError({"Error": {"Code": "InternalError", "Message": "refused"}}, "UploadPart")
    monkeypatch.setattr(w.s3, "upload_part", lambda **kw: (_ for _ in ()).throw(refuse))
    w.make_durable()
    assert all(w.durable(n, e) for _, n, e in first[:5])
    assert w.lost(name, first[5][2]) and not w.lost(name, first[4][2])
    assert stored_records(env, b, w.key(name)) == [u for u, _, _ in first[:5]]
    with pytest.raises(OSError, match="cannot store part"):  # a write that needs a part fails
        write_pages(w, 10, 6)  # (the next file; its buffer is cut back, nothing stored)
    monkeypatch.undo()
    w.close()


def test_streaming_archiver_hands_pages_back_once_stored(s3_server, tmp_path, monkeypatch):
    c = load_conf()
    c.update({"warc.dir": str(tmp_path / "warc"), "warc.s3.bucket": s3_server.bucket("stream-bolt"),
              "warc.s3.prefix": "crawl", "s3.endpoint": s3_server.endpoint,
              "warc.s3.max.age": 1})
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    url = "http://e.example/a"

    handed = Handed()
    a = handed.archiver(c, "04")
    try:
        a.submit(Page(url, PAGE, page_md(), "w1"))
        a.submit(Page("http://e.example/b", PAGE, page_md(), "w1b"))
        # both written into the part, which is not stored: nothing handed back. The archiver
        # handles its pages in turn, so once the second is written the first had its chance
        # to be handed back (no tick came: nothing made the part durable)
        wait_for("both pages written", lambda: handed.counts["records"] == 2)
        assert not handed.stored and not handed.lost and a.pending == 2
        assert not s3_server.objects("stream-bolt", "crawl/")

        def ticked():  # a tick every 0.5 s, as Storm sends them, until the pages have waited
            a.tick()   # warc.s3.max.age since they were written
            return handed.stored

        wait_for("the pages stored", ticked, every=0.5)
        handed.wait(2, 120)
        assert handed.stored == ["w1", "w1b"] and handed.counts["records"] == 2
    finally:
        a.close()
    objects = s3_server.objects("stream-bolt", "crawl/")
    assert len(objects) == 1 and url.encode() in gzip.decompress(*objects.values())
    assert not (tmp_path / "warc").exists()  # nothing on the node's disk
    # the next archiver of the partition (a fetcher task restarted): Storm's replay of the page
    # is handed back at once, not archived again
    again = Handed()
    a = again.archiver(c, "04")
    try:
        a.submit(Page(url, PAGE, page_md(), "w2"))
        again.wait(1, 30)
    finally:
        a.close()
    assert again.stored == ["w2"] and again.counts["replays_not_archived"] == 1
    assert len(s3_server.objects("stream-bolt", "crawl/")) == 1


def test_a_url_delivered_twice_is_archived_once(s3_server, tmp_path, monkeypatch):
    # Storm may hand a fetcher task the same URL again while the first copy's part is not stored
    # yet (a replay racing the first delivery, as after a node's loss): the second page waits for
    # the first copy and shares its fate
    c = load_conf()
    c.update({"warc.s3.bucket": s3_server.bucket("stream-twice"), "warc.s3.prefix": "crawl",
              "s3.endpoint": s3_server.endpoint, "warc.s3.max.age": 1})
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    url = "http://e.example/twice"
    handed = Handed()
    a = handed.archiver(c, "05")
    try:
        a.submit(Page(url, PAGE, page_md(), "t1"))
        a.submit(Page(url, PAGE + b"again", page_md(), "t2"))
        a.submit(Page("http://e.example/other", PAGE, page_md(), "t3"))
        wait_for("the pages written", lambda: handed.counts["records"] == 2)
        assert a.pending == 3 and not handed.stored

        def ticked():
            a.tick()
            return len(handed.stored) == 3
        wait_for("the pages stored", ticked, every=0.5)
        assert sorted(handed.stored) == ["t1", "t2", "t3"] and not handed.lost
        assert handed.counts["replays_not_archived"] == 1 and a.pending == 0
    finally:
        a.close()
    urls = [u for data in s3_server.objects("stream-twice", "crawl/").values()
            for u, _ in archived_pairs(data)]
    assert sorted(urls) == ["http://e.example/other", url]  # one response record each


def test_a_url_delivered_twice_is_lost_with_its_first_copy(s3_server, tmp_path, monkeypatch):
    from botocore.exceptions import ClientError

    c = load_conf()
    c.update({"warc.s3.bucket": s3_server.bucket("stream-twice-lost"), "warc.s3.prefix": "crawl",
              "s3.endpoint": s3_server.endpoint, "warc.s3.max.age": 1})
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    handed = Handed()
    a = handed.archiver(c, "06")
    refuse = ClientError({"Error": {"Code": "InternalError", "Message": "refused"}}, "UploadPart")

    def refused(**kw):
        raise refuse
    monkeypatch.setattr(a.writer.s3, "upload_part", refused)
    monkeypatch.setattr(a.writer.s3, "put_object", refused)
    try:
        a.submit(Page("http://e.example/x", PAGE, page_md(), "l1"))
        a.submit(Page("http://e.example/x", PAGE, page_md(), "l2"))
        wait_for("the first copy written", lambda: handed.counts["records"] == 1)

        def ticked():
            a.tick()
            return len(handed.lost) == 2
        wait_for("both pages lost", ticked, every=0.5)
        assert [t for t, _ in handed.lost] == ["l1", "l2"] and not handed.stored
        assert all("could not be stored" in r for _, r in handed.lost)
    finally:
        monkeypatch.undo()
        a.close()


def archived_pairs(data: bytes) -> list[tuple[str, str]]:
    """(target URI, record type) of the response records in a gzipped WARC object."""
    import io

    from warcio.archiveiterator import ArchiveIterator

    return [(r.rec_headers.get_header("WARC-Target-URI"), r.rec_type)
            for r in ArchiveIterator(io.BytesIO(data)) if r.rec_type == "response"]


def test_real_archives_stream_through_unchanged(env):
    # records nobody on the project wrote (Common Crawl, Dolma: tests/data/warc/NOTICE), copied
    # as they are through the S3 stream over a part boundary, then read back for the dedup window
    from owler.warc.format.reader import InputRecord, iter_records
    from owler.warc.storage.s3_stream import archived_urls

    data = Path(__file__).resolve().parents[1] / "data" / "warc"
    records = []
    for name in ("dolma-sample-0000.warc.gz", "dolma-sample-0001.warc.gz",
                 "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc"):
        with open(data / name, "rb") as f:
            records += [r for r in iter_records(f) if isinstance(r, InputRecord)]
    b = env.bucket("stream-real")
    w = stream_writer(env, b)
    written = []
    while not w._fh or not w._fh.parts:  # until the first part is stored
        for r in records:
            w.write_record_bytes(r.raw)
            written.append(r.raw)
    key = w.key(w.current_name)
    w.close()
    body = env.client.get_object(Bucket=b, Key=key)["Body"].read()
    plain = [gzip.decompress(r) if r[:2] == b"\x1f\x8b" else r for r in written]
    assert gzip.decompress(body).endswith(b"".join(plain))  # every byte of every record
    responses = {r.target_uri for r in records if r.type in ("response", "revisit")}
    got = {u for u, _ in archived_urls(env.client, b, "crawl/OWLER-", "00", time.time() - 600)}
    assert responses and got == responses
