"""Where the tests find the real material that the repository does not hold, and a failure that
names it when it is missing (never a skip, never a silently smaller test).

Two places, both outside the repository's tracked files:

- ``.work/testdata/``: files from registry packages whose licence does not let the project copy
  them, fetched by ``make setup`` (``tests/testdata.sh``);
- ``../shared/testdata/``: the workplace's reference material beside the clone (repositories'
  fixtures that are read in place and never copied: ``../shared/testdata/README.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FETCHED = ROOT / ".work" / "testdata"
SHARED = ROOT.parent / "shared" / "testdata"


def _folder(path: Path, pattern: str, what: str) -> Path:
    if not path.is_dir():
        pytest.fail(f"{path} is missing: {what}", pytrace=False)
    if not any(path.glob(pattern)):
        pytest.fail(f"{path} holds no {pattern}: {what}", pytrace=False)
    return path


def fetched(*parts: str, pattern: str = "*") -> Path:
    """The folder ``.work/testdata/<parts>``, which must hold files matching ``pattern``."""
    return _folder(FETCHED.joinpath(*parts), pattern,
                   "run `make setup` (tests/testdata.sh fetches it from the package registry)")


def shared(*parts: str, pattern: str = "*") -> Path:
    """The folder ``../shared/testdata/<parts>`` beside the clone, which must hold files matching
    ``pattern``."""
    return _folder(SHARED.joinpath(*parts), pattern,
                   "these tests read the workplace's reference material in place; clone the "
                   "repository beside the shared/ folder (as CI does) so that ../shared/testdata "
                   "is there")
