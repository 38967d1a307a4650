"""owler.frontier.dump: the JSON-lines format of ``owler frontier dump`` / ``owler inject --jsonl``
(every field, tricky values, each kind of broken line), the SQLite reader's keyset pages, and the
loader's rules (create-only DISCOVERED, never dates, tag priorities not applied twice, failed
items sent again) on real SQLite files. The OpenSearch and URLFrontier readers, and the command
itself, are proven in tests/integration/test_frontier_dump.py."""

from __future__ import annotations

import io
import math
from itertools import islice

import orjson
import pytest

from owler.conf import load_conf
from owler.constants import STATUS_NAMES, Status
from owler.frontier import NEVER, FrontierError, FrontierRecord, StatusUpdate, open_frontier
from owler.frontier.dump import (FIELDS, MAX_REPORTED, BadDump, DumpLine, DumpLineError,
                                 InjectError, Loader, Progress, UnknownCrawl, check_dump, dump,
                                 dump_crawls, format_counts, parse_line, read_dump, record_line,
                                 records)

TRICKY = [
    FrontierRecord("https://例え.jp/パス?q=ü&x=1#frag", Status.DISCOVERED, 1767225600.0,
                   "例え.jp", {"anchors": ["«Größe» — 日本語 😀"], "lang": ["ja"]}, 0.0),
    FrontierRecord("http://a.example/fetched", Status.FETCHED, 1767225600.123456, "a.example",
                   {"fetch.statusCode": ["200"], "a.b.c": ["x", "", "y"],
                    "quote\"and\\slash": ["\t\n\u2028"]}, 0.0),
    FrontierRecord("http://a.example/gone", Status.FETCH_ERROR, None, "a.example",
                   {"fetch.error.count": ["3"]}, 0.0),
    FrontierRecord("http://a.example/moved", Status.REDIRECTION, 0.5, "a.example", {}, 0.0),
    FrontierRecord("http://a.example/bad", Status.ERROR, NEVER - 1, "_DEFAULT_",
                   {"error.cause": ["robots"]}, 0.0),
]


def test_every_status_and_tricky_values_round_trip_through_a_line():
    assert sorted(r.status.value for r in TRICKY) == sorted(STATUS_NAMES)
    for n, rec in enumerate(TRICKY, start=1):
        text = record_line(rec, "Crawl 2026/ä")
        assert text.endswith(b"\n") and text.count(b"\n") == 1  # \n and U+2028 escaped inside
        assert list(orjson.loads(text)) == list(FIELDS)
        line = parse_line(text, n)
        assert line == DumpLine(rec.url, rec.status, rec.next_fetch_date, rec.key,
                                "Crawl 2026/ä", rec.metadata)


def test_dates_are_numbers_a_whole_second_without_fraction_never_null():
    doc = orjson.loads(record_line(TRICKY[0], "DEFAULT"))
    assert doc["nextFetchDate"] == 1767225600 and isinstance(doc["nextFetchDate"], int)
    assert orjson.loads(record_line(TRICKY[1], "DEFAULT"))["nextFetchDate"] == 1767225600.123456
    assert orjson.loads(record_line(TRICKY[2], "DEFAULT"))["nextFetchDate"] is None
    stored_never = FrontierRecord("http://a.example/", Status.FETCHED, NEVER, "k", {}, 0.0)
    assert orjson.loads(record_line(stored_never, "DEFAULT"))["nextFetchDate"] is None


def test_a_line_may_leave_out_key_crawl_and_metadata():
    line = parse_line('{"url": "http://a.example/", "status": "FETCHED", "nextFetchDate": 5}', 1)
    assert line == DumpLine("http://a.example/", Status.FETCHED, 5.0, None, None, {})
    line = parse_line(b'\xef\xbb\xbf{"url": "u", "status": "ERROR", "nextFetchDate": null, '
                      b'"key": null, "crawl": "", "metadata": null}', 1)  # a BOM on line 1
    assert line == DumpLine("u", Status.ERROR, None, None, "DEFAULT", {})
    assert parse_line(b"  \r\n", 7) is None


