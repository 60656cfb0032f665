#!/usr/bin/env python3
"""Run a command with a Chromium for the browser tests, finding or installing one first.

Usage:
    python scripts/browser.py run -- CMD [ARGS...]

In this order: Playwright's own Chromium if `playwright install` already put it in place; the
system's Chromium (`AIRLOCK_SYSTEM_CHROMIUM`, default /usr/bin/chromium, or `chromium` on the
PATH); on Debian as root, the system's after `apt-get install chromium`, as .ci/run installs it
(`AIRLOCK_APT_GET` names another apt-get); Playwright's own again after `playwright install
chromium` where it can download. CMD runs with `AIRLOCK_CHROMIUM` set to the browser's path. With
none of them it prints one line saying what to install and exits 1 before running anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_SYSTEM_CHROMIUM = "/usr/bin/chromium"
INSTALL_TIMEOUT = 600  # seconds: a download of about 150 MB


def playwright_chromium() -> str | None:
    """The Chromium `playwright install chromium` provides, if it is there."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        path = playwright.chromium.executable_path
    return path if Path(path).is_file() else None


def system_chromium() -> str | None:
    configured = os.environ.get("AIRLOCK_SYSTEM_CHROMIUM")
    if configured is not None:  # an explicit choice: no guessing beyond it
        return configured if os.access(configured, os.X_OK) else None
    if os.access(DEFAULT_SYSTEM_CHROMIUM, os.X_OK):
        return DEFAULT_SYSTEM_CHROMIUM
    return shutil.which("chromium")


def install_system_chromium() -> str | None:
    """Debian's Chromium through apt-get, where this process may install packages."""
    if not Path("/etc/debian_version").exists() or os.geteuid() != 0:
        return None
    print("browser: no Chromium found; trying `apt-get install chromium`", file=sys.stderr)
    apt_get = os.environ.get("AIRLOCK_APT_GET", "apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (["update", "-qq"], ["install", "-y", "-qq", "chromium"]):
        try:
            done = subprocess.run(
                [apt_get, *args],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
    return system_chromium()


def install_playwright_chromium() -> str | None:
    print("browser: no Chromium found; trying `playwright install chromium`", file=sys.stderr)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "playwright", "install", "chromium"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    return playwright_chromium() if done.returncode == 0 else None


def find_chromium() -> str | None:
    """A Chromium the browser tests can launch, installing Playwright's where it can."""
    return (
        playwright_chromium()
        or system_chromium()
        or install_system_chromium()
        or install_playwright_chromium()
    )


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[:2] != ["run", "--"]:
        print(__doc__, file=sys.stderr)
        return 2
    chromium = find_chromium()
    if chromium is None:
        print(
            "browser: the browser tests need Chromium: `apt-get install chromium` (Debian, as "
            "root), or "
            "`.venv/bin/python -m playwright install --with-deps chromium` with network access",
            file=sys.stderr,
        )
        return 1
    env = {**os.environ, "AIRLOCK_CHROMIUM": chromium}
    os.execvpe(argv[2], argv[2:], env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
