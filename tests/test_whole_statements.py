"""Every named statement is whole (issue 37): its text is fixed once its module is imported, never
filled in at run time. No statement of ``agent_core.engine.sql`` or ``approvals.sql`` holds a
``str.format`` placeholder (``{keys}``), and no module of the apps calls ``.format`` on a name
of a ``sql`` module, nor does a ``sql`` module itself (where a statement is written out, once,
from f-strings). Nor is a query the ORM compiled pasted into another."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from agent_core.engine import sql as core_sql
from approvals import sql as approvals_sql

ROOT = Path(__file__).resolve().parents[1]
APPS = ("agent_core", "approvals", "console")
SQL_MODULES = (core_sql, approvals_sql)
_PLACEHOLDER = re.compile(r"\{\w*\}")


def _texts(value: object) -> Iterator[str]:
    """The strings of a module's value: a statement, or the statements of a dict or tuple."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _texts(item)


def _statements(module: ModuleType) -> Iterator[tuple[str, str]]:
    for name, value in vars(module).items():
        if name.lstrip("_").isupper():
            for text in _texts(value):
                yield name, text


def test_no_statement_holds_a_placeholder():
    found = [
        f"{module.__name__}.{name}: {_PLACEHOLDER.findall(text)}"
        for module in SQL_MODULES
        for name, text in _statements(module)
        if _PLACEHOLDER.search(text)
    ]
    assert found == []
    assert "DECIDABLE_PAGES" in {name for name, _ in _statements(approvals_sql)}  # dicts read


def _sql_names(tree: ast.Module) -> set[str]:
    """The names a module binds to a ``sql`` module or to a name imported from one."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            from_sql = (node.module or "").split(".")[-1] == "sql"
            for alias in node.names:
                if from_sql or alias.name == "sql":
                    names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name.endswith(".sql")}
    return names


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def formatted_statements(paths: list[Path]) -> list[str]:
    """Where ``paths`` call ``.format`` on a statement: on a name of a ``sql`` module anywhere,
    on anything inside a ``sql`` module."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text())
        names = _sql_names(tree)
        in_sql = path.name == "sql.py"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "format"
                and (in_sql or _root(node.func.value) in names)
            ):
                found.append(f"{path}:{node.lineno}")
    return found


def test_no_statement_is_formatted_at_run_time():
    paths = [path for app in APPS for path in (ROOT / app).rglob("*.py")]
    assert formatted_statements(paths) == []


def test_the_check_finds_a_formatted_statement(tmp_path):
    module = tmp_path / "pending.py"
    module.write_text(
        "from . import sql\nfrom .sql import ROWS as R\n"
        "a = sql.PENDING_ROWS.format(keys='')\nb = R.format(order='')\nc = '{}'.format(1)\n"
    )
    own = tmp_path / "sql.py"
    own.write_text("A = '{c}.id'\nB = A.format(c='x')\n")
    found = formatted_statements([module, own])
    assert [f.rsplit(":", 1)[1] for f in found] == ["3", "4", "2"]


def test_no_compiled_query_is_spliced_into_sql():
    """The ORM's compiled text is never pasted into another statement (``sql_with_params()``
    inside a ``RawSQL`` or a template): a query the ORM builds, it runs."""
    paths = [path for app in APPS for path in (ROOT / app).rglob("*.py")]
    found = [
        f"{path}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "sql_with_params(" in line or "RawSQL(" in line
    ]
    assert found == []