GOOD = {"url": "http://a.example/", "status": "FETCHED", "nextFetchDate": 1767225600}


@pytest.mark.parametrize("line, reason", [
    (b'{"url": "http://a.example/", "status": ', "not JSON (unexpected end of data"),
    (b"http://a.example/\tkey=value", "not JSON ("),
    (b'["http://a.example/"]', "a list, not a JSON object"),
    ({k: v for k, v in GOOD.items() if k != "url"}, "no url"),
    ({**GOOD, "url": ""}, "url is the string '', not a URL"),
    ({**GOOD, "url": 42}, "url is the number 42, not a URL"),
    ({k: v for k, v in GOOD.items() if k != "status"}, "no status"),
    ({**GOOD, "status": "FETCHD"}, "unknown status 'FETCHD' (one of DISCOVERED, FETCHED, "),
    ({**GOOD, "status": "fetched"}, "unknown status 'fetched'"),
    ({k: v for k, v in GOOD.items() if k != "nextFetchDate"},
     "no nextFetchDate (epoch seconds, or null for never)"),
    ({**GOOD, "nextFetchDate": "2026-01-01T00:00:00Z"},
     "nextFetchDate is the string '2026-01-01T00:00:00Z', not a number of epoch seconds or null"),
    ({**GOOD, "nextFetchDate": True}, "nextFetchDate is the boolean true, not a number"),
    ({**GOOD, "nextFetchDate": -1}, "nextFetchDate -1 is out of range (0 to 253402300799"),
    ({**GOOD, "nextFetchDate": NEVER}, "is out of range"),
    ({**GOOD, "metadata": {"lang": "de"}}, "metadata 'lang': the string 'de' where a list of "
                                           "strings belongs"),
    ({**GOOD, "metadata": {"depth": [1]}}, "metadata 'depth': the number 1 where a list"),
    ({**GOOD, "metadata": {"a": ["x", None]}}, "metadata 'a': null where a list"),
    ({**GOOD, "metadata": ["lang=de"]}, "metadata is a list, not an object of lists of strings"),
    ({**GOOD, "metadata": {"": ["x"]}}, "metadata has an empty key"),
    ({**GOOD, "key": ""}, "key is the string '', not a partition key"),
    ({**GOOD, "key": 7}, "key is the number 7, not a partition key"),
    ({**GOOD, "crawl": "a\nb"}, "crawl ID 'a\\nb' holds a control character"),
    ({**GOOD, "crawl": 3}, "crawl is the number 3, not a crawl ID"),
    ({**GOOD, "nextfetchdate": 5}, "unknown field 'nextfetchdate' (a line has url, key, crawl, "),
])
def test_a_broken_line_says_what_is_wrong(line, reason):
    raw = line if isinstance(line, bytes) else orjson.dumps(line)
    with pytest.raises(DumpLineError) as err:
        parse_line(raw, 12)
    assert err.value.lineno == 12
    assert reason in err.value.reason, err.value.reason
    assert str(err.value).startswith("line 12: ")


def test_check_dump_names_every_broken_line_and_counts_the_good_ones():
    good = orjson.dumps(GOOD)
    text = b"\n".join([good, b"", b"oops", good, b'{"url": "x"}', good, b""])
    with pytest.raises(BadDump) as bad:
        check_dump(io.BytesIO(text))
    assert [(e.lineno, e.reason.split(" (")[0]) for e in bad.value.errors] == [
        (3, "not JSON"), (5, "no status")]
    assert (bad.value.count, bad.value.lines) == (2, 5)
    assert check_dump(io.BytesIO(b"\n".join([good, b"", good, b""]))) == 2
    assert [n for n, _ in read_dump(io.BytesIO(b"\n".join([good, b"", good])))] == [1, 3]


