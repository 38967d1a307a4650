"""``owler frontier dump`` and ``owler inject --jsonl`` as a user runs them (the real command in a
subprocess): a crawl of a few thousand URLs moved from a SQLite file to a real OpenSearch node and
back (every status, metadata with dots and unicode, tags, never-refetch URLs; the same counts
per status and the same next fetch dates URL for URL, OpenSearch keeping whole seconds), a dump
through a running ``owler frontier serve`` equal to the direct dump of its frontier (on both
frontiers), and bad input: broken lines, an unknown crawl, a missing file, a frontier that
cannot be reached."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import uuid
from collections import Counter
from itertools import islice
from pathlib import Path

import orjson
import pytest

from owler.conf import load_conf
from owler.constants import STATUS_NAMES, Status
from owler.frontier import StatusUpdate, open_frontier, space_exists
from owler.frontier.dump import records
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BASE = 1767225600.0  # 2026-01-01T00:00:00Z
HOSTS = 31  # prime to the five statuses: every host has URLs of each
TAGS = '{"lang=*": "lang:*", "isSitemap=true": "Sitemap"}'


def owler(*args, timeout=600, stdin=None):
    return subprocess.run([sys.executable, "-m", "owler", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, input=stdin,
                          env={**os.environ, "OWLER_HOME": str(ROOT)})


def ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def sqlite_conf(path: Path, name: str) -> Path:
    conf = path / f"{name}.yaml"
    conf.write_text(f"frontier.backend: sqlite\nfrontier.sqlite.path: {path / name}.sqlite\n"
                    f"frontier.tags: {TAGS}\npartition.url.mode: byHost\n")
    return conf


def opensearch_conf(path: Path, node, name: str) -> Path:
    conf = path / f"{name}.yaml"
    conf.write_text(node.conf_lines(f"dump-{name}-{uuid.uuid4().hex[:8]}")
                    + f"frontier.tags: {TAGS}\npartition.url.mode: byHost\n"
                    "fetcher.server.delay: 0\n")
    return conf


def backend_conf(backend: str, path: Path, request, name: str) -> Path:
    """The conf of a frontier on ``backend`` (the OpenSearch node of the worker when needed)."""
    if backend == "sqlite":
        return sqlite_conf(path, name)
    return opensearch_conf(path, request.getfixturevalue("opensearch"), name)


def crawl_updates(n: int, tag: str = "") -> list[StatusUpdate]:
    """``n`` URLs over :data:`HOSTS` hosts, the five statuses in turn; every seventh FETCHED,
    FETCH_ERROR or ERROR never to be fetched again; dates with quarter seconds."""
    out = []
    for i in range(n):
        host = f"h{i % HOSTS}.example"
        status = Status(STATUS_NAMES[i % 5])
        md = {"fetch.statusCode": [str(200 + i % 7)], "lang": [("de", "fr", "ja")[i % 3]],
              "a.b.c": [f"Größe {i} — 日本", ""], "depth": [str(i % 4)]}
        if status is Status.DISCOVERED and i % 4 == 0:
            md["isSitemap"] = ["true"]  # a sitemap's discovery: the refresh path, new here
        never = status in (Status.FETCHED, Status.FETCH_ERROR, Status.ERROR) and i % 7 == 0
        nfd = None if never else BASE + i * 37.25
        out.append(StatusUpdate(f"http://{host}/p{tag}/{i}?q=ä&n={i}", status, md, nfd, host))
    return out


def read_lines(path: Path) -> dict[tuple[str, str], dict]:
    docs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    by_url = {(d["crawl"], d["url"]): d for d in docs}
    assert len(by_url) == len(docs), "a URL came twice"
    return by_url


def whole_seconds(docs: dict) -> dict:
    """``docs`` with their dates as OpenSearch and the URLFrontier API keep them."""
    return {k: {**d, "nextFetchDate": None if d["nextFetchDate"] is None
                else math.floor(d["nextFetchDate"])} for k, d in docs.items()}


def per_status(docs: dict) -> Counter:
    return Counter(d["status"] for d in docs.values())


def test_a_crawl_moves_from_sqlite_to_opensearch_and_back(opensearch, tmp_path):
    src, os_conf, back = (sqlite_conf(tmp_path, "src"), opensearch_conf(tmp_path, opensearch, "os"),
                          sqlite_conf(tmp_path, "back"))
    updates = crawl_updates(3000)
    with open_frontier(load_conf(src), crawl="news") as f:
        f.apply_updates(updates)
        counts = f.counts()
    assert counts == {name: 600 for name in STATUS_NAMES}

    proc = ok(owler("frontier", "dump", "--conf", src, "--crawl", "news",
                    "--output", tmp_path / "a.jsonl"))
    assert proc.stdout == ""  # the lines went to the file, the summary to stderr
    assert "3000 URL(s) of crawl 'news'" in proc.stderr and "FETCHED 600" in proc.stderr
    a = read_lines(tmp_path / "a.jsonl")
    assert per_status(a) == counts
    by_url = {u.url: u for u in updates}
    for (crawl, url), doc in a.items():  # the dump says what was stored, exactly
        u = by_url[url]
        assert (crawl, doc["status"], doc["key"], doc["nextFetchDate"], doc["metadata"]) == (
            "news", u.status.value, u.key, u.next_fetch_date, u.metadata), url
    assert not list(tmp_path.glob(".a.jsonl.part-*"))

    proc = ok(owler("inject", "--jsonl", tmp_path / "a.jsonl", "--conf", os_conf))
    assert "3000 line(s) of crawl 'news' written to OpenSearch index" in proc.stdout
    with open_frontier(load_conf(os_conf), crawl="news") as f:
        assert f.counts() == counts
        for tag, n in (("lang:de", 1000), ("Sitemap", 150)):  # tags by the destination's rules
            _, found = f.client.request("POST", f"/{f.index}/_count",
                                        {"query": {"term": {"tags": tag}}})
            assert found["count"] == n, tag
    ok(owler("frontier", "dump", "--conf", os_conf, "--crawl", "news",
             "--output", tmp_path / "b.jsonl"))
    b = read_lines(tmp_path / "b.jsonl")
    assert b == whole_seconds(a)  # OpenSearch keeps whole seconds: the fraction is dropped
    assert sum(1 for d in b.values() if d["nextFetchDate"] is None) == sum(
        1 for u in updates if u.next_fetch_date is None) > 0

    # filters, on both frontiers
    for conf, whole in ((src, a), (os_conf, b)):
        proc = ok(owler("frontier", "dump", "--conf", conf, "--crawl", "news",
                        "--status", "FETCHED", "--status", "ERROR", "--key", "h3.example"))
        got = [orjson.loads(line) for line in proc.stdout.splitlines()]
        want = [d for d in whole.values() if d["key"] == "h3.example"
                and d["status"] in ("FETCHED", "ERROR")]
        assert len(got) == len(want) == 39
        assert sorted(got, key=lambda d: d["url"]) == sorted(want, key=lambda d: d["url"])

    # back to SQLite, from standard input, into another crawl
    proc = ok(owler("inject", "--jsonl", "-", "--crawl", "moved", "--conf", back,
                    stdin=(tmp_path / "b.jsonl").read_text()))
    assert "3000 line(s) of crawl 'moved' written to" in proc.stdout
    ok(owler("frontier", "dump", "--conf", back, "--all-crawls", "--output", tmp_path / "c.jsonl"))
    c = read_lines(tmp_path / "c.jsonl")
    assert c == {("moved", url): {**d, "crawl": "moved"} for (_, url), d in b.items()}
    with open_frontier(load_conf(back), crawl="moved") as f:
        assert f.counts() == counts
        assert all(f.tags(u.url) == (["lang:" + u.metadata["lang"][0]]
                                     + (["Sitemap"] if "isSitemap" in u.metadata else []))
                   for u in updates)


def test_discovered_lines_are_create_only_on_opensearch_too(opensearch, tmp_path):
    conf = opensearch_conf(tmp_path, opensearch, "known")
    with open_frontier(load_conf(conf)) as f:
        f.apply_updates([
            StatusUpdate("http://a.example/known", Status.FETCHED, {"v": ["old"]}, BASE,
                         "a.example"),
            StatusUpdate("http://a.example/undone", Status.DISCOVERED, {"v": ["old"]}, BASE,
                         "a.example")])
    dump = tmp_path / "d.jsonl"
    dump.write_bytes(b"".join(orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE) for d in [
        {"url": "http://a.example/known", "key": "a.example", "status": "DISCOVERED",
         "nextFetchDate": 5, "metadata": {"v": ["new"]}},
        {"url": "http://a.example/undone", "key": "a.example", "status": "FETCHED",
         "nextFetchDate": None, "metadata": {"v": ["new"]}},
        {"url": "http://a.example/new", "status": "REDIRECTION", "nextFetchDate": BASE + 1}]))
    ok(owler("inject", "--jsonl", dump, "--conf", conf))
    with open_frontier(load_conf(conf)) as f:
        known, undone, new = (f.get(f"http://a.example/{p}") for p in ("known", "undone", "new"))
    assert (known.status, known.next_fetch_date, known.metadata) == (
        Status.FETCHED, BASE, {"v": ["old"]})
    assert (undone.status, undone.next_fetch_date, undone.metadata) == (
        Status.FETCHED, None, {"v": ["new"]})
    assert (new.status, new.next_fetch_date, new.key) == (Status.REDIRECTION, BASE + 1,
                                                          "a.example")  # key by the URL's host


def test_an_opensearch_dump_is_the_index_as_it_was_when_it_began(opensearch, tmp_path):
    conf = load_conf(opensearch_conf(tmp_path, opensearch, "pit"))
    with open_frontier(conf) as f, open_frontier(conf) as writer:
        f.apply_updates(crawl_updates(60))
        recs = records(f, page=25)  # sorted by URL: h0 … h9, then h10 …
        first = [next(recs) for _ in range(30)]  # the second page was read
        unread = "http://h9.example/p/9?q=ä&n=9"
        assert unread not in {r.url for r in first}
        writer.apply_updates([
            StatusUpdate(unread, Status.FETCHED, {"late": ["yes"]}, None, "h9.example"),
            StatusUpdate("http://h99.example/new", Status.DISCOVERED, {}, BASE, "h99.example")])
        writer.refresh()  # searchable: only the point in time keeps them out of the dump
        rest = list(islice(recs, 1000))
    got = {r.url: r for r in first + rest}
    assert len(first + rest) == len(got) == 60
    assert "http://h99.example/new" not in got
    assert got[unread].status is Status.ERROR and got[unread].metadata.get("late") is None
    _, pits = opensearch.request("GET", "/_search/point_in_time/_all")
    assert pits["pits"] == [], "the dump left its point in time open"


class Service:
    """``owler frontier serve --port 0`` in a process of its own."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.log = log
        self.out = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "owler", "frontier", "serve", "--port", "0", "--conf",
             str(conf)], cwd=ROOT, stdout=self.out, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "OWLER_HOME": str(ROOT)})
        first = wait_for("the service's first line", self._first_line, timeout=180)
        assert first.startswith("URLFrontier service on 127.0.0.1:"), first
        self.port = int(first.split()[3].rsplit(":", 1)[1])

    def _first_line(self):
        assert self.proc.poll() is None, f"owler frontier serve exited: {self.log.read_text()}"
        text = self.log.read_text()
        return text.splitlines()[0] if "\n" in text else ""

    def conf(self, path: Path) -> Path:
        conf = path / "client.yaml"
        conf.write_text(f"frontier.backend: urlfrontier\n"
                        f"urlfrontier.address: 127.0.0.1:{self.port}\n")
        return conf

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        finally:
            self.out.close()


