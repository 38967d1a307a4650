"""The crawl dashboard in a real browser (Debian's headless Chromium): during a real crawl of the
loopback farm on Storm (served by `owler run`, which prints its address) and after it (served by
`owler dashboard`), its figures against `owler status --json`, each chart drawn with data (data
points and pixels in the series' colours, which dashboard.js counts after uPlot drew), and the
page's plain words for bad input. Screenshots are kept in .work/artifacts/ (browser.py)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.farm.harness import FarmProcess
from tests.integration import cli
from tests.integration.browser import browser, charts, figures, problems

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


class Lines:
    """A process's output lines, read on a thread (its pipe never fills)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines, self.q = proc, [], queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            self.q.put(line)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self.q.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, "".join(self.lines)[-3000:]
                continue
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError(f"no line matching {pattern!r}:\n" + "".join(self.lines)[-3000:])


def owler_proc(*args):
    return subprocess.Popen([sys.executable, "-m", "owler", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OWLER_HOME": str(ROOT)})


def status_json(conf: Path) -> dict:
    return orjson.loads(cli.owler("status", "--conf", str(conf), "--json").stdout)


def test_the_dashboard_during_and_after_a_crawl(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {tmp_path / 'frontier.sqlite'}\n"
                    f"warc.dir: {tmp_path / 'warc'}\nowler.work.dir: {tmp_path}\n"
                    "http.allow.private.addresses: true\nfetcher.server.delay: 0.5\n"
                    "http.timeout: 2000\nmetrics.interval: 2\ndashboard.port: 0\n")
    with FarmProcess(6, tmp_path / "access.log") as farm:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        cli.owler("inject", str(seeds), "--conf", str(conf))
        run = owler_proc("run", "explorative", "--conf", str(conf), "--idle-exit", "8",
                         "--time", "300")
        out = Lines(run)
        try:
            url = out.wait_for(r"owler: dashboard: (http://127\.0\.0\.1:\d+/)", 120).group(1)
            out.wait_for(r"fetched=[1-9]", 240)
            out.wait_for(r"fetched=[1-9]", 60)  # two snapshots with pages in the history
            during = browser(url, tmp_path / "chrome", "dashboard-during-crawl.png")
        finally:
            if run.poll() is None and "during" not in locals():
                run.kill()
        assert run.wait(400) == 0, "".join(out.lines)[-3000:]
        out.reader.join(60)  # it takes the last lines after the exit, up to the pipe's end
        assert not out.reader.is_alive(), "the output of owler run did not end within 60 s"
        # ended because nothing was left, not at its time limit (a tuple replayed without end)
        assert any("owler: stopped (idle for 8 s)" in line for line in out.lines), \
            "".join(out.lines)[-3000:]
        log = farm.access_log()
    assert during.body.get("data-ready") == "1" and during.body.get("data-live") == "1"
    assert problems(during) == []
    now = figures(during)
    assert set(now) >= {"DISCOVERED", "FETCHED", "total", "due_now", "queues"}
    assert now["total"] == sum(now[s] for s in ("DISCOVERED", "FETCHED", "FETCH_ERROR",
                                                "REDIRECTION", "ERROR"))
    drawn = charts(during)
    for chart in ("pages", "frontier", "queues", "bytes"):
        points, ink = drawn[chart]
        assert points > 0 and ink > 50, (chart, drawn)
    assert during.xpath("//p[@id='run']")[0].text_content().startswith("explorative · run explorative-")

    # after the crawl: `owler dashboard` shows the whole run, and the figures of `owler status`
    served = owler_proc("dashboard", "--conf", str(conf), "--port", "0")
    shown = Lines(served)
    try:
        url = shown.wait_for(r"owler dashboard: (http://127\.0\.0\.1:\d+/)", 60).group(1)
        after = browser(url, tmp_path / "chrome", "dashboard-after-crawl.png")
        expected = status_json(conf)
        with urllib.request.urlopen(url + "api/dashboard.json", timeout=30) as resp:
            doc = orjson.loads(resp.read())
    finally:
        served.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0
    assert after.body.get("data-live") == "0" and problems(after) == []
    assert figures(after) == {k: expected[k] for k in figures(after)}
    # every page the farm served (robots.txt aside; /slow answers after the crawler gave up)
    served = {(e["host"], e["path"]) for e in log
              if e["status"] == 200 and e["path"] not in ("/robots.txt", "/slow")}
    assert expected["FETCHED"] == len(served) and len(served) >= 10, (expected, len(served))
    drawn = charts(after)
    assert set(drawn) == {"pages", "http", "errors", "frontier", "queues", "delayed", "bytes",
                          "latency", "failed"}
    for chart, (points, ink) in drawn.items():
        assert points > 1 and ink > 50, (chart, drawn)
    # Storm's own figures came through (storm/java/LocalRunner.java): the spout's complete latency
    latency = {s["label"]: s["values"] for c in doc["charts"] if c["id"] == "latency"
               for s in c["series"]}
    assert max(v or 0 for v in latency["spout complete"]) > 0, latency
    assert {"fetcher process", "parser process", "status process"} <= set(latency)
    assert doc["status"] == {**expected, "most_delayed": doc["status"]["most_delayed"]}
    top = after.xpath("//div[@id='queues']/ol/li")[0].text_content()
    assert top == f"{expected['top_hosts'][0][0]}: {expected['top_hosts'][0][1]} URLs"


def test_the_page_says_what_is_missing(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {tmp_path / 'none' / 'frontier.sqlite'}\n"
                    f"owler.work.dir: {tmp_path}\n")
    served = owler_proc("dashboard", "--conf", str(conf), "--port", "0")
    shown = Lines(served)
    try:
        url = shown.wait_for(r"owler dashboard: (http://127\.0\.0\.1:(\d+)/)", 60)
        page = browser(url.group(1), tmp_path / "chrome", "dashboard-nothing-yet.png", 3000)
        # the port is taken now: a clear error, exit 2
        taken = cli.owler("dashboard", "--conf", str(conf), "--port", url.group(2), check=False)
    finally:
        served.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0
    assert page.body.get("data-ready") == "1"
    said = problems(page)
    assert said[0] == (f"frontier: no frontier at {tmp_path / 'none' / 'frontier.sqlite'} "
                       "(run `owler inject SEEDS` first)")
    assert said[1].startswith("no metrics yet: no run was recorded at ")
    assert page.xpath("//p[@id='run']")[0].text_content() == "no run recorded"
    assert taken.returncode == 2 and "cannot listen on 127.0.0.1:" in taken.stderr
    assert page.xpath("//figure[@data-chart]") == []

    # OpenSearch down (nothing listens on port 9): the frontier and the metrics index say so
    conf.write_text("frontier.backend: opensearch\nmetrics.opensearch: true\n"
                    "opensearch.addresses: 127.0.0.1:9\nopensearch.max.retries: 0\n"
                    f"owler.work.dir: {tmp_path}\n")
    served = owler_proc("dashboard", "--conf", str(conf), "--port", "0")
    shown = Lines(served)
    try:
        url = shown.wait_for(r"owler dashboard: (http://127\.0\.0\.1:\d+/)", 60).group(1)
        page = browser(url, tmp_path / "chrome", "dashboard-opensearch-down.png", 3000)
    finally:
        served.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0
    said = problems(page)
    assert len(said) == 2, said
    assert said[0].startswith("frontier: cannot use the frontier: ") and "127.0.0.1:9" in said[0]
    assert said[1].startswith("metrics: cannot read the OpenSearch index 'metrics' at "
                              "http://127.0.0.1:9")
