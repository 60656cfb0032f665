"""Test settings: real PostgreSQL and Redis from the environment, no real model calls."""

from __future__ import annotations

from .base import *  # noqa: F403

SECRET_KEY = "test-only-not-secret"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}

# No test reaches a real model vendor: unless a test points a provider at its own fake server,
# it talks to a closed local port (and the environment's OPENAI_* / ANTHROPIC_* are not used).
_NOWHERE = {"BASE_URL": "http://127.0.0.1:9", "API_KEY": "test-only"}
AGENT = {**AGENT, "OPENAI": _NOWHERE, "ANTHROPIC": _NOWHERE}  # noqa: F405
