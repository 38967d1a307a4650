"""The CDXJ index the WARC writer keeps beside each file (owler.warc.storage.index through
WARCWriter): a companion while the file is written, the sorted index before the file's final
name, lines equal to those read off the finished file, cut back with the file, none with
``warc.cdxj: false``; after a crash the recovered file's index from its companion when it names
exactly the file's records, else from the file; leftovers of files finished without their
index; the uploader's index made when missing."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from owler.warc import WARCWriter, recover_open_files
from owler.warc.format import cdxj
from owler.warc.storage import index as X
from tests.unit.test_warc_writer import HTML, REQ, Clock, crashed_file, exchange, finals


def index_of(warc: Path) -> list[str]:
    return warc.with_name(warc.name + ".cdxj").read_text().splitlines()


def read_off(warc: Path) -> list[str]:
    with open(warc, "rb") as f:
        return sorted(cdxj.file_lines(f, warc.name))


def companion(w: WARCWriter) -> Path:
    return w.directory / (w.current_name + X.COMPANION_SUFFIX)


def test_lines_go_to_the_companion_and_the_sorted_index_comes_before_the_final_name(tmp_path):
    rnd = random.Random(2)
    urls = [f"http://{rnd.choice('abc')}.example.com/{rnd.randrange(1000)}" for _ in range(12)]
    with WARCWriter(tmp_path, partition="00", rotation_size=40_000, clock=Clock()) as w:
        for i, url in enumerate(urls):
            exchange(w, url=url, payload=rnd.randbytes(9000),
                     metadata='{"n": 1}' if i % 2 else None)
            if w.current_name:  # the open file's lines, in the order written
                got = companion(w).read_text().splitlines()
                assert got and [int(cdxj.line_fields(g)[2]["offset"]) for g in got] == sorted(
                    int(cdxj.line_fields(g)[2]["offset"]) for g in got)
        assert w.stats.files_closed >= 2
    files = finals(tmp_path)
    assert len(files) == w.stats.files_closed
    lines = []
    for f in files:
        idx = index_of(f)
        assert idx == sorted(idx) == read_off(f)  # sorted, and what the file itself says
        lines += idx
    assert sorted(cdxj.line_fields(line)[2]["url"] for line in lines) == sorted(urls)
    # nothing is left but the files and their indices
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f.name for f in files] + [f.name + ".cdxj" for f in files])


def test_the_index_is_written_before_the_file_is_final(tmp_path, monkeypatch):
    from owler.warc.storage import files as F

    seen = []
    real = F.finalize_open

    def finalize(path, *a, **kw):
        seen.append((path.name, path.with_name(path.name[:-5] + ".cdxj").exists()))
        return real(path, *a, **kw)

    monkeypatch.setattr(F, "finalize_open", finalize)
    with WARCWriter(tmp_path, partition="00", clock=Clock()) as w:
        exchange(w)
    assert seen == [("OWLER-20240501120000-00-00000.warc.gz.open", True)]


def test_revisits_and_raw_records_are_indexed_and_cut_back(tmp_path):
    w = WARCWriter(tmp_path, partition="00", clock=Clock())
    exchange(w, url="http://e.example/a")
    exchange(w, url="http://e.example/a", status_line="HTTP/1.1 304 Not Modified", payload=b"",
             response_headers=[], revisit="server-not-modified",
             refers_to_date="2024-05-01T12:00:00.25Z", payload_digest="sha1:AAAA")
    keep = w.size
    other = tmp_path / "src"
    with WARCWriter(other, partition="00", clock=Clock(), cdxj=False) as src:
        exchange(src, url="http://e.example/raw")
    with open(finals(other)[0], "rb") as f:
        from owler.warc.format.reader import InputRecord, iter_records
        recs = [r for r in iter_records(f) if isinstance(r, InputRecord)]
    import gzip
    w.write_record_bytes(recs[2].raw)  # a gzip member as it was
    w.write_record_bytes(gzip.decompress(recs[2].raw))  # an uncompressed record
    assert len(companion(w).read_text().splitlines()) == 4
    w.cut_back(keep)  # the copy could not record the last two: they go, lines and all
    assert len(companion(w).read_text().splitlines()) == 2
    w.write_record_bytes(recs[1].raw)  # a request: no line
    w.close()
    [f] = finals(tmp_path)
    idx = index_of(f)
    assert idx == read_off(f)
    assert [cdxj.line_fields(line)[2].get("mime") for line in idx] == ["text/html",
                                                                       "warc/revisit"]


def test_no_index_when_turned_off_and_from_conf(tmp_path):
    w = WARCWriter.from_conf({"warc.dir": str(tmp_path / "a"), "warc.cdxj": False})
    exchange(w)
    w.close()
    assert [p.name for p in (tmp_path / "a").iterdir()] == [finals(tmp_path / "a")[0].name]
    w = WARCWriter.from_conf({"warc.dir": str(tmp_path / "b")})
    assert w.cdxj and X.indexing({}) and not X.indexing({"warc.cdxj": "false"})
    w.close()


def test_a_record_the_index_cannot_take_is_kept_in_the_file_and_counted(tmp_path, caplog):
    w = WARCWriter(tmp_path, partition="00", clock=Clock())
    exchange(w, url="http://e.example:99999/")  # a port SURT refuses
    exchange(w, url="http://e.example/")
    w.close()
    [f] = finals(tmp_path)
    assert w.stats.unindexed == 1 and "not indexed" in caplog.text
    assert [cdxj.line_fields(line)[2]["url"] for line in index_of(f)] == ["http://e.example/"]


def test_a_companion_that_missed_a_line_is_replaced_by_the_file(tmp_path, monkeypatch):
    w = WARCWriter(tmp_path, partition="00", clock=Clock())
    exchange(w, url="http://e.example/1")

    class Full:
        closed = False

        def write(self, data):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

        def close(self):
            self.closed = True

    w._index._fh = Full()
    exchange(w, url="http://e.example/2")  # the file has it, the companion does not
    assert w._index.broken
    w.close()
    [f] = finals(tmp_path)
    assert len(index_of(f)) == 2 and index_of(f) == read_off(f)


def test_an_index_that_cannot_be_written_is_made_at_the_next_start(tmp_path, monkeypatch):
    w = WARCWriter(tmp_path, partition="00", clock=Clock())
    exchange(w)
    real = X.write_index
    monkeypatch.setattr(X, "write_index", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    w.close()  # the WARC file is finished all the same; its companion stays
    [f] = finals(tmp_path)
    assert not f.with_name(f.name + ".cdxj").exists()
    assert f.with_name(f.name + X.COMPANION_SUFFIX).exists()
    monkeypatch.setattr(X, "write_index", real)
    assert recover_open_files(tmp_path, prefix="OWLER", partition="00") == []
    assert index_of(f) == read_off(f) and not f.with_name(f.name + X.COMPANION_SUFFIX).exists()


@pytest.mark.parametrize("companion_state", ["whole", "missing", "short", "longer", "garbage"])
def test_a_crashed_files_index(tmp_path, companion_state, caplog):
    path, starts = crashed_file(tmp_path, n=6)
    comp = path.with_name(path.name[:-5] + X.COMPANION_SUFFIX)
    lines = comp.read_text().splitlines()
    assert len(lines) == 6
    with open(path, "r+b") as f:  # the last record is half written when the process dies
        f.truncate(starts[-1] + 10)
    if companion_state == "whole":  # its line was never written (it follows the record)
        comp.write_text("".join(line + "\n" for line in lines[:5]))
    elif companion_state == "missing":
        comp.unlink()
    elif companion_state == "short":  # a line lost (the OS never wrote it)
        comp.write_text("".join(line + "\n" for line in lines[:3]) + lines[3][:20])
    elif companion_state == "longer":  # the cut record's line was written
        comp.write_text("".join(line + "\n" for line in lines))
    else:
        comp.write_bytes(b"\xff\xfe not an index\n")
    [final] = recover_open_files(tmp_path, prefix="OWLER", partition="00")
    assert index_of(final) == read_off(final) and len(index_of(final)) == 5
    assert not comp.exists()
    rebuilt = "reading the index off the file" in caplog.text
    assert rebuilt == (companion_state in ("short", "garbage"))


def test_a_recovered_file_without_a_capture_leaves_no_index(tmp_path):
    path, starts = crashed_file(tmp_path, n=1)
    with open(path, "r+b") as f:
        f.truncate(starts[0] + 5)  # only the warcinfo record is whole
    comp = path.with_name(path.name[:-5] + X.COMPANION_SUFFIX)
    assert comp.exists()
    assert recover_open_files(tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    corrupt, _ = crashed_file(tmp_path, n=1, partition="01")
    corrupt.write_bytes(b"not gzip at all")
    assert recover_open_files(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [corrupt.name[:-5] + ".corrupt"]


def test_recovery_without_the_index_removes_the_companion(tmp_path):
    path, _ = crashed_file(tmp_path, n=2)
    [final] = recover_open_files(tmp_path, cdxj=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]


def test_leftovers_of_other_writers_are_left_alone(tmp_path):
    theirs, _ = crashed_file(tmp_path, n=1, partition="01")
    comp = theirs.with_name(theirs.name[:-5] + X.COMPANION_SUFFIX)
    assert recover_open_files(tmp_path, partition="00") == []
    assert comp.exists() and theirs.exists()
    (tmp_path / "OWLER-20240501120000-00-00009.warc.gz.cdxj.part").write_text("x\n")  # no WARC
    recover_open_files(tmp_path, partition="00")
    assert not (tmp_path / "OWLER-20240501120000-00-00009.warc.gz.cdxj.part").exists()


def test_a_name_whose_index_exists_is_not_reused(tmp_path):
    (tmp_path / "OWLER-20240501120000-00-00000.warc.gz.cdxj").write_text("")
    with WARCWriter(tmp_path, partition="00", clock=Clock()) as w:
        exchange(w)
    assert [f.name for f in finals(tmp_path)] == ["OWLER-20240501120000-00-00001.warc.gz"]


def test_the_uploader_makes_a_missing_index(tmp_path):
    with WARCWriter(tmp_path, partition="00", clock=Clock(), cdxj=False) as w:
        exchange(w, request=REQ, payload=HTML)
    [f] = finals(tmp_path)
    assert X.ensure_index(f) == f.with_name(f.name + ".cdxj") and index_of(f) == read_off(f)
    os.utime(f.with_name(f.name + ".cdxj"), (0, 0))
    assert X.ensure_index(f) and os.stat(f.with_name(f.name + ".cdxj")).st_mtime == 0  # kept
    broken = tmp_path / "OWLER-20240501120000-00-00001.warc.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert X.ensure_index(broken) is None


def test_a_file_whose_final_name_is_taken_gets_no_index(tmp_path):
    blocked, _ = crashed_file(tmp_path, n=1)
    (tmp_path / blocked.name[:-5]).write_bytes(b"someone else's file")
    assert recover_open_files(tmp_path) == []
    assert blocked.exists() and not (tmp_path / (blocked.name[:-5] + ".cdxj")).exists()
