"""The run's journal: one step record per name (``llm:<n>``, ``tool:<call id>``), and what a plan
reads from it.

A recorded step is never redone (SPEC §5, 6): the loop plans from ``read_run``, or from what the
transaction that recorded the step before wrote on top of it (``after_record``: under the run's
lock, what a second read would return), never from what a process remembers across commits; a
replay reads a recorded step's output instead of redoing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from ..agents import Agent
from ..choices import CallStatus, Role, StepStatus
from ..models import Run, Step, StreamFrame, Thread, ToolCall
from ..providers.base import ModelRequest
from . import frames, rows, sql, stream_log, transcript
from .dispatch import NextStep
from .leases import Lease, fenced, lock


def read_run(
    run_id: str, *, lease: Lease | None = None
) -> tuple[Run, dict[str, str], list[ToolCall]] | None:
    """The run (its thread read with it), its journal (step name → status) and every call of the
    run, in the order its steps proposed them (what a plan reads), each with ``delegated``:
    whether it started a child run — in one query.

    With ``lease``: the run's row locked, or ``None`` when the lease no longer holds it.
    """
    if lease is None:
        found = rows.fetch_row(sql.READ_RUN, {"run_id": run_id})
    else:
        found = rows.fetch_row(sql.READ_RUN_LOCKED, fenced(lease))
    if found is None:
        return None
    run, thread = rows.from_json(Run, found["run"]), rows.from_json(Thread, found["thread"])
    assert isinstance(run, Run) and isinstance(thread, Thread)
    run.thread = thread  # read with it: ``run.thread`` costs no query
    pairs = (entry.rsplit(" ", 1) for entry in found["journal"])
    calls = [stored_call(row) for row in found["calls"] or ()]
    return run, {name: status for name, status in pairs}, calls


def stored_call(row: dict[str, Any]) -> ToolCall:
    """A call read as JSON (with its run, ``sql.READ_RUN``; or as a record wrote it): its
    timestamps parsed back; ``delegated`` as read, else ``False`` (a record's call started no
    child run)."""
    call = rows.from_json(ToolCall, row)
    assert isinstance(call, ToolCall)
    call.delegated = row.get("delegated", False)  # type: ignore[attr-defined]
    return call


@dataclass(frozen=True)
class Recorded:
    """A step's record, made under the run's lock: what comes next, the run as the record locked
    it (its frame counter and usage totals as they were before the record: no plan reads them),
    the journal entry it completed and the calls it wrote, as stored (the statement's
    ``RETURNING``): what ``after_record`` needs to plan the next step without reading the run
    again."""

    next: NextStep
    run: Run
    step: str
    calls: list[ToolCall]


def after_record(
    journal: dict[str, str], every_call: list[ToolCall], recorded: Recorded
) -> tuple[dict[str, str], list[ToolCall]] | None:
    """The journal and calls a read would return in the transaction of ``recorded``: those the
    step was planned from (read under the run's lock in an earlier transaction) with what the
    record wrote. ``None`` when that cannot be known without reading: another call was open to
    other writers meanwhile (a pending one a person decides, a delegation its child settles).

    A call that was settled, or approved, moves only under the driver's lease, which fenced the
    record; the journal is written under it too (SPEC §5).
    """
    written = {call.pk: call for call in recorded.calls}
    for call in every_call:
        if call.pk not in written and not (call.is_terminal or call.status == CallStatus.APPROVED):
            return None
    merged = [written.pop(call.pk, call) for call in every_call] + list(written.values())
    return {**journal, recorded.step: StepStatus.COMPLETED.value}, merged


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
    started = {"run_id": run.pk, "step": name, "started_at": timezone.now()}
    if not first:
        request = transcript.build_request(run, agent)  # read before the opening writes
        with transaction.atomic():
            row = rows.fetch_row(sql.BEGIN_STEP, started)
            assert row is not None
            attempts = int(row["attempts"])
            _supersede_partial_text(run, name)
            stream_log.emit(run.pk, [frames.step_start(name, attempts)])
        return attempts, request
    tools = transcript.tool_definitions(agent)  # what could raise, before the opening writes
    begun = [frames.step_start(name, 1)]
    if results:
        params = {**started, **transcript.appended(run, Role.TOOL, results)}
        row = stream_log.emit_with(sql.BEGIN_MODEL_STEP_AFTER_RESULTS, params, run.pk, begun)
    else:
        params = {**started, "thread_id": run.thread_id}
        row = stream_log.emit_with(sql.BEGIN_MODEL_STEP, params, run.pk, begun)
    assert row is not None, f"no run {run.pk}"
    assert row["attempts"] == 1, f"{name} was journaled under the run's lock meanwhile"
    messages = row["messages"]
    if results:
        messages = [*(messages or ()), [Role.TOOL.value, results]]
    return 1, transcript.request(agent, messages or [], tools)


def _supersede_partial_text(run: Run, step_name: str) -> None:
    """Mark the text the cut-short attempt streamed, in the run's stream and in the copies its
    awaiting ancestors' streams hold (SPEC §14)."""
    streams: list[tuple[str, str | None]] = [(run.pk, None)]
    if run.parent_tool_call_id is not None:
        ancestry = rows.fetch_rows(sql.ANCESTRY, {"run_id": run.pk})[1:]
        streams += [(ancestor["id"], run.pk) for ancestor in ancestry]
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
        stream_log.emit(lease.run_id, [frames.text("".join(chunks))])


def record_tool_step(run: Run, call_id: str, status: str) -> None:
    """Journal ``tool:<call id>`` as done with the call's outcome: it never runs again."""
    Step.objects.create(
        run=run,
        name=f"tool:{call_id}",
        status=StepStatus.COMPLETED,
        output={"status": status},
        finished_at=timezone.now(),
    )
