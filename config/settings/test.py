"""Test settings: real PostgreSQL and Redis from the environment, no real model calls."""

from __future__ import annotations

from .base import *  # noqa: F403

SECRET_KEY = "test-only-not-secret"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
