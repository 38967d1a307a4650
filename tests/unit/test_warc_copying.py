"""The WARC spout's copy (owler.warc.warc2warc.copying_feed), without Storm, on real files and a
real progress file: a record is released (an HTTP response to Storm, any other record acked) only
once its copy is recorded; every record is copied exactly once across Storm's replays, a crash
and failed writes or commits."""

from __future__ import annotations

from collections import Counter

import pytest

from owler import wire
from owler.warc.warc2warc.copying_feed import BACKOFF, CopyBroken, CopyingFeed
from owler.warc.warc2warc.input_feed import WARCFeed
from owler.warc.warc2warc.inputs import InputSource
from owler.warc.warc2warc.output import ArchiveCopier
from owler.warc.warc2warc.progress_sqlite import Progress
from tests import warcgen as G
from tests.unit.test_warc_copy import archived_records, inputs, plain, records_of  # noqa: F401

NOW = 1000.0


def make(tmp_path, inputs, **conf):
    conf = {"warc2warc.input": str(inputs), "warc2warc.ack.flush": 0,
            "warc.dir": str(tmp_path / "out"), "warc.prefix": "COPY",
            "warc2warc.copy.batch": 1000, "warc2warc.copy.interval": 0.5, **conf}
    progress = Progress(tmp_path / "p.sqlite")
    feed = WARCFeed(conf, progress, InputSource.from_conf(conf))
    copier = ArchiveCopier.open(conf, "00", progress)
    reports: list[str] = []
    return CopyingFeed(feed, copier, conf, report=reports.append), reports


def pull(cf, now=NOW):
    out = []
    while (em := cf.next(now)) is not None:
        out.append(em)
    return out


def run_out(cf, now=NOW, rounds=20):
    """Storm's part: emit what is released, ack it; until every file is done."""
    emitted = []
    for i in range(rounds):
        t = now + i * (BACKOFF + 0.1)
        ems = pull(cf, t)
        cf.maintain(t)
        ems += pull(cf, t)
        for em in ems:
            cf.feed.ack(em.msg_id)
        emitted += ems
        cf.feed.flush(t, force=True)
        if cf.feed.idle() and not cf.waiting:
            return emitted
    raise AssertionError("the feed did not finish")


def copied(tmp_path) -> Counter:
    return Counter(g for g in archived_records(tmp_path / "out") if b"isPartOf: COPY" not in g)


def every_record(inputs) -> Counter:
    return Counter(plain(r) for _, _, r in records_of(inputs))


def test_records_are_released_only_once_their_copy_is_recorded(tmp_path, inputs):
    cf, reports = make(tmp_path, inputs)
    assert pull(cf) == []  # all 12 read and written, none recorded: nothing for Storm
    assert cf.counters["warc/records"] == 12 and len(cf.waiting) == 12
    assert "acked" not in cf.feed.counters  # nor a request or warcinfo record acked
    assert list((tmp_path / "out").glob("*.open"))
    cf.maintain(NOW)  # warc2warc.copy.interval: recorded
    ems = pull(cf)
    assert [e.stream for e in ems] == ["default"] * 5 and all(e.archived for e in ems)
    assert cf.feed.counters["acked"] == 7  # the other records: copied, so done
    url, content, md = ems[0].values
    assert url.startswith("http://") and wire.decode_content(content) == ems[0].raw
    for em in ems:
        cf.feed.ack(em.msg_id)  # Storm's acks
    cf.feed.flush(NOW, force=True)
    s = cf.feed.progress.summary()
    assert s["files"]["done"] == 2 and s["records"] == 12
    cf.close()
    members = sum(len(r) for _, _, r in records_of(inputs) if r[:2] == b"\x1f\x8b")
    out = sum(f.stat().st_size for f in (tmp_path / "out").glob("*.warc.gz"))
    assert members < cf.counters["warc/bytes"] < out  # (and the output's own warcinfo)
    assert copied(tmp_path) == every_record(inputs) and not reports


def test_a_batch_releases_before_the_interval(tmp_path, inputs):
    cf, _ = make(tmp_path, inputs, **{"warc2warc.copy.batch": 4})
    first = cf.next(NOW)
    assert first is not None and cf.counters["warc/records"] == 4
    assert cf.counters["warc/commits"] == 1


def test_a_record_storm_fails_is_emitted_again_and_not_copied_again(tmp_path, inputs):
    cf, _ = make(tmp_path, inputs)
    pull(cf)
    cf.maintain(NOW)
    ems = pull(cf)
    cf.feed.fail(ems[0].msg_id)
    again = pull(cf)
    assert [e.msg_id for e in again] == [ems[0].msg_id]
    assert again[0].values[2][wire.RAW_REPLAYED] == ["true"]
    assert cf.counters["warc/records"] == 12
    for em in ems:
        cf.feed.ack(em.msg_id)
    cf.close()
    assert copied(tmp_path) == every_record(inputs)


def test_a_crash_loses_nothing_and_copies_nothing_twice(tmp_path, inputs):
    cf, _ = make(tmp_path, inputs, **{"warc2warc.max.in.flight": 6})
    pull(cf)  # 6 read and written
    cf.maintain(NOW)  # recorded: their responses released, never acked by Storm
    released = pull(cf)
    assert released
    written_before = cf.counters["warc/records"]
    assert written_before > 6 and cf.waiting  # read after the acks: written, not recorded
    cf.copier.writer._fh.flush()
    cf.feed.progress.close()  # the process dies here

    cf2, _ = make(tmp_path, inputs)  # the partition's open file is cut back to what is recorded
    emitted = run_out(cf2)
    assert cf2.counters["warc/duplicates"] == 6  # recorded before: released without a copy
    assert cf2.counters["warc/records"] == 6  # the rest copied now, once
    assert len(emitted) == 5  # every response goes to Storm
    cf2.close()
    assert copied(tmp_path) == every_record(inputs)


