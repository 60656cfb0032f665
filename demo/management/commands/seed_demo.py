"""``manage.py seed_demo``: demo users, groups, orders and a campaign (safe to run again)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

from demo.models import Campaign, Order

PASSWORD = "demo"
USERS = [
    # username, groups, staff: a requester, a finance approver, an operator
    ("alice", [], False),
    ("fran", ["finance"], True),
    ("otto", ["operator", "marketing"], True),
]
ORDERS = [
    ("A-1001", "maria@example.com", "59.90"),
    ("A-1002", "li@example.com", "12.50"),
    ("A-1003", "sam@example.com", "240.00"),
]


class Command(BaseCommand):
    help = "Create the demo users, groups, orders and campaign."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        for username, groups, staff in USERS:
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(PASSWORD)
            user.is_staff = staff
            user.save()
            user.groups.set(Group.objects.get_or_create(name=g)[0] for g in groups)
        for order_id, email, total in ORDERS:
            Order.objects.update_or_create(
                pk=order_id, defaults={"customer_email": email, "total": Decimal(total)}
            )
        Campaign.objects.update_or_create(
            pk="spring-sale",
            defaults={"subject": "Spring sale: 20% off everything", "audience_size": 40_000},
        )
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
