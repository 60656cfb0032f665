"""``manage.py agent``: chat, invoke, pending, approve, reject, answer, mark-done,
mark-not-done, cleanup, tools.

It lives in the ``approvals`` app because its decisions go through the approval port
(``approvals.services``, with ``via="cli"``) and ``agent_core`` never imports ``approvals``;
the core-only parts are in ``agent_core/cli/``. Exit codes: 0 done, 1 refused or failed,
2 bad usage, 3 (``invoke``) the run waits on a person, 4 (``invoke``) a quota refused the start
or stopped the run.
"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_core.choices import CALL_PENDING
from agent_core.cli.ages import parse_age
from agent_core.cli.follow import shown
from agent_core.cli.invoke import ExitCode, invoke
from agent_core.cli.session import actor_named, finish_driving, refused
from agent_core.conversation import idempotency
from agent_core.conversation.retention import delete_finished_threads, finished_threads
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall
from approvals import coverage, grants, selectors
from approvals import services as port
from approvals.chat import Chat


class Command(BaseCommand):
    help = "Talk to agents and decide their pending calls from the terminal."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, parser_class=ArgumentParser)

        def actor_option(p: ArgumentParser, *, required: bool = True) -> None:
            p.add_argument(
                "--as", dest="username", required=required, help="act as this Django user"
            )

        chat = sub.add_parser("chat", help="interactive chat; asks on every card")
        chat.add_argument("agent")
        chat.add_argument("--thread", help="continue (or reattach to) this thread")
        actor_option(chat)

        run = sub.add_parser("invoke", help="one turn; exit 3 if it waits on a person")
        run.add_argument("agent")
        run.add_argument("message")
        run.add_argument("--thread", help="continue this thread")
        actor_option(run)

        pending = sub.add_parser("pending", help="calls waiting on a person")
        actor_option(pending, required=False)

        approve = sub.add_parser("approve", help="approve a pending call")
        approve.add_argument("tool_call_id")
        approve.add_argument("--remember", action="store_true", help="for the rest of the thread")
        approve.add_argument(
            "--pin",
            dest="pins",
            action="append",
            default=[],
            metavar="FIELD=VALUE",
            help="remember only for calls whose FIELD matches VALUE (JSON, or a glob); repeatable",
        )
        approve.add_argument("--uses", type=int, help="remember for at most this many calls")
        approve.add_argument("--ttl", type=int, help="remember for this many seconds at most")
        approve.add_argument(
            "--args", dest="edited", help="approve with these edited JSON arguments"
        )
        actor_option(approve)

        reject = sub.add_parser("reject", help="reject a pending call")
        reject.add_argument("tool_call_id")
        reject.add_argument("--reason", required=True, help="told to the model")
        actor_option(reject)

        answer = sub.add_parser("answer", help="answer a human tool's question")
        answer.add_argument("tool_call_id")
        answer.add_argument("answer", help="the text, or a JSON object for a richer form")
        actor_option(answer)

        done = sub.add_parser("mark-done", help="an in-doubt call did happen")
        done.add_argument("tool_call_id")
        done.add_argument("--result", help="what the model is told it returned (JSON)")
        actor_option(done)

        not_done = sub.add_parser("mark-not-done", help="an in-doubt call did not: run it again")
        not_done.add_argument("tool_call_id")
        actor_option(not_done)

        sub.add_parser(
            "tools", help="every tool every agent can reach: kind, approval mode, requirement"
        )

        cleanup = sub.add_parser("cleanup", help="delete old finished threads")
        cleanup.add_argument("--older-than", default="30d", help="e.g. 30d, 12h (default 30d)")
        cleanup.add_argument("--dry-run", action="store_true", help="only count them")

    def handle(self, *args: Any, **options: Any) -> None:
        action: str = options["action"]
        handler = getattr(self, f"do_{action.replace('-', '_')}")
        handler(**options)

    def out(self, text: str) -> None:
        self.stdout.write(text)

    def err(self, text: str) -> None:
        self.stderr.write(text)

    def do_chat(self, *, agent: str, username: str, thread: str | None, **_: Any) -> None:
        def write(text: str) -> None:
            self.stdout.write(text, ending="")
            self.stdout.flush()

        Chat(agent, actor_named(username), write=write, read=input).run(thread)
        finish_driving()

    def do_invoke(
        self, *, agent: str, message: str, username: str, thread: str | None, **_: Any
    ) -> None:
        code = invoke(
            agent,
            message,
            actor=actor_named(username),
            thread_id=thread,
            out=self.out,
            err=self.err,
        )
        if code != ExitCode.COMPLETED:
            self.stdout.flush()
            sys.exit(code)

    def do_pending(self, *, username: str | None, **_: Any) -> None:
        calls = (
            selectors.pending_for(actor_named(username))
            if username
            else ToolCall.objects.filter(status__in=CALL_PENDING).order_by("requested_at", "id")
        )
        rows = list(calls)
        if not rows:
            self.out("nothing is waiting")
        for call in rows:
            who = "answer" if call.status == "pending_input" else f"approver={call.approver}"
            expires = f"\texpires={call.expires_at:%Y-%m-%dT%H:%M:%SZ}" if call.expires_at else ""
            self.out(
                f"{call.pk}\t{call.tool_name}\t{shown(call.args)}\t{who}"
                f"\trequester={call.requester_ref}\tthread={call.thread_id}{expires}"
            )

    def do_approve(
        self,
        *,
        tool_call_id: str,
        username: str,
        remember: bool,
        edited: str | None,
        pins: list[str],
        uses: int | None,
        ttl: int | None,
        **_: Any,
    ) -> None:
        args = _json_object(edited, "--args") if edited is not None else None
        actor = actor_named(username)
        scoped = bool(pins) or uses is not None or ttl is not None
        self._decided(
            tool_call_id,
            lambda: port.approve(
                tool_call_id,
                actor=actor,
                remember=_scope(pins, uses, ttl) if scoped else remember,
                via="cli",
                args=args,
            ),
        )

    def do_reject(self, *, tool_call_id: str, username: str, reason: str, **_: Any) -> None:
        actor = actor_named(username)
        self._decided(
            tool_call_id, lambda: port.reject(tool_call_id, actor=actor, reason=reason, via="cli")
        )

    def do_answer(self, *, tool_call_id: str, username: str, answer: str, **_: Any) -> None:
        try:
            value: Any = json.loads(answer)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            value = {"answer": answer}  # the plain text form of ``human_tool``'s default answer
        actor = actor_named(username)
        self._decided(
            tool_call_id, lambda: port.answer(tool_call_id, actor=actor, answer=value, via="cli")
        )

    def do_mark_done(
        self, *, tool_call_id: str, username: str, result: str | None, **_: Any
    ) -> None:
        value = _json(result, "--result") if result is not None else None
        actor = actor_named(username)
        self._decided(
            tool_call_id,
            lambda: port.mark_done(tool_call_id, actor=actor, result=value, via="cli"),
        )

    def do_mark_not_done(self, *, tool_call_id: str, username: str, **_: Any) -> None:
        actor = actor_named(username)
        self._decided(
            tool_call_id, lambda: port.mark_not_done(tool_call_id, actor=actor, via="cli")
        )

    def _decided(self, tool_call_id: str, decide: Any) -> None:
        try:
            outcome = decide()
        except AgentCoreError as exc:
            raise refused(exc) from exc
        self.out(f"{tool_call_id}: {outcome.result.value}")
        self.stdout.flush()
        # With the inline runner this process drives the resumed run: to its next wait or end.
        finish_driving(ToolCall.objects.get(pk=tool_call_id).run_id)

    def do_tools(self, **_: Any) -> None:
        for line in coverage.table(coverage.reachable()):
            self.out(line)

    def do_cleanup(self, *, older_than: str, dry_run: bool, **_: Any) -> None:
        try:
            age = parse_age(older_than)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if dry_run:
            self.out(f"{len(finished_threads(age))} finished threads are older than {older_than}")
            return
        counts = delete_finished_threads(age)
        threads = counts.get("agent_core.Thread", 0)
        details = ", ".join(f"{n} {label}" for label, n in sorted(counts.items()) if n)
        self.out(f"deleted {threads} threads" + (f" ({details})" if details else ""))
        self.out(f"deleted {idempotency.delete_expired()} expired idempotency keys")


def _json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not JSON: {exc}") from exc


def _scope(pins: list[str], uses: int | None, ttl: int | None) -> grants.Scope:
    """The scope of ``--pin FIELD=VALUE`` (a VALUE that is not JSON is a string or glob),
    ``--uses`` and ``--ttl``; refused by the port's own check when malformed."""
    pinned: dict[str, Any] = {}
    for pin in pins:
        name, equals, text = pin.partition("=")
        if not equals:
            raise CommandError(f"--pin {pin!r}: give FIELD=VALUE")
        try:
            pinned[name] = json.loads(text)
        except json.JSONDecodeError:
            pinned[name] = text
    return grants.parse({"args": pinned, "uses": uses, "ttl": ttl})


def _json_object(text: str, option: str) -> dict[str, Any]:
    value = _json(text, option)
    if not isinstance(value, dict):
        raise CommandError(f"{option} must be a JSON object")
    return value
