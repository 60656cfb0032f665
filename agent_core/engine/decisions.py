"""Decisions made outside any driver — approve, reject, expire, answer, extend, resolve a call in
doubt — each under the run's row lock, which ``decision`` takes itself.

``with decision(call_id) as d:`` opens a transaction, locks the call's run and then the call (a
run before its calls: the order every writer takes them) and reads both as the lock found them,
in one statement (``sql.LOCK_CALL``); ``d``'s methods are the only way to write a decision, so
none is ever made without the lock. A settlement is one more statement, with its frames,
whatever rides on it and, when the decision was the last thing the run waited for, the run's
``waiting → queued`` (``sql.SETTLE_CALL``); the run is dispatched after commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.db import transaction
from django.utils import timezone

from .. import signals
from ..choices import CallStatus, RunStatus
from ..models import Run, ToolCall
from ..tools import args_digest
from . import calls, frames, journal, rows, sql, state, stream_log
from .frames import Frames
from .leases import deadline
from .runs import BLOCKING, OPEN, resume_if_unblocked, resumed

logger = logging.getLogger(__name__)

# The reason a skipped question is recorded with (``Decision.skip``), and what its frame says.
SKIPPED = "skipped"


@contextmanager
def decision(call_id: str, statement: str = sql.LOCK_CALL) -> Iterator[Decision | None]:
    """A transaction holding the lock of the call's run, with the call read under it (``None``:
    there is no such call). Whatever the body writes commits with it, or not at all.

    ``statement``: ``sql.LOCK_CALL`` reading more columns after the call's, by name
    (``Decision.joined``)."""
    with transaction.atomic():
        found = rows.fetch_models_named(statement, {"call_id": call_id}, Run, ToolCall)
        if found is None:
            yield None
        else:
            (run, call), joined = found
            yield Decision(cast(Run, run), cast(ToolCall, call), joined)


@dataclass(frozen=True)
class Settling:
    """A statement that settles a call as ``sql.SETTLE_CALL`` does (its parameters, the columns
    it answers) with more writes riding on it, and the named parameters of those writes."""

    statement: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Decision:
    """A call and its run, the run's row locked (only ``decision`` makes one), and the more
    columns its statement read with them, by name."""

    run: Run
    call: ToolCall
    joined: Mapping[str, Any] = field(default_factory=dict)

    def settle(
        self,
        status: CallStatus,
        *,
        decided_by_ref: str,
        decided_via: str,
        reason: str = "",
        remember: bool = False,
        args: dict[str, Any] | None = None,
        settling: Settling | None = None,
    ) -> bool:
        """``pending_approval → approved | rejected | expired | cancelled``, announced in the same
        statement; resumes the run when it was the last call waiting. ``False``: the call was no
        longer pending. ``settling``: ``sql.SETTLE_CALL`` with more writes."""
        run, call = self.run, self.call
        statement = settling.statement if settling else sql.SETTLE_CALL
        (source,) = state.check_statement(statement, ToolCall, CallStatus.PENDING_APPROVAL, status)
        # The run it may free.
        (freed,) = state.check_statement(statement, Run, RunStatus.WAITING, RunStatus.QUEUED)
        now = timezone.now()
        # The decision's own columns: the statement's parameters, and the instance's after it
        # (``fields``, with what an edit or an end adds).
        decided: dict[str, Any] = {
            "status": status,
            "decided_by_ref": decided_by_ref,
            "decided_via": decided_via,
            "decided_at": now,
            "reason": reason,
            "remember": remember,
        }
        fields = dict(decided)
        edited = None
        if args is not None and args != call.args:
            digest = args_digest(call.tool_name, args)
            fields.update(args=args, original_args=call.args, args_digest=digest)
            edited = json.dumps(args)
        finished_at = None if status == CallStatus.APPROVED else now
        if finished_at is not None:
            fields["finished_at"] = finished_at
        params: dict[str, Any] = {
            **decided,
            "edited_args": edited,
            "edited_args_digest": fields.get("args_digest"),
            "finished_at": finished_at,
            "call_id": call.pk,
            "source": source,
            "open": list(OPEN),
            "blocking": sorted(BLOCKING),
            "lease_expires_at": deadline(),
        }
        for key, value in fields.items():
            setattr(call, key, value)
        announce: Frames = [frames.approval_settled(call)]
        if status != CallStatus.APPROVED:
            denied = "approval expired" if status == CallStatus.EXPIRED else reason or status.value
            announce.append(frames.tool_output_denied(call.pk, denied))
        params.update(_frame_parameters(run.pk, announce, now))
        if settling is not None:
            assert not params.keys() & settling.params.keys(), "a riding write names its own"
            params.update(settling.params)
        written = rows.fetch_rows(statement, params)
        if not written:
            call.refresh_from_db()  # not what this decision wrote: what is there
            return False
        stream_log.published(run.pk, announce, max(row["seq"] for row in written))
        first = written[0]
        stream_log.mirror(run.pk, announce, first["parent_run_id"], first["parent_tool_call_id"])
        transaction.on_commit(
            lambda: signals.approval_settled.send(ToolCall, call=call), robust=True
        )
        if run.status == freed and first["run_status"] == RunStatus.QUEUED:
            # The run's other open calls, and this one if it is still open (approved).
            resumed(run, {*first["others"], *({status} & set(OPEN))})
        return True

    def answer(self, answer: Any, *, decided_by_ref: str, via: str) -> bool:
        """``pending_input → succeeded`` with the person's answer as the result; resumes the
        run. ``False``: the call no longer waited for an answer."""
        closed = frames.tool_output(self.call.pk, answer)
        return self._close_question(CallStatus.SUCCEEDED, answer, closed, decided_by_ref, via)

    def skip(self, defaults: Any, *, decided_by_ref: str, via: str) -> bool:
        """``pending_input → rejected``: the person skipped the question; ``defaults`` (the
        answer schema's defaults, or ``None``) is recorded as the result and the model is told
        the question was skipped; resumes the run. ``False``: the call no longer waited."""
        closed = frames.tool_output_denied(self.call.pk, SKIPPED)
        return self._close_question(
            CallStatus.REJECTED, defaults, closed, decided_by_ref, via, reason=SKIPPED
        )

    def _close_question(
        self,
        status: CallStatus,
        result: Any,
        closed: frames.Frame,
        decided_by_ref: str,
        via: str,
        *,
        reason: str = "",
    ) -> bool:
        run, call = self.run, self.call
        now = timezone.now()
        fields = {
            "result": result,
            "reason": reason,
            "decided_by_ref": decided_by_ref,
            "decided_via": via,
            "decided_at": now,
            "finished_at": now,
        }
        asked = ToolCall.objects.filter(pk=call.pk)
        if not state.transition(asked, CallStatus.PENDING_INPUT, status, **fields):
            return False
        for key, value in {**fields, "status": status}.items():
            setattr(call, key, value)  # the call as the decision left it
        journal.record_tool_step(run, call.pk, status.value)
        stream_log.emit(run.pk, [closed])
        resume_if_unblocked(run)
        return True

    def extend(self, expires_at: datetime) -> bool:
        """Move a pending request's deadline to ``expires_at`` (later only), announced as
        ``approval-extended``. ``False``: not pending, or not later."""
        call = self.call
        won = ToolCall.objects.filter(
            pk=call.pk, status=CallStatus.PENDING_APPROVAL, expires_at__lt=expires_at
        ).update(expires_at=expires_at)
        if not won:
            return False
        call.expires_at = expires_at
        stream_log.emit(self.run.pk, [frames.approval_extended(call.pk, expires_at)])
        return True

    def resolve(self, *, done: bool, decided_by_ref: str, result: Any = None) -> bool:
        """A person marks the in-doubt call done (``result`` recorded, nothing runs again) or not
        done (it runs again, asking afresh when its tool says so); the run resumes."""
        if not calls.resolve(self.run, self.call, done=done, result=result):
            return False
        logger.info(
            "%s resolved as %s by %s", self.call.pk, "done" if done else "not done", decided_by_ref
        )
        resume_if_unblocked(self.run)
        return True


def _frame_parameters(
    run_id: str, announce: Sequence[frames.Frame], now: datetime
) -> dict[str, Any]:
    """The named parameters of the frames a decision's statement writes (``sql.SETTLE_CALL``):
    the run, how many, when, and the frames as one JSON array of ``[kind, data]`` pairs."""
    written = json.dumps([[kind, data] for kind, data in announce])
    return {"run_id": run_id, "n": len(announce), "created_at": now, "frames": written}
