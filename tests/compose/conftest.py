"""Fixtures of the composition tests: a turn of the ``desk`` test agent, driven inline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_core import runs
from agent_core.models import Run
from tests.conftest import ALICE


@pytest.fixture
def desk(
    shop: None, sync_runner: Any, django_capture_on_commit_callbacks: Any
) -> Callable[..., Run]:
    def start(message: str, *, agent: str = "desk") -> Run:
        with django_capture_on_commit_callbacks(execute=True):
            run = runs.start_run(agent=agent, message=message, actor=ALICE)
        run.refresh_from_db()
        return run

    return start