def test_check_dump_reports_the_first_broken_lines_and_counts_the_rest():
    with pytest.raises(BadDump) as bad:
        check_dump(io.BytesIO(b"x\n" * (MAX_REPORTED + 5)))
    assert len(bad.value.errors) == MAX_REPORTED and bad.value.count == MAX_REPORTED + 5
    assert bad.value.errors[-1].lineno == MAX_REPORTED


# -- SQLite: the reader's pages and the loader, on real files ----------------------------------------
def conf_of(tmp_path, name="frontier.sqlite", *extra):
    return load_conf(None, [f"frontier.sqlite.path={tmp_path / name}", "partition.url.mode=byHost",
                            *extra])


def listed(recs, most=500):
    """At most ``most`` records: a reader that pages in circles fails the test, never hangs it."""
    return list(islice(recs, most))


def fill(f, n, key="a.example", date=1767225600.0, status=Status.FETCHED):
    f.apply_updates([StatusUpdate(f"http://{key}/{i}", status, {"i": [str(i)]}, date, key)
                     for i in range(n)])


def test_sqlite_pages_give_every_url_once_even_one_rewritten_meanwhile(tmp_path):
    with open_frontier(conf_of(tmp_path)) as f:
        fill(f, 50)
        recs = records(f, page=7)
        first = [next(recs).url for _ in range(10)]  # into the second page
        # rewritten while the dump runs: one already read, one not yet; and a new URL
        f.apply_updates([StatusUpdate("http://a.example/3", Status.ERROR, {}, None, "a.example"),
                         StatusUpdate("http://a.example/40", Status.ERROR, {}, None, "a.example"),
                         StatusUpdate("http://a.example/new", Status.DISCOVERED, {}, 1.0,
                                      "a.example")])
        rest = listed(recs)
    urls = first + [r.url for r in rest]
    assert sorted(urls) == sorted([f"http://a.example/{i}" for i in range(50)]
                                  + ["http://a.example/new"])
    later = {r.url: r for r in rest}
    assert later["http://a.example/40"].status is Status.ERROR  # read after its rewrite
    assert later["http://a.example/40"].next_fetch_date is None


def test_sqlite_filters_by_status_and_by_key_through_pages_of_equal_dates(tmp_path):
    with open_frontier(conf_of(tmp_path)) as f:
        fill(f, 23, "q.example", date=1000.0)  # one date for the whole queue: the keyset's tie
        fill(f, 6, "q.example", date=math.pi, status=Status.DISCOVERED)
        fill(f, 9, "other.example", date=1000.0)
        got = [r.url for r in listed(records(f, key="q.example", page=4))]
        assert sorted(got) == sorted({f"http://q.example/{i}" for i in range(23)})
        assert len(got) == 23  # (the DISCOVERED of a known URL changed nothing)
        f.apply_updates([StatusUpdate(f"http://q.example/d{i}", Status.DISCOVERED, {}, 5.0,
                                      "q.example") for i in range(5)])
        got = [r.url for r in listed(records(f, ["DISCOVERED"], key="q.example", page=2))]
        assert sorted(got) == [f"http://q.example/d{i}" for i in range(5)]
        assert [r.url for r in listed(records(f, ["FETCHED"], key="other.example", page=2))] == [
            f"http://other.example/{i}" for i in range(9)]
        assert len(listed(records(f, ["FETCHED", "DISCOVERED"], page=5))) == 23 + 5 + 9
        assert listed(records(f, ["ERROR"])) == [] and listed(records(f, key="nosuch")) == []


