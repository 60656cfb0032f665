"""``manage.py airlock_mcp --as <user>``: the approvals MCP server over stdio, for an approver's
MCP client (Claude Desktop, an IDE) that starts it as a command (``approvals.mcp_server``).

It acts as that Django user: whoever may start this command may decide as them, as with
``manage.py agent approve --as``. With the inline runner, the runs it resumes are driven in this
process, which lives as long as the client keeps it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agent_core.cli.session import actor_named
from approvals.mcp_server import build


class Command(BaseCommand):
    help = "Serve pending approvals to an MCP client over stdio, as one Django user."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--as", dest="username", required=True, help="decide as this user")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        actor = actor_named(username)
        build(lambda ctx: actor).run("stdio")
