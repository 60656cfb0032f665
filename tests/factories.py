"""Factories for the rows tests start from, exposed as fixtures in ``tests/conftest.py``
(``user_factory``, ``people``, ``turn``), as allauth's ``tests/conftest.py`` does.

Runs and their tool calls are made the way the product makes them, through ``start_run`` (the
``turn`` fixture): the factories here make what the product does not, the people.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User

# Every factory-made user's password (the browser tests log in through the form with it).
PASSWORD = "pw"


def make_user(username: str, *roles: str, staff: bool = False, **fields: Any) -> User:
    """A user in the groups named ``roles`` (created as needed); ``fields``: more of ``User``."""
    user = User.objects.create_user(username=username, password=PASSWORD, is_staff=staff, **fields)
    user.groups.set(Group.objects.get_or_create(name=role)[0] for role in roles)
    return user


def make_people() -> dict[str, User]:
    """The cast of the tests: alice and bob, requesters without a role; fran and felix, finance
    approvers (staff: they may open the console); otto, an operator (the console's role), not in
    finance."""
    return {
        "alice": make_user("alice"),
        "bob": make_user("bob"),
        "fran": make_user("fran", "finance", staff=True),
        "felix": make_user("felix", "finance", staff=True),
        "otto": make_user("otto", "operator"),
    }
