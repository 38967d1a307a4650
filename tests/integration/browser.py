"""The dashboard page in Debian's headless Chromium (test_dashboard.py, test_cluster.py): the DOM
once its scripts ran, read through the data attributes resources/dashboard/dashboard.js sets, and
screenshots kept as test artefacts in .work/artifacts/."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import lxml.html

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".work" / "artifacts"
BROWSER = "chromium-headless-shell"


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