def test_a_crawl_dumped_and_loaded_comes_back_exactly(tmp_path):
    src = conf_of(tmp_path, "src.sqlite")
    with open_frontier(src, crawl="news") as f:
        f.apply_updates([StatusUpdate(r.url, r.status, r.metadata, r.next_fetch_date, r.key)
                         for r in TRICKY])
    out = io.BytesIO()
    done = dump(src, dump_crawls(src, "news"), out)
    assert [(d.crawl, dict(d.counts)) for d in done] == [("news", {s: 1 for s in STATUS_NAMES})]
    dst = conf_of(tmp_path, "dst.sqlite")
    for crawl in (None, "moved"):
        out.seek(0)
        with Loader(dst, crawl=crawl) as loader:
            for lineno, line in read_dump(out):
                loader.add(lineno, line)
            loader.flush()
            loader.close()
        assert loader.written == {crawl or "news": {s: 1 for s in STATUS_NAMES}}
        with open_frontier(dst, crawl=crawl or "news") as f:
            for rec in TRICKY:
                got = f.get(rec.url)
                assert (got.status, got.next_fetch_date, got.key, got.metadata) == (
                    rec.status, rec.next_fetch_date, rec.key, rec.metadata), rec.url
    assert sorted(d.crawl for d in dump(dst, dump_crawls(dst, all_crawls=True), io.BytesIO())) \
        == ["moved", "news"]


def test_a_line_without_key_gets_the_destinations_partition_key(tmp_path):
    with Loader(conf_of(tmp_path)) as loader:
        loader.add(1, parse_line(b'{"url": "http://www.b.example/x", "status": "FETCHED", '
                                 b'"nextFetchDate": 10}', 1))
        loader.flush()
        loader.close()
    with open_frontier(conf_of(tmp_path)) as f:
        assert f.get("http://www.b.example/x").key == "www.b.example"  # byHost


def test_discovered_is_create_only_and_other_statuses_overwrite(tmp_path):
    conf = conf_of(tmp_path)
    with open_frontier(conf) as f:
        f.apply_updates([
            StatusUpdate("http://a.example/known", Status.FETCHED, {"v": ["old"]}, 100.0,
                         "a.example"),
            StatusUpdate("http://a.example/undone", Status.DISCOVERED, {"v": ["old"]}, 100.0,
                         "a.example")])
    lines = [DumpLine("http://a.example/known", Status.DISCOVERED, 5.0, "a.example", None,
                      {"v": ["new"]}),
             DumpLine("http://a.example/undone", Status.FETCHED, None, "a.example", None,
                      {"v": ["new"]})]
    with Loader(conf) as loader:
        for n, line in enumerate(lines, 1):
            loader.add(n, line)
        loader.flush()
        loader.close()
    with open_frontier(conf) as f:
        known, undone = f.get("http://a.example/known"), f.get("http://a.example/undone")
    assert (known.status, known.next_fetch_date, known.metadata) == (
        Status.FETCHED, 100.0, {"v": ["old"]})
    assert (undone.status, undone.next_fetch_date, undone.metadata) == (
        Status.FETCHED, None, {"v": ["new"]})


def test_tag_priorities_are_not_applied_a_second_time(tmp_path):
    prio = ["frontier.tags={\"lang=de\": \"lang:de\"}", "frontier.tags.priority={\"lang:de\": 60}"]
    src, dst = conf_of(tmp_path, "src.sqlite", *prio), conf_of(tmp_path, "dst.sqlite", *prio)
    with open_frontier(src) as f:
        f.apply_updates([StatusUpdate("http://a.example/", Status.FETCHED, {"lang": ["de"]},
                                      1000.0, "a.example")])
        assert f.get("http://a.example/").next_fetch_date == 940.0  # moved up once, stored so
    out = io.BytesIO()
    dump(src, ["DEFAULT"], out)
    out.seek(0)
    with Loader(dst) as loader:
        for n, line in read_dump(out):
            loader.add(n, line)
        loader.flush()
        loader.close()
    with open_frontier(dst) as f:
        assert f.get("http://a.example/").next_fetch_date == 940.0
        assert f.tags("http://a.example/") == ["lang:de"]  # tags by the destination's rules


