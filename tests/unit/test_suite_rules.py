"""The rules of the suite that a grep can keep (tests/README.md): no test skips or is expected to
fail, and no path of one machine's layout is written into the tests or the library: material
outside the repository is found through tests/material.py, relative to the clone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for folder in ("src", "tests", "bench", "topologies", "storm", "services")
           for p in sorted((ROOT / folder).rglob("*"))
           if p.suffix in (".py", ".sh", ".yaml", ".yml", ".json", ".java", ".clj", ".txt")
           and p.is_file() and "data" not in p.relative_to(ROOT).parts[:2]]
THIS = Path(__file__).resolve()

#: a quoted absolute path into a machine's own folders (/tmp and the system's paths are fine)
MACHINE_PATH = re.compile(r"""["'](/(?:work|home|root|Users|mnt|srv|media|opt/(?!homebrew))[/"'])""")
#: a skip or an expected failure, in any of pytest's spellings
SKIP = re.compile(r"pytest\.(?:skip|importorskip|xfail)\b|mark\.(?:skip|skipif|xfail)\b"
                  r"|unittest\.skip|raise\s+(?:unittest\.)?SkipTest")


def offending(pattern: re.Pattern, files: list[Path]) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
            for p in files if p != THIS
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if pattern.search(line)]


def test_the_walk_sees_the_sources():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"src/owler/conf.py", "tests/material.py", "tests/testdata.sh"} <= names


def test_no_machine_path_in_the_sources():
    assert MACHINE_PATH.search('SAMPLES = Path("/work/shared/testdata/html")')  # it would be seen
    assert not offending(MACHINE_PATH, SOURCES)


def test_no_test_skips_or_expects_to_fail():
    assert SKIP.search("@pytest.mark.skipif(not p.is_dir(), reason='x')")  # it would be seen
    assert not offending(SKIP, [p for p in SOURCES if p.parts[len(ROOT.parts)] == "tests"])
