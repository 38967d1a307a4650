"""``owler takedown`` as an operator runs it (issue 47): on every backend (an embedded SQLite file,
a real OpenSearch node, a URLFrontier service run by ``owler frontier serve``) every URL of the
site, its subdomains' queues included, is ERROR once the command returns, and nothing else is;
then in a crawl on real Storm (local mode) against the loopback farm: a site taken down mid-crawl
gets no further request after the reload interval, every URL of it is ERROR (on the embedded
frontier and on OpenSearch), the rest of the crawl goes on, and the captures the command lists
are exactly the site's records in the crawl's WARC files."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.conf import load_conf
from owler.constants import Status
from owler.frontier import StatusUpdate, open_frontier
from owler.frontier.dump import records
from owler.run.takedown import settle_time
from tests.farm.harness import HOST_FILES, FarmProcess
from tests.farm.server import host_addr
from tests.integration.cli import OWLER, ROOT, owler
from tests.integration.test_urlfrontier_crawl import FrontierService
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.integration

NOW = time.time()
SITE = [f"http://{h}/{p}" for h in ("example.com", "www.example.com", "a.b.example.com")
        for p in ("", "x", "y/z")]
OTHER = [f"http://{h}/{p}" for h in ("example.org", "notexample.com", "example.com.au")
         for p in ("", "x")]


def fill(conf: Path, crawl: str) -> None:
    with open_frontier(load_conf(conf), crawl=crawl) as f:
        f.apply_updates(
            [StatusUpdate(u, Status.FETCHED, {"depth": ["1"]}, NOW + 86400, u.split("/")[2])
             for u in SITE + OTHER]
            + [StatusUpdate("http://example.com/new", Status.DISCOVERED, {}, NOW,
                            "example.com")])


def statuses(conf: Path, crawl: str) -> dict[str, tuple[str, list[str] | None]]:
    with open_frontier(load_conf(conf), crawl=crawl) as f:
        return {r.url: (r.status.value, r.metadata.get("takedown.reason"))
                for r in records(f)}


@pytest.mark.parametrize("backend", ["sqlite", "opensearch", "urlfrontier"])
def test_every_url_of_the_site_is_error_on_every_backend(backend, tmp_path, request):
    stored = tmp_path / "stored.yaml"
    if backend == "opensearch":
        stored.write_text(request.getfixturevalue("opensearch").conf_lines(
            f"takedown-{uuid.uuid4().hex[:8]}"))
    else:
        stored.write_text(f"frontier.sqlite.path: {tmp_path / 'f.sqlite'}\n")
    for crawl in ("DEFAULT", "news"):
        fill(stored, crawl)
    service = None
    conf = stored
    if backend == "urlfrontier":
        service = FrontierService(stored)
        conf = tmp_path / "client.yaml"
        conf.write_text(f"frontier.backend: urlfrontier\nurlfrontier.address: {service.address}\n")
    with open(conf, "a") as fh:
        fh.write(f"takedown.file: {tmp_path / 'takedowns.tsv'}\nwarc.dir: {tmp_path / 'warc'}\n")
    try:
        proc = owler("takedown", "add", "example.com", "--reason", "a notice", "--settle", "0",
                     "--conf", str(conf))
        for crawl in ("DEFAULT", "news"):
            assert f"{len(SITE) + 1} URL(s) of crawl {crawl!r} set to ERROR" in proc.stderr
            got = statuses(conf, crawl)
            assert {u: got[u] for u in SITE} == {u: ("ERROR", ["a notice"]) for u in SITE}
            assert got["http://example.com/new"] == ("ERROR", ["a notice"])
            assert {u: got[u] for u in OTHER} == {u: ("FETCHED", None) for u in OTHER}
            if backend != "urlfrontier":  # (the service's counts are its own business)
                with open_frontier(load_conf(conf), crawl=crawl) as f:
                    assert f.counts()["ERROR"] == len(SITE) + 1
        # again: nothing left to write; one crawl only with --crawl
        proc = owler("takedown", "add", "example.com", "--reason", "other", "--crawl", "news",
                     "--settle", "0", "--conf", str(conf))
        assert "already taken down" in proc.stderr and "a notice" in proc.stderr
        assert "0 URL(s) of crawl 'news' set to ERROR" in proc.stderr
        assert "crawl 'DEFAULT'" not in proc.stderr
        assert "0 capture(s) of example.com archived" in proc.stderr
    finally:
        if service is not None:
            service.stop()


def test_bad_input_is_refused_plainly(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {tmp_path / 'f.sqlite'}\n"
                    f"takedown.file: {tmp_path / 'takedowns.tsv'}\n")
    fill(conf, "DEFAULT")
    for args, code, said in (
            (["add", "example.com/private", "--reason", "r"], 2, "neither a host"),
            (["add", "ftp://example.com/", "--reason", "r"], 2, "not an http(s) URL"),
            (["add", "example.com", "--reason", " "], 2, "needs a reason"),
            (["add", "example.com", "--reason", "r", "--crawl", "nope"], 2, "unknown crawl"),
            (["remove", "example.net"], 1, "is not in")):
        settle = ["--settle", "0"] if args[0] == "add" else []
        proc = owler("takedown", *args, *settle, "--conf", str(conf), check=False)
        assert proc.returncode == code and said in proc.stderr, (args, proc.stderr)
    # (the take-down of the unknown crawl's command is kept: the file comes first)
    assert owler("takedown", "list", "--conf", str(conf)).stdout.split("\t")[1] == "example.com"
    proc = owler("takedown", "remove", "example.com", "--conf", str(conf))
    assert "removed" in proc.stderr and owler("takedown", "list", "--conf", str(conf)).stdout == ""


# -- in a crawl ------------------------------------------------------------------------------------
RELOAD = 1.0


@pytest.fixture(scope="module", params=["sqlite", "opensearch"])
def crawl(tmp_path_factory, request):
    work = tmp_path_factory.mktemp(f"takedown-{request.param}")
    if request.param == "opensearch":
        frontier = request.getfixturevalue("opensearch").conf_lines(
            f"takedown-crawl-{uuid.uuid4().hex[:8]}") + "frontier.lease.ttl: 30\n"
    else:
        frontier = f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
    with FarmProcess(12, work / "access.log") as farm:
        gone, kept = host_addr(0), host_addr(6)  # two "normal" sites of 30 pages
        conf = work / "conf.yaml"
        conf.write_text(frontier
                        + f"warc.dir: {work / 'warc'}\n"
                        f"owler.work.dir: {work}\n"
                        f"takedown.file: {work / 'takedowns.tsv'}\n"
                        f"blacklist.reload.interval: {RELOAD}\n"
                        "http.allow.private.addresses: true\n"
                        "fetcher.server.delay: 0.5\n"
                        "http.timeout: 2000\n")
        (work / "seeds.txt").write_text(f"{farm.url(0)}\n{farm.url(6)}\n")
        owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
        log = open(work / "run.log", "w")
        run = subprocess.Popen([*OWLER, "run", "explorative", "--conf", str(conf), "--idle-exit",
                                "10", "--time", "300"], cwd=ROOT, stdout=log,
                               stderr=subprocess.STDOUT, text=True)
        try:
            wait_for("eight pages of the site to be fetched",
                     lambda: sum(1 for e in farm.access_log()
                                 if e["host"] == gone and e["path"] not in HOST_FILES) >= 8,
                     240, 0.2)
            added = time.time()
            add = owler("takedown", "add", gone, "--reason", "the webmaster's notice 42",
                        "--conf", str(conf))
            assert run.wait(300) == 0, (work / "run.log").read_text()[-3000:]
        finally:
            if run.poll() is None:
                run.kill()
            log.close()
        requests = farm.access_log()
        port = farm.port
    listed = owler("takedown", "list", "--captures", "--conf", str(conf))
    with open_frontier(load_conf(conf)) as f:
        stored = {r.url: r for r in records(f)}
    return {"gone": gone, "kept": kept, "port": port, "added": added, "add": add,
            "requests": requests, "stored": stored, "listed": listed, "work": work, "conf": conf}


def test_no_request_reaches_the_site_after_the_reload_interval(crawl):
    gone = [e for e in crawl["requests"] if e["host"] == crawl["gone"]]  # robots.txt too
    pages = [e for e in gone if e["path"] not in HOST_FILES]
    before = [e for e in pages if e["t"] <= crawl["added"]]
    late = [e for e in gone if e["t"] > crawl["added"] + RELOAD + 2.0]  # (a fetch under way)
    assert len(before) >= 8 and late == []
    assert len({e["path"] for e in pages}) < 31, "the whole site was fetched: no take-down seen"


def test_every_url_of_the_site_is_error_and_the_crawl_went_on(crawl):
    site = {u: r for u, r in crawl["stored"].items() if f"//{crawl['gone']}:" in u}
    wrong = {u: (r.status, r.metadata) for u, r in site.items()
             if r.status is not Status.ERROR or r.metadata.get("error.cause") != ["takedown"]
             or r.metadata.get("takedown.reason") != ["the webmaster's notice 42"]}
    assert site and not wrong, wrong
    kept = {u: r for u, r in crawl["stored"].items() if f"//{crawl['kept']}:" in u}
    fetched = [u for u, r in kept.items() if r.status is Status.FETCHED]
    assert len(fetched) >= 30  # the other site is crawled whole
    # the second look, once the tasks had the take-down (blacklist.reload.interval + commit + 5)
    settle = settle_time(load_conf(crawl["conf"]))
    assert settle <= RELOAD + 2 + 5 and f"looking again in {settle:g} s" in crawl["add"].stderr


def warc_responses(work: Path, host: str) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted((work / "warc").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for rec in it:
                uri = rec.rec_headers.get_header("WARC-Target-URI") or ""
                if rec.rec_type in ("response", "revisit") and f"//{host}:" in uri:
                    out.add((path.name, it.get_record_offset(), uri))
    return out


def test_the_captures_listed_are_the_sites_records_in_the_warc_files(crawl):
    listed = crawl["listed"]
    lines = [line.split("\t") for line in listed.stdout.splitlines()]
    entry, captures = lines[0], lines[1:]
    assert entry[1:] == [crawl["gone"], "the webmaster's notice 42"]
    got = {(c[1], int(c[2]), c[6]) for c in captures}
    want = warc_responses(crawl["work"], crawl["gone"])
    assert len(want) >= 8 and got == want, (sorted(got - want), sorted(want - got))
    assert f"{len(want)} capture(s) of {crawl['gone']} archived" in listed.stderr
    assert all(c[0] == str(crawl["work"] / "warc") for c in captures)
