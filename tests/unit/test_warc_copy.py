"""warc2warc without Storm: the feed (files, acks, resume after a crash), the progress file, and the
archive copy (every record exactly once, across crashes and replays)."""

from __future__ import annotations

import gzip
import io
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from owler import wire
from owler.task.shard import Shard
from owler.warc.format.reader import InputRecord, iter_records
from owler.warc.warc2warc.input_feed import ARCHIVE_STREAM, WARCFeed
from owler.warc.warc2warc.inputs import InputSource
from owler.warc.warc2warc.output import ArchiveCopier
from owler.warc.warc2warc.progress_sqlite import Progress
from owler.warc.warc2warc.record_as_page import FILE_ID, WARC_KEY, WARC_OFFSET, record_metadata
from tests import warcgen as G


@pytest.fixture
def inputs(tmp_path):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    (d / "a.warc.gz").write_bytes(G.per_record_gzip(G.site_records("a.example", 3)))
    (d / "sub" / "b.warc").write_bytes(b"".join(G.site_records("b.example", 2)))
    (d / "ignored.txt").write_text("not a warc")
    return d


def make_feed(tmp_path, inputs, **conf):
    conf = {"warc2warc.input": str(inputs), "warc2warc.ack.flush": 0, **conf}
    progress = Progress(tmp_path / "progress.sqlite")
    return WARCFeed(conf, progress, InputSource.from_conf(conf)), progress


def drain(feed, now=0.0, ack=True):
    out = []
    while True:
        em = feed.next(now)
        if em is None:
            return out
        out.append(em)
        if ack:
            feed.ack(em.msg_id)


def test_feed_emits_every_record_once_and_finishes_the_files(tmp_path, inputs):
    feed, progress = make_feed(tmp_path, inputs)
    ems = drain(feed)
    assert len(ems) == 7 + 5
    streams = Counter(e.stream for e in ems)
    assert streams == {"default": 5, ARCHIVE_STREAM: 7}  # responses / warcinfo + requests
    url, content, md = next(e.values for e in ems if e.stream == "default")
    assert url.startswith("http://") and md[FILE_ID] and md["warc.record.date"]
    assert md["fetch.time"] == ["1714564800.0"]
    assert md[wire.RAW_DIGESTS] == [""]  # checked, and they match: the parser need not check
    assert gzip.decompress(wire.decode_content(content)).startswith(b"WARC/1.1")
    feed.flush(force=True)
    summary = progress.summary()
    assert summary["files"] == {"pending": 0, "reading": 0, "done": 2, "failed": 0}
    assert summary["records"] == 12 and feed.idle()
    feed2, _ = make_feed(tmp_path, inputs)  # a restart reads nothing again
    assert drain(feed2) == [] and feed2.idle()


def test_a_restart_emits_exactly_the_records_not_acked(tmp_path, inputs):
    feed, progress = make_feed(tmp_path, inputs)
    ems = drain(feed, ack=False)
    acked = {e.msg_id for i, e in enumerate(ems) if i % 3 != 1}
    for msg_id in acked:
        feed.ack(msg_id)
    feed.flush(force=True)  # then the process dies: the rest were in flight
    progress.close()
    again, progress2 = make_feed(tmp_path, inputs)
    redo = drain(again)
    assert {e.msg_id for e in redo} == {e.msg_id for e in ems} - acked
    again.flush(force=True)
    assert progress2.summary()["files"]["done"] == 2


def test_a_failed_record_is_emitted_again(tmp_path, inputs):
    feed, _ = make_feed(tmp_path, inputs)
    first = feed.next(0.0)
    assert wire.RAW_REPLAYED not in first.values[2]
    feed.fail(first.msg_id)
    again = feed.next(0.0)
    assert again.msg_id == first.msg_id and again.values[2][wire.RAW_REPLAYED] == ["true"]


