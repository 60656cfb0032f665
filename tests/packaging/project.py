"""Build the package, install the wheel into a fresh virtualenv, and make a new Django project
from the first tutorial's file blocks ("Gate your first tool"), read from its page itself."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial" / "01-first-tool.md"
# A fenced block whose info string names the file it goes to: ```python settings.py
BLOCK = re.compile(r"^```python (\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# Appended to the project's file; the others replace it or are new.
APPENDED = ("settings.py", "urls.py")


def run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command to completion, failing with its output if it fails."""
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs
    )  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def tutorial_blocks() -> dict[str, str]:
    """The tutorial's file blocks: file name -> code."""
    blocks = dict(BLOCK.findall(TUTORIAL.read_text()))
    assert set(blocks) == {
        "settings.py",
        "urls.py",
        "asgi.py",
        "celery.py",
        "__init__.py",
        "agents.py",
    }
    return blocks


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


def build(out: Path) -> Dist:
    """``python -m build``: the wheel and the sdist."""
    run(sys.executable, "-m", "build", "--outdir", out, REPO)
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    return Dist(wheel, sdist)


def install(wheel: Path, venv: Path) -> Path:
    """A fresh virtualenv with the wheel (and its dependencies) installed; its python."""
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--disable-pip-version-check", "-q", wheel)
    return python


def new_project(python: Path, where: Path) -> Path:
    """``django-admin startproject mysite`` with the tutorial's blocks applied."""
    where.mkdir()
    run(python.parent / "django-admin", "startproject", "mysite", where)
    package = where / "mysite"
    for name, code in tutorial_blocks().items():
        target = package / name
        if name in APPENDED:
            target.write_text(target.read_text() + "\n" + code)
        else:
            target.write_text(code)
    return where
