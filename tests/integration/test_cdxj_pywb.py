"""The crawl's CDXJ indices judged by pywb (issue 47), a replay tool nobody on the project wrote,
installed from the package registry into a virtualenv of its own (services/pywb/install.sh,
``make setup``).

Two passes of the explorative topology on real Storm (local mode) crawl the re-visit farm
(tests/farm/revisit.py: pages that answer 304, pages that never change, pages that change with
every pass) and the signals farm's ``headers`` host (tests/farm/signals.py: a page with
webmasters' signals, so a WARC metadata record beside its response), with small WARC files so
that the writer rotates many times. Then:

- every WARC file has its index, no companion is left, and each index is the sorted lines read
  off its file again;
- pywb's own indexer (``cdx-indexer -j``) gives the same lines for the same files, but for the
  metadata records, which it indexes and the crawl does not; with pywb's index, pywb replays the
  page with signals as its metadata record's JSON, with the crawl's, as the page;
- pywb (``wayback`` on 127.0.0.1, a collection whose ``archive/`` links the WARC files and whose
  ``indexes/`` holds the crawl's ``.cdxj`` files, no index of pywb's) replays every capture of
  the farm through ``id_`` with the bytes the farm served at that pass, revisits of an identical
  payload included (pywb finds the payload by the digest in the crawl's index); a revisit of a
  304 is replayed as pywb replays a revisit record that holds an HTTP head: that head, the 304 the
  server sent, once its payload is found (pywb answers 503 when it cannot find it);
- ``find_captures`` finds in the crawl's indices exactly the records warcio finds in the files,
  for a host and for a URL prefix;
- SURT keys equal the ``surt`` package's, which pywb looks captures up with, on the crawl's URLs
  and thousands of generated ones.
"""

from __future__ import annotations

import calendar
import json
import os
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.frontier.sqlite import SQLiteFrontier
from owler.warc.format import cdxj
from tests.farm import revisit as R
from tests.farm import signals as S
from tests.farm.harness import farm_module
from tests.integration.cli import ROOT, owler

pytestmark = pytest.mark.integration


