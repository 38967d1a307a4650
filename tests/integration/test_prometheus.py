"""Prometheus on a running crawl: Debian's Prometheus server scrapes Debian's Pushgateway, to which
every spout and bolt task of an explorative crawl on real Storm (local mode) pushes its counters
(`metrics.prometheus.pushgateway`), and the `/metrics` of `owler frontier serve --metrics-port`
that the crawl takes its URLs from; PromQL answers for the pages fetched while the crawl runs, and
once it has ended with exactly the pages the farm served."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from tests.farm.harness import FarmProcess
from tests.integration import cli
from tests.integration.prometheus import Prometheus, Pushgateway
from tests.integration.test_opensearch_crawl import page_urls
from tests.integration.test_urlfrontier_crawl import FrontierService, crawler_conf, run_crawl
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.integration

FETCHED = 'sum(owler_fetched_total{job="owler",component="fetcher"})'


def test_prometheus_scrapes_a_running_crawl_and_the_frontier_service(tmp_path):
    gateway = Pushgateway(tmp_path / "pushgateway")
    service_conf = tmp_path / "service.yaml"
    service_conf.write_text(f"frontier.sqlite.path: {tmp_path / 'frontier.sqlite'}\n"
                            "fetcher.server.delay: 0.5\n")
    service = FrontierService(service_conf, "--metrics-port", "0")
    prom = None
    try:
        found = re.search(r"; metrics on http://(127\.0\.0\.1:(\d+))/metrics", service.lines[0])
        assert found, service.lines[0]
        metrics_address = found.group(1)
        with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain")
            assert "# TYPE frontier_getURLs_total counter" in resp.read().decode()
        prom = Prometheus(tmp_path / "prometheus", gateway.address,
                          {"urlfrontier": [metrics_address]})
        conf = crawler_conf(tmp_path / "c", service.address)
        with open(conf, "a") as f:
            f.write(f"metrics.prometheus.pushgateway: {gateway.address}\nmetrics.interval: 1\n")
        with FarmProcess(4, tmp_path / "access.log") as farm:
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("\n".join(farm.seeds()) + "\n")
            assert cli.owler("inject", str(seeds), "--conf", str(conf)).returncode == 0
            run = run_crawl(conf)
            try:
                # while the crawl runs: Prometheus has scraped pages fetched from the gateway
                assert wait_for("pages fetched in Prometheus while the crawl runs",
                                lambda: run.poll() is None and (prom.value(FETCHED) or 0) > 0,
                                300)
            finally:
                out = run.communicate(timeout=600)[0]
            assert run.returncode == 0, out[-3000:]
            assert "stopped (idle for 10 s)" in out, out[-3000:]
            served = page_urls(farm.access_log(), farm.port)
        assert len(served) > len(farm.seeds())
        # the tasks pushed their last values as they closed: the count is the farm's, exactly
        wait_for(f"{FETCHED} = {len(served)}", lambda: prom.value(FETCHED) == len(served), 60)
        # every fetched page answered 200, and the spout and status updater pushed theirs too
        assert prom.value('sum(owler_http_total{component="fetcher",code="200"})') == len(served)
        components = {r["metric"]["component"]
                      for r in prom.query('count by (component) ({job="owler"})')}
        assert {"spout", "partitioner", "fetcher", "parser", "status"} <= components, components
        hosts = {r["metric"].get("host") for r in prom.query('owler_fetched_total')}
        assert hosts and None not in hosts
        # the frontier service's own metrics, under the reference service's names
        wait_for("the service's counters scraped",
                 lambda: (prom.value("sum(frontier_getURLs_total)") or 0) >= len(served), 60)
        assert prom.value('sum(frontier_putURLs_discovered_total{discovered="true"})') > 0
        assert prom.value("sum(frontier_putURLs_calls_total)") > 0
        assert prom.value("sum(frontier_getURLs_latency_seconds_count)") > 0
        # both targets answer Prometheus (a scrape may miss its 1 s on a loaded machine: the
        # health is that of the last scrape, so wait for one that made it)
        wait_for("both targets up", lambda: prom.targets() == {"urlfrontier": ["up"],
                                                                "pushgateway": ["up"]}, 60)
        # no task's push failed
        assert prom.value("sum(owler_metrics_prometheus_failed_total)") == 0
    finally:
        if prom is not None:
            prom.stop()
        service.stop()
        gateway.stop()


def test_a_metrics_port_that_is_taken_fails_the_service_start(tmp_path):
    gateway = Pushgateway(tmp_path / "pushgateway")  # holds a port of 127.0.0.1
    try:
        service_conf = tmp_path / "service.yaml"
        service_conf.write_text(f"frontier.sqlite.path: {tmp_path / 'f.sqlite'}\n")
        proc = cli.owler("frontier", "serve", "--port", "0", "--metrics-port", str(gateway.port),
                         "--conf", str(service_conf), check=False, timeout=60)
        assert proc.returncode == 2, proc
        assert f"cannot serve metrics on 127.0.0.1:{gateway.port}" in proc.stderr, proc.stderr
        assert "URLFrontier service on" not in proc.stdout
        # the gateway is untouched
        with urllib.request.urlopen(gateway.url + "/-/ready", timeout=5) as resp:
            assert resp.status == 200
    finally:
        gateway.stop()


def test_a_crawl_with_a_malformed_gateway_says_so_and_crawls_on(tmp_path):
    """A bad metrics.prometheus.pushgateway must not stop the crawl (metrics are not crawl data):
    every task logs the error and shows it in the Storm UI, and the crawl ends as usual."""
    conf = tmp_path / "conf.yaml"
    with FarmProcess(1, tmp_path / "access.log") as farm:
        conf.write_text(f"owler.work.dir: {tmp_path}\nwarc.dir: {tmp_path / 'warc'}\n"
                        f"frontier.sqlite.path: {tmp_path / 'frontier.sqlite'}\n"
                        "http.allow.private.addresses: true\nfetcher.server.delay: 0.2\n"
                        "metrics.prometheus.pushgateway: 'ftp://127.0.0.1:1'\n")
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(farm.seeds()[0] + "\n")
        cli.owler("inject", str(seeds), "--conf", str(conf))
        proc = cli.owler("run", "explorative", "--conf", str(conf), "--idle-exit", "5",
                         "--time", "300", check=False, timeout=400)
        served = page_urls(farm.access_log(), farm.port)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert served
    logs = proc.stdout + proc.stderr + "".join(
        p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    assert "metrics to Prometheus disabled: metrics.prometheus.pushgateway: 'ftp://127.0.0.1:1'" \
        in logs, logs[-3000:]
    status = json.loads(cli.owler("status", "--json", "--conf", str(conf)).stdout)
    assert status["FETCHED"] == len(served)