def test_damaged_and_missing_files(tmp_path, inputs):
    whole = G.per_record_gzip(G.site_records("c.example", 2))
    (inputs / "cut.warc.gz").write_bytes(whole[:-30])
    (inputs / "stream.warc.gz").write_bytes(G.one_gzip_stream(G.site_records("d.example", 2)))
    feed, progress = make_feed(tmp_path, inputs)
    feed.refresh(0.0)
    (inputs / "sub" / "b.warc").unlink()  # listed, then gone
    ems = drain(feed)
    feed.flush(force=True)
    s = progress.summary()
    assert s["files"] == {"pending": 0, "reading": 0, "done": 3, "failed": 1}
    assert "b.warc" in s["failed"][0]["file"] and "cannot open" in s["failed"][0]["error"]
    messages = " ".join(p["message"] for p in s["problems"])
    assert "truncated gzip member" in messages and "several records in one gzip member" in messages
    assert len([e for e in ems if "d.example" in str(e.values[0]) or e.values[0] == ""]) >= 5


def test_two_feeds_split_the_files(tmp_path, inputs):
    for i in range(6):
        (inputs / f"x{i}.warc.gz").write_bytes(G.per_record_gzip(G.site_records(f"x{i}", 1)))
    conf = {"warc2warc.input": str(inputs), "warc2warc.ack.flush": 0}
    names = []
    for index in (0, 1):
        progress = Progress(tmp_path / "progress.sqlite")
        feed = WARCFeed(conf, progress, InputSource.from_conf(conf), shard=Shard(index, 2))
        names.append({e.values[2]["warc.file.name"][0] for e in drain(feed)})
    assert names[0] and names[1] and not names[0] & names[1]
    assert len(names[0] | names[1]) == 8


# -- the archive copy ---------------------------------------------------------------------------

def copier(tmp_path, progress, **conf):
    conf = {"warc.dir": str(tmp_path / "out"), "warc.prefix": "COPY", **conf}
    return ArchiveCopier(conf, "00", progress)


def records_of(inputs) -> list[tuple[int, str, bytes]]:
    out = []
    for i, path in enumerate(sorted(inputs.rglob("*.warc*"))):
        with open(path, "rb") as f:
            for rec in iter_records(f):
                if not isinstance(rec, InputRecord):
                    continue
                out.append((i, rec.key, rec.raw))
    return out


