"""``manage.py seed_demo``: demo users, groups, customers, orders and campaigns (safe to rerun)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

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


class Command(BaseCommand):
    help = "Create the demo users, groups, customers, orders and campaigns."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
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
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
