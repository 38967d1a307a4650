"""The warc2warc progress in a real OpenSearch node and its output streamed to a real S3 API server
(moto), without Storm: what lets a spout task restarted on another node resume exactly
where the dead one stopped (owler.warc.warc2warc.progress_opensearch, owler.warc.warc2warc.output
with owler.warc.storage.s3_stream, owler.warc.warc2warc.copying_feed).

The feed's behaviour is checked as the SQLite store's (tests/unit/test_warc_copy.py); the copy is
checked across crashes at each point that matters: after a part is stored and recorded, after a
part is stored and not recorded, after a file's last part is stored."""

from __future__ import annotations

import gzip
import io
import itertools
import os
from collections import Counter

import pytest

from owler.task.shard import Shard
from owler.warc.format.reader import InputRecord, iter_records
from owler.warc.storage.s3_stream import S3StreamWriter
from owler.warc.warc2warc.copying_feed import CopyingFeed
from owler.warc.warc2warc.input_feed import WARCFeed
from owler.warc.warc2warc.inputs import InputSource
from owler.warc.warc2warc.output import ArchiveCopier
from owler.warc.warc2warc.progress import open_progress
from owler.warc.warc2warc.progress_opensearch import OpenSearchProgress, file_id
from tests import warcgen as G
from tests.unit.test_warc_copy import drain, inputs, plain  # noqa: F401 (inputs: a fixture)

pytestmark = pytest.mark.integration

_names = itertools.count()
MIB = 1 << 20


@pytest.fixture
def conf(opensearch, s3_server, tmp_path):
    """A frontier of its own (its progress indices follow the status index's name) and an output
    bucket of its own."""
    n = next(_names)
    return {"frontier.backend": "opensearch", "services.opensearch.port": opensearch.port,
            "opensearch.status.index.name": f"w2wprog{n}",
            "s3.endpoint": s3_server.endpoint, "warc.s3.bucket": s3_server.bucket(f"w2wprog{n}"),
            "warc.s3.prefix": "out", "warc.prefix": "COPY", "warc.dir": str(tmp_path / "none"),
            "warc2warc.ack.flush": 0, "warc.s3.stream.part.size": 5 * MIB}


@pytest.fixture(autouse=True)
def s3_env(s3_server, monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)


def feed_of(conf, inputs, shard=Shard()):
    conf = {**conf, "warc2warc.input": str(inputs)}
    progress = open_progress(conf)
    assert isinstance(progress, OpenSearchProgress)
    return WARCFeed(conf, progress, InputSource.from_conf(conf), shard=shard), progress


# -- the feed ------------------------------------------------------------------------------------

def test_a_restarted_feed_emits_exactly_the_records_not_acked(conf, inputs):
    feed, progress = feed_of(conf, inputs)
    ems = drain(feed, ack=False)
    assert len(ems) == 12
    acked = {e.msg_id for i, e in enumerate(ems) if i % 3 != 1}
    for msg_id in acked:
        feed.ack(msg_id)
    feed.flush(force=True)  # then the task dies (its node is lost): the rest were in flight
    row = progress.file(str(inputs / "a.warc.gz"))
    assert row["id"] == file_id(str(inputs / "a.warc.gz")) and row["state"] == "reading"
    assert row["resume_offset"] > 0 and row["records"] > 0
    progress.close()

    again, progress2 = feed_of(conf, inputs)  # "on another node": only OpenSearch is shared
    redo = drain(again)
    assert {e.msg_id for e in redo} == {e.msg_id for e in ems} - acked
    again.flush(force=True)
    s = progress2.summary()
    assert s["files"] == {"pending": 0, "reading": 0, "done": 2, "failed": 0}
    assert s["records"] == 12 and again.idle()
    third, _ = feed_of(conf, inputs)
    assert drain(third) == [] and third.idle()  # a file done is never read again
    # nothing of the done files' acks is left
    progress2._refresh("acks")
    _, data = progress2.client.request("POST", f"/{progress2.index['acks']}/_count")
    assert data["count"] == 0


