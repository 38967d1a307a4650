"""owler.warc.s3 and owler.warc.upload against a real S3 API server (moto) on 127.0.0.1: listing,
reads that survive cut connections, verified single-part and multipart uploads, uploads retried
while the server is away, and the explorative WARC writer (a real multilang subprocess) uploading
the files it closes."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest

from owler.warc import s3 as S3
from owler.warc.source import InputSource
from owler.warc.upload import UPLOADED_SUFFIX, Uploader
from owler import wire
from owler.conf import load_conf
from tests.component.multilang import ShellComponent
from tests.netproxy import Proxy


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
    assert proxy.cuts == 3 and stream.reopened >= 3
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
    t0 = time.time()
    with pytest.raises(S3.S3Error, match="after 2 attempts"):
        dead.open(f"s3://{b}/f.warc").read(10)
    assert time.time() - t0 < 30


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
    time.sleep(2.5)
    assert up.failures >= 1 and up.uploaded == 0
    proxy = Proxy(env.port, port=port)  # S3 is back
    deadline = time.time() + 60
    while up.uploaded < 2 and time.time() < deadline:
        time.sleep(0.2)
    up.close()
    proxy.cut()
    assert sorted(env.objects(b, "crawl/x/")) == [f"crawl/x/{p.name}" for p in files]
    assert all(Path(str(p) + UPLOADED_SUFFIX).exists() for p in files)


def test_explorative_warc_writer_uploads_closed_files(s3_server, tmp_path, monkeypatch):
    c = load_conf()
    c.update({"warc.dir": str(tmp_path / "warc"), "warc.s3.bucket": s3_server.bucket("expl-out"),
              "warc.s3.prefix": "crawl", "s3.endpoint": s3_server.endpoint,
              "warc.rotation.size": 1, "owler.run.dir": str(tmp_path / "run")})
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    bolt = ShellComponent("bolts.warc_writer.WARCWriterBolt", c, tmp_path, "warc")
    page = b"<html><body>hello</body></html>"
    md = {wire.RAW_HEADERS: ["Content-Type: text/html"], wire.RAW_STATUS_LINE: ["HTTP/1.1 200 OK"],
          wire.RAW_FETCH_TIME: [repr(time.time())]}
    try:
        for i in range(2):
            bolt.process([f"http://e.example/{i}", wire.encode_content(page), md], tid=f"w{i}")
            assert bolt.until_acked(f"w{i}")[-1]["command"] == "ack"
        deadline = time.time() + 30
        while len(s3_server.objects("expl-out", "crawl/")) < 2 and time.time() < deadline:
            time.sleep(0.2)
    finally:
        assert bolt.close() == 0
    objects = s3_server.objects("expl-out", "crawl/")
    assert len(objects) == 2 and not list((tmp_path / "warc").glob("*.warc.gz"))
    assert all(b"http://e.example/" in gzip.decompress(v) for v in objects.values())
