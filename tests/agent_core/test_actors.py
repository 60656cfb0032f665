"""Actors: the header resolver and its system check, the default resolver over DRF, and the
generic 500 body."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.test import RequestFactory, override_settings
from rest_framework.authtoken.models import Token
from rest_framework.request import Request
from rest_framework.test import APIClient

from agent_core.actors import Actor, DevelopmentResolver, HeaderResolver, actor_for_user
from agent_core.api.auth import TokenAuthentication
from agent_core.api.errors import exception_handler
from agent_core.checks import check_header_actor
from agent_core.models import Thread

HEADER = {"ACTOR_RESOLVER": "agent_core.actors.HeaderResolver", "AGENTS": []}


@override_settings(DEBUG=True)
def test_the_header_resolver_reads_id_and_roles():
    request = RequestFactory().get(
        "/", HTTP_X_ACTOR_ID="user:fran", HTTP_X_ACTOR_ROLE="finance, ops,"
    )
    assert HeaderResolver().resolve(request) == Actor("user:fran", frozenset({"finance", "ops"}))
    assert HeaderResolver().resolve(RequestFactory().get("/")) is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("debug", "allowed", "status"), [(False, False, 401), (False, True, 200), (True, False, 200)]
)
def test_the_header_resolver_itself_refuses_with_debug_off(debug, allowed, status):
    """Whatever process serves the request (not only ``manage.py check``): no header actor
    with DEBUG off unless explicitly allowed."""
    agent = {**HEADER, "ALLOW_HEADER_ACTOR": allowed}
    dev = {**agent, "ACTOR_RESOLVER": "agent_core.actors.DevelopmentResolver"}
    for resolver in (agent, dev):
        with override_settings(DEBUG=debug, AGENT=resolver):
            response = APIClient().get(
                "/agent/threads", HTTP_X_ACTOR_ID="user:fran", HTTP_X_ACTOR_ROLE="finance"
            )
        assert response.status_code == status


@pytest.mark.parametrize(
    ("debug", "agent", "refused"),
    [
        (False, HEADER, True),
        (False, {**HEADER, "ALLOW_HEADER_ACTOR": True}, False),
        (True, HEADER, False),
        (False, {"AGENTS": []}, False),
    ],
)
def test_the_header_resolver_is_refused_with_debug_off(debug, agent, refused):
    with override_settings(DEBUG=debug, AGENT=agent):
        errors = check_header_actor()
    assert [e.id for e in errors] == (["agent_core.E004"] if refused else [])


@pytest.mark.django_db
def test_the_default_resolver_uses_token_and_session_auth_with_groups_as_roles():
    alice = User.objects.create_user("alice", password="x")
    alice.groups.add(Group.objects.create(name="operator"))
    Thread.objects.create(owner_ref=f"user:{alice.pk}", agent="support")
    Thread.objects.create(owner_ref="user:someone-else", agent="support")
    token = Token.objects.create(user=alice)
    client = APIClient()
    assert client.get("/agent/threads").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert len(client.get("/agent/threads").json()["results"]) == 1
    assert len(client.get("/agent/runs").json()["results"]) == 0
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert client.get("/agent/threads").json()["code"] == "not_authenticated"
    session = APIClient()
    session.force_login(alice)
    assert session.get("/agent/threads").status_code == 200


@pytest.mark.django_db
def test_a_token_brings_its_user_and_the_users_roles_in_one_query(django_assert_num_queries):
    alice = User.objects.create_user("alice")
    alice.groups.add(Group.objects.create(name="finance"), Group.objects.create(name="ops"))
    bob = User.objects.create_user("bob")  # no group: no role
    for person, roles in ((alice, {"finance", "ops"}), (bob, set())):
        key = Token.objects.create(user=person).key
        request = Request(RequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {key}"))
        with django_assert_num_queries(1):
            found = TokenAuthentication().authenticate(request)
            assert found is not None
            user, token = found
            assert actor_for_user(user) == Actor(f"user:{person.pk}", frozenset(roles))
        assert (user, token.key, token.user) == (person, key, person)


@pytest.mark.django_db
def test_an_unknown_token_or_an_inactive_users_is_refused():
    alice = User.objects.create_user("alice", is_active=False)
    client = APIClient()
    for key in ("wrong", Token.objects.create(user=alice).key):
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        response = client.get("/agent/threads")
        assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")


@pytest.mark.parametrize(("expose", "detail"), [(False, "Internal server error."), (True, "boom")])
def test_an_unexpected_error_is_a_generic_500_in_production(expose, detail):
    context: dict[str, Any] = {}
    with override_settings(AGENT={"AGENTS": [], "EXPOSE_ERROR_DETAILS": expose}):
        response = exception_handler(RuntimeError("boom"), context)
    assert response is not None and response.status_code == 500
    assert response.data["code"] == "server_error"
    assert (detail in response.data["detail"]) if expose else (response.data["detail"] == detail)


@pytest.mark.django_db
def test_the_development_resolver_prefers_the_signed_in_user_then_headers():
    fran = User.objects.create_user("fran", password="x")
    signed_in = RequestFactory().get("/", HTTP_X_ACTOR_ID="user:mallory")
    signed_in.user = fran
    assert DevelopmentResolver().resolve(signed_in) == Actor(f"user:{fran.pk}")
    anonymous = RequestFactory().get("/", HTTP_X_ACTOR_ID="user:alice")
    anonymous.user = AnonymousUser()
    with override_settings(DEBUG=True):
        assert DevelopmentResolver().resolve(anonymous) == Actor("user:alice")
    dev = {"ACTOR_RESOLVER": "agent_core.actors.DevelopmentResolver", "AGENTS": []}
    with override_settings(DEBUG=False, AGENT=dev):
        assert [e.id for e in check_header_actor()] == ["agent_core.E004"]
