"""``manage.py approvals verify_audit | export_audit | simulate``: governance from the shell.

- ``verify_audit`` recomputes the decision attempts' hash chain and names the first row that
  breaks it (exit 1), or says how many rows it checked.
- ``export_audit [--since 30d]`` writes the chained attempts as JSON lines, for an auditor.
- ``simulate <dotted.policy> [--since 30d] [--json]`` replays recorded action calls through a
  candidate policy (read-only) and counts what would change (``approvals.simulation``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from agent_core.cli.ages import parse_age
from approvals import evidence, simulation


class Command(BaseCommand):
    help = "Verify or export the decision audit, or simulate a candidate approval policy."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True)
        sub.add_parser("verify_audit", help="recompute the attempts' hash chain")
        export = sub.add_parser("export_audit", help="the attempts as JSON lines")
        export.add_argument("--since", help="only attempts newer than this age (e.g. 30d)")
        simulate = sub.add_parser("simulate", help="replay recorded calls through a policy")
        simulate.add_argument("policy", help="the candidate policy's dotted path")
        simulate.add_argument("--since", default="30d", help="calls newer than this age")
        simulate.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args: Any, command: str, **options: Any) -> None:
        match command:
            case "verify_audit":
                self.verify_audit()
            case "export_audit":
                self.export_audit(options.get("since"))
            case "simulate":
                self.simulate(options["policy"], options["since"], as_json=options["json"])

    def verify_audit(self) -> None:
        checked = 0

        def counted() -> Any:
            nonlocal checked
            for row in evidence.chained():
                checked += 1
                yield row

        broken = evidence.verify(counted())
        if broken is not None:
            raise CommandError(
                f"the audit chain breaks at row {broken.seq} (id {broken.attempt_id}): "
                f"{broken.reason}"
            )
        self.stdout.write(f"the audit chain is whole: {checked} rows")

    def export_audit(self, since: str | None) -> None:
        cutoff = timezone.now() - _age(since) if since else None
        for row in evidence.chained():
            if cutoff is None or row.created_at >= cutoff:
                self.stdout.write(json.dumps(evidence.exported(row), ensure_ascii=False))

    def simulate(self, policy: str, since: str, *, as_json: bool) -> None:
        report = simulation.simulate(policy, since=timezone.now() - _age(since))
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self.stdout.write(report.text())


def _age(text: str) -> Any:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
