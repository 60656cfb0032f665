"""Who may open which console pages.

* Any logged-in, active user (a *requester*) opens the pages of a call they may decide or
  answer: the inbox, a call's card, its decisions, and *My requests* (``member_view``).
* Staff users and members of ``AIRLOCK_CONSOLE["ROLES"]`` (*operators*) open every page,
  including runs, audit, metrics, notifications, in doubt and remembered (``console_view``).

What a user may *see* and *decide* is not decided here: what they see is the API's rule
(``approvals.guards.may_see``: an unseen call is a 404), and what they decide is the approval
policy's ``can_decide``, asked by the approval port on every decision.
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
from django.views.decorators.gzip import gzip_page

from agent_core.actors import ROLES_ATTRIBUTE

from .conf import console_settings

View = Callable[..., HttpResponseBase]


def has_console_access(user: Any) -> bool:
    """Staff, or a member of one of the configured console roles."""
    if not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_staff) or _holds_console_role(user)


def is_member(user: Any) -> bool:
    """Any logged-in, active user: what they may see and decide is the policy's to say."""
    return bool(user.is_authenticated and user.is_active)


def may_browse_admin(user: Any) -> bool:
    """Staff who hold a console role (or superusers) browse the read-only admin of our models;
    staff without one see their own runs in the console only."""
    if not user.is_authenticated or not user.is_active or not user.is_staff:
        return False
    return bool(user.is_superuser) or _holds_console_role(user)


def _holds_console_role(user: Any) -> bool:
    roles = getattr(user, ROLES_ATTRIBUTE, None)
    if roles is None:
        return bool(user.groups.filter(name__in=console_settings().ROLES).exists())
    return not roles.isdisjoint(console_settings().ROLES)


def _remember_roles(user: Any) -> None:
    """Read the user's groups once for this request and keep them on its user, where access,
    the admin link and the actor (``actor_for_user``) find them: a page asked for them up to
    three times. Only on a request's user, which lives as long as the request (a WebSocket's
    lives as long as the connection, and reads them anew each time)."""
    roles = frozenset(user.groups.values_list("name", flat=True))
    setattr(user, ROLES_ATTRIBUTE, roles)


def _gated(may_enter: Callable[[Any], bool]) -> Callable[[View], View]:
    """A decorator that sends anonymous users to the login page and gives those ``may_enter``
    refuses a 403 page that says why. Pages and fragments are compressed for clients that
    accept it (Django's ``GZipMiddleware``, which pads against BREACH), whatever the project's
    middleware."""

    def decorate(view: View) -> View:
        @gzip_page
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path(), reverse("console:login"))
            _remember_roles(request.user)
            if not may_enter(request.user):
                return render(request, "console/no_access.html", status=403)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


console_view = _gated(has_console_access)
"""The operators' pages: staff and console roles."""

member_view = _gated(is_member)
"""The pages of a call its requester or approver may act on: any logged-in, active user."""
