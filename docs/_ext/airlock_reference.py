"""The reference pages that the code is the source of, written as Markdown when the docs build
(a Sphinx extension: ``{airlock-reference} <what> [argument]`` puts one into a page).

Each ``*_markdown`` function reads one source (the settings dataclasses and their comments, the
check registry, the exception classes, the frame builders, the management commands' parsers,
the OpenAPI schema, the state machines' transition table, the signals) and returns the Markdown
that a directive of the same name puts in its page; ``tests/docs/`` reads the same functions, so
what is in the code and what the reference says cannot drift apart.

The descriptions follow one convention: a setting or a signal is described by the comment at the
end of its line, else by the comment lines directly above it. A setting without one is an error
(``MissingDescription``): the build fails, and so does the test.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import json
import re
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

APPS = ("agent_core", "approvals", "console")
REPO = Path(__file__).resolve().parents[2]


class MissingDescription(Exception):
    """Something the reference lists has no description in the code."""


# Comments as descriptions ------------------------------------------------------------------


# The code's comments cite the project's specification, which is not part of this manual.
SPEC_CITATION = re.compile(r"\s*\((SPEC §|guarantee \d)[^)]*\)")


def _public(text: str) -> str:
    """A comment or docstring as the reference says it: without citations of the spec."""
    return SPEC_CITATION.sub("", text)


def _comments(source: str) -> dict[int, str]:
    """Line number (1-based) -> the text of the comment on that line."""
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = _public(token.string.lstrip("#").strip())
    return found


def described_assignments(source: str, body: list[ast.stmt]) -> dict[str, str]:
    """Name -> description of each plain or annotated assignment in ``body`` (statements of
    ``source``): its line's trailing comment, else the comment lines directly above it."""
    comments = _comments(source)
    lines = source.splitlines()
    described: dict[str, str] = {}
    for statement in body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            name = statement.target.id
        elif (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            name = statement.targets[0].id
        else:
            continue
        first = statement.lineno
        trailing = comments.get(first) if not lines[first - 1].lstrip().startswith("#") else None
        if trailing:
            described[name] = trailing
            continue
        above: list[str] = []
        line = first - 1
        while line >= 1 and lines[line - 1].lstrip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        described[name] = " ".join(above)
    return described


def _class_body(cls: type) -> tuple[str, list[ast.stmt]]:
    source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return source, node.body
    raise LookupError(cls)


# Settings ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
    key: str
    type: str
    default: str
    description: str


def settings_of(cls: type) -> list[Setting]:
    """Every key of a settings dataclass, in declaration order, with its description (the
    comment convention above, read in the class that declares the key)."""
    descriptions: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            descriptions.update(described_assignments(*_class_body(klass)))
    defaults = cls()  # every key has a default; __post_init__ may complete one (THROTTLE_RATES)
    found = []
    for f in dataclasses.fields(cls):
        description = descriptions.get(f.name, "")
        if not description:
            raise MissingDescription(
                f"{cls.__module__}.{cls.__qualname__}.{f.name} has no description: add a "
                "comment at the end of its line or directly above it"
            )
        found.append(Setting(f.name, str(f.type), _show(getattr(defaults, f.name)), description))
    return found


def _show(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "(below)"
    return repr(value)


def _code(text: str) -> str:
    """``text`` as inline code in Markdown, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"{fence}{text}{fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_markdown(path: str) -> str:
    """A definition list: each key with its default and type, then its description."""
    parts = []
    for s in settings_of(_import(path)):
        parts.append(f"{_code(s.key)} · default {_code(s.default)} · {_code(s.type)}")
        parts.append(f": {s.description}\n")
    return "\n".join(parts)


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


# System checks -----------------------------------------------------------------------------


@dataclasses.dataclass
class Check:
    id: str
    level: str
    messages: list[str]
    hints: list[str]
    deploy: bool
    where: str


def _literal(node: ast.expr | None) -> str:
    """A message as written: the literal parts of an f-string, ``…`` for what is computed."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(v) if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal(node.left) + _literal(node.right)
    return "…"


def checks() -> dict[str, Check]:
    """Every check message id of the apps, from the modules of the functions in Django's check
    registry (a message may be built by a helper of the registered function)."""
    from django.core.checks.registry import registry

    deploy_modules = {f.__module__ for f in registry.deployment_checks}
    registered = registry.get_checks(include_deployment_checks=True)
    modules = sorted({f.__module__ for f in registered if f.__module__.split(".")[0] in APPS})
    found: dict[str, Check] = {}
    for name in modules:
        tree = ast.parse(inspect.getsource(importlib.import_module(name)))
        deploying = _deploy_functions(tree) if name in deploy_modules else set()
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            deploy = function.name in deploying
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    _add_check(found, node, node.func.id, deploy, f"{name}.{function.name}")
    return dict(sorted(found.items()))


def _deploy_functions(tree: ast.Module) -> set[str]:
    """The functions registered with ``deploy=True`` and the module's helpers they call (the
    MCP listing's messages are built by ``_check_server``)."""
    functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)]
    registered = [f for f in functions if _is_deploy(f)]
    called = {
        node.func.id
        for f in registered
        for node in ast.walk(f)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return {f.name for f in registered} | ({f.name for f in functions} & called)


def _is_deploy(function: ast.FunctionDef) -> bool:
    """Whether ``function`` is registered with ``@register(..., deploy=True)``."""
    return any(
        isinstance(d, ast.Call)
        and any(k.arg == "deploy" and getattr(k.value, "value", False) for k in d.keywords)
        for d in function.decorator_list
    )


def _add_check(
    found: dict[str, Check], node: ast.Call, level: str, deploy: bool, where: str
) -> None:
    keywords = {k.arg: k.value for k in node.keywords}
    ident = keywords.get("id")
    if not (isinstance(ident, ast.Constant) and isinstance(ident.value, str)):
        return
    check = found.setdefault(ident.value, Check(ident.value, level, [], [], deploy, where))
    message = _literal(node.args[0] if node.args else keywords.get("msg"))
    hint = _literal(keywords.get("hint"))
    if message not in check.messages:
        check.messages.append(message)
    if hint and hint not in check.hints:
        check.hints.append(hint)


def checks_markdown() -> str:
    """A definition list: each id with its level, then its messages and hints."""
    parts = []
    for check in checks().values():
        deploy = " · `check --deploy` only" if check.deploy else ""
        parts.append(f"`{check.id}` · {check.level}{deploy}")
        lines = [*check.messages, *(f"Hint: {hint}" for hint in check.hints)]
        parts.append(": " + "\n\n  ".join(_escape(line) for line in lines) + "\n")
    return "\n".join(parts)


def _escape(text: str) -> str:
    """``text`` as plain Markdown text: its characters that Markdown reads as markup escaped."""
    return re.sub(r"([\\`*_{}\[\]<>#|])", r"\\\1", text)


# Error codes -------------------------------------------------------------------------------


def _app_modules() -> Iterator[ModuleType]:
    """Every module of the apps (not their migrations, tests or management commands)."""
    for app in APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if "migrations" in parts or "management" in parts:
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield importlib.import_module(name)


def errors() -> dict[str, tuple[int, str, str]]:
    """Error code -> (HTTP status, default message, class) of every domain error."""
    from agent_core.exceptions import AgentCoreError

    for _ in _app_modules():
        pass  # imported, so that every subclass is known
    found: dict[str, tuple[int, str, str]] = {}
    pending: list[type[AgentCoreError]] = [AgentCoreError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        doc = inspect.cleandoc(cls.__doc__ or "")
        where = f"{cls.__module__}.{cls.__name__}"
        found.setdefault(cls.code, (int(cls.status_code), _public(" ".join(doc.split())), where))
    # DRF's own exceptions that the apps define (a request body over the limit).
    from rest_framework.exceptions import APIException

    drf: list[type[APIException]] = [APIException]
    while drf:
        exc = drf.pop()
        drf.extend(exc.__subclasses__())
        if exc.__module__.split(".")[0] in APPS:
            where = f"{exc.__module__}.{exc.__name__}"
            found.setdefault(
                exc.default_code, (int(exc.status_code), str(exc.default_detail), where)
            )
    return dict(sorted(found.items()))


def errors_markdown() -> str:
    rows = ["| Code | HTTP status | Message | Raised as |", "| --- | --- | --- | --- |"]
    for code, (status, message, where) in errors().items():
        rows.append(f"| `{code}` | {status} | {_cell(message)} | `{where}` |")
    return "\n".join(rows) + "\n"


# Stream frames -----------------------------------------------------------------------------


@dataclasses.dataclass
class FrameKind:
    kind: str
    fields: list[str]
    description: str
    where: str


def frames() -> dict[str, FrameKind]:
    """Every frame kind the apps write: each ``Frame("kind", {...})`` in their source, with the
    keys of its data and the docstring of the function that builds it."""
    found: dict[str, FrameKind] = {}
    for app in APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    kind = _frame_kind(node)
                    if kind is None:
                        continue
                    assert isinstance(node, ast.Call)
                    data = node.args[1] if len(node.args) > 1 else None
                    keys = _data_keys(function, data)
                    doc = _public(" ".join((ast.get_docstring(function) or "").split()))
                    where = f"{path.relative_to(REPO).with_suffix('')}".replace("/", ".")
                    frame = found.setdefault(kind, FrameKind(kind, [], "", where))
                    frame.fields += [k for k in keys if k not in frame.fields]
                    frame.description = frame.description or doc
    for frame in found.values():
        if not frame.description:
            raise MissingDescription(
                f"the frame kind {frame.kind!r} ({frame.where}) has no description: give the "
                "function that builds it a docstring"
            )
    return dict(sorted(found.items()))


def _data_keys(function: ast.AST, data: ast.expr | None) -> list[str]:
    """The keys of a frame's data: its dict literal's, or, for data built in a variable, those
    of the dict literals assigned to it and of the keys set on it."""
    if isinstance(data, ast.Dict):
        dicts = [data]
        set_on: list[ast.expr] = []
    elif isinstance(data, ast.Name):
        assigned = [n for n in ast.walk(function) if isinstance(n, ast.Assign | ast.AnnAssign)]
        dicts = [
            n.value
            for n in assigned
            if isinstance(n.value, ast.Dict)
            and any(
                _names(t, data.id) for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            )
        ]
        set_on = [
            t.slice
            for n in assigned
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Subscript) and _names(t.value, data.id)
        ]
    else:
        return []
    keys = [k for d in dicts for k in d.keys if k is not None] + set_on
    return [k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def _names(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _frame_kind(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    first = node.args[0]
    if name == "Frame" and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def frames_markdown() -> str:
    rows = ["| Kind | Data | Description |", "| --- | --- | --- |"]
    for frame in frames().values():
        data = ", ".join(f"`{k}`" for k in frame.fields) or "(none)"
        rows.append(f"| `{frame.kind}` | {data} | {_cell(frame.description)} |")
    return "\n".join(rows) + "\n"


# State machines ----------------------------------------------------------------------------


def state_diagram(model: str) -> str:
    """A Mermaid state diagram of ``Run`` or ``ToolCall`` from the table of
    ``agent_core.engine.state``."""
    from agent_core.choices import CallStatus, RunStatus
    from agent_core.engine import state

    table, first = {
        "Run": (state.RUN_ALLOWED, RunStatus.QUEUED),
        "ToolCall": (state.CALL_ALLOWED, CallStatus.PROPOSED),
    }[model]
    sources = {str(a) for a, _ in table}
    targets = {str(b) for _, b in table}
    lines = ["stateDiagram-v2", f"    [*] --> {first}"]
    lines += [f"    {a} --> {b}" for a, b in sorted((str(a), str(b)) for a, b in table)]
    lines += [f"    {s} --> [*]" for s in sorted(targets - sources)]
    return "\n".join(lines)


def state_markdown(model: str) -> str:
    return "```{mermaid}\n" + state_diagram(model) + "\n```\n"


# Management commands -----------------------------------------------------------------------


def commands() -> dict[str, str]:
    """``name subcommand`` -> its ``--help``, for every management command of the apps."""
    import argparse

    from django.core.management import get_commands, load_command_class

    found: dict[str, str] = {}
    for name, app in sorted(get_commands().items()):
        if app not in APPS:
            continue
        parser = load_command_class(app, name).create_parser("manage.py", name)
        found[name] = parser.format_help()
        for action in parser._actions:  # argparse keeps its subparsers only here
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    found[f"{name} {sub}"] = subparser.format_help()
    return found


def commands_markdown() -> str:
    parts = []
    for name, text in commands().items():
        parts.append(f"**`manage.py {name}`**\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


# REST --------------------------------------------------------------------------------------


def openapi() -> dict[str, Any]:
    """The OpenAPI document ``/agent/schema/`` serves (SSE streams included)."""
    from agent_core.api.generator import AirlockSchemaGenerator

    generator = AirlockSchemaGenerator()
    schema: dict[str, Any] = json.loads(json.dumps(generator.get_schema(None, public=True)))
    return schema


def rest_markdown() -> str:
    schema = openapi()
    parts = []
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            if method == "parameters":
                continue
            parts.append(f"**`{method.upper()} {path}`**\n")
            text = _public(" ".join((op.get("description") or op.get("summary") or "").split()))
            if text:
                parts.append(text + "\n")
            params = [
                f"`{p['name']}` ({p['in']}{', required' if p.get('required') else ''})"
                for p in op.get("parameters", [])
            ]
            if params:
                parts.append("Parameters: " + ", ".join(params) + ".\n")
            body = op.get("requestBody", {}).get("content", {})
            if body:
                parts.append("Body: " + ", ".join(_schema_name(c) for c in body.values()) + ".\n")
            answers = [
                f"{code} {_schema_name(next(iter(r.get('content', {}).values()), {}))}".rstrip()
                for code, r in op.get("responses", {}).items()
            ]
            parts.append("Answers: " + ", ".join(answers) + ".\n")
    names = sorted(schema.get("components", {}).get("schemas", {}))
    parts.append("Schemas: " + ", ".join(f"`{n}`" for n in names) + ".\n")
    return "\n".join(parts)


def _schema_name(content: dict[str, Any]) -> str:
    schema = content.get("schema", {})
    ref = schema.get("$ref") or schema.get("items", {}).get("$ref")
    if ref:
        return f"`{ref.rsplit('/', 1)[-1]}`" + (" list" if "items" in schema else "")
    return f"`{schema.get('type', 'object')}`" if schema else ""


# Signals -----------------------------------------------------------------------------------


def signals() -> dict[str, str]:
    """Signal name -> its description, from the comments of ``agent_core.signals``."""
    module = importlib.import_module("agent_core.signals")
    source = inspect.getsource(module)
    described = described_assignments(source, ast.parse(source).body)
    missing = [name for name, text in described.items() if not text]
    if missing:
        raise MissingDescription(f"agent_core.signals: {missing} have no description")
    return described


def signals_markdown() -> str:
    rows = ["| Signal | Arguments and meaning |", "| --- | --- |"]
    for name, text in signals().items():
        rows.append(f"| `agent_core.signals.{name}` | {_cell(text)} |")
    return "\n".join(rows) + "\n"


GENERATORS: dict[str, Callable[..., str]] = {
    "settings": settings_markdown,
    "checks": checks_markdown,
    "errors": errors_markdown,
    "frames": frames_markdown,
    "state-diagram": state_markdown,
    "commands": commands_markdown,
    "rest": rest_markdown,
    "signals": signals_markdown,
}


class ReferenceDirective(SphinxDirective):
    """``{airlock-reference} settings agent_core.conf.AgentSettings`` and the like."""

    required_arguments = 1
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        generate = GENERATORS[self.arguments[0]]
        try:
            text: str = generate(*self.arguments[1:])
        except MissingDescription as exc:
            raise self.error(str(exc)) from exc
        # Read again whenever the code changes: the generators read the apps' sources.
        self.env.note_dependency(__file__)
        for app in APPS:
            for path in (REPO / app).rglob("*.py"):
                self.env.note_dependency(str(path))
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines()), self.content_offset, container)
        return list(container.children)


def _public_docstring(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """autodoc's docstrings, as the reference says them (``_public``)."""
    lines[:] = [_public(line) for line in lines]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("airlock-reference", ReferenceDirective)
    app.connect("autodoc-process-docstring", _public_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
