"""Interests as signatures of tags on a real OpenSearch node (every combination of required,
any-of and excluded tags), ``owler frontier serve --interest`` over both frontiers through a real
gRPC channel, and ``owler frontier retag`` on both frontiers, batch by batch, with the crawl
writing meanwhile."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import grpc
import pytest

from owler.constants import Status
from owler.frontier import Interest, StatusUpdate, open_frontier
from owler.frontier.sqlite import SQLiteFrontier
from owler.frontier.urlfrontier_api import Stub, pb
from tests.integration.cli import owler
from tests.unit.test_frontier_interest import INTERESTS, SUBSETS, A, F, S, md_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = {"frontier.tags": {"s=1": S, "f=1": F, "a=1": A}}


@pytest.fixture
def conf(opensearch):
    return {"frontier.backend": "opensearch", "services.opensearch.port": opensearch.port,
            "opensearch.status.index.name": f"int-{uuid.uuid4().hex[:10]}",
            "fetcher.server.delay": 1.0, "frontier.lease.ttl": 60}


def conf_args(conf: dict) -> list[str]:
    out = []
    for k, v in conf.items():
        out += ["-o", f"{k}={v}" if not isinstance(v, dict) else f"{k}={_yaml(v)}"]
    return out


def _yaml(d: dict) -> str:
    return "{" + ", ".join(f'"{k}": "{v}"' for k, v in d.items()) + "}"


def test_every_combination_of_an_interest_on_opensearch(conf):
    """The same matrix as the SQLite frontier's (tests/unit/test_frontier_interest.py): three
    URLs of every set of the three tags over four queues; each interest is served exactly the
    URLs of its signature, and counts them."""
    now = time.time()
    urls = {}
    updates = []
    for i, tags in enumerate(SUBSETS):
        for j in range(3):
            url = f"http://q{(i + j) % 4}.example/{'-'.join(sorted(tags)) or 'none'}/{j}"
            urls[url] = tags
            updates.append(StatusUpdate(url, Status.DISCOVERED, md_of(tags), now - 100 + i + j,
                                        url.split("/")[2]))
    with open_frontier({**conf, **RULES}) as w:
        assert w.apply_updates(updates) == []
        w.refresh()
    for n, want in enumerate(INTERESTS):
        expected = {u for u, tags in urls.items() if want.matches(tags)}
        with open_frontier({**conf, **RULES, **want.as_conf()}, owner=f"t{n}") as f:
            got = [u for u, _, _ in f.due(now, 100, 100)]
            assert sorted(got) == sorted(expected), want.text()
            assert f.due_count(now) == len(expected), want.text()
            assert f.queue_count(now) == len({u.split("/")[2] for u in expected}), want.text()
            for key in list(f.leases):  # nothing was fetched: the queues go back at once
                f.release(key, now, served=False)


# ---- owler frontier serve --interest ----------------------------------------------------------

class Service:
    """``owler frontier serve --port 0`` with the arguments given, in a process of its own."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "owler", "frontier", "serve", "--port", "0", *args], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "OWLER_HOME": str(ROOT)})
        self.first = self.proc.stdout.readline()
        match = re.match(r"URLFrontier service on (127\.0\.0\.1:\d+) over ", self.first)
        if not match:
            self.proc.kill()
            raise AssertionError(f"owler frontier serve did not start: {self.first}"
                                 f"{self.proc.stdout.read()}")
        self.rest: list[str] = []
        threading.Thread(target=lambda: self.rest.extend(self.proc.stdout), daemon=True).start()
        self.channel = grpc.insecure_channel(match.group(1))
        self.stub = Stub(self.channel)

    def stop(self) -> None:
        self.channel.close()
        self.proc.terminate()
        assert self.proc.wait(60) == 0, self.first + "".join(self.rest)


