"""``agent chat``: an interactive terminal chat that stops to ask on every card.

It follows the run from the database (the driver may be this process's inline runner or a
Celery worker), prompts ``approve [remember] / reject <reason> / edit <json>`` on an approval
card the person at the terminal may decide, asks a human tool's question, and decides through
the approval port with ``via="cli"``. Leaving while a run waits is safe: ``--thread``
reattaches. ``/regenerate``, ``/fork <message>`` and ``/truncate <message>`` go back in the
thread (``agent_core.cli.rewind``). With an agent's ``text_decisions``, a message that is a
decision word decides the thread's pending call (an independent proposal, say) instead of
starting a turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.choices import CallStatus, Role, RunStatus
from agent_core.cli import rewind
from agent_core.cli.follow import RunFollower, pending_calls, render, shown, wait_until_settled
from agent_core.cli.session import own_thread, start_turn
from agent_core.exceptions import AgentCoreError
from agent_core.gate import text_decision
from agent_core.models import Message, Run, Thread, ToolCall
from agent_core.toolcalls import delegation

from . import services as port
from .exceptions import InvalidDecision
from .policy import get_policy

DECISION_PROMPT = "approve [remember] / reject <reason> / edit <json> > "
ANSWER_PROMPT = "answer> "
USER_PROMPT = "you> "


class Left(Exception):
    """The person left the chat (end of input or Ctrl-C)."""


class Chat:
    """One terminal session of ``actor`` with ``agent`` on one thread."""

    def __init__(
        self,
        agent: str,
        actor: Actor,
        *,
        write: Callable[[str], None],
        read: Callable[[str], str],
    ) -> None:
        self.agent = agent
        self.actor = actor
        self.write = write
        self._read = read
        self.thread_id: str | None = None

    def read(self, prompt: str) -> str:
        try:
            return self._read(prompt)
        except (EOFError, KeyboardInterrupt):
            raise Left() from None

    def run(self, thread_id: str | None = None) -> None:
        """Chat until the person leaves; a waiting run is left as it is, for later."""
        try:
            if thread_id is not None:
                self.reattach(own_thread(thread_id, self.actor))
            while True:
                message = self.read(USER_PROMPT).strip()
                if not message:
                    continue
                if message in ("/quit", "/exit"):
                    return
                if message.split()[0] in rewind.COMMANDS:
                    self.rewind(message)
                    continue
                if self.decided_by_text(message):
                    continue
                run = start_turn(self.agent, message, self.actor, self.thread_id)
                self.thread_id = run.thread_id
                self.drive(run.pk)
        except Left:
            if self.thread_id is not None:
                self.write(f"\nbye; reattach with --thread {self.thread_id}\n")

    def rewind(self, line: str) -> None:
        """Regenerate, fork (and go on in the fork) or truncate the thread."""
        if self.thread_id is None:
            self.write("  no thread yet: say something first\n")
            return
        try:
            done = rewind.apply(line, self.actor, self.thread_id)
        except CommandError as exc:
            self.write(f"  {exc}\n")
            return
        match done:
            case Run():
                self.drive(done.pk)
            case Thread():
                self.thread_id = done.pk
                self.write(f"  forked: now on thread {done.pk}\n")
            case int():
                self.write(f"  dropped {done} messages\n")

    def decided_by_text(self, message: str) -> bool:
        """Whether ``message`` was a text decision (SPEC §17) on this chat's thread: its reply
        is shown, and the run the decision lets go on is followed."""
        if self.thread_id is None:
            return False
        thread = Thread.objects.get(pk=self.thread_id)
        try:
            reply = text_decision(self.actor, thread, message)
        except AgentCoreError as exc:
            self.write(f"  {_refusal(exc)}\n")
            return True
        if reply is None:
            return False
        self.write(f"{reply.text}\n")
        if reply.run_id:
            self.drive(reply.run_id)
        return True

    def reattach(self, thread: Thread) -> None:
        """Show the transcript so far; follow (and answer) the thread's active run."""
        self.thread_id = thread.pk
        self.write(f"thread {thread.pk} ({thread.agent})\n")
        active = thread.active_run_id
        for message in Message.objects.filter(thread=thread).order_by("seq"):
            if message.run_id == active and message.role != Role.USER:
                continue  # the active run's steps are replayed from its frames below
            self.write(_transcript_line(message))
        if active is not None:
            self.drive(active)

    def drive(self, run_id: str) -> None:
        """Follow the run, settling every card this person may settle, until it ends."""
        follower = RunFollower(run_id)
        self.write("agent> ")
        while True:
            run = follower.follow(self.write)
            if run.status != RunStatus.WAITING:
                return
            calls = pending_calls(run.pk)
            if not calls:
                self.write(f"\n[run blocked: {run.error_code}; a person must resolve it]\n")
                return
            for call in calls:
                self.settle(run, call)

    def settle(self, run: Run, call: ToolCall) -> None:
        """Ask about one pending call; wait for its approver if that is somebody else."""
        policy = get_policy()
        if call.status == CallStatus.PENDING_INPUT:
            if policy.can_answer(self.actor, call):
                self.ask(run, call)
                return
        else:
            self.write(_card(call))
            if policy.can_decide(self.actor, call):
                self.decide(call)
                return
        self.write(
            f"waiting for {call.approver or 'the requester'} to decide {call.pk} "
            "(console, REST or `manage.py agent approve`)...\n"
        )
        settled = wait_until_settled(call.pk)
        self.write(f"  {settled.status}\n")

    def decide(self, call: ToolCall) -> None:
        while True:
            verb, _, rest = self.read(DECISION_PROMPT).strip().partition(" ")
            try:
                match verb.lower():
                    case "approve" | "a" | "y" | "yes":
                        remember = rest.strip().lower() in ("remember", "--remember")
                        port.approve(call.pk, actor=self.actor, via="cli", remember=remember)
                    case "reject" | "r" | "n" | "no":
                        port.reject(call.pk, actor=self.actor, reason=rest.strip(), via="cli")
                    case "edit" | "e":
                        args = json.loads(rest)
                        if not isinstance(args, dict):
                            raise ValueError("edited arguments must be a JSON object")
                        port.approve(call.pk, actor=self.actor, via="cli", args=args)
                    case _:
                        self.write(
                            "type approve (or approve remember), reject <reason> "
                            "or edit <json args>\n"
                        )
                        continue
            except (ValueError, AgentCoreError) as exc:
                self.write(f"  {_refusal(exc)}\n")
                if _final(exc):
                    return  # decided elsewhere, expired, or the run is gone: nothing to retry
                continue
            return

    def ask(self, run: Run, call: ToolCall) -> None:
        tool = get_agent(call.run.agent).get_tool(call.tool_name)  # a child run's call too
        schema = tool.answer_schema or {}
        question = tool.prompt or str(call.args.get("question", "")) or shown(call.args)
        self.write(f"\n? {question}\n")
        while True:
            text = self.read(ANSWER_PROMPT).strip()
            try:
                port.answer(call.pk, actor=self.actor, answer=_answer(schema, text), via="cli")
            except (ValueError, AgentCoreError) as exc:
                self.write(f"  {_refusal(exc)}\n")
                if _final(exc):
                    return
                continue
            return


