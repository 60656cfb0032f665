"""The README and the manual link only inside the repository, the tutorial's settings block
defines each setting once, and the README stays a page."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\.\./shared|/work/|file:///")


def test_no_page_links_or_points_outside_the_repository():
    wrong = []
    for page in PAGES:
        if "_build" in page.parts or not page.exists():
            continue
        text = page.read_text()
        wrong += [f"{page.relative_to(REPO)}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:|#", target):
                continue  # a web address or an anchor of the page
            resolved = (page.parent / target.split("#")[0]).resolve()
            if not resolved.is_relative_to(REPO) or not resolved.exists():
                wrong.append(f"{page.relative_to(REPO)}: {target}")
    assert wrong == []


def test_the_tutorials_settings_block_defines_each_setting_once():
    text = (REPO / "docs" / "tutorial" / "01-first-tool.md").read_text()
    [block] = re.findall(r"^```python settings.py\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    names = [
        target.id
        for statement in ast.parse(block).body
        if isinstance(statement, ast.Assign)
        for target in statement.targets
        if isinstance(target, ast.Name)
    ]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_the_readme_is_a_page_and_the_manual_the_rest():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
