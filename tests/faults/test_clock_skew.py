"""A host whose clock runs an hour ahead (libfaketime) reads every lease and deadline from the
database's clock: it takes over no healthy run, its sweeper re-drives none, and it expires no
request before its time (SPEC §20)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models.functions import Now

from agent_core import leases, runs
from agent_core.choices import CallStatus
from agent_core.dispatch import set_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from tests.conftest import ALICE, calls_of, refund
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

# What the skewed host does: sweep, expire what is due, try to take the run's lease.
SKEWED_HOST = """
from agent_core import leases
from agent_core.runner.sweep import stale_runs
from approvals.services import expire_due
print({run!r} in stale_runs(), expire_due(), leases.acquire({run!r}, "skewed") is None)
"""


def _faketime() -> Path:
    if not LIBFAKETIME.exists() and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "faketime"], capture_output=True, check=False
        )
    if not LIBFAKETIME.exists():
        pytest.skip("libfaketime is not installed (Debian: apt-get install faketime)")
    return LIBFAKETIME


def test_a_host_an_hour_ahead_takes_no_lease_and_expires_nothing(shop: None) -> None:
    library = _faketime()
    set_runner(InlineRunner(workers=0))
    try:
        parked = runs.start_run(agent="support", message=refund(50), actor=ALICE)
    finally:
        set_runner(None)
    [call] = calls_of(parked)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=Now() + timedelta(minutes=15))
    held = runs.start_run(agent="support", message="hello", actor=ALICE)
    assert leases.acquire(held.pk, "healthy") is not None  # live for LEASE_SECONDS
    done = manage(
        "shell",
        "--no-imports",
        "-c",
        SKEWED_HOST.format(run=held.pk),
        LD_PRELOAD=str(library),
        FAKETIME="+1h",
        FAKETIME_DONT_RESET="1",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "0", "True"]
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL  # 15 minutes to go on the database's clock
