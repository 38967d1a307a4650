"""`owler run` on bad input and failures: clear messages and exit codes, never a hang."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def owler(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "owler", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, **kw)


def conf_file(tmp_path, extra=""):
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {tmp_path / 'f.sqlite'}\nwarc.dir: {tmp_path / 'warc'}\n"
                    f"owler.work.dir: {tmp_path}\n{extra}")
    return conf


def test_unknown_topology_and_bad_yaml(tmp_path):
    r = owler("run", "nosuch")
    assert r.returncode == 2 and "unknown topology 'nosuch'" in r.stderr and "explorative" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    r = owler("run", "explorative", "--conf", str(bad))
    assert r.returncode == 2 and "invalid YAML" in r.stderr
    r = owler("inject", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "missing.txt" in r.stderr


@pytest.mark.parametrize("topology", ["explorative", "sitemap"])
def test_a_bad_fetcher_key_is_refused_before_storm_starts(tmp_path, topology):
    r = owler("run", topology, "--conf", str(conf_file(tmp_path)), "-o", "fetcher.queue.mode=byPlanet",
              timeout=120)
    assert r.returncode == 2, r.stderr
    assert "configuration error: fetcher.queue.mode" in r.stderr and "byPlanet" in r.stderr
    # the same for a cluster submission, before it even looks for the cluster
    r = owler("cluster", "submit", topology, "--conf", str(conf_file(tmp_path)),
              "-o", "http.allowed.networks=[10.0.0.0/33]", timeout=120)
    assert r.returncode == 2, r.stderr
    assert "configuration error: http.allowed.networks" in r.stderr and "10.0.0.0/33" in r.stderr


def test_missing_java_is_a_clear_error(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "JAVA_HOME": ""}
    r = subprocess.run(["/usr/bin/env", "-u", "JAVA_HOME", "PATH=/nonexistent", sys.executable,
                        "-m", "owler", "run", "explorative", "--conf", str(conf_file(tmp_path))],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 3 and "Java was not found" in r.stderr


def test_a_component_that_dies_ends_the_run_naming_it(tmp_path):
    conf = conf_file(tmp_path, "urlfilters.config.file: /nonexistent/urlfilters.json\n")
    # --time 600: without the death the run would end idle (exit 0) or at its time limit
    r = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "60", "--time", "600",
              timeout=900)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    # both load the chain: the URL filter bolt (redirects) and the parser (its own outlinks)
    assert "the topology failed" in r.stderr
    assert re.search(r"component '(urlfilter|parser)'", r.stderr), r.stderr
    assert "owler-console.log" in r.stderr
    assert "stopped (idle" not in r.stdout and "time limit" not in r.stdout, r.stdout[-2000:]
    assert "nonexistent/urlfilters.json" in (tmp_path / "logs" / "owler-console.log").read_text()


def test_ctrl_c_stops_cleanly(tmp_path):
    conf = conf_file(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "owler", "run", "explorative", "--conf",
                             str(conf), "--idle-exit", "600"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the spout's first stats file",
                 lambda: list((tmp_path / "run" / "explorative").glob("spout-*.json")), 240, 0.5)
    finally:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, err
    assert "stopping (interrupted)" in out and "stopped (interrupted)" in out
