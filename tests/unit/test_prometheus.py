"""owler.prometheus: the names and labels of the components' metrics, the Pushgateway address, the
pusher's requests (against a small HTTP server of the test standing in for the gateway: the real
Pushgateway and Prometheus are in tests/integration/test_prometheus.py), and the service's
metric names."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from owler import prometheus as P
from owler.conf import ConfError
from tests.integration.waiting import wait_for


def _text(counters, gauges, labels=None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(P.SnapshotCollector(lambda: (counters, gauges),
                                          labels or {"host": "127.0.0.2"}))
    return generate_latest(registry).decode()


def _samples(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_names_labels_and_types():
    text = _text({"fetched": 12, "http/200": 11, "http/404": 1, "FETCHED": 12,
                  "error.cause/timeout": 2, "warc/records": 13, "rejected/regex": 4,
                  "robots_denied": 1, "odd": True, "text": "x"},
                 {"queued": 2.5, "warc/pending": 3})
    host = ("host", "127.0.0.2")
    assert _samples(text) == {
        ("owler_fetched_total", (host,)): 12,
        ("owler_http_total", (("code", "200"), host)): 11,
        ("owler_http_total", (("code", "404"), host)): 1,
        ("owler_status_total", (host, ("status", "FETCHED"))): 12,
        ("owler_error_cause_total", (("cause", "timeout"), host)): 2,
        ("owler_warc_records_total", (host,)): 13,
        ("owler_rejected_total", (("filter", "regex"), host)): 4,
        ("owler_robots_denied_total", (host,)): 1,
        ("owler_queued", (host,)): 2.5,
        ("owler_warc_pending", (host,)): 3,
    }  # a bool and a text are no numbers: left out
    types = {fam.name: fam.type for fam in text_string_to_metric_families(text)}
    assert types["owler_http"] == "counter" and types["owler_queued"] == "gauge"


def test_a_name_has_one_type_and_a_bare_family_counter_an_empty_member():
    text = _text({"http": 3, "http/200": 2, "queued": 7, "status": 5, "FETCHED": 4},
                 {"queued": 1})
    host = ("host", "127.0.0.2")
    got = _samples(text)
    assert got[("owler_http_total", (("code", ""), host))] == 3
    assert got[("owler_http_total", (("code", "200"), host))] == 2
    assert got[("owler_queued_total", (host,))] == 7
    assert got[("owler_queued_gauge", (host,))] == 1
    assert got[("owler_status_total", (host, ("status", "")))] == 5
    assert got[("owler_status_total", (host, ("status", "FETCHED")))] == 4
    # the text is valid for Prometheus' own parser (no name declared twice)
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(names) == len(set(names))


def test_gateway_address():
    assert P.gateway_address("127.0.0.1:9091") == "http://127.0.0.1:9091"
    assert P.gateway_address(" https://gw.example:9443/base/ ") == "https://gw.example:9443/base"
    for bad in ("", "nohost", "ftp://127.0.0.1:21", "127.0.0.1:abc", "http://127.0.0.1"):
        with pytest.raises(ConfError, match="metrics.prometheus.pushgateway"):
            P.gateway_address(bad)


def test_from_conf():
    snap = lambda: ({}, {})  # noqa: E731
    assert P.Pusher.from_conf({}, {"task": "1"}, snap, {}, 10) is None
    assert P.Pusher.from_conf({P.PUSHGATEWAY_KEY: ""}, {"task": "1"}, snap, {}, 10) is None
    with pytest.raises(ConfError, match="metrics.prometheus.job"):
        P.Pusher.from_conf({P.PUSHGATEWAY_KEY: "127.0.0.1:9", P.JOB_KEY: "my job"},
                           {"task": "1"}, snap, {}, 10)


class _Gateway:
    """Records the requests a Pushgateway would get (method, path, body)."""

    def __init__(self):
        self.requests: list[tuple[str, str, str]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                gateway.requests.append(("PUT", self.path, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_the_pusher_replaces_its_group_and_pushes_last_values_at_close():
    gw = _Gateway()
    counters = {"fetched": 1}
    try:
        pusher = P.Pusher.from_conf(
            {P.PUSHGATEWAY_KEY: gw.address},
            {"topology": "crawl-1-17", "component": "fetcher", "task": "3"},
            lambda: (dict(counters), {"queued": 2}), {"host": "127.0.0.2"}, 0.1)
        wait_for("two pushes", lambda: len(gw.requests) >= 2, 10, every=0.05)
        counters["fetched"] = 5
        pusher.close(timeout=2)
        method, path, body = gw.requests[-1]
        assert method == "PUT"  # every push replaces the task's group whole
        assert path == "/metrics/job/owler/component/fetcher/task/3/topology/crawl-1-17"
        got = _samples(body)
        assert got[("owler_fetched_total", (("host", "127.0.0.2"),))] == 5  # the last values
        assert got[("owler_queued", (("host", "127.0.0.2"),))] == 2
        assert pusher.failed == 0 and pusher.pushed == len(gw.requests)
        n = len(gw.requests)
    finally:
        gw.close()
    # nothing after close
    time.sleep(0.3)
    assert len(gw.requests) == n


def test_a_gateway_that_is_down_costs_a_counter_and_one_warning(caplog):
    gw = _Gateway()
    address = gw.address
    gw.close()  # nothing listens there now
    caplog.set_level(logging.WARNING, logger="owler.prometheus")
    pusher = P.Pusher(P.gateway_address(address), "owler", {"task": "1"},
                      lambda: ({"fetched": 1}, {}), {}, interval=60, timeout=1)
    try:
        assert pusher.push() is False and pusher.push() is False
        assert pusher.stats() == {"metrics/prometheus_pushed": 0,
                                  "metrics/prometheus_failed": 2}
        warnings = [r for r in caplog.records if "did not take the push" in r.getMessage()]
        assert len(warnings) == 1  # one a minute, not one a push
    finally:
        pusher.close(timeout=1)


def test_the_service_metrics_bear_the_reference_names():
    m = P.ServiceMetrics()
    m.get_calls.inc()
    m.get_urls.inc(10)
    m.get_latency.observe(0.01)
    m.put_calls.inc()
    m.put_urls.inc(3)
    m.put_discovered.labels("true").inc(2)
    m.put_discovered.labels("false").inc()
    m.put_ignored.inc()
    m.put_completed.inc()
    got = _samples(generate_latest(m.registry).decode())
    assert got[("frontier_getURLs_calls_total", ())] == 1
    assert got[("frontier_getURLs_total", ())] == 10
    assert got[("frontier_getURLs_latency_seconds_count", ())] == 1
    assert got[("frontier_putURLs_calls_total", ())] == 1
    assert got[("frontier_putURLs_total", ())] == 3
    assert got[("frontier_putURLs_discovered_total", (("discovered", "true"),))] == 2
    assert got[("frontier_putURLs_discovered_total", (("discovered", "false"),))] == 1
    assert got[("frontier_putURLs_ignored_total", ())] == 1
    assert got[("frontier_putURLs_completed_total", ())] == 1


def test_the_service_counts_a_put_batch_as_the_reference_does(tmp_path):
    from owler.frontier.urlfrontier_api import pb
    from owler.urlfrontier.service import FrontierService

    def disc(url):
        return pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url)))

    def known(url, due):
        return pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=url),
                                                refetchable_from_date=due))

    svc = FrontierService({"frontier.sqlite.path": str(tmp_path / "f.sqlite")})
    try:
        first = svc._run(lambda: svc._put([
            disc("http://a.example/1"), disc("http://a.example/1"), disc("http://a.example/2"),
            known("http://a.example/3", 0), known("http://a.example/4", 2_000_000_000)]))
        again = svc._run(lambda: svc._put([disc("http://a.example/1")]))
        got = _samples(generate_latest(svc.metrics.registry).decode())
    finally:
        svc.close()
    assert [s for _, s in first] == [0, 1, 0, 0, 0] and [s for _, s in again] == [1]  # OK/SKIPPED
    assert got[("frontier_putURLs_total", ())] == 6
    assert got[("frontier_putURLs_discovered_total", (("discovered", "true"),))] == 4
    assert got[("frontier_putURLs_discovered_total", (("discovered", "false"),))] == 2
    # the second of a batch and the one already stored: the reference's "already known"
    assert got[("frontier_putURLs_ignored_total", ())] == 2
    assert got[("frontier_putURLs_completed_total", ())] == 1  # refetchable_from_date 0
