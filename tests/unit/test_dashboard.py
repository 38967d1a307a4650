"""The dashboard's parts without Storm: the metrics history (owler.run.history), the charts built
from it (owler.run.series), what the page is served (owler.run.dashboard), and its bad input.
The page in a real browser during a real crawl: tests/integration/test_dashboard.py."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import orjson
import pytest

from owler.frontier import open_frontier
from owler.run import history as H
from owler.run.dashboard import DashboardData, library_dir, make_server
from owler.run.report import StatusError, crawl_status
from owler.run.series import Grid, charts
from owler.task.metrics import Source, documents


def rows_of(*snapshots):
    """(t, component, task, {name: value}) → rows."""
    return [(t, c, task, n, v) for t, c, task, values in snapshots for n, v in values.items()]


# -- the grid -------------------------------------------------------------------------------------

def test_rates_are_per_task_and_a_restarted_task_counts_from_zero():
    g = Grid(rows_of((0, "fetcher", 1, {"fetched": 0}), (0, "fetcher", 2, {"fetched": 0}),
                     (2, "fetcher", 1, {"fetched": 10}), (2, "fetcher", 2, {"fetched": 4}),
                     (4, "fetcher", 1, {"fetched": 30}), (4, "fetcher", 2, {"fetched": 2})))
    keys = g.select(lambda c, n: n == "fetched")
    # task 2 went from 4 down to 2: restarted, it fetched 2 since; no negative rate
    assert g.rate(keys) == [None, 7.0, 11.0]
    assert g.total(keys) == [0, 14, 32]


def test_values_are_carried_forward_and_unknown_before_their_first_report():
    g = Grid(rows_of((10, "frontier", -1, {"due": 5}), (12, "spout", 3, {"in_flight": 1}),
                     (14, "frontier", -1, {"due": 2})))
    assert g.t == [10, 12, 14]
    assert g.total(g.select(lambda c, n: n == "due")) == [5, 5, 2]
    assert g.total(g.select(lambda c, n: n == "in_flight")) == [None, 1, 1]


def test_times_are_put_on_the_grid_of_the_resolution():
    g = Grid([(100.2, "a", 1, "x", 1.0), (101.9, "a", 2, "x", 2.0), (110.1, "a", 1, "x", 3.0)],
             resolution=10)
    assert g.t == [100, 110]
    assert g.total(g.keys) == [3.0, 5.0]


# -- the charts -----------------------------------------------------------------------------------

def crawl_rows():
    snaps = []
    for i, t in enumerate((0.0, 5.0, 10.0)):
        snaps += [
            (t, "fetcher", 3, {"fetched": 10 * i, "http/200": 8 * i, "http/301": i, "http/404": i,
                               "error.cause/timeout": i, "bytes": 1e6 * i,
                               "warc/bytes": 2e5 * i, "warc/records": 20 * i}),
            (t, "spout", -1, H.storm_values({"acked": 10 * i, "failed": i,
                                             "complete_latency_ms": 150.0})),
            (t, "parser", -1, H.storm_values({"acked": 10 * i, "failed": 0,
                                              "process_latency_ms": 1.5 + i})),
            (t, "frontier", -1, H.frontier_values({
                "DISCOVERED": 10 - i, "FETCHED": 10 * i, "FETCH_ERROR": 0, "REDIRECTION": 0,
                "ERROR": 0, "due_now": 3, "queues": 4, "queues_due": 2,
                "top_hosts": [["a", 7]], "most_delayed": [["b", 1.5]]})),
        ]
    return rows_of(*snaps)


def test_the_charts_of_a_crawl():
    doc = charts(crawl_rows(), "explorative")
    by = {c["id"]: c for c in doc["charts"]}
    assert doc["t"] == [0.0, 5.0, 10.0]
    assert list(by) == ["pages", "http", "errors", "frontier", "queues", "delayed", "bytes",
                        "latency", "failed"]
    assert by["pages"]["series"] == [{"label": "pages/s", "values": [None, 2.0, 2.0]}]
    http = {s["label"]: s["values"] for s in by["http"]["series"]}
    assert http == {"2xx": [None, 1.6, 1.6], "3xx": [None, 0.2, 0.2], "4xx": [None, 0.2, 0.2]}
    assert by["errors"]["series"] == [{"label": "timeout", "values": [0, 1, 2]}]
    frontier = {s["label"]: s["values"] for s in by["frontier"]["series"]}
    assert frontier == {"DISCOVERED": [10, 9, 8], "FETCHED": [0, 10, 20], "due": [3, 3, 3]}
    assert by["bytes"]["series"] == [{"label": "fetched", "values": [0, 1.0, 2.0]},  # MB
                                     {"label": "WARC written", "values": [0, 0.2, 0.4]}]
    assert by["latency"]["series"] == [
        {"label": "spout complete", "values": [150.0, 150.0, 150.0]},
        {"label": "parser process", "values": [1.5, 2.5, 3.5]}]
    assert by["failed"]["series"] == [{"label": "parser", "values": [0, 0, 0]},
                                      {"label": "spout", "values": [0, 1, 2]}]
    assert by["delayed"]["series"][0]["values"] == [1.5, 1.5, 1.5]
    assert by["pages"]["points"] == 2 and by["frontier"]["points"] == 9


def test_the_charts_read_only_the_names_a_history_is_read_for():
    from owler.run.series import NAMES, PREFIXES

    rows = crawl_rows() + rows_of((5.0, "fetcher", 3, {"queued": 4, "robots/fetched": 6}),
                                  (5.0, "parser", 4, {"parse_filter_failed": 1}))
    kept = [r for r in rows if r[3] in NAMES or r[3].startswith(PREFIXES)]
    assert len(kept) < len(rows)
    assert charts(kept, "explorative") == charts(rows, "explorative")


def test_warc2warc_has_its_own_charts_and_no_page_rate():
    rows = rows_of((0, "warc2warc", -1, {"files/done": 0, "files/reading": 1, "files/pending": 2,
                                         "files/failed": 0}),
                   (0, "warc", 4, {"records": 0}),
                   (2, "warc2warc", -1, {"files/done": 2, "files/reading": 1, "files/pending": 0,
                                         "files/failed": 1}),
                   (2, "warc", 4, {"records": 300}))
    by = {c["id"]: c for c in charts(rows, "warc2warc")["charts"]}
    assert "pages" not in by and "http" not in by
    assert by["records"]["series"][0]["values"] == [None, 150.0]
    files = {s["label"]: s["values"] for s in by["files"]["series"]}
    assert files == {"done": [0, 2], "in progress": [3, 1], "failed": [0, 1]}


def test_no_rows_give_empty_charts():
    doc = charts([], "explorative")
    assert doc["t"] == [] and all(c["points"] == 0 and c["series"] == [] for c in doc["charts"])


# -- the store and the recorder ------------------------------------------------------------------

def fetcher(run, task):
    """Where a fetcher task's documents come from."""
    return Source("fetcher", task, "", -1, run)


