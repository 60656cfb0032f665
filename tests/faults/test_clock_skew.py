"""A host whose clock runs an hour ahead (libfaketime) reads every lease and deadline from the
database's clock: it takes over no healthy run, its sweeper re-drives none, and it expires no
request before its time (SPEC §20). Under load, in the production layout: one worker an hour
ahead, the other an hour behind, beat ahead, while runs are parked, approved, executing their
refunds and streaming."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.db.models.functions import Now

from agent_core.choices import CallStatus
from agent_core.engine import leases, runs
from agent_core.engine.dispatch import set_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from tests.conftest import ALICE, calls_of, refund
from tests.faults.layout import LEASE, SWEEP, Layout, running_layout
from tests.faults.load import (
    check_answers,
    check_decisions_and_effects,
    check_settled,
    fault_under_load,
    in_,
    target_of,
    unended_streams,
    until,
)
from tests.live.conftest import ALICE as HEADERS
from tests.live.conftest import start
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

# What the skewed host does: sweep, expire what is due, try to take the run's lease.
SKEWED_HOST = """
from agent_core.engine import leases
from agent_core.runner.sweep import stale_runs
from approvals.services import expire_due
print({run!r} in stale_runs(), expire_due(), leases.acquire({run!r}, "skewed") is None)
"""


def _faketime() -> Path:
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


def _skewed(library: Path, offset: str) -> dict[str, str]:
    """The environment of a host whose clock is ``offset`` from the others' (libfaketime)."""
    return {"LD_PRELOAD": str(library), "FAKETIME": offset, "FAKETIME_DONT_RESET": "1"}


@pytest.fixture(scope="module")
def skewed_layout() -> Iterator[Layout]:
    library = _faketime()
    home = Path(tempfile.mkdtemp(prefix="airlock-skew-"))
    hosts = {
        "w1": _skewed(library, "+1h"),
        "w2": _skewed(library, "-1h"),
        "beat": _skewed(library, "+1h"),
    }
    try:
        with running_layout(home, hosts, DEMO_REFUND_DELAY="1") as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


# A healthy driver's lease, live for ten minutes on the database's clock (an hour-ahead host's
# own clock would call it long gone), on a parked run set running: the run's prior state back.
HOLD = (
    "UPDATE agent_core_run r SET status = 'running', lease_owner = 'healthy',"
    " lease_token = r.lease_token + 1, lease_expires_at = now() + interval '10 minutes'"
    " FROM agent_core_run prior WHERE r.id = %(run)s AND prior.id = r.id"
    " RETURNING prior.status, prior.lease_owner, prior.lease_token, prior.lease_expires_at"
)
RELEASE = (
    "UPDATE agent_core_run SET status = %(status)s, lease_owner = %(owner)s,"
    " lease_token = %(token)s, lease_expires_at = %(expires)s WHERE id = %(run)s"
    " RETURNING id"
)


@pytest.mark.slow
def test_hosts_an_hour_apart_under_load(skewed_layout: Layout) -> None:
    layout = skewed_layout
    target = target_of(layout)
    with httpx.Client(base_url=layout.web, timeout=30) as client:
        expiring, held = (start(client, refund(50), HEADERS)["run_id"] for _ in range(2))
    both = in_([expiring, held])
    waiting = f"SELECT count(*) FROM agent_core_run WHERE status = 'waiting' AND id IN {both}"
    until("both runs park", lambda: layout.rows(waiting) == [(2,)])
    [(expiring_call,)] = layout.rows(
        "SELECT id FROM agent_core_toolcall WHERE run_id = %(run)s", {"run": expiring}
    )
    # A request due in ten minutes, swept all along by hosts an hour ahead and an hour behind.
    layout.rows(
        "UPDATE agent_core_toolcall SET expires_at = now() + interval '10 minutes'"
        " WHERE id = %(call)s RETURNING id",
        {"call": expiring_call},
    )
    [(status, owner, token, expires)] = layout.rows(HOLD, {"run": held})

    def offered_to_the_skewed_workers() -> None:
        for _ in range(3):  # each worker takes some: both queues, both workers
            for queue in ("agent.llm", "agent.tool"):
                layout.deliver(held, queue)
        time.sleep(LEASE + SWEEP + 2)  # past the lease: and the sweeps of the skewed hosts

    answers = fault_under_load(target, offered_to_the_skewed_workers)
    lease = "SELECT lease_owner, lease_token FROM agent_core_run WHERE id = %(run)s"
    assert layout.rows(lease, {"run": held}) == [("healthy", token + 1)]  # never taken over
    release = {"run": held, "status": status, "owner": owner, "token": token, "expires": expires}
    layout.rows(RELEASE, release)
    check_answers(answers)
    check_settled(target, answers, LEASE + SWEEP + 30)
    check_decisions_and_effects(target, answers)
    assert not unended_streams(target, answers.followers, LEASE + SWEEP + 30)
    expiry = "SELECT status FROM agent_core_toolcall WHERE id = %(call)s"
    assert layout.rows(expiry, {"call": expiring_call}) == [("pending_approval",)]
    # No healthy run was taken over mid-step: no call forced in doubt, no model text cut short.
    doubted = "SELECT count(*) FROM agent_core_toolcall WHERE status = 'in_doubt'"
    assert layout.rows(doubted) == [(0,)]
    cut_short = "SELECT count(*) FROM agent_core_streamframe WHERE superseded"
    assert layout.rows(cut_short) == [(0,)]
    assert layout.alive(), layout.tail()
