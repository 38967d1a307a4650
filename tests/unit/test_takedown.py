"""Tests for owler.blacklist.takedown and owler.run.takedown: targets, the file, matching, the crawl's components that honour it,
and the frontier's URLs set to ERROR on the embedded backend (tests/integration/
test_takedown_crawl.py: on OpenSearch, a URLFrontier service and in a crawl on real Storm)."""

from __future__ import annotations

import os
import threading

import pytest

from owler import conf as C
from owler.blacklist import takedown as T
from owler.run.takedown import subdomain_keys, take_down
from owler.blacklist import Blacklist
from owler.constants import ERROR_CAUSE, PARTITION_MODE_DOMAIN, PARTITION_MODE_HOST, Status
from owler.frontier import StatusUpdate
from owler.frontier.sqlite import SQLiteFrontier
from owler.scheduler import load_scheduler
from owler.status import StatusUpdater

NOW = 1_767_225_600.0
DEFAULTS = C.load_conf(None, [])  # metadata.persist keeps takedown.* and error.cause


@pytest.mark.parametrize("text, target, host, prefix", [
    ("Example.COM", "example.com", "example.com", ""),
    ("*.example.com", "example.com", "example.com", ""),
    ("bücher.de", "xn--bcher-kva.de", "xn--bcher-kva.de", ""),
    ("192.0.2.7", "192.0.2.7", "192.0.2.7", ""),
    ("HTTPS://Example.com/private/../docs/", "https://example.com/docs/", "example.com",
     "//example.com/docs/"),
    ("http://example.com:8080/a", "http://example.com:8080/a", "example.com",
     "//example.com:8080/a"),
])
def test_a_target_is_a_host_or_a_url_prefix_normalised(text, target, host, prefix):
    assert T.parse_target(text) == (target, host, prefix)


@pytest.mark.parametrize("text", ["", "example.com/path", "ftp://example.com/", "two words",
                                  "exa_mple..com", "http://"])
def test_anything_else_is_refused_with_a_reason(text):
    with pytest.raises(T.TakedownError, match="not|neither"):
        T.parse_target(text)


def test_entries_are_added_once_kept_and_removed(tmp_path):
    path = tmp_path / "sub" / "takedowns.tsv"
    entry, new = T.add(path, "Example.com", "a notice\tof\n two lines", now=NOW)
    assert new and entry.target == "example.com" and entry.reason == "a notice of two lines"
    assert entry.added == "2026-01-01T00:00:00Z"
    again, new = T.add(path, "example.com", "another", now=NOW + 60)
    assert not new and again == entry  # the first date and reason stay
    T.add(path, "https://other.example/private/", "dmca", now=NOW + 1)
    entries, problems = T.read(path)
    assert [e.target for e in entries] == ["example.com", "https://other.example/private/"]
    assert problems == []
    assert path.read_text().startswith("# owler take-downs")
    assert T.remove(path, "EXAMPLE.com").target == "example.com"
    assert T.remove(path, "example.com") is None
    assert [e.target for e in T.read(path)[0]] == ["https://other.example/private/"]
    with pytest.raises(T.TakedownError, match="reason"):
        T.add(path, "example.org", "  ")


def test_two_writers_at_once_lose_no_entry(tmp_path):
    path = tmp_path / "takedowns.tsv"
    threads = [threading.Thread(target=T.add, args=(path, f"h{i}.example", "r"))
               for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e.target for e in T.read(path)[0]) == sorted(f"h{i}.example" for i in range(16))


def test_lines_that_cannot_be_read_are_named_and_skipped(tmp_path):
    path = tmp_path / "takedowns.tsv"
    path.write_text("# comment\n\n2026-01-01T00:00:00Z\tok.example\tfine\n"
                    "no tabs here\n2026-01-01T00:00:00Z\tbad host!\twhy\n")
    entries, problems = T.read(path)
    assert [e.target for e in entries] == ["ok.example"]
    assert problems[0].startswith("line 4: not added<TAB>target<TAB>reason")
    assert problems[1].startswith("line 5:") and "not a host name" in problems[1]
    assert T.read(tmp_path / "missing.tsv") == ([], [])


