"""What a tool is handed: the run's actor and the call's ``ToolContext``."""

from __future__ import annotations

from ..actors import Actor
from ..models import Run
from ..tools import AbortSignal, ToolContext


def actor_of(run: Run) -> Actor:
    """The actor who started the run, as it was when the run started."""
    return Actor(ref=run.actor_ref, roles=frozenset(run.actor_roles))


def tool_context(
    run: Run, call_id: str, abort: AbortSignal | None = None, *, lease_token: int | None = None
) -> ToolContext:
    """The ``ctx`` of one call: ids, actor, the stable idempotency key, the abort signal, and
    the driver's lease token."""
    return ToolContext(
        run_id=run.pk,
        thread_id=run.thread_id,
        tool_call_id=call_id,
        actor=actor_of(run),
        idempotency_key=f"airlock-{call_id}",
        abort_signal=abort or AbortSignal(),
        lease_token=lease_token,
    )