def test_a_failed_write_cuts_back_and_reads_again(tmp_path, inputs, monkeypatch):
    cf, reports = make(tmp_path, inputs)
    real = cf.copier.writer.write_record_bytes
    calls = []

    def flaky(raw):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(raw)

    monkeypatch.setattr(cf.copier.writer, "write_record_bytes", flaky)
    assert pull(cf) == []
    assert cf.counters["warc/write_failed"] == 1 and not cf.waiting  # the 2 written: cut back
    assert "No space left on device" in reports[0]
    assert pull(cf, NOW + BACKOFF / 2) == []  # nothing read while it backs off
    emitted = run_out(cf, NOW + BACKOFF)
    assert len(emitted) == 5 and not any(wire.RAW_REPLAYED in e.values[2] for e in emitted)
    cf.close()
    assert copied(tmp_path) == every_record(inputs)


def test_a_failed_commit_releases_nothing_and_copies_again(tmp_path, inputs, monkeypatch):
    cf, reports = make(tmp_path, inputs)
    progress = cf.copier.progress
    real = progress.commit_archived

    def once(*a, **k):
        monkeypatch.setattr(progress, "commit_archived", real)
        raise OSError("the progress store is away")

    monkeypatch.setattr(progress, "commit_archived", once)
    pull(cf)
    cf.maintain(NOW)
    assert pull(cf) == [] and not cf.waiting and "acked" not in cf.feed.counters
    assert "cannot record copied WARC records" in reports[0]
    emitted = run_out(cf, NOW + BACKOFF)
    assert len(emitted) == 5 and cf.counters["warc/records"] == 24
    cf.close()
    assert copied(tmp_path) == every_record(inputs)


def test_close_records_what_is_written(tmp_path, inputs):
    cf, _ = make(tmp_path, inputs)
    pull(cf)
    cf.close()
    cf.feed.close()
    assert copied(tmp_path) == every_record(inputs)
    assert not list((tmp_path / "out").glob("*.open"))
    cf2, _ = make(tmp_path, inputs)  # a restart: all archived, the responses still to parse
    assert len(run_out(cf2)) == 5 and cf2.counters["warc/duplicates"] == 5
    assert "warc/records" not in cf2.counters


def test_a_record_whose_part_is_lost_is_copied_again(tmp_path, inputs, monkeypatch):
    """(S3 streaming: a part S3 refused; the writer says which records were in it.)"""
    cf, reports = make(tmp_path, inputs)
    pull(cf)
    first = next(iter(cf.waiting))
    end = cf.copier.pending[0][3]
    monkeypatch.setattr(cf.copier.writer, "lost", lambda name, e: e == end)
    cf.maintain(NOW)
    assert first not in cf.waiting and len(cf.waiting) == 0
    assert cf.counters["warc/write_failed"] == 1 and "lost with an S3 part" in reports[0]
    assert list(cf.feed.retry) == [f"{first[0]}:{first[1]}"]  # read again, not replayed
    monkeypatch.undo()
    for em in pull(cf, NOW + BACKOFF / 2):  # the others are released, nothing read meanwhile
        cf.feed.ack(em.msg_id)
    assert cf.counters["warc/records"] == 12 and cf.feed.retry
    run_out(cf, NOW + BACKOFF)
    assert cf.counters["warc/records"] == 13 and cf.feed.progress.summary()["records"] == 12


def test_a_call_reads_at_most_a_batch_while_nothing_is_stored(tmp_path, inputs, monkeypatch):
    cf, _ = make(tmp_path, inputs, **{"warc2warc.copy.batch": 5})
    monkeypatch.setattr(cf.copier.writer, "durable", lambda name, end: False)  # (S3: no part yet)
    assert cf.next(NOW) is None and cf.counters["warc/records"] == 5
    assert cf.next(NOW) is None and cf.counters["warc/records"] == 10


def test_an_ack_the_progress_cannot_record_yet_releases_the_rest(tmp_path, inputs, monkeypatch):
    # a file of a warcinfo record only: its copy recorded, it is done
    (inputs / "0info.warc.gz").write_bytes(G.per_record_gzip([G.record("warcinfo", None,
                                                                       b"x: y\r\n")]))
    cf, _ = make(tmp_path, inputs)
    pull(cf)

    calls = []

    def away(*a, **k):
        calls.append(1)
        raise OSError("the progress store is away")

    monkeypatch.setattr(cf.feed.progress, "record_acks", away)  # a file's end cannot be recorded
    cf.maintain(NOW)
    assert calls and len(pull(cf)) == 5 and not cf.waiting and cf.feed.counters["acked"] == 8
    monkeypatch.undo()
    cf.feed.retry_done()  # (the spout's next gauges) the file's end recorded now
    assert cf.feed.progress.summary()["files"]["done"] == 1


def test_an_output_that_cannot_be_cut_back_stops_the_task(tmp_path, inputs, monkeypatch):
    cf, _ = make(tmp_path, inputs)
    pull(cf)

    def broken(*a, **k):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(cf.copier, "abort", broken)
    monkeypatch.setattr(cf.copier.progress, "commit_archived", broken)
    with pytest.raises(CopyBroken, match="Input/output error"):
        cf.maintain(NOW)
    assert len(cf.waiting) == 12 and not cf.feed.retry  # nothing released, nothing read again
