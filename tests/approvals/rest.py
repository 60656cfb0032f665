"""Calling the approvals REST API in process (DRF ``APIClient``), as a person."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent_core.actors import Actor, actor_for_user


def client_for(person: User | None) -> APIClient:
    client = APIClient()
    if person is not None:
        client.force_authenticate(person)
    return client


def actor(person: User) -> Actor:
    return actor_for_user(person)


def get(person: User, url: str, **params) -> tuple[int, dict]:
    response = client_for(person).get(url, params)
    return response.status_code, response.json()
