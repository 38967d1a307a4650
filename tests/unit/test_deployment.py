"""docs/DEPLOYMENT.md checked against what it documents: config.json's ``_prod_example`` is an env
streamparse can submit with, every topology has the virtualenv spec ``sparse submit`` builds on
each worker, pinned as the project's own virtualenv, and every crawler key the document names is a
key of resources/crawler-conf.yaml."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# (paramiko, which streamparse imports, warns of a cipher it still names)
pytestmark = pytest.mark.filterwarnings("ignore:TripleDES has been moved")
DOC = (ROOT / "docs" / "DEPLOYMENT.md").read_text()
#: keys of Storm itself (storm.yaml or the topology conf), and StormCrawler's that are named only
#: to say which of ours stands for them
NOT_OURS = ("topology.", "storm.", "nimbus.", "supervisor.", "worker.", "blacklist.scheduler.", "es.",
            "okhttp.")  # okhttp.*: StormCrawler's names, read only when ours are absent


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and "==" in line:
            name, version = line.split("==", 1)
            out[_norm(name.strip())] = version.strip()
    return out


@pytest.fixture(scope="module")
def prod_env():
    """config.json with its example moved under envs as "prod", as the document says to."""
    config = json.loads((ROOT / "config.json").read_text())
    config["envs"]["prod"] = config.pop("_prod_example")
    from streamparse.util import get_env_config

    return get_env_config("prod", io.StringIO(json.dumps(config)))[1]


def test_the_prod_example_is_an_env_streamparse_submits_with(prod_env, monkeypatch):
    from streamparse.util import get_nimbus_host_port, get_storm_workers

    monkeypatch.delenv("STREAMPARSE_NIMBUS", raising=False)
    host, port = get_nimbus_host_port(prod_env)
    assert host and host not in ("127.0.0.1", "localhost") and port == 6627
    workers = get_storm_workers(prod_env)
    assert len(workers) >= 2 and "127.0.0.1" not in workers
    # the virtualenv built over SSH on every worker and used by the components
    assert prod_env["use_virtualenv"] and prod_env["install_virtualenv"]
    assert prod_env["virtualenv_root"].startswith("/") and prod_env["user"]
    assert prod_env["options"]["topology.workers"] >= 2


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_distributions() -> set[str]:
    """The distributions of every module ``src/`` and ``topologies/`` import (but owler)."""
    from importlib import metadata

    modules = set()
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "topologies").glob("*.py")]:
        modules.update(re.findall(r"^\s*(?:import|from) ([A-Za-z_]\w*)", path.read_text(), re.M))
    owners = metadata.packages_distributions()
    return {_norm(d) for m in modules for d in owners.get(m, ())} - {"owler"}


def runtime_distributions(start: set[str]) -> set[str]:
    """``start`` and all the distributions they require in turn (markers evaluated for this
    Python; extras left out)."""
    from importlib import metadata

    from packaging.markers import Marker

    todo = list(start)
    seen: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        for req in metadata.requires(dist) or ():
            name, _, marker = req.partition(";")
            if marker and not Marker(marker).evaluate({"extra": ""}):
                continue
            todo.append(_norm(re.match(r"[A-Za-z0-9_.-]+", name).group(0)))
    return seen - {"owler"}


def test_the_package_declares_what_it_imports():
    # pip install of the owler package alone brings every distribution its code imports
    declared = runtime_distributions({"owler"})
    missing = sorted(imported_distributions() - declared)
    assert not missing, missing


def test_every_topology_has_the_virtualenv_sparse_submit_builds():
    requirements = pins(ROOT / "requirements.txt")
    # the components on a worker import owler (in the topology jar) and what it requires
    needed = runtime_distributions(imported_distributions() | {"owler"})
    assert {"streamparse", "brotli", "boto3", "numpy"} <= needed  # (the walk found imports)
    for topology in sorted(p.stem for p in (ROOT / "topologies").glob("*.py")
                           if not p.stem.startswith("_")):
        spec = ROOT / "virtualenvs" / f"{topology}.txt"
        assert spec.is_file(), f"no {spec.relative_to(ROOT)} for sparse submit"
        got = {_norm(k): v for k, v in pins(spec).items()}
        # everything a component imports, pinned as in the project's own virtualenv, and
        # nothing else (every worker installs it: the test runner has no place there)
        missing = sorted(needed - set(got))
        assert not missing, (topology, missing)
        extra = sorted(set(got) - needed)
        assert not extra, (topology, extra)
        differ = {k: (v, requirements[k]) for k, v in got.items()
                  if k in requirements and requirements[k] != v}
        assert not differ, (topology, differ)


def test_every_crawler_key_the_document_names_exists():
    defaults = yaml.safe_load((ROOT / "resources" / "crawler-conf.yaml").read_text())
    named = set(re.findall(r"`([a-z0-9_]+(?:\.[A-Za-z0-9_]+)+)`", DOC))
    ours = sorted(k for k in named if not k.startswith(NOT_OURS) and not k.endswith(
        (".json", ".md", ".py", ".txt", ".yaml")))
    assert len(ours) >= 15, ours  # the document speaks of the crawler's keys
    unknown = [k for k in ours if k not in defaults]
    assert not unknown, unknown