def test_store_keeps_runs_and_their_documents(tmp_path):
    store = H.MetricsStore(tmp_path / "m.sqlite")
    store.begin_run("explorative-1-100", "explorative", 100.0)
    store.begin_run("explorative-2-200", "explorative", 200.0)
    store.append(documents(fetcher("explorative-1-100", 3), {"fetched": 4, "ok": True}, 101.0))
    store.append(documents(fetcher("explorative-2-200", 3), {"fetched": 7}, 201.0))
    store.append(documents(fetcher("explorative-2-200", 3), {"fetched": 9}, 203.0))
    store.end_run("explorative-1-100", 150.0)
    runs = store.runs()
    assert [r["run"] for r in runs] == ["explorative-2-200", "explorative-1-100"]
    assert runs[1]["ended"] == 150.0 and runs[0]["ended"] is None
    assert store.rows("explorative-1-100") == [(101.0, "fetcher", 3, "fetched", 4.0)]  # no bool
    assert store.rows("explorative-2-200", since=202) == [(203.0, "fetcher", 3, "fetched", 9.0)]
    store.close()
    with pytest.raises(FileNotFoundError):
        H.MetricsStore(tmp_path / "none.sqlite", create=False)


def test_a_long_run_is_read_as_evenly_spread_snapshots_the_last_one_kept(tmp_path):
    store = H.MetricsStore(tmp_path / "m.sqlite")
    store.begin_run("r", "explorative", 0.0)
    for i in range(101):
        store.append(documents(fetcher("r", 1), {"fetched": 10 * i, "queued": 1}, float(i)))
    rows = store.rows("r", max_points=20)
    times = sorted({r[0] for r in rows})
    # every 6th of 101 snapshots (0, 6, ..., 96), and the last: 18, at most 20
    assert len(times) == 18 and times[:3] == [0.0, 6.0, 12.0] and times[-2:] == [96.0, 100.0]
    assert len(rows) == 36
    g = Grid(rows)
    assert set(g.rate(g.select(lambda c, n: n == "fetched"))[1:]) == {10.0}  # the mean rate
    assert len(store.rows("r")) == 202


