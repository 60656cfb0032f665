"""The run's journal: one step record per name (``llm:<n>``, ``tool:<call id>``), and what a plan
reads from it.

A recorded step is never redone (SPEC §5, 6): the loop plans from ``read_run`` alone, never from
memory, and a replay reads a recorded step's output instead of redoing it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from . import frames, sql, streams, transcript
from .agents import Agent
from .choices import Role, StepStatus
from .leases import Lease, lock
from .models import Run, Step, StreamFrame, ToolCall
from .providers.base import ModelRequest


def read_run(
    run_id: str, *, lease: Lease | None = None
) -> tuple[Run, dict[str, str], list[ToolCall]] | None:
    """The run, its journal (step name → status) and every call of the run, in the order its
    steps proposed them (what a plan reads), each with ``delegated``: whether it started a child
    run — in one query.

    With ``lease``: the run's row locked, or ``None`` when the lease no longer holds it.
    """
    if lease is None:
        found = sql.fetch_models(sql.READ_RUN, [run_id], Run)
    else:
        found = sql.fetch_models(sql.READ_RUN_LOCKED, [run_id, lease.token, lease.owner], Run)
    if found is None:
        return None
    (run,), (journal, calls) = found
    assert isinstance(run, Run)
    pairs = (entry.rsplit(" ", 1) for entry in journal)
    return run, {name: status for name, status in pairs}, [_call(row) for row in calls or ()]


def _call(row: dict[str, Any]) -> ToolCall:
    """A call read as JSON with its run (``sql.READ_RUN``): its timestamps parsed back."""
    for name in _CALL_TIMES:
        if row[name] is not None:
            row[name] = datetime.fromisoformat(row[name])
    call = ToolCall(**{name: row[name] for name in _CALL_COLUMNS})
    call._state.adding = False  # a stored row, as the ORM would have read it
    call.delegated = row["delegated"]  # type: ignore[attr-defined]
    return call


_CALL_COLUMNS = [field.attname for field in ToolCall._meta.concrete_fields]
_CALL_TIMES = [
    field.attname
    for field in ToolCall._meta.concrete_fields
    if isinstance(field, models.DateTimeField)
]


def begin_model_step(
    run: Run, agent: Agent, name: str, *, results: list[dict[str, Any]], first: bool = True
) -> tuple[int, ModelRequest]:
    """Journal the start of a model step; return its attempt number (1 on the first try) and
    its request (``transcript.build_request``).

    On the first attempt (``first``: the journal has no entry of it), ``results`` (those of the
    calls of the step before, every one settled) join the transcript, and the transcript is
    read, in the one statement that opens the step. A retried attempt marks the text its
    cut-short predecessor streamed as superseded, all or nothing. The caller holds the run's
    lock under its lease (``loop.open_step``).
    """
    assert connection.in_atomic_block, "a step opens in the transaction that locked its run"
    started = [run.pk, name, StepStatus.STARTED.value, timezone.now()]
    if not first:
        request = transcript.build_request(run, agent)  # read before the opening writes
        with transaction.atomic():
            row = sql.fetch_one(sql.BEGIN_STEP, started)
            assert row is not None
            attempts = int(row[0])
            _supersede_partial_text(run, name)
            streams.emit(run.pk, [frames.step_start(name, attempts)])
        return attempts, request
    tools = transcript.tool_definitions(agent)  # what could raise, before the opening writes
    read = [*started, run.thread_id]
    riding = (
        streams.Riding(
            sql.BEGIN_MODEL_STEP_AFTER_RESULTS,
            [*read, *transcript.appended(run, Role.TOOL, results)],
        )
        if results
        else streams.Riding(sql.BEGIN_MODEL_STEP, read)
    )
    attempts, messages = streams.emit(run.pk, [frames.step_start(name, 1)], riding)
    assert attempts == 1, f"{name} was journaled under the run's lock meanwhile"
    if results:
        messages = [*(messages or ()), [Role.TOOL.value, results]]
    return 1, transcript.request(agent, messages or [], tools)


def _supersede_partial_text(run: Run, step_name: str) -> None:
    """Mark the text the cut-short attempt streamed, in the run's stream and in the copies its
    awaiting ancestors' streams hold (SPEC §14)."""
    streams: list[tuple[str, str | None]] = [(run.pk, None)]
    if run.parent_tool_call_id is not None:
        ancestry = sql.fetch_all(sql.ANCESTRY, [run.pk])[1:]
        streams += [(ancestor_id, run.pk) for ancestor_id, _, _ in ancestry]
    for stream_run_id, origin in streams:
        frames = StreamFrame.objects.filter(run_id=stream_run_id)
        if origin is None:
            frames = frames.exclude(data__has_key="run_id")
        else:
            frames = frames.filter(data__run_id=origin)
        last_start = (
            frames.filter(kind="step-start", data__step=step_name)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        if last_start is not None:
            frames.filter(kind="text", seq__gt=last_start).update(superseded=True)


def emit_text(lease: Lease, chunks: list[str]) -> None:
    """Stream coalesced text of the model step in flight, fenced by the lease."""
    with transaction.atomic():
        lock(lease)
        streams.emit(lease.run_id, [frames.text("".join(chunks))])


def record_tool_step(run: Run, call_id: str, status: str) -> None:
    """Journal ``tool:<call id>`` as done with the call's outcome: it never runs again."""
    Step.objects.create(
        run=run,
        name=f"tool:{call_id}",
        status=StepStatus.COMPLETED,
        output={"status": status},
        finished_at=timezone.now(),
    )
