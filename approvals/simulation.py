"""Policy simulation (SPEC §19): what a candidate policy would have asked of recorded calls.

Every recorded action call since a time is put to the candidate's ``requirement_for`` and its
answer compared with the one stamped on the call then: required or not, approver, ttl, quorum.
Read-only: the replay runs in a ``READ ONLY`` transaction (a policy that writes fails, and nothing
is kept); the calls are streamed through a server-side cursor, grouped in SQL by everything the
policy is asked about, so a policy is asked once per distinct (agent, tool, args, requester,
thread owner) and the count carried. The actor is the requester with the roles its run recorded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils.module_loading import import_string

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.exceptions import AgentCoreError
from agent_core.models import Thread
from agent_core.tools import ToolSpec

from . import sql
from .policy import ApprovalPolicy
from .requirement import Requirement

# What may change between the recorded requirement and the candidate's.
ASPECTS = ("required", "approver", "ttl", "quorum")
CHUNK = 5000


@dataclass
class Report:
    """Counts by (tool, approver then): calls, calls whose requirement changes, and per aspect."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    changed: Counter[tuple[str, str]] = field(default_factory=Counter)
    aspects: dict[str, Counter[tuple[str, str]]] = field(
        default_factory=lambda: {a: Counter() for a in ASPECTS}
    )
    unknown_tools: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        groups = [
            {
                "tool": tool,
                "approver": approver,
                "calls": n,
                "changed": self.changed[(tool, approver)],
                "changes": {a: self.aspects[a][(tool, approver)] for a in ASPECTS},
            }
            for (tool, approver), n in sorted(self.calls.items())
        ]
        return {
            "calls": sum(self.calls.values()),
            "changed": sum(self.changed.values()),
            "groups": groups,
            "unknown_tools": dict(self.unknown_tools),
        }

    def text(self) -> str:
        data = self.as_dict()
        lines = [f"{data['changed']} of {data['calls']} action calls would change"]
        lines.append("tool\tapprover\tcalls\tchanged\t" + "\t".join(ASPECTS))
        for g in data["groups"]:
            counts = "\t".join(str(g["changes"][a]) for a in ASPECTS)
            lines.append(
                f"{g['tool']}\t{g['approver'] or '-'}\t{g['calls']}\t{g['changed']}\t{counts}"
            )
        for tool, n in sorted(self.unknown_tools.items()):
            lines.append(f"{tool}: {n} calls of a tool no agent declares now (not simulated)")
        return "\n".join(lines)


def simulate(policy_path: str, *, since: datetime) -> Report:
    """Replay the action calls recorded since ``since`` through the policy at ``policy_path``."""
    policy: ApprovalPolicy = import_string(policy_path)()
    report = Report()
    tools: dict[tuple[str, str], ToolSpec | None] = {}
    with transaction.atomic():
        connection.cursor().execute("SET TRANSACTION READ ONLY")
        with connection.connection.cursor(name="approvals_simulate") as cursor:
            cursor.itersize = CHUNK
            cursor.execute(sql.SIMULATED_CALLS, {"since": since})
            for row in cursor:
                _count(report, policy, tools, row)
        transaction.set_rollback(True)  # nothing a policy did is kept
    return report


def _count(
    report: Report,
    policy: ApprovalPolicy,
    tools: dict[tuple[str, str], ToolSpec | None],
    row: tuple[Any, ...],
) -> None:
    agent, tool_name, args, requester, roles, owner, required, approver, ttl, needed, n = row
    key = (tool_name, approver if required else "")
    report.calls[key] += n
    if (agent, tool_name) not in tools:
        tools[(agent, tool_name)] = _tool(agent, tool_name)
    tool = tools[(agent, tool_name)]
    if tool is None:
        report.unknown_tools[tool_name] += n
        return
    args = args if isinstance(args, dict) else {}
    actor = Actor(ref=requester, roles=frozenset(roles or ()))
    wanted = policy.requirement_for(tool, args, actor, Thread(owner_ref=owner))
    changes = _changes(wanted, required=required, approver=approver, ttl=ttl, quorum=needed)
    if changes:
        report.changed[key] += n
    for aspect in changes:
        report.aspects[aspect][key] += n


def _changes(
    wanted: Requirement, *, required: bool, approver: str, ttl: int | None, quorum: int
) -> list[str]:
    if not wanted.required or not required:
        return ["required"] if wanted.required != required else []
    wanted_ttl = round(wanted.ttl.total_seconds()) if wanted.ttl else None
    now = {"approver": approver, "ttl": ttl, "quorum": quorum}
    then = {"approver": wanted.stored_approver, "ttl": wanted_ttl, "quorum": wanted.quorum}
    return [a for a in ("approver", "ttl", "quorum") if now[a] != then[a]]


def _tool(agent: str, tool_name: str) -> ToolSpec | None:
    try:
        return get_agent(agent).get_tool(tool_name)
    except AgentCoreError:
        return None
