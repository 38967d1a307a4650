"""The CDXJ index of WARC files that go to S3 (issue 47), against a real S3 API server (moto) on
127.0.0.1: a finished file's index uploaded beside it under the same prefix (made from the file
when it had none), a streamed file's index stored as ``<key>.cdxj`` when its upload is completed
(the lines of what the object keeps, when a part was refused), the fetcher's streaming archiver's
files each with theirs, and after a crash the uploads completed by the next writer indexed from
their objects, recent files without an index indexed, an index whose file is gone removed; the
warc2warc copy's streamed outputs the same."""

from __future__ import annotations

import io

import pytest

from owler.conf import load_conf
from owler.warc import WARCWriter
from owler.warc.crawl.archiver import Page
from owler.warc.format import cdxj
from owler.warc.storage.s3_upload import UPLOADED_SUFFIX, Uploader
from tests.component.test_crawl_bolts import PAGE, page_md
from tests.integration.test_s3 import conf_for, stream_writer, write_pages
from tests.integration.waiting import wait_for
from tests.unit.test_archive import Handed

pytestmark = pytest.mark.integration


@pytest.fixture
def env(s3_server, monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    return s3_server


def lines_of(data: bytes, name: str) -> list[str]:
    """The index lines read off a WARC file's bytes, sorted."""
    return sorted(cdxj.file_lines(io.BytesIO(data), name))


def indices_match(objects: dict[str, bytes]) -> list[str]:
    """The WARC keys of ``objects`` (with their indices), each checked against its index."""
    keys = sorted(k for k in objects if k.endswith(".warc.gz"))
    assert sorted(k for k in objects if k.endswith(".cdxj")) == [k + ".cdxj" for k in keys]
    for k in keys:
        index = objects[k + ".cdxj"].decode().splitlines()
        assert index == lines_of(objects[k], k.rsplit("/", 1)[1]) and index
    return keys


def test_finished_files_go_up_with_their_index(env, tmp_path):
    b = env.bucket("cdxj-upload")
    d = tmp_path / "warc"
    with WARCWriter(d, partition="00", rotation_size=1) as w:
        for i in range(2):
            w.write_exchange(f"http://e.example/{i}", fetch_time=None,
                             request_line_and_headers=None, status_line="HTTP/1.1 200 OK",
                             response_headers=[("Content-Type", "text/plain")], payload=b"x" * i)
    with WARCWriter(d, partition="01", cdxj=False) as w:  # written before indices were kept
        w.write_exchange("http://e.example/old", fetch_time=None, request_line_and_headers=None,
                         status_line="HTTP/1.1 200 OK", response_headers=[], payload=b"old")
    up = Uploader(conf_for(env.port, **{"warc.s3.bucket": b, "warc.s3.prefix": "crawl/x"}))
    assert up.submit_leftovers(d, "OWLER", "00") == 2 and up.submit_leftovers(d, "OWLER", "01") == 1
    wait_for("three uploads", lambda: up.uploaded == 3)
    up.close()
    keys = indices_match(env.objects(b, "crawl/x/", indices=True))
    assert len(keys) == 3 and not list(d.iterdir())  # both local copies gone
    # keep.local keeps the index with the file
    with WARCWriter(d, partition="02") as w:
        w.write_exchange("http://e.example/k", fetch_time=None, request_line_and_headers=None,
                         status_line="HTTP/1.1 200 OK", response_headers=[], payload=b"k")
    up = Uploader(conf_for(env.port, **{"warc.s3.bucket": b, "warc.s3.prefix": "crawl/y",
                                        "warc.s3.keep.local": True}))
    up.submit_leftovers(d, "OWLER", "02")
    wait_for("the upload", lambda: up.uploaded == 1)
    up.close()
    assert len(indices_match(env.objects(b, "crawl/y/", indices=True))) == 1
    assert sorted(p.suffix for p in d.iterdir()) == [".cdxj", ".gz", UPLOADED_SUFFIX]


def test_a_streamed_file_has_its_index_beside_it(env):
    b = env.bucket("cdxj-stream")
    w = stream_writer(env, b)
    write_pages(w, 0, 6)  # a part stored, one page buffered
    assert not env.objects(b, indices=True)  # nothing is an object before the upload completes
    w.close()
    assert len(indices_match(env.objects(b, indices=True))) == 1


def test_a_streamed_files_index_names_only_what_the_object_keeps(env, monkeypatch):
    from botocore.exceptions import ClientError

    b = env.bucket("cdxj-refused")
    w = stream_writer(env, b)
    pages = write_pages(w, 0, 6)  # part 1 stored (pages 0-4), page 5 buffered
    refuse = ClientError({"Error": {"Code": "InternalError", "Message": "refused"}}, "UploadPart")
    monkeypatch.setattr(w.s3, "upload_part", lambda **kw: (_ for _ in ()).throw(refuse))
    w.make_durable()  # the last part is refused: the object keeps pages 0-4
    monkeypatch.undo()
    w.close()
    [key] = indices_match(env.objects(b, indices=True))
    urls = [cdxj.line_fields(line)[2]["url"]
            for line in env.objects(b, indices=True)[key + ".cdxj"].decode().splitlines()]
    assert sorted(urls) == sorted(u for u, _, _ in pages[:5])


def test_an_index_s3_refuses_is_stored_with_the_next_file(env, monkeypatch):
    from botocore.exceptions import ClientError

    b = env.bucket("cdxj-retry")
    w = stream_writer(env, b)
    write_pages(w, 0, 1, size=1000)
    refuse = ClientError({"Error": {"Code": "InternalError", "Message": "refused"}}, "PutObject")
    real = w.s3.put_object
    monkeypatch.setattr(w.s3, "put_object", lambda **kw: (_ for _ in ()).throw(refuse))
    w.rotate()  # the file is completed; its index is not stored
    assert not [k for k in env.objects(b, indices=True) if k.endswith(".cdxj")]
    monkeypatch.setattr(w.s3, "put_object", real)
    write_pages(w, 1, 1, size=1000)
    w.close()
    assert len(indices_match(env.objects(b, indices=True))) == 2 and not w.unstored_indices


def test_after_a_crash_the_next_writer_indexes_what_it_completes(env):
    b = env.bucket("cdxj-crash")
    done = stream_writer(env, b, "07", cdxj=False)  # a recent file of the task, without index
    write_pages(done, 100, 1, size=1000)
    done.close()
    other = stream_writer(env, b, "08")  # another task's file: never touched
    write_pages(other, 200, 1, size=1000)
    other.close()
    theirs = other.key(next(iter(other.closed_sizes))) + ".cdxj"
    env.client.delete_object(Bucket=b, Key=theirs)
    # an index whose file is gone (its upload was aborted)
    env.client.put_object(Bucket=b, Key="crawl/OWLER-20260101000000-07-00009.warc.gz.cdxj",
                          Body=b"stale\n")
    dead = stream_writer(env, b, "07")
    write_pages(dead, 0, 6)  # one part stored (pages 0-4), page 5 buffered; then the node dies
    key = dead.key(dead.current_name)
    again = stream_writer(env, b, "07")
    assert again.recover() == [key]
    objects = env.objects(b, indices=True)
    assert "crawl/OWLER-20260101000000-07-00009.warc.gz.cdxj" not in objects
    assert theirs not in objects
    ours = {k: v for k, v in objects.items() if "-07-" in k}
    assert len(indices_match(ours)) == 2
    assert len(objects[key + ".cdxj"].decode().splitlines()) == 5  # what the object holds
    again.close()


def test_the_streaming_archiver_stores_each_files_index(s3_server, tmp_path, monkeypatch):
    c = load_conf()
    c.update({"warc.s3.bucket": s3_server.bucket("cdxj-archiver"), "warc.s3.prefix": "crawl",
              "s3.endpoint": s3_server.endpoint, "warc.s3.max.age": 1})
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    handed = Handed()
    a = handed.archiver(c, "04")
    try:
        for i in range(3):
            a.submit(Page(f"http://e.example/{i}", PAGE, page_md(), i))

        def ticked():
            a.tick()
            return len(handed.stored) == 3
        wait_for("the pages stored", ticked, every=0.5)
    finally:
        a.close()
    objects = s3_server.objects("cdxj-archiver", "crawl/", indices=True)
    [key] = indices_match(objects)
    assert len(objects[key + ".cdxj"].decode().splitlines()) == 3


def test_warc2warcs_streamed_outputs_are_indexed_after_a_crash_too(env, tmp_path):
    from owler.warc.warc2warc.output import ArchiveCopier
    from owler.warc.warc2warc.progress_sqlite import Progress
    from tests.integration.test_warc2warc_progress import big_records

    b = env.bucket("cdxj-copy")
    conf = conf_for(env.port, **{"warc.s3.bucket": b, "warc.s3.prefix": "out",
                                 "warc.prefix": "COPY", "warc.s3.stream.part.size": 5 << 20})
    progress = Progress(tmp_path / "progress.sqlite")
    recs = big_records(14)
    c = ArchiveCopier.open(conf, "07", progress)
    assert all(c.add(*r) for r in recs[:10])  # one 5 MiB part stored
    done, _ = c.commit()
    stored = c.writer._fh.stored
    for r in recs[10:14]:
        c.add(*r)
    c.writer._fh.send_part()  # stored, and the task dies before it records it
    again = ArchiveCopier.open(conf, "07", progress)  # completed with what was recorded
    objects = env.objects(b, "out/", indices=True)
    [key] = indices_match(objects)
    assert len(objects[key]) == stored
    assert len(objects[key + ".cdxj"].decode().splitlines()) == len(done)
    for r in recs:
        again.add(*r)
    again.close()
    assert len(indices_match(env.objects(b, "out/", indices=True))) == 2
    progress.close()
