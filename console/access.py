"""Who may open the console: staff users and members of ``AIRLOCK_CONSOLE["ROLES"]``.

What a user may *decide* is not decided here: that is the approval policy's ``can_decide``,
asked by the approval port on every decision.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse

from .conf import console_settings

View = Callable[..., HttpResponseBase]


def has_console_access(user: Any) -> bool:
    """Staff, or a member of one of the configured console roles."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_staff:
        return True
    return bool(user.groups.filter(name__in=console_settings().ROLES).exists())


def may_browse_admin(user: Any) -> bool:
    """Staff who hold a console role (or superusers) browse the read-only admin of our models;
    staff without one see their own runs in the console only."""
    if not user.is_authenticated or not user.is_active or not user.is_staff:
        return False
    if user.is_superuser:
        return True
    return bool(user.groups.filter(name__in=console_settings().ROLES).exists())


def console_view(view: View) -> View:
    """Require a logged-in user with console access: anonymous users go to the login page,
    others get a 403 page that says why."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("console:login"))
        if not has_console_access(request.user):
            return render(request, "console/no_access.html", status=403)
        return view(request, *args, **kwargs)

    return wrapped