def test_two_feeds_split_the_files(conf, inputs):
    for i in range(6):
        (inputs / f"x{i}.warc.gz").write_bytes(G.per_record_gzip(G.site_records(f"x{i}", 1)))
    names = []
    for index in (0, 1):
        feed, _ = feed_of(conf, inputs, Shard(index, 2))
        names.append({e.values[2]["warc.file.name"][0] for e in drain(feed)})
    assert names[0] and names[1] and not names[0] & names[1]
    assert len(names[0] | names[1]) == 8


def test_damage_and_missing_files_are_reported(conf, inputs):
    whole = G.per_record_gzip(G.site_records("c.example", 2))
    (inputs / "cut.warc.gz").write_bytes(whole[:-30])
    feed, progress = feed_of(conf, inputs)
    feed.refresh(0.0)
    (inputs / "sub" / "b.warc").unlink()  # listed, then gone
    drain(feed)
    feed.flush(force=True)
    s = progress.summary()
    assert s["files"] == {"pending": 0, "reading": 0, "done": 2, "failed": 1}
    assert "b.warc" in s["failed"][0]["file"] and "cannot open" in s["failed"][0]["error"]
    assert "truncated gzip member" in " ".join(p["message"] for p in s["problems"])
    assert s["errors"] >= 1


def test_bad_progress_backend_is_a_clear_error(conf):
    from owler.conf import ConfError

    with pytest.raises(ConfError, match="warc2warc.progress.backend"):
        open_progress({**conf, "warc2warc.progress.backend": "redis"})


# -- the copy, streamed to S3 ---------------------------------------------------------------------

def big_records(n: int, size: int = 700 << 10) -> list[tuple[int, str, bytes]]:
    """``n`` records of one input file, each a gzip member of about ``size`` bytes (random,
    incompressible payloads: a few make an S3 part)."""
    recs = []
    body = [G.record("response", f"http://big.example/{i}",
                     G.http_response(os.urandom(size), headers=[("Content-Type", "image/png")]))
            for i in range(n)]
    data = G.per_record_gzip(body)
    for rec in iter_records(io.BytesIO(data)):
        if isinstance(rec, InputRecord):
            recs.append((4242, rec.key, rec.raw))
    return recs


def copier(conf) -> ArchiveCopier:
    c = ArchiveCopier.open(conf, "07")
    assert c.streaming and isinstance(c.writer, S3StreamWriter)
    return c


def archived(s3_server, conf) -> tuple[dict[str, bytes], Counter]:
    objects = s3_server.objects(conf["warc.s3.bucket"], "out/")
    got = Counter()
    for data in objects.values():
        for rec in iter_records(io.BytesIO(data)):
            raw = gzip.decompress(rec.raw) if rec.compressed else rec.raw
            if b"isPartOf: COPY" not in raw:
                got[raw] += 1
    return objects, got


def test_a_copy_task_lost_after_storing_parts_resumes_exactly_once(conf, s3_server):
    recs = big_records(20)
    c = copier(conf)
    written = [c.add(*r) for r in recs[:10]]  # 10 × 700 KiB: one 5 MiB part stored
    assert all(written) and c.writer._fh.parts
    done, lost = c.commit()
    stored = c.writer._fh.stored
    assert done and not lost and len(done) < 10  # the records of the stored part only
    assert c.progress.output(c.writer.current_name)["committed"] == stored
    for r in recs[10:14]:
        c.add(*r)
    c.writer._fh.send_part()  # a part stored, and the task dies before it is recorded
    assert c.writer._fh.stored > stored
    # (no close: the process is gone; its upload stays open in S3)

    c2 = copier(conf)  # the task restarted on another node: its upload completed, cut back
    objects, got = archived(s3_server, conf)
    assert len(objects) == 1 and len(next(iter(objects.values()))) == stored
    assert sum(got.values()) == len(done) and max(got.values()) == 1
    replays = [c2.add(*r) for r in recs]  # Storm replays every record not acked
    assert replays == [False] * len(done) + [True] * (len(recs) - len(done))
    c2.close()
    objects, got = archived(s3_server, conf)
    assert got == Counter(plain(r) for _, _, r in recs)  # every record, once
    s = OpenSearchProgress(conf).summary()
    assert s["outputs"] == {"closed": 2}


