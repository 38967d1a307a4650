"""The warc2warc pipeline end to end: `owler run warc2warc` on real Storm (local mode) reading WARC
files from a real S3 API server (moto) and archiving every record unchanged into S3; the records'
URLs and outlinks in the frontier; damaged inputs recorded; a crash mid-file and a restart lose
nothing and archive nothing twice."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.warc.format.reader import InputRecord, WARCReadError, iter_records
from owler.warc.warc2warc.progress_sqlite import Progress
from tests import warcgen as G
from tests.integration.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "warc"

pytestmark = pytest.mark.integration


def owler(s3, *args, timeout=600, background=False):
    env = {**os.environ, **s3.env, "OWLER_HOME": str(ROOT)}
    cmd = [sys.executable, "-m", "owler", *args]
    if background:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def write_conf(work: Path, s3, bucket_in: str, bucket_out: str, extra: str = "") -> Path:
    conf = work / "conf.yaml"
    conf.write_text(
        f"warc2warc.input: s3://{bucket_in}/crawl/\n"
        f"s3.endpoint: {s3.endpoint}\n"
        f"warc.s3.bucket: {bucket_out}\n"
        "warc.s3.prefix: archive/2026\n"
        f"warc.dir: {work / 'warc'}\n"
        "warc.prefix: W2W\n"
        "warc.rotation.size: 40000\n"
        f"owler.work.dir: {work}\n"
        f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n" + extra)
    return conf


def plain_records(data: bytes) -> list[bytes]:
    """Every record of a WARC file as its uncompressed bytes."""
    out = []
    try:
        for item in iter_records(io.BytesIO(data)):
            if isinstance(item, InputRecord):
                out.append(gzip.decompress(item.raw) if item.compressed else item.raw)
    except WARCReadError:  # a truncated input: its complete records are what can be archived
        pass
    return out


def archived(s3, bucket: str) -> tuple[dict[str, bytes], list[bytes]]:
    objects = s3.objects(bucket, "archive/2026/")
    records = []
    for data in objects.values():
        records += [r for r in plain_records(data) if b"isPartOf: W2W" not in r]
    return objects, records


@pytest.fixture(scope="module")
def pipeline(s3_server, tmp_path_factory):
    s3 = s3_server
    work = tmp_path_factory.mktemp("w2w")
    src, dst = s3.bucket("w2w-input"), s3.bucket("w2w-archive")
    inputs = {f"crawl/site{i}.warc.gz": G.per_record_gzip(G.site_records(f"s{i}.example", 15))
              for i in range(3)}
    inputs["crawl/old/site-018.warc.gz"] = G.per_record_gzip(
        G.site_records("old.example", 3, version="WARC/0.18"))
    inputs["crawl/real/test-crawl_0.warc.gz"] = (DATA / "test-crawl_0.warc.gz").read_bytes()
    inputs["crawl/real/fb.warc.gz"] = (DATA / "fb.warc.gz").read_bytes()
    inputs["crawl/real/example.com.warc"] = (DATA / "example.com.warc").read_bytes()
    whole = G.per_record_gzip(G.site_records("cut.example", 4))
    inputs["crawl/cut.warc.gz"] = whole[:-50]
    inputs["crawl/stream.warc.gz"] = G.one_gzip_stream(G.site_records("stream.example", 3))
    bad = [G.record("response", "http://digest.example/bad", G.http_response(b"<p>bad</p>"),
                    bad_payload_digest=True),
           G.record("response", "http://digest.example/good", G.http_response(
               G.page("good", ["http://digest.example/next"])))]
    inputs["crawl/digest.warc.gz"] = G.per_record_gzip(bad)
    for key, data in inputs.items():
        s3.client.put_object(Bucket=src, Key=key, Body=data)
    # small copy batches: several commits, so rotation by size (after a commit) shows
    conf = write_conf(work, s3, src, dst, "warc2warc.copy.batch: 20\nmetrics.interval: 1\n")
    run = owler(s3, "run", "warc2warc", "--conf", str(conf), "--idle-exit", "5", "--time", "400")
    status = owler(s3, "status", "--conf", str(conf), "--json")
    return {"s3": s3, "work": work, "conf": conf, "inputs": inputs, "run": run,
            "status": status, "dst": dst}


def test_the_run_ends_when_every_file_is_done(pipeline):
    run = pipeline["run"]
    assert run.returncode == 0, run.stdout + run.stderr
    assert "10 input WARC file(s)" in run.stdout and "idle for 5 s" in run.stdout
    assert "uploaded to s3://w2w-archive/archive/2026" in run.stdout


def test_records_in_equal_records_out_byte_for_byte(pipeline):
    s3 = pipeline["s3"]
    objects, got = archived(s3, pipeline["dst"])
    expected = []
    for key, data in pipeline["inputs"].items():
        expected += plain_records(data)
    assert Counter(got) == Counter(expected)
    # per-record gzip inputs: their members were copied as they were
    out_bytes = b"".join(objects.values())
    for key in ("crawl/site0.warc.gz", "crawl/real/fb.warc.gz"):
        for member in G.members(pipeline["inputs"][key]):
            assert member in out_bytes
    assert len(objects) >= 2  # rotated by size
    for data in objects.values():  # every output is a valid WARC file
        assert sum(1 for _ in ArchiveIterator(io.BytesIO(data))) > 0
    assert not list((pipeline["work"] / "warc").glob("*"))  # uploaded, then removed


def test_urls_and_outlinks_reach_the_frontier(pipeline):
    from owler.frontier.sqlite import SQLiteFrontier

    with SQLiteFrontier(pipeline["work"] / "frontier.sqlite") as f:
        page = f.get("http://s0.example/page0.html")
        assert page.status.value == "FETCHED"
        assert page.metadata["warc.record.date"] == ["2024-05-01T12:00:00Z"]
        assert page.metadata["warc.file.name"] == ["s3://w2w-input/crawl/site0.warc.gz"]
        # scheduled from the WARC-Date (fetchInterval.default 1440 min), not from today
        assert page.next_fetch_date == pytest.approx(1714564800 + 86400, abs=2)
        assert f.get("http://external-3.example.org/").status.value == "DISCOVERED"
        assert f.get("http://old.example/page1.html").status.value == "FETCHED"
        assert f.get("http://digest.example/next").status.value == "DISCOVERED"
        bad = f.get("http://digest.example/bad")
        assert bad.status.value == "ERROR" and bad.metadata["error.cause"] == ["warc.digest"]
        # real records: a brotli page and a zstd page are pages, read with what they link to
        brotli = f.get("https://www.iana.org/help/example-domains")
        assert brotli.status.value == "FETCHED", brotli.metadata
        assert f.get("https://www.iana.org/domains").status.value == "DISCOVERED"
        zstd = f.get("https://www.facebook.com/unsupportedbrowser")
        assert zstd.status.value == "FETCHED", zstd.metadata
        redirect = f.get("https://www.facebook.com/")
        assert redirect.status.value == "REDIRECTION" and redirect.metadata["_redirTo"]


def test_status_reports_files_and_recorded_problems(pipeline):
    doc = json.loads(pipeline["status"].stdout)["warc2warc"]
    assert doc["files"] == {"pending": 0, "reading": 0, "done": 10, "failed": 0}
    messages = " | ".join(p["message"] for p in doc["problems"])
    assert "truncated gzip member" in messages
    assert "several records in one gzip member" in messages
    assert "payload digest mismatch" in messages


def test_the_dashboard_shows_the_files_and_the_records_of_the_run(pipeline):
    from owler import conf as C
    from owler.run.dashboard import DashboardData

    doc = DashboardData(C.absolute_paths(C.load_conf(str(pipeline["conf"]), []))).payload()
    assert doc["problems"] == [] and doc["run"]["topology"] == "warc2warc"
    assert not doc["run"]["live"] and doc["run"]["ended"]
    by = {c["id"]: {s["label"]: s["values"] for s in c["series"]} for c in doc["charts"]}
    assert "pages" not in by and "http" not in by
    assert by["files"]["done"][-1] == 10 and by["files"]["failed"][-1] == 0
    assert by["files"]["in progress"][-1] == 0
    assert max(v or 0 for v in by["records"]["records/s"]) > 0
    assert doc["status"]["warc2warc"]["files"]["done"] == 10


def test_a_crash_mid_file_and_a_restart_lose_nothing_and_copy_nothing_twice(s3_server,
                                                                            tmp_path):
    s3 = s3_server
    src, dst = s3.bucket("w2w-crash-in"), s3.bucket("w2w-crash-out")
    inputs = {"crawl/big.warc.gz": G.per_record_gzip(G.site_records("big.example", 700)),
              "crawl/small.warc": b"".join(G.site_records("small.example", 20))}
    for key, data in inputs.items():
        s3.client.put_object(Bucket=src, Key=key, Body=data)
    conf = write_conf(tmp_path, s3, src, dst, "warc2warc.copy.batch: 50\n"
                      "topology.max.spout.pending: 200\n")
    proc = owler(s3, "run", "warc2warc", "--conf", str(conf), "--idle-exit", "5", background=True)
    progress = None

    def copied_300():  # records acked, as the progress file counts them
        nonlocal progress
        path = tmp_path / "warc2warc.sqlite"
        if not path.exists():
            return False
        progress = progress or Progress(path)
        return progress.summary()["records"] >= 300

    try:
        wait_for("300 records of the first run", copied_300, 300)
    finally:
        # the crash: every process of the run dies at once
        marker = str(tmp_path).encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if marker in Path(f"/proc/{entry}/cmdline").read_bytes():
                        os.kill(int(entry), signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    pass
        proc.kill()
        proc.wait()
        if progress is not None:
            progress.close()
    first = Progress(tmp_path / "warc2warc.sqlite").summary()
    assert first["files"]["done"] < 2  # stopped in the middle
    again = owler(s3, "run", "warc2warc", "--conf", str(conf), "--idle-exit", "5",
                  "--time", "400")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "stopped (idle for 5 s)" in again.stdout, again.stdout[-3000:]  # not at its time limit
    _, got = archived(s3, dst)
    expected = plain_records(inputs["crawl/big.warc.gz"]) + plain_records(inputs["crawl/small.warc"])
    counts = Counter(got)
    assert not [r[:120] for r, n in counts.items() if n > 1], "a record was archived twice"
    assert counts == Counter(expected), "records lost"
    st = json.loads(owler(s3, "status", "--conf", str(conf), "--json").stdout)["warc2warc"]
    # each record counted once, though the crash made the restarted spout read some again
    assert st["files"]["done"] == 2 and st["records"] == len(expected)


def test_bad_input_is_a_clear_error(s3_server, tmp_path):
    conf = write_conf(tmp_path, s3_server, "no-such-bucket", "w2w-archive")
    run = owler(s3_server, "run", "warc2warc", "--conf", str(conf), "--idle-exit", "5")
    assert run.returncode == 2 and "cannot list the input WARC files" in run.stderr
    assert "no-such-bucket" in run.stderr
    missing = owler(s3_server, "run", "warc2warc", "-o", f"owler.work.dir={tmp_path}",
                    "-o", "warc2warc.input=")
    assert missing.returncode == 2 and "warc2warc.input" in missing.stderr
    folder = owler(s3_server, "run", "warc2warc", "-o", f"owler.work.dir={tmp_path}",
                   "-o", f"warc2warc.input={tmp_path / 'nothing-here'}")
    assert folder.returncode == 2 and "no folder" in folder.stderr


def test_the_pipeline_runs_on_the_opensearch_frontier(s3_server, opensearch, tmp_path):
    s3 = s3_server
    src, dst = s3.bucket("w2w-os-in"), s3.bucket("w2w-os-out")
    data = G.per_record_gzip(G.site_records("os.example", 5))
    s3.client.put_object(Bucket=src, Key="crawl/os.warc.gz", Body=data)
    conf = write_conf(tmp_path, s3, src, dst, opensearch.conf_lines("w2w_status"))
    run = owler(s3, "run", "warc2warc", "--conf", str(conf), "--idle-exit", "5", "--time", "300")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "stopped (idle for 5 s)" in run.stdout, run.stdout[-3000:]  # not at its time limit
    from owler.conf import load_conf
    from owler.frontier import open_frontier

    with open_frontier(load_conf(conf)) as f:
        f.refresh()
        page = f.get("http://os.example/page2.html")
        assert page.status.value == "FETCHED"
        assert page.next_fetch_date == pytest.approx(1714564800 + 86400, abs=2)
        assert f.get("http://external-2.example.org/").status.value == "DISCOVERED"
        assert f.counts()["FETCHED"] == 5
    _, got = archived(s3, dst)
    assert Counter(got) == Counter(plain_records(data))
