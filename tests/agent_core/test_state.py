"""The transition table against SPEC §4, and the one helper that writes a status."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from agent_core import calls, sql, state
from agent_core.choices import CALL_TERMINAL, RUN_TERMINAL, CallStatus, QueuedStatus, RunStatus
from agent_core.exceptions import InvalidTransition
from agent_core.leases import Lease
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
            if "migrations" in path.parts or path == root / "agent_core" / "state.py":
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


# An UPDATE of the run or tool-call table whose SET writes ``status``.
_STATUS_SQL = re.compile(
    r'UPDATE\s+"?(agent_core_run|agent_core_toolcall)"?\b(?:(?!\bWHERE\b).)*\bSET\b'
    r"(?:(?!\bWHERE\b).)*\bstatus\s*=",
    re.IGNORECASE | re.DOTALL,
)
_APPS = ("agent_core", "approvals", "console")
_ROOT = Path(__file__).resolve().parents[2]


def _sources() -> list[Path]:
    """Every module of the apps (SQL modules included), but migrations."""
    return [
        path
        for app in _APPS
        for path in sorted((_ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(_ROOT).with_suffix("").parts).removesuffix(".__init__")


def _named_statements() -> dict[str, str]:
    """Every module-level string of every module of the apps, by ``module.NAME``."""
    found = {}
    for path in _sources():
        module = importlib.import_module(_module_name(path))
        for name, value in vars(module).items():
            if isinstance(value, str):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_status_written_in_sql_is_a_declared_statement():
    """Every named statement of every module (the SQL modules too) that writes a Run or ToolCall
    status declares its moves (``state.writes``), and every declared statement is named."""
    statements = _named_statements()
    writing = {name for name, text in statements.items() if _STATUS_SQL.search(text)}
    undeclared = {name for name in writing if state.declared(statements[name]) is None}
    assert undeclared == set()
    assert "approvals.sql.SETTLE_AUDITED" in writing  # the approvals' SQL is scanned too
    named = set(statements.values())
    assert all(text in named for text in state.declared_statements())


def test_no_status_is_written_in_sql_outside_a_named_statement():
    """No string in a function body writes a status: only module-level, declared statements do
    (fragments included, as ``", status = %s"``)."""
    found = []
    for path in _sources():
        if path.name == "state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                        if re.search(r"(\bSET\b|,)\s*status\s*=", inner.value, re.I):
                            found.append(f"{path.relative_to(_ROOT)}:{inner.lineno}")
    # The statements of the core's SQL module built by functions (each named at module level).
    assert all(place.startswith("agent_core/sql.py:") for place in found), found


@pytest.mark.parametrize("text", sorted(state.declared_statements()))
def test_each_declared_statement_writes_only_moves_the_table_allows(text):
    for move in state.declared(text) or ():
        for source in move.sources:
            for target in move.targets:
                assert (source, target) in state.ALLOWED[move.model] or (
                    source == target and target not in _TERMINAL[move.model]
                ), (move.model.__name__, source, target)
        # A status the statement spells out is one its declaration names.
        spelled = set(re.findall(r"\bstatus\s*=\s*'(\w+)'", text))
        named = {str(s) for m in state.declared(text) or () for s in m.sources | m.targets}
        assert spelled <= named | {QueuedStatus.QUEUED.value}, spelled - named


_TERMINAL = {Run: RUN_TERMINAL, ToolCall: CALL_TERMINAL}


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


def _checks_a_statement(function: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "check_statement"
        and _root_name(node.func) == "state"
        for node in ast.walk(function)
    )


def test_every_function_running_a_status_statement_checks_its_move():
    """Each function that names a statement writing a status passes its move through
    ``state.check_statement`` itself (a call in its body, not the text anywhere in its file)."""
    statements = _named_statements()
    writing = {
        name.rsplit(".", 1)[1]
        for name, text in statements.items()
        if state.declared(text) is not None
    }
    unchecked, used = [], set()
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                named = _references(node) & writing
                used |= named
                if named and not _checks_a_statement(node):
                    unchecked.append(f"{path.relative_to(_ROOT)}:{node.name} {sorted(named)}")
    assert unchecked == []
    assert used == writing  # each is run somewhere


def test_finishing_a_call_refuses_a_pair_the_table_does_not_allow(turn):
    run = turn(REFUND)  # waiting on the refund's approval
    [call] = calls_of(run)
    lease = Lease(run.pk, token=run.lease_token, owner="nobody")
    # pending_approval → succeeded is an answer's move, never a tool's.
    with pytest.raises(InvalidTransition):
        calls.finish_call(lease, call.pk, result={}, expected=C.PENDING_APPROVAL)
    call.refresh_from_db()
    assert call.status == C.PENDING_APPROVAL