@pytest.mark.parametrize("backend", ["sqlite", "opensearch"])
def test_a_dump_through_frontier_serve_equals_the_direct_dump(backend, tmp_path, request):
    conf = backend_conf(backend, tmp_path, request, "served")
    for crawl, n in (("DEFAULT", 2500), ("news", 700)):
        with open_frontier(load_conf(conf), crawl=crawl) as f:
            f.apply_updates(crawl_updates(n, tag=crawl))
    service = Service(conf, tmp_path / "serve.log")
    try:
        client = service.conf(tmp_path)
        ok(owler("frontier", "dump", "--conf", conf, "--all-crawls",
                 "--output", tmp_path / "direct.jsonl"))
        proc = ok(owler("frontier", "dump", "--conf", client, "--all-crawls",
                        "--output", tmp_path / "served.jsonl"))
        assert f"2500 URL(s) of crawl 'DEFAULT' from URLFrontier service 127.0.0.1:" \
               f"{service.port}" in proc.stderr
        direct, served = read_lines(tmp_path / "direct.jsonl"), read_lines(tmp_path /
                                                                           "served.jsonl")
        assert len(direct) == 3200
        assert served == whole_seconds(direct)  # the API's dates are whole seconds

        # pages of the listing (start, size) and the filters, on the service
        with open_frontier(load_conf(client), crawl="news") as f:
            # (islice: a listing that pages in circles fails the test, never hangs it)
            got = [r.url for r in islice(records(f, page=150), 2000)]
            assert sorted(got) == sorted(url for (c, url) in direct if c == "news")
            got = {r.url: r.status.value for r in islice(
                records(f, ["ERROR"], key="h7.example", page=9), 2000)}
            assert got == {url: "ERROR" for (c, url), d in direct.items() if c == "news"
                           and d["key"] == "h7.example" and d["status"] == "ERROR"}
            assert len(got) == 5
        proc = owler("frontier", "dump", "--conf", client, "--crawl", "nosuch")
        assert proc.returncode == 2 and proc.stdout == ""
        assert "unknown crawl 'nosuch': the frontier has the crawl(s) 'DEFAULT', 'news'" \
            in proc.stderr
    finally:
        service.stop()


