"""``manage.py seed_demo_grant``: the demo's narrowed grant and the evidence of its decision
(after ``seed_demo``; safe to rerun). alice purged ``/products/shoes`` and let later purges of
``/products/*`` in that thread run without asking, 5 times (docs/howto/grants.md)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from agent_core.actors import actor_for_user
from agent_core.engine import runs
from agent_core.engine.dispatch import get_runner, set_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from approvals import grants
from approvals import services as port
from approvals.models import RememberedApproval

PURGE = '/call purge_cache {"path": "/products/shoes"}'
PRODUCTS = grants.Scope(args={"path": "/products/*"}, uses=5)


class Command(BaseCommand):
    help = "Seed the demo's narrowed grant (purge_cache for /products/*, 5 uses)."

    def handle(self, *args: Any, **options: Any) -> None:
        if RememberedApproval.objects.filter(arg_pins=PRODUCTS.args).exists():
            self.stdout.write("The narrowed grant is there already.")
            return
        actor = actor_for_user(User.objects.get(username="alice"))
        previous = get_runner()
        set_runner(InlineRunner(workers=0))  # the run is driven here, whatever the demo's runner
        try:
            run = runs.start_run(agent="support", message=PURGE, actor=actor)
            call = ToolCall.objects.get(run=run, tool_name="purge_cache")
            port.approve(call.pk, actor=actor, remember=PRODUCTS, via="cli")
        finally:
            set_runner(previous)
        self.stdout.write(self.style.SUCCESS(f"Narrowed grant seeded (approved {call.pk})."))
