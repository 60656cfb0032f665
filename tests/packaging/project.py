"""Build the package, install the wheel into a fresh virtualenv, and make a new Django project
from the README's "Installing into a Django project" section, read from README.md itself."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Installing into a Django project"
# A fenced block whose info string names the file it goes to: ```python settings.py
BLOCK = re.compile(r"^```python (\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# Appended to the project's file; the others replace it or are new.
APPENDED = ("settings.py", "urls.py")

# The tiny agent the README's AGENT["AGENTS"] names: one action tool whose effect is a line in
# the file PARCEL_LOG names, so the test can count how often it ran.
AGENTS_PY = '''
import os
from pathlib import Path

from agent_core.agents import Agent
from agent_core.tools import ToolContext, tool


@tool(kind="action")
def ship_parcel(ctx: ToolContext, parcel: str) -> dict:
    """Ship a parcel."""
    with Path(os.environ["PARCEL_LOG"]).open("a") as log:
        log.write(f"{parcel} {ctx.tool_call_id}\\n")
    return {"shipped": parcel}


support_agent = Agent(name="support", tools=(ship_parcel,))
'''


def run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command to completion, failing with its output if it fails."""
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs
    )  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def readme_blocks() -> dict[str, str]:
    """The install section's file blocks: file name -> code."""
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = dict(BLOCK.findall(text[start:end]))
    assert set(blocks) == {"settings.py", "urls.py", "asgi.py", "celery.py", "__init__.py"}
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
    """``django-admin startproject mysite``, the README's blocks applied, the tiny agent added."""
    where.mkdir()
    run(python.parent / "django-admin", "startproject", "mysite", where)
    package = where / "mysite"
    for name, code in readme_blocks().items():
        target = package / name
        if name in APPENDED:
            target.write_text(target.read_text() + "\n" + code)
        else:
            target.write_text(code)
    (package / "agents.py").write_text(AGENTS_PY)
    return where
