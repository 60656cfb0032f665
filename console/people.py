"""Showing actor refs (``user:<pk>``, ``system``) as the names operators know."""

from __future__ import annotations

from django.contrib.auth import get_user_model


def name_of(ref: str) -> str:
    """The username behind ``user:<pk>``; any other ref (or an unknown user) as it is."""
    kind, _, key = ref.partition(":")
    if kind == "user" and key.isdigit():
        user = get_user_model().objects.filter(pk=int(key)).first()
        if user is not None:
            return user.get_username()
    return ref or "nobody"


def ref_of(text: str) -> str:
    """What an operator typed in a filter (a username or an actor ref) as an actor ref."""
    if ":" in text or text == "system":
        return text
    user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: text}).first()
    return f"user:{user.pk}" if user is not None else text
