"""The transition table against SPEC §4, and the one helper that writes a status."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from agent_core.choices import CALL_TERMINAL, RUN_TERMINAL, CallStatus, QueuedStatus, RunStatus
from agent_core.engine import calls, sql, state
from agent_core.engine.leases import Lease
from agent_core.exceptions import InvalidTransition
from agent_core.models import Run, Thread, ToolCall
from tests.conftest import ALICE, REFUND, calls_of

R, C = RunStatus, CallStatus

# SPEC §4, "Run", each allowed move with the words it comes from.
SPEC_RUN = {
    (R.QUEUED, R.RUNNING): "queued → running",
    (R.RUNNING, R.WAITING): "running ⇄ waiting (waiting = parked on a person; no worker held)",
    # A parked run holds no worker (§12): resumed, it is queued for a driver, which runs it.
    (R.WAITING, R.QUEUED): "running ⇄ waiting",
    (R.RUNNING, R.COMPLETED): "→ completed",
    (R.QUEUED, R.FAILED): "→ failed",
    (R.RUNNING, R.FAILED): "→ failed",
    (R.WAITING, R.FAILED): "→ failed (§5.10: a dead run poisons nothing)",
    (R.RUNNING, R.CANCELLING): "A run being stopped passes through cancelling",
    (R.CANCELLING, R.CANCELLED): "A run being stopped passes through cancelling",
    (R.QUEUED, R.CANCELLED): "→ cancelled",
    (R.RUNNING, R.CANCELLED): "→ cancelled (no driver holds it: settled at once)",
    (R.WAITING, R.CANCELLED): "→ cancelled (§5.11: settles a parked run at once)",
}

# SPEC §4, "ToolCall": the diagram, the paragraph under it, and §5.10 / §5.11 / §6.
SPEC_CALL = {
    (C.PROPOSED, C.APPROVED): "proposed ──read / not required / remembered──▶ approved",
    (C.PROPOSED, C.PENDING_APPROVAL): "├─action, approval required──▶ pending_approval",
    (C.PROPOSED, C.PENDING_INPUT): "├─human tool──▶ pending_input",
    (C.PROPOSED, C.REFUSED): "└─preflight──▶ refused (reason to the model)",
    (C.PROPOSED, C.SUCCEEDED): "└─preflight──▶ … | succeeded (already done, no effect)",
    # §6: an unknown tool or invalid arguments are a tool error the model sees, never a run.
    (C.PROPOSED, C.FAILED): "(§6) invalid calls become errors, never executions",
    (C.APPROVED, C.EXECUTING): "approved ─claim─▶ executing",
    (C.EXECUTING, C.SUCCEEDED): "executing ─▶ succeeded",
    (C.EXECUTING, C.FAILED): "└──▶ failed",
    (C.EXECUTING, C.IN_DOUBT): "└─crash──▶ in_doubt",
    (C.PENDING_APPROVAL, C.APPROVED): "pending_approval ─approve─┘",
    (C.PENDING_APPROVAL, C.REJECTED): "├─reject──▶ rejected",
    (C.PENDING_APPROVAL, C.EXPIRED): "├─ttl────▶ expired",
    (C.PENDING_APPROVAL, C.FAILED): "├─run dies─▶ failed",
    (C.PENDING_APPROVAL, C.CANCELLED): "└─cancel──▶ cancelled",
    (C.PENDING_INPUT, C.SUCCEEDED): "pending_input ─answer─▶ succeeded",
    (C.PENDING_INPUT, C.REJECTED): "─skip─▶ rejected",
    (C.PENDING_INPUT, C.FAILED): "(§5.10) its pending calls become failed",
    (C.PENDING_INPUT, C.CANCELLED): "(§5.11) its pending calls become cancelled",
    (C.IN_DOUBT, C.SUCCEEDED): "in_doubt: recover() decides, or a person marks it done",
    (C.IN_DOUBT, C.APPROVED): "in_doubt: … or not done (it runs again)",
    (C.IN_DOUBT, C.PENDING_APPROVAL): '(§5.5) approval_scope = "attempt": a fresh approval',
    (C.APPROVED, C.SUCCEEDED): "a read call goes approved → succeeded | failed",
    (C.APPROVED, C.FAILED): "a read call goes approved → succeeded | failed",
    (C.APPROVED, C.REFUSED): "the second preflight … may move an approved call to refused",
    (C.APPROVED, C.CANCELLED): "(§5.11) stops a run … before tools are dispatched",
    (C.EXECUTING, C.CANCELLED): "(§14) a delegation call … settles with the child's outcome",
    (C.PENDING_APPROVAL, C.SUPERSEDED): "(§17) a newer proposal supersedes older pending ones",
}


def test_the_run_table_is_spec_4():
    assert state.RUN_ALLOWED == set(SPEC_RUN)


def test_the_call_table_is_spec_4():
    assert state.CALL_ALLOWED == set(SPEC_CALL)


@pytest.mark.parametrize(
    ("table", "statuses", "terminal"),
    [(state.RUN_ALLOWED, RunStatus, RUN_TERMINAL), (state.CALL_ALLOWED, CallStatus, CALL_TERMINAL)],
)
def test_terminal_statuses_are_left_never_and_every_other_is_reached(table, statuses, terminal):
    sources = {source for source, _ in table}
    targets = {target for _, target in table}
    assert not sources & terminal
    assert sources | targets == set(statuses)
    assert set(statuses) - targets <= {RunStatus.QUEUED, CallStatus.PROPOSED}  # the first


@pytest.mark.parametrize(
    ("model", "source", "target"),
    [
        (Run, R.COMPLETED, R.RUNNING),
        (Run, R.WAITING, R.COMPLETED),
        (Run, R.CANCELLING, R.FAILED),
        (ToolCall, C.REJECTED, C.APPROVED),
        (ToolCall, C.PENDING_APPROVAL, C.EXECUTING),
        (ToolCall, C.EXECUTING, C.APPROVED),
    ],
)
def test_a_pair_not_in_the_table_raises(model, source, target):
    with pytest.raises(InvalidTransition):
        state.check(model, source, target)


def test_sources_of_reads_the_table():
    assert state.sources_of(Run, R.COMPLETED) == {R.RUNNING}
    assert state.sources_of(Run, R.CANCELLED) == {R.QUEUED, R.RUNNING, R.WAITING, R.CANCELLING}


@pytest.mark.django_db
def test_an_invalid_transition_writes_nothing(turn):
    run = turn(REFUND)  # waiting on the refund's approval
    [call] = calls_of(run)
    with pytest.raises(InvalidTransition):
        state.transition(ToolCall.objects.filter(pk=call.pk), C.PENDING_APPROVAL, C.EXECUTING)
    with pytest.raises(InvalidTransition):
        state.transition(Run.objects.filter(pk=run.pk), R.WAITING, R.COMPLETED)
    assert ToolCall.objects.get(pk=call.pk).status == C.PENDING_APPROVAL
    assert Run.objects.get(pk=run.pk).status == R.WAITING


@pytest.mark.django_db
def test_a_lost_compare_and_set_moves_nothing_and_says_so(turn):
    run = turn(REFUND)
    [call] = calls_of(run)
    rows = ToolCall.objects.filter(pk=call.pk)
    assert state.transition(rows, C.PENDING_APPROVAL, C.REJECTED, reason="no") == 1
    # A second decision raced the first: its source is gone, it moves nothing.
    assert state.transition(rows, C.PENDING_APPROVAL, C.APPROVED) == 0
    assert ToolCall.objects.get(pk=call.pk).status == C.REJECTED


@pytest.mark.django_db
def test_a_row_that_keeps_its_status_is_not_a_transition():
    thread = Thread.objects.create(owner_ref=ALICE.ref, agent="support")
    run = Run.objects.create(thread=thread, agent="support", actor_ref=ALICE.ref, runner="inline")
    Run.objects.filter(pk=run.pk).update(status=R.RUNNING)
    rows = Run.objects.filter(pk=run.pk)
    assert state.transition(rows, [R.QUEUED, R.RUNNING], R.RUNNING, lease_owner="w") == 1


def _root_name(node: ast.expr) -> str:
    while isinstance(node, ast.Call | ast.Attribute):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def test_no_status_is_written_around_the_helper():
    """No ``Run.objects…update(status=…)`` / ``ToolCall.objects…update(status=…)`` in the apps
    but the one in ``state.transition``."""
    root = Path(__file__).resolve().parents[2]
    found = []
    for app in ("agent_core", "approvals", "console"):
        for path in (root / app).rglob("*.py"):
            if "migrations" in path.parts or path == root / "agent_core" / "engine" / "state.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "update"
                    and any(k.arg == "status" for k in node.keywords)
                    and _root_name(node.func.value) in ("Run", "ToolCall")
                ):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


# An UPDATE of the run or tool-call table (or an INSERT into one that updates on a conflict)
# whose SET writes ``status``: ``status = …``, or ``(…, status, …) = …``.
_STATUS_SQL = re.compile(
    r'(?:UPDATE\s+"?(?:agent_core_run|agent_core_toolcall)"?\b'
    r'|INSERT\s+INTO\s+"?(?:agent_core_run|agent_core_toolcall)"?\b(?:(?!;).)*?\bDO\s+UPDATE\b)'
    r"(?:(?!\bWHERE\b).)*\bSET\b(?:(?!\bWHERE\b).)*"
    r"(?:\bstatus\s*=|\(\s*(?:\w+\s*,\s*)*status\s*[,)])",
    re.IGNORECASE | re.DOTALL,
)
# The same in a fragment: ``SET status =``, ``, status =``, ``SET (…, status, …)``.
_STATUS_FRAGMENT = re.compile(
    r"(?:\bSET\b|,)\s*status\s*=|\bSET\s*\(\s*(?:\w+\s*,\s*)*status\s*[,)]", re.IGNORECASE
)
_APPS = ("agent_core", "approvals", "console")
_ROOT = Path(__file__).resolve().parents[2]
_TERMINAL = {Run: RUN_TERMINAL, ToolCall: CALL_TERMINAL}


def _writes_status(text: str) -> bool:
    """Whether ``text`` is SQL that writes a Run or ToolCall status."""
    return bool(_STATUS_SQL.search(text))


def _sources(root: Path = _ROOT) -> list[Path]:
    """Every module of the apps (SQL modules included), but migrations."""
    return [
        path
        for app in _APPS
        for path in sorted((root / app).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(_ROOT).with_suffix("").parts).removesuffix(".__init__")


def _strings_of(name: str, value: object, depth: int = 0) -> dict[str, str]:
    """The strings a module-level value is or holds, by name: in tuples (named ones too),
    lists, sets, a dict's values and a dataclass's fields (``NAME[key]``, ``NAME.field``)."""
    if isinstance(value, str):
        return {name: value}
    if depth > 3:
        return {}
    found: dict[str, str] = {}
    if isinstance(value, dict):
        items = [(f"{name}[{key!r}]", item) for key, item in value.items()]
    elif isinstance(value, tuple | list | set | frozenset):
        items = [(f"{name}[{i}]", item) for i, item in enumerate(value)]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f"{name}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    else:
        items = []
    for inner, item in items:
        found.update(_strings_of(inner, item, depth + 1))
    return found


def _module_statements(module: ModuleType) -> dict[str, str]:
    found = {}
    for name, value in vars(module).items():
        found.update(_strings_of(f"{module.__name__}.{name}", value))
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attribute, inner in vars(value).items():  # a class's own attributes
                found.update(_strings_of(f"{module.__name__}.{name}.{attribute}", inner))
    return found


def _named_statements() -> dict[str, str]:
    """Every module-level string of every module of the apps, by ``module.NAME``."""
    found = {}
    for path in _sources():
        found.update(_module_statements(importlib.import_module(_module_name(path))))
    return found


def _undeclared(statements: dict[str, str]) -> set[str]:
    """The names of the statements that write a status without declaring their moves."""
    return {
        name
        for name, text in statements.items()
        if _writes_status(text) and state.declared(text) is None
    }


def test_every_status_written_in_sql_is_a_declared_statement():
    """Every named statement of every module (the SQL modules too) that writes a Run or ToolCall
    status declares its moves (``state.writes``), and every declared statement is named."""
    statements = _named_statements()
    assert _undeclared(statements) == set()
    writing = {name for name, text in statements.items() if _writes_status(text)}
    assert "approvals.sql.SETTLE_AUDITED" in writing  # the approvals' SQL is scanned too
    named = set(statements.values())
    assert all(text in named for text in state.declared_statements())


# The functions whose strings write a status: fragments of statements that ``agent_core.engine.sql``
# names at module level (a call's, declared there: FINISH_CALL…; a journal step's, not a run's
# or call's: RECORD_MODEL_STEP…). Any other is found.
_FRAGMENT_BUILDERS = {"agent_core/engine/sql.py:_finish", "agent_core/engine/sql.py:_record"}
_FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef


def _status_writes_in_functions(root: Path = _ROOT) -> list[str]:
    """``path:function`` of each string in a function body that writes a status (fragments
    included, as ``", status = %s"``)."""
    found = []
    for path in _sources(root):
        if path.name == "state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, _FUNCTIONS):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                        if _STATUS_FRAGMENT.search(inner.value):
                            found.append(f"{path.relative_to(root)}:{node.name}")
    return found


def _outside_builders(places: list[str]) -> list[str]:
    return [place for place in places if place not in _FRAGMENT_BUILDERS]


def test_no_status_is_written_in_sql_outside_a_named_statement():
    """No string in a function body writes a status: only module-level, declared statements do
    (and the fragments ``agent_core.engine.sql`` builds them from)."""
    assert _outside_builders(_status_writes_in_functions()) == []


def _undeclared_moves(text: str, moves: tuple[state.Writes, ...]) -> list[str]:
    """The moves of a statement the table does not allow, and the statuses it spells out that
    its declaration does not name."""
    wrong = []
    for move in moves:
        for source in move.sources:
            for target in move.targets:
                if (source, target) not in state.ALLOWED[move.model] and not (
                    source == target and target not in _TERMINAL[move.model]
                ):
                    wrong.append(f"{move.model.__name__} {source} → {target}")
    # Written or compared (``status = 'x'``), or chosen by a ``CASE`` (``THEN 'x'``).
    statuses = {str(s) for s in RunStatus} | {str(s) for s in CallStatus}
    spelled = set(re.findall(r"(?:\bstatus\s*=\s*|\bTHEN\s+)'(\w+)'", text)) & statuses
    named = {str(s) for m in moves for s in m.sources | m.targets}
    wrong += sorted(spelled - named - {QueuedStatus.QUEUED.value})
    return wrong


@pytest.mark.parametrize("text", sorted(state.declared_statements()))
def test_each_declared_statement_writes_only_moves_the_table_allows(text):
    assert _undeclared_moves(text, state.declared(text) or ()) == []


@pytest.mark.parametrize(
    ("model", "status"), [(Run, s) for s in RUN_TERMINAL] + [(ToolCall, s) for s in CALL_TERMINAL]
)
def test_a_terminal_status_never_moves_to_itself(model, status):
    with pytest.raises(InvalidTransition):
        state.check(model, status, status)


def test_a_statement_refuses_a_move_it_does_not_declare():
    # The table allows it, but the claim's statement only ever claims.
    with pytest.raises(InvalidTransition):
        state.check_statement(sql.CLAIM_CALL, ToolCall, C.APPROVED, C.SUCCEEDED)
    with pytest.raises(InvalidTransition):
        state.check_statement(sql.EMIT_FRAMES, Run, R.RUNNING, R.COMPLETED)
    assert state.check_statement(sql.CLAIM_CALL, ToolCall, C.APPROVED, C.EXECUTING)


def _references(function: ast.AST) -> set[str]:
    return {
        node.attr if isinstance(node, ast.Attribute) else node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute | ast.Name)
    }


def _checked(function: ast.AST) -> set[str]:
    """The names the statements given to ``state.check_statement`` in ``function`` reference,
    through the function's own variables (``statement = … sql.SETTLE_CALL``) too."""
    assigned: dict[str, set[str]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, set()).update(_references(node.value))
    checked: set[str] = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "check_statement"
            and _root_name(node.func) == "state"
            and node.args
        ):
            given = _references(node.args[0])
            checked |= given.union(*(assigned.get(name, set()) for name in given))
    return checked