def test_store_path_is_beside_the_embedded_frontier(tmp_path):
    assert H.store_path({"frontier.sqlite.path": str(tmp_path / "f.sqlite")}) == \
        tmp_path / "f-metrics.sqlite"
    assert H.store_path({"frontier.backend": "opensearch", "owler.work.dir": str(tmp_path)}) == \
        tmp_path / "metrics.sqlite"
    assert H.store_path({"metrics.sqlite.path": "/x/y.sqlite"}).as_posix() == "/x/y.sqlite"


class Sink:
    def __init__(self):
        self.docs = []
        self.closed = False

    def offer(self, docs):
        self.docs += docs

    def close(self, timeout):
        self.closed = True


def test_recorder_writes_components_frontier_and_warc2warc(tmp_path):
    store = H.MetricsStore(tmp_path / "m.sqlite")
    sink = Sink()
    rec = H.Recorder(store, "w-1-5", "warc2warc", 5.0, sink)
    stats = {"fetcher-3": {"component": "fetcher", "task": 3, "counters": {"fetched": 2},
                           "gauges": {"queued": 1}}}
    status = {"DISCOVERED": 1, "FETCHED": 2, "due_now": 1, "queues": 1, "queues_due": 1,
              "top_hosts": [["h", 3]], "warc2warc": {"files": {"done": 1, "failed": 0}}}
    storm = {"id": "warc2warc-1-9", "components": {"warc": {"acked": 3, "failed": 0,
                                                             "capacity": 0.1}}}
    rec.record(10.0, stats, status, storm, "warc2warc-1-9")
    rec.record(12.0, stats, None, None, None)  # frontier unreadable, no topology id yet
    names = {(c, n) for _, c, _, n, _ in store.rows("w-1-5")}
    assert {("fetcher", "fetched"), ("fetcher", "queued"), ("frontier", "status/FETCHED"),
            ("frontier", "due"), ("frontier", "queue/busiest"),
            ("warc2warc", "files/done"), ("warc", "storm/acked"),
            ("warc", "storm/capacity")} <= names
    # the metrics index gets only what no component writes, under the components' topology id
    assert {d["srcComponent"] for d in sink.docs} == {"frontier", "warc2warc", "warc"}
    assert {d["srcStormId"] for d in sink.docs} == {"warc2warc-1-9"}
    assert sink.docs[0]["timestamp"].endswith("Z")
    rec.close(20.0)
    assert sink.closed
    assert H.MetricsStore(tmp_path / "m.sqlite").runs()[0]["ended"] == 20.0


# -- the served page and its bad input -------------------------------------------------------------

def conf_for(tmp_path, **more):
    return {"frontier.sqlite.path": str(tmp_path / "frontier.sqlite"),
            "owler.work.dir": str(tmp_path), "metrics.interval": 2,
            "takedown.file": str(tmp_path / "takedowns.tsv"), **more}


def test_no_frontier_and_no_metrics_are_said_plainly(tmp_path):
    doc = DashboardData(conf_for(tmp_path)).payload()
    assert doc["status"] is None and doc["charts"] == [] and doc["run"] is None
    assert doc["problems"] == [
        f"frontier: no frontier at {tmp_path / 'frontier.sqlite'} (run `owler inject SEEDS` first)",
        f"no metrics yet: no run was recorded at {tmp_path / 'frontier-metrics.sqlite'} "
        "(`owler run` records one)"]


def test_an_empty_store_and_an_unknown_run(tmp_path):
    conf = conf_for(tmp_path)
    H.MetricsStore(H.store_path(conf)).close()
    assert DashboardData(conf).payload()["problems"][-1].startswith("no metrics yet in ")
    store = H.MetricsStore(H.store_path(conf))
    store.begin_run("explorative-1-1", "explorative", 1.0)
    store.close()
    doc = DashboardData(conf).payload("nope")
    assert doc["problems"][-1].startswith("no run 'nope' in ")
    assert DashboardData(conf).payload()["problems"][-1] == (
        f"no metrics yet for run explorative-1-1 in {H.store_path(conf)}")