def test_a_file_closed_by_size_or_age_records_its_last_records_first(conf, s3_server):
    conf = {**conf, "warc.rotation.size": 3 * MIB}
    recs = big_records(12)
    c = copier(conf)
    got_done = []
    for r in recs[:6]:
        c.add(*r)
    done, _ = c.commit()  # 4.2 MB > rotation size: the file is completed, its records recorded
    got_done += done
    assert len(done) == 6 and c.writer.current_name == ""
    c.add(*recs[6])
    done, lost = c.make_durable()  # the oldest record waited warc.s3.max.age: stored now
    assert done == [recs[6][:2]] and not lost
    for r in recs[7:]:
        c.add(*r)
    c.close()  # the last file's records are recorded before it is completed
    again = copier(conf)
    assert [again.add(*r) for r in recs] == [False] * len(recs)
    again.close()
    objects, got = archived(s3_server, conf)
    assert len(objects) == 3 and got == Counter(plain(r) for _, _, r in recs)


def test_a_task_failing_to_record_keeps_only_what_is_recorded(conf, s3_server):
    recs = big_records(12)
    c = copier(conf)
    for r in recs[:8]:
        c.add(*r)
    done, _ = c.commit()
    assert done
    for r in recs[8:]:
        c.add(*r)
    c.writer._fh.send_part()  # stored, then the progress store fails to record them
    gone = c.abort()
    assert set(gone) == {r[:2] for r in recs[len(done):]}
    objects, got = archived(s3_server, conf)
    assert sum(got.values()) == len(done)  # the file completed with the recorded parts only
    for r in recs:  # the failed tuples come again
        c.add(*r)
    c.close()
    _, got = archived(s3_server, conf)
    assert got == Counter(plain(r) for _, _, r in recs)


def test_the_spouts_copy_end_to_end_releases_after_the_part_and_leaves_no_commit_documents(
        conf, inputs, s3_server):
    """Every record through the feed and the spout's copy (one client of the progress store for
    both, as in the spout): nothing released before its part is stored, each record once in the
    bucket, every file done, and the commit documents pruned (outputs closed, files done)."""
    conf = {**conf, "warc2warc.input": str(inputs), "warc.s3.max.age": 5}
    progress = open_progress(conf)
    feed = WARCFeed(conf, progress, InputSource.from_conf(conf))
    cf = CopyingFeed(feed, ArchiveCopier.open(conf, "07", progress), conf)
    now = 1000.0
    assert cf.next(now) is None  # 12 small records: a part far from full
    cf.maintain(now)
    assert cf.next(now) is None and not s3_server.objects(conf["warc.s3.bucket"], "out/")
    cf.maintain(now + 5)  # the oldest waited warc.s3.max.age: its part stored, then released
    ems = []
    while (em := cf.next(now + 5)) is not None:
        ems.append(em)
    assert len(ems) == 5 and feed.counters["acked"] == 7
    for em in ems:
        feed.ack(em.msg_id)
    feed.flush(force=True)
    cf.maintain(now + 20)  # nothing written for warc.s3.max.age: the upload is completed
    cf.close()
    s = progress.summary()
    assert s["files"]["done"] == 2 and s["outputs"] == {"closed": 1}
    progress._refresh("archived")
    _, data = progress.client.request("POST", f"/{progress.index['archived']}/_count")
    assert data["count"] == 0
    _, got = archived(s3_server, conf)
    assert sum(got.values()) == 12 and max(got.values()) == 1
    progress.close()


def test_the_progress_indices_have_the_status_indexs_replicas(conf, opensearch):
    """On a cluster a lost node must not take the progress's only copy: its indices take
    ``opensearch.status.replicas`` as the frontier's do (0 unless set)."""
    for replicas, name in ((None, "w2wrep-default"), (2, "w2wrep-two")):
        c = {**conf, "opensearch.status.index.name": name}
        if replicas is not None:
            c["opensearch.status.replicas"] = replicas
        progress = OpenSearchProgress(c)
        try:
            for index in progress.index.values():
                _, got = opensearch.request("GET", f"/{index}/_settings")
                assert got[index]["settings"]["index"]["number_of_replicas"] == str(
                    replicas or 0), index
        finally:
            progress.close()