def _unchecked(paths: list[Path], writing: set[str]) -> tuple[list[str], set[str]]:
    """The functions naming a statement of ``writing`` (by its name) that do not pass its move
    through ``state.check_statement`` themselves; and the names used."""
    unchecked, used = [], set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, _FUNCTIONS):
                named = _references(node) & writing
                used |= named
                if named - _checked(node):
                    unchecked.append(f"{path.name}:{node.name} {sorted(named - _checked(node))}")
    return unchecked, used


def test_every_function_running_a_status_statement_checks_its_move():
    """Each function that names a statement writing a status passes its move through
    ``state.check_statement`` itself: a call in its body, given that statement (not the text
    anywhere in its file, nor a check of another statement)."""
    statements = _named_statements()
    writing = {
        name.rsplit(".", 1)[1]
        for name, text in statements.items()
        if state.declared(text) is not None and "[" not in name
    }
    unchecked, used = _unchecked(_sources(), writing)
    assert unchecked == []
    assert used == writing  # each is run somewhere


# The guard's own holes: each a statement or a module it must catch.


@pytest.mark.parametrize(
    "text",
    [
        "UPDATE agent_core_toolcall SET (status, reason) = ('failed', 'x') WHERE id = %(id)s",
        "INSERT INTO agent_core_run (id, status) VALUES (%(id)s, 'queued')"
        " ON CONFLICT (id) DO UPDATE SET status = 'failed'",
    ],
)
def test_the_scan_finds_every_form_of_a_status_write(text):
    assert _writes_status(text)