def _answer(schema: dict[str, Any], text: str) -> Any:
    """A typed line as an answer: the one text field of a simple form, else JSON."""
    fields = schema.get("properties", {})
    if len(fields) == 1:
        [(name, spec)] = fields.items()
        if spec.get("type") == "string":
            return {name: text}
    return json.loads(text)


def _card(call: ToolCall) -> str:
    lines = [f"\n[approval needed] {call.tool_name} {shown(call.args)}  ({call.pk})"]
    if call.run.parent_run_id is not None:  # a child run's card (SPEC §14)
        lines.append(f"  asked by: {' → '.join(delegation.chain_of(call.run))}")
    if call.confirmation:
        lines.append(f"  {call.confirmation}")
    expiry = f", expires {call.expires_at:%Y-%m-%d %H:%M:%S %Z}" if call.expires_at else ""
    lines.append(f"  approver: {call.approver}{expiry}")
    return "\n".join(lines) + "\n"


def _transcript_line(message: Message) -> str:
    match message.role:
        case Role.USER:
            return f"you> {message.text}\n"
        case Role.ASSISTANT:
            calls = [p for p in message.content if p.get("type") == "tool_call"]
            text = message.text + "".join(render("tool-input-available", _input(p)) for p in calls)
            return f"agent> {text}\n"
    return "".join(render("tool-output", {"output": p.get("output")}) for p in message.content)


def _input(part: dict[str, Any]) -> dict[str, Any]:
    return {"tool_name": part.get("name"), "input": part.get("args")}


def _final(exc: Exception) -> bool:
    """A refusal that asking again cannot fix: decided elsewhere, expired, run gone, not yours."""
    return isinstance(exc, AgentCoreError) and not isinstance(exc, InvalidDecision)


def _refusal(exc: Exception) -> str:
    if isinstance(exc, AgentCoreError):
        details = f" {shown(exc.errors)}" if exc.errors else ""
        return f"refused ({exc.code}): {exc.message}{details}"
    return f"not understood: {exc}"