def test_an_unknown_crawl_names_the_crawls_there_are(tmp_path):
    conf = conf_of(tmp_path)
    with pytest.raises(UnknownCrawl, match="unknown crawl 'DEFAULT': the frontier has no crawl"):
        dump_crawls(conf)
    assert not (tmp_path / "frontier.sqlite").exists()  # looking created nothing
    for crawl in ("DEFAULT", "b"):
        with open_frontier(conf, crawl=crawl) as f:
            fill(f, 1)
    with pytest.raises(UnknownCrawl, match=r"unknown crawl 'nosuch': the frontier has the "
                                           r"crawl\(s\) 'DEFAULT', 'b'$"):
        dump_crawls(conf, "nosuch")
    assert dump_crawls(conf, all_crawls=True) == ["DEFAULT", "b"]
    assert dump_crawls(conf_of(tmp_path, "frontier.sqlite", "frontier.crawl.id=b")) == ["b"]


class FlakyFrontier:
    """A frontier whose apply_updates reports some positions failed, ``times`` times."""

    location = "flaky"

    def __init__(self, times):
        self.times = times
        self.calls = []

    def apply_updates(self, updates):
        self.calls.append([u.url for u in updates])
        if self.times:
            self.times -= 1
            return [0, len(updates) - 1] if len(updates) > 1 else [0]
        return []

    def refresh(self):
        pass

    def close(self):
        pass


def loader_over(tmp_path, frontier):
    loader = Loader(conf_of(tmp_path), batch=3, retry_pause=0.0)
    loader.frontiers["DEFAULT"] = frontier
    return loader


def line_n(i):
    return DumpLine(f"http://a.example/{i}", Status.FETCHED, 1.0, "a.example")


def test_items_a_backend_failed_are_sent_again(tmp_path):
    flaky = FlakyFrontier(times=2)
    loader = loader_over(tmp_path, flaky)
    for i in range(3):
        loader.add(i + 1, line_n(i))
    again = ["http://a.example/0", "http://a.example/2"]  # the two failed, twice
    assert flaky.calls == [[f"http://a.example/{i}" for i in range(3)], again, again]
    assert loader.total == 3 and loader.written == {"DEFAULT": {"FETCHED": 3}}


def test_items_failed_every_time_stop_the_load_with_their_line_numbers(tmp_path):
    loader = loader_over(tmp_path, FlakyFrontier(times=99))
    for i in range(2):
        loader.add(i + 10, line_n(i))
    with pytest.raises(InjectError, match=r"2 line\(s\) could not be written to flaky after 4 "
                                          r"attempts \(lines 10, 12\)") as err:
        loader.add(12, line_n(2))
    assert err.value.written == 1  # line 11 (the middle one) was written


def test_a_backend_that_fails_a_batch_stops_the_load(tmp_path):
    class Down(FlakyFrontier):
        def apply_updates(self, updates):
            raise FrontierError("cannot reach OpenSearch at http://127.0.0.1:1")

    loader = loader_over(tmp_path, Down(0))
    with pytest.raises(InjectError, match="cannot write to flaky: cannot reach") as err:
        for i in range(3):
            loader.add(i + 1, line_n(i))
    assert err.value.written == 0


def test_progress_prints_count_and_rate_every_few_seconds():
    now = [100.0]
    out = io.StringIO()
    p = Progress("owler frontier dump", out, every=5.0, clock=lambda: now[0])
    p.add(999)
    now[0] = 110.0
    p.add(1)  # 1,000: the clock is looked at
    assert out.getvalue() == "owler frontier dump: 1,000 URLs (100/s)\n"
    now[0] = 112.0
    p.add(1000)  # 2 s later: no line
    assert out.getvalue().count("\n") == 1
    now[0] = 120.0
    p.add(3000)
    assert out.getvalue().splitlines()[-1] == "owler frontier dump: 5,000 URLs (250/s)"
    assert p.elapsed() == 20.0
    assert format_counts({"FETCHED": 2, "DISCOVERED": 1, "ERROR": 0}) == \
        "DISCOVERED 1, FETCHED 2"
    assert format_counts({}) == "no URL"
