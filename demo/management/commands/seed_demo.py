"""``manage.py seed_demo``: demo users, groups, customers, orders and campaigns, and one
narrowed grant with the evidence of its decision (safe to rerun)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

from agent_core import runs
from agent_core.actors import actor_for_user
from agent_core.dispatch import get_runner, set_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from approvals import grants
from approvals import services as port
from approvals.models import RememberedApproval
from demo.models import Campaign, Customer, Order

PASSWORD = "demo"
USERS = [
    # username, groups, staff: a requester, a finance approver, an operator who also does marketing,
    # and a second marketer (a campaign needs two marketing approvals)
    ("alice", [], False),
    ("fran", ["finance"], True),
    ("otto", ["operator", "marketing"], True),
    ("mia", ["marketing"], True),
]
CUSTOMERS = [
    # email, name, city, vip, opted in to marketing
    ("maria@example.com", "Maria Rossi", "Milan", True, True),
    ("li@example.com", "Li Wei", "Singapore", False, True),
    ("sam@example.com", "Sam Okafor", "Lagos", False, True),
    ("ines@example.com", "Inès Martin", "Lyon", True, True),
    ("jon@example.com", "Jon Berg", "Oslo", False, False),
    ("ana@example.com", "Ana Souza", "Recife", False, True),
    ("kenji@example.com", "Kenji Sato", "Osaka", True, True),
    ("olivia@example.com", "Olivia Brown", "Leeds", False, True),
]
ORDERS = [
    # id, customer, total, status
    ("A-1001", "maria@example.com", "59.90", "delivered"),
    ("A-1002", "li@example.com", "12.50", "delivered"),
    ("A-1003", "sam@example.com", "240.00", "delivered"),
    ("A-1004", "ines@example.com", "18.00", "delivered"),
    ("A-1005", "ana@example.com", "89.00", "shipped"),
    ("A-1006", "kenji@example.com", "1249.00", "delivered"),
    ("A-1007", "olivia@example.com", "34.95", "returned"),
    ("A-1008", "maria@example.com", "7.99", "delivered"),
]


# The narrowed grant the demo shows (docs/howto/grants.md): alice purged /products/shoes and
# let later purges of /products/* in that thread run without asking, 5 times.
PURGE = '/call purge_cache {"path": "/products/shoes"}'
PRODUCTS = grants.Scope(args={"path": "/products/*"}, uses=5)


class Command(BaseCommand):
    help = "Create the demo users, groups, customers, orders and campaigns, and a narrowed grant."

    def handle(self, *args: Any, **options: Any) -> None:
        self.seed()
        self.narrowed_grant()
        self.stdout.write(self.style.SUCCESS("Demo data ready."))

    def narrowed_grant(self) -> None:
        """alice's purge of /products/shoes, approved with a grant for ``/products/*`` (5 uses):
        a grant to list and its decision's evidence (``manage.py approvals export_audit``)."""
        alice = User.objects.get(username="alice")
        if RememberedApproval.objects.filter(arg_pins=PRODUCTS.args).exists():
            return
        actor = actor_for_user(alice)
        previous = get_runner()
        set_runner(InlineRunner(workers=0))  # the run is driven here, whatever the demo's runner
        try:
            run = runs.start_run(agent="support", message=PURGE, actor=actor)
            call = ToolCall.objects.get(run=run, tool_name="purge_cache")
            port.approve(call.pk, actor=actor, remember=PRODUCTS, via="cli")
        finally:
            set_runner(previous)

    @transaction.atomic
    def seed(self) -> None:
        for username, groups, staff in USERS:
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(PASSWORD)
            user.is_staff = staff
            user.email = (
                f"{username}@airlock.example"  # the demo's notifications go to the terminal
            )
            user.save()
            user.groups.set(Group.objects.get_or_create(name=g)[0] for g in groups)
        for email, name, city, vip, opt_in in CUSTOMERS:
            Customer.objects.update_or_create(
                pk=email,
                defaults={"name": name, "city": city, "vip": vip, "marketing_opt_in": opt_in},
            )
        for order_id, email, total, status in ORDERS:
            Order.objects.update_or_create(
                pk=order_id,
                defaults={"customer_email": email, "total": Decimal(total), "status": status},
            )
        vips = Customer.objects.filter(vip=True, marketing_opt_in=True).count()
        Campaign.objects.update_or_create(
            pk="spring-sale",
            defaults={"subject": "Spring sale: 20% off everything", "audience_size": 40_000},
        )
        Campaign.objects.update_or_create(
            pk="vip-preview",
            defaults={"subject": "VIP preview: the summer collection", "audience_size": vips},
        )
