"""Observability events (SPEC §13), sent after the transaction that caused them commits."""

from __future__ import annotations

from django.dispatch import Signal

# run_started(sender, run)
run_started = Signal()
# tool_call(sender, call) — a call was proposed, with its stamped kind and status
tool_call = Signal()
# approval_requested(sender, call)
approval_requested = Signal()
# approval_settled(sender, call) — approved, rejected, expired or cancelled
approval_settled = Signal()
# call_in_doubt(sender, call) — an attempt died mid-effect; a person may have to say what happened
call_in_doubt = Signal()
# quota_exceeded(sender, run, actor_ref, reason) — reason names the limit; run is None when a
# start was refused (429), else the run stopped at its token budget
quota_exceeded = Signal()
# run_failed(sender, run) — error_code and error_message are on the run
run_failed = Signal()
# run_finished(sender, run) — completed
run_finished = Signal()
# run_cancelled(sender, run)
run_cancelled = Signal()
# delegated(sender, call, child_run) — a delegation call started a child run (SPEC §14)
delegated = Signal()
# step_ready(sender, run_id, kind) — a durable worker holds the run's lease and is about to take
# its opened step (kind: "llm" or "tool"); for a task's first step, before the lease's heartbeat
step_ready = Signal()
# step_recorded(sender, run_id, kind) — a durable worker committed the record of the run's step
# (kind: "llm" or "tool") and the run goes on: its next step is not taken or enqueued yet
step_recorded = Signal()