BROKEN = [  # (line, what the message says of it)
    (b"{not json", "not JSON (unexpected character, expected a string key at character 2)"),
    (b'{"status": "FETCHED", "nextFetchDate": 1}', "no url"),
    (b'{"url": "http://b.example/", "status": "FETCHD", "nextFetchDate": 1}',
     "unknown status 'FETCHD' (one of DISCOVERED, FETCHED, FETCH_ERROR, REDIRECTION, ERROR)"),
    (b'{"url": "http://b.example/", "status": "FETCHED", "nextFetchDate": 1, '
     b'"metadata": {"lang": "de"}}',
     "metadata 'lang': the string 'de' where a list of strings belongs"),
    (b'{"url": "http://b.example/", "status": "FETCHED", "nextFetchDate": "tomorrow"}',
     "nextFetchDate is the string 'tomorrow', not a number of epoch seconds or null (never)"),
]


def broken_dump(path: Path) -> tuple[Path, list[tuple[int, str]]]:
    """A dump with good lines around the :data:`BROKEN` ones; the broken lines' numbers."""
    good = [orjson.dumps({"url": f"http://b.example/{i}", "key": "b.example", "crawl": "DEFAULT",
                          "status": "FETCHED", "nextFetchDate": BASE, "metadata": {}})
            for i in range(len(BROKEN) + 1)]
    lines, expected = [], []
    for i, (bad, reason) in enumerate(BROKEN):
        lines.append(good[i])
        lines.append(bad)
        expected.append((len(lines), reason))
    lines.append(good[-1])
    dump = path / "broken.jsonl"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    return dump, expected