def _module(tmp_path: Path, source: str, relative: str = "agent_core/sneaky.py") -> Path:
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def test_the_scan_finds_a_statement_kept_in_a_container(tmp_path):
    path = _module(
        tmp_path,
        """
        STATEMENTS = {"end": "UPDATE agent_core_run SET status = 'failed' WHERE id = %(id)s"}
        ENDS = ("UPDATE agent_core_toolcall SET status = 'failed' WHERE id = %(id)s",)
        """,
    )
    module = ModuleType("sneaky")
    exec(compile(path.read_text(), str(path), "exec"), vars(module))
    assert len(_undeclared(_module_statements(module))) == 2


def test_the_core_sql_module_may_not_hide_a_status_write_in_any_function(tmp_path):
    _module(
        tmp_path,
        """
        def _fails():
            return "UPDATE agent_core_run SET status = 'failed' WHERE id = %(id)s"
        """,
        "agent_core/engine/sql.py",
    )
    assert _outside_builders(_status_writes_in_functions(tmp_path)) == [
        "agent_core/engine/sql.py:_fails"
    ]


def test_a_function_checks_the_statement_it_runs_not_another(tmp_path):
    path = _module(
        tmp_path,
        """
        def end(run):
            state.check_statement(sql.CLAIM_CALL, ToolCall, "approved", "executing")
            rows.execute(sql.END_RUN, {"id": run.pk})
        """,
    )
    unchecked, _ = _unchecked([path], {"CLAIM_CALL", "END_RUN"})
    assert unchecked == ["sneaky.py:end ['END_RUN']"]


