"""`make test` finds a browser before it runs anything (scripts/browser.py), or stops with one
line saying what to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "browser.py"
PRINT_IT = [sys.executable, "-c", "import os; print('ran with', os.environ['AIRLOCK_CHROMIUM'])"]


# apt-get, the edge we do not own: a stand-in that logs its arguments and, on ``install``, puts an
# executable where the system's Chromium is looked for (or fails, with FAIL set).
FAKE_APT_GET = """#!/bin/sh
echo "$@" >> "$APT_LOG"
[ -n "$FAIL" ] && exit 100
if [ "$1" = install ]; then
    printf '#!/bin/sh\\n' > "$AIRLOCK_SYSTEM_CHROMIUM" && chmod +x "$AIRLOCK_SYSTEM_CHROMIUM"
fi
"""


def _run(
    tmp_path: Path, system_chromium: str, *, apt_fails: bool = True
) -> subprocess.CompletedProcess[str]:
    apt_get = tmp_path / "apt-get"
    apt_get.write_text(FAKE_APT_GET)
    apt_get.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AIRLOCK_SYSTEM_CHROMIUM": system_chromium,
        "AIRLOCK_APT_GET": str(apt_get),
        "APT_LOG": str(tmp_path / "apt.log"),
        **({"FAIL": "1"} if apt_fails else {}),
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


@pytest.mark.skipif(
    not Path("/etc/debian_version").exists() or os.geteuid() != 0, reason="Debian, as root"
)
def test_on_debian_as_root_it_installs_chromium_with_apt_get_as_ci_does(tmp_path):
    chromium = tmp_path / "chromium"
    done = _run(tmp_path, str(chromium), apt_fails=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ran with {chromium}\n"
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq",
        "install -y -qq chromium",
    ]


def test_without_any_browser_it_stops_before_running_anything_with_one_line(tmp_path):
    done = _run(tmp_path, str(tmp_path / "no-chromium-here"))
    assert done.returncode == 1 and done.stdout == ""
    *tried, last = done.stderr.strip().splitlines()
    assert tried[-1] == "browser: no Chromium found; trying `playwright install chromium`"
    assert "apt-get install chromium" in last and "playwright install" in last