def listing(tmp_path, *targets):
    path = tmp_path / "takedowns.tsv"
    for t in targets:
        T.add(path, t, f"reason for {t}", now=NOW)
    return T.TakedownList(path, reload_interval=5)


def test_a_host_takes_its_subdomains_down_on_label_boundaries(tmp_path):
    tl = listing(tmp_path, "example.com", "192.0.2.7")
    for url in ("http://example.com/", "https://www.example.com/a?b", "http://a.b.example.com:81/",
                "http://192.0.2.7/x"):
        assert tl.match(url).target in ("example.com", "192.0.2.7"), url
    for url in ("http://notexample.com/", "http://example.com.au/", "http://example.co/",
                "http://1.192.0.2.7.nip.example/", "mailto:x@example.com", "not a url"):
        assert tl.match(url) is None, url


def test_a_prefix_takes_only_its_urls_down_whatever_the_scheme(tmp_path):
    tl = listing(tmp_path, "https://example.com/private/")
    assert tl.match("http://example.com/private/a").target == "https://example.com/private/"
    assert tl.match("https://EXAMPLE.com/private/%61") is not None
    assert tl.match("https://example.com/privateer") is None
    assert tl.match("https://www.example.com/private/a") is None
    assert tl.match("https://example.com:8443/private/a") is None


def test_the_list_follows_its_file_at_most_once_an_interval(tmp_path):
    path = tmp_path / "takedowns.tsv"
    tl = T.TakedownList(path, reload_interval=5)
    assert len(tl) == 0 and tl.match("http://example.com/") is None
    T.add(path, "example.com", "r")
    assert not tl.maybe_reload(now=tl._last_check + 1) and tl.match("http://example.com/") is None
    assert tl.maybe_reload(now=tl._last_check + 6) and tl.match("http://example.com/")
    T.remove(path, "example.com")
    os.utime(path, ns=(1, 1))  # a new stamp even within the file system's time resolution
    assert tl.maybe_reload(now=tl._last_check + 6) and len(tl) == 0


def test_statuses_of_a_taken_down_url_become_error_except_discovered(tmp_path):
    tl = listing(tmp_path, "example.com")
    md = {"depth": ["1"]}
    assert tl.overrule("http://example.com/a", Status.FETCHED, md) == Status.ERROR
    assert md[ERROR_CAUSE] == ["takedown"] and md[T.MD_TARGET] == ["example.com"]
    assert md[T.MD_REASON] == ["reason for example.com"] and md[T.MD_DATE] == [T.iso(NOW)]
    assert tl.overrule("http://example.com/b", "DISCOVERED", {}) == "DISCOVERED"
    assert tl.overrule("http://example.org/", Status.FETCHED, {}) == Status.FETCHED
    updater = StatusUpdater(DEFAULTS, load_scheduler(DEFAULTS), takedowns=tl)
    update = updater.for_status("http://www.example.com/", {"fetch.statusCode": ["200"]},
                                "FETCHED", NOW)
    assert update.status == Status.ERROR and update.metadata[ERROR_CAUSE] == ["takedown"]
    assert update.metadata["takedown.reason"] == ["reason for example.com"]
    assert updater.for_status("http://example.org/", {}, "FETCHED", NOW).status == Status.FETCHED


def test_every_blacklist_reader_sees_the_takedowns(tmp_path):
    path = tmp_path / "takedowns.tsv"
    T.add(path, "example.com", "a notice", now=NOW)
    bl = Blacklist.from_conf({"blacklist.dir": str(tmp_path / "no-lists"),
                              "takedown.file": str(path), "blacklist.reload.interval": 1})
    assert bl.match("http://www.example.com/") == "takedown"
    assert bl.match("http://example.org/") is None
    refused = bl.refusal("http://example.com/x", now=10.0)
    assert refused == {ERROR_CAUSE: ["takedown"], T.MD_TARGET: ["example.com"],
                       T.MD_REASON: ["a notice"], T.MD_DATE: [T.iso(NOW)]}
    T.add(path, "example.org", "later")
    assert bl.refusal("http://example.org/", now=11.5)[ERROR_CAUSE] == ["takedown"]