def start_pass(port: int, n: int) -> None:
    """The re-visit farm's pass ``n`` begins (its changing pages change)."""
    req = urllib.request.Request(f"http://{R.SITE}:{port}/__pass/{n}", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def pywb_bin(name: str) -> Path:
    homes = sorted((ROOT / ".services").glob("pywb-*/bin"))
    if not homes or not (homes[-1] / name).exists():
        pytest.fail("pywb is not installed: make setup (services/pywb/install.sh)")
    return homes[-1] / name


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("cdxj-crawl")
    with farm_module("tests.farm.revisit", work / "revisit.log") as r_ready, \
            farm_module("tests.farm.signals", work / "signals.log") as s_ready:
        port, s_port = int(r_ready[0]), int(s_ready[0])
        conf = work / "conf.yaml"
        conf.write_text(f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
                        f"warc.dir: {work / 'warc'}\n"
                        f"owler.work.dir: {work}\n"
                        f"http.allowed.networks: [{R.NETWORK}, {S.NETWORK}]\n"
                        "http.robots.agents: [owler]\n"
                        "warc.rotation.size: 8000\n"  # a few pages a file: many rotations
                        "scheduler.class: AdaptiveScheduler\n"
                        "fetchInterval.default: 1\n"
                        "scheduler.adaptive.fetchInterval.min: 0.2\n"
                        "scheduler.adaptive.fetchInterval.max: 10\n"
                        "fetcher.server.delay: 0.2\n")
        (work / "seeds.txt").write_text(f"http://{R.SITE}:{port}/\n"
                                        f"http://{S.HOSTS['headers']}:{s_port}/\n")
        owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
        passes = {}
        runs = []
        for n in (1, 2):
            start_pass(port, n)
            if n == 2:  # every page of pass 1 is due again when pass 2 starts
                with SQLiteFrontier(work / "frontier.sqlite") as f:
                    due = [r.next_fetch_date for u, in f.conn.execute("SELECT url FROM urls")
                           if (r := f.get(u)).status.name == "FETCHED" and r.next_fetch_date]
                time.sleep(max(0.0, max(due) - time.time()) + 1)
            t0 = time.time()
            runs.append(owler("run", "explorative", "--conf", str(conf), "--idle-exit", "6",
                              "--time", "300", check=False))
            passes[n] = (t0, time.time())
    return {"work": work, "warc": work / "warc", "port": port, "s_port": s_port, "runs": runs,
            "passes": passes}


def served(crawl, url: str, when: float) -> tuple[int, bytes]:
    """The status and body the farms served for ``url`` at ``when`` (during which pass), as
    their own code makes them (an unconditional request)."""
    host, _, path = url.split("://", 1)[1].partition("/")
    path = "/" + path
    if host.startswith(S.HOSTS["headers"] + ":"):
        head, _, body = S.answer("headers", path).partition(b"\r\n\r\n")
        return int(head.split(b" ")[1]), body
    farm = R.Farm(os.devnull)
    farm.pass_no = 1 if when < crawl["passes"][2][0] else 2
    resp = farm.answer(R.SITE, SimpleNamespace(path=path, headers={}))
    return resp.status, resp.body or b""


def records(warc: Path) -> list[dict]:
    """Every record of a WARC file: offset, length, type, URL, date, revisit profile."""
    out = []
    with open(warc, "rb") as f:
        it = ArchiveIterator(f)
        for rec in it:
            rec.content_stream().read()
            out.append({"offset": it.get_record_offset(), "length": it.get_record_length(),
                        "type": rec.rec_type,
                        "url": rec.rec_headers.get_header("WARC-Target-URI"),
                        "date": rec.rec_headers.get_header("WARC-Date"),
                        "profile": rec.rec_headers.get_header("WARC-Profile", "")})
    return out


def warcs(crawl) -> list[Path]:
    return sorted(crawl["warc"].glob("*.warc.gz"))


def test_the_crawl_ran_both_passes_and_wrote_many_files(crawl):
    for run in crawl["runs"]:
        assert run.returncode == 0 and "idle for 6 s" in run.stdout, run.stdout[-3000:] + \
            run.stderr[-3000:]
    types = [r["type"] for w in warcs(crawl) for r in records(w)]
    assert len(warcs(crawl)) >= 5
    assert types.count("revisit") >= 8 and types.count("metadata") >= 1  # etag, lm, plain


def test_every_file_has_its_sorted_index_as_read_off_the_file(crawl):
    files = warcs(crawl)
    assert not list(crawl["warc"].glob("*.part")) and not list(crawl["warc"].glob("*.open"))
    assert sorted(cdxj.cdxj_files(crawl["warc"])) == [f.with_name(f.name + ".cdxj")
                                                      for f in files]
    for f in files:
        lines = f.with_name(f.name + ".cdxj").read_text().splitlines()
        with open(f, "rb") as fh:
            assert lines == sorted(lines) == sorted(cdxj.file_lines(fh, f.name))
        # one line per response and revisit record, at its offset and length
        expect = sorted((r["offset"], r["length"]) for r in records(f)
                        if r["type"] in ("response", "revisit"))
        got = sorted((int(v["offset"]), int(v["length"]))
                     for v in (cdxj.line_fields(line)[2] for line in lines))
        assert got == expect


def test_pywbs_indexer_writes_the_same_lines_but_for_metadata_records(crawl, tmp_path):
    indexer = pywb_bin("cdx-indexer")
    extra_types = set()
    for f in warcs(crawl):
        run = subprocess.run([str(indexer), "-j", "-s", str(f)], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        theirs = run.stdout.splitlines()
        ours = f.with_name(f.name + ".cdxj").read_text().splitlines()
        assert set(ours) <= set(theirs)  # every line the same, to the byte
        by_offset = {r["offset"]: r["type"] for r in records(f)}
        extra_types |= {by_offset[int(cdxj.line_fields(line)[2]["offset"])]
                        for line in set(theirs) - set(ours)}
    assert extra_types == {"metadata"}


@pytest.fixture(scope="module")
def wayback(crawl, tmp_path_factory):
    """pywb's replay server on 127.0.0.1 over two collections of the crawl's WARC files:
    ``crawl`` with the crawl's own indices, ``pywbs`` with the index pywb's ``wb-manager``
    makes."""
    root = tmp_path_factory.mktemp("pywb")
    for coll in ("crawl", "pywbs"):
        (root / "collections" / coll / "archive").mkdir(parents=True)
        (root / "collections" / coll / "indexes").mkdir()
        for f in warcs(crawl):
            (root / "collections" / coll / "archive" / f.name).symlink_to(f)
    for idx in cdxj.cdxj_files(crawl["warc"]):
        (root / "collections" / "crawl" / "indexes" / idx.name).write_bytes(idx.read_bytes())
    run = subprocess.run([str(pywb_bin("wb-manager")), "reindex", "pywbs"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(root / "wayback.log", "wb")
    proc = subprocess.Popen([str(pywb_bin("wayback")), "-b", "127.0.0.1", "-p", str(port)],
                            cwd=root, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert proc.poll() is None, (root / "wayback.log").read_text()[-3000:]
                assert time.time() < deadline, "pywb did not answer within 60 s"
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def replay(wayback: str, coll: str, timestamp: str, url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"{wayback}/{coll}/{timestamp}id_/{url}", timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_pywb_replays_every_capture_from_the_crawls_indices(crawl, wayback):
    caps = [c for host in (R.SITE, S.HOSTS["headers"])
            for c in cdxj.find_captures(cdxj.cdxj_files(crawl["warc"]), host)]
    profiles = {(f.name, r["offset"]): r["profile"] for f in warcs(crawl) for r in records(f)}
    revisits = [c for c in caps if c.mime == "warc/revisit"]
    not_modified = [c for c in revisits if profiles[(c.file, c.offset)].endswith("not-modified")]
    assert len(caps) >= 30 and len(revisits) - len(not_modified) >= 4 and len(not_modified) >= 8
    seen_changing = set()
    for c in caps:
        when = calendar.timegm(time.strptime(c.timestamp, "%Y%m%d%H%M%S"))
        got = replay(wayback, "crawl", c.timestamp, c.url)
        if c in not_modified:  # the 304 the server sent, its payload found (else pywb says 503)
            assert got == (304, b""), (c, got[0], got[1][:300])
            continue
        assert got == served(crawl, c.url, when), (c, got[0], got[1][:300])
        if "/changing/" in c.url:
            seen_changing.add(got[1])
    assert len(seen_changing) == 2 * R.PAGES["changing"]  # each pass's version, at its time


def test_pywbs_own_index_would_replay_the_signals_record_instead_of_the_page(crawl, wayback):
    url = f"http://{S.HOSTS['headers']}:{crawl['s_port']}/"
    first = next(c for c in cdxj.find_captures(cdxj.cdxj_files(crawl["warc"]), url)
                 if c.url == url)
    status, body = replay(wayback, "pywbs", first.timestamp, url)
    assert status == 200 and json.loads(body)["purposes"]  # the metadata record's JSON
    status, body = replay(wayback, "crawl", first.timestamp, url)
    assert status == 200 and body == S.html("headers", "/")


def test_find_captures_finds_what_the_files_hold(crawl):
    indices = cdxj.cdxj_files(crawl["warc"])
    held = {}
    for f in warcs(crawl):
        for r in records(f):
            if r["type"] in ("response", "revisit"):
                held[(f.name, r["offset"])] = (r["url"], r["length"])
    site = {k: v for k, v in held.items() if f"//{R.SITE}:" in v[0]}
    got = {(c.file, c.offset): (c.url, c.length) for c in cdxj.find_captures(indices, R.SITE)}
    assert got == site and len(site) >= 30
    prefix = f"https://{R.SITE}:{crawl['port']}/etag/"  # the scheme is ignored
    got = {(c.file, c.offset): (c.url, c.length) for c in cdxj.find_captures(indices, prefix)}
    assert got == {k: v for k, v in site.items() if "/etag/" in v[0]} and len(got) >= 8
    assert list(cdxj.find_captures(indices, "127.0.70")) == []  # not a label boundary


def surts_by_pywb(urls: list[str]) -> list[str]:
    code = ("import json, sys, surt\n"
            "out = []\n"
            "for u in json.load(sys.stdin):\n"
            "    try: out.append(surt.surt(u))\n"
            "    except Exception as e: out.append('ERROR')\n"
            "json.dump(out, sys.stdout)\n")
    run = subprocess.run([str(pywb_bin("python")), "-c", code], input=json.dumps(urls),
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(run.stdout)


def generated_urls(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    hosts = ["example.com", "www.Example.COM", "www7.a.example.co.uk", "127.0.0.1", "2130706433",
             "0177.0.0.1", "1.2.3", "[::1]", "xn--bcher-kva.example", "bücher.example",
             "ex%41mple.com", "example.com.", "a..b.com", "user:pw@example.com", "0x7f.0.0.1"]
    parts = ["a", "B", "..", ".", "", "%2e", "%41", "%25", "%2541", "x y", "ü", "index.html",
             "(abcdefghijklmnopqrstuvwx)", "Foo.aspx", "a;b", "%", "%zz", "~u", "#frag", "'q'",
             "[1]", "+", "%7E", "\t"]
    queries = ["", "?", "?b=2&a=1", "?A=1&a", "?jsessionid=0123456789abcdef0123456789abcdef&x=1",
               "?x=1&PHPSESSID=0123456789abcdef0123456789ABCDEF", "?q=a%20b", "?a=&a",
               "?cfid=1&cftoken=2&z", "?Z=é", "?a=1#f", "?a=1&&b"]
    out = []
    for _ in range(n):
        path = "/" + "/".join(rnd.choice(parts) for _ in range(rnd.randrange(5)))
        out.append(rnd.choice(["http://", "https://", "", "HTTP://", "ftp://", "http://http://"])
                   + rnd.choice(hosts) + rnd.choice(["", ":80", ":443", ":8080", ":"])
                   + (path if rnd.random() < 0.9 else "") + rnd.choice(queries))
    return out


def test_surt_keys_are_those_pywb_looks_up(crawl):
    crawled = [r["url"] for f in warcs(crawl) for r in records(f) if r["url"]]
    urls = crawled + generated_urls(4000, 47)
    theirs = surts_by_pywb(urls)
    mine = []
    for u in urls:
        try:
            mine.append(cdxj.surt(u))
        except cdxj.CDXJError:
            mine.append("ERROR")
    wrong = [(u, t, m) for u, t, m in zip(urls, theirs, mine) if t != m]
    assert not wrong, wrong[:5]
    assert mine.count("ERROR") < len(urls) // 10
