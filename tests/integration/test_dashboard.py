"""The crawl dashboard in a real browser (Debian's headless Chromium): during a real crawl of the
loopback farm on Storm (served by `owler run`, which prints its address) and after it (served by
`owler dashboard`), its figures against `owler status --json`, each chart drawn with data (data
points and pixels in the series' colours, which dashboard.js counts after uPlot drew), and the
page's plain words for bad input. Screenshots are kept in .work/artifacts/."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import lxml.html
import orjson
import pytest

from tests.farm.harness import FarmProcess
from tests.integration import cli

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".work" / "artifacts"
BROWSER = "chromium-headless-shell"

pytestmark = pytest.mark.integration


def browser(url: str, profile: Path, shot: str | None = None, budget_ms: int = 8000):
    """The page's DOM once its scripts ran (and a screenshot into ARTIFACTS when ``shot``)."""
    exe = shutil.which(BROWSER)
    assert exe, f"{BROWSER} is missing: make setup installs it (Makefile APT_PACKAGES)"
    base = [exe, "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--window-size=1280,2600",
            f"--virtual-time-budget={budget_ms}"]
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    if shot:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        out = ARTIFACTS / shot
        done = subprocess.run(base + [f"--screenshot={out}", url], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and out.stat().st_size > 10000, done.stderr[-2000:]
    return lxml.html.fromstring(dom.stdout)


def figures(page) -> dict[str, int]:
    return {td.get("data-figure"): int(td.text_content()) for td in page.xpath("//td[@data-figure]")}


def charts(page) -> dict[str, tuple[int, int]]:
    """Chart id → (data points, pixels in its series' colours)."""
    return {f.get("data-chart"): (int(f.get("data-points", "0")), int(f.get("data-ink", "0")))
            for f in page.xpath("//figure[@data-chart]")}


def problems(page) -> list[str]:
    return [li.text_content() for li in page.xpath("//ul[@id='problems']/li")]


class Lines:
    """A process's output lines, read on a thread (its pipe never fills)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines, self.q = proc, [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

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
    finally:
        served.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0
    assert after.body.get("data-live") == "0" and problems(after) == []
    assert figures(after) == {k: expected[k] for k in figures(after)}
    assert expected["FETCHED"] >= 10
    drawn = charts(after)
    assert set(drawn) == {"pages", "http", "errors", "frontier", "queues", "delayed", "bytes",
                          "latency", "failed"}
    for chart, (points, ink) in drawn.items():
        assert points > 1 and ink > 50, (chart, drawn)
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
