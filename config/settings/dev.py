"""Development and demo settings: DEBUG on, a fixed local secret."""

from __future__ import annotations

import os

from .base import *  # noqa: F403

DEBUG = os.environ.get("DEBUG", "1") == "1"
SECRET_KEY = SECRET_KEY or "dev-only-not-secret"  # noqa: F405
