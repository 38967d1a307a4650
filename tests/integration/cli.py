"""Run the `owler` command as a user would, from the project's root."""

from __future__ import annotations

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