@pytest.mark.parametrize("backend", ["sqlite", "opensearch"])
def test_a_dump_with_broken_lines_names_them_and_writes_nothing(backend, tmp_path, request):
    conf = backend_conf(backend, tmp_path, request, "dest")
    stored = StatusUpdate("http://b.example/0", Status.ERROR, {"keep": ["me"]}, None,
                          "b.example")
    with open_frontier(load_conf(conf)) as f:
        f.apply_updates([stored])
    dump, expected = broken_dump(tmp_path)
    proc = owler("inject", "--jsonl", dump, "--conf", conf)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"owler inject: {dump} line {n}: {reason}"
                                        for n, reason in expected] + [
        f"owler inject: {len(BROKEN)} broken line(s) in {dump}; nothing was written"]
    with open_frontier(load_conf(conf)) as f:
        f.refresh()
        assert f.counts() == {**{name: 0 for name in STATUS_NAMES}, "ERROR": 1}
        got = f.get(stored.url)
        assert (got.status, got.next_fetch_date, got.metadata) == (Status.ERROR, None,
                                                                   {"keep": ["me"]})


def test_an_unknown_crawl_is_named_with_the_crawls_there_are(opensearch, tmp_path):
    for conf in (sqlite_conf(tmp_path, "f"), opensearch_conf(tmp_path, opensearch, "f")):
        with open_frontier(load_conf(conf), crawl="news") as f:
            f.apply_updates(crawl_updates(3))
        proc = owler("frontier", "dump", "--conf", conf, "--crawl", "nosuch")
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert proc.stderr == ("owler frontier dump: unknown crawl 'nosuch': the frontier has "
                               "the crawl(s) 'news'\n")
        assert not space_exists(load_conf(conf), "nosuch"), "the dump created the crawl"
        proc = owler("frontier", "dump", "--conf", conf)  # DEFAULT, which nobody wrote
        assert proc.returncode == 2 and "unknown crawl 'DEFAULT'" in proc.stderr
    proc = owler("frontier", "dump", "--conf", conf, "--crawl", "news", "--all-crawls")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_no_dump_file_or_no_frontier_to_reach(tmp_path):
    conf = sqlite_conf(tmp_path, "f")
    proc = owler("inject", "--jsonl", tmp_path / "missing.jsonl", "--conf", conf)
    assert (proc.returncode, proc.stderr) == (
        2, f"owler inject: dump {tmp_path / 'missing.jsonl'} does not exist\n")
    proc = owler("inject", "seeds.txt", "--jsonl", "x.jsonl")
    assert proc.returncode == 2 and "name a SEEDS_FILE or --jsonl FILE" in proc.stderr
    good = tmp_path / "good.jsonl"
    good.write_text('{"url": "http://a.example/", "status": "FETCHED", "nextFetchDate": 1}\n')
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = owler("inject", "--jsonl", good, "-o", "frontier.backend=opensearch",
                 "-o", f"opensearch.addresses=127.0.0.1:{port}")
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach OpenSearch" in proc.stderr
    assert "0 of 1 line(s) were written before it" in proc.stderr
    assert not (tmp_path / "f.sqlite").exists()
    for backend, address, says in (
            ("opensearch", "opensearch.addresses", "cannot reach OpenSearch"),
            ("urlfrontier", "urlfrontier.address", "URLFrontier ListCrawls at 127.0.0.1:")):
        proc = owler("frontier", "dump", "-o", f"frontier.backend={backend}",
                     "-o", f"{address}=127.0.0.1:{port}")
        assert (proc.returncode, proc.stdout) == (3, ""), proc.stderr
        last = proc.stderr.splitlines()[-1]  # (after the client's retries)
        assert last.startswith("owler frontier dump: cannot use the frontier: ") and says in last, \
            proc.stderr


def test_seeds_go_into_the_crawl_inject_names(tmp_path):
    conf = sqlite_conf(tmp_path, "f")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\tlang=de\nhttp://b.example/x\n")
    proc = ok(owler("inject", seeds, "--crawl", "news", "--conf", conf))
    assert "2 new URL(s) injected" in proc.stdout and "crawl 'news'" in proc.stdout
    proc = ok(owler("frontier", "dump", "--conf", conf, "--all-crawls"))
    docs = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [(d["crawl"], d["url"], d["key"], d["status"], d["metadata"]) for d in docs] == [
        ("news", "http://a.example/", "a.example", "DISCOVERED", {"lang": ["de"]}),
        ("news", "http://b.example/x", "b.example", "DISCOVERED", {})]
