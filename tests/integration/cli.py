"""Run the `owler` command as a user would, from the project's root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWLER = [sys.executable, "-m", "owler"]


def owler(*args, check=True, timeout=600):
    proc = subprocess.run(OWLER + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OWLER_HOME": str(ROOT)})
    if check and proc.returncode != 0:
        raise AssertionError(f"owler {args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def farm_conf(work: Path, network: str, *lines: str) -> Path:
    """``work/conf.yaml`` for a crawl of a loopback farm on the embedded frontier: the frontier
    and the work folder in ``work``, the farm's ``network`` the one the crawl may reach, 0.1 s
    between two fetches of a host; ``lines`` (``key: value``) added."""
    conf = work / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
                    f"owler.work.dir: {work}\n"
                    f"http.allowed.networks: [{network}]\n"
                    "fetcher.server.delay: 0.1\n" + "".join(f"{line}\n" for line in lines))
    return conf


def host_only_urlfilters(work: Path) -> str:
    """The shipped URL filters with each page's links kept to its own host
    (``HostURLFilter.ignoreOutsideHost``), written to ``work``; the conf line that names them.
    For farms of real material whose links lead to the web, which is not on loopback."""
    from owler.conf import resource_path

    chain = json.loads(resource_path("urlfilters.json").read_text())
    for f in chain["org.apache.stormcrawler.filtering.URLFilters"]:
        if f["name"] == "HostURLFilter":
            f["params"]["ignoreOutsideHost"] = True
    path = work / "urlfilters.json"
    path.write_text(json.dumps(chain))
    return f"urlfilters.config.file: {path}"