def test_a_coroutine_running_a_status_statement_checks_it_too(tmp_path):
    path = _module(
        tmp_path,
        """
        async def end(run):
            rows.execute(sql.END_RUN, {"id": run.pk})
        """,
    )
    unchecked, _ = _unchecked([path], {"END_RUN"})
    assert unchecked == ["sneaky.py:end ['END_RUN']"]


def test_a_status_written_by_a_case_is_one_the_statement_declares():
    text = (
        "UPDATE agent_core_run SET status = CASE WHEN status = 'waiting' THEN 'completed'"
        " ELSE status END WHERE id = %(id)s"
    )
    moves = (state.Writes(Run, frozenset({R.WAITING}), frozenset({R.QUEUED})),)
    assert _undeclared_moves(text, moves) == ["completed"]


@pytest.mark.parametrize(
    ("model", "status"), [(Run, s) for s in RUN_TERMINAL] + [(ToolCall, s) for s in CALL_TERMINAL]
)
def test_a_declared_terminal_status_never_moves_to_itself(model, status):
    moves = (state.Writes(model, frozenset({status}), frozenset({status})),)
    assert _undeclared_moves("", moves) == [f"{model.__name__} {status} → {status}"]
    with pytest.raises(InvalidTransition):
        state.writes("UPDATE agent_core_run SET status = status", *moves)


def test_finishing_a_call_refuses_a_pair_the_table_does_not_allow(turn):
    run = turn(REFUND)  # waiting on the refund's approval
    [call] = calls_of(run)
    lease = Lease(run.pk, token=run.lease_token, owner="nobody")
    # pending_approval → succeeded is an answer's move, never a tool's.
    with pytest.raises(InvalidTransition):
        calls.finish_call(lease, call.pk, result={}, expected=C.PENDING_APPROVAL)
    call.refresh_from_db()
    assert call.status == C.PENDING_APPROVAL
