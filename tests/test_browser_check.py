"""`make test` finds a browser before it runs anything (scripts/browser.py), or stops with one
line saying what to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "browser.py"
PRINT_IT = [sys.executable, "-c", "import os; print('ran with', os.environ['AIRLOCK_CHROMIUM'])"]


def _run(tmp_path: Path, system_chromium: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AIRLOCK_SYSTEM_CHROMIUM": system_chromium,
        # Playwright's own Chromium: none in this empty directory, and no download possible.
        "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "browsers"),
        "PLAYWRIGHT_DOWNLOAD_HOST": "http://127.0.0.1:9",
    }
    command = [sys.executable, str(SCRIPT), "run", "--", *PRINT_IT]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_the_system_chromium_is_used_when_playwright_has_none(tmp_path):
    done = _run(tmp_path, "/usr/bin/chromium")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran with /usr/bin/chromium\n"


def test_without_any_browser_it_stops_before_running_anything_with_one_line(tmp_path):
    done = _run(tmp_path, str(tmp_path / "no-chromium-here"))
    assert done.returncode == 1 and done.stdout == ""
    *tried, last = done.stderr.strip().splitlines()
    assert tried == ["browser: no Chromium found; trying `playwright install chromium`"]
    assert "apt-get install chromium" in last and "playwright install" in last