def test_opensearch_down_is_said_plainly(tmp_path):
    conf = conf_for(tmp_path, **{"frontier.backend": "opensearch", "metrics.opensearch": True,
                                 "opensearch.addresses": "127.0.0.1:9",
                                 "opensearch.max.retries": 0})
    doc = DashboardData(conf).payload()
    assert doc["status"] is None and len(doc["problems"]) == 2
    assert doc["problems"][0].startswith("frontier: cannot use the frontier: ")
    assert "127.0.0.1:9" in doc["problems"][0]
    assert doc["problems"][1].startswith(
        "metrics: cannot read the OpenSearch index 'metrics' at http://127.0.0.1:9")


def test_status_is_what_owler_status_prints(tmp_path):
    conf = conf_for(tmp_path)
    frontier = open_frontier(conf)
    frontier.inject([("http://a.example/", {}), ("http://b.example/x", {})], time.time() - 5)
    frontier.close()
    doc = crawl_status(conf)
    assert doc["DISCOVERED"] == 2 and doc["due_now"] == 2 and doc["queues"] == 2
    assert [k for k, _ in doc["most_delayed"]] == ["a.example", "b.example"]
    assert doc["most_delayed"][0][1] >= 5
    assert DashboardData(conf).payload()["status"]["DISCOVERED"] == 2
    with pytest.raises(StatusError, match="no frontier at"):
        crawl_status(conf_for(tmp_path / "none"))


@pytest.fixture
def served(tmp_path):
    conf = conf_for(tmp_path)
    server = make_server(DashboardData(conf), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}", conf
    server.shutdown()
    server.server_close()


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read()


def test_the_server_serves_the_page_its_library_and_its_json(served):
    base, conf = served
    assert base.startswith("http://127.0.0.1:")
    code, ctype, body = get(base + "/")
    assert code == 200 and ctype.startswith("text/html") and b"dashboard.js" in body
    code, ctype, body = get(base + "/dashboard.js")
    assert code == 200 and b"uPlot" in body
    lib = library_dir() / "uPlot.iife.min.js"
    assert lib.is_file(), "make setup installs uPlot (services/dashboard/install.sh)"
    code, _, body = get(base + "/uPlot.iife.min.js")
    assert code == 200 and body == lib.read_bytes()
    code, ctype, body = get(base + "/api/dashboard.json")
    doc = orjson.loads(body)
    assert code == 200 and ctype == "application/json" and doc["problems"]
    code, _, body = get(base + "/api/status.json")
    assert code == 200 and orjson.loads(body)["problems"][0].startswith("frontier: no frontier")
    assert get(base + "/etc/passwd")[0] == 404
    assert get(base + "/../../etc/passwd")[0] == 404


def test_the_takedowns_page_shows_what_was_taken_down_escaped(served, tmp_path):
    from owler.blacklist import takedown as T

    base, conf = served
    code, ctype, body = get(base + "/takedowns")
    assert code == 200 and ctype.startswith("text/html") and b"Nothing was taken down" in body
    path = T.file_of(conf)
    T.add(path, "example.com", "<script>alert(1)</script> & a notice", now=1_767_225_600)
    T.add(path, "https://example.org/private/", "dmca", now=1_767_225_660)
    with open(path, "a") as fh:
        fh.write("broken line\n")
    code, _, body = get(base + "/takedowns")
    page = body.decode()
    assert code == 200 and "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; a notice" in page
    # newest first, with its date; the unreadable line is named
    assert page.index("https://example.org/private/") < page.index("example.com</td>")
    assert "2026-01-01T00:01:00Z" in page and "line 4: not added" in page
    doc = orjson.loads(get(base + "/api/takedowns.json")[2])
    assert doc["file"] == str(path) and [e["target"] for e in doc["entries"]] == [
        "https://example.org/private/", "example.com"]
    assert doc["problems"] == ["line 4: not added<TAB>target<TAB>reason: 'broken line'"]
    assert b'href="takedowns"' in get(base + "/")[2]  # the crawl's page links to it
