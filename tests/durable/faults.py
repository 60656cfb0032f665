"""Fault injection for the Celery workers the crash tests start: a pause between two commits.

The test settings list this module in ``CELERY_IMPORTS``, so a worker imports it as it starts
(no other process does). It connects to the durable runner's ``step_ready`` and
``step_recorded`` signals and sleeps for as long as ``settings.TEST_PAUSES`` says for that moment
and kind of step, so that a test can SIGKILL the worker exactly there. ``Cluster.worker`` passes
the pauses as ``AIRLOCK_TEST_PAUSE_{BEFORE,AFTER}_{LLM,TOOL}``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings

from agent_core import signals

logger = logging.getLogger(__name__)


def _pause(moment: str, run_id: str, kind: str) -> None:
    delay = settings.TEST_PAUSES.get((moment, str(kind)))
    if delay:
        logger.info("pausing %s s %s a %s step of %s", delay, moment, kind, run_id)
        time.sleep(delay)


def before_step(sender: Any, *, run_id: str, kind: str, **kwargs: Any) -> None:
    _pause("before", run_id, kind)


def after_step(sender: Any, *, run_id: str, kind: str, **kwargs: Any) -> None:
    _pause("after", run_id, kind)


signals.step_ready.connect(before_step, dispatch_uid="tests.durable.faults.before_step")
signals.step_recorded.connect(after_step, dispatch_uid="tests.durable.faults.after_step")