def archived_records(out_dir: Path) -> list[bytes]:
    got = []
    for path in sorted(out_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in iter_records(f):
                got.append(gzip.decompress(rec.raw) if rec.compressed else rec.raw)
    return got


def plain(raw: bytes) -> bytes:
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def test_copy_is_byte_identical_and_rotates_after_commits(tmp_path, inputs):
    progress = Progress(tmp_path / "p.sqlite")
    c = copier(tmp_path, progress, **{"warc.rotation.size": 1200})
    recs = records_of(inputs)
    for i, (fid, key, raw) in enumerate(recs):
        assert c.add(fid, key, raw)
        if i % 4 == 3:
            c.commit()
    c.close()
    files = sorted((tmp_path / "out").glob("*.warc.gz"))
    assert len(files) >= 2 and not list((tmp_path / "out").glob("*.open"))
    got = archived_records(tmp_path / "out")
    warcinfos = [g for g in got if b"WARC-Type: warcinfo" in g and b"isPartOf: COPY" in g]
    assert len(warcinfos) == len(files)  # each output file's own warcinfo
    assert Counter(g for g in got if g not in warcinfos) == Counter(plain(r) for _, _, r in recs)
    members = set()
    for path in files:  # the compressed members themselves were copied as they were
        members.update(G.members(path.read_bytes()))
    assert all(raw in members for _, _, raw in recs if raw[:2] == b"\x1f\x8b")


def test_a_crash_and_storms_replays_archive_each_record_exactly_once(tmp_path, inputs):
    recs = records_of(inputs)
    progress = Progress(tmp_path / "p.sqlite")
    c = copier(tmp_path, progress)
    for fid, key, raw in recs[:5]:
        c.add(fid, key, raw)
    c.commit()  # 5 recorded, acked
    for fid, key, raw in recs[5:9]:
        c.add(fid, key, raw)  # written, never recorded: the process dies now
    c.writer._fh.flush()
    progress.close()

    progress = Progress(tmp_path / "p.sqlite")
    c2 = copier(tmp_path, progress)
    finalized = c2.recover()
    assert len(finalized) == 1
    written = [c2.add(fid, key, raw) for fid, key, raw in recs]  # Storm replays everything
    assert written == [False] * 5 + [True] * (len(recs) - 5)
    c2.close()
    got = archived_records(tmp_path / "out")
    body = [g for g in got if b"isPartOf: COPY" not in g]
    assert Counter(body) == Counter(plain(r) for _, _, r in recs)


def test_a_failed_record_write_cuts_the_file_back(tmp_path, inputs):
    recs = records_of(inputs)
    progress = Progress(tmp_path / "p.sqlite")
    c = copier(tmp_path, progress)
    c.add(*recs[0])
    c.commit()
    size = c.writer.size
    c.add(*recs[1])
    c.add(*recs[2])
    c.abort()  # e.g. the progress file could not be written: the tuples are failed
    assert c.writer.size == size
    for r in recs[1:3]:
        assert c.add(*r)  # replayed: written (once)
    c.close()
    body = [g for g in archived_records(tmp_path / "out") if b"isPartOf: COPY" not in g]
    assert Counter(body) == Counter(plain(r) for _, _, r in recs[:3])


def test_key_metadata_names_a_record_inside_a_multi_record_member():
    data = G.one_gzip_stream(G.site_records("m.example", 1))
    recs = [r for r in iter_records(io.BytesIO(data)) if isinstance(r, InputRecord)]
    assert [r.key for r in recs] == ["0", "0+1", "0+2"]
    md = record_metadata(recs[1], "f")
    assert md[WARC_KEY] == ["0+1"] and md[WARC_OFFSET] == ["0"]


def test_a_copy_task_opens_its_archive_and_recovers_what_it_left_open(tmp_path, inputs):
    recs = records_of(inputs)
    conf = {"warc.dir": str(tmp_path / "out"), "warc.prefix": "COPY",
            "warc2warc.progress.path": str(tmp_path / "p.sqlite")}
    c = ArchiveCopier.open(conf, "00")
    for fid, key, raw in recs[:3]:
        assert c.add(fid, key, raw)
    c.commit()
    c.add(*recs[3])  # written, never recorded: the task dies
    c.writer._fh.flush()
    c.progress.close()

    c2 = ArchiveCopier.open(conf, "00")  # the file left open is cut back and finalized
    assert c2.owns_progress and len(list((tmp_path / "out").glob("*.warc.gz"))) == 1
    assert not c2.add(*recs[0]) and c2.add(*recs[3])
    c2.close()
    with pytest.raises(sqlite3.ProgrammingError):  # the copier's own connection: closed with it
        c2.progress.conn.execute("SELECT 1")
    body = [g for g in archived_records(tmp_path / "out") if b"isPartOf: COPY" not in g]
    assert Counter(body) == Counter(plain(r) for _, _, r in recs[:4])
    progress = Progress(tmp_path / "p.sqlite")
    c3 = ArchiveCopier.open(conf, "00", progress)  # the spout's own client: not closed with it
    assert not c3.owns_progress and not c3.add(*recs[3])
    c3.close()
    assert progress.archived(recs[3][0], recs[3][1])


def test_an_ack_repeated_is_counted_once(tmp_path):
    progress = Progress(tmp_path / "progress.sqlite")
    try:
        progress.register([("in/a.warc", 100, None)])
        fid = progress.file("in/a.warc")["id"]
        progress.record_acks({fid: ["10", "20"]}, {})
        progress.record_acks({fid: ["20", "30"]}, {})  # "20" again: a replay acked twice
        assert progress.file("in/a.warc")["records"] == 3
        assert progress.acked_keys(fid) == {"10", "20", "30"}
    finally:
        progress.close()