def test_the_takedown_file_is_taken_from_the_project_root():
    from owler.conf import project_root
    assert T.file_of({}) == project_root() / ".work" / "takedowns.tsv"
    assert T.file_of({"takedown.file": "/x/y.tsv"}).as_posix() == "/x/y.tsv"


def fill(f, urls, status=Status.FETCHED, mode=PARTITION_MODE_HOST):
    from owler.urls import partition_key
    f.apply_updates([StatusUpdate(u, status, {"depth": ["0"]}, NOW + 3600,
                                  partition_key(u, mode)) for u in urls])


SITE = ["http://example.com/", "http://example.com/a", "http://www.example.com/b",
        "http://deep.www.example.com/c", "https://example.com/private/d"]
OTHER = ["http://example.org/", "http://notexample.com/", "http://example.com.au/"]


@pytest.mark.parametrize("mode", [PARTITION_MODE_HOST, PARTITION_MODE_DOMAIN])
def test_every_url_of_the_site_in_the_frontier_gets_error_at_once(tmp_path, mode):
    conf = {**DEFAULTS, "partition.url.mode": mode}
    with SQLiteFrontier(tmp_path / "f.sqlite", conf) as f:
        fill(f, SITE, mode=mode)
        fill(f, ["http://example.com/new"], Status.DISCOVERED, mode=mode)
        fill(f, OTHER, mode=mode)
        before = f.counts()
        entry = T.make("example.com", "a notice", T.iso(NOW))
        updater = StatusUpdater(conf, load_scheduler(conf))
        assert take_down(f, entry, updater, mode, now=NOW) == len(SITE) + 1
        for url in [*SITE, "http://example.com/new"]:
            rec = f.get(url)
            assert rec.status == Status.ERROR, url
            assert rec.metadata[ERROR_CAUSE] == ["takedown"]
            assert rec.metadata["takedown.reason"] == ["a notice"]
            assert rec.metadata["depth"] == ["0"]  # what the URL knew stays
            assert rec.next_fetch_date is None or rec.next_fetch_date > NOW + 86400
        for url in OTHER:
            assert f.get(url).status == Status.FETCHED
        # the counters follow, as for a crawl's writes
        assert f.counts() == {"FETCHED": before["FETCHED"] - len(SITE), "DISCOVERED": 0,
                              "ERROR": len(SITE) + 1, **{k: v for k, v in before.items()
                                                        if k not in ("FETCHED", "DISCOVERED",
                                                                     "ERROR")}}
        # a second run finds nothing left to write
        assert take_down(f, entry, updater, mode, now=NOW + 5) == 0


def test_a_prefix_takes_down_only_its_urls_in_the_frontier(tmp_path):
    with SQLiteFrontier(tmp_path / "f.sqlite") as f:
        fill(f, SITE + OTHER)
        entry = T.make("https://example.com/private/", "dmca", T.iso(NOW))
        n = take_down(f, entry, StatusUpdater(DEFAULTS, load_scheduler(DEFAULTS)),
                        PARTITION_MODE_HOST,
                        now=NOW)
        assert n == 1 and f.get("https://example.com/private/d").status == Status.ERROR
        assert f.get("http://example.com/a").status == Status.FETCHED


def test_queues_of_subdomains_are_found_and_nothing_like_them(tmp_path):
    with SQLiteFrontier(tmp_path / "f.sqlite") as f:
        fill(f, SITE + OTHER + ["http://a_b.example.com/"])
        assert sorted(subdomain_keys(f, "example.com")) == [
            "a_b.example.com", "deep.www.example.com", "www.example.com"]
        assert subdomain_keys(f, "xample.com") == []


def test_the_second_look_waits_for_every_task_and_the_last_commit():
    from owler.run.takedown import settle_time
    assert settle_time({}) == 30 + 0.5 + 5
    assert settle_time({"blacklist.reload.interval": 2, "status.updater.commit.interval": 1}) == 8