@pytest.fixture(params=["sqlite", "opensearch"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return {"frontier.sqlite.path": str(tmp_path / "f.sqlite")}
    return request.getfixturevalue("conf")


def test_a_service_started_with_an_interest_serves_only_its_signature(backend, tmp_path):
    service_conf = {**backend, "partition.url.mode": "byHost", "urlfrontier.default.delay": 0}
    service = Service("--interest", "+Sitemap +FamilyFriendly -risk:adult",
                      *conf_args({**service_conf, **RULES}))
    try:
        assert service.first.rstrip().endswith("; interest +Sitemap +FamilyFriendly -risk:adult")
        items = []
        for tags in SUBSETS:
            info = pb.URLInfo(url=f"http://h.example/{'-'.join(sorted(tags)) or 'none'}")
            for k, v in md_of(tags).items():
                info.metadata[k].values.extend(v)
            items.append(pb.URLItem(discovered=pb.DiscoveredURLItem(info=info)))
        acks = list(service.stub.PutURLs(iter(items)))
        assert [a.status for a in acks] == [pb.AckMessage.Status.Value("OK")] * len(SUBSETS)
        got = [u.url for u in service.stub.GetURLs(pb.GetParams(max_urls_per_queue=100,
                                                                delay_requestable=30))]
        assert got == ["http://h.example/FamilyFriendly-Sitemap"]
    finally:
        service.stop()


@pytest.mark.parametrize("interest, problem", [
    ("+", "a lone '+' with no tag after it"),
    ("Sitemap,,Feed", "an empty tag"),
    ("+Sitemap -Sitemap", "tag 'Sitemap' is both required and excluded"),
])
def test_a_malformed_interest_stops_the_service_before_it_starts(tmp_path, interest, problem):
    proc = owler("frontier", "serve", "--port", "0", "--interest", interest,
                 "-o", f"frontier.sqlite.path={tmp_path / 'f.sqlite'}", check=False, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert problem in proc.stderr and "URLFrontier service on" not in proc.stdout
    assert not (tmp_path / "f.sqlite").exists()  # nothing was opened, nothing created


# ---- owler frontier retag ---------------------------------------------------------------------

def test_retag_on_opensearch_pages_through_the_index_and_keeps_the_crawls_writes(conf):
    """30,000 documents tagged under old rules: retag scrolls them 1,000 at a time (the requests
    say so), rewrites only ``tags`` where they changed, and a document the crawl rewrote between
    the page's read and its update is retagged from what the crawl wrote, not overwritten."""
    n, batch = 30_000, 1000
    now = time.time()
    langs = ("de", "fr", None)
    old = {**conf, "frontier.tags": {"lang=de": "German"}}
    with open_frontier(old) as w:
        for start in range(0, n, 5000):
            assert w.apply_updates([
                StatusUpdate(f"http://h{i % 300}.example/{i}",
                             Status.FETCHED if i % 5 == 0 else Status.DISCOVERED,
                             {"lang": [langs[i % 3]]} if langs[i % 3] else {"depth": ["1"]},
                             now + 86400 if i % 5 == 0 else now - i % 50, f"h{i % 300}.example")
                for i in range(start, start + 5000)]) == []
        w.refresh()
        before = {r.url: r for page in w.iter_urls(None) for r in page}
    assert len(before) == n
    new = {**conf, "frontier.tags": {"lang=*": "lang:*"}}
    with open_frontier(new) as f:
        requests = []
        send = f.client.request

        def recorded(method, path, body=None, **kw):
            requests.append((method, path, body, kw.get("params")))
            return send(method, path, body, **kw)

        f.client.request = recorded
        bulk = f._bulk
        meanwhile = {}

        def crawl_writes_first(body, count, *args, **kw):
            if not meanwhile:  # a crawler (on the old rules still) rewrites a URL of the first
                # page between its read and its update
                line = next(ln for ln in body.split(b"\n") if b'"update"' in ln)
                doc_id = re.search(rb'"_id":"([0-9a-f]+)"', line).group(1).decode()
                url = next(u for u in before if _sha256(u) == doc_id)
                meanwhile[url] = StatusUpdate(url, Status.FETCH_ERROR, {"lang": ["nl"]},
                                              now + 7200, before[url].key)
                with open_frontier(old) as crawler:
                    assert crawler.apply_updates([meanwhile[url]]) == []
            return bulk(body, count, *args, **kw)

        f._bulk = crawl_writes_first
        pages = list(f.retag(batch))
        f.client.request = send
        assert [seen for seen, _ in pages] == [batch] * (n // batch)
        assert sum(changed for _, changed in pages) == 20_000
        searches = [r for r in requests if r[0] == "POST" and (
            r[1].endswith("/_search") or r[1] == "/_search/scroll")]
        assert searches[0][2]["size"] == batch and searches[0][3] == {"scroll": "5m"}
        assert len(searches) == n // batch + 1  # the first page, the others, the empty end
        assert [r[0] for r in requests if r[1] == "/_search/scroll"][-1] == "DELETE"  # cleared
        url, written = next(iter(meanwhile.items()))
        f.refresh()
        after = {r.url: r for page in f.iter_urls(None) for r in page}
        rec = after.pop(url)
        assert (rec.status, rec.next_fetch_date, rec.metadata) == (
            Status.FETCH_ERROR, pytest.approx(written.next_fetch_date, abs=1), {"lang": ["nl"]})
        before.pop(url)
        assert after == before  # statuses, dates, keys, metadata: as they were
        sample = {url: ["lang:nl"]}  # and a URL of each language but the one rewritten
        for lang, tags in (("de", ["lang:de"]), ("fr", ["lang:fr"]), (None, [])):
            i = next(i for i in range(n) if langs[i % 3] == lang
                     and f"http://h{i % 300}.example/{i}" != url)
            sample[f"http://h{i % 300}.example/{i}"] = tags
        assert _tags_by_url(f, list(sample)) == sample
    due_fr = sum(1 for i in range(n) if i % 3 == 1 and i % 5 != 0 and
                 f"http://h{i % 300}.example/{i}" != url)
    with open_frontier({**new, "frontier.interest.tags": ["lang:fr"]}) as f:
        assert f.due_count(now) == due_fr


def _sha256(url: str) -> str:
    import hashlib

    return hashlib.sha256(url.encode()).hexdigest()


def _tags_by_url(f, urls: list[str]) -> dict[str, list[str]]:
    _, data = f.client.request("POST", f"/{f.index}/_mget", {"ids": [_sha256(u) for u in urls]})
    return {d["_source"]["url"]: d["_source"].get("tags", []) for d in data["docs"]}


def test_retag_command_on_both_frontiers_and_its_errors(conf, tmp_path):
    """``owler frontier retag``: a progress line per batch with --progress 0 (the batches are
    what a user sees), a summary, exit 0; clear errors for a frontier that cannot be opened, an
    unknown crawl, a URLFrontier backend."""
    sqlite_conf = {"frontier.sqlite.path": str(tmp_path / "f.sqlite")}
    for c in (conf, sqlite_conf):
        with open_frontier({**c, "frontier.tags": {"isSitemap=true": "Sitemap"}}) as w:
            w.apply_updates([StatusUpdate(f"http://h{i % 7}.example/{i}.xml", Status.DISCOVERED,
                                          {"isSitemap": ["true"], "lang": ["de"]}, 0.0,
                                          f"h{i % 7}.example") for i in range(2500)])
        run = owler("frontier", "retag", "--batch", "1000", "--progress", "0",
                    *conf_args({**c, "frontier.tags": {"lang=*": "lang:*"}}), check=False)
        assert run.returncode == 0, run.stdout + run.stderr
        lines = run.stdout.splitlines()
        assert [re.sub(r" \([\d,]+ URLs/s\)$", "", ln) for ln in lines[:3]] == [
            "owler frontier retag: 1,000 URLs seen, 1,000 retagged",
            "owler frontier retag: 2,000 URLs seen, 2,000 retagged",
            "owler frontier retag: 2,500 URLs seen, 2,500 retagged"]
        assert lines[3].startswith("owler frontier retag: 2,500 URLs seen, 2,500 retagged, in "
                                   "3 batch(es) of at most 1,000, ") and len(lines) == 4
        assert "crawl 'DEFAULT', frontier: " in lines[3]
        with open_frontier({**c, "frontier.interest.tags": ["lang:de"]}) as f:
            f.refresh()
            assert f.due_count(time.time()) == 2500
    # errors
    (tmp_path / "not-a-db.sqlite").write_text("garbage\n")
    cases = [
        (["-o", f"frontier.sqlite.path={tmp_path / 'not-a-db.sqlite'}"], 3,
         "cannot use the frontier: cannot open the frontier"),
        (["-o", f"frontier.sqlite.path={tmp_path / 'none.sqlite'}"], 2,
         "unknown crawl 'DEFAULT': the frontier has no crawl at all"),
        (["-o", f"frontier.sqlite.path={tmp_path / 'f.sqlite'}", "--crawl", "other"], 2,
         "unknown crawl 'other': the frontier has the crawl(s) 'DEFAULT'"),
        (["-o", "frontier.backend=opensearch", "-o", "services.opensearch.port=1",
          "-o", "opensearch.max.retries=0"], 3, "cannot reach OpenSearch"),
        (["-o", "frontier.backend=urlfrontier"], 2, "retagged where it stores them"),
    ]
    for args, rc, message in cases:
        run = owler("frontier", "retag", *args, check=False)
        assert (run.returncode, message in run.stderr) == (rc, True), (args, run.stderr)
    assert not (tmp_path / "none.sqlite").exists()
    # the SQLite file's statuses and dates were not touched by any of it
    with SQLiteFrontier(tmp_path / "f.sqlite") as f:
        assert f.counts()["DISCOVERED"] == 2500 and f.due_count(1.0) == 2500
